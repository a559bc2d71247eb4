//! A SYN flood from thousands of spoofed sources: the SYN queue stays at its
//! cap, SYN cookies answer the rest, memory stays bounded, and a legitimate
//! client still connects (through a cookie) and moves data. Memory is the
//! bytes really allocated: half-open (and TIME-WAIT) connections hold no
//! send or receive ring storage.
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
/// What one SYN-RECEIVED connection may cost in the table: its struct and
/// range tables, no ring storage (rings are allocated on first data).
const HALF_OPEN: usize = 4096;
/// ARP entry, listener, and whatever else a quiet stack holds.
const BASELINE: usize = 16 * 1024;

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
    let per_conn = HALF_OPEN + 2 * BUFFERS;
    let bound = SYN_QUEUE * HALF_OPEN + BASELINE;
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
        p.b.memory_in_use() <= per_conn + BASELINE,
        "{}",
        p.b.memory_in_use()
    );
}

#[test]
fn syn_flood_with_default_config_holds_under_1_mib() {
    // Default buffers (256 KiB each way) and SYN queue (128): eagerly
    // allocated rings would pin 64 MiB here.
    let mut b = cfg(MAC_B, IP_B, 2);
    b.gateway = Some(GATEWAY);
    let mut s = Stack::new(b, t(0));
    teach_arp(&mut s, t(0), MAC_PEER, GATEWAY);
    s.tcp_listen(80, 128).unwrap();
    let before = s.memory_in_use();
    for batch in 0..50u32 {
        flood(&mut s, t(1), batch * 100..batch * 100 + 100);
        drain(&mut s, t(1));
    }
    let queue = s.config().syn_queue_cap;
    let conns = s.tcp_connections();
    assert_eq!(conns.len(), queue);
    for (id, _, state, _) in conns {
        assert_eq!(state, State::SynReceived);
        let c = s.tcp(id).unwrap();
        assert_eq!(c.buffer_bytes(), (0, 0), "no ring storage while half-open");
        assert!(c.memory_in_use() < HALF_OPEN, "{}", c.memory_in_use());
    }
    drain(&mut s, t(1));
    let used = s.memory_in_use();
    assert!(used < 1024 * 1024, "{used} bytes in use after 5000 SYNs");
    assert!(
        used - before <= queue * HALF_OPEN,
        "{} bytes for {queue} half-open connections",
        used - before
    );
    // The figure is real, not a per-connection guess: it falls back as the
    // SYN-ACK retransmissions give up and the queue empties.
    let mut now = t(1);
    for _ in 0..10_000 {
        match s.poll_timeout() {
            Some(at) if !s.tcp_connections().is_empty() => {
                now = now.max(at);
                s.handle_timeout(now);
                drain(&mut s, now);
            }
            _ => break,
        }
    }
    assert!(s.tcp_connections().is_empty());
    assert!(s.memory_in_use() <= before, "{} > {before}", s.memory_in_use());
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

/// The other end of a connection's life: after a request/response exchange
/// the client closes first, and its connections sit in TIME-WAIT for 2·MSL.
/// They hold no ring storage, so they cost as little as half-open ones.
#[test]
fn time_wait_connections_hold_no_buffers() {
    const N: usize = 100;
    let mut p = Pair::new();
    let l = p.b.tcp_listen(80, N).unwrap();
    let clients: Vec<_> = (0..N)
        .map(|_| p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap())
        .collect();
    let mut servers = Vec::new();
    assert!(p.run_until(Duration::from_secs(10), |p| {
        while let Some(id) = p.b.tcp_accept(l) {
            servers.push(id);
        }
        servers.len() == N
            && clients
                .iter()
                .all(|&c| p.a.tcp(c).unwrap().state() == State::Established)
    }));
    for &c in &clients {
        p.a.tcp(c).unwrap().send(b"ping").unwrap();
    }
    for &s in &servers {
        p.b.tcp(s).unwrap().send(b"pong").unwrap();
    }
    let mut pongs = 0;
    assert!(p.run_until(Duration::from_secs(10), |p| {
        for &c in &clients {
            let mut buf = [0u8; 8];
            if p.a.tcp(c).unwrap().recv(&mut buf) == Ok(4) {
                pongs += 1;
            }
        }
        pongs == N
    }));
    // Both rings of every client connection are in use now (at their
    // smallest storage: four bytes each way).
    let busy = p.a.memory_in_use();
    assert!(busy >= N * 2 * 4096, "{busy}");
    for &c in &clients {
        p.a.tcp(c).unwrap().close();
    }
    let mut closed = 0;
    assert!(p.run_until(Duration::from_secs(10), |p| {
        for &s in &servers {
            // The server reads the request, then closes at end of stream.
            let c = p.b.tcp(s).unwrap();
            let mut buf = [0u8; 8];
            while let Ok(n @ 1..) = c.recv(&mut buf) {
                assert_eq!(&buf[..n], b"ping");
            }
            if c.recv(&mut buf) == Ok(0) {
                c.close();
            }
        }
        closed = clients
            .iter()
            .filter(|&&c| p.a.tcp(c).unwrap().state() == State::TimeWait)
            .count();
        closed == N
    }));
    for &c in &clients {
        assert_eq!(p.a.tcp(c).unwrap().buffer_bytes(), (0, 0));
        p.a.tcp_release(c);
    }
    let held = p.a.memory_in_use();
    assert!(
        held <= N * HALF_OPEN + BASELINE,
        "{N} TIME-WAIT connections hold {held} bytes"
    );
}
