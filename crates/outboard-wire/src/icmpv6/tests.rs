//! ICMPv6 and neighbour discovery over literal packets built with scapy (whose
//! checksums are an independent reference), RFC 4443 / 4861 rules by name.

use std::net::Ipv6Addr;

use super::*;
use crate::ipv6::Ipv6Packet;

/// fe80::1 → ff02::1:ff00:2, hop limit 255: who has fe80::2, from 02:00:00:00:00:01.
const NS: [u8; 72] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x00,
    0x00, 0x02, 0x87, 0x00, 0x7a, 0x97, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
];

/// fe80::1 → ff02::1: hop limit 64, O flag, preference high, lifetime 1800 s, reachable 30 s,
/// retrans 1 s; source LLA, MTU 1400, prefix 2001:db8:1::/64 (L, A, 86400 s / 14400 s).
const RA: [u8; 104] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x40, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0x86, 0x00, 0xb2, 0xdb, 0x40, 0x48, 0x07, 0x08, 0x00, 0x00, 0x75, 0x30, 0x00, 0x00, 0x03, 0xe8, 0x01,
    0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x00, 0x00, 0x00, 0x00, 0x05, 0x78, 0x03, 0x04, 0x40, 0xc0,
    0x00, 0x01, 0x51, 0x80, 0x00, 0x00, 0x38, 0x40, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// fe80::2 → fe80::1: solicited, override; fe80::2 is at 02:00:00:00:00:02.
const NA: [u8; 72] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x02, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0x88, 0x00, 0x18, 0x1a, 0x60, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
];

/// 2001:db8::1 → 2001:db8::2: echo request id 0x1234 seq 7, "hello".
const ECHO: [u8; 53] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x0d, 0x3a, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x02, 0x80, 0x00, 0xce, 0x35, 0x12, 0x34, 0x00, 0x07, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// Parses the ICMPv6 message in an IPv6 packet, checksum verified, and checks
/// that emitting the repr gives the same bytes back.
fn parse_and_reemit(packet: &[u8]) -> Icmpv6Repr<'_> {
    let ip = Ipv6Packet::new_checked(packet).unwrap();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let body = &packet[40..];
    let repr = Icmpv6Repr::parse(&Icmpv6Packet::new_checked(body).unwrap(), src, dst, RxChecksum::Verify).unwrap();
    let mut out = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit(src, dst, &mut out), Ok(body.len()));
    assert_eq!(out, body);
    repr
}

#[test]
fn rfc4861_s4_3_neighbor_solicitation() {
    let r = parse_and_reemit(&NS);
    assert!(matches!(r, Icmpv6Repr::NeighborSolicit { target, .. } if target == a("fe80::2")));
    assert_eq!(r.source_lla(), Some(EthernetAddress([2, 0, 0, 0, 0, 1])));
    assert_eq!(r.target_lla(), None);
}

#[test]
fn rfc4861_s4_4_neighbor_advertisement() {
    let r = parse_and_reemit(&NA);
    assert_eq!(
        r,
        Icmpv6Repr::NeighborAdvert { flags: na_flags::SOLICITED | na_flags::OVERRIDE, target: a("fe80::2"), options: &NA[64..] }
    );
    assert_eq!(r.target_lla(), Some(EthernetAddress([2, 0, 0, 0, 0, 2])));
}

#[test]
fn rfc4861_s4_2_router_advertisement_with_mtu_and_prefix() {
    let r = parse_and_reemit(&RA);
    let Icmpv6Repr::RouterAdvert { hop_limit, flags, router_lifetime, reachable_time, retrans_timer, .. } = r else {
        panic!("not an RA: {r:?}")
    };
    assert_eq!((hop_limit, flags, router_lifetime, reachable_time, retrans_timer), (64, ra_flags::OTHER | 0x08, 1800, 30000, 1000));
    // 0x08: scapy's default router preference (RFC 4191 §2.2, high); kept as received.
    assert_eq!(r.mtu(), Some(1400));
    assert_eq!(r.source_lla(), Some(EthernetAddress([2, 0, 0, 0, 0, 1])));
    let prefixes: Vec<PrefixInfo> = r
        .options()
        .unwrap()
        .filter_map(|o| match o {
            NdiscOption::PrefixInfo(p) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(
        prefixes,
        [PrefixInfo {
            prefix_len: 64,
            flags: prefix_flags::ON_LINK | prefix_flags::AUTONOMOUS,
            valid_lifetime: 86400,
            preferred_lifetime: 14400,
            prefix: a("2001:db8:1::"),
        }]
    );
}

#[test]
fn rfc4443_s4_echo_request() {
    let r = parse_and_reemit(&ECHO);
    assert_eq!(r, Icmpv6Repr::EchoRequest { ident: 0x1234, seq_no: 7, data: b"hello" });
}

#[test]
fn rfc4443_s2_3_checksum_covers_the_pseudo_header() {
    let body = &ECHO[40..];
    let p = Icmpv6Packet::new_checked(body).unwrap();
    assert!(p.verify_checksum(a("2001:db8::1"), a("2001:db8::2")));
    assert!(!p.verify_checksum(a("2001:db8::1"), a("2001:db8::3")));
    assert_eq!(
        Icmpv6Repr::parse(&p, a("2001:db8::1"), a("2001:db8::3"), RxChecksum::Verify),
        Err(Error::Checksum)
    );
}

#[test]
fn rfc4861_s7_1_1_invalid_solicitations_are_malformed() {
    let (src, dst) = (a("fe80::1"), a("ff02::1:ff00:2"));
    let parse = |b: &[u8]| {
        let b = b.to_vec();
        Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), src, dst, RxChecksum::Skip).map(|_| ())
    };
    let ns = &NS[40..];
    assert_eq!(parse(ns), Ok(()));
    // A nonzero code.
    let mut bad = ns.to_vec();
    bad[1] = 1;
    assert_eq!(parse(&bad), Err(Error::Malformed));
    // Shorter than 24 bytes.
    assert_eq!(parse(&ns[..20]), Err(Error::Malformed));
    // A multicast target.
    let mut bad = ns.to_vec();
    bad[8] = 0xff;
    assert_eq!(parse(&bad), Err(Error::Malformed));
    // An option with length zero (RFC 4861 §4.6).
    let mut bad = ns.to_vec();
    bad[25] = 0;
    assert_eq!(parse(&bad), Err(Error::Malformed));
    // An option running past the message.
    let mut bad = ns.to_vec();
    bad[25] = 2;
    assert_eq!(parse(&bad), Err(Error::Truncated));
}

#[test]
fn unknown_options_are_skipped_and_known_ones_need_their_length() {
    let mut opts = Vec::new();
    let mut b = [0u8; 32];
    let n = NdiscOption::Unknown { kind: 14, data: &[1, 2, 3, 4, 5, 6] }.emit(&mut b).unwrap();
    opts.extend_from_slice(&b[..n]);
    let n = NdiscOption::SourceLla(EthernetAddress([2, 0, 0, 0, 0, 9])).emit(&mut b).unwrap();
    opts.extend_from_slice(&b[..n]);
    let r = Icmpv6Repr::RouterSolicit { options: &opts };
    let (src, dst) = (a("fe80::9"), a("ff02::2"));
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(src, dst, &mut out).unwrap();
    let back = Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&out[..]).unwrap(), src, dst, RxChecksum::Verify).unwrap();
    assert_eq!(back, r);
    assert_eq!(back.source_lla(), Some(EthernetAddress([2, 0, 0, 0, 0, 9])));
    // An MTU option of two units is malformed.
    let bad = [5u8, 2, 0, 0, 0, 0, 5, 0x78, 0, 0, 0, 0, 0, 0, 0, 0];
    let r = Icmpv6Repr::RouterSolicit { options: &bad };
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(src, dst, &mut out).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&out[..]).unwrap(), src, dst, RxChecksum::Verify),
        Err(Error::Malformed)
    );
}

#[test]
fn rfc4443_s3_2_packet_too_big_quotes_the_invoking_packet() {
    let invoking = &crate::ipv6::tests_support::TCP_SEGMENT;
    let r = Icmpv6Repr::PacketTooBig { mtu: 1280, invoking };
    let (src, dst) = (a("2001:db8::fe"), a("2001:db8::1"));
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(src, dst, &mut out).unwrap();
    let back = Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&out[..]).unwrap(), src, dst, RxChecksum::Verify).unwrap();
    assert_eq!(back, r);
    let (ip, payload) = back.quoted().unwrap();
    assert_eq!((ip.src_addr, ip.dst_addr, ip.next_header), (a("2001:db8::1"), a("2001:db8::2"), 6));
    assert_eq!(&payload[..4], &[0, 80, 0x9c, 0x40]);
    // A quote shorter than an IPv6 header is malformed.
    let r = Icmpv6Repr::PacketTooBig { mtu: 1280, invoking: &invoking[..30] };
    r.emit(src, dst, &mut out).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&out[..8 + 30]).unwrap(), src, dst, RxChecksum::Verify),
        Err(Error::Malformed)
    );
}

#[test]
fn unreachable_codes_hard_and_soft_as_linux() {
    assert!(UnreachableCode::PORT.is_hard());
    assert!(UnreachableCode::ADMIN_PROHIBITED.is_hard());
    assert!(!UnreachableCode::NO_ROUTE.is_hard());
    assert!(!UnreachableCode::ADDRESS.is_hard());
}

#[test]
fn rfc4291_solicited_node_group_and_rfc2464_multicast_mac() {
    let g = solicited_node(a("2001:db8::2aa:ff:fe28:9c5a"));
    assert_eq!(g, a("ff02::1:ff28:9c5a"));
    assert_eq!(multicast_mac(g), EthernetAddress([0x33, 0x33, 0xff, 0x28, 0x9c, 0x5a]));
}

#[test]
fn rfc4291_modified_eui64_and_rfc4862_addresses() {
    // RFC 4291 appendix A's example MAC 00:aa:00:28:9c:5a → 02aa:00ff:fe28:9c5a.
    let mac = EthernetAddress([0x00, 0xaa, 0x00, 0x28, 0x9c, 0x5a]);
    assert_eq!(interface_id(mac), [0x02, 0xaa, 0x00, 0xff, 0xfe, 0x28, 0x9c, 0x5a]);
    assert_eq!(address_from_prefix(a("fe80::"), mac), a("fe80::2aa:ff:fe28:9c5a"));
    assert_eq!(address_from_prefix(a("2001:db8:1::"), mac), a("2001:db8:1::2aa:ff:fe28:9c5a"));
}
