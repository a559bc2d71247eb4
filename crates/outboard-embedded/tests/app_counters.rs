#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! The application's counters in the board header reach `outboard stat`
//! (JSON and text), per board, with its pid and board bytes; a bad option is
//! counted, not punished.

use outboard_api::{app_counter, AttachOptions};
use outboard_board::command::{Endpoint, KeepAlive, StreamOption};
use outboard_board::BoardCommand;
use outboard_embedded::EmbeddedEngine;
use outboard_engine::engine::EngineSettings;
use outboard_engine::link::LinkSpec;
use outboard_engine::stat::{parse, render, Snapshot};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

/// What `outboard stat --json` prints, and its snapshot.
fn stat(name: &str) -> (String, Snapshot) {
    let answer = outboard_engine::control::query(name, "stat").expect("stat answers");
    let snap = parse(&answer).expect("stat snapshot");
    (answer, snap)
}

#[test]
fn app_counters_and_bad_options_show_in_stat() {
    // This test binary's only test: the run directory is ours alone.
    let dir = std::env::temp_dir().join(format!("ob-appctr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::env::set_var("OUTBOARD_RUN_DIR", &dir);
    let fabric = format!("fabric:appctr-{}", std::process::id());
    let start = |name: &str, last: u8| {
        let link: LinkSpec = fabric.parse().expect("link spec");
        let mut s = EngineSettings::new(name, link, Ipv4Addr::new(10, 0, 0, last), 24);
        s.control = true;
        EmbeddedEngine::start(s).expect("engine starts")
    };
    let name = format!("appctr-a-{}", std::process::id());
    let a = start(&name, 1);
    let b = start(&format!("appctr-b-{}", std::process::id()), 2);
    let board = a.attach(&AttachOptions::default()).expect("attach");
    let quiet = a.attach(&AttachOptions::default()).expect("attach a second board");
    board.app_counter_add(app_counter::ENGINE_SOCKETS, 3);
    board.app_counter_add(app_counter::EINTR, 1);
    board.app_counter_add(app_counter::KERNEL_FALLBACK_CONNECTS, 2);
    board.app_counter_add(app_counter::EINTR, 4);
    board.app_counter_add(12, 9); // a slot without a name yet
    board.app_counter_add(99, 1); // out of range: ignored
    let c = board.app_counters();
    assert_eq!((c[0], c[7], c[8], c[12]), (3, 5, 2, 9));
    assert_eq!(c.iter().sum::<u64>(), 19);

    // A stream, and keep-alive options the API would refuse, sent as records:
    // counted and ignored (an idle time of 0 ms, and an option nobody defines).
    let mut l = board.listen(7300, 4).expect("listen");
    let board_b = b.attach(&AttachOptions::default()).expect("attach b");
    let mut cb = board_b.connect(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7300)).expect("connect");
    let mut s = l.accept().expect("accept");
    let ka = KeepAlive { idle: Duration::ZERO, interval: Duration::from_secs(1), probes: 3 };
    for option in [StreamOption::KeepAlive(Some(ka)), StreamOption::Invalid] {
        let c = BoardCommand::SetOption { ep: Endpoint(s.id()), option };
        board.__raw_command_for_tests(c.encode()).expect("command");
    }
    // The stream still works (no violation).
    cb.send_all(b"ping").expect("send");
    let mut four = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        n += s.recv(&mut four[n..]).expect("recv");
    }
    assert_eq!(&four, b"ping");

    let pid = std::process::id();
    let t0 = Instant::now();
    let (json, snap) = loop {
        let (json, snap) = stat(&name);
        if snap.boards.iter().any(|r| r.bad_options == 2) || t0.elapsed() > Duration::from_secs(5) {
            break (json, snap);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(snap.host.violations, 0);
    assert_eq!(snap.boards.len(), 2, "{json}");
    let row = snap.boards.iter().find(|r| !r.app.is_empty()).expect("the counting board");
    assert_eq!(row.pid, pid);
    assert!(row.board_bytes > 0);
    assert_eq!(row.bad_options, 2);
    assert_eq!(row.app.get("engine_sockets"), Some(&3));
    assert_eq!(row.app.get("eintr"), Some(&5));
    assert_eq!(row.app.get("kernel_fallback_connects"), Some(&2));
    assert_eq!(row.app.get("slot_12"), Some(&9));
    assert_eq!(row.app.len(), 4, "zero counters are left out: {:?}", row.app);
    let other = snap.boards.iter().find(|r| r.app.is_empty()).expect("the quiet board");
    assert_eq!(other.pid, pid);
    // The JSON `outboard stat --json` prints has them under each board.
    // (Keys of a map in sorted order: serde writes a BTreeMap so.)
    assert!(
        json.contains(r#""app":{"eintr":5,"engine_sockets":3,"kernel_fallback_connects":2,"slot_12":9}"#),
        "{json}"
    );
    assert!(json.contains(r#""bad_options":2"#), "{json}");
    assert!(json.contains(&format!(r#""pid":{pid}"#)), "{json}");
    // And the text form.
    let text = render(&snap);
    assert!(text.contains(&format!("pid {pid}")), "{text}");
    assert!(text.contains("app: eintr=5 engine_sockets=3 kernel_fallback_connects=2 slot_12=9"), "{text}");
    assert!(text.contains("bad options 2"), "{text}");
    drop((s, cb, l, quiet, board, board_b));
    let _ = std::fs::remove_dir_all(&dir);
}
