//! The connection table through the public API: port allocation (also by
//! shard), listener and accept-queue bounds, freeing released connections.
mod common;

use common::*;
use outboard_stack::steer::{shard_for, FlowTuple};
use outboard_stack::{ConnId, Stack, StackError};
use outboard_tcp::State;
use outboard_time::Duration;
use std::net::SocketAddrV4;

#[test]
fn ephemeral_ports_come_from_the_range_and_run_out() {
    let mut c = cfg(MAC_A, IP_A, 1);
    c.ephemeral_ports = (40000, 40003);
    let mut s = Stack::new(c, t(0));
    let remote = SocketAddrV4::new(IP_B, 80);
    let mut ports = Vec::new();
    for _ in 0..4 {
        let id = s.tcp_connect(t(0), remote).unwrap();
        ports.push(s.tcp(id).unwrap().tuple().local.port());
    }
    ports.sort();
    assert_eq!(ports, vec![40000, 40001, 40002, 40003]);
    assert_eq!(
        s.tcp_connect(t(0), remote),
        Err(StackError::NoEphemeralPorts)
    );
    // Another remote may reuse the same local ports (the 4-tuple differs).
    assert!(s.tcp_connect(t(0), SocketAddrV4::new(IP_B, 81)).is_ok());
}

#[test]
fn ephemeral_port_skips_listening_ports_and_connect_from_checks_the_tuple() {
    let mut c = cfg(MAC_A, IP_A, 1);
    c.ephemeral_ports = (40000, 40001);
    let mut s = Stack::new(c, t(0));
    s.tcp_listen(40000, 1).unwrap();
    let id = s.tcp_connect(t(0), SocketAddrV4::new(IP_B, 80)).unwrap();
    assert_eq!(s.tcp(id).unwrap().tuple().local.port(), 40001);
    assert_eq!(
        s.tcp_connect_from(t(0), 40001, SocketAddrV4::new(IP_B, 80)),
        Err(StackError::AddrInUse)
    );
    assert!(s
        .tcp_connect_from(t(0), 5555, SocketAddrV4::new(IP_B, 80))
        .is_ok());
}

#[test]
fn with_four_shards_each_connects_from_ports_that_steer_home() {
    // 16 ports shared out by the RSS hash: each shard's stack takes exactly
    // those whose returning segments hash to it, then runs out.
    let remote = SocketAddrV4::new(IP_B, 80);
    let steers_to = |port: u16| {
        let returning = FlowTuple {
            src_ip: IP_B,
            dst_ip: IP_A,
            src_port: 80,
            dst_port: port,
        };
        shard_for(&returning, 4)
    };
    let mut all = Vec::new();
    for shard in 0..4 {
        let mut c = cfg(MAC_A, IP_A, 1);
        c.ephemeral_ports = (40000, 40015);
        c.shard_index = shard;
        c.shard_count = 4;
        let mut s = Stack::new(c, t(0));
        let mine = (40000..=40015).filter(|&p| steers_to(p) == shard).count();
        assert!(mine > 0, "16 ports give every shard some");
        for _ in 0..mine {
            let id = s.tcp_connect(t(0), remote).unwrap();
            let port = s.tcp(id).unwrap().tuple().local.port();
            assert_eq!(steers_to(port), shard, "port {port} on shard {shard}");
            all.push(port);
        }
        assert_eq!(
            s.tcp_connect(t(0), remote),
            Err(StackError::NoEphemeralPorts),
            "shard {shard} has only {mine} ports"
        );
    }
    all.sort();
    assert_eq!(all, (40000..=40015).collect::<Vec<_>>(), "every port on exactly one shard");
}

#[test]
fn listening_twice_on_a_port_is_addr_in_use() {
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    s.tcp_listen(80, 4).unwrap();
    assert_eq!(s.tcp_listen(80, 4), Err(StackError::AddrInUse));
}

#[test]
fn accept_queue_is_bounded_by_the_backlog() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(80, 2).unwrap();
    let clients: Vec<_> = (0..4)
        .map(|_| p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap())
        .collect();
    p.run_until(Duration::from_millis(500), |_| false);
    let established = clients
        .iter()
        .filter(|c| p.a.tcp(**c).unwrap().state() == State::Established)
        .count();
    // Two complete; the others' SYNs (or final ACKs) wait for room.
    assert_eq!(p.b.stats().tcp_connections_accepted, 2);
    assert!(p.b.stats().drops_tcp_accept_queue_full > 0);
    assert!(established >= 2);
    // Accepting makes room, and the rest get in on their retransmissions.
    let mut accepted = Vec::new();
    assert!(p.run_until(Duration::from_secs(30), |p| {
        while let Some(c) = p.b.tcp_accept(l) {
            accepted.push(c);
        }
        accepted.len() == 4
    }));
}

/// A connects to B's port 80; B accepts, A is ESTABLISHED: (A's id, B's id).
fn connected(p: &mut Pair) -> (ConnId, ConnId) {
    let l = p.b.tcp_listen(80, 2).unwrap();
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(2), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    (ca, cb.unwrap())
}

#[test]
fn released_connections_are_freed_once_finished() {
    let mut p = Pair::new();
    let (ca, cb) = connected(&mut p);
    // B aborts and releases: freed at once (CLOSED, nothing held).
    p.b.tcp(cb).unwrap().abort();
    p.b.tcp_release(cb);
    assert!(p.run_until(Duration::from_secs(2), |p| p.b.tcp(cb).is_none()));
    assert!(p.b.tcp_connections().is_empty());
    // A hears the reset; its handle stays valid until released.
    assert!(
        p.run_until(Duration::from_secs(2), |p| p.a.tcp(ca).unwrap().state()
            == State::Closed)
    );
    p.a.tcp_release(ca);
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(ca).is_none()));
    assert!(p.a.memory_in_use() < 4096, "{}", p.a.memory_in_use());
}

#[test]
fn connection_to_an_unresolvable_host_times_out() {
    let mut c = cfg(MAC_A, IP_A, 1);
    c.tcp.max_syn_retransmits = 2;
    let mut s = Stack::new(c, t(0));
    let id = s.tcp_connect(t(0), SocketAddrV4::new(IP_PEER, 80)).unwrap();
    let mut now = t(0);
    for _ in 0..1000 {
        drain(&mut s, now);
        if s.tcp(id).unwrap().state() == State::Closed {
            break;
        }
        now = s.poll_timeout().expect("a timer runs");
        s.handle_timeout(now);
    }
    assert_eq!(s.tcp(id).unwrap().state(), State::Closed);
    assert!(s.stats().arp_requests_out >= 3);
    assert!(s.stats().drops_arp_unresolved >= 1);
}

#[test]
fn unlisten_resets_connections_not_yet_accepted_and_frees_the_port() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(80, 4).unwrap();
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(
        p.run_until(Duration::from_secs(2), |p| p.a.tcp(ca).unwrap().state()
            == State::Established)
    );
    p.b.tcp_unlisten(l);
    assert!(
        p.run_until(Duration::from_secs(2), |p| p.a.tcp(ca).unwrap().state()
            == State::Closed)
    );
    assert!(p.b.tcp_connections().is_empty());
    assert_eq!(p.b.tcp_accept(l), None);
    assert!(p.b.tcp_listen(80, 4).is_ok(), "port free again");
}

#[test]
fn rfc6191_new_syn_reopens_a_released_connection_in_time_wait() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(80, 4).unwrap();
    let remote = SocketAddrV4::new(IP_B, 80);
    let ca = p.a.tcp_connect_from(p.now, 45000, remote).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(2), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some()
    }));
    let cb = cb.unwrap();
    // B closes first, so B ends in TIME-WAIT; A's side finishes and is freed.
    p.b.tcp(cb).unwrap().close();
    assert!(
        p.run_until(Duration::from_secs(2), |p| p.a.tcp(ca).unwrap().state()
            == State::CloseWait)
    );
    p.a.tcp(ca).unwrap().close();
    assert!(
        p.run_until(Duration::from_secs(2), |p| p.b.tcp(cb).unwrap().state()
            == State::TimeWait)
    );
    p.a.tcp_release(ca);
    p.b.tcp_release(cb);
    assert!(p.run_until(Duration::from_secs(2), |p| p.a.tcp(ca).is_none()));
    // Same 4-tuple again, well inside B's TIME-WAIT.
    let ca2 = p.a.tcp_connect_from(p.now, 45000, remote).unwrap();
    let mut cb2 = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        cb2 = cb2.or_else(|| p.b.tcp_accept(l));
        cb2.is_some() && p.a.tcp(ca2).unwrap().state() == State::Established
    }));
    assert!(p.b.tcp(cb).is_none(), "the TIME-WAIT connection gave way");
}

/// The table files each connection's deadline lazily, as Linux leaves its
/// connection timers: a deadline that moved later keeps its earlier place,
/// fires there once, runs nothing, and is filed again at its real time.
#[test]
fn a_deadline_that_moved_later_fires_nothing_early_and_is_filed_again() {
    let mut p = Pair::new();
    let (ca, _) = connected(&mut p);
    // A's first send arms its loss-probe timer; B's ACK then takes it away.
    p.a.tcp(ca).unwrap().send(b"first").unwrap();
    assert!(p.run_until(Duration::from_millis(5), |p| p.a.tcp(ca).unwrap().send_queued() == 0));
    let filed = p.a.poll_timeout().expect("the first send's deadline, still filed");
    assert_eq!(p.a.tcp(ca).unwrap().poll_timeout(), None, "nothing of A's is due any more");
    // A sends again, and B's ACKs stop coming: the real deadline is later.
    p.now += Duration::from_micros(700);
    p.a.tcp(ca).unwrap().send(b"second").unwrap();
    let sent = drain(&mut p.a, p.now);
    assert_eq!(sent.len(), 1);
    let real = p.a.tcp(ca).unwrap().poll_timeout().expect("the second send's deadline");
    assert!(filed < real, "filed {filed:?}, real {real:?}");
    assert_eq!(p.a.poll_timeout(), Some(filed));
    // From the filed time to the real one: the stack wakes (the filed
    // deadline, and whatever else it keeps), runs nothing and sends nothing.
    let before = p.a.tcp(ca).unwrap().stats();
    let mut now = filed;
    for _ in 0..8 {
        if now >= real {
            break;
        }
        p.a.handle_timeout(now);
        assert!(drain(&mut p.a, now).is_empty(), "nothing runs before it is due ({now:?})");
        let next = p.a.poll_timeout().expect("the second send's deadline, filed again");
        assert!(next > now && next <= real, "next wake {next:?} after {now:?}, real {real:?}");
        now = next;
    }
    assert_eq!(now, real, "filed again at its real time");
    let after = p.a.tcp(ca).unwrap().stats();
    assert_eq!((before.segments_out, before.retransmits), (after.segments_out, after.retransmits));
    // At the real time the timer that is due sends.
    p.a.handle_timeout(real);
    assert!(!drain(&mut p.a, real).is_empty(), "the timer that was due fired");
}
