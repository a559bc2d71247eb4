#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! Two embedded engines on one shared-memory fabric, an application on
//! each: the native API end to end, no root.

mod common;

use common::engine;
use outboard_api::{AttachOptions, Board, Error, Interest, Mode, Stream};
use outboard_embedded::InlineEngine;
use std::time::Duration;
use std::net::{Ipv4Addr, SocketAddrV4};


fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2654435761) >> 7) as u8
}

/// Asserts that `bytes`, the stream's bytes from offset `at` on, follow [`pattern`].
fn check_pattern(bytes: &[u8], at: u64) {
    for (k, b) in bytes.iter().enumerate() {
        assert_eq!(*b, pattern(at + k as u64), "byte {}", at + k as u64);
    }
}

#[test]
fn stream_through_two_embedded_engines_zero_copy_both_ends() {
    let fabric = format!("fabric:api-{}", std::process::id());
    let a = engine(&fabric, "api-a", 1);
    let b = engine(&fabric, "api-b", 2);
    let total: u64 = 64 << 20;
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let mut l = board_a.listen(7000, 16).expect("listen");
    let server = std::thread::spawn(move || {
        let board_b = b.attach(&AttachOptions::default()).expect("attach b");
        let mut s = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000)).expect("connect");
        let mut sent = 0u64;
        while sent < total {
            let buf = s.begin_put().expect("begin_put");
            let n = buf.len().min((total - sent) as usize);
            for (k, x) in buf[..n].iter_mut().enumerate() {
                *x = pattern(sent + k as u64);
            }
            s.end_put(n).expect("end_put");
            sent += n as u64;
        }
        s.shutdown().expect("shutdown");
        // Wait for the peer's close so everything was acknowledged.
        let mut sink = [0u8; 16];
        assert_eq!(s.recv(&mut sink).expect("eof"), 0);
        drop(s);
        drop(board_b);
    });
    let mut s = l.accept().expect("accept");
    let mut got = 0u64;
    loop {
        let buf = s.begin_get().expect("begin_get");
        if buf.is_empty() {
            break;
        }
        for (k, x) in buf.iter().enumerate() {
            assert_eq!(*x, pattern(got + k as u64), "byte {}", got + k as u64);
        }
        let n = buf.len();
        got += n as u64;
        s.end_get(n).expect("end_get");
    }
    assert_eq!(got, total);
    assert_eq!(board_a.copy_counters().recv_copied, 0);
    drop(s);
    server.join().expect("client thread");
}

/// A blocking read that finds nothing waits on the board's condition and,
/// with the data 30 ms away, sleeps: both counted (`Board::wait_counters`,
/// what `bench throughput` reports as each application's sleeps).
#[test]
fn a_blocking_wait_that_sleeps_is_counted() {
    let fabric = format!("fabric:apiw-{}", std::process::id());
    let a = engine(&fabric, "apiw-a", 1);
    let b = engine(&fabric, "apiw-b", 2);
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let mut l = board_a.listen(7001, 16).expect("listen");
    let client = std::thread::spawn(move || {
        let board_b = b.attach(&AttachOptions::default()).expect("attach b");
        let mut s = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7001)).expect("connect");
        std::thread::sleep(Duration::from_millis(30));
        s.send_all(b"late").expect("send");
        // Until the server closes.
        let mut sink = [0u8; 4];
        let _ = s.recv(&mut sink);
    });
    let mut s = l.accept().expect("accept");
    let before = board_a.wait_counters();
    let mut buf = [0u8; 4];
    let n = s.recv(&mut buf).expect("recv");
    assert!(n > 0 && buf[..n] == b"late"[..n], "{:?}", &buf[..n]);
    let after = board_a.wait_counters();
    assert!(after.waits > before.waits && after.sleeps > before.sleeps, "{before:?} -> {after:?}");
    assert!(after.sleeps <= after.waits, "{after:?}");
    drop(s);
    client.join().expect("client thread");
}

#[test]
fn datagrams_both_ways_copying_and_in_place() {
    let fabric = format!("fabric:apiu-{}", std::process::id());
    let a = engine(&fabric, "apiu-a", 1);
    let b = engine(&fabric, "apiu-b", 2);
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let board_b = b.attach(&AttachOptions::default()).expect("attach b");
    let mut ua = board_a.bind_udp(9000).expect("bind a");
    let mut ub = board_b.bind_udp(0).expect("bind b");
    assert_eq!(ua.local_port(), 9000);
    let to_a = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000);
    // The first datagram may wait for ARP: send until one arrives.
    let mut buf = [0u8; 2048];
    ua.set_mode(Mode::NonBlocking);
    let mut got = None;
    for i in 0..200 {
        ub.send_to(format!("hello {i}").as_bytes(), to_a).expect("send_to");
        std::thread::sleep(Duration::from_millis(5));
        if let Ok((n, from)) = ua.recv_from(&mut buf) {
            got = Some((n, from));
            break;
        }
    }
    let (n, from) = got.expect("no datagram arrived");
    assert!(buf[..n].starts_with(b"hello "));
    assert_eq!(from.ip(), std::net::IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    assert_eq!(from.port(), ub.local_port());
    // In place, back: write into a board buffer, read the reply in place.
    ua.set_mode(Mode::Blocking);
    for k in 0..100u32 {
        let out = ua.begin_put().expect("begin_put");
        out[..4].copy_from_slice(&k.to_be_bytes());
        ua.end_put_to(4, from).expect("end_put_to");
        let (msg, src) = ub.begin_get().expect("begin_get");
        assert_eq!(msg, &k.to_be_bytes());
        assert_eq!(src, std::net::SocketAddr::V4(to_a));
        ub.end_get().expect("end_get");
    }
    // Empty and would-block.
    ub.set_mode(Mode::NonBlocking);
    assert!(matches!(ub.recv_from(&mut buf), Err(Error::WouldBlock)));
}

#[test]
fn event_queue_over_many_streams_and_errors() {
    let fabric = format!("fabric:apie-{}", std::process::id());
    let a = engine(&fabric, "apie-a", 1);
    let b = engine(&fabric, "apie-b", 2);
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let mut l = board_a.listen(7100, 64).expect("listen");
    // Nobody listens on 7101: refused, as with a socket.
    let t = std::thread::spawn(move || {
        let board_b = b.attach(&AttachOptions::default()).expect("attach b");
        let refused = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7101));
        assert!(matches!(refused, Err(Error::ConnectionRefused)), "{:?}", refused.err());
        // An IPv6 destination: an engine without IPv6 answers EAFNOSUPPORT.
        let v6 = board_b.connect("[2001:db8::1]:7100".parse::<std::net::SocketAddr>().unwrap());
        assert!(matches!(v6, Err(Error::AddrFamily)), "{:?}", v6.err());
        let mut streams: Vec<_> = (0..16)
            .map(|_| board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7100)).expect("connect"))
            .collect();
        for (i, s) in streams.iter_mut().enumerate() {
            s.send_all(format!("stream {i:02}").as_bytes()).expect("send");
            s.shutdown().expect("shutdown");
        }
        // Each gets its own text back, then EOF.
        for (i, s) in streams.iter_mut().enumerate() {
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            loop {
                let n = s.recv(&mut buf).expect("recv");
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, format!("stream {i:02}").into_bytes());
        }
    });
    l.set_mode(Mode::NonBlocking);
    let mut q = board_a.event_queue();
    q.add(l.id(), u64::MAX, Interest::READABLE).expect("add listener");
    let mut conns = std::collections::HashMap::new();
    let mut ready = Vec::new();
    let mut closed = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while closed < 16 {
        assert!(std::time::Instant::now() < deadline, "event queue stalled with {closed} closed");
        q.wait(&mut ready, Some(Duration::from_secs(1))).expect("wait");
        for r in ready.clone() {
            if r.token == u64::MAX {
                while let Ok(s) = l.accept() {
                    q.add(s.id(), u64::from(s.id()), Interest::READABLE).expect("add stream");
                    conns.insert(u64::from(s.id()), s);
                }
                continue;
            }
            let s = conns.get_mut(&r.token).expect("registered stream");
            let mut buf = [0u8; 64];
            s.set_mode(Mode::NonBlocking);
            loop {
                match s.recv(&mut buf) {
                    Ok(0) => {
                        q.remove(r.endpoint).expect("remove");
                        conns.remove(&r.token);
                        closed += 1;
                        break;
                    }
                    Ok(n) => s.send_all(&buf[..n]).expect("echo"),
                    Err(Error::WouldBlock) => break,
                    Err(e) => panic!("recv: {e}"),
                }
            }
        }
    }
    t.join().expect("client");
}

fn inline(fabric: &str, name: &str, last: u8) -> InlineEngine {
    InlineEngine::start(common::settings(fabric, name, last)).expect("inline engine starts")
}

/// Two inline engines on a fabric of their own (`tag`): a thread runs one
/// (10.0.0.1), accepts one connection on `port` and hands it to `serve`;
/// this thread's engine (10.0.0.2) connects to it. Returns that thread,
/// and this side's engine and board (kept for the stream's life) and stream.
fn inline_pair(tag: &str, port: u16, serve: impl FnOnce(Stream) + Send + 'static) -> (std::thread::JoinHandle<()>, InlineEngine, Board, Stream) {
    let fabric = format!("fabric:{tag}-{}", std::process::id());
    let f2 = fabric.clone();
    let server_name = format!("{tag}-a");
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let e = inline(&f2, &server_name, 1);
        let board = e.attach(&AttachOptions { mode: Mode::Polling, ..Default::default() }).expect("attach");
        let mut l = board.listen(port, 4).expect("listen");
        tx.send(()).unwrap();
        serve(l.accept().expect("accept"));
    });
    rx.recv().unwrap();
    let e = inline(&fabric, &format!("{tag}-b"), 2);
    let board = e.attach(&AttachOptions { mode: Mode::Polling, ..Default::default() }).expect("attach");
    let s = board.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), port)).expect("connect");
    (server, e, board, s)
}

#[test]
fn inline_engines_ping_pong_and_stream_in_the_application_thread() {
    let (server, _e, _board, mut s) = inline_pair("apii", 7200, |mut s| {
        let mut buf = [0u8; 64];
        // Echo 64-byte requests until EOF.
        loop {
            let n = s.recv(&mut buf).expect("recv");
            if n == 0 {
                break;
            }
            s.send_all(&buf[..n]).expect("send");
        }
    });
    s.set_nodelay(true).expect("nodelay");
    let mut buf = [0u8; 64];
    for k in 0..2000u32 {
        let req = [k as u8; 64];
        s.send_all(&req).expect("send");
        let mut got = 0;
        while got < 64 {
            got += s.recv(&mut buf[got..]).expect("recv");
        }
        assert_eq!(buf, req);
    }
    s.shutdown().expect("shutdown");
    assert_eq!(s.recv(&mut buf).expect("eof"), 0);
    drop(s);
    server.join().expect("server");
}

/// A gathered write (`send_vectored`: a header, an empty piece, a body)
/// copies its pieces in order into the transmit region, wrapping at its end
/// many times over, and a write that finds less room than it has takes
/// what fits and says how much; a scattered read (`recv_vectored`) fills
/// its pieces in order: every byte arrives, in order, once.
#[test]
fn gathered_writes_arrive_in_order_across_the_region_end() {
    const TOTAL: u64 = 6 << 20;
    let (writer, _e, _board, mut s) = inline_pair("apiv", 7202, |mut s| {
        let (mut sent, mut round) = (0u64, 0usize);
        while sent < TOTAL {
            // Pieces of sizes that do not divide the region's: a header of
            // 1..=40 bytes, nothing, a body of up to 70,000 bytes.
            let head = 1 + round % 40;
            let body = (round * 7919) % 70_000;
            round += 1;
            let len = ((head + body) as u64).min(TOTAL - sent) as usize;
            let bytes: Vec<u8> = (0..len as u64).map(|k| pattern(sent + k)).collect();
            let (a, b) = bytes.split_at(head.min(len));
            let mut pieces: [&[u8]; 3] = [a, &[], b];
            let mut left = len;
            while left > 0 {
                let n = s.send_vectored(&pieces).expect("send_vectored");
                assert!(n > 0 && n <= left, "a polling gathered write takes 1..={left} bytes, took {n}");
                left -= n;
                // Drop what went from the front of the pieces.
                let mut skip = n;
                for p in pieces.iter_mut() {
                    let k = skip.min(p.len());
                    *p = &p[k..];
                    skip -= k;
                }
            }
            sent += len as u64;
        }
        assert_eq!(s.send_vectored(&[&[], &[]]).expect("nothing to send"), 0);
        s.shutdown().expect("shutdown");
        // This thread's engine runs only in its calls: wait here for the reader's end.
        let mut b = [0u8; 1];
        assert_eq!(s.recv(&mut b).expect("eof"), 0);
    });
    let mut buf = vec![0u8; 100_000];
    let mut got = 0u64;
    loop {
        // A scattered read: 7 bytes, nothing, the rest (adjacent in `buf`,
        // so what came is `buf[..n]`), filled in order across the region's end.
        let (head, body) = buf.split_at_mut(7);
        let n = s.recv_vectored(&mut [head, &mut [], body]).expect("recv_vectored");
        if n == 0 {
            break;
        }
        check_pattern(&buf[..n], got);
        got += n as u64;
    }
    assert_eq!(got, TOTAL);
    s.shutdown().expect("shutdown");
    drop(s);
    writer.join().expect("writer");
}

/// A gathered write is one push, so with TCP_NODELAY its pieces leave in
/// one segment, as the kernel sends a `writev`: 300 request/response
/// rounds of a three-piece request cost about one segment each way (a
/// push per piece sent each piece in a segment of its own, as the inline
/// engine runs a turn per command).
#[test]
fn a_gathered_write_leaves_in_one_segment() {
    const ROUNDS: u32 = 300;
    let (server, _e, _board, mut s) = inline_pair("apig", 7203, |mut s| {
        let mut buf = [0u8; 30];
        for _ in 0..ROUNDS {
            let mut got = 0;
            while got < buf.len() {
                got += s.recv(&mut buf[got..]).expect("recv");
            }
            s.send_all(&buf[..4]).expect("reply");
        }
        let mut b = [0u8; 1];
        assert_eq!(s.recv(&mut b).expect("eof"), 0);
    });
    s.set_nodelay(true).expect("nodelay");
    let before = s.tcp_info().segs_out;
    let mut reply = [0u8; 4];
    for k in 0..ROUNDS {
        let (head, body) = ([k as u8; 10], [!(k as u8); 20]);
        assert_eq!(s.send_vectored(&[&head, &[], &body]).expect("send_vectored"), 30);
        let mut got = 0;
        while got < reply.len() {
            got += s.recv(&mut reply[got..]).expect("recv");
        }
        assert_eq!(reply, [k as u8; 4]);
    }
    let segs = s.tcp_info().segs_out - before;
    eprintln!("{ROUNDS} three-piece requests: {segs} segments");
    assert!(segs <= ROUNDS + ROUNDS / 2, "{ROUNDS} three-piece requests took {segs} segments");
    s.shutdown().expect("shutdown");
    server.join().expect("server");
}

/// With an inline engine a read that empties a buffer less than half full
/// leaves its news (the bytes read) for the engine's next turn; other reads
/// take effect at once. A bulk receiver whose reads take all there is, and
/// then also only a little, goes through both, many times over: every byte
/// arrives in order and the window keeps reopening (reads whose news were
/// lost would stall the sender for good: the watchdog ends the test).
#[test]
fn inline_receiver_reading_all_or_a_little_keeps_a_bulk_sender_going() {
    const TOTAL: u64 = 8 << 20;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d2 = done.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        if !d2.load(std::sync::atomic::Ordering::SeqCst) {
            eprintln!("inline bulk transfer stalled for 60 s");
            std::process::exit(1);
        }
    });
    let (sender, _e, _board, mut s) = inline_pair("apib", 7201, |mut s| {
        let mut sent = 0u64;
        let mut chunk = vec![0u8; 60_000];
        while sent < TOTAL {
            let n = chunk.len().min((TOTAL - sent) as usize);
            for (k, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(sent + k as u64);
            }
            s.send_all(&chunk[..n]).expect("send");
            sent += n as u64;
        }
        s.shutdown().expect("shutdown");
        let mut b = [0u8; 1];
        assert_eq!(s.recv(&mut b).expect("eof"), 0);
    });
    let mut buf = vec![0u8; 1 << 20];
    let (mut got, mut reads) = (0u64, 0u64);
    loop {
        // The first half: every read takes all there is (up to 1 MiB, the
        // region's size). Then every other read takes 1,000 bytes.
        let want = if got < TOTAL / 2 || reads % 2 == 0 { buf.len() } else { 1000 };
        let n = s.recv(&mut buf[..want]).expect("recv");
        reads += 1;
        if n == 0 {
            break;
        }
        check_pattern(&buf[..n], got);
        got += n as u64;
    }
    assert_eq!(got, TOTAL);
    s.shutdown().expect("shutdown");
    drop(s);
    sender.join().expect("sender");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn a_slow_application_with_a_tiny_event_ring_is_not_dropped_and_loses_nothing() {
    let fabric = format!("fabric:apis-{}", std::process::id());
    let a = engine(&fabric, "apis-a", 1);
    let b = engine(&fabric, "apis-b", 2);
    // Room for 20 streams on each side (two regions each).
    let mut params = outboard_board::BoardParams { stream_buffers: 48, ..Default::default() };
    params.event_capacity = 8;
    let board_a = a.attach(&AttachOptions { params, ..Default::default() }).expect("attach a");
    let client_params = outboard_board::BoardParams { stream_buffers: 48, ..Default::default() };
    let mut l = board_a.listen(7300, 64).expect("listen");
    let t = std::thread::spawn(move || {
        let board_b = b.attach(&AttachOptions { params: client_params, ..Default::default() }).expect("attach b");
        let mut streams: Vec<_> = (0..20)
            .map(|_| board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7300)).expect("connect"))
            .collect();
        for round in 0..50u8 {
            for s in streams.iter_mut() {
                s.send_all(&[round; 100]).expect("send");
            }
        }
        for s in streams.iter_mut() {
            s.shutdown().expect("shutdown");
        }
        let mut b = [0u8; 8];
        for s in streams.iter_mut() {
            assert_eq!(s.recv(&mut b).expect("eof"), 0);
        }
    });
    // Hundreds of events arrive for an 8-slot ring while we look away.
    std::thread::sleep(Duration::from_millis(500));
    let mut total = 0;
    for _ in 0..20 {
        let mut s = l.accept().expect("accept after the pause");
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = s.recv(&mut buf).expect("recv");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got.len(), 5000);
        for (i, chunk) in got.chunks(100).enumerate() {
            assert!(chunk.iter().all(|&x| x == i as u8), "stream order");
        }
        total += got.len();
    }
    assert_eq!(total, 100_000);
    assert!(board_a.engine_alive(), "the engine dropped a slow application");
    t.join().expect("client");
}

/// An inline engine's timers run while its application waits in a polling
/// loop that nothing else will end: the application polls a stream whose
/// peer has gone silent, and only its keepalive probes going unanswered
/// (timers of this engine's, run in this thread) time the stream out. Any
/// cheaper idle loop (one that skips the engine's turns while no input
/// comes) must keep this.
#[test]
fn an_idle_inline_polling_wait_still_runs_the_engines_timers() {
    let fabric = format!("fabric:iq-{}", std::process::id());
    // The peer (an engine with its own thread) falls silent 1 s from now.
    let now = outboard_engine::clock::now();
    let mut sb = common::settings(&fabric, "iq-b", 2);
    sb.fabric_faults = Some((Default::default(), 1));
    if let Some((faults, _)) = sb.fabric_faults.as_mut() {
        faults.outages = vec![(now + Duration::from_secs(1), now + Duration::from_secs(600))];
    }
    let peer = outboard_embedded::EmbeddedEngine::start(sb).expect("peer engine");
    let peer_board = peer.attach(&AttachOptions::default()).expect("attach peer");
    let mut l = peer_board.listen(7300, 4).expect("listen");
    let (tx, rx) = std::sync::mpsc::channel();
    let f2 = fabric.clone();
    let app = std::thread::spawn(move || {
        let e = inline(&f2, "iq-a", 1);
        let board = e.attach(&AttachOptions { mode: Mode::Polling, ..Default::default() }).expect("attach");
        let mut c = board.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7300)).expect("connect");
        let ms = Duration::from_millis;
        c.set_keepalive(Some((ms(300), ms(300), 2))).expect("keepalive");
        let t0 = std::time::Instant::now();
        let mut buf = [0u8; 16];
        let r = c.recv(&mut buf);
        let _ = tx.send((format!("{r:?}"), t0.elapsed()));
    });
    let _s = l.accept().expect("accept");
    // Silent from 1 s; idle 300 ms, then 2 probes 300 ms apart unanswered:
    // about 1.6 s. A wait that ran no timer would never return.
    let (r, took) = rx.recv_timeout(Duration::from_secs(20)).expect("the polling wait returned (the engine's timers ran)");
    assert_eq!(r, "Err(TimedOut)", "after {took:?}");
    assert!(took < Duration::from_secs(10), "timed out after {took:?}");
    app.join().expect("app thread");
}

/// An engine whose link was opened ahead of its start (`prepare`, what the
/// socket shim's in-process engine does before a program drops its
/// privileges) carries a connection once started; the start refuses
/// settings other than those it was prepared with.
#[test]
fn an_engine_prepared_ahead_starts_on_what_it_opened() {
    use outboard_embedded::EmbeddedEngine;
    let fabric = format!("fabric:prep-{}", std::process::id());
    let s = common::settings(&fabric, "prep-a", 1);
    let prepared = EmbeddedEngine::prepare(&s).expect("prepare");
    let mut other = s.clone();
    other.name = "prep-other".into();
    let e = EmbeddedEngine::start_prepared(other, prepared, || {}, true).err().expect("other settings are refused");
    assert!(e.to_string().contains("prepared with other settings"), "{e}");

    let prepared = EmbeddedEngine::prepare(&s).expect("prepare again: the refused start closed what it was given");
    let a = EmbeddedEngine::start_prepared(s, prepared, || {}, true).expect("start on what was prepared");
    let b = engine(&fabric, "prep-b", 2);
    let board_a = a.attach(&AttachOptions::default()).expect("attach a");
    let mut l = board_a.listen(7100, 4).expect("listen");
    let client = std::thread::spawn(move || {
        let board_b = b.attach(&AttachOptions::default()).expect("attach b");
        let mut c = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7100)).expect("connect");
        c.send(b"prepared").expect("send");
        let mut got = [0u8; 8];
        let mut n = 0;
        while n < got.len() {
            n += c.recv(&mut got[n..]).expect("recv");
        }
        assert_eq!(&got, b"PREPARED");
    });
    let mut s = l.accept().expect("accept");
    let mut got = [0u8; 8];
    let mut n = 0;
    while n < got.len() {
        n += s.recv(&mut got[n..]).expect("recv");
    }
    assert_eq!(&got, b"prepared");
    s.send(b"PREPARED").expect("send");
    client.join().expect("client");
}
