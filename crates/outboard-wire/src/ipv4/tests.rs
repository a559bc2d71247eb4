use std::net::Ipv4Addr;
use super::*;
use crate::ethernet::{EthernetFrame, HEADER_LEN as ETH_LEN};
use crate::testdata;

fn ip_of(frame: &[u8]) -> Ipv4Packet<&[u8]> {
    assert!(EthernetFrame::new_checked(frame).is_ok());
    Ipv4Packet::new_checked(&frame[ETH_LEN..]).unwrap()
}

#[test]
fn captured_echo_request_header_fields() {
    let p = ip_of(testdata::ICMP_ECHO_REQUEST);
    let r = Ipv4Repr::parse(&p, RxChecksum::Verify).unwrap();
    assert_eq!(r.src_addr, Ipv4Addr::new(10, 9, 1, 2));
    assert_eq!(r.dst_addr, Ipv4Addr::new(10, 9, 1, 1));
    assert_eq!(r.protocol, IpProtocol::Icmp);
    assert_eq!(r.ttl, 64);
    assert!(r.dont_frag && !r.more_frags && r.frag_offset == 0 && !r.is_fragment());
    assert_eq!(r.payload_len, 8 + 32);
    assert_eq!(p.payload().len(), r.payload_len);
}

#[test]
fn every_captured_ipv4_frame_verifies_and_round_trips() {
    for frame in testdata::ALL_IPV4 {
        let p = ip_of(frame);
        let r = Ipv4Repr::parse(&p, RxChecksum::Verify).unwrap();
        let mut out = [0u8; HEADER_LEN];
        assert_eq!(r.emit(&mut out), Ok(HEADER_LEN));
        // None of the captures carries options, so the header comes back byte for byte.
        assert_eq!(&out[..], &frame[ETH_LEN..ETH_LEN + HEADER_LEN]);
    }
}

#[test]
fn router_icmp_errors_have_tos_0xc0() {
    // Linux sends ICMP errors with precedence "internetwork control" (RFC 1812 §4.3.2.5).
    let r = Ipv4Repr::parse(&ip_of(testdata::ICMP_TIME_EXCEEDED), RxChecksum::Verify).unwrap();
    assert_eq!(r.dscp_ecn, 0xc0);
    assert!(!r.dont_frag);
}

#[test]
fn bad_header_checksum_is_rejected_only_when_verifying() {
    let mut b = testdata::UDP_HELLO[ETH_LEN..].to_vec();
    b[10] ^= 0x01;
    let p = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Ipv4Repr::parse(&p, RxChecksum::Verify), Err(Error::Checksum));
    assert!(Ipv4Repr::parse(&p, RxChecksum::Skip).is_ok());
}

#[test]
fn every_truncation_is_an_error() {
    let b = &testdata::UDP_HELLO[ETH_LEN..];
    for n in 0..b.len() {
        assert_eq!(Ipv4Packet::new_checked(&b[..n]).err(), Some(Error::Truncated), "len {n}");
    }
}

#[test]
fn ihl_below_five_is_malformed() {
    let mut b = testdata::UDP_HELLO[ETH_LEN..].to_vec();
    for ihl in 0..5 {
        b[0] = 0x40 | ihl;
        assert_eq!(Ipv4Packet::new_checked(&b[..]).err(), Some(Error::Malformed));
    }
}

#[test]
fn total_length_shorter_than_header_is_malformed() {
    let mut b = testdata::UDP_HELLO[ETH_LEN..].to_vec();
    b[2..4].copy_from_slice(&19u16.to_be_bytes());
    assert_eq!(Ipv4Packet::new_checked(&b[..]).err(), Some(Error::Malformed));
}

#[test]
fn version_six_is_unsupported() {
    let mut b = testdata::UDP_HELLO[ETH_LEN..].to_vec();
    b[0] = 0x65;
    let p = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Ipv4Repr::parse(&p, RxChecksum::Skip), Err(Error::Unsupported));
}

#[test]
fn options_are_skipped_by_ihl() {
    // The UDP_HELLO header with a 4-byte option (NOP NOP NOP EOL) inserted; IHL 6.
    let orig = &testdata::UDP_HELLO[ETH_LEN..];
    let mut b = Vec::new();
    b.extend_from_slice(&orig[..20]);
    b.extend_from_slice(&[1, 1, 1, 0]);
    b.extend_from_slice(&orig[20..]);
    b[0] = 0x46;
    let total = (b.len() as u16).to_be_bytes();
    b[2..4].copy_from_slice(&total);
    let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
    p.fill_checksum();
    let p = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.options(), &[1, 1, 1, 0]);
    assert_eq!(p.payload(), &orig[20..]);
    let r = Ipv4Repr::parse(&p, RxChecksum::Verify).unwrap();
    assert_eq!(r, Ipv4Repr::parse(&Ipv4Packet::new_checked(orig).unwrap(), RxChecksum::Verify).unwrap());
}

#[test]
fn ethernet_padding_is_not_payload() {
    let mut b = testdata::UDP_HELLO[ETH_LEN..].to_vec();
    let real = b.len();
    b.extend_from_slice(&[0xee; 6]);
    let p = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.payload().len(), real - HEADER_LEN);
}

#[test]
fn fragment_fields_parse_and_emit() {
    // MF set, offset 185 units = 1480 bytes (RFC 791 §3.1: offset counts 8-byte units).
    let mut r = Ipv4Repr::parse(&ip_of(testdata::UDP_HELLO), RxChecksum::Verify).unwrap();
    r.dont_frag = false;
    r.more_frags = true;
    r.frag_offset = 1480;
    let mut b = vec![0u8; HEADER_LEN + r.payload_len];
    r.emit(&mut b).unwrap();
    assert_eq!(&b[6..8], &[0x20, 185]);
    let p = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!((p.more_frags(), p.dont_frag(), p.frag_offset()), (true, false, 1480));
    assert!(Ipv4Repr::parse(&p, RxChecksum::Verify).unwrap().is_fragment());
}

#[test]
fn emit_rejects_unaligned_offset_oversize_and_short_buffer() {
    let mut r = Ipv4Repr::parse(&ip_of(testdata::UDP_HELLO), RxChecksum::Verify).unwrap();
    assert_eq!(r.emit(&mut [0u8; 19]), Err(Error::Truncated));
    r.frag_offset = 12;
    assert_eq!(r.emit(&mut [0u8; 20]), Err(Error::Malformed));
    r.frag_offset = 0;
    r.payload_len = 65516;
    assert_eq!(r.emit(&mut [0u8; 20]), Err(Error::Malformed));
    r.payload_len = 65515;
    assert_eq!(r.emit(&mut [0u8; 20]), Ok(20));
}

#[test]
fn set_ttl_patches_checksum_incrementally() {
    let mut b = testdata::UDP_HELLO[ETH_LEN..].to_vec();
    let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
    p.set_ttl(p.ttl() - 1);
    assert!(p.verify_checksum());
    let incremental = p.checksum();
    p.fill_checksum();
    assert_eq!(p.checksum(), incremental);
}

#[test]
fn parse_quoted_accepts_truncated_datagram() {
    let b = &testdata::UDP_DF_1400[ETH_LEN..ETH_LEN + 28];
    let (r, payload) = Ipv4Repr::parse_quoted(b).unwrap();
    assert_eq!(r.payload_len, 1408);
    assert_eq!(payload.len(), 8);
    assert_eq!(Ipv4Repr::parse_quoted(&b[..19]), Err(Error::Truncated));
}

#[test]
fn protocol_round_trips_through_u8() {
    for v in 0..=255u8 {
        assert_eq!(u8::from(IpProtocol::from(v)), v);
    }
}
