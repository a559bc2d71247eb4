//! IPv6 headers (RFC 8200 §3), the extension-header walk a host does on
//! receive (RFC 8200 §4), the fragment header (§4.5), and the pseudo-header
//! for upper-layer checksums (§8.1).
//!
//! The walk ([`walk_extensions`]) is what a host, not a router, needs: it
//! skips Hop-by-Hop and Destination Options (processing each option's
//! "action" bits, §4.2), ignores a Routing header whose Segments Left is zero
//! and answers any other with a Parameter Problem (§4.4; type 0 is deprecated
//! by RFC 5095 and treated as unrecognized), reports the Fragment header to
//! the caller for reassembly, and stops at the upper-layer header. Each
//! failure says exactly what §4 says to do: discard silently, or discard and
//! send an ICMPv6 Parameter Problem with a code and a pointer.

use std::net::Ipv6Addr;

use crate::checksum::Accumulator;
use crate::{Error, Result};

/// Next Header values (IANA "Assigned Internet Protocol Numbers").
pub mod next_header {
    pub const HOP_BY_HOP: u8 = 0;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const NO_NEXT: u8 = 59;
    pub const DST_OPTS: u8 = 60;
}

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::DST.end;

/// The minimum link MTU every IPv6 link must carry (RFC 8200 §5).
pub const MIN_MTU: usize = 1280;

pub(crate) fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

pub(crate) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The IPv6 address in the first 16 bytes of `b`.
pub(crate) fn addr(b: &[u8]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o.copy_from_slice(&b[..16]);
    Ipv6Addr::from(o)
}

/// A view of an IPv6 packet.
///
/// After [`check_len`](Self::check_len): the buffer holds the 40-byte header
/// and the payload length fits in it (bytes past it, e.g. Ethernet padding,
/// are not part of [`payload`](Self::payload)). No accessor panics then.
/// Jumbograms (RFC 2675, payload length 0 with a Jumbo option) are not
/// supported: a payload length of 0 means an empty payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn ver_tc_flow(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::VER_TC_FLOW])
    }
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }
    /// The traffic class: DSCP (high six bits) and ECN (low two bits), as IPv4's second byte.
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }
    pub fn payload_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::PAYLOAD_LEN])
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    pub fn src_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::SRC])
    }
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::DST])
    }
    /// The bytes after the fixed header, extension headers included, up to the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// IPv6 has no header checksum: a forwarder just writes the new hop limit.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A parsed fixed IPv6 header. Extension headers are in the payload; see [`walk_extensions`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Ipv6Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    /// The first Next Header: an extension header or the upper-layer protocol.
    pub next_header: u8,
    /// Bytes after the fixed header, extension headers included.
    pub payload_len: usize,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// 20 bits.
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parses a checked packet. A version other than 6 is [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        p.check_len()?;
        if p.version() != 6 {
            return Err(Error::Unsupported);
        }
        Ok(Self::from_header(p, usize::from(p.payload_len())))
    }

    /// Parses the packet quoted in an ICMPv6 error (RFC 4443 §3: "as much of
    /// invoking packet as possible without the ICMPv6 packet exceeding the
    /// minimum IPv6 MTU"): its payload length usually exceeds the bytes
    /// present. Returns the header and the quoted payload bytes, at most
    /// `payload_len` of them.
    pub fn parse_quoted(bytes: &[u8]) -> Result<(Ipv6Repr, &[u8])> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Ipv6Packet::new_unchecked(bytes);
        if p.version() != 6 {
            return Err(Error::Unsupported);
        }
        let payload_len = usize::from(p.payload_len());
        let end = bytes.len().min(HEADER_LEN + payload_len);
        Ok((Self::from_header(&p, payload_len), &bytes[HEADER_LEN..end]))
    }

    fn from_header<T: AsRef<[u8]>>(p: &Ipv6Packet<T>, payload_len: usize) -> Ipv6Repr {
        Ipv6Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len,
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        }
    }

    /// Header bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 40-byte header into the start of `buf`; the payload goes at
    /// `buf[HEADER_LEN..]`. [`Error::Malformed`] if the payload exceeds 65535
    /// bytes or the flow label 20 bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        let len = u16::try_from(self.payload_len).map_err(|_| Error::Malformed)?;
        if self.flow_label > 0x000f_ffff {
            return Err(Error::Malformed);
        }
        let vtf = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | self.flow_label;
        b[field::VER_TC_FLOW].copy_from_slice(&vtf.to_be_bytes());
        b[field::PAYLOAD_LEN].copy_from_slice(&len.to_be_bytes());
        b[field::NEXT_HEADER] = self.next_header;
        b[field::HOP_LIMIT] = self.hop_limit;
        b[field::SRC].copy_from_slice(&self.src_addr.octets());
        b[field::DST].copy_from_slice(&self.dst_addr.octets());
        Ok(HEADER_LEN)
    }
}

/// Adds the IPv6 pseudo-header for TCP, UDP and ICMPv6 (RFC 8200 §8.1):
/// source, destination, the upper-layer packet length as 32 bits, three zero
/// bytes and the upper-layer protocol. `len` is the length of the upper-layer
/// header and data, extension headers before it excluded.
pub fn add_pseudo_header(acc: &mut Accumulator, src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: u32) {
    let mut b = [0u8; 40];
    b[0..16].copy_from_slice(&src.octets());
    b[16..32].copy_from_slice(&dst.octets());
    b[32..36].copy_from_slice(&len.to_be_bytes());
    b[39] = next_header;
    acc.add(&b);
}

/// ICMPv6 Parameter Problem codes (RFC 4443 §3.4).
pub mod param_problem {
    pub const ERRONEOUS_HEADER_FIELD: u8 = 0;
    pub const UNRECOGNIZED_NEXT_HEADER: u8 = 1;
    pub const UNRECOGNIZED_OPTION: u8 = 2;
}

/// Why [`walk_extensions`] stopped without reaching an upper layer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ExtError {
    /// An extension header's length runs past the payload: discard.
    Truncated,
    /// Discard the packet silently (an unrecognized option whose action bits are 01, §4.2).
    Discard,
    /// Discard and, unless `only_if_unicast` and the destination was multicast,
    /// send an ICMPv6 Parameter Problem with this `code` and `pointer` (the
    /// offset of the offending byte from the start of the IPv6 header).
    ParamProblem { code: u8, pointer: u32, only_if_unicast: bool },
}

/// The Fragment header (RFC 8200 §4.5).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FragmentHeader {
    /// The Next Header of the fragmentable part (the same in every fragment).
    pub next_header: u8,
    /// Offset of this fragment's data in bytes; a multiple of 8.
    pub offset: u16,
    pub more: bool,
    pub ident: u32,
}

/// Length of a Fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 8;

impl FragmentHeader {
    pub fn parse(b: &[u8]) -> Result<FragmentHeader> {
        let b = b.get(..FRAGMENT_HEADER_LEN).ok_or(Error::Truncated)?;
        let off_m = be16(&b[2..4]);
        Ok(FragmentHeader { next_header: b[0], offset: off_m & !7, more: off_m & 1 != 0, ident: be32(&b[4..8]) })
    }
    /// True for an "atomic fragment" (offset 0, no more fragments): RFC 6946
    /// says to process it in isolation, not through reassembly.
    pub fn is_atomic(&self) -> bool {
        self.offset == 0 && !self.more
    }
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = buf.get_mut(..FRAGMENT_HEADER_LEN).ok_or(Error::Truncated)?;
        if self.offset & 7 != 0 {
            return Err(Error::Malformed);
        }
        b[0] = self.next_header;
        b[1] = 0;
        b[2..4].copy_from_slice(&(self.offset | u16::from(self.more)).to_be_bytes());
        b[4..8].copy_from_slice(&self.ident.to_be_bytes());
        Ok(FRAGMENT_HEADER_LEN)
    }
}

/// Where the extension-header chain of a packet ends.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ExtWalk {
    /// The upper-layer protocol (TCP, UDP, ICMPv6, ...), or [`next_header::NO_NEXT`],
    /// ESP or AH, which this walk does not look into.
    pub upper: u8,
    /// Offset of the upper-layer header within the IPv6 payload.
    pub upper_offset: usize,
    /// Offset from the IPv6 header start of the Next Header field that named
    /// `upper` (the pointer of a Parameter Problem for an unrecognized one).
    pub upper_ptr: u32,
    /// The Fragment header, if the packet is a fragment, and its offset in the payload.
    pub fragment: Option<(FragmentHeader, usize)>,
}

/// Walks the extension headers of an IPv6 payload (RFC 8200 §4) as a host
/// does, from the fixed header's `first` Next Header. Stops at the first
/// header that is not Hop-by-Hop, Routing, Destination Options or Fragment;
/// after a Fragment header with a nonzero offset the rest is fragment data
/// and is not walked.
pub fn walk_extensions(first: u8, payload: &[u8]) -> core::result::Result<ExtWalk, ExtError> {
    let mut nh = first;
    let mut off = 0usize;
    let mut fragment = None;
    // Offset from the IPv6 header start of the Next Header field that named `nh`.
    let mut nh_ptr = field::NEXT_HEADER as u32;
    // §4.1: each extension header occurs at most once except Destination
    // Options (before a Routing header and before the upper layer). Bound the
    // walk so a chain of 8-byte headers cannot make it long: 64 headers is
    // more than any legitimate packet has.
    for _ in 0..64 {
        // Offset of this header's Next Header field from the IPv6 header start.
        let ptr = (HEADER_LEN + off) as u32;
        match nh {
            next_header::HOP_BY_HOP | next_header::DST_OPTS => {
                if nh == next_header::HOP_BY_HOP && off != 0 {
                    // §4.1: Hop-by-Hop only immediately after the IPv6 header;
                    // elsewhere it is an unrecognized Next Header. The pointer
                    // names the Next Header field that named it.
                    return Err(ExtError::ParamProblem {
                        code: param_problem::UNRECOGNIZED_NEXT_HEADER,
                        pointer: nh_ptr,
                        only_if_unicast: false,
                    });
                }
                let (next, len) = ext_len(payload, off)?;
                walk_options(&payload[off + 2..off + len], HEADER_LEN + off + 2)?;
                nh_ptr = ptr;
                nh = next;
                off += len;
            }
            next_header::ROUTING => {
                let (next, len) = ext_len(payload, off)?;
                let segments_left = payload[off + 3];
                if segments_left != 0 {
                    // §4.4: a host does not forward; an unrecognized type (0 is
                    // deprecated, RFC 5095) with segments left is a Parameter
                    // Problem pointing at the Routing Type field. We recognize none.
                    return Err(ExtError::ParamProblem {
                        code: param_problem::ERRONEOUS_HEADER_FIELD,
                        pointer: ptr + 2,
                        only_if_unicast: false,
                    });
                }
                nh_ptr = ptr;
                nh = next;
                off += len;
            }
            next_header::FRAGMENT => {
                let fh = FragmentHeader::parse(payload.get(off..).unwrap_or(&[])).map_err(|_| ExtError::Truncated)?;
                fragment = Some((fh, off));
                nh_ptr = ptr;
                off += FRAGMENT_HEADER_LEN;
                nh = fh.next_header;
                if fh.offset != 0 {
                    // Not the first fragment: what follows is data, not headers.
                    return Ok(ExtWalk { upper: nh, upper_offset: off, upper_ptr: nh_ptr, fragment });
                }
            }
            upper => return Ok(ExtWalk { upper, upper_offset: off, upper_ptr: nh_ptr, fragment }),
        }
    }
    Err(ExtError::Discard)
}

/// The Next Header byte and total length of the Hop-by-Hop, Destination
/// Options or Routing header at `off` (length in 8-octet units, not counting
/// the first 8, §4.3).
fn ext_len(payload: &[u8], off: usize) -> core::result::Result<(u8, usize), ExtError> {
    let h = payload.get(off..off + 2).ok_or(ExtError::Truncated)?;
    let len = (usize::from(h[1]) + 1) * 8;
    if payload.len() < off + len {
        return Err(ExtError::Truncated);
    }
    Ok((h[0], len))
}

/// Walks the TLV options of a Hop-by-Hop or Destination Options header (§4.2).
/// `base` is the options' offset from the IPv6 header start.
fn walk_options(opts: &[u8], base: usize) -> core::result::Result<(), ExtError> {
    let mut i = 0;
    while i < opts.len() {
        let kind = opts[i];
        if kind == 0 {
            // Pad1.
            i += 1;
            continue;
        }
        let len = usize::from(*opts.get(i + 1).ok_or(ExtError::Truncated)?);
        if i + 2 + len > opts.len() {
            return Err(ExtError::Truncated);
        }
        // PadN (1) and Router Alert (5, RFC 2711) are recognized; a host
        // needs nothing from either. Others follow their action bits.
        if kind != 1 && kind != 5 {
            match kind >> 6 {
                0b00 => {}
                0b01 => return Err(ExtError::Discard),
                action => {
                    return Err(ExtError::ParamProblem {
                        code: param_problem::UNRECOGNIZED_OPTION,
                        pointer: (base + i) as u32,
                        only_if_unicast: action == 0b11,
                    })
                }
            }
        }
        i += 2 + len;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

/// Packets shared by the tests of this module and of `icmpv6`.
#[cfg(test)]
pub(crate) mod tests_support {
    /// The first 48 bytes of a TCP segment 2001:db8::1 port 80 → 2001:db8::2
    /// port 40000 with 1400 bytes of data: its IPv6 header and 8 TCP bytes.
    pub const TCP_SEGMENT: [u8; 48] = [
        0x60, 0x00, 0x00, 0x00, 0x05, 0x8c, 0x06, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x02, 0x00, 0x50, 0x9c, 0x40, 0x00, 0x00, 0x03, 0xe8,
    ];
}
