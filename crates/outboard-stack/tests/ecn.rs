//! ECN end to end between two stacks (RFC 3168): A asks, B answers as
//! Linux's default does; a "router" marks CE on some of A's ECT data; the
//! transfer completes byte-exact without a retransmission, B echoes, A
//! reduces its window.
mod common;

use common::*;
use outboard_stack::StackConfig;
use outboard_tcp::{EcnMode, State};
use outboard_time::Duration;
use std::net::SocketAddrV4;

fn ecn_cfg(mac: [u8; 6], ip: std::net::Ipv4Addr, secret: u8, mode: EcnMode) -> StackConfig {
    let mut c = cfg(mac, ip, secret);
    c.tcp.ecn = mode;
    c
}

#[test]
fn rfc3168_ce_marks_are_echoed_and_answered_without_loss() {
    let mut p = Pair::with(ecn_cfg(MAC_A, IP_A, 1, EcnMode::On), ecn_cfg(MAC_B, IP_B, 2, EcnMode::Passive));
    let mut ect_seen = 0u32;
    p.filter = Some(Box::new(move |to_b, f: &mut Vec<u8>| {
        // IPv4 from A with ECT(0): mark every 20th CE, fixing the header checksum.
        if to_b && f.len() > 34 && f[12..14] == [0x08, 0x00] && f[15] & 0b11 == 0b10 {
            ect_seen += 1;
            if ect_seen.is_multiple_of(20) {
                f[15] |= 0b11;
                f[24..26].copy_from_slice(&[0, 0]);
                let c = outboard_wire::checksum::checksum(&f[14..34]);
                f[24..26].copy_from_slice(&c.to_be_bytes());
            }
        }
        true
    }));
    let l = p.b.tcp_listen(80, 8).unwrap();
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    let cb = cb.unwrap();
    assert!(p.a.tcp(ca).unwrap().info().ecn && p.b.tcp(cb).unwrap().info().ecn);
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i * 13) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    assert!(p.run_until(Duration::from_secs(60), |p| {
        let c = p.a.tcp(ca).unwrap();
        if sent < data.len() {
            sent += c.send(&data[sent..]).unwrap_or(0);
        }
        let mut buf = [0u8; 16384];
        while let Ok(n) = p.b.tcp(cb).unwrap().recv(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() == data.len()
    }));
    assert!(got == data, "bytes differ");
    let (ok, _, reductions) = p.a.tcp(ca).unwrap().ecn_state();
    let (_, seen, _) = p.b.tcp(cb).unwrap().ecn_state();
    assert!(ok && seen, "ECN negotiated and CE seen");
    assert!(reductions >= 2, "A reduced for ECE {reductions} times");
    assert!(p.b.stats().tcp_ce_marks_in >= 2, "{}", p.b.stats().tcp_ce_marks_in);
    assert_eq!(p.a.tcp(ca).unwrap().stats().retransmits, 0, "ECN signalled congestion without any loss");
    // Without ECN on A (Linux's default), the SYN asks nothing and nothing is ECT.
    let mut q = Pair::with(ecn_cfg(MAC_A, IP_A, 1, EcnMode::Passive), ecn_cfg(MAC_B, IP_B, 2, EcnMode::Passive));
    let _ = q.b.tcp_listen(80, 8).unwrap();
    let c = q.a.tcp_connect(q.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(q.run_until(Duration::from_secs(5), |q| q.a.tcp(c).unwrap().state() == State::Established));
    assert!(!q.a.tcp(c).unwrap().info().ecn);
}
