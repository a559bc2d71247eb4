//! The TCP header view (RFC 9293 §3.1).

use crate::checksum::{self, Accumulator, PartialSum};
use crate::pseudo::PseudoAddr;
use crate::seq::SeqNumber;
use crate::tcp::TcpFlags;
use crate::{Error, Result};

pub(crate) mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of the header without options.
pub const HEADER_LEN: usize = field::URGENT.end;

pub(crate) const PROTO_TCP: u8 = 6;

/// A view of a TCP segment: the whole IP payload (TCP has no length field).
///
/// After [`check_len`](Self::check_len): the 20-byte header is present, the
/// data offset is at least 5 and the options fit in the buffer. No accessor
/// panics then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    pub const fn new_unchecked(buffer: T) -> TcpPacket<T> {
        TcpPacket { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<TcpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if hl > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn src_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SRC_PORT])
    }
    pub fn dst_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::DST_PORT])
    }
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(be32(&self.buffer.as_ref()[field::SEQ]))
    }
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(be32(&self.buffer.as_ref()[field::ACK]))
    }
    /// Header length in bytes (data offset × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }
    /// The eight control bits (CWR … FIN). The reserved bits and the old
    /// NS bit (RFC 3540, historic) are ignored.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS])
    }
    /// The window field as sent (unscaled).
    pub fn window_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::WINDOW])
    }
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }
    pub fn urgent_at(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::URGENT])
    }
    /// The raw option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
    /// True if the checksum over pseudo-header, header and payload verifies.
    pub fn verify_checksum<A: PseudoAddr>(&self, src: A, dst: A) -> bool {
        self.verify_checksum_with(src, dst, checksum::sum(self.payload()))
    }
    /// [`verify_checksum`](Self::verify_checksum) with the payload summed
    /// elsewhere, e.g. by the [`checksum::copy_and_checksum`] that moved it
    /// to the application: the receive side of the one-copy data path.
    pub fn verify_checksum_with<A: PseudoAddr>(&self, src: A, dst: A, payload: PartialSum) -> bool {
        let b = self.buffer.as_ref();
        // A segment longer than 65535 bytes cannot come from an IPv4 packet
        // (nor from an IPv6 one without a jumbogram, which we do not take).
        let Ok(len) = u16::try_from(b.len()) else { return false };
        let mut acc = Accumulator::new();
        A::add_pseudo_header(&mut acc, src, dst, PROTO_TCP, usize::from(len));
        acc.add(&b[..self.header_len()]).add_partial(payload);
        acc.finish() == 0
    }
}
