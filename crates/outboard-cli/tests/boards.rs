#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test harness
//! Applications on boards, through engine daemons on the shared-memory
//! fabric (no root): the native-API examples of `crates/outboard-api`
//! (built by `cargo test --workspace` into `target/<profile>/examples/`)
//! attached to `outboard engine` processes.
//!
//! - an application killed with SIGKILL mid-transfer: within 1 s its
//!   connections are reset and its board freed; a neighbour carries on;
//! - an engine killed: a call blocked in it and later calls both return
//!   "engine gone" within 1 s;
//! - hostile applications scribbling over their boards or sending random
//!   commands: the engine stays up and another transfer completes byte-exact.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::engine::{start_engine, stat_in, until, ChildGuard, GRACE};
use support::{example, json_line, test_dir};

/// How long an engine may take to come up.
const UP: Duration = Duration::from_secs(10);
/// How often `until` polls `stat` (the tests time clean-ups to the second).
const POLL: Duration = Duration::from_millis(5);

/// A native-API example attached to the engines in `dir`, output piped.
fn app(dir: &Path, name: &str, args: &[&str]) -> ChildGuard {
    ChildGuard::new(
        Command::new(example(name))
            .args(args)
            .env("OUTBOARD_RUN_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}")),
        GRACE,
    )
}

fn boards(s: &serde_json::Value) -> usize {
    s["boards"].as_array().map_or(0, |b| b.len())
}

#[test]
fn killed_application_is_cleaned_up_within_a_second_and_its_neighbour_carries_on() {
    let dir = test_dir("ob-boards-test", "kill");
    let fabric = format!("fabric:bk{}", std::process::id());
    let _ea = start_engine(&dir, "bk-a", &["--link", &fabric, "--addr", "10.0.0.1/24"], UP);
    let _eb = start_engine(&dir, "bk-b", &["--link", &fabric, "--addr", "10.0.0.2/24"], UP);
    let base = stat_in(&dir, "bk-a").expect("stat");
    let (mem0, boards0) = (base["memory_in_use"].as_u64().unwrap(), base["board_memory"].as_u64().unwrap());
    // The neighbour: 256 MiB upload into a sink on the same engine.
    let sink = app(&dir, "sink_server", &["bk-a", "6002"]);
    let victim = app(&dir, "sink_server", &["bk-a", "6001"]);
    until(&dir, "bk-a", Duration::from_secs(5), POLL, "two boards attached", |s| boards(s) == 2);
    let up_n = app(&dir, "upload", &["bk-b", "10.0.0.1:6002", "256MiB"]);
    let up_v = app(&dir, "upload", &["bk-b", "10.0.0.1:6001", "1GiB"]);
    // Mid-transfer: both connections established and moving.
    until(&dir, "bk-a", Duration::from_secs(10), POLL, "both transfers running", |s| {
        s["connections"].as_array().is_some_and(|c| c.iter().filter(|c| c["bytes_in"].as_u64().unwrap_or(0) > 1 << 20).count() == 2)
    });
    let killed = Instant::now();
    assert!(Command::new("kill").args(["-KILL", &victim.pid().to_string()]).status().unwrap().success());
    // Within 1 s: the board is gone, its connection reset, the uploader told.
    let t = until(&dir, "bk-a", Duration::from_secs(1), POLL, "victim's board freed", |s| {
        boards(s) == 1
            && s["host"]["died"].as_u64() == Some(1)
            && !s["connections"].as_array().unwrap().iter().any(|c| c["local"].as_str().is_some_and(|l| l.ends_with(":6001")))
    });
    let (st, _, err) = up_v.finish(Duration::from_secs(1).saturating_sub(killed.elapsed()) + Duration::from_millis(200));
    let st = st.expect("the victim's peer was not told within 1 s");
    assert!(!st.success() && err.contains("reset"), "victim's peer: {st} {err}");
    eprintln!("victim cleaned up in {t:?} after SIGKILL; its peer saw: {}", err.trim());
    // The neighbour finishes byte-exact.
    let (st, out, err) = up_n.finish(Duration::from_secs(120));
    assert!(st.is_some_and(|s| s.success()), "neighbour upload: {err}");
    let (st2, out2, err2) = sink.finish(Duration::from_secs(10));
    assert!(st2.is_some_and(|s| s.success()), "neighbour sink: {err2}");
    let (a, b) = (json_line(&out), json_line(&out2));
    assert_eq!(a["bytes"], 256u64 << 20);
    assert_eq!(a, b, "what the neighbour sent and received differ");
    // Everything back to the baseline once the neighbour detached too.
    until(&dir, "bk-a", Duration::from_secs(5), POLL, "memory back to baseline", |s| {
        boards(s) == 0
            && s["board_memory"].as_u64() == Some(boards0)
            && s["connections"].as_array().is_some_and(|c| c.is_empty())
            // The baseline plus the peer engine's ARP entry, learned during the test.
            && s["memory_in_use"].as_u64().is_some_and(|m| m <= mem0 + 512)
    });
}

#[test]
fn engine_death_fails_blocked_and_later_calls_within_a_second() {
    let dir = test_dir("ob-boards-test", "death");
    let fabric = format!("fabric:bd{}", std::process::id());
    let ea = start_engine(&dir, "bd-a", &["--link", &fabric, "--addr", "10.0.0.1/24"], UP);
    // Blocked: a sink waiting in accept. Later calls: a watcher polling.
    let blocked = app(&dir, "sink_server", &["bd-a", "6100"]);
    let mut watcher = app(&dir, "engine_watch", &["bd-a", "6101"]);
    let mut line = String::new();
    BufReader::new(watcher.child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    until(&dir, "bd-a", Duration::from_secs(5), POLL, "two boards", |s| boards(s) == 2);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    assert!(Command::new("kill").args(["-KILL", &ea.pid().to_string()]).status().unwrap().success());
    let (st, _, err) = blocked.finish(Duration::from_millis(1000));
    let t_blocked = t0.elapsed();
    let st = st.unwrap_or_else(|| panic!("a call blocked in accept did not return within 1 s of the engine's death"));
    assert!(!st.success() && err.contains("engine is gone"), "{st}: {err}");
    let (st, out, err) = watcher.finish(Duration::from_millis(1000).saturating_sub(t0.elapsed()) + Duration::from_millis(50));
    let t_later = t0.elapsed();
    assert!(st.is_some_and(|s| s.success()), "watcher: {err}");
    assert_eq!(json_line(&out)["engine_gone"], true);
    assert!(t_later < Duration::from_millis(1050), "later calls noticed after {t_later:?}");
    eprintln!("engine death seen by a blocked call after {t_blocked:?}, by later calls after {t_later:?}");
}

#[test]
fn hostile_boards_cannot_stop_the_engine_or_garble_a_neighbour() {
    let dir = test_dir("ob-boards-test", "hostile");
    let fabric = format!("fabric:bh{}", std::process::id());
    let _ea = start_engine(&dir, "bh-a", &["--link", &fabric, "--addr", "10.0.0.1/24"], UP);
    let _eb = start_engine(&dir, "bh-b", &["--link", &fabric, "--addr", "10.0.0.2/24"], UP);
    let sink = app(&dir, "sink_server", &["bh-a", "6200"]);
    until(&dir, "bh-a", Duration::from_secs(5), POLL, "sink attached", |s| boards(s) == 1);
    let up = app(&dir, "upload", &["bh-b", "10.0.0.1:6200", "256MiB"]);
    // Seeded scribblers, one after another, while the transfer runs.
    let mut dropped = 0;
    for seed in 1..=12u64 {
        let mode = if seed % 2 == 0 { "commands" } else { "bytes" };
        let s = app(&dir, "scribbler", &["bh-a", &seed.to_string(), "1", mode]);
        let (st, out, err) = s.finish(Duration::from_secs(10));
        assert!(st.is_some(), "scribbler {seed} ({mode}) hung");
        if json_line(&out)["dropped"] == true {
            dropped += 1;
        }
        let _ = err;
        assert!(stat_in(&dir, "bh-a").is_some(), "engine died under scribbler {seed} ({mode})");
    }
    let (st, out, err) = up.finish(Duration::from_secs(120));
    assert!(st.is_some_and(|s| s.success()), "upload beside the scribblers: {err}");
    let (st2, out2, err2) = sink.finish(Duration::from_secs(10));
    assert!(st2.is_some_and(|s| s.success()), "sink beside the scribblers: {err2}");
    assert_eq!(json_line(&out), json_line(&out2), "the neighbour's bytes differ");
    let s = stat_in(&dir, "bh-a").expect("engine alive");
    let h = &s["host"];
    eprintln!("scribblers dropped by the engine: {dropped}/12; host counters {h}");
    assert!(h["violations"].as_u64().unwrap() >= 1, "no violation was detected: {h}");
    until(&dir, "bh-a", Duration::from_secs(5), POLL, "every hostile board freed", |s| boards(s) == 0);
}

/// The board mapping of process `pid` (its memfd is named `outboard-board-…`), from /proc/PID/maps.
fn board_range(pid: u32) -> Option<(usize, usize)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let line = maps.lines().find(|l| l.contains("outboard-board-"))?;
    let (lo, hi) = line.split_whitespace().next()?.split_once('-')?;
    Some((usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?))
}

/// Scribbles on a **live** board from outside the application, as another
/// process with the right to map it would (root, through
/// `/proc/PID/map_files`), while the application has commands in flight:
/// ring indices, command records, status records, syncs and buffers all
/// change under both sides. The engine must stay up, a neighbour's transfer
/// must arrive byte-exact, and the victim's board is freed once it is gone.
/// Bounded: 2 s of scribbling, at most 200,000 writes.
#[test]
fn a_live_board_scribbled_from_outside_cannot_stop_the_engine_or_garble_a_neighbour() {
    if support::netns::skip_unless_root("a_live_board_scribbled_from_outside") {
        return;
    }
    let dir = test_dir("ob-boards-test", "outside");
    let fabric = format!("fabric:bo{}", std::process::id());
    let _ea = start_engine(&dir, "bo-a", &["--link", &fabric, "--addr", "10.0.0.1/24"], UP);
    let _eb = start_engine(&dir, "bo-b", &["--link", &fabric, "--addr", "10.0.0.2/24"], UP);
    let sink = app(&dir, "sink_server", &["bo-a", "6300"]);
    let victim = app(&dir, "sink_server", &["bo-a", "6301"]);
    until(&dir, "bo-a", Duration::from_secs(5), POLL, "both sinks attached", |s| boards(s) == 2);
    let up = app(&dir, "upload", &["bo-b", "10.0.0.1:6300", "256MiB"]);
    let victim_up = app(&dir, "upload", &["bo-b", "10.0.0.1:6301", "4GiB"]);
    // The victim is busy: CONSUMED commands in flight, events coming back.
    until(&dir, "bo-a", Duration::from_secs(10), POLL, "the victim's stream flows", |s| {
        s["host"]["rx_delivered"].as_u64().unwrap_or(0) > 8 << 20
    });
    let pid = victim.pid();
    let (lo, hi) = board_range(pid).expect("the victim maps its board");
    let path = format!("/proc/{pid}/map_files/{lo:x}-{hi:x}");
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
    let len = hi - lo;
    // SAFETY: maps the victim's board file shared; we only write bytes into our own view of it.
    let base = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, std::os::fd::AsRawFd::as_raw_fd(&file), 0)
    };
    assert_ne!(base, libc::MAP_FAILED, "mmap {path}");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let t0 = Instant::now();
    let mut writes = 0u32;
    while t0.elapsed() < Duration::from_secs(2) && writes < 200_000 {
        // Mostly the first 64 KiB (header, rings, status records, syncs), sometimes anywhere.
        let span = if next().is_multiple_of(4) { len } else { len.min(64 << 10) };
        let at = (next() as usize) % (span - 8);
        let v = next();
        // SAFETY: `at + 8 <= len`, inside our mapping.
        unsafe { std::ptr::write_unaligned((base as *mut u8).add(at).cast::<u64>(), v) };
        writes += 1;
        if writes.is_multiple_of(1000) {
            assert!(stat_in(&dir, "bo-a").is_some(), "the engine died under the scribbling ({writes} writes)");
        }
    }
    // SAFETY: unmaps what we mapped.
    unsafe { libc::munmap(base, len) };
    eprintln!("scribbled {writes} words over the victim's live board in {:?}", t0.elapsed());
    assert!(stat_in(&dir, "bo-a").is_some(), "the engine is up after the scribbling");
    let (st, out, err) = up.finish(Duration::from_secs(120));
    assert!(st.is_some_and(|s| s.success()), "the neighbour's upload: {err}");
    let (st2, out2, err2) = sink.finish(Duration::from_secs(10));
    assert!(st2.is_some_and(|s| s.success()), "the neighbour's sink: {err2}");
    assert_eq!(json_line(&out), json_line(&out2), "the neighbour's bytes differ");
    drop(victim_up);
    drop(victim);
    let s = stat_in(&dir, "bo-a").expect("engine alive");
    eprintln!("host counters after the scribbling: {}", s["host"]);
    until(&dir, "bo-a", Duration::from_secs(5), POLL, "the victim's board freed", |s| boards(s) == 0);
}
