//! TCP Fast Open (RFC 7413) between two stacks: A the client, B a listener
//! that turned Fast Open on. The first connection gets a cookie; the next
//! one's SYN carries data that B delivers at once; a cookie B no longer
//! accepts costs the data in the SYN but not the data; the listener's queue
//! length bounds pending Fast Open connections.
mod common;

use common::*;
use outboard_stack::{ListenerId, Stack};
use outboard_tcp::State;
use outboard_time::Duration;
use outboard_wire::{RxChecksum, TcpPacket, TcpRepr};
use std::cell::RefCell;
use std::net::SocketAddrV4;
use std::rc::Rc;

/// The TCP segment in a frame, if any.
fn tcp_of(frame: &[u8]) -> Option<(TcpRepr, Vec<u8>)> {
    let (ip, payload) = ip_of(frame)?;
    let p = TcpPacket::new_checked(&payload[..]).ok()?;
    let r = TcpRepr::parse(&p, ip.src_addr, ip.dst_addr, RxChecksum::Verify).ok()?;
    Some((r, p.payload().to_vec()))
}

/// SYNs A sent, with their payloads and whether they carried a Fast Open option.
type Syns = Rc<RefCell<Vec<(Vec<u8>, Option<outboard_wire::FastOpenCookie>)>>>;

fn watch_syns(p: &mut Pair, drop_acks_to_b: Rc<RefCell<bool>>) -> Syns {
    let syns: Syns = Rc::default();
    let s = syns.clone();
    p.filter = Some(Box::new(move |to_b, f: &mut Vec<u8>| {
        if let (true, Some((r, data))) = (to_b, tcp_of(f)) {
            if r.flags.syn() && !r.flags.ack() {
                s.borrow_mut().push((data, r.options.fast_open));
            } else if *drop_acks_to_b.borrow() {
                return false;
            }
        }
        true
    }));
    syns
}

/// A connects to B with Fast Open, writes `data`, and runs until B's side
/// has it (accepted from `l`); returns both ends.
fn exchange(p: &mut Pair, l: ListenerId, data: &[u8]) -> (outboard_stack::ConnId, outboard_stack::ConnId) {
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    p.a.tcp_fast_open(p.now, ca);
    p.a.tcp(ca).unwrap().send(data).unwrap();
    let mut cb = None;
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(10), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        if let Some(cb) = cb {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = p.b.tcp(cb).unwrap().recv(&mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
        }
        got.len() >= data.len() && p.a.tcp(ca).unwrap().state() == State::Established
    }));
    assert_eq!(got, data, "byte-exact");
    (ca, cb.unwrap())
}

fn close(p: &mut Pair, ca: outboard_stack::ConnId, cb: outboard_stack::ConnId) {
    p.a.tcp(ca).unwrap().close();
    p.b.tcp(cb).unwrap().close();
    p.a.tcp_release(ca);
    p.b.tcp_release(cb);
    p.run_until(Duration::from_secs(1), |_| false);
}

fn stat(s: &Stack, name: &str) -> u64 {
    s.stats().iter().find(|(n, _)| *n == name).unwrap().1
}

#[test]
fn rfc7413_cookie_request_then_data_in_the_syn() {
    let mut p = Pair::new();
    let syns = watch_syns(&mut p, Rc::default());
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_fast_open(l, 16);
    // First connection: the SYN asks for a cookie and carries no data.
    let (ca, cb) = exchange(&mut p, l, b"first");
    assert_eq!(syns.borrow()[0], (Vec::new(), Some(outboard_wire::FastOpenCookie::request())));
    assert_eq!(stat(&p.b, "tcp_fastopen_cookie_requests"), 1);
    assert_eq!(stat(&p.a, "tcp_fastopen_cookies_learned"), 1);
    assert_eq!(p.a.tcp_fast_open_cached(), 1);
    close(&mut p, ca, cb);
    // Second: the SYN waits for data, then carries the cookie and the data.
    let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
    assert!(p.a.tcp_fast_open(p.now, ca), "a cookie is cached: the SYN waits for data");
    p.run_until(Duration::from_millis(50), |_| false);
    assert_eq!(syns.borrow().len(), 1, "no SYN before data");
    let request = b"GET / HTTP/1.1\r\nHost: b\r\n\r\n";
    p.a.tcp(ca).unwrap().send(request).unwrap();
    let mut cb = None;
    assert!(p.run_until(Duration::from_secs(1), |p| {
        cb = cb.or_else(|| p.b.tcp_accept(l));
        cb.is_some()
    }));
    let cb = cb.unwrap();
    // RFC 7413 §4.2.2: the data is readable as soon as the SYN is accepted.
    let mut buf = [0u8; 64];
    assert_eq!(p.b.tcp(cb).unwrap().recv(&mut buf), Ok(request.len()));
    assert_eq!(&buf[..request.len()], request);
    assert_eq!(syns.borrow()[1].0, request);
    assert!(syns.borrow()[1].1.is_some_and(|c| c.as_bytes().len() == 8));
    assert!(p.run_until(Duration::from_secs(1), |p| p.a.tcp(ca).unwrap().state() == State::Established));
    assert!(p.a.tcp(ca).unwrap().info().syn_data, "TCPI_OPT_SYN_DATA");
    assert_eq!(stat(&p.b, "tcp_fastopen_passive"), 1);
    assert_eq!(stat(&p.a, "tcp_fastopen_active"), 1);
    assert_eq!(p.a.tcp(ca).unwrap().stats().retransmits, 0);
}

#[test]
fn rfc7413_4_2_2_an_invalid_cookie_costs_only_the_syn_data() {
    let mut p = Pair::new();
    let syns = watch_syns(&mut p, Rc::default());
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_fast_open(l, 16);
    let (ca, cb) = exchange(&mut p, l, b"first");
    close(&mut p, ca, cb);
    // B restarts with another secret: A's cached cookie is no longer valid.
    p.b = Stack::new(cfg(MAC_B, IP_B, 77), p.now);
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_fast_open(l, 16);
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    let (ca, _) = exchange(&mut p, l, &data);
    assert_eq!(syns.borrow()[1].0, data, "the SYN carried the data");
    assert_eq!(stat(&p.b, "tcp_fastopen_passive_fail"), 1);
    assert_eq!(stat(&p.b, "tcp_fastopen_passive"), 0);
    assert_eq!(stat(&p.a, "tcp_fastopen_active_fail"), 1);
    assert!(!p.a.tcp(ca).unwrap().info().syn_data);
    // B's SYN-ACK carried its new cookie: the next SYN's data is taken.
    let (_, _) = exchange(&mut p, l, b"third");
    assert_eq!(stat(&p.b, "tcp_fastopen_passive"), 1);
}

#[test]
fn rfc7413_5_1_listener_queue_length_bounds_pending_fast_opens() {
    let mut p = Pair::new();
    let drop_acks = Rc::new(RefCell::new(false));
    let syns = watch_syns(&mut p, drop_acks.clone());
    let l = p.b.tcp_listen(80, 8).unwrap();
    p.b.tcp_listen_fast_open(l, 1);
    assert_eq!(p.b.tcp_listen_fast_open_qlen(l), 1);
    let (ca, cb) = exchange(&mut p, l, b"first");
    close(&mut p, ca, cb);
    // A's handshake-completing ACKs are lost: Fast Open connections stay pending.
    *drop_acks.borrow_mut() = true;
    for _ in 0..2 {
        let ca = p.a.tcp_connect(p.now, SocketAddrV4::new(IP_B, 80)).unwrap();
        assert!(p.a.tcp_fast_open(p.now, ca));
        p.a.tcp(ca).unwrap().send(b"data").unwrap();
        p.run_until(Duration::from_millis(20), |_| false);
    }
    assert_eq!(syns.borrow().iter().filter(|(d, _)| d == b"data").count(), 2);
    assert_eq!(stat(&p.b, "tcp_fastopen_passive"), 1, "the queue holds one");
    assert_eq!(stat(&p.b, "tcp_fastopen_listen_overflow"), 1);
}
