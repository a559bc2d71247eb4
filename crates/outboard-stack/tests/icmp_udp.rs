//! ICMP and UDP through the whole stack, with frames built and checked by
//! the wire crate.
mod common;

use common::*;
use outboard_stack::{Stack, StackError};
use outboard_time::Duration;
use outboard_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr, TimeExceededCode, UnreachableCode};
use outboard_wire::ipv4::IpProtocol;
use outboard_wire::{RxChecksum, SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use std::net::SocketAddrV4;

fn stack() -> Stack {
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    teach_arp(&mut s, t(0), MAC_PEER, IP_PEER);
    s
}

fn icmp_of(frame: &[u8]) -> (outboard_wire::ipv4::Ipv4Repr, Vec<u8>) {
    let (ip, payload) = ip_of(frame).expect("an IPv4 frame");
    assert_eq!(ip.protocol, IpProtocol::Icmp);
    (ip, payload)
}

#[test]
fn rfc792_echo_request_gets_a_byte_exact_echo_reply() {
    let mut s = stack();
    let data: Vec<u8> = (0..56u8).collect();
    let req = icmp_bytes(&Icmpv4Repr::EchoRequest {
        ident: 0xbeef,
        seq_no: 7,
        data: &data,
    });
    s.receive_frame(
        t(1),
        &ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Icmp, req.len()),
            &req,
        ),
    );
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][..6], &MAC_PEER);
    let (ip, icmp) = icmp_of(&out[0]);
    assert_eq!((ip.src_addr, ip.dst_addr, ip.ttl), (IP_A, IP_PEER, 64));
    let expected = icmp_bytes(&Icmpv4Repr::EchoReply {
        ident: 0xbeef,
        seq_no: 7,
        data: &data,
    });
    assert_eq!(icmp, expected);
    assert_eq!(s.stats().icmp_echo_replies_out, 1);
}

#[test]
fn rfc1122_broadcast_echo_is_not_answered() {
    let mut s = stack();
    let req = icmp_bytes(&Icmpv4Repr::EchoRequest {
        ident: 1,
        seq_no: 1,
        data: b"x",
    });
    let bcast = std::net::Ipv4Addr::new(10, 0, 0, 255);
    s.receive_frame(
        t(1),
        &ip_frame(
            [0xff; 6],
            MAC_PEER,
            &ip_repr(IP_PEER, bcast, IpProtocol::Icmp, req.len()),
            &req,
        ),
    );
    assert!(drain(&mut s, t(1)).is_empty());
}

#[test]
fn rfc1122_udp_to_closed_port_yields_port_unreachable_quoting_the_datagram() {
    let mut s = stack();
    let f = udp_frame(IP_PEER, IP_A, 4000, 9, b"hello", MAC_A);
    s.receive_frame(t(1), &f);
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 1);
    let (ip, icmp) = icmp_of(&out[0]);
    assert_eq!(ip.dst_addr, IP_PEER);
    let p = Icmpv4Packet::new_checked(&icmp[..]).unwrap();
    let repr = Icmpv4Repr::parse(&p, RxChecksum::Verify).unwrap();
    let Icmpv4Repr::DstUnreachable { code, invoking, .. } = repr else {
        panic!("{repr:?}")
    };
    assert_eq!(code, UnreachableCode::PORT);
    assert_eq!(invoking, &f[14..], "the whole small datagram is quoted");
    assert_eq!(s.stats().udp_no_port, 1);
}

#[test]
fn port_unreachable_is_not_sent_for_broadcast_datagrams() {
    let mut s = stack();
    let bcast = std::net::Ipv4Addr::new(10, 0, 0, 255);
    s.receive_frame(
        t(1),
        &udp_frame(IP_PEER, bcast, 4000, 9, b"hello", [0xff; 6]),
    );
    assert!(drain(&mut s, t(1)).is_empty());
    assert_eq!(s.stats().udp_no_port, 1);
}

#[test]
fn rfc1812_icmp_errors_are_rate_limited() {
    let mut s = stack();
    for i in 0..500u16 {
        s.receive_frame(t(1), &udp_frame(IP_PEER, IP_A, 4000 + i, 9, b"x", MAC_A));
    }
    let sent = drain(&mut s, t(1)).len();
    assert!(sent <= 50 && sent > 0, "{sent} errors sent in one instant");
    assert_eq!(s.stats().icmp_rate_limited as usize, 500 - sent);
    // Tokens come back with time.
    s.receive_frame(t(100), &udp_frame(IP_PEER, IP_A, 4000, 9, b"x", MAC_A));
    assert_eq!(drain(&mut s, t(100)).len(), 1);
}

#[test]
fn udp_datagram_is_delivered_with_its_source() {
    let mut s = stack();
    let u = s.udp_bind(53).unwrap();
    s.receive_frame(t(1), &udp_frame(IP_PEER, IP_A, 4000, 53, b"query", MAC_A));
    let mut buf = [0u8; 64];
    assert_eq!(
        s.udp_recv_from(u, &mut buf),
        Ok((5, SocketAddrV4::new(IP_PEER, 4000).into()))
    );
    assert_eq!(&buf[..5], b"query");
    assert_eq!(s.udp_recv_from(u, &mut buf), Err(StackError::WouldBlock));
}

#[test]
fn corrupted_udp_checksum_is_dropped_and_counted() {
    let mut s = stack();
    let u = s.udp_bind(53).unwrap();
    let mut f = udp_frame(IP_PEER, IP_A, 4000, 53, b"query", MAC_A);
    let last = f.len() - 1;
    f[last] ^= 0x40;
    s.receive_frame(t(1), &f);
    assert_eq!(s.stats().drops_checksum, 1);
    assert_eq!(
        s.udp_recv_from(u, &mut [0u8; 8]),
        Err(StackError::WouldBlock)
    );
    assert!(
        drain(&mut s, t(1)).is_empty(),
        "no port unreachable for a corrupt datagram"
    );
}

#[test]
fn rfc1122_icmp_port_unreachable_makes_udp_recv_return_refused() {
    let mut s = stack();
    let u = s.udp_bind(5000).unwrap();
    s.udp_send_to(t(1), u, SocketAddrV4::new(IP_PEER, 9), b"ping")
        .unwrap();
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 1);
    let sent_ip = &out[0][14..];
    let err = icmp_bytes(&Icmpv4Repr::DstUnreachable {
        code: UnreachableCode::PORT,
        next_hop_mtu: 0,
        invoking: sent_ip,
    });
    s.receive_frame(
        t(2),
        &ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Icmp, err.len()),
            &err,
        ),
    );
    let mut buf = [0u8; 16];
    assert_eq!(s.udp_recv_from(u, &mut buf), Err(StackError::Refused));
    assert_eq!(
        s.udp_recv_from(u, &mut buf),
        Err(StackError::WouldBlock),
        "reported once"
    );
    assert_eq!(s.stats().icmp_errors_delivered, 1);
}

#[test]
fn large_udp_datagram_is_fragmented_and_fragments_reassemble() {
    let mut s = stack();
    let u = s.udp_bind(5000).unwrap();
    let data: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
    s.udp_send_to(t(1), u, SocketAddrV4::new(IP_PEER, 9), &data)
        .unwrap();
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 3, "4008 bytes at 1480 per fragment");
    for f in &out {
        assert!(f.len() <= 1514);
    }
    // Feed the fragments, reversed and re-addressed, to a second stack.
    let mut r = Stack::new(cfg(MAC_PEER, IP_PEER, 3), t(0));
    let ru = r.udp_bind(9).unwrap();
    for f in out.iter().rev() {
        let mut f = f.clone();
        f[..6].copy_from_slice(&MAC_PEER);
        r.receive_frame(t(2), &f);
    }
    let mut buf = vec![0u8; 5000];
    assert_eq!(
        r.udp_recv_from(ru, &mut buf),
        Ok((4000, SocketAddrV4::new(IP_A, 5000).into()))
    );
    assert_eq!(&buf[..4000], &data[..]);
    assert_eq!(r.stats().reassembled, 1);
    assert_eq!(r.reassembly_in_progress(), 0);
    assert_eq!(
        s.udp_send_to(t(3), u, SocketAddrV4::new(IP_PEER, 9), &vec![0; 70_000]),
        Err(StackError::MessageTooLong)
    );
}

#[test]
fn rfc1122_reassembly_timeout_sends_time_exceeded_when_fragment_zero_arrived() {
    let mut s = stack();
    let u = udp_bytes(IP_PEER, IP_A, 4000, 53, &[7u8; 64]);
    let mut ip = ip_repr(IP_PEER, IP_A, IpProtocol::Udp, 32);
    ip.more_frags = true;
    s.receive_frame(t(1), &ip_frame(MAC_A, MAC_PEER, &ip, &u[..32]));
    assert_eq!(s.reassembly_in_progress(), 1);
    let deadline = s.poll_timeout().unwrap();
    assert_eq!(deadline, t(1) + Duration::from_secs(30));
    s.handle_timeout(deadline);
    assert_eq!(s.reassembly_in_progress(), 0);
    let out = drain(&mut s, deadline);
    assert_eq!(out.len(), 1);
    let (_, icmp) = icmp_of(&out[0]);
    let p = Icmpv4Packet::new_checked(&icmp[..]).unwrap();
    let repr = Icmpv4Repr::parse(&p, RxChecksum::Verify).unwrap();
    assert!(
        matches!(
            repr,
            Icmpv4Repr::TimeExceeded {
                code: TimeExceededCode::REASSEMBLY,
                ..
            }
        ),
        "{repr:?}"
    );
    assert_eq!(s.stats().reassembly_timeouts, 1);
}

#[test]
fn unknown_protocol_gets_protocol_unreachable() {
    let mut s = stack();
    s.receive_frame(
        t(1),
        &ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Unknown(132), 8),
            &[0; 8],
        ),
    );
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 1);
    let (_, icmp) = icmp_of(&out[0]);
    assert_eq!((icmp[0], icmp[1]), (3, 2));
    assert_eq!(s.stats().drops_unknown_protocol, 1);
}

/// Connects `s` to the peer by hand: returns the connection and its ACK frame.
fn handshake(s: &mut Stack) -> (outboard_stack::ConnId, Vec<u8>) {
    let id = s.tcp_connect(t(1), SocketAddrV4::new(IP_PEER, 80)).unwrap();
    let out = drain(s, t(1));
    assert_eq!(out.len(), 1);
    let (_, seg) = ip_of(&out[0]).unwrap();
    let syn = TcpRepr::parse(
        &outboard_wire::TcpPacket::new_checked(&seg[..]).unwrap(),
        IP_A,
        IP_PEER,
        RxChecksum::Verify,
    )
    .unwrap();
    assert!(syn.flags.syn() && !syn.flags.ack());
    let synack = TcpRepr {
        src_port: 80,
        dst_port: syn.src_port,
        seq: SeqNumber(5000),
        ack: syn.seq + 1,
        flags: TcpFlags::SYN | TcpFlags::ACK,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            ..TcpOptions::default()
        },
    };
    s.receive_frame(
        t(2),
        &tcp_frame(IP_PEER, IP_A, &synack, &[], MAC_A, MAC_PEER),
    );
    let out = drain(s, t(2));
    assert_eq!(out.len(), 1, "the handshake's ACK");
    (id, out[0].clone())
}

#[test]
fn rfc1191_frag_needed_lowers_the_connections_mss() {
    let mut s = stack();
    let (id, ack) = handshake(&mut s);
    let before = s.tcp(id).unwrap().stats().send_mss;
    assert!(before >= 1400, "{before}");
    let err = icmp_bytes(&Icmpv4Repr::DstUnreachable {
        code: UnreachableCode::FRAG_NEEDED,
        next_hop_mtu: 1000,
        invoking: &ack[14..],
    });
    s.receive_frame(
        t(3),
        &ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Icmp, err.len()),
            &err,
        ),
    );
    assert_eq!(s.stats().icmp_errors_delivered, 1);
    let after = s.tcp(id).unwrap().stats().send_mss;
    assert!(after <= 1000 - 40, "MSS {before} -> {after}");
}

#[test]
fn icmp_error_for_an_unknown_connection_is_counted_unmatched() {
    let mut s = stack();
    let (_, ack) = handshake(&mut s);
    let mut quoted = ack[14..].to_vec();
    quoted[20] ^= 0xff; // another source port
    let err = icmp_bytes(&Icmpv4Repr::DstUnreachable {
        code: UnreachableCode::HOST,
        next_hop_mtu: 0,
        invoking: &quoted,
    });
    s.receive_frame(
        t(3),
        &ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Icmp, err.len()),
            &err,
        ),
    );
    assert_eq!(s.stats().icmp_errors_unmatched, 1);
}

#[test]
fn rfc9293_segment_to_closed_port_is_answered_with_rst() {
    let mut s = stack();
    let syn = TcpRepr {
        src_port: 40000,
        dst_port: 81,
        seq: SeqNumber(100),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 1000,
        urgent: 0,
        options: TcpOptions::default(),
    };
    s.receive_frame(t(1), &tcp_frame(IP_PEER, IP_A, &syn, &[], MAC_A, MAC_PEER));
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 1);
    let (_, seg) = ip_of(&out[0]).unwrap();
    let rst = TcpRepr::parse(
        &outboard_wire::TcpPacket::new_checked(&seg[..]).unwrap(),
        IP_A,
        IP_PEER,
        RxChecksum::Verify,
    )
    .unwrap();
    assert_eq!(rst.flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!(rst.ack, SeqNumber(101));
    assert_eq!(s.stats().tcp_resets_out, 1);
}

#[test]
fn rfc5927_frag_needed_cannot_shrink_the_mss_below_the_floor() {
    let mut s = stack();
    let (id, ack) = handshake(&mut s);
    let err = icmp_bytes(&Icmpv4Repr::DstUnreachable {
        code: UnreachableCode::FRAG_NEEDED,
        next_hop_mtu: 68,
        invoking: &ack[14..],
    });
    s.receive_frame(
        t(3),
        &ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Icmp, err.len()),
            &err,
        ),
    );
    let mss = s.tcp(id).unwrap().stats().send_mss;
    assert!(
        (500..=512).contains(&mss),
        "MSS {mss} for a claimed MTU of 68"
    );
}

#[test]
fn fragment_flood_keeps_stack_memory_under_the_reassembly_cap() {
    let mut c = cfg(MAC_A, IP_A, 1);
    c.reassembly_mem_cap = 32 * 1024;
    let mut s = Stack::new(c, t(0));
    teach_arp(&mut s, t(0), MAC_PEER, IP_PEER);
    let base = s.memory_in_use();
    let junk = [0x11u8; 1024];
    for i in 0..5000u16 {
        let mut ip = ip_repr(IP_PEER, IP_A, IpProtocol::Udp, 1024);
        ip.ident = i;
        ip.more_frags = true;
        ip.frag_offset = (i % 60) * 1024;
        s.receive_frame(t(1), &ip_frame(MAC_A, MAC_PEER, &ip, &junk));
        assert!(
            s.memory_in_use() <= base + 32 * 1024,
            "{}",
            s.memory_in_use()
        );
    }
    assert!(s.stats().reassembly_evictions > 4000);
    assert!(drain(&mut s, t(1)).is_empty(), "nothing to answer");
}
