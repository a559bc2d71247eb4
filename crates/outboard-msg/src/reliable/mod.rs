//! The reliable-message service: exactly once, in order, per (sending
//! mailbox, receiving mailbox) pair.
//!
//! A *flow* carries one sender mailbox's messages to one receiver mailbox.
//! Each message is cut into frames numbered from 1 in the flow; the receiver
//! acknowledges cumulatively with a 64-frame SACK bitmap and grants *credit*
//! (frames the sender may send at and above the cumulative ack), reserved in
//! the receiving mailbox's byte budget, so a sender never overruns a
//! receiver's mailbox. Flows have *incarnations*: a sender that gave up on a
//! flow (or dropped its idle state) starts the next one with a higher
//! incarnation number, and the receiver then forgets the old one.
//!
//! Congestion control is the TCP crate's (CUBIC by default, bytes counted as
//! TCP's with ABC, RFC 5681 recovery): a reliable-message flow then takes the
//! share of a path that one Linux TCP flow would. Loss is found from the SACK
//! bitmap (a frame is lost when a frame 3 above it has arrived, RFC 6675's
//! DupThresh in frames) or by the RTO (RFC 6298 estimator, Karn's rule); a
//! retransmitted frame is recovered only by the RTO.

pub(crate) mod recv;
pub(crate) mod send;

/// Frames a sender may send on a new flow before the receiver's first credit.
pub const INITIAL_CREDIT: u64 = 16;
/// Frames above a hole that mark it lost.
pub(crate) const DUPTHRESH: u64 = 3;
/// Frames the SACK bitmap covers above the cumulative ack.
pub(crate) const SACK_BITS: u64 = 64;
