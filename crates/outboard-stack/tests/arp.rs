//! ARP through the whole stack: answering, learning, resolving with a
//! pending queue, retry and give-up.
mod common;

use common::*;
use outboard_stack::Stack;
use outboard_time::Duration;
use outboard_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use outboard_wire::ethernet::{EtherType, EthernetFrame};
use std::net::SocketAddrV4;

fn parse_arp(frame: &[u8]) -> ArpRepr {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.ethertype(), EtherType::Arp);
    ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap()).unwrap()
}

#[test]
fn rfc826_request_for_our_address_gets_a_reply_and_teaches_the_sender() {
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    s.receive_frame(
        t(0),
        &arp_frame(
            ArpOperation::Request,
            MAC_PEER,
            IP_PEER,
            [0; 6],
            IP_A,
            [0xff; 6],
        ),
    );
    let out = drain(&mut s, t(0));
    assert_eq!(out.len(), 1);
    let eth = EthernetFrame::new_checked(&out[0][..]).unwrap();
    assert_eq!(eth.dst_addr().0, MAC_PEER, "reply is unicast to the asker");
    assert_eq!(eth.src_addr().0, MAC_A);
    let r = parse_arp(&out[0]);
    assert_eq!(r.operation, ArpOperation::Reply);
    assert_eq!(
        (r.source_hardware_addr.0, r.source_protocol_addr),
        (MAC_A, IP_A)
    );
    assert_eq!(
        (r.target_hardware_addr.0, r.target_protocol_addr),
        (MAC_PEER, IP_PEER)
    );
    assert_eq!(s.stats().arp_replies_out, 1);
    assert_eq!(s.arp_entries(), 1, "the asker was learned (RFC 826 merge)");
    // Learned: a datagram to the peer goes straight out, no request.
    let u = s.udp_bind(5000).unwrap();
    s.udp_send_to(t(1), u, SocketAddrV4::new(IP_PEER, 7), b"hi")
        .unwrap();
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 1);
    assert_eq!(
        EthernetFrame::new_checked(&out[0][..])
            .unwrap()
            .dst_addr()
            .0,
        MAC_PEER
    );
}

#[test]
fn request_for_another_address_is_not_answered_nor_learned() {
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    s.receive_frame(
        t(0),
        &arp_frame(
            ArpOperation::Request,
            MAC_PEER,
            IP_PEER,
            [0; 6],
            IP_B,
            [0xff; 6],
        ),
    );
    assert!(drain(&mut s, t(0)).is_empty());
    assert_eq!(s.arp_entries(), 0);
    assert_eq!(s.stats().arp_requests_in, 1);
}

#[test]
fn unresolved_next_hop_queues_frames_and_reply_flushes_them() {
    let mut c = cfg(MAC_A, IP_A, 1);
    c.arp_pending_cap = 3;
    let mut s = Stack::new(c, t(0));
    let u = s.udp_bind(5000).unwrap();
    for i in 0..5u8 {
        s.udp_send_to(t(0), u, SocketAddrV4::new(IP_PEER, 7), &[i; 10])
            .unwrap();
    }
    let out = drain(&mut s, t(0));
    assert_eq!(out.len(), 1, "only the ARP request goes out");
    let req = parse_arp(&out[0]);
    assert_eq!(req.operation, ArpOperation::Request);
    assert_eq!(req.target_protocol_addr, IP_PEER);
    assert_eq!(
        EthernetFrame::new_checked(&out[0][..])
            .unwrap()
            .dst_addr()
            .0,
        [0xff; 6]
    );
    assert_eq!(
        s.stats().drops_arp_pending_full,
        2,
        "queue holds 3 per next hop"
    );
    assert!(s.memory_in_use() > 0);

    s.receive_frame(
        t(5),
        &arp_frame(ArpOperation::Reply, MAC_PEER, IP_PEER, MAC_A, IP_A, MAC_A),
    );
    let out = drain(&mut s, t(5));
    assert_eq!(out.len(), 3);
    for (i, f) in out.iter().enumerate() {
        assert_eq!(
            EthernetFrame::new_checked(&f[..]).unwrap().dst_addr().0,
            MAC_PEER
        );
        let (_, udp) = ip_of(f).unwrap();
        assert_eq!(&udp[8..], &[i as u8; 10], "in order");
    }
}

#[test]
fn unanswered_requests_are_retried_then_given_up() {
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    let u = s.udp_bind(5000).unwrap();
    s.udp_send_to(t(0), u, SocketAddrV4::new(IP_PEER, 7), b"x")
        .unwrap();
    let mut requests = drain(&mut s, t(0)).len();
    let mut now = t(0);
    while s.stats().arp_resolution_failures == 0 {
        let next = s.poll_timeout().expect("a retry is pending");
        now = next;
        s.handle_timeout(now);
        requests += drain(&mut s, now).len();
    }
    assert_eq!(requests, 3, "three requests, a second apart");
    assert_eq!(s.stats().arp_resolution_failures, 1);
    assert_eq!(
        s.stats().drops_arp_unresolved,
        1,
        "the waiting datagram is dropped"
    );
    assert_eq!(
        now,
        t(3000),
        "given up one interval after the third request"
    );
    // Held down briefly: new traffic is dropped without a new request.
    s.udp_send_to(now, u, SocketAddrV4::new(IP_PEER, 7), b"y")
        .unwrap();
    assert!(drain(&mut s, now).is_empty());
    assert_eq!(s.stats().drops_arp_unresolved, 2);
    // Later it tries again.
    let later = now + Duration::from_secs(2);
    s.handle_timeout(later);
    s.udp_send_to(later, u, SocketAddrV4::new(IP_PEER, 7), b"z")
        .unwrap();
    assert_eq!(drain(&mut s, later).len(), 1);
}

#[test]
fn arp_cache_respects_its_cap_under_a_flood_of_requests() {
    let mut c = cfg(MAC_A, IP_A, 1);
    c.arp_cache_cap = 8;
    let mut s = Stack::new(c, t(0));
    for i in 0..200u32 {
        let ip = std::net::Ipv4Addr::new(10, 0, 0, (i % 250 + 3) as u8);
        let mac = [2, 0, 0, 1, (i >> 8) as u8, i as u8];
        s.receive_frame(
            t(i as u64),
            &arp_frame(ArpOperation::Request, mac, ip, [0; 6], IP_A, [0xff; 6]),
        );
        drain(&mut s, t(i as u64));
        assert!(s.arp_entries() <= 8);
    }
    assert!(s.stats().arp_evictions > 0);
}

#[test]
fn arp_from_off_link_or_group_senders_is_ignored() {
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    let off = std::net::Ipv4Addr::new(192, 168, 0, 1);
    s.receive_frame(
        t(0),
        &arp_frame(
            ArpOperation::Request,
            MAC_PEER,
            off,
            [0; 6],
            IP_A,
            [0xff; 6],
        ),
    );
    s.receive_frame(
        t(0),
        &arp_frame(
            ArpOperation::Request,
            [0x01, 0, 0x5e, 0, 0, 1],
            IP_PEER,
            [0; 6],
            IP_A,
            [0xff; 6],
        ),
    );
    assert!(drain(&mut s, t(0)).is_empty());
    assert_eq!(s.arp_entries(), 0);
    assert_eq!(s.stats().drops_bad_source, 2);
}

#[test]
fn off_link_destinations_go_to_the_gateways_mac() {
    let mut c = cfg(MAC_A, IP_A, 1);
    c.gateway = Some(IP_PEER);
    let mut s = Stack::new(c, t(0));
    let u = s.udp_bind(5000).unwrap();
    let far = std::net::Ipv4Addr::new(8, 8, 8, 8);
    s.udp_send_to(t(0), u, SocketAddrV4::new(far, 53), b"q")
        .unwrap();
    let out = drain(&mut s, t(0));
    assert_eq!(
        parse_arp(&out[0]).target_protocol_addr,
        IP_PEER,
        "resolves the gateway, not the destination"
    );
    s.receive_frame(
        t(1),
        &arp_frame(ArpOperation::Reply, MAC_PEER, IP_PEER, MAC_A, IP_A, MAC_A),
    );
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][..6], &MAC_PEER);
    assert_eq!(ip_of(&out[0]).unwrap().0.dst_addr, far);
    // Without a gateway there is no route.
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    let u = s.udp_bind(5000).unwrap();
    s.udp_send_to(t(0), u, SocketAddrV4::new(far, 53), b"q")
        .unwrap();
    assert!(drain(&mut s, t(0)).is_empty());
    assert_eq!(s.stats().drops_no_route, 1);
}
