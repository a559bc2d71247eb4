use std::net::Ipv4Addr;
use super::*;
use crate::checksum::copy_and_checksum;
use crate::ethernet::HEADER_LEN as ETH_LEN;
use crate::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use crate::testdata;

/// (src, dst, UDP bytes) of a captured frame.
fn udp_of(frame: &[u8]) -> (Ipv4Addr, Ipv4Addr, &[u8]) {
    let ip = Ipv4Packet::new_checked(&frame[ETH_LEN..]).unwrap();
    let r = Ipv4Repr::parse(&ip, RxChecksum::Verify).unwrap();
    assert_eq!(r.protocol, IpProtocol::Udp);
    let start = ETH_LEN + ip.header_len();
    (r.src_addr, r.dst_addr, &frame[start..start + r.payload_len])
}

#[test]
fn captured_hello_parses() {
    let (src, dst, b) = udp_of(testdata::UDP_HELLO);
    let p = UdpPacket::new_checked(b).unwrap();
    let r = UdpRepr::parse(&p, src, dst, RxChecksum::Verify).unwrap();
    assert_eq!(r.dst_port, 7777);
    assert_eq!(p.payload(), b"hello outboard");
    assert_ne!(p.checksum(), 0);
}

#[test]
fn captured_datagrams_round_trip_byte_exact_both_ways() {
    for frame in testdata::ALL_UDP {
        let (src, dst, b) = udp_of(frame);
        let p = UdpPacket::new_checked(b).unwrap();
        let r = UdpRepr::parse(&p, src, dst, RxChecksum::Verify).unwrap();
        // Emit with the payload in place...
        let mut out = b.to_vec();
        out[..HEADER_LEN].fill(0);
        assert_eq!(r.emit(&mut out, src, dst, p.payload().len(), TxChecksum::Compute), Ok(HEADER_LEN));
        assert_eq!(out, b);
        // ...and through the one-copy path: copy-and-sum the payload, then emit with its sum.
        let mut out = vec![0u8; b.len()];
        let sum = copy_and_checksum(&mut out[HEADER_LEN..], p.payload());
        r.emit(&mut out, src, dst, p.payload().len(), TxChecksum::Payload(sum)).unwrap();
        assert_eq!(out, b);
    }
}

#[test]
fn receive_side_fused_verification_matches() {
    let (src, dst, b) = udp_of(testdata::UDP_HELLO);
    let p = UdpPacket::new_checked(b).unwrap();
    let mut app = vec![0u8; p.payload().len()];
    let sum = copy_and_checksum(&mut app, p.payload());
    assert!(p.verify_checksum_with(src, dst, sum));
    assert!(!p.verify_checksum_with(dst, Ipv4Addr::new(10, 9, 2, 3), sum));
}

#[test]
fn corrupted_payload_fails_checksum() {
    let (src, dst, b) = udp_of(testdata::UDP_HELLO);
    let mut b = b.to_vec();
    b[10] ^= 0x20;
    let p = UdpPacket::new_checked(&b[..]).unwrap();
    assert_eq!(UdpRepr::parse(&p, src, dst, RxChecksum::Verify), Err(Error::Checksum));
    assert!(UdpRepr::parse(&p, src, dst, RxChecksum::Skip).is_ok());
}

#[test]
fn zero_checksum_means_none() {
    // RFC 768: "An all zero transmitted checksum value means that the transmitter
    // generated no checksum".
    let (src, dst, b) = udp_of(testdata::UDP_HELLO);
    let mut b = b.to_vec();
    b[6..8].fill(0);
    b[10] ^= 0x20;
    let p = UdpPacket::new_checked(&b[..]).unwrap();
    assert!(UdpRepr::parse(&p, src, dst, RxChecksum::Verify).is_ok());
    let r = UdpRepr { src_port: 1, dst_port: 2 };
    let mut out = [0u8; 8];
    r.emit(&mut out, src, dst, 0, TxChecksum::Omit).unwrap();
    assert_eq!(&out[6..8], &[0, 0]);
}

#[test]
fn computed_zero_checksum_is_sent_as_ffff() {
    // Pick a payload word that makes the ones-complement sum 0xFFFF, so the checksum computes to 0.
    let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let r = UdpRepr { src_port: 1000, dst_port: 2000 };
    let mut buf = [0u8; 10];
    r.emit(&mut buf, src, dst, 2, TxChecksum::Compute).unwrap();
    let c = u16::from_be_bytes([buf[6], buf[7]]);
    // Adding the checksum value as payload makes the total sum 0xFFFF.
    buf[8..10].copy_from_slice(&c.to_be_bytes());
    r.emit(&mut buf, src, dst, 2, TxChecksum::Compute).unwrap();
    assert_eq!(&buf[6..8], &[0xff, 0xff]);
    assert!(UdpPacket::new_checked(&buf[..]).unwrap().verify_checksum(src, dst));
}

#[test]
fn every_truncation_is_an_error() {
    let (_, _, b) = udp_of(testdata::UDP_HELLO);
    for n in 0..b.len() {
        assert_eq!(UdpPacket::new_checked(&b[..n]).err(), Some(Error::Truncated), "len {n}");
    }
}

#[test]
fn length_below_header_is_malformed() {
    let (_, _, b) = udp_of(testdata::UDP_HELLO);
    let mut b = b.to_vec();
    b[4..6].copy_from_slice(&7u16.to_be_bytes());
    assert_eq!(UdpPacket::new_checked(&b[..]).err(), Some(Error::Malformed));
}

#[test]
fn destination_port_zero_is_malformed() {
    let (src, dst, b) = udp_of(testdata::UDP_HELLO);
    let mut b = b.to_vec();
    b[2..4].fill(0);
    let p = UdpPacket::new_checked(&b[..]).unwrap();
    assert_eq!(UdpRepr::parse(&p, src, dst, RxChecksum::Skip), Err(Error::Malformed));
}

#[test]
fn emit_checks_buffer_and_length() {
    let (src, dst) = (Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
    let r = UdpRepr { src_port: 1, dst_port: 2 };
    assert_eq!(r.emit(&mut [0u8; 7], src, dst, 0, TxChecksum::Omit), Err(Error::Truncated));
    // Compute needs the payload in the buffer.
    assert_eq!(r.emit(&mut [0u8; 8], src, dst, 4, TxChecksum::Compute), Err(Error::Truncated));
    assert_eq!(r.emit(&mut [0u8; 8], src, dst, 65528, TxChecksum::Omit), Err(Error::Malformed));
}
