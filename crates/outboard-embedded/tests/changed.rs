#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! The hooks for callers that keep their own ready lists (the shim's epoll):
//! `take_changed` names each endpoint the engine posted events for, once,
//! and `edges` tells readable edges (data) from writable ones
//! (acknowledgements).

mod common;

use common::engine;
use outboard_api::{AttachOptions, Board, Mode};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};


/// Pumps `board`, then checks `done`, until it holds (bounded).
fn until(board: &Board, what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    loop {
        board.pump().expect("pump");
        if done() {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn take_changed_names_each_endpoint_once_and_edges_tell_data_from_acks() {
    let fabric = format!("fabric:chg-{}", std::process::id());
    let a = engine(&fabric, "chg-a", 1);
    let b = engine(&fabric, "chg-b", 2);
    let board_a = a.attach(&AttachOptions { mode: Mode::NonBlocking, ..Default::default() }).expect("attach a");
    let mut l = board_a.listen(7200, 4).expect("listen");
    let board_b = b.attach(&AttachOptions::default()).expect("attach b");
    let mut c = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7200)).expect("connect");
    let mut ids = Vec::new();
    let mut s = None;
    until(&board_a, "the connection", || {
        s = l.accept().ok();
        s.is_some()
    });
    let mut s = s.unwrap();
    board_a.take_changed(&mut ids);
    assert!(ids.contains(&l.id()), "the listener had an event: {ids:?}");

    // Nothing happened since: nothing to take.
    board_a.pump().unwrap();
    board_a.take_changed(&mut ids);
    assert!(ids.is_empty(), "taken already: {ids:?}");

    // Data from the peer: the stream is named once however many events, and
    // its readable edges move.
    let before = board_a.edges(s.id());
    for _ in 0..3 {
        c.send_all(b"ping").expect("send");
    }
    let mut buf = [0u8; 64];
    let mut got = 0;
    until(&board_a, "12 bytes", || {
        got += s.recv(&mut buf[got..]).unwrap_or(0);
        got == 12
    });
    board_a.take_changed(&mut ids);
    assert_eq!(ids.iter().filter(|&&e| e == s.id()).count(), 1, "named exactly once: {ids:?}");
    let after_data = board_a.edges(s.id());
    assert!(after_data.readable > before.readable, "data is a readable edge: {before:?} → {after_data:?}");

    // Our data acknowledged by the peer: writable edges move, readable ones do not.
    s.send_all(b"pong").expect("send");
    until(&board_a, "the acknowledgement", || s.unacked().0 == 0);
    let after_ack = board_a.edges(s.id());
    assert!(after_ack.writable > after_data.writable, "an acknowledgement is a writable edge: {after_data:?} → {after_ack:?}");
    assert_eq!(after_ack.readable, after_data.readable, "… and no readable one: {after_data:?} → {after_ack:?}");
    board_a.take_changed(&mut ids);
    assert!(ids.contains(&s.id()), "named again after the acknowledgement: {ids:?}");
}
