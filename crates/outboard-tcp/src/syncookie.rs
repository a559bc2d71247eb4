//! SYN cookies (RFC 4987 §3.6): when the SYN queue is full the listener answers
//! statelessly and rebuilds the connection from the returning ACK.
//! STUB: being written.
use outboard_time::Instant;
use outboard_wire::SeqNumber;
use std::net::SocketAddrV4;

/// What a cookie carries besides its proof of authenticity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieParams {
    /// The MSS to use, rounded down to one of a small table of values.
    pub mss: u16,
}

#[derive(Debug, Clone)]
pub struct SynCookies {
    _todo: (),
}

impl SynCookies {
    pub fn new(secret: [u8; 16]) -> Self {
        let _ = secret;
        todo!()
    }
    /// The ISN to put in the SYN-ACK for a SYN with sequence `client_isn` offering `mss`.
    pub fn encode(&self, now: Instant, local: SocketAddrV4, remote: SocketAddrV4, client_isn: SeqNumber, mss: u16) -> SeqNumber {
        let _ = (now, local, remote, client_isn, mss);
        todo!()
    }
    /// Checks the cookie returned in an ACK (`ack - 1`) for a SYN with sequence
    /// `client_isn` (`seq - 1`); `None` if forged or older than about two minutes.
    pub fn decode(&self, now: Instant, local: SocketAddrV4, remote: SocketAddrV4, client_isn: SeqNumber, cookie: SeqNumber) -> Option<CookieParams> {
        let _ = (now, local, remote, client_isn, cookie);
        todo!()
    }
}
