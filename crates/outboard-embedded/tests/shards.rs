#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! Applications on a multi-shard engine: one board has rings on every
//! shard. A listener listens on every shard (connections are accepted on
//! the shard their SYN reaches and handed to the one `Listener`), a
//! connection or datagram socket lives on the shard of the core that made
//! it, and one event queue covers endpoints of several shards.

use outboard_api::{AttachOptions, Board, Interest, Mode, Stream};
use outboard_embedded::EmbeddedEngine;
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn engines(tag: &str, server_shards: usize) -> (EmbeddedEngine, EmbeddedEngine) {
    let fabric = format!("fabric:eshard-{tag}-{}", std::process::id());
    let start = |name: String, addr: Ipv4Addr, shards: usize| {
        let mut s = EngineSettings::new(&name, fabric.parse::<LinkSpec>().unwrap(), addr, 24);
        s.control = false;
        s.shards = shards;
        EmbeddedEngine::start(s).expect("engine starts")
    };
    let server = start(format!("eshard-{tag}-s-{}", std::process::id()), SERVER, server_shards);
    let client = start(format!("eshard-{tag}-c-{}", std::process::id()), CLIENT, 1);
    (server, client)
}

fn attach(e: &EmbeddedEngine) -> Board {
    e.attach(&AttachOptions::default()).expect("attach")
}

/// Sends `msg` and reads it back on `s` (an echo on the other side).
fn roundtrip(s: &mut Stream, msg: &[u8]) {
    s.send_all(msg).expect("send");
    let mut got = vec![0u8; msg.len()];
    let mut n = 0;
    while n < msg.len() {
        let k = s.recv(&mut got[n..]).expect("recv");
        assert!(k > 0, "end of stream after {n} bytes");
        n += k;
    }
    assert_eq!(got, msg);
}

/// Pins this thread to `cpu` (so the API places new endpoints on its shard).
fn pin(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; the calls take a live set of the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[test]
fn one_listener_accepts_on_every_shard_and_streams_live_on_the_shard_their_hash_names() {
    let (server, client) = engines("acc", 2);
    let sb = attach(&server);
    let mut l = sb.listen(7500, 64).expect("listen");
    let cb = attach(&client);
    let mut clients: Vec<Stream> = (0..16).map(|_| cb.connect(SocketAddrV4::new(SERVER, 7500)).expect("connect")).collect();
    let mut served = Vec::new();
    let t0 = Instant::now();
    while served.len() < 16 && t0.elapsed() < Duration::from_secs(10) {
        served.push(l.accept().expect("accept"));
    }
    assert_eq!(served.len(), 16);
    let shards: Vec<u32> = served.iter().map(Stream::shard).collect();
    assert!(shards.contains(&0) && shards.contains(&1), "accepted on both shards: {shards:?}");
    // Each accepted stream carries data both ways.
    for (i, c) in clients.iter_mut().enumerate() {
        let msg = format!("hello {i}");
        c.send_all(msg.as_bytes()).expect("send");
    }
    let mut eq = sb.event_queue();
    for s in &served {
        eq.add(s.id(), u64::from(s.id()), Interest::READABLE).expect("add to the event queue");
    }
    // One event queue over streams of both shards: every stream becomes readable.
    let mut readable = std::collections::BTreeSet::new();
    let t0 = Instant::now();
    let mut out = Vec::new();
    while readable.len() < 16 && t0.elapsed() < Duration::from_secs(10) {
        eq.wait(&mut out, Some(Duration::from_millis(200))).expect("wait");
        for r in &out {
            readable.insert(r.token);
        }
    }
    assert_eq!(readable.len(), 16, "the event queue saw every stream, of both shards");
    for s in &mut served {
        let mut b = [0u8; 64];
        let n = s.recv(&mut b).expect("recv");
        let text = String::from_utf8_lossy(&b[..n]).to_string();
        assert!(text.starts_with("hello "), "{text}");
        s.send_all(&b[..n]).expect("echo back");
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let msg = format!("hello {i}");
        let mut got = vec![0u8; msg.len()];
        let mut n = 0;
        while n < got.len() {
            n += c.recv(&mut got[n..]).expect("recv echo");
        }
        assert_eq!(got, msg.as_bytes());
    }
}

#[test]
fn connections_and_datagram_sockets_live_on_the_shard_of_the_core_that_made_them() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (server, client) = engines("conn", 2);
    // An echo on the client engine (one shard), in a thread of its own (a board is single-threaded).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stop2 = stop.clone();
    let echo = std::thread::spawn(move || {
        let cb = attach(&client);
        let mut cl = cb.listen(7600, 16).expect("listen");
        let mut cu = cb.bind_udp(7601).expect("bind");
        ready_tx.send(()).expect("ready");
        let mut streams = Vec::new();
        cl.set_mode(Mode::NonBlocking);
        cu.set_mode(Mode::NonBlocking);
        let t0 = Instant::now();
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(20) {
            if let Ok(s) = cl.accept() {
                streams.push(s);
            }
            for s in &mut streams {
                let mut b = [0u8; 256];
                s.set_mode(Mode::NonBlocking);
                if let Ok(n) = s.recv(&mut b) {
                    if n > 0 {
                        let _ = s.send_all(&b[..n]);
                    }
                }
            }
            let mut b = [0u8; 256];
            if let Ok((n, from)) = cu.recv_from(&mut b) {
                let _ = cu.send_to(&b[..n], from);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).expect("the echo listens");
    for shard in 0..2u32 {
        // The thread's core names the shard (on a machine with one core, both land on shard 0).
        let cpu = shard as usize % cores;
        let want = (cpu % 2) as u32;
        if !pin(cpu) {
            continue;
        }
        let sb = attach(&server);
        let mut s = sb.connect(SocketAddrV4::new(CLIENT, 7600)).expect("connect");
        assert_eq!(s.shard(), want, "a connection made on core {cpu} lives on shard {want}");
        roundtrip(&mut s, format!("from shard {shard}").as_bytes());
        let mut d = sb.bind_udp(0).expect("bind");
        assert_eq!(d.shard(), want, "a datagram socket bound on core {cpu} lives on shard {want}");
        d.set_mode(Mode::Blocking);
        // Its port is bound on one shard only: replies are steered (or forwarded) there.
        let mut got = None;
        for _ in 0..20 {
            d.send_to(b"ping", SocketAddrV4::new(CLIENT, 7601)).expect("send_to");
            d.set_mode(Mode::NonBlocking);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(200) {
                let mut b = [0u8; 16];
                if let Ok((n, _)) = d.recv_from(&mut b) {
                    got = Some(b[..n].to_vec());
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            if got.is_some() {
                break;
            }
        }
        assert_eq!(got.as_deref(), Some(&b"ping"[..]), "the datagram echo came back to shard {want}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    echo.join().expect("echo thread");
}
