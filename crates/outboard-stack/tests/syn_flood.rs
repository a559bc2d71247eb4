//! A SYN flood from thousands of spoofed sources: the SYN queue stays at its
//! cap, SYN cookies answer the rest, memory stays bounded, and a legitimate
//! client still connects (through a cookie) and moves data.
mod common;

use common::*;
use outboard_stack::Stack;
use outboard_tcp::State;
use outboard_time::Duration;
use outboard_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use std::net::{Ipv4Addr, SocketAddrV4};

const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);
const SYN_QUEUE: usize = 32;
const BUFFERS: usize = 16 * 1024;

fn spoofed_syn(i: u32) -> Vec<u8> {
    let src = Ipv4Addr::new(172, 16, (i >> 8) as u8, i as u8);
    let syn = TcpRepr {
        src_port: 1024 + (i % 60000) as u16,
        dst_port: 80,
        seq: SeqNumber(i.wrapping_mul(2_654_435_761)),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            ..TcpOptions::default()
        },
    };
    tcp_frame(src, IP_B, &syn, &[], MAC_B, MAC_PEER)
}

fn flood(s: &mut Stack, now: outboard_time::Instant, range: std::ops::Range<u32>) {
    for i in range {
        s.receive_frame(now, &spoofed_syn(i));
    }
}

#[test]
fn syn_flood_is_bounded_by_syn_cookies_and_a_real_client_still_connects() {
    let a = cfg(MAC_A, IP_A, 1);
    let mut b = cfg(MAC_B, IP_B, 2);
    b.gateway = Some(GATEWAY);
    b.syn_queue_cap = SYN_QUEUE;
    b.tcp.send_buffer = BUFFERS;
    b.tcp.recv_buffer = BUFFERS;
    let mut p = Pair::with(a, b);
    let now = p.now;
    teach_arp(&mut p.b, now, MAC_PEER, GATEWAY);
    let l = p.b.tcp_listen(80, 16).unwrap();

    // The flood: 5 000 SYNs, replies drained as a NIC would.
    for batch in 0..50u32 {
        flood(&mut p.b, now, batch * 100..batch * 100 + 100);
        drain(&mut p.b, now);
    }
    let st = p.b.stats().clone();
    assert_eq!(st.tcp_syn_queue_adds, SYN_QUEUE as u64);
    assert_eq!(st.tcp_syncookies_sent, 5000 - SYN_QUEUE as u64);
    assert_eq!(
        p.b.tcp_connections().len(),
        SYN_QUEUE,
        "only the SYN queue holds state"
    );
    let per_conn = 1024 + 2 * BUFFERS;
    let bound = SYN_QUEUE * per_conn + 64 * 1024;
    assert!(
        p.b.memory_in_use() <= bound,
        "{} bytes in use, bound {bound}",
        p.b.memory_in_use()
    );

    // A legitimate client connects while the flood goes on.
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut next = 5000u32;
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(10), |p| {
        let now = p.now;
        flood(&mut p.b, now, next..next + 20);
        next += 20;
        cb = cb.or_else(|| p.b.tcp_accept(l));
        assert!(p.b.memory_in_use() <= bound + per_conn);
        cb.is_some() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    assert!(
        p.b.stats().tcp_syncookies_accepted >= 1,
        "the client got in through a cookie"
    );
    let cb = cb.unwrap();

    // And data flows both ways.
    p.a.tcp(ca)
        .unwrap()
        .send(b"GET / HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(10), |p| {
        let mut buf = [0u8; 64];
        if let Ok(n) = p.b.tcp(cb).unwrap().recv(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        got.len() == 18
    }));
    assert_eq!(&got, b"GET / HTTP/1.0\r\n\r\n");
    p.b.tcp(cb).unwrap().send(b"200 OK").unwrap();
    let mut reply = [0u8; 16];
    assert!(p.run_until(Duration::from_secs(10), |p| p
        .a
        .tcp(ca)
        .unwrap()
        .recv(&mut reply)
        == Ok(6)));

    // The embryonic connections time out and are freed; memory returns.
    assert!(
        p.run_until(Duration::from_secs(600), |p| p.b.tcp_connections().len()
            == 1)
    );
    assert!(
        p.b.memory_in_use() <= per_conn + 16 * 1024,
        "{}",
        p.b.memory_in_use()
    );
}

#[test]
fn forged_cookie_ack_is_reset_not_accepted() {
    let mut b = cfg(MAC_B, IP_B, 2);
    b.syn_queue_cap = 0;
    let mut s = Stack::new(b, t(0));
    teach_arp(&mut s, t(0), MAC_PEER, IP_PEER);
    let l = s.tcp_listen(80, 4).unwrap();
    // One real SYN so cookies are "recently sent".
    let syn = TcpRepr {
        src_port: 4000,
        dst_port: 80,
        seq: SeqNumber(1000),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            ..TcpOptions::default()
        },
    };
    s.receive_frame(t(1), &tcp_frame(IP_PEER, IP_B, &syn, &[], MAC_B, MAC_PEER));
    assert_eq!(drain(&mut s, t(1)).len(), 1, "a cookie SYN-ACK");
    let forged = TcpRepr {
        seq: SeqNumber(1001),
        ack: SeqNumber(0xdead_beef),
        flags: TcpFlags::ACK,
        options: TcpOptions::default(),
        ..syn
    };
    s.receive_frame(
        t(2),
        &tcp_frame(IP_PEER, IP_B, &forged, &[], MAC_B, MAC_PEER),
    );
    assert_eq!(s.stats().tcp_syncookies_failed, 1);
    assert_eq!(s.stats().tcp_resets_out, 1);
    assert_eq!(s.tcp_accept(l), None);
    assert!(s.tcp_connections().is_empty());
}

#[test]
fn bare_ack_to_a_listener_without_recent_cookies_is_reset() {
    let mut s = Stack::new(cfg(MAC_B, IP_B, 2), t(0));
    teach_arp(&mut s, t(0), MAC_PEER, IP_PEER);
    s.tcp_listen(80, 4).unwrap();
    let ack = TcpRepr {
        src_port: 4000,
        dst_port: 80,
        seq: SeqNumber(1),
        ack: SeqNumber(77),
        flags: TcpFlags::ACK,
        window: 100,
        urgent: 0,
        options: TcpOptions::default(),
    };
    s.receive_frame(t(1), &tcp_frame(IP_PEER, IP_B, &ack, &[], MAC_B, MAC_PEER));
    assert_eq!(s.stats().tcp_syncookies_failed, 0, "no cookie was checked");
    let out = drain(&mut s, t(1));
    assert_eq!(out.len(), 1);
    assert_eq!(s.stats().tcp_resets_out, 1);
}
