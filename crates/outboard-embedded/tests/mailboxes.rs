#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! Message mailboxes through boards: two embedded engines on one fabric,
//! each running the message service, applications on each using the native
//! API (calls answered in place, reliable messages, datagrams, queue pairs,
//! one-sided writes with a tripwire). No root.

#[allow(dead_code)] // shared with the other tests
mod common;

use common::settings;
use outboard_api::{AttachOptions, CompletionQueue, Error, Interest, MailboxAddr, MessageKind, QueuePair, WorkOp};
use outboard_embedded::EmbeddedEngine;
use outboard_engine::messages::MessageSettings;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::mpsc;
use std::time::Duration;

const PORT: u16 = 7373;

fn msg_engine(fabric: &str, name: &str, last: u8) -> EmbeddedEngine {
    let mut s = settings(fabric, name, last);
    s.messages = Some(MessageSettings::new(PORT));
    EmbeddedEngine::start(s).expect("engine starts")
}

fn host(last: u8) -> SocketAddr {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), PORT).into()
}

fn request(i: u32) -> Vec<u8> {
    let len = (i as usize * 37) % 1500 + 1;
    (0..len).map(|k| (k as u32 ^ i.wrapping_mul(2654435761)) as u8).collect()
}

/// The server's answer: the request reversed.
fn answer(req: &[u8]) -> Vec<u8> {
    req.iter().rev().copied().collect()
}

#[test]
fn calls_messages_and_datagrams_between_boards() {
    let fabric = format!("fabric:mbox-{}", std::process::id());
    let a = msg_engine(&fabric, "mbox-a", 1);
    let b = msg_engine(&fabric, "mbox-b", 2);
    const CALLS: u32 = 2000;
    const MESSAGES: u32 = 2000;
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        let board = a.attach(&AttachOptions::default()).expect("attach a");
        let mut mb = board.bind_mailbox(None, Some("kv")).expect("bind kv");
        assert_eq!(mb.addr().host, host(1));
        // A name held is refused.
        assert!(matches!(board.bind_mailbox(None, Some("kv")), Err(Error::AddrInUse)));
        ready_tx.send(()).unwrap();
        // The event queue says when the mailbox has something (the first call).
        let mut q = board.event_queue();
        q.add(mb.id(), 7, Interest::READABLE).expect("event queue");
        let mut ready = Vec::new();
        assert_eq!(q.wait(&mut ready, Some(Duration::from_secs(10))).expect("wait"), 1);
        assert!(ready[0].token == 7 && ready[0].readable, "{ready:?}");
        let (mut calls, mut messages, mut datagrams) = (0, 0u32, 0);
        while calls < CALLS || messages < MESSAGES || datagrams < 1 {
            let m = mb.begin_get().expect("begin_get");
            match m.kind {
                MessageKind::Request => {
                    let a = answer(m.data);
                    // Written over the request, in its own buffer.
                    mb.reply_buffer().expect("reply buffer")[..a.len()].copy_from_slice(&a);
                    mb.reply_in_place(a.len()).expect("reply");
                    calls += 1;
                }
                MessageKind::Message => {
                    assert_eq!(m.data, &messages.to_le_bytes()[..], "messages in order, once each");
                    messages += 1;
                    mb.end_get().unwrap();
                }
                MessageKind::Datagram => {
                    assert_eq!(m.data, b"datagram");
                    datagrams += 1;
                    mb.end_get().unwrap();
                }
                k => panic!("unexpected {k:?}"),
            }
        }
        drop(mb);
        drop(board);
        // The engine lives on for the client's last calls.
        (calls, messages, a)
    });
    ready_rx.recv().unwrap();
    let board = b.attach(&AttachOptions::default()).expect("attach b");
    let mut mb = board.bind_mailbox(None, None).expect("bind client");
    let kv = board.lookup(host(1), "kv").expect("lookup kv");
    assert!(matches!(board.lookup(host(1), "nobody"), Err(Error::Errno(libc::ENOENT))));
    // Blocking calls, then many outstanding at once.
    for i in 0..CALLS / 2 {
        assert_eq!(mb.call(kv, &request(i)).expect("call"), answer(&request(i)), "call {i}");
    }
    let mut pending = std::collections::VecDeque::new();
    for i in CALLS / 2..CALLS {
        pending.push_back((i, mb.call_start(kv, &request(i), None).expect("call_start")));
        if pending.len() == 32 {
            let (i, t) = pending.pop_front().unwrap();
            assert_eq!(mb.wait_call(t, None).expect("wait_call"), answer(&request(i)));
        }
    }
    for (i, t) in pending {
        assert_eq!(mb.wait_call(t, None).expect("wait_call"), answer(&request(i)));
    }
    let mut tags = std::collections::HashSet::new();
    for i in 0..MESSAGES {
        tags.insert(mb.send_message(kv, &i.to_le_bytes()).expect("send_message"));
        while let Some((t, r)) = mb.poll_completion() {
            r.expect("message acknowledged");
            assert!(tags.remove(&t));
        }
    }
    while !tags.is_empty() {
        let (t, r) = mb.wait_completion(Some(Duration::from_secs(10))).expect("completion");
        r.expect("message acknowledged");
        assert!(tags.remove(&t));
    }
    mb.send_datagram(kv, b"datagram").expect("datagram");
    let (calls, messages, _a) = server.join().expect("server");
    assert_eq!((calls, messages), (CALLS, MESSAGES));
    // A mailbox nobody holds: a clear error, not a hang.
    let nobody = MailboxAddr::new(host(1), 99_999);
    let r = mb.call(nobody, b"x");
    assert!(matches!(r, Err(Error::ConnectionRefused)), "unknown mailbox: {r:?}");
}

#[test]
fn queue_pairs_ping_pong_and_one_sided_writes() {
    let fabric = format!("fabric:qp-{}", std::process::id());
    let a = msg_engine(&fabric, "qp-a", 1);
    let b = msg_engine(&fabric, "qp-b", 2);
    const ROUNDS: u32 = 1000;
    let (addr_tx, addr_rx) = mpsc::channel();
    let (peer_tx, peer_rx) = mpsc::channel();
    let ponger = std::thread::spawn(move || {
        let board = a.attach(&AttachOptions::default()).expect("attach a");
        let mut cq = CompletionQueue::new();
        let q = cq.add(QueuePair::bind(&board, None).expect("qp"));
        for w in 0..4 {
            cq.post_recv(q, w).expect("post_recv");
        }
        // A region with its tripwire on its last byte.
        let mut region_mb = board.bind_mailbox(None, None).expect("region mailbox");
        let region = region_mb.register(Some(1023), true).expect("register");
        addr_tx.send((cq.qp(q).addr(), region.cookie)).unwrap();
        cq.qp(q).connect(peer_rx.recv().unwrap());
        let mut rounds = 0;
        while rounds < ROUNDS {
            let c = cq.wait(Some(Duration::from_secs(10))).expect("completion");
            match c.op {
                WorkOp::Recv => {
                    assert_eq!(c.result.expect("received"), 8);
                    let v = u64::from_le_bytes(cq.data(q).unwrap().try_into().unwrap());
                    assert_eq!(v, u64::from(rounds));
                    cq.repost(q, c.wr_id).expect("repost");
                    cq.post_send(q, &(v + 1).to_le_bytes(), rounds).expect("post_send");
                    rounds += 1;
                }
                WorkOp::Send => {
                    c.result.expect("send completes");
                }
            }
        }
        // The one-sided writes: the tripwire says the last byte landed.
        let cookie = region_mb.wait_tripwire(Some(Duration::from_secs(10))).expect("tripwire");
        assert_eq!(cookie, region.cookie);
        let bytes = region_mb.region_bytes(&region)[..1024].to_vec();
        let mut notes = 0;
        while region_mb.poll_write().is_some() {
            notes += 1;
        }
        assert!(notes >= 4, "a note per write ({notes})");
        bytes
    });
    let board = b.attach(&AttachOptions::default()).expect("attach b");
    let mut cq = CompletionQueue::new();
    let q = cq.add(QueuePair::bind(&board, None).expect("qp"));
    for w in 0..4 {
        cq.post_recv(q, w).expect("post_recv");
    }
    let (peer, cookie) = addr_rx.recv().unwrap();
    cq.qp(q).connect(peer);
    peer_tx.send(cq.qp(q).addr()).unwrap();
    let start = std::time::Instant::now();
    cq.post_send(q, &0u64.to_le_bytes(), 0).unwrap();
    let mut got = 0;
    while got + 1 < ROUNDS {
        let c = cq.wait(Some(Duration::from_secs(10))).expect("completion");
        if c.op == WorkOp::Recv {
            let v = u64::from_le_bytes(cq.data(q).unwrap().try_into().unwrap());
            assert_eq!(v, u64::from(got) + 1);
            cq.repost(q, c.wr_id).unwrap();
            got += 1;
            cq.post_send(q, &(v).to_le_bytes(), got).unwrap();
        }
    }
    eprintln!("{ROUNDS} queue-pair round trips in {:?}", start.elapsed());
    // One-sided: four writes of 256 bytes; one out of bounds (refused by the receiving engine).
    let mut writer = board.bind_mailbox(None, None).expect("writer");
    let pattern: Vec<u8> = (0..1024u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut tags = vec![writer.write(host(1), cookie, 4000, &[0xee; 512]).expect("write past the end")];
    for k in 0..4 {
        tags.push(writer.write(host(1), cookie, (k * 256) as u32, &pattern[k * 256..(k + 1) * 256]).expect("write"));
    }
    for _ in 0..tags.len() {
        let (_, r) = writer.wait_completion(Some(Duration::from_secs(10))).expect("write completion");
        r.expect("write taken by the receiving engine");
    }
    assert_eq!(ponger.join().expect("ponger"), pattern);
}
