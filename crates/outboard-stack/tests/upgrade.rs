//! Live upgrade at the stack: a connection taken out of one stack mid-transfer
//! (through its serde record, as `outboard engine --upgrade` carries it) and
//! adopted by a fresh stack with the same address carries on byte-exact; the
//! ARP entries go along, so the new stack sends at once; what cannot be
//! adopted is refused. A connection whose rings live in a board's shared
//! memory is carried as positions only and rebound to the same memory,
//! mapped again as a new engine maps the board's memfd.
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

/// A ring's storage in a shared mapping (as the engine's board regions are).
#[derive(Debug)]
struct Region {
    map: std::sync::Arc<outboard_board::Mapping>,
    offset: usize,
    len: usize,
}

impl outboard_tcp::RingStorage for Region {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the range is inside the mapping (the test's layout), which
        // `map` keeps alive; each region is lent to exactly one ring.
        unsafe { self.map.bytes(self.offset, self.len) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `bytes`.
        unsafe { self.map.bytes_mut(self.offset, self.len) }
    }
}

#[test]
fn a_board_stream_moved_to_a_new_stack_keeps_its_bytes_in_the_shared_region_and_delivers_byte_exact() {
    const REGION: usize = 1 << 20;
    let (first_map, memfd) = outboard_board::Mapping::create_memfd("upgrade-test", 2 * REGION).unwrap();
    let first_map = std::sync::Arc::new(first_map);
    let regions = |map: &std::sync::Arc<outboard_board::Mapping>| -> (Box<dyn outboard_tcp::RingStorage>, Box<dyn outboard_tcp::RingStorage>) {
        (
            Box::new(Region { map: map.clone(), offset: 0, len: REGION }),
            Box::new(Region { map: map.clone(), offset: REGION, len: REGION }),
        )
    };
    let mut p = Pair::new();
    let l = p.b.tcp_listen(80, 4).unwrap();
    let a = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(a).unwrap().state() == State::Established));
    let b = {
        assert!(p.run_until(Duration::from_secs(1), |p| p.b.tcp_accept_pending(l)));
        p.b.tcp_accept(l).unwrap()
    };
    {
        let c = p.a.tcp(a).unwrap();
        assert!(c.storage_fits(REGION, REGION));
        let (send, recv) = regions(&first_map);
        c.attach_storage(send, recv);
    }
    // A sends (through its region), B echoes a part back (into A's region).
    let data: Vec<u8> = (0..600_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let back: Vec<u8> = data[..100_000].to_vec();
    let (mut sent, mut got, mut echoed, mut got_back) = (0, Vec::new(), 0, Vec::new());
    let mut buf = vec![0u8; 65536];
    let mut moved = None;
    let done = p.run_until(Duration::from_secs(30), |p| {
        let a = p.a.tcp_connections()[0].0;
        if sent < data.len() {
            sent += p.a.tcp(a).unwrap().send(&data[sent..]).unwrap_or(0);
        }
        if echoed < back.len() {
            echoed += p.b.tcp(b).unwrap().send(&back[echoed..]).unwrap_or(0);
        }
        while let Ok(n) = p.b.tcp(b).unwrap().recv(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        // A reads what came back only after the move: it waits in A's region meanwhile.
        if moved.is_some() {
            while let Ok(n) = p.a.tcp(a).unwrap().recv(&mut buf) {
                if n == 0 {
                    break;
                }
                got_back.extend_from_slice(&buf[..n]);
            }
        }
        // A third of the way, with bytes unacknowledged in A's send region
        // and unread in its receive region, A moves to a new stack.
        if moved.is_none() && got.len() > data.len() / 3 && p.a.tcp(a).unwrap().recv_available() > 50_000 {
            {
                let c = p.a.tcp(a).unwrap();
                assert!(c.send_queued() > 0 && c.recv_available() > 0, "bytes wait in both regions: {} to send, {} to read", c.send_queued(), c.recv_available());
            }
            let (json, held) = record(&p.a);
            assert!(held);
            assert!(json.contains(&format!("{{\"lent\":{REGION}}}")), "the regions' lengths are recorded");
            assert!(json.len() < 64 * 1024, "no ring bytes in the record: {} bytes", json.len());
            let arp = p.a.arp_export();
            // The new engine maps the board's memfd anew; the old mapping goes with the old stack.
            let second_map = std::sync::Arc::new(outboard_board::Mapping::map_fd(std::os::fd::AsRawFd::as_raw_fd(&memfd), 2 * REGION).unwrap());
            let mut fresh = Stack::new(cfg(MAC_A, IP_A, 1), p.now);
            fresh.arp_import(p.now, &arp);
            let mut conn: Connection = serde_json::from_str(&json).expect("read back");
            assert!(conn.check_restored().unwrap_err().contains("not bound again"), "unusable before it is rebound");
            let (send, recv) = regions(&second_map);
            conn.rebind_storage(send, recv).unwrap();
            conn.check_restored().unwrap();
            fresh.tcp_adopt(conn, true).expect("adopted");
            p.a = fresh;
            moved = Some(json.len());
        }
        got.len() == data.len() && got_back.len() == back.len()
    });
    assert!(moved.is_some() && done, "moved {moved:?}, {} of {} bytes, {} of {} back", got.len(), data.len(), got_back.len(), back.len());
    assert!(got == data, "bytes A sent differ after the move");
    assert!(got_back == back, "bytes A received differ after the move");
    drop(first_map);
}

/// A UDP socket moved to a fresh stack through its settings: same port and
/// families (an ephemeral port too), datagrams to it arrive there; one with
/// datagrams unread says so (the engine answers "busy" then).
#[test]
fn a_udp_socket_moved_to_a_new_stack_by_its_settings_receives_there() {
    use outboard_stack::{Families, UdpSettings};
    let mut old = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    let u = old.udp_bind_for(5353, Families::Ipv4).unwrap();
    let eph = old.udp_bind(0).unwrap();
    let s = old.udp_socket_settings(u).expect("settings");
    assert_eq!(s, UdpSettings { port: 5353, families: Families::Ipv4 });
    let se = old.udp_socket_settings(eph).expect("settings");
    assert_ne!(se.port, 0);
    assert_eq!(old.udp_has_unread(u), Some(false));
    old.receive_frame(t(1), &udp_frame(IP_PEER, IP_A, 4000, 5353, b"early", MAC_A));
    assert_eq!(old.udp_has_unread(u), Some(true), "a queued datagram is unread");
    let mut buf = [0u8; 64];
    assert_eq!(old.udp_recv_from(u, &mut buf).map(|(n, _)| n), Ok(5));
    assert_eq!(old.udp_has_unread(u), Some(false));

    let mut fresh = Stack::new(cfg(MAC_A, IP_A, 1), t(2));
    let v = fresh.udp_bind_settings(&s).expect("bound again");
    let ve = fresh.udp_bind_settings(&se).expect("bound again");
    assert_eq!(fresh.udp_socket_settings(v), Some(s));
    assert_eq!(fresh.udp_socket_settings(ve), Some(se));
    assert_eq!(fresh.udp_bind_settings(&s), Err(StackError::AddrInUse), "the port is held");
    fresh.receive_frame(t(3), &udp_frame(IP_PEER, IP_A, 4000, 5353, b"query", MAC_A));
    assert_eq!(fresh.udp_recv_from(v, &mut buf), Ok((5, SocketAddrV4::new(IP_PEER, 4000).into())));
    assert_eq!(&buf[..5], b"query");
    assert_eq!(old.udp_has_unread(outboard_stack::UdpId(u32::MAX)), None);
}
