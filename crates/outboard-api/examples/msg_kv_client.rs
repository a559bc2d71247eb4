//! The key-value example's client: looks the mailbox `kv` up at an engine,
//! puts KEYS keys with blocking calls, then reads them back with 32 calls
//! outstanding at a time (asynchronous), checking every answer; then a
//! call to a mailbox nobody holds must fail with a clear error.
//!
//! usage: msg_kv_client ENGINE_NAME SERVER_HOST:PORT KEYS
//! prints: {"calls": N, "wrong": N, "p50_us": F, "p99_us": F}

#![allow(clippy::disallowed_methods)] // an application measures wall-clock round trips

mod common;
use common::*;
use outboard_api::{Error, MailboxAddr};
use std::collections::VecDeque;
use std::time::Instant;

fn key(i: u64) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let len = (i * 37 % 900 + 1) as usize;
    (0..len as u64).map(|k| pattern(i * 1000 + k)).collect()
}

fn main() {
    let usage = "msg_kv_client ENGINE_NAME SERVER_HOST:PORT KEYS";
    let board = outboard_api::Board::attach(&arg(1, usage)).unwrap_or_else(|e| fail("attach", e));
    let server: std::net::SocketAddr = arg(2, usage).parse().unwrap_or_else(|e| fail("server address", e));
    let keys = num(&arg(3, usage));
    let mut mb = board.bind_mailbox(None, None).unwrap_or_else(|e| fail("bind", e));
    let kv = board.lookup(server, "kv").unwrap_or_else(|e| fail("lookup kv", e));
    let (mut calls, mut wrong, mut lat) = (0u64, 0u64, Vec::new());
    for i in 0..keys {
        let req = [&b"P"[..], &key(i), &[0], &value(i)].concat();
        let t = Instant::now();
        let r = mb.call(kv, &req).unwrap_or_else(|e| fail("put", e));
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        calls += 1;
        wrong += u64::from(r != b"+");
    }
    let mut pending = VecDeque::new();
    let check = |mb: &mut outboard_api::Mailbox, (i, tag): (u64, u32)| {
        let r = mb.wait_call(tag, None).unwrap_or_else(|e| fail("get", e));
        u64::from(r != [&b"+"[..], &value(i)].concat())
    };
    for i in 0..keys {
        let tag = mb.call_start(kv, &[&b"G"[..], &key(i)].concat(), None).unwrap_or_else(|e| fail("get", e));
        pending.push_back((i, tag));
        calls += 1;
        if pending.len() == 32 {
            wrong += check(&mut mb, pending.pop_front().expect("32 waiting"));
        }
    }
    while let Some(p) = pending.pop_front() {
        wrong += check(&mut mb, p);
    }
    wrong += u64::from(mb.call(kv, b"Gno-such-key").unwrap_or_else(|e| fail("get", e)) != b"-");
    // Nobody holds mailbox 99999 there: refused at once, not a hang.
    match mb.call(MailboxAddr::new(kv.host, 99_999), b"G") {
        Err(Error::ConnectionRefused) => {}
        r => fail("call to an unbound mailbox", format!("{r:?}, not connection refused")),
    }
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0.0);
    println!("{{\"calls\": {calls}, \"wrong\": {wrong}, \"p50_us\": {:.1}, \"p99_us\": {:.1}}}", q(0.5), q(0.99));
    if wrong > 0 {
        std::process::exit(1);
    }
}
