//! UDP (RFC 768) with the IPv4 pseudo-header checksum.

use crate::pseudo::PseudoAddr;

use crate::checksum::{self, Accumulator, PartialSum, RxChecksum, TxChecksum};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

pub const HEADER_LEN: usize = field::CHECKSUM.end;

const PROTO_UDP: u8 = 17;

/// A view of a UDP datagram. After `check_len`: the 8-byte header is present
/// and the length field is at least 8 and within the buffer (trailing bytes
/// are not payload). No accessor panics then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = usize::from(self.length());
        if l < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if l > len {
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
    /// The length field: header plus payload.
    pub fn length(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.length())]
    }
    fn header_sum<A: PseudoAddr>(&self, src: A, dst: A) -> Accumulator {
        let mut acc = Accumulator::new();
        A::add_pseudo_header(&mut acc, src, dst, PROTO_UDP, usize::from(self.length()));
        acc.add(&self.buffer.as_ref()[..HEADER_LEN]);
        acc
    }
    /// True if the checksum verifies or is zero ("no checksum", RFC 768).
    pub fn verify_checksum<A: PseudoAddr>(&self, src: A, dst: A) -> bool {
        self.verify_checksum_with(src, dst, checksum::sum(self.payload()))
    }
    /// [`verify_checksum`](Self::verify_checksum) with the payload summed
    /// elsewhere, e.g. by the [`checksum::copy_and_checksum`] that moved it.
    pub fn verify_checksum_with<A: PseudoAddr>(&self, src: A, dst: A, payload: PartialSum) -> bool {
        self.checksum() == 0 || self.header_sum(src, dst).add_partial(payload).finish() == 0
    }
}

/// A parsed UDP header; the payload travels separately.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
}

impl UdpRepr {
    /// Parses a checked datagram; with [`RxChecksum::Verify`] a wrong nonzero
    /// checksum is [`Error::Checksum`]. Destination port 0 is reserved and
    /// [`Error::Malformed`].
    pub fn parse<T: AsRef<[u8]>, A: PseudoAddr>(p: &UdpPacket<T>, src: A, dst: A, checksum: RxChecksum) -> Result<UdpRepr> {
        p.check_len()?;
        if p.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if checksum == RxChecksum::Verify && !p.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        Ok(UdpRepr { src_port: p.src_port(), dst_port: p.dst_port() })
    }

    /// Header bytes `emit` writes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes the header into the start of `buf` for a payload of
    /// `payload_len` bytes at `buf[HEADER_LEN..]`.
    ///
    /// With [`TxChecksum::Compute`] the payload must already be in `buf`;
    /// with `Payload(sum)` it is not read. A computed checksum of zero is sent
    /// as 0xFFFF, since zero means "none" (RFC 768).
    pub fn emit<A: PseudoAddr>(&self, buf: &mut [u8], src: A, dst: A, payload_len: usize, checksum: TxChecksum) -> Result<usize> {
        let total = HEADER_LEN + payload_len;
        let len = u16::try_from(total).map_err(|_| Error::Malformed)?;
        let need = if checksum == TxChecksum::Compute { total } else { HEADER_LEN };
        if buf.len() < need {
            return Err(Error::Truncated);
        }
        buf[field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        buf[field::DST_PORT].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[field::LENGTH].copy_from_slice(&len.to_be_bytes());
        buf[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let payload_sum = match checksum {
            TxChecksum::Omit => return Ok(HEADER_LEN),
            TxChecksum::Compute => checksum::sum(&buf[HEADER_LEN..total]),
            TxChecksum::Payload(s) => s,
        };
        let mut acc = Accumulator::new();
        A::add_pseudo_header(&mut acc, src, dst, PROTO_UDP, usize::from(len));
        acc.add(&buf[..HEADER_LEN]).add_partial(payload_sum);
        let c = match acc.finish() {
            0 => 0xffff,
            c => c,
        };
        buf[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests;
