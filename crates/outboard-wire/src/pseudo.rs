//! The pseudo-header that TCP, UDP and ICMPv6 checksums cover, for either IP
//! version: RFC 9293 §3.1 and RFC 768 for IPv4, RFC 8200 §8.1 for IPv6. The
//! TCP and UDP views and reprs take their addresses through [`PseudoAddr`],
//! so one parser and one emitter serve both families.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum::Accumulator;

/// An address type whose pseudo-header a transport checksum covers.
pub trait PseudoAddr: Copy {
    /// Adds the pseudo-header for an upper-layer packet of `len` bytes (its
    /// header and data) of `protocol` from `src` to `dst`.
    fn add_pseudo_header(acc: &mut Accumulator, src: Self, dst: Self, protocol: u8, len: usize);
}

impl PseudoAddr for Ipv4Addr {
    #[inline]
    fn add_pseudo_header(acc: &mut Accumulator, src: Self, dst: Self, protocol: u8, len: usize) {
        // IPv4 carries at most 65535 bytes; callers check the length first.
        acc.add_ipv4_pseudo_header(src, dst, protocol, len as u16);
    }
}

impl PseudoAddr for Ipv6Addr {
    #[inline]
    fn add_pseudo_header(acc: &mut Accumulator, src: Self, dst: Self, protocol: u8, len: usize) {
        crate::ipv6::add_pseudo_header(acc, src, dst, protocol, len as u32);
    }
}

impl PseudoAddr for IpAddr {
    /// Both of one family; a mixed pair (a caller's bug) is summed as IPv6
    /// with the IPv4 side mapped (RFC 4291 §2.5.5.2), so it never panics.
    #[inline]
    fn add_pseudo_header(acc: &mut Accumulator, src: Self, dst: Self, protocol: u8, len: usize) {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Ipv4Addr::add_pseudo_header(acc, s, d, protocol, len),
            (s, d) => Ipv6Addr::add_pseudo_header(acc, v6(s), v6(d), protocol, len),
        }
    }
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}
