//! ICMPv6 (RFC 4443): echo, the four error messages, and the neighbour
//! discovery messages a host uses (RFC 4861: router solicitation and
//! advertisement, neighbour solicitation and advertisement) with their
//! options; plus the address helpers neighbour discovery needs
//! (solicited-node groups, RFC 4291 §2.7.1; multicast MACs, RFC 2464 §7;
//! modified EUI-64 interface identifiers for SLAAC, RFC 4291 §2.5.1 and RFC 4862).
//!
//! The checksum covers the IPv6 pseudo-header (RFC 4443 §2.3), so parsing and
//! emitting take the packet's source and destination addresses.

use std::net::Ipv6Addr;

use crate::checksum::{Accumulator, RxChecksum};
use crate::ethernet::EthernetAddress;
use crate::ipv6::{self, addr, be16, be32, next_header, Ipv6Repr};
use crate::{Error, Result};

/// ICMPv6 message types this crate parses.
pub mod msg_type {
    pub const DST_UNREACHABLE: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const PARAM_PROBLEM: u8 = 4;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const ROUTER_SOLICIT: u8 = 133;
    pub const ROUTER_ADVERT: u8 = 134;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
}

/// Destination-unreachable codes (RFC 4443 §3.1). A newtype so every code round-trips.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct UnreachableCode(pub u8);

impl UnreachableCode {
    pub const NO_ROUTE: UnreachableCode = UnreachableCode(0);
    pub const ADMIN_PROHIBITED: UnreachableCode = UnreachableCode(1);
    pub const BEYOND_SCOPE: UnreachableCode = UnreachableCode(2);
    pub const ADDRESS: UnreachableCode = UnreachableCode(3);
    pub const PORT: UnreachableCode = UnreachableCode(4);
    pub const POLICY_FAILED: UnreachableCode = UnreachableCode(5);
    pub const REJECT_ROUTE: UnreachableCode = UnreachableCode(6);

    /// Whether the error is fatal to a connection being opened, as Linux's
    /// `icmpv6_err_convert` table has it: port unreachable, administratively
    /// prohibited, policy failure and reject route are; no route, beyond
    /// scope and address unreachable are soft.
    pub fn is_hard(self) -> bool {
        matches!(self, Self::ADMIN_PROHIBITED | Self::PORT | Self::POLICY_FAILED | Self::REJECT_ROUTE)
    }
}

/// Router Advertisement flags (RFC 4861 §4.2).
pub mod ra_flags {
    /// Managed address configuration (DHCPv6).
    pub const MANAGED: u8 = 0x80;
    /// Other configuration (DHCPv6).
    pub const OTHER: u8 = 0x40;
}

/// Neighbor Advertisement flags (RFC 4861 §4.4).
pub mod na_flags {
    pub const ROUTER: u8 = 0x80;
    pub const SOLICITED: u8 = 0x40;
    pub const OVERRIDE: u8 = 0x20;
}

/// Prefix Information flags (RFC 4861 §4.6.2).
pub mod prefix_flags {
    /// On-link.
    pub const ON_LINK: u8 = 0x80;
    /// Autonomous address configuration (SLAAC).
    pub const AUTONOMOUS: u8 = 0x40;
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
}

/// Length of the ICMPv6 header (type, code, checksum, four more bytes).
pub const HEADER_LEN: usize = field::REST.end;

/// An error message is at most the minimum MTU with its IPv6 header (RFC 4443 §2.4(c)).
pub const MAX_ERROR_LEN: usize = ipv6::MIN_MTU - ipv6::HEADER_LEN;

/// The hop limit every neighbour discovery message must arrive with: a
/// receiver drops any other (RFC 4861 §6.1, §7.1), so an off-link sender cannot forge one.
pub const NDISC_HOP_LIMIT: u8 = 255;

/// A view of an ICMPv6 message; after `check_len` (8 bytes) no accessor panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Icmpv6Packet<T> {
        Icmpv6Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Icmpv6Packet<T>> {
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
    /// The four bytes after the checksum (identifier and sequence number,
    /// MTU, pointer, flags, ... depending on the type).
    pub fn rest(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::REST])
    }
    /// Everything after the 8-byte header.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    /// True if the checksum, pseudo-header included, verifies.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let b = self.buffer.as_ref();
        let Ok(len) = u32::try_from(b.len()) else { return false };
        let mut acc = Accumulator::new();
        ipv6::add_pseudo_header(&mut acc, src, dst, next_header::ICMPV6, len);
        acc.add(b);
        acc.finish() == 0
    }
}

/// A parsed ICMPv6 message, borrowing its data from the packet.
///
/// Neighbour discovery messages keep their options as validated bytes
/// (every option has a nonzero length that fits, and the known ones the
/// length RFC 4861 §4.6 gives them); read them with [`Icmpv6Repr::options`]
/// or the accessors ([`source_lla`](Self::source_lla), ...).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Icmpv6Repr<'a> {
    EchoRequest { ident: u16, seq_no: u16, data: &'a [u8] },
    EchoReply { ident: u16, seq_no: u16, data: &'a [u8] },
    /// `invoking` is the quoted packet as received (its IPv6 header first).
    DstUnreachable { code: UnreachableCode, invoking: &'a [u8] },
    PacketTooBig { mtu: u32, invoking: &'a [u8] },
    TimeExceeded { code: u8, invoking: &'a [u8] },
    ParamProblem { code: u8, pointer: u32, invoking: &'a [u8] },
    RouterSolicit { options: &'a [u8] },
    RouterAdvert {
        hop_limit: u8,
        /// [`ra_flags`].
        flags: u8,
        /// Seconds; 0: not a default router.
        router_lifetime: u16,
        /// Milliseconds; 0: unspecified.
        reachable_time: u32,
        /// Milliseconds; 0: unspecified.
        retrans_timer: u32,
        options: &'a [u8],
    },
    NeighborSolicit { target: Ipv6Addr, options: &'a [u8] },
    NeighborAdvert {
        /// [`na_flags`].
        flags: u8,
        target: Ipv6Addr,
        options: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Parses a message sent from `src` to `dst`. Types this crate does not
    /// know (redirect, MLD, ...) are [`Error::Unsupported`]. An error message
    /// whose quote is not an IPv6 header is [`Error::Malformed`]; so is a
    /// neighbour discovery message with a nonzero code, too short a body, a
    /// multicast target, or a bad option (RFC 4861 §6.1, §7.1: receivers
    /// silently discard those). The hop-limit rule ([`NDISC_HOP_LIMIT`]) is
    /// the caller's, who holds the IPv6 header.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        p: &Icmpv6Packet<&'a T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        checksum: RxChecksum,
    ) -> Result<Icmpv6Repr<'a>> {
        p.check_len()?;
        if checksum == RxChecksum::Verify && !p.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        let body: &'a [u8] = &T::as_ref(p.buffer)[HEADER_LEN..];
        let rest = p.rest();
        let (hi, lo) = ((rest >> 16) as u16, rest as u16);
        let ndisc = |min_body: usize| -> Result<()> {
            if p.code() != 0 || body.len() < min_body {
                return Err(Error::Malformed);
            }
            Ok(())
        };
        match p.msg_type() {
            msg_type::ECHO_REQUEST => Ok(Icmpv6Repr::EchoRequest { ident: hi, seq_no: lo, data: body }),
            msg_type::ECHO_REPLY => Ok(Icmpv6Repr::EchoReply { ident: hi, seq_no: lo, data: body }),
            msg_type::DST_UNREACHABLE => {
                check_quoted(body)?;
                Ok(Icmpv6Repr::DstUnreachable { code: UnreachableCode(p.code()), invoking: body })
            }
            msg_type::PACKET_TOO_BIG => {
                check_quoted(body)?;
                Ok(Icmpv6Repr::PacketTooBig { mtu: rest, invoking: body })
            }
            msg_type::TIME_EXCEEDED => {
                check_quoted(body)?;
                Ok(Icmpv6Repr::TimeExceeded { code: p.code(), invoking: body })
            }
            msg_type::PARAM_PROBLEM => {
                check_quoted(body)?;
                Ok(Icmpv6Repr::ParamProblem { code: p.code(), pointer: rest, invoking: body })
            }
            msg_type::ROUTER_SOLICIT => {
                ndisc(0)?;
                validate_options(body)?;
                Ok(Icmpv6Repr::RouterSolicit { options: body })
            }
            msg_type::ROUTER_ADVERT => {
                ndisc(8)?;
                let options = &body[8..];
                validate_options(options)?;
                Ok(Icmpv6Repr::RouterAdvert {
                    hop_limit: (rest >> 24) as u8,
                    flags: (rest >> 16) as u8,
                    router_lifetime: lo,
                    reachable_time: be32(&body[0..4]),
                    retrans_timer: be32(&body[4..8]),
                    options,
                })
            }
            msg_type::NEIGHBOR_SOLICIT => {
                ndisc(16)?;
                let target = addr(body);
                if target.is_multicast() {
                    return Err(Error::Malformed);
                }
                let options = &body[16..];
                validate_options(options)?;
                Ok(Icmpv6Repr::NeighborSolicit { target, options })
            }
            msg_type::NEIGHBOR_ADVERT => {
                ndisc(16)?;
                let target = addr(body);
                if target.is_multicast() {
                    return Err(Error::Malformed);
                }
                let options = &body[16..];
                validate_options(options)?;
                Ok(Icmpv6Repr::NeighborAdvert { flags: (rest >> 24) as u8, target, options })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// For an error message, the quoted packet's IPv6 header and the payload
    /// bytes present (extension headers first, if any). `None` otherwise.
    pub fn quoted(&self) -> Option<(Ipv6Repr, &'a [u8])> {
        match *self {
            Icmpv6Repr::DstUnreachable { invoking, .. }
            | Icmpv6Repr::PacketTooBig { invoking, .. }
            | Icmpv6Repr::TimeExceeded { invoking, .. }
            | Icmpv6Repr::ParamProblem { invoking, .. } => Ipv6Repr::parse_quoted(invoking).ok(),
            _ => None,
        }
    }

    /// The neighbour discovery options, for the four ND messages; `None` otherwise.
    pub fn options(&self) -> Option<NdiscOptions<'a>> {
        match *self {
            Icmpv6Repr::RouterSolicit { options }
            | Icmpv6Repr::RouterAdvert { options, .. }
            | Icmpv6Repr::NeighborSolicit { options, .. }
            | Icmpv6Repr::NeighborAdvert { options, .. } => Some(NdiscOptions { bytes: options }),
            _ => None,
        }
    }

    /// The Source Link-Layer Address option, if the message carries one.
    pub fn source_lla(&self) -> Option<EthernetAddress> {
        self.options()?.find_map(|o| match o {
            NdiscOption::SourceLla(mac) => Some(mac),
            _ => None,
        })
    }

    /// The Target Link-Layer Address option, if the message carries one.
    pub fn target_lla(&self) -> Option<EthernetAddress> {
        self.options()?.find_map(|o| match o {
            NdiscOption::TargetLla(mac) => Some(mac),
            _ => None,
        })
    }

    /// The MTU option of a router advertisement, if any.
    pub fn mtu(&self) -> Option<u32> {
        self.options()?.find_map(|o| match o {
            NdiscOption::Mtu(mtu) => Some(mtu),
            _ => None,
        })
    }

    /// Bytes `emit` writes: the 8-byte header and the body.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match *self {
                Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => data.len(),
                Icmpv6Repr::DstUnreachable { invoking, .. }
                | Icmpv6Repr::PacketTooBig { invoking, .. }
                | Icmpv6Repr::TimeExceeded { invoking, .. }
                | Icmpv6Repr::ParamProblem { invoking, .. } => invoking.len(),
                Icmpv6Repr::RouterSolicit { options } => options.len(),
                Icmpv6Repr::RouterAdvert { options, .. } => 8 + options.len(),
                Icmpv6Repr::NeighborSolicit { options, .. } | Icmpv6Repr::NeighborAdvert { options, .. } => {
                    16 + options.len()
                }
            }
    }

    /// Writes the whole message, with its checksum for a packet from `src`
    /// to `dst`, into the start of `buf`.
    pub fn emit(&self, src: Ipv6Addr, dst: Ipv6Addr, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let echo = |ident: u16, seq_no: u16| (u32::from(ident) << 16) | u32::from(seq_no);
        let (ty, code, rest): (u8, u8, u32) = match *self {
            Icmpv6Repr::EchoRequest { ident, seq_no, data } => {
                b[HEADER_LEN..].copy_from_slice(data);
                (msg_type::ECHO_REQUEST, 0, echo(ident, seq_no))
            }
            Icmpv6Repr::EchoReply { ident, seq_no, data } => {
                b[HEADER_LEN..].copy_from_slice(data);
                (msg_type::ECHO_REPLY, 0, echo(ident, seq_no))
            }
            Icmpv6Repr::DstUnreachable { code, invoking } => {
                b[HEADER_LEN..].copy_from_slice(invoking);
                (msg_type::DST_UNREACHABLE, code.0, 0)
            }
            Icmpv6Repr::PacketTooBig { mtu, invoking } => {
                b[HEADER_LEN..].copy_from_slice(invoking);
                (msg_type::PACKET_TOO_BIG, 0, mtu)
            }
            Icmpv6Repr::TimeExceeded { code, invoking } => {
                b[HEADER_LEN..].copy_from_slice(invoking);
                (msg_type::TIME_EXCEEDED, code, 0)
            }
            Icmpv6Repr::ParamProblem { code, pointer, invoking } => {
                b[HEADER_LEN..].copy_from_slice(invoking);
                (msg_type::PARAM_PROBLEM, code, pointer)
            }
            Icmpv6Repr::RouterSolicit { options } => {
                b[HEADER_LEN..].copy_from_slice(options);
                (msg_type::ROUTER_SOLICIT, 0, 0)
            }
            Icmpv6Repr::RouterAdvert { hop_limit, flags, router_lifetime, reachable_time, retrans_timer, options } => {
                b[8..12].copy_from_slice(&reachable_time.to_be_bytes());
                b[12..16].copy_from_slice(&retrans_timer.to_be_bytes());
                b[16..].copy_from_slice(options);
                let rest = (u32::from(hop_limit) << 24) | (u32::from(flags) << 16) | u32::from(router_lifetime);
                (msg_type::ROUTER_ADVERT, 0, rest)
            }
            Icmpv6Repr::NeighborSolicit { target, options } => {
                b[8..24].copy_from_slice(&target.octets());
                b[24..].copy_from_slice(options);
                (msg_type::NEIGHBOR_SOLICIT, 0, 0)
            }
            Icmpv6Repr::NeighborAdvert { flags, target, options } => {
                b[8..24].copy_from_slice(&target.octets());
                b[24..].copy_from_slice(options);
                (msg_type::NEIGHBOR_ADVERT, 0, u32::from(flags) << 24)
            }
        };
        b[field::TYPE] = ty;
        b[field::CODE] = code;
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        b[field::REST].copy_from_slice(&rest.to_be_bytes());
        let mut acc = Accumulator::new();
        ipv6::add_pseudo_header(&mut acc, src, dst, next_header::ICMPV6, len as u32);
        acc.add(b);
        b[field::CHECKSUM].copy_from_slice(&acc.finish().to_be_bytes());
        Ok(len)
    }
}

fn check_quoted(body: &[u8]) -> Result<()> {
    Ipv6Repr::parse_quoted(body).map(|_| ()).map_err(|_| Error::Malformed)
}

/// Neighbour discovery option types (RFC 4861 §4.6).
pub mod option_type {
    pub const SOURCE_LLA: u8 = 1;
    pub const TARGET_LLA: u8 = 2;
    pub const PREFIX_INFO: u8 = 3;
    pub const REDIRECTED_HEADER: u8 = 4;
    pub const MTU: u8 = 5;
}

/// A Prefix Information option (RFC 4861 §4.6.2).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct PrefixInfo {
    pub prefix_len: u8,
    /// [`prefix_flags`].
    pub flags: u8,
    /// Seconds; `u32::MAX` is infinity.
    pub valid_lifetime: u32,
    /// Seconds; `u32::MAX` is infinity.
    pub preferred_lifetime: u32,
    pub prefix: Ipv6Addr,
}

/// One neighbour discovery option.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum NdiscOption<'a> {
    SourceLla(EthernetAddress),
    TargetLla(EthernetAddress),
    PrefixInfo(PrefixInfo),
    Mtu(u32),
    /// Any other option: its type and the bytes after type and length.
    /// RFC 4861 §4.6: receivers skip options they do not recognize.
    Unknown { kind: u8, data: &'a [u8] },
}

impl NdiscOption<'_> {
    /// Bytes `emit` writes (a multiple of 8).
    pub fn buffer_len(&self) -> usize {
        match self {
            NdiscOption::SourceLla(_) | NdiscOption::TargetLla(_) | NdiscOption::Mtu(_) => 8,
            NdiscOption::PrefixInfo(_) => 32,
            NdiscOption::Unknown { data, .. } => (2 + data.len()).div_ceil(8) * 8,
        }
    }

    /// Writes the option (padded with zeros to a multiple of 8) at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let units = u8::try_from(len / 8).map_err(|_| Error::Malformed)?;
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        b.fill(0);
        b[1] = units;
        match *self {
            NdiscOption::SourceLla(mac) | NdiscOption::TargetLla(mac) => {
                b[0] = if matches!(self, NdiscOption::SourceLla(_)) { option_type::SOURCE_LLA } else { option_type::TARGET_LLA };
                b[2..8].copy_from_slice(&mac.0);
            }
            NdiscOption::Mtu(mtu) => {
                b[0] = option_type::MTU;
                b[4..8].copy_from_slice(&mtu.to_be_bytes());
            }
            NdiscOption::PrefixInfo(p) => {
                b[0] = option_type::PREFIX_INFO;
                b[2] = p.prefix_len;
                b[3] = p.flags;
                b[4..8].copy_from_slice(&p.valid_lifetime.to_be_bytes());
                b[8..12].copy_from_slice(&p.preferred_lifetime.to_be_bytes());
                b[16..32].copy_from_slice(&p.prefix.octets());
            }
            NdiscOption::Unknown { kind, data } => {
                b[0] = kind;
                b[2..2 + data.len()].copy_from_slice(data);
            }
        }
        Ok(len)
    }
}

/// The options of a neighbour discovery message, in order. Built only over
/// validated bytes, so every step yields an option.
#[derive(Clone, Copy, Debug)]
pub struct NdiscOptions<'a> {
    bytes: &'a [u8],
}

impl<'a> Iterator for NdiscOptions<'a> {
    type Item = NdiscOption<'a>;
    fn next(&mut self) -> Option<NdiscOption<'a>> {
        let (opt, rest) = split_option(self.bytes).ok()??;
        self.bytes = rest;
        Some(opt)
    }
}

/// RFC 4861 §4.6: every option's length is nonzero (a receiver discards the
/// message otherwise) and fits; the known options have their fixed lengths.
fn validate_options(mut bytes: &[u8]) -> Result<()> {
    while let Some((_, rest)) = split_option(bytes)? {
        bytes = rest;
    }
    Ok(())
}

/// The first option of `bytes` and the rest, or `None` when empty.
fn split_option(bytes: &[u8]) -> Result<Option<(NdiscOption<'_>, &[u8])>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let hdr = bytes.get(..2).ok_or(Error::Truncated)?;
    let len = usize::from(hdr[1]) * 8;
    if len == 0 {
        return Err(Error::Malformed);
    }
    let o = bytes.get(..len).ok_or(Error::Truncated)?;
    let mac = || EthernetAddress([o[2], o[3], o[4], o[5], o[6], o[7]]);
    let opt = match hdr[0] {
        // Ethernet link-layer addresses take one 8-byte unit (RFC 2464 §6).
        option_type::SOURCE_LLA if len == 8 => NdiscOption::SourceLla(mac()),
        option_type::TARGET_LLA if len == 8 => NdiscOption::TargetLla(mac()),
        option_type::MTU if len == 8 => NdiscOption::Mtu(be32(&o[4..8])),
        option_type::PREFIX_INFO if len == 32 => NdiscOption::PrefixInfo(PrefixInfo {
            prefix_len: o[2],
            flags: o[3],
            valid_lifetime: be32(&o[4..8]),
            preferred_lifetime: be32(&o[8..12]),
            prefix: addr(&o[16..32]),
        }),
        option_type::MTU | option_type::PREFIX_INFO => return Err(Error::Malformed),
        kind => NdiscOption::Unknown { kind, data: &o[2..] },
    };
    Ok(Some((opt, &bytes[len..])))
}

/// The solicited-node multicast group of `addr` (RFC 4291 §2.7.1): ff02::1:ffXX:XXXX
/// with the address's low 24 bits. Neighbour solicitations for `addr` go there.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | u16::from(o[13]), u16::from_be_bytes([o[14], o[15]]))
}

/// The Ethernet multicast address an IPv6 multicast group maps to (RFC 2464 §7): 33:33 and its low 32 bits.
pub fn multicast_mac(group: Ipv6Addr) -> EthernetAddress {
    let o = group.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// The modified EUI-64 interface identifier of a MAC (RFC 4291 §2.5.1,
/// appendix A): the MAC split by ff:fe, with the universal/local bit flipped.
pub fn interface_id(mac: EthernetAddress) -> [u8; 8] {
    let m = mac.0;
    [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
}

/// The address SLAAC forms from a /64 `prefix` and a MAC (RFC 4862 §5.5.3);
/// with `fe80::` it is the link-local address (§5.3).
pub fn address_from_prefix(prefix: Ipv6Addr, mac: EthernetAddress) -> Ipv6Addr {
    let mut o = prefix.octets();
    o[8..].copy_from_slice(&interface_id(mac));
    Ipv6Addr::from(o)
}

#[cfg(test)]
mod tests;
