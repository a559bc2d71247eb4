//! IPv6 header and extension-header walk over literal bytes (built with scapy), RFC 8200 §4 rules by name.

use std::net::Ipv6Addr;

use super::*;

/// 2001:db8::1 → 2001:db8::2: Hop-by-Hop (PadN), Destination Options (PadN),
/// a first Fragment header (M=1, id 0x12345678), then a TCP SYN 1 → 2.
const EXT_CHAIN: [u8; 84] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x02, 0x3c, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x06,
    0x00, 0x00, 0x01, 0x12, 0x34, 0x56, 0x78, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x50, 0x02, 0x20, 0x00, 0x34, 0x6b, 0x00, 0x00,
];

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn parses_the_fixed_header() {
    let p = Ipv6Packet::new_checked(&EXT_CHAIN[..]).unwrap();
    let r = Ipv6Repr::parse(&p).unwrap();
    assert_eq!(r.src_addr, a("2001:db8::1"));
    assert_eq!(r.dst_addr, a("2001:db8::2"));
    assert_eq!((r.next_header, r.payload_len, r.hop_limit, r.traffic_class, r.flow_label), (0, 44, 64, 0, 0));
    let mut out = [0u8; HEADER_LEN];
    r.emit(&mut out).unwrap();
    assert_eq!(out[..], EXT_CHAIN[..HEADER_LEN]);
}

#[test]
fn traffic_class_and_flow_label_round_trip() {
    let r = Ipv6Repr {
        src_addr: a("fe80::1"),
        dst_addr: a("ff02::1"),
        next_header: next_header::UDP,
        payload_len: 0,
        hop_limit: 1,
        traffic_class: 0xb9,
        flow_label: 0xabcde,
    };
    let mut out = [0u8; HEADER_LEN];
    r.emit(&mut out).unwrap();
    assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
    assert_eq!(Ipv6Repr { flow_label: 1 << 20, ..r }.emit(&mut out), Err(Error::Malformed));
    assert_eq!(Ipv6Repr { payload_len: 65536, ..r }.emit(&mut out), Err(Error::Malformed));
}

#[test]
fn short_or_overlong_packets_are_truncated_and_version_4_unsupported() {
    assert_eq!(Ipv6Packet::new_checked(&EXT_CHAIN[..39]).err(), Some(Error::Truncated));
    // The payload length says 44; 43 bytes are present.
    assert_eq!(Ipv6Packet::new_checked(&EXT_CHAIN[..83]).err(), Some(Error::Truncated));
    let mut v4 = EXT_CHAIN;
    v4[0] = 0x45;
    assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&v4[..]).unwrap()), Err(Error::Unsupported));
    // Ethernet padding after the payload is not payload.
    let mut padded = EXT_CHAIN.to_vec();
    padded.extend_from_slice(&[0; 10]);
    assert_eq!(Ipv6Packet::new_checked(&padded[..]).unwrap().payload().len(), 44);
}

#[test]
fn rfc8200_s4_walk_skips_options_and_reports_the_fragment_header() {
    let p = Ipv6Packet::new_checked(&EXT_CHAIN[..]).unwrap();
    let w = walk_extensions(p.next_header(), p.payload()).unwrap();
    assert_eq!(w.upper, next_header::TCP);
    assert_eq!((w.upper_offset, w.upper_ptr), (24, 40 + 16));
    let (fh, at) = w.fragment.unwrap();
    assert_eq!(at, 16);
    assert_eq!(fh, FragmentHeader { next_header: next_header::TCP, offset: 0, more: true, ident: 0x1234_5678 });
    assert!(!fh.is_atomic());
    let mut out = [0u8; FRAGMENT_HEADER_LEN];
    fh.emit(&mut out).unwrap();
    assert_eq!(out[..], p.payload()[16..24]);
}

#[test]
fn rfc8200_s4_5_a_later_fragment_is_data_after_its_header() {
    // Fragment header at offset 1448 with M=0, followed by bytes that are not headers.
    let payload = [next_header::TCP, 0, 0x05, 0xa8, 0, 0, 0, 9, 0xff, 0xff];
    let w = walk_extensions(next_header::FRAGMENT, &payload).unwrap();
    assert_eq!((w.upper, w.upper_offset), (next_header::TCP, 8));
    assert_eq!(w.fragment.unwrap().0, FragmentHeader { next_header: 6, offset: 1448, more: false, ident: 9 });
    // RFC 6946: offset 0 and no more fragments is an atomic fragment.
    assert!(FragmentHeader::parse(&[6, 0, 0, 0, 0, 0, 0, 1]).unwrap().is_atomic());
}

#[test]
fn rfc8200_s4_1_hop_by_hop_after_the_first_header_is_an_unrecognized_next_header() {
    // Destination Options naming Hop-by-Hop as its Next Header.
    let payload = [next_header::HOP_BY_HOP, 0, 1, 4, 0, 0, 0, 0, 6, 0, 1, 4, 0, 0, 0, 0];
    assert_eq!(
        walk_extensions(next_header::DST_OPTS, &payload),
        Err(ExtError::ParamProblem { code: param_problem::UNRECOGNIZED_NEXT_HEADER, pointer: 40, only_if_unicast: false })
    );
}

#[test]
fn rfc8200_s4_2_unrecognized_options_follow_their_action_bits() {
    let with = |kind: u8| [next_header::TCP, 0, kind, 2, 0, 0, 0, 0];
    // 00: skip.
    assert_eq!(walk_extensions(next_header::DST_OPTS, &with(0x1e)).unwrap().upper, next_header::TCP);
    // 01: discard silently.
    assert_eq!(walk_extensions(next_header::DST_OPTS, &with(0x5e)), Err(ExtError::Discard));
    // 10: discard and send Parameter Problem code 2 pointing at the option type.
    assert_eq!(
        walk_extensions(next_header::DST_OPTS, &with(0x9e)),
        Err(ExtError::ParamProblem { code: 2, pointer: 42, only_if_unicast: false })
    );
    // 11: likewise, but only if the destination was not multicast.
    assert_eq!(
        walk_extensions(next_header::HOP_BY_HOP, &with(0xde)),
        Err(ExtError::ParamProblem { code: 2, pointer: 42, only_if_unicast: true })
    );
    // Pad1 and PadN are recognized; an option running past its header is truncated.
    assert!(walk_extensions(next_header::DST_OPTS, &[6, 0, 0, 0, 1, 2, 0, 0]).is_ok());
    assert_eq!(walk_extensions(next_header::DST_OPTS, &[6, 0, 1, 9, 0, 0, 0, 0]), Err(ExtError::Truncated));
}

#[test]
fn rfc8200_s4_4_routing_header_with_segments_left_is_a_parameter_problem() {
    // Hop-by-Hop, then a Routing header type 0 with 1 segment left.
    let mut payload = vec![next_header::ROUTING, 0, 1, 4, 0, 0, 0, 0];
    payload.extend_from_slice(&[next_header::TCP, 2, 0, 1, 0, 0, 0, 0]);
    payload.extend_from_slice(&[0; 16]);
    assert_eq!(
        walk_extensions(next_header::HOP_BY_HOP, &payload),
        Err(ExtError::ParamProblem { code: 0, pointer: 40 + 8 + 2, only_if_unicast: false })
    );
    // With no segments left it is ignored.
    payload[8 + 3] = 0;
    let w = walk_extensions(next_header::HOP_BY_HOP, &payload).unwrap();
    assert_eq!((w.upper, w.upper_offset), (next_header::TCP, 32));
}

#[test]
fn a_header_running_past_the_payload_is_truncated_and_long_chains_are_bounded() {
    assert_eq!(walk_extensions(next_header::DST_OPTS, &[6, 1, 0, 0, 0, 0, 0, 0]), Err(ExtError::Truncated));
    assert_eq!(walk_extensions(next_header::FRAGMENT, &[6, 0, 0]), Err(ExtError::Truncated));
    assert_eq!(walk_extensions(next_header::ROUTING, &[6]), Err(ExtError::Truncated));
    let mut chain = Vec::new();
    for _ in 0..100 {
        chain.extend_from_slice(&[next_header::DST_OPTS, 0, 1, 4, 0, 0, 0, 0]);
    }
    assert_eq!(walk_extensions(next_header::DST_OPTS, &chain), Err(ExtError::Discard));
    // No Next Header ends the walk.
    assert_eq!(walk_extensions(next_header::NO_NEXT, &[]).unwrap().upper, next_header::NO_NEXT);
}

#[test]
fn quoted_packets_parse_with_their_claimed_length() {
    let (r, rest) = Ipv6Repr::parse_quoted(&EXT_CHAIN[..48]).unwrap();
    assert_eq!((r.payload_len, rest.len()), (44, 8));
    assert_eq!(Ipv6Repr::parse_quoted(&EXT_CHAIN[..39]).err(), Some(Error::Truncated));
}

#[test]
fn rfc8200_s8_1_pseudo_header_checksum_verifies_the_tcp_segment() {
    let p = Ipv6Packet::new_checked(&EXT_CHAIN[..]).unwrap();
    let tcp = &p.payload()[24..];
    let mut acc = Accumulator::new();
    add_pseudo_header(&mut acc, p.src_addr(), p.dst_addr(), next_header::TCP, tcp.len() as u32);
    acc.add(tcp);
    assert_eq!(acc.finish(), 0);
}

#[test]
fn tcp_and_udp_take_ipv6_pseudo_headers() {
    use crate::checksum::{RxChecksum, TxChecksum};
    use crate::tcp::{TcpPacket, TcpRepr};
    use crate::udp::{UdpPacket, UdpRepr};
    let p = Ipv6Packet::new_checked(&EXT_CHAIN[..]).unwrap();
    let (src, dst) = (p.src_addr(), p.dst_addr());
    let tcp = &p.payload()[24..];
    let repr = TcpRepr::parse(&TcpPacket::new_checked(tcp).unwrap(), src, dst, RxChecksum::Verify).unwrap();
    assert_eq!((repr.src_port, repr.dst_port), (1, 2));
    // The same bytes under other addresses fail; re-emitting gives the same checksum.
    let other = a("2001:db8::3");
    assert!(TcpRepr::parse(&TcpPacket::new_checked(tcp).unwrap(), src, other, RxChecksum::Verify).is_err());
    let mut out = [0u8; 20];
    repr.emit(&mut out, src, dst, 0, TxChecksum::Compute).unwrap();
    assert_eq!(out[..], tcp[..]);
    // UDP: emit under IPv6 and verify, also through IpAddr.
    let mut d = [0u8; 13];
    d[8..].copy_from_slice(b"hello");
    let u = UdpRepr { src_port: 5353, dst_port: 53 };
    u.emit(&mut d, src, dst, 5, TxChecksum::Compute).unwrap();
    let up = UdpPacket::new_checked(&d[..]).unwrap();
    assert!(up.verify_checksum(src, dst));
    assert!(up.verify_checksum(std::net::IpAddr::V6(src), std::net::IpAddr::V6(dst)));
    assert!(!up.verify_checksum(src, other));
}
