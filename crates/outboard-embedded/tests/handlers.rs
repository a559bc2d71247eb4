#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! A handler between two applications: the SDK's `filter` example on a
//! mailbox of an embedded engine forwards what arrives to mailbox 100 of the
//! same engine (`enqueue`: no network hop), dropping messages that start
//! with `DROP` and upper-casing those that start with `lower:`. An
//! application on another engine sends reliable messages and datagrams to
//! the filter; an application on the first engine reads mailbox 100 and
//! sees exactly the filtered stream, in order. No root.

#[allow(dead_code)] // shared with the other tests
mod common;

use common::settings;
use outboard_api::{AttachOptions, MailboxAddr, MessageKind};
use outboard_embedded::EmbeddedEngine;
use outboard_engine::messages::handlers::{HandlerSettings, MailboxSpec};
use outboard_engine::messages::MessageSettings;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

const PORT: u16 = 7373;
const FILTER: u32 = 60;

/// The SDK's example handlers, built by `sdk/build.sh` into the target dir,
/// once per test process: the tests run in parallel threads, and two builds
/// copying into the same directory at once race (`cp`: "File exists").
fn handlers() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let exe = std::env::current_exe().expect("the test binary");
            let out = exe.parent().and_then(Path::parent).expect("target dir").join("handlers-embedded");
            let o = Command::new(root.join("sdk/build.sh")).arg(&out).output().expect("run sdk/build.sh");
            assert!(o.status.success(), "sdk/build.sh failed:\n{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            out
        })
        .clone()
}

fn host(last: u8) -> SocketAddr {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), PORT).into()
}

/// What the sender sends, and what the filter should pass on.
fn message(i: u32) -> (Vec<u8>, Option<Vec<u8>>) {
    match i % 3 {
        0 => (format!("plain {i}").into_bytes(), Some(format!("plain {i}").into_bytes())),
        1 => (format!("DROP {i}").into_bytes(), None),
        _ => (format!("lower:mixed Case {i}").into_bytes(), Some(format!("MIXED CASE {i}").into_bytes())),
    }
}

#[test]
fn a_filter_handler_forwards_rewrites_and_drops_between_two_applications() {
    let wasm = std::fs::read(handlers().join("filter.wasm")).expect("filter.wasm built");
    let fabric = format!("fabric:hfil-{}", std::process::id());
    let mut sa = settings(&fabric, "hfil-a", 1);
    sa.messages = Some(MessageSettings {
        handlers: vec![HandlerSettings {
            name: "filter".into(),
            source: "filter.wasm".into(),
            wasm: std::sync::Arc::new(wasm),
            mailbox: MailboxSpec::Number(FILTER),
            limits: Default::default(),
        }],
        ..MessageSettings::new(PORT)
    });
    let a = EmbeddedEngine::start(sa).expect("engine a with the filter");
    let mut sb = settings(&fabric, "hfil-b", 2);
    sb.messages = Some(MessageSettings::new(PORT));
    let b = EmbeddedEngine::start(sb).expect("engine b");
    const N: u32 = 600;
    let (ready_tx, ready_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let board = a.attach(&AttachOptions::default()).expect("attach a");
        let mut mb = board.bind_mailbox(Some(100), None).expect("bind mailbox 100");
        ready_tx.send(()).unwrap();
        // The last message (N, a multiple of 3) passes: a dropped one that
        // leaked would show before it.
        let want: Vec<Vec<u8>> = (0..=N).filter_map(|i| message(i).1).collect();
        let mut got = Vec::new();
        while got.len() < want.len() {
            let m = mb.begin_get().expect("begin_get");
            assert_eq!(m.kind, MessageKind::Datagram);
            assert_eq!(m.from, MailboxAddr::new(host(1), FILTER), "forwarded from the filter's mailbox");
            got.push(m.data.to_vec());
            mb.end_get().unwrap();
        }
        assert_eq!(got, want, "the filtered stream, in order");
        a
    });
    ready_rx.recv().unwrap();
    let board = b.attach(&AttachOptions::default()).expect("attach b");
    let mut mb = board.bind_mailbox(None, None).expect("bind sender");
    let filter = MailboxAddr::new(host(1), FILTER);
    let mut tags = std::collections::HashSet::new();
    for i in 0..=N {
        tags.insert(mb.send_message(filter, &message(i).0).expect("send_message"));
        while let Some((t, r)) = mb.poll_completion() {
            r.expect("acknowledged");
            tags.remove(&t);
        }
    }
    while !tags.is_empty() {
        let (t, r) = mb.wait_completion(Some(Duration::from_secs(10))).expect("completion");
        r.expect("acknowledged");
        tags.remove(&t);
    }
    let _a = reader.join().expect("the reader");
}

/// The key-value example's request, and what its handler answers.
fn kv_call(mb: &mut outboard_api::Mailbox, to: MailboxAddr, req: &[u8]) -> Vec<u8> {
    mb.call(to, req).expect("kv call")
}

#[test]
fn an_application_loads_replaces_and_unloads_a_handler_through_its_board() {
    let dir = handlers();
    let kv = std::fs::read(dir.join("kv.wasm")).expect("kv.wasm built");
    let garbage = std::fs::read(dir.join("garbage.wasm")).expect("garbage.wasm built");
    let line = std::fs::read(dir.join("line.wasm")).expect("line.wasm built");
    assert!(garbage.len() > 2048, "a module of several board buffers");
    let fabric = format!("fabric:hbrd-{}", std::process::id());
    let mut sa = settings(&fabric, "hbrd-a", 1);
    sa.messages = Some(MessageSettings::new(PORT));
    let a = EmbeddedEngine::start(sa).expect("engine a");
    let mut sb = settings(&fabric, "hbrd-b", 2);
    sb.messages = Some(MessageSettings::new(PORT));
    let b = EmbeddedEngine::start(sb).expect("engine b");
    let owner = a.attach(&AttachOptions::default()).expect("attach a");
    let other = a.attach(&AttachOptions::default()).expect("attach a again");
    let opts = outboard_api::HandlerOptions { deadline: Some(Duration::from_millis(20)), ..Default::default() };
    let number = owner.load_handler("kv", &kv, &opts).expect("load kv");
    // Refused: not a mailbox handler; garbage bytes; another board's name.
    assert!(matches!(owner.load_handler("l", &line, &opts), Err(outboard_api::Error::Errno(libc::EINVAL))));
    assert!(matches!(owner.load_handler("g", b"\0asm junk", &opts), Err(outboard_api::Error::Errno(libc::EINVAL))));
    assert!(matches!(other.load_handler("kv", &kv, &opts), Err(outboard_api::Error::Errno(libc::EPERM))));
    assert!(matches!(other.unload_handler("kv"), Err(outboard_api::Error::Errno(libc::EPERM))));
    // A module of several buffers loads.
    owner.load_handler("garbage", &garbage, &opts).expect("a multi-buffer module");
    owner.unload_handler("garbage").expect("unload garbage");
    // Another engine's application calls it, found by the handler's name.
    let client = b.attach(&AttachOptions::default()).expect("attach b");
    let mut mb = client.bind_mailbox(None, None).expect("bind client");
    let to = client.lookup(host(1), "kv").expect("the mailbox is named after the handler");
    assert_eq!(to.mailbox, number);
    for i in 0..200 {
        assert_eq!(kv_call(&mut mb, to, format!("Pk{i}\0v{i}").as_bytes()), b"+");
    }
    // Replaced by its board: the store and the mailbox stay.
    assert_eq!(owner.load_handler("kv", &kv, &opts).expect("replace"), number);
    for i in 0..200 {
        assert_eq!(kv_call(&mut mb, to, format!("Gk{i}").as_bytes()), format!("+v{i}").into_bytes());
    }
    // Unloaded: calls refused.
    owner.unload_handler("kv").expect("unload");
    assert!(matches!(owner.unload_handler("kv"), Err(outboard_api::Error::Errno(libc::ENOENT))));
    assert!(matches!(mb.call(to, b"Gk1"), Err(outboard_api::Error::ConnectionRefused)));
    // A board's handlers go with it.
    let n2 = other.load_handler("kv2", &kv, &opts).expect("load kv2");
    let to2 = MailboxAddr::new(host(1), n2);
    assert_eq!(kv_call(&mut mb, to2, b"Gnothing"), b"-");
    drop(other);
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        client.lookup(host(1), "kv2").is_err()
    });
    assert!(gone, "the handler of a board that detached is unloaded");
}
