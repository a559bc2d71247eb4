use super::*;
use crate::ethernet::HEADER_LEN as ETH_LEN;
use crate::ipv4::{IpProtocol, Ipv4Packet};
use crate::testdata;
use crate::udp::UdpPacket;
use std::net::Ipv4Addr;

/// The ICMP message of a captured frame (Ethernet + 20-byte IP header).
fn icmp_bytes(frame: &[u8]) -> &[u8] {
    let ip = Ipv4Packet::new_checked(&frame[ETH_LEN..]).unwrap();
    assert_eq!(ip.protocol(), IpProtocol::Icmp);
    &frame[ETH_LEN + ip.header_len()..ETH_LEN + usize::from(ip.total_len())]
}

fn parse(b: &[u8]) -> Result<Icmpv4Repr<'_>> {
    Icmpv4Repr::parse(&Icmpv4Packet::new_checked(b)?, RxChecksum::Verify)
}

#[test]
fn captured_echo_request_and_reply() {
    let req = parse(icmp_bytes(testdata::ICMP_ECHO_REQUEST)).unwrap();
    let data: Vec<u8> = (0x10..0x30).collect();
    assert_eq!(req, Icmpv4Repr::EchoRequest { ident: 0x4242, seq_no: 1, data: &data });
    let rep = parse(icmp_bytes(testdata::ICMP_ECHO_REPLY)).unwrap();
    assert_eq!(rep, Icmpv4Repr::EchoReply { ident: 0x4242, seq_no: 1, data: &data });
}

#[test]
fn captured_port_unreachable_quotes_the_udp_datagram() {
    let r = parse(icmp_bytes(testdata::ICMP_PORT_UNREACHABLE)).unwrap();
    let Icmpv4Repr::DstUnreachable { code, next_hop_mtu, .. } = r else { panic!("{r:?}") };
    assert_eq!((code, next_hop_mtu), (UnreachableCode::PORT, 0));
    assert!(code.is_hard());
    let (ip, payload) = r.quoted().unwrap();
    assert_eq!(ip.protocol, IpProtocol::Udp);
    assert_eq!(ip.src_addr, Ipv4Addr::new(10, 9, 1, 2));
    assert_eq!(ip.dst_addr, Ipv4Addr::new(10, 9, 2, 2));
    // The quoted UDP header names the socket that sent the datagram.
    let sent = UdpPacket::new_checked(&testdata::UDP_TO_CLOSED_PORT[ETH_LEN + 20..]).unwrap();
    assert_eq!(&payload[..8], &testdata::UDP_TO_CLOSED_PORT[ETH_LEN + 20..ETH_LEN + 28]);
    assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), sent.src_port());
    assert_eq!(u16::from_be_bytes([payload[2], payload[3]]), 9);
}

#[test]
fn captured_time_exceeded_from_router() {
    let r = parse(icmp_bytes(testdata::ICMP_TIME_EXCEEDED)).unwrap();
    let Icmpv4Repr::TimeExceeded { code, .. } = r else { panic!("{r:?}") };
    assert_eq!(code, TimeExceededCode::TTL_IN_TRANSIT);
    let (ip, payload) = r.quoted().unwrap();
    assert_eq!(ip.ttl, 1, "Linux quotes the header as it arrived, before the decrement");
    assert_eq!(u16::from_be_bytes([payload[2], payload[3]]), 33434);
}

#[test]
fn captured_frag_needed_carries_next_hop_mtu() {
    let r = parse(icmp_bytes(testdata::ICMP_FRAG_NEEDED)).unwrap();
    let Icmpv4Repr::DstUnreachable { code, next_hop_mtu, invoking } = r else { panic!("{r:?}") };
    assert_eq!(code, UnreachableCode::FRAG_NEEDED);
    assert_eq!(next_hop_mtu, 1280);
    let (ip, payload) = r.quoted().unwrap();
    assert!(ip.dont_frag);
    assert_eq!(ip.payload_len, 1408);
    // Linux quotes as much as fits in a 576-byte ICMP datagram (RFC 1812 §4.3.2.3).
    assert_eq!(20 + HEADER_LEN + invoking.len(), 576);
    assert!(payload.len() > 8);
}

#[test]
fn captured_messages_round_trip_byte_exact() {
    for frame in [
        testdata::ICMP_ECHO_REQUEST,
        testdata::ICMP_ECHO_REPLY,
        testdata::ICMP_PORT_UNREACHABLE,
        testdata::ICMP_TIME_EXCEEDED,
        testdata::ICMP_FRAG_NEEDED,
    ] {
        let b = icmp_bytes(frame);
        let r = parse(b).unwrap();
        let mut out = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut out), Ok(b.len()));
        assert_eq!(out, b);
    }
}

#[test]
fn corrupted_checksum_is_rejected() {
    let mut b = icmp_bytes(testdata::ICMP_ECHO_REPLY).to_vec();
    b[9] ^= 0x40;
    let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!(Icmpv4Repr::parse(&p, RxChecksum::Verify), Err(Error::Checksum));
    assert!(Icmpv4Repr::parse(&p, RxChecksum::Skip).is_ok());
}

#[test]
fn every_truncation_is_an_error() {
    let b = icmp_bytes(testdata::ICMP_PORT_UNREACHABLE);
    for n in 0..b.len() {
        match Icmpv4Packet::new_checked(&b[..n]) {
            Err(e) => assert_eq!(e, Error::Truncated),
            // Long enough for the header: the checksum no longer matches.
            Ok(p) => assert!(Icmpv4Repr::parse(&p, RxChecksum::Verify).is_err(), "len {n}"),
        }
    }
}

#[test]
fn error_quoting_less_than_header_plus_8_bytes_is_malformed() {
    // RFC 792 requires the IP header and 64 bits of the original datagram.
    let b = icmp_bytes(testdata::ICMP_PORT_UNREACHABLE);
    let r = parse(b).unwrap();
    let Icmpv4Repr::DstUnreachable { invoking, .. } = r else { unreachable!() };
    for cut in [0, 10, 20, 27] {
        let short = Icmpv4Repr::DstUnreachable { code: UnreachableCode::PORT, next_hop_mtu: 0, invoking: &invoking[..cut] };
        let mut out = vec![0u8; short.buffer_len()];
        short.emit(&mut out).unwrap();
        assert_eq!(parse(&out), Err(Error::Malformed), "cut {cut}");
    }
}

#[test]
fn unknown_type_is_unsupported() {
    // A timestamp request (type 13) with a valid checksum.
    let mut b = [13u8, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0];
    let c = crate::checksum::checksum(&b);
    b[2..4].copy_from_slice(&c.to_be_bytes());
    assert_eq!(parse(&b), Err(Error::Unsupported));
}

#[test]
fn next_hop_mtu_is_ignored_for_other_unreachable_codes() {
    let mut b = icmp_bytes(testdata::ICMP_FRAG_NEEDED).to_vec();
    b[1] = 1; // host unreachable; the MTU bytes are now "unused"
    let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
    let r = Icmpv4Repr::parse(&p, RxChecksum::Skip).unwrap();
    assert!(matches!(r, Icmpv4Repr::DstUnreachable { code: UnreachableCode::HOST, next_hop_mtu: 0, .. }));
}

#[test]
fn emit_into_short_buffer_is_truncated() {
    let r = Icmpv4Repr::EchoRequest { ident: 1, seq_no: 2, data: b"abc" };
    assert_eq!(r.emit(&mut [0u8; 10]), Err(Error::Truncated));
    let mut out = [0u8; 11];
    assert_eq!(r.emit(&mut out), Ok(11));
    assert_eq!(parse(&out), Ok(r));
}
