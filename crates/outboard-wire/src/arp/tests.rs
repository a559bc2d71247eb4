use std::net::Ipv4Addr;
use super::*;
use crate::ethernet::{EtherType, EthernetFrame, EthernetRepr, HEADER_LEN as ETH_LEN};
use crate::testdata;

fn arp_of(frame: &[u8]) -> ArpRepr {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.ethertype(), EtherType::Arp);
    ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap()).unwrap()
}

#[test]
fn captured_linux_request_parses() {
    let r = arp_of(testdata::ARP_REQUEST);
    assert_eq!(r.operation, ArpOperation::Request);
    assert_eq!(r.source_protocol_addr, Ipv4Addr::new(10, 9, 1, 2));
    assert_eq!(r.target_protocol_addr, Ipv4Addr::new(10, 9, 1, 1));
    // RFC 826: the target hardware address of a request is unknown; Linux sends zeros.
    assert_eq!(r.target_hardware_addr, EthernetAddress::ZERO);
    let eth = EthernetRepr::parse(&EthernetFrame::new_checked(testdata::ARP_REQUEST).unwrap()).unwrap();
    assert!(eth.dst_addr.is_broadcast());
    assert_eq!(eth.src_addr, r.source_hardware_addr);
}

#[test]
fn captured_linux_reply_answers_the_request() {
    let req = arp_of(testdata::ARP_REQUEST);
    let rep = arp_of(testdata::ARP_REPLY);
    assert_eq!(rep.operation, ArpOperation::Reply);
    assert_eq!(rep.source_protocol_addr, req.target_protocol_addr);
    assert_eq!(rep.target_protocol_addr, req.source_protocol_addr);
    assert_eq!(rep.target_hardware_addr, req.source_hardware_addr);
}

#[test]
fn captured_frames_round_trip_byte_exact() {
    for frame in [testdata::ARP_REQUEST, testdata::ARP_REPLY] {
        let eth = EthernetRepr::parse(&EthernetFrame::new_checked(frame).unwrap()).unwrap();
        let arp = arp_of(frame);
        let mut out = vec![0u8; ETH_LEN + arp.buffer_len()];
        eth.emit(&mut out).unwrap();
        assert_eq!(arp.emit(&mut out[ETH_LEN..]), Ok(PACKET_LEN));
        assert_eq!(out, frame);
    }
}

#[test]
fn every_truncation_is_an_error() {
    let payload = &testdata::ARP_REPLY[ETH_LEN..];
    for n in 0..PACKET_LEN {
        assert_eq!(ArpPacket::new_checked(&payload[..n]).err(), Some(Error::Truncated), "len {n}");
    }
}

#[test]
fn ethernet_padding_after_the_packet_is_ignored() {
    let mut padded = testdata::ARP_REPLY[ETH_LEN..].to_vec();
    padded.resize(46, 0); // minimum Ethernet payload
    assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&padded[..]).unwrap()).unwrap(), arp_of(testdata::ARP_REPLY));
}

#[test]
fn non_ethernet_ipv4_pairs_are_unsupported() {
    let base = testdata::ARP_REQUEST[ETH_LEN..].to_vec();
    for (at, v) in [(1usize, 6u8), (2, 0x86), (4, 8), (5, 16)] {
        let mut b = base.clone();
        b[at] = v;
        assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()), Err(Error::Unsupported), "byte {at}");
    }
}

#[test]
fn unknown_operation_round_trips() {
    let mut b = testdata::ARP_REQUEST[ETH_LEN..].to_vec();
    b[7] = 9;
    let r = ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()).unwrap();
    assert_eq!(r.operation, ArpOperation::Unknown(9));
    let mut out = [0u8; PACKET_LEN];
    r.emit(&mut out).unwrap();
    assert_eq!(&out[..], &b[..]);
}

#[test]
fn emit_into_short_buffer_is_truncated() {
    let r = arp_of(testdata::ARP_REQUEST);
    assert_eq!(r.emit(&mut [0u8; PACKET_LEN - 1]), Err(Error::Truncated));
}
