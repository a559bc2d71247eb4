#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! The engine as a service (no root): the sample configuration in
//! `packaging/` checks out with `--check-config`, broken ones are refused
//! with exit 2 naming the key, and an engine started with `NOTIFY_SOCKET`
//! (as systemd's `Type=notify` does) says `READY=1` once it takes requests
//! and `STOPPING=1` when told to stop.

mod support;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::engine::{stat_in, ChildGuard};
use support::{outboard, test_dir, text, OUTBOARD};

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/engine.toml")
}

#[test]
fn the_sample_config_checks_out_and_broken_ones_exit_2_naming_the_key() {
    let s = sample();
    let o = outboard(&["engine", "--check-config", s.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("valid: engine \"edge\" on af_packet:eth1, address 192.0.2.10/24 via 192.0.2.1"), "{out}");

    let dir = test_dir("ob-service", "cfg");
    let sample_text = std::fs::read_to_string(&s).unwrap();
    let cases = [
        ("memory_cap = \"512MiB\"", "memory_cap = \"0\"", "memory_cap"),
        ("gateway = \"192.0.2.1\"", "gateway = \"198.51.100.1\"", "--gateway"),
        ("allow_user = [\"nobody\"]", "allow_user = [\"no-such-user-obx\"]", "no such user"),
        ("cc = \"cubic\"", "cc = \"cubic\"\nwindow = 3", "window"),
    ];
    for (from, to, want) in cases {
        assert!(sample_text.contains(from), "the sample has {from:?}");
        let p = dir.join("broken.toml");
        std::fs::write(&p, sample_text.replace(from, to)).unwrap();
        let o = outboard(&["engine", "--check-config", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{to:?}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(want), "{to:?} names {want:?}: {}", text(&o));
    }
    let o = outboard(&["engine", "--check-config", dir.join("missing.toml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_engine_tells_its_init_system_when_it_is_ready_and_when_it_stops() {
    let dir = test_dir("ob-service", "notify");
    let sock = dir.join("notify");
    let rx = UnixDatagram::bind(&sock).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let name = format!("svc-{}", std::process::id());
    let fabric = format!("fabric:svc{}", std::process::id());
    let child = Command::new(OUTBOARD)
        .args(["engine", "--name", &name, "--link", &fabric, "--addr", "10.0.0.1/24", "--log-level", "warn"])
        .env("OUTBOARD_RUN_DIR", &dir)
        .env("NOTIFY_SOCKET", &sock)
        .spawn()
        .unwrap();
    let mut engine = ChildGuard::new(child, Duration::from_secs(5));
    let mut b = [0u8; 512];
    let n = rx.recv(&mut b).expect("READY=1 within 20 s");
    let msg = String::from_utf8_lossy(&b[..n]).into_owned();
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg}");
    assert!(msg.contains(&format!("MAINPID={}", engine.pid())) && msg.contains(&format!("STATUS=engine {name} on {fabric}")), "{msg}");
    assert!(stat_in(&dir, &name).is_some(), "ready means the control socket answers");
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(engine.pid() as i32, libc::SIGTERM) };
    let n = rx.recv(&mut b).expect("STOPPING=1 after SIGTERM");
    assert_eq!(&b[..n], b"STOPPING=1");
    let (st, _) = engine.finish_lines(Duration::from_secs(10));
    assert!(st.is_some_and(|s| s.success()), "{st:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
