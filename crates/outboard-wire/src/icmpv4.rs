//! ICMPv4 (RFC 792): echo, destination unreachable (with RFC 1191's
//! next-hop MTU for "fragmentation needed") and time exceeded.

use crate::checksum::{self, RxChecksum};
use crate::ipv4::Ipv4Repr;
use crate::{Error, Result};

/// ICMP message types this crate parses (RFC 792).
pub mod msg_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DST_UNREACHABLE: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
}

/// Destination-unreachable codes (RFC 792, RFC 1122 §3.2.2.1, RFC 1812 §5.2.7.1).
/// A newtype, not an enum, so that every code round-trips.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct UnreachableCode(pub u8);

impl UnreachableCode {
    pub const NET: UnreachableCode = UnreachableCode(0);
    pub const HOST: UnreachableCode = UnreachableCode(1);
    pub const PROTOCOL: UnreachableCode = UnreachableCode(2);
    pub const PORT: UnreachableCode = UnreachableCode(3);
    /// Fragmentation needed and DF set; carries the next-hop MTU (RFC 1191 §4).
    pub const FRAG_NEEDED: UnreachableCode = UnreachableCode(4);
    pub const SOURCE_ROUTE_FAILED: UnreachableCode = UnreachableCode(5);
    pub const NET_UNKNOWN: UnreachableCode = UnreachableCode(6);
    pub const HOST_UNKNOWN: UnreachableCode = UnreachableCode(7);
    pub const NET_PROHIBITED: UnreachableCode = UnreachableCode(9);
    pub const HOST_PROHIBITED: UnreachableCode = UnreachableCode(10);
    pub const ADMIN_PROHIBITED: UnreachableCode = UnreachableCode(13);

    /// Whether the code means the destination will not take this transport
    /// at all. RFC 1122 §4.2.3.9 calls codes 2-4 hard errors and 0, 1, 5 soft;
    /// code 4 (fragmentation needed) is left out here because path MTU
    /// discovery (RFC 1191) handles it. RFC 5461 lets TCP treat even hard
    /// errors as soft once the connection is synchronized.
    pub fn is_hard(self) -> bool {
        matches!(self, Self::PROTOCOL | Self::PORT)
    }
}

/// Time-exceeded codes (RFC 792).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TimeExceededCode(pub u8);

impl TimeExceededCode {
    pub const TTL_IN_TRANSIT: TimeExceededCode = TimeExceededCode(0);
    pub const REASSEMBLY: TimeExceededCode = TimeExceededCode(1);
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    // Echo.
    pub const IDENT: Range<usize> = 4..6;
    pub const SEQ_NO: Range<usize> = 6..8;
    // Destination unreachable, code 4 (RFC 1191 §4).
    pub const NEXT_HOP_MTU: Range<usize> = 6..8;
    pub const DATA: RangeFrom<usize> = 8..;
}

/// Length of the fixed ICMP header (type, code, checksum, four more bytes).
pub const HEADER_LEN: usize = field::DATA.start;

/// Bytes of the offending datagram's payload an error must quote (RFC 792:
/// "Internet Header + 64 bits of Original Data Datagram").
pub const QUOTED_PAYLOAD_MIN: usize = 8;

/// A view of an ICMPv4 message; after `check_len` (8 bytes) no accessor panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Icmpv4Packet<T> {
        Icmpv4Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Icmpv4Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }
    /// Echo identifier (echo request/reply only).
    pub fn ident(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::IDENT])
    }
    /// Echo sequence number (echo request/reply only).
    pub fn seq_no(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SEQ_NO])
    }
    /// Next-hop MTU (destination unreachable, code 4 only; RFC 1191 §4).
    pub fn next_hop_mtu(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::NEXT_HOP_MTU])
    }
    /// Everything after the 8-byte header: echo data, or the quoted datagram.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }
    /// The checksum covers the whole message (RFC 792).
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.buffer.as_ref()) == 0
    }
}

/// A parsed ICMPv4 message, borrowing its data from the packet.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Icmpv4Repr<'a> {
    EchoRequest { ident: u16, seq_no: u16, data: &'a [u8] },
    EchoReply { ident: u16, seq_no: u16, data: &'a [u8] },
    /// `next_hop_mtu` is meaningful for [`UnreachableCode::FRAG_NEEDED`] only
    /// and zero otherwise (the field is "unused" and must be zero, RFC 792).
    /// `invoking` is the quoted datagram as received: its IP header (options
    /// included) and at least 8 payload bytes; see [`Icmpv4Repr::quoted`].
    DstUnreachable { code: UnreachableCode, next_hop_mtu: u16, invoking: &'a [u8] },
    TimeExceeded { code: TimeExceededCode, invoking: &'a [u8] },
}

impl<'a> Icmpv4Repr<'a> {
    /// Parses a message. Types other than echo, destination unreachable and
    /// time exceeded are [`Error::Unsupported`]; an error message whose quoted
    /// datagram is not an IPv4 header plus 8 bytes is [`Error::Malformed`]
    /// (RFC 1122 §3.2.2: the quote is how the error finds its connection).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Icmpv4Packet<&'a T>, checksum: RxChecksum) -> Result<Icmpv4Repr<'a>> {
        p.check_len()?;
        if checksum == RxChecksum::Verify && !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        let data = &T::as_ref(p.buffer)[field::DATA];
        match p.msg_type() {
            // The echo code is always 0; a receiver need not check it.
            msg_type::ECHO_REQUEST => Ok(Icmpv4Repr::EchoRequest { ident: p.ident(), seq_no: p.seq_no(), data }),
            msg_type::ECHO_REPLY => Ok(Icmpv4Repr::EchoReply { ident: p.ident(), seq_no: p.seq_no(), data }),
            msg_type::DST_UNREACHABLE => {
                check_quoted(data)?;
                let code = UnreachableCode(p.code());
                let next_hop_mtu = if code == UnreachableCode::FRAG_NEEDED { p.next_hop_mtu() } else { 0 };
                Ok(Icmpv4Repr::DstUnreachable { code, next_hop_mtu, invoking: data })
            }
            msg_type::TIME_EXCEEDED => {
                check_quoted(data)?;
                Ok(Icmpv4Repr::TimeExceeded { code: TimeExceededCode(p.code()), invoking: data })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// For an error message, the quoted datagram's header and the payload
    /// bytes present (at least the first 8: the TCP/UDP ports and, for TCP,
    /// the sequence number). `None` for echo, or if the quote does not parse.
    pub fn quoted(&self) -> Option<(Ipv4Repr, &'a [u8])> {
        match *self {
            Icmpv4Repr::DstUnreachable { invoking, .. } | Icmpv4Repr::TimeExceeded { invoking, .. } => {
                Ipv4Repr::parse_quoted(invoking).ok()
            }
            _ => None,
        }
    }

    /// Bytes `emit` writes: the 8-byte header and the data.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match *self {
                Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => data.len(),
                Icmpv4Repr::DstUnreachable { invoking, .. } | Icmpv4Repr::TimeExceeded { invoking, .. } => {
                    invoking.len()
                }
            }
    }

    /// Writes the whole message, with its checksum, into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let (ty, code, rest, data): (u8, u8, [u8; 4], &[u8]) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, data } => (msg_type::ECHO_REQUEST, 0, echo_rest(ident, seq_no), data),
            Icmpv4Repr::EchoReply { ident, seq_no, data } => (msg_type::ECHO_REPLY, 0, echo_rest(ident, seq_no), data),
            Icmpv4Repr::DstUnreachable { code, next_hop_mtu, invoking } => {
                let mtu = if code == UnreachableCode::FRAG_NEEDED { next_hop_mtu } else { 0 };
                let m = mtu.to_be_bytes();
                (msg_type::DST_UNREACHABLE, code.0, [0, 0, m[0], m[1]], invoking)
            }
            Icmpv4Repr::TimeExceeded { code, invoking } => (msg_type::TIME_EXCEEDED, code.0, [0; 4], invoking),
        };
        b[field::TYPE] = ty;
        b[field::CODE] = code;
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        b[4..8].copy_from_slice(&rest);
        b[field::DATA].copy_from_slice(data);
        let c = checksum::checksum(b);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        Ok(len)
    }
}

fn echo_rest(ident: u16, seq_no: u16) -> [u8; 4] {
    let (i, s) = (ident.to_be_bytes(), seq_no.to_be_bytes());
    [i[0], i[1], s[0], s[1]]
}

fn check_quoted(data: &[u8]) -> Result<()> {
    match Ipv4Repr::parse_quoted(data) {
        // A datagram shorter than 8 payload bytes is quoted whole.
        Ok((ip, payload)) if payload.len() >= QUOTED_PAYLOAD_MIN.min(ip.payload_len) => Ok(()),
        _ => Err(Error::Malformed),
    }
}

#[cfg(test)]
mod tests;
