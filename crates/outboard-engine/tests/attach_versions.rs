#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! An application built for another board layout version is refused at
//! attach, by name: the engine answers `EPROTONOSUPPORT` with its own
//! version in the reply, where every version's application reads it, and
//! the message an application shows names both versions. No root: the
//! engine runs on the shared-memory fabric.

use outboard_board::attach::{recv_record_prefix, send_record, version_refusal, AttachReply, AttachRequest, ATTACH_MAGIC, REPLY_COMMON_BYTES};
use outboard_board::layout::{BoardParams, VERSION};
use outboard_engine::engine::{Engine, EngineSettings};
use outboard_engine::link::LinkSpec;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn an_application_of_the_previous_layout_version_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("ob-versions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::env::set_var("OUTBOARD_RUN_DIR", &dir);
    let name = format!("versions{}", std::process::id());
    let fabric = LinkSpec::Fabric { name: format!("vf{}", std::process::id()) };
    let settings = EngineSettings::new(&name, fabric, [10, 0, 0, 1].into(), 24);
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let engine = std::thread::spawn(move || {
        let mut e = Engine::start(&settings).expect("engine starts on the fabric");
        e.run(&stop2, |_| false).expect("engine runs");
    });
    let path = dir.join(format!("{name}.board"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let sock = loop {
        match UnixStream::connect(&path) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("no board socket at {}: {e}", path.display()),
        }
    };
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let previous = VERSION - 1;
    let req = AttachRequest { magic: ATTACH_MAGIC, version: previous, pid: std::process::id(), _pad: 0, params: BoardParams::default() };
    send_record(&sock, &req, &[]).unwrap();
    let (reply, n, fds) = recv_record_prefix::<AttachReply>(&sock, REPLY_COMMON_BYTES).expect("a reply, not a hang-up");
    assert!(n >= REPLY_COMMON_BYTES);
    assert!(fds.is_empty(), "a refused application gets no board");
    assert_eq!(reply.magic, ATTACH_MAGIC);
    assert_eq!(reply.status, libc::EPROTONOSUPPORT as u32);
    assert_eq!(reply.version, VERSION);
    let msg = version_refusal(reply.version, previous);
    assert!(msg.contains(&format!("version {VERSION}")) && msg.contains(&format!("version {previous}")), "{msg}");
    stop.store(true, Ordering::Relaxed);
    engine.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
