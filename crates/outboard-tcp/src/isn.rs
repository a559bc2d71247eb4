//! RFC 6528 initial sequence numbers: ISN = M + F(4-tuple, secret), M a 4 µs clock.
//! STUB: being written.
use outboard_time::Instant;
use outboard_wire::SeqNumber;
use std::net::SocketAddrV4;

#[derive(Debug, Clone)]
pub struct IsnGenerator {
    _todo: (),
}

impl IsnGenerator {
    /// `secret` comes from the engine's random source at start.
    pub fn new(secret: [u8; 16]) -> Self {
        let _ = secret;
        todo!()
    }
    pub fn isn(&self, now: Instant, local: SocketAddrV4, remote: SocketAddrV4) -> SeqNumber {
        let _ = (now, local, remote);
        todo!()
    }
}
