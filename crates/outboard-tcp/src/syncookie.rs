//! SYN cookies (RFC 4987 §3.6): when the SYN queue is full the listener answers
//! statelessly and rebuilds the connection from the returning ACK.
//!
//! The 32-bit cookie (our ISN) is laid out as
//!
//! ```text
//!  31      27 26   24 23                                                0
//! +----------+-------+---------------------------------------------------+
//! | t mod 32 |  mss  | low 24 bits of SipHash(tuple, client ISN, t, mss) |
//! +----------+-------+---------------------------------------------------+
//! ```
//!
//! where `t` counts 64-second periods of `now`. The MAC covers the full `t`
//! and the MSS index, so neither clear field can be altered. A cookie is
//! accepted in its own period and the next one only: between 64 s and
//! 128 s of life. Options other than the MSS (window scale, SACK,
//! timestamps) are not encoded: a cookie connection runs without them.
use crate::isn::{tuple_bytes, TUPLE_LEN};
use crate::siphash::siphash24;
use outboard_time::Instant;
use outboard_wire::SeqNumber;
use std::net::SocketAddr;

/// What a cookie carries besides its proof of authenticity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieParams {
    /// The MSS to use, rounded down to one of a small table of values.
    pub mss: u16,
}

/// MSS values a cookie can carry (3 bits): the minimum (RFC 9293 §3.7.1),
/// common tunnel/IPv6-ish sizes, Ethernet's 1460, and a jumbo frame's.
pub const MSS_TABLE: [u16; 8] = [536, 1220, 1300, 1380, 1440, 1452, 1460, 8960];

/// Length of a time-counter period.
const PERIOD_NANOS: u64 = 64 * 1_000_000_000;
const COUNTER_BITS: u32 = 5;
const MSS_BITS: u32 = 3;
const MAC_BITS: u32 = 32 - COUNTER_BITS - MSS_BITS;
const MAC_MASK: u32 = (1 << MAC_BITS) - 1;

#[derive(Debug, Clone)]
pub struct SynCookies {
    secret: [u8; 16],
}

/// The index of the largest table MSS not above `mss` (index 0 if `mss` is below them all:
/// 536 is the floor every host must accept, RFC 9293 §3.7.1).
fn mss_index(mss: u16) -> usize {
    MSS_TABLE.iter().rposition(|&m| m <= mss).unwrap_or(0)
}

fn counter(now: Instant) -> u64 {
    now.as_nanos() / PERIOD_NANOS
}

impl SynCookies {
    pub fn new(secret: [u8; 16]) -> Self {
        SynCookies { secret }
    }

    fn mac(&self, local: SocketAddr, remote: SocketAddr, client_isn: SeqNumber, t: u64, idx: usize) -> u32 {
        // The tuple input is family-tagged (see `tuple_bytes`): a v4 and a v6 tuple never share a MAC input.
        let mut input = [0u8; TUPLE_LEN + 13];
        let (tuple, rest) = input.split_at_mut(TUPLE_LEN);
        tuple.copy_from_slice(&tuple_bytes(local, remote));
        rest[..4].copy_from_slice(&client_isn.0.to_be_bytes());
        rest[4..12].copy_from_slice(&t.to_be_bytes());
        rest[12] = idx as u8;
        siphash24(&self.secret, &input) as u32 & MAC_MASK
    }

    fn assemble(&self, local: SocketAddr, remote: SocketAddr, client_isn: SeqNumber, t: u64, idx: usize) -> u32 {
        let t_low = (t as u32) & ((1 << COUNTER_BITS) - 1);
        (t_low << (MSS_BITS + MAC_BITS)) | ((idx as u32) << MAC_BITS) | self.mac(local, remote, client_isn, t, idx)
    }

    /// The ISN to put in the SYN-ACK for a SYN with sequence `client_isn` offering `mss`.
    pub fn encode(&self, now: Instant, local: SocketAddr, remote: SocketAddr, client_isn: SeqNumber, mss: u16) -> SeqNumber {
        SeqNumber(self.assemble(local, remote, client_isn, counter(now), mss_index(mss)))
    }
    /// Checks the cookie returned in an ACK (`ack - 1`) for a SYN with sequence
    /// `client_isn` (`seq - 1`); `None` if forged or older than about two minutes.
    pub fn decode(&self, now: Instant, local: SocketAddr, remote: SocketAddr, client_isn: SeqNumber, cookie: SeqNumber) -> Option<CookieParams> {
        let cookie = cookie.0;
        let t_low = (cookie >> (MSS_BITS + MAC_BITS)) as u64;
        let idx = ((cookie >> MAC_BITS) & ((1 << MSS_BITS) - 1)) as usize;
        let now_t = counter(now);
        // The current period or the one before; their low bits differ, so at most one matches.
        let t = [Some(now_t), now_t.checked_sub(1)]
            .into_iter()
            .flatten()
            .find(|t| t & ((1 << COUNTER_BITS) - 1) == t_low)?;
        (self.assemble(local, remote, client_isn, t, idx) == cookie).then(|| CookieParams { mss: MSS_TABLE[idx] })
    }
}

#[cfg(test)]
mod tests;
