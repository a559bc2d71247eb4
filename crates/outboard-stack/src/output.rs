//! The transmit path.
use crate::{Stack, StackError};
use outboard_time::Instant;
use std::net::SocketAddrV4;

impl Stack {
    pub(crate) fn next_frame(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let _ = (now, buf);
        None
    }
    pub(crate) fn udp_output(&mut self, now: Instant, src_port: u16, dst: SocketAddrV4, data: &[u8]) -> Result<(), StackError> {
        let _ = (now, src_port, dst, data);
        Err(StackError::MessageTooLong)
    }
}
