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
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::{example, OUTBOARD};


fn run_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ob-boards-test-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A child process killed and reaped on drop.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Proc {
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
    /// Waits at most `limit` for the exit; the output so far.
    fn finish(mut self, limit: Duration) -> (Option<std::process::ExitStatus>, String, String) {
        let t0 = Instant::now();
        let status = loop {
            if let Ok(Some(st)) = self.0.try_wait() {
                break Some(st);
            }
            if t0.elapsed() > limit {
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut out = String::new();
        let mut err = String::new();
        if status.is_some() {
            use std::io::Read;
            if let Some(mut o) = self.0.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            if let Some(mut e) = self.0.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
        }
        (status, out, err)
    }
}

fn engine(dir: &Path, fabric: &str, name: &str, addr: &str) -> Proc {
    let p = Proc(
        Command::new(OUTBOARD)
            .args(["engine", "--link", fabric, "--addr", addr, "--name", name, "--log-level", "warn"])
            .env("OUTBOARD_RUN_DIR", dir)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn engine"),
    );
    let t0 = Instant::now();
    while stat(dir, name).is_none() {
        assert!(t0.elapsed() < Duration::from_secs(10), "engine {name} did not come up");
        std::thread::sleep(Duration::from_millis(30));
    }
    p
}

fn app(dir: &Path, name: &str, args: &[&str]) -> Proc {
    Proc(
        Command::new(example(name))
            .args(args)
            .env("OUTBOARD_RUN_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}")),
    )
}

fn stat(dir: &Path, name: &str) -> Option<serde_json::Value> {
    let out: Output = Command::new(OUTBOARD).args(["stat", "--json", "--name", name]).env("OUTBOARD_RUN_DIR", dir).output().ok()?;
    out.status.success().then(|| serde_json::from_slice(&out.stdout).ok()).flatten()
}

fn json(out: &str) -> serde_json::Value {
    let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no JSON line in {out:?}"));
    serde_json::from_str(line).expect("JSON")
}

/// Waits until `pred(stat)` holds, at most `limit`; returns the time it took.
fn until(dir: &Path, name: &str, limit: Duration, what: &str, pred: impl Fn(&serde_json::Value) -> bool) -> Duration {
    let t0 = Instant::now();
    loop {
        if let Some(s) = stat(dir, name) {
            if pred(&s) {
                return t0.elapsed();
            }
        }
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}: {:?}", stat(dir, name));
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn boards(s: &serde_json::Value) -> usize {
    s["boards"].as_array().map_or(0, |b| b.len())
}

#[test]
fn killed_application_is_cleaned_up_within_a_second_and_its_neighbour_carries_on() {
    let dir = run_dir("kill");
    let fabric = format!("fabric:bk{}", std::process::id());
    let _ea = engine(&dir, &fabric, "bk-a", "10.0.0.1/24");
    let _eb = engine(&dir, &fabric, "bk-b", "10.0.0.2/24");
    let base = stat(&dir, "bk-a").expect("stat");
    let (mem0, boards0) = (base["memory_in_use"].as_u64().unwrap(), base["board_memory"].as_u64().unwrap());
    // The neighbour: 256 MiB upload into a sink on the same engine.
    let sink = app(&dir, "sink_server", &["bk-a", "6002"]);
    let victim = app(&dir, "sink_server", &["bk-a", "6001"]);
    until(&dir, "bk-a", Duration::from_secs(5), "two boards attached", |s| boards(s) == 2);
    let up_n = app(&dir, "upload", &["bk-b", "10.0.0.1:6002", "256MiB"]);
    let up_v = app(&dir, "upload", &["bk-b", "10.0.0.1:6001", "1GiB"]);
    // Mid-transfer: both connections established and moving.
    until(&dir, "bk-a", Duration::from_secs(10), "both transfers running", |s| {
        s["connections"].as_array().is_some_and(|c| c.iter().filter(|c| c["bytes_in"].as_u64().unwrap_or(0) > 1 << 20).count() == 2)
    });
    let killed = Instant::now();
    assert!(Command::new("kill").args(["-KILL", &victim.pid()]).status().unwrap().success());
    // Within 1 s: the board is gone, its connection reset, the uploader told.
    let t = until(&dir, "bk-a", Duration::from_secs(1), "victim's board freed", |s| {
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
    let (a, b) = (json(&out), json(&out2));
    assert_eq!(a["bytes"], 256u64 << 20);
    assert_eq!(a, b, "what the neighbour sent and received differ");
    // Everything back to the baseline once the neighbour detached too.
    until(&dir, "bk-a", Duration::from_secs(5), "memory back to baseline", |s| {
        boards(s) == 0
            && s["board_memory"].as_u64() == Some(boards0)
            && s["connections"].as_array().is_some_and(|c| c.is_empty())
            // The baseline plus the peer engine's ARP entry, learned during the test.
            && s["memory_in_use"].as_u64().is_some_and(|m| m <= mem0 + 512)
    });
}

#[test]
fn engine_death_fails_blocked_and_later_calls_within_a_second() {
    let dir = run_dir("death");
    let fabric = format!("fabric:bd{}", std::process::id());
    let ea = engine(&dir, &fabric, "bd-a", "10.0.0.1/24");
    // Blocked: a sink waiting in accept. Later calls: a watcher polling.
    let blocked = app(&dir, "sink_server", &["bd-a", "6100"]);
    let mut watcher = app(&dir, "engine_watch", &["bd-a", "6101"]);
    let mut line = String::new();
    BufReader::new(watcher.0.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    until(&dir, "bd-a", Duration::from_secs(5), "two boards", |s| boards(s) == 2);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    assert!(Command::new("kill").args(["-KILL", &ea.pid()]).status().unwrap().success());
    let (st, _, err) = blocked.finish(Duration::from_millis(1000));
    let t_blocked = t0.elapsed();
    let st = st.unwrap_or_else(|| panic!("a call blocked in accept did not return within 1 s of the engine's death"));
    assert!(!st.success() && err.contains("engine is gone"), "{st}: {err}");
    let (st, out, err) = watcher.finish(Duration::from_millis(1000).saturating_sub(t0.elapsed()) + Duration::from_millis(50));
    let t_later = t0.elapsed();
    assert!(st.is_some_and(|s| s.success()), "watcher: {err}");
    assert_eq!(json(&out)["engine_gone"], true);
    assert!(t_later < Duration::from_millis(1050), "later calls noticed after {t_later:?}");
    eprintln!("engine death seen by a blocked call after {t_blocked:?}, by later calls after {t_later:?}");
}

#[test]
fn hostile_boards_cannot_stop_the_engine_or_garble_a_neighbour() {
    let dir = run_dir("hostile");
    let fabric = format!("fabric:bh{}", std::process::id());
    let _ea = engine(&dir, &fabric, "bh-a", "10.0.0.1/24");
    let _eb = engine(&dir, &fabric, "bh-b", "10.0.0.2/24");
    let sink = app(&dir, "sink_server", &["bh-a", "6200"]);
    until(&dir, "bh-a", Duration::from_secs(5), "sink attached", |s| boards(s) == 1);
    let up = app(&dir, "upload", &["bh-b", "10.0.0.1:6200", "256MiB"]);
    // Seeded scribblers, one after another, while the transfer runs.
    let mut dropped = 0;
    for seed in 1..=12u64 {
        let mode = if seed % 2 == 0 { "commands" } else { "bytes" };
        let s = app(&dir, "scribbler", &["bh-a", &seed.to_string(), "1", mode]);
        let (st, out, err) = s.finish(Duration::from_secs(10));
        assert!(st.is_some(), "scribbler {seed} ({mode}) hung");
        if json(&out)["dropped"] == true {
            dropped += 1;
        }
        let _ = err;
        assert!(stat(&dir, "bh-a").is_some(), "engine died under scribbler {seed} ({mode})");
    }
    let (st, out, err) = up.finish(Duration::from_secs(120));
    assert!(st.is_some_and(|s| s.success()), "upload beside the scribblers: {err}");
    let (st2, out2, err2) = sink.finish(Duration::from_secs(10));
    assert!(st2.is_some_and(|s| s.success()), "sink beside the scribblers: {err2}");
    assert_eq!(json(&out), json(&out2), "the neighbour's bytes differ");
    let s = stat(&dir, "bh-a").expect("engine alive");
    let h = &s["host"];
    eprintln!("scribblers dropped by the engine: {dropped}/12; host counters {h}");
    assert!(h["violations"].as_u64().unwrap() >= 1, "no violation was detected: {h}");
    until(&dir, "bh-a", Duration::from_secs(5), "every hostile board freed", |s| boards(s) == 0);
}
