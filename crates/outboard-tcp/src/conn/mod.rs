//! The RFC 9293 connection state machine.
//!
//! Call order (quinn style): feed inputs with `handle_segment`, `handle_timeout`,
//! `handle_icmp`, `send`/`recv`/`shutdown_write`/`close`/`abort`; then drain
//! `poll_transmit` until `None`, read `poll_event` until `None`, and arm a
//! timer for `poll_timeout`.
//! STUB: signatures are the contract; bodies are being written.

use crate::config::Config;
use outboard_time::Instant;
use outboard_wire::{SeqNumber, TcpRepr};
use std::net::SocketAddrV4;

/// The connection's addresses, from our side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FourTuple {
    pub local: SocketAddrV4,
    pub remote: SocketAddrV4,
}

/// RFC 9293 §3.3.2 states (LISTEN lives in `table`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Closed,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

/// What the application should hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// New bytes can be read.
    Readable,
    /// Send buffer space opened up.
    Writable,
    /// The peer sent FIN: reads return end-of-stream once drained.
    PeerClosed,
    /// Both directions closed normally (the connection may still sit in TIME-WAIT).
    Closed,
    /// The peer reset the connection (ECONNRESET, or ECONNREFUSED in SYN-SENT).
    Reset,
    /// Retransmissions or keepalives exhausted (ETIMEDOUT).
    TimedOut,
}

/// ICMP errors that concern a connection (RFC 1122 §4.2.3.9, RFC 1191).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpError {
    /// Fragmentation needed with the next-hop MTU: lowers the MSS.
    FragmentationNeeded { mtu: u16 },
    /// Destination unreachable (soft error unless in SYN-SENT with a hard code).
    Unreachable { code: u8 },
    TimeExceeded,
}

/// A segment to send: header plus payload borrowed from the send queue in at
/// most two pieces, so the caller copies it once into the frame with the checksum.
#[derive(Debug)]
pub struct Transmit<'a> {
    pub repr: TcpRepr,
    pub payload: [&'a [u8]; 2],
}

impl Transmit<'_> {
    pub fn payload_len(&self) -> usize {
        self.payload[0].len() + self.payload[1].len()
    }
}

/// Counters readable from outside (`outboard stat`, TCP_INFO).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConnStats {
    pub segments_in: u64,
    pub segments_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub retransmits: u64,
    pub retransmitted_bytes: u64,
    pub rto_events: u64,
    pub fast_retransmits: u64,
    pub srtt_us: u64,
    pub rttvar_us: u64,
    pub rto_us: u64,
    pub cwnd: usize,
    pub ssthresh: usize,
    pub sacked_bytes: usize,
    pub bytes_in_flight: usize,
    pub send_mss: usize,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub send_queue: usize,
    pub recv_queue: usize,
    pub ooo_ranges: usize,
    pub dup_segments_in: u64,
    pub dropped_segments: u64,
    pub challenge_acks: u64,
}

#[derive(Debug)]
pub struct Connection {
    _todo: (),
}

/// Errors from the application-side calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Nothing to read / no room to write right now.
    WouldBlock,
    /// Writing after shutdown_write/close (EPIPE).
    Closed,
    /// The connection was reset (ECONNRESET / ECONNREFUSED).
    Reset,
    TimedOut,
    /// Not yet established.
    NotConnected,
}

#[allow(unused_variables)]
impl Connection {
    /// Active open: SYN-SENT; the first `poll_transmit` yields the SYN.
    pub fn connect(cfg: &Config, tuple: FourTuple, iss: SeqNumber, now: Instant) -> Connection {
        todo!()
    }
    /// Passive open from a listener that accepted `syn`: SYN-RECEIVED; the first `poll_transmit` yields the SYN-ACK.
    pub fn accept(cfg: &Config, tuple: FourTuple, syn: &TcpRepr, iss: SeqNumber, now: Instant) -> Connection {
        todo!()
    }
    /// A connection rebuilt from a valid SYN-cookie ACK: ESTABLISHED at once.
    /// `iss` is our cookie ISN, `irs` the peer's ISN, `mss` the MSS the cookie carried.
    /// The ACK itself (which may carry data) must then be fed with `handle_segment`.
    pub fn from_cookie(cfg: &Config, tuple: FourTuple, iss: SeqNumber, irs: SeqNumber, mss: u16, ack: &TcpRepr, now: Instant) -> Connection {
        todo!()
    }
    pub fn handle_segment(&mut self, now: Instant, repr: &TcpRepr, payload: &[u8]) {
        todo!()
    }
    pub fn handle_icmp(&mut self, now: Instant, err: IcmpError) {
        todo!()
    }
    pub fn handle_timeout(&mut self, now: Instant) {
        todo!()
    }
    /// The earliest instant at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!()
    }
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<'_>> {
        todo!()
    }
    pub fn poll_event(&mut self) -> Option<Event> {
        todo!()
    }
    /// Queues bytes for sending; returns how many fit.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Error> {
        todo!()
    }
    /// Reads in-order bytes. `Ok(0)` only at end of stream (peer FIN, all read).
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        todo!()
    }
    /// Bytes ready to read.
    pub fn recv_available(&self) -> usize {
        todo!()
    }
    /// Free space in the send queue.
    pub fn send_capacity(&self) -> usize {
        todo!()
    }
    /// Half close: send FIN after the queued data.
    pub fn shutdown_write(&mut self) {
        todo!()
    }
    /// Full close (RFC 9293 §3.10.4); data arriving afterwards is answered with RST.
    pub fn close(&mut self) {
        todo!()
    }
    /// Abort: send RST and go to CLOSED (RFC 9293 §3.10.5).
    pub fn abort(&mut self) {
        todo!()
    }
    pub fn state(&self) -> State {
        todo!()
    }
    pub fn tuple(&self) -> FourTuple {
        todo!()
    }
    pub fn stats(&self) -> ConnStats {
        todo!()
    }
    /// True once the connection is CLOSED and holds nothing: the table may free it.
    pub fn is_finished(&self) -> bool {
        todo!()
    }
}
