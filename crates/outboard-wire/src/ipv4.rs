//! IPv4 headers (RFC 791), options skipped by IHL, fragment fields exposed.

use std::net::Ipv4Addr;

use crate::checksum::{self, RxChecksum};
use crate::{Error, Result};

/// The IPv4 protocol field (IANA "Assigned Internet Protocol Numbers").
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum IpProtocol {
    Icmp,
    Tcp,
    Udp,
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> IpProtocol {
        match v {
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            v => IpProtocol::Unknown(v),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(p: IpProtocol) -> u8 {
        match p {
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Unknown(v) => v,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::DST.end;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet.
///
/// After [`check_len`](Self::check_len): the buffer holds the 20-byte header,
/// the IHL is at least 5 and the options fit, and the total length covers the
/// header and fits in the buffer (bytes past it, e.g. Ethernet padding, are
/// not part of [`payload`](Self::payload)). No accessor panics then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>> {
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
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(Error::Malformed);
        }
        if total > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }
    pub fn total_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::TOTAL_LEN])
    }
    pub fn ident(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::IDENT])
    }
    fn flags_frag(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::FLAGS_FRAG])
    }
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }
    /// Fragment offset in bytes (the field counts 8-byte units, RFC 791 §3.1).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & FRAG_OFFSET_MASK) * 8
    }
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    /// The raw option bytes; Outboard never interprets them (RFC 1122 §3.2.1.8
    /// lets a host ignore options it does not implement), only skips them.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }
    /// True if the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }
    /// The bytes between the header and the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the TTL and patches the header checksum incrementally (RFC 1624),
    /// as a forwarder would after decrementing it.
    pub fn set_ttl(&mut self, ttl: u8) {
        let b = self.buffer.as_mut();
        let old = be16(&b[field::TTL..field::TTL + 2]);
        b[field::TTL] = ttl;
        let new = be16(&b[field::TTL..field::TTL + 2]);
        let hc = checksum::update(be16(&b[field::CHECKSUM]), old, new);
        b[field::CHECKSUM].copy_from_slice(&hc.to_be_bytes());
    }
    /// Recomputes the header checksum over the whole header, options included.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&b[..hl]);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, total) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[hl..total]
    }
}

/// A parsed IPv4 header. Options are not kept; `emit` writes none.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Ipv4Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: IpProtocol,
    /// Bytes after the header (total length minus header length).
    pub payload_len: usize,
    pub ttl: u8,
    /// The DSCP (high six bits) and ECN (low two bits) byte.
    pub dscp_ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// Fragment offset in bytes; a multiple of 8 below 65536.
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// Parses a checked packet. Version other than 4 is [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>, checksum: RxChecksum) -> Result<Ipv4Repr> {
        p.check_len()?;
        if p.version() != 4 {
            return Err(Error::Unsupported);
        }
        if checksum == RxChecksum::Verify && !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Self::from_header(p, usize::from(p.total_len()) - p.header_len()))
    }

    /// Parses the datagram quoted in an ICMP error (RFC 792 quotes the
    /// "Internet Header plus 64 bits of Original Data Datagram"): its total length usually exceeds
    /// the bytes present, and its checksum is not verified (a router may have
    /// changed the TTL). Returns the header and the quoted payload bytes, at
    /// most `payload_len` of them.
    pub fn parse_quoted(bytes: &[u8]) -> Result<(Ipv4Repr, &[u8])> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Ipv4Packet::new_unchecked(bytes);
        let hl = p.header_len();
        if hl < HEADER_LEN || usize::from(p.total_len()) < hl {
            return Err(Error::Malformed);
        }
        if hl > bytes.len() {
            return Err(Error::Truncated);
        }
        if p.version() != 4 {
            return Err(Error::Unsupported);
        }
        let payload_len = usize::from(p.total_len()) - hl;
        let end = bytes.len().min(hl + payload_len);
        Ok((Self::from_header(&p, payload_len), &bytes[hl..end]))
    }

    fn from_header<T: AsRef<[u8]>>(p: &Ipv4Packet<T>, payload_len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len,
            ttl: p.ttl(),
            dscp_ecn: p.dscp_ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
        }
    }

    /// True if this is a fragment of a larger datagram (RFC 791 §2.3).
    pub fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// Header bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header with its checksum into the start of `buf`; the
    /// payload goes at `buf[HEADER_LEN..]`. [`Error::Malformed`] if the
    /// fragment offset is not a multiple of 8 or the total length exceeds 65535.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        let total = u16::try_from(HEADER_LEN + self.payload_len).map_err(|_| Error::Malformed)?;
        if self.frag_offset & 7 != 0 {
            return Err(Error::Malformed);
        }
        let flags_frag = (self.frag_offset / 8)
            | if self.dont_frag { FLAG_DF } else { 0 }
            | if self.more_frags { FLAG_MF } else { 0 };
        b[field::VER_IHL] = 0x45;
        b[field::DSCP_ECN] = self.dscp_ecn;
        b[field::TOTAL_LEN].copy_from_slice(&total.to_be_bytes());
        b[field::IDENT].copy_from_slice(&self.ident.to_be_bytes());
        b[field::FLAGS_FRAG].copy_from_slice(&flags_frag.to_be_bytes());
        b[field::TTL] = self.ttl;
        b[field::PROTOCOL] = u8::from(self.protocol);
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        b[field::SRC].copy_from_slice(&self.src_addr.octets());
        b[field::DST].copy_from_slice(&self.dst_addr.octets());
        let c = checksum::checksum(b);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests;
