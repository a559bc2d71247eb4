//! Two stacks wired back to back on virtual time: ARP, ping, UDP and TCP
//! end to end, frames passing between them in a loop.
mod common;

use common::*;
use outboard_stack::{ConnId, Stack, StackError};
use outboard_tcp::State;
use outboard_time::Duration;
use std::net::SocketAddrV4;

fn read_all(s: &mut Stack, id: ConnId, out: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 8192];
    let Some(c) = s.tcp(id) else { return true };
    loop {
        match c.recv(&mut buf) {
            Ok(0) => return true,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return false,
        }
    }
}

#[test]
fn arp_then_ping_between_two_stacks() {
    let mut p = Pair::new();
    p.a.icmp_echo_request(p.now, IP_B, 42, 1, b"are you there")
        .unwrap();
    assert!(
        p.run_until(Duration::from_secs(1), |p| p.a.stats().icmp_echo_replies_in
            == 1)
    );
    let r = p.a.poll_echo_reply().unwrap();
    assert_eq!((r.from, r.ident, r.seq_no, r.data_len), (IP_B.into(), 42, 1, 13));
    assert_eq!(p.a.stats().arp_requests_out, 1);
    assert_eq!(p.b.stats().arp_replies_out, 1);
    assert_eq!(
        p.b.stats().arp_requests_out,
        0,
        "B learned A from its request"
    );
    assert_eq!(p.b.stats().icmp_echo_replies_out, 1);
}

#[test]
fn udp_round_trip_between_two_stacks_including_a_fragmented_datagram() {
    let mut p = Pair::new();
    let ua = p.a.udp_bind(0).unwrap();
    let ub = p.b.udp_bind(7).unwrap();
    let pa = p.a.udp_local_port(ua).unwrap();
    assert!((32768..=60999).contains(&pa), "ephemeral port {pa}");
    let big: Vec<u8> = (0..20_000u32).map(|i| (i * 13) as u8).collect();
    p.a.udp_send_to(p.now, ua, SocketAddrV4::new(IP_B, 7), b"small")
        .unwrap();
    p.a.udp_send_to(p.now, ua, SocketAddrV4::new(IP_B, 7), &big)
        .unwrap();
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(1), |p| {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = p.b.udp_recv_from(ub, &mut buf) {
            assert_eq!(from, SocketAddrV4::new(IP_A, pa).into());
            got.push(buf[..n].to_vec());
        }
        got.len() == 2
    }));
    assert_eq!(got[0], b"small");
    assert_eq!(got[1], big);
    // Echo back to the ephemeral port.
    p.b.udp_send_to(p.now, ub, SocketAddrV4::new(IP_A, pa), b"reply")
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(p.run_until(Duration::from_secs(1), |p| p
        .a
        .udp_recv_from(ua, &mut buf)
        .is_ok()));
    assert_eq!(&buf[..5], b"reply");
}

#[test]
fn udp_to_a_closed_port_on_the_peer_reports_refused() {
    let mut p = Pair::new();
    let ua = p.a.udp_bind(5000).unwrap();
    p.a.udp_send_to(p.now, ua, SocketAddrV4::new(IP_B, 9), b"anyone?")
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(
        p.run_until(Duration::from_secs(1), |p| p.a.udp_recv_from(ua, &mut buf)
            == Err(StackError::Refused))
    );
}

/// A connects to B, sends `len` bytes, B checks them; both close; returns the pair.
fn transfer(mut p: Pair, len: usize) -> Pair {
    let l = p.b.tcp_listen(80, 8).unwrap();
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    let cb = cb.unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i * 31 % 256) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut closed = false;
    assert!(
        p.run_until(Duration::from_secs(120), |p| {
            let c = p.a.tcp(ca).unwrap();
            if sent < data.len() {
                sent += c.send(&data[sent..]).unwrap_or(0);
            } else if !closed {
                c.close();
                closed = true;
            }
            read_all(&mut p.b, cb, &mut got)
        }),
        "transfer stalled at {} of {len} bytes",
        got.len()
    );
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    p.b.tcp(cb).unwrap().close();
    p.a.tcp_release(ca);
    p.b.tcp_release(cb);
    p
}

#[test]
fn tcp_transfer_between_two_stacks_then_both_sides_free_their_connections() {
    let mut p = transfer(Pair::new(), 2_000_000);
    assert!(p.a.stats().tcp_segments_out > 1000);
    assert_eq!(p.b.stats().tcp_connections_accepted, 1);
    // After close and TIME-WAIT, both tables are empty and memory is back.
    assert!(p.run_until(Duration::from_secs(300), |p| p
        .a
        .tcp_connections()
        .is_empty()
        && p.b.tcp_connections().is_empty()));
    assert_eq!(p.a.stats().tcp_connections_freed, 1);
    assert_eq!(p.b.stats().tcp_connections_freed, 1);
    assert!(
        p.a.memory_in_use() < 4096,
        "A holds {} bytes",
        p.a.memory_in_use()
    );
}

#[test]
fn tcp_transfer_survives_loss_and_a_small_mtu() {
    let mut a = cfg(MAC_A, IP_A, 1);
    let mut b = cfg(MAC_B, IP_B, 2);
    a.mtu = 576;
    b.mtu = 576;
    let mut p = Pair::with(a, b);
    let (mut n, mut k) = (0u64, 0u32);
    // Drop every 17th frame after the handshake has had a chance.
    p.filter = Some(Box::new(move |_, _| {
        n += 1;
        k = if k == 16 { 0 } else { k + 1 };
        n < 20 || k != 0
    }));
    let p = transfer(p, 300_000);
    assert!(p.a.tcp_connections().iter().all(|c| c.3.send_mss <= 536));
    assert_eq!(
        p.a.stats().drops_tx_buffer_too_small,
        0,
        "every segment fit the 576-byte MTU"
    );
    assert_eq!(p.b.stats().drops_tx_buffer_too_small, 0);
}

#[test]
fn connect_to_a_port_nobody_listens_on_is_reset() {
    let mut p = Pair::new();
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 81)).unwrap();
    assert!(
        p.run_until(Duration::from_secs(2), |p| p.a.tcp(ca).unwrap().state()
            == State::Closed)
    );
    assert_eq!(
        p.b.stats().tcp_resets_out,
        1,
        "{:#?} {:#?}",
        p.a.stats(),
        p.b.stats()
    );
    assert!(p.a.tcp(ca).unwrap().poll_event_reset());
}

trait SawReset {
    fn poll_event_reset(&mut self) -> bool;
}

impl SawReset for outboard_tcp::Connection {
    fn poll_event_reset(&mut self) -> bool {
        std::iter::from_fn(|| self.poll_event()).any(|e| e == outboard_tcp::Event::Reset)
    }
}
