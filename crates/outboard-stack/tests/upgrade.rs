//! Live upgrade at the stack: a connection taken out of one stack mid-transfer
//! (through its serde record, as `outboard engine --upgrade` carries it) and
//! adopted by a fresh stack with the same address carries on byte-exact; the
//! ARP entries go along, so the new stack sends at once; what cannot be
//! adopted is refused.
mod common;

use common::*;
use outboard_stack::{Stack, StackError};
use outboard_tcp::{Connection, State};
use outboard_time::Duration;
use std::net::SocketAddrV4;

fn record(s: &Stack) -> (String, bool) {
    let (id, ..) = s.tcp_connections()[0];
    let (conn, held) = s.tcp_export(id).expect("an established connection is exported");
    (serde_json::to_string(conn).expect("its record"), held)
}

#[test]
fn a_connection_moved_to_a_new_stack_mid_transfer_delivers_byte_exact() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(80, 4).unwrap();
    let a = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(a).unwrap().state() == State::Established));
    let b = {
        assert!(p.run_until(Duration::from_secs(1), |p| p.b.tcp_accept_pending(l)));
        p.b.tcp_accept(l).unwrap()
    };
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    let mut buf = vec![0u8; 65536];
    let mut moved = false;
    let done = p.run_until(Duration::from_secs(30), |p| {
        let ids: Vec<_> = p.a.tcp_connections().into_iter().map(|c| c.0).collect();
        let a = ids[0];
        if sent < data.len() {
            sent += p.a.tcp(a).unwrap().send(&data[sent..]).unwrap_or(0);
        }
        while let Ok(n) = p.b.tcp(b).unwrap().recv(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        // Half-way, with data in flight both ways, A moves to a new stack.
        if !moved && got.len() > data.len() / 3 {
            moved = true;
            let (json, held) = record(&p.a);
            assert!(held, "the application holds it");
            let arp = p.a.arp_export();
            assert!(arp.iter().any(|(ip, mac)| *ip == IP_B && *mac == MAC_B), "{arp:?}");
            let mut fresh = Stack::new(cfg(MAC_A, IP_A, 1), p.now);
            fresh.arp_import(p.now, &arp);
            let conn: Connection = serde_json::from_str(&json).expect("read back");
            conn.check_restored().unwrap();
            fresh.tcp_adopt(conn, true).expect("adopted");
            p.a = fresh;
        }
        got.len() == data.len()
    });
    assert!(moved && done, "moved {moved}, {} of {} bytes", got.len(), data.len());
    assert!(got == data, "bytes differ after the move");
    assert_eq!(p.a.stats().arp_requests_out, 0, "the new stack knew the peer's MAC");
}

#[test]
fn adopting_a_tuple_already_here_or_not_ours_is_refused() {
    let mut p = Pair::new();
    p.b.tcp_listen(80, 4).unwrap();
    let a = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(a).unwrap().state() == State::Established));
    let (json, _) = record(&p.a);
    let again: Connection = serde_json::from_str(&json).unwrap();
    assert_eq!(p.a.tcp_adopt(again, true), Err(StackError::AddrInUse));
    let mut elsewhere = Stack::new(cfg(MAC_A, IP_PEER, 1), p.now);
    let conn: Connection = serde_json::from_str(&json).unwrap();
    assert_eq!(elsewhere.tcp_adopt(conn, true), Err(StackError::NoRoute));
}
