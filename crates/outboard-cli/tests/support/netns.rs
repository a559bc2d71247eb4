//! Namespaces for the root tests: root and tool checks, labs (namespaces +
//! veth from `outboard-lab`, torn down on drop even when the test fails),
//! namespaces of our own, and running commands inside them. Each test uses
//! its own lab name, so tests may run in parallel.
#![allow(dead_code)]

use super::engine::{ChildGuard, GRACE};
use super::{outboard, OUTBOARD};
use outboard_lab::{Lab, LabConfig};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

// ---------------------------------------------------------------- root and tools

pub fn is_root() -> bool {
    // SAFETY-free check: /proc/self/status Uid line, effective uid field.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// True (and a loud line on stderr) when the test cannot run here.
pub fn skip_unless_root(test: &str) -> bool {
    if is_root() {
        return false;
    }
    eprintln!("SKIPPED: {test} needs root (network namespaces, veth, AF_PACKET/AF_XDP)");
    true
}

/// Like [`skip_unless_root`], and also skips (loudly) when one of `tools` is
/// missing; `install` says how to get them.
pub fn skip_unless_root_and(test: &str, tools: &[&str], install: &str) -> bool {
    if skip_unless_root(test) {
        return true;
    }
    if let Some(tool) = tools.iter().find(|t| !have(t)) {
        eprintln!("SKIPPED: `{tool}` missing ({install}) — {test}");
        return true;
    }
    false
}

/// True if `prog` is on PATH.
pub fn have(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Fails (not skips) when a tool is missing: CI installs it.
pub fn need(tool: &str, package: &str) {
    assert!(
        have(tool),
        "`{tool}` not found in PATH: install it (apt-get install {package})"
    );
}

/// Fails when any of the (program, package) pairs is missing, naming them all.
pub fn need_all(tools: &[(&str, &str)]) {
    let missing: Vec<String> = tools
        .iter()
        .filter(|(p, _)| !have(p))
        .map(|(p, pkg)| format!("{p} (apt-get install {pkg})"))
        .collect();
    assert!(
        missing.is_empty(),
        "missing programs: {}; scripts/test.sh installs them",
        missing.join(", ")
    );
}

// ---------------------------------------------------------------- labs

/// A lab name unique to this process and `tag` (≤ 8 chars of a-z0-9).
pub fn lab_name(tag: &str) -> String {
    let pid = std::process::id() % 46656; // 3 base-36 digits
    let mut p = String::new();
    let mut n = pid;
    for _ in 0..3 {
        let d = (n % 36) as u8;
        p.push(if d < 10 {
            (b'0' + d) as char
        } else {
            (b'a' + d - 10) as char
        });
        n /= 36;
    }
    let tag: String = tag.chars().filter(|c| c.is_ascii_alphanumeric()).take(5).collect();
    format!("{}{}", tag.to_ascii_lowercase(), p)
}

/// Brings a lab up; it goes down when the returned guard drops.
pub fn lab(cfg: &LabConfig) -> Lab {
    let mut cfg = cfg.clone();
    if cfg.relay_exe.is_none() {
        cfg.relay_exe = Some(PathBuf::from(OUTBOARD));
    }
    // A leftover from an earlier, killed run of the same name.
    let _ = Lab::down(&cfg.name);
    Lab::up(&cfg).unwrap_or_else(|e| panic!("lab {} up: {e}", cfg.name))
}

/// The namespaces (`ob-NAME-*`) of lab `name` that exist now.
pub fn namespaces_of(name: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let prefix = format!("ob-{name}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// For a lab brought up by `outboard lab up`: takes it down on drop (test
/// failed or not), and as a last resort deletes its namespaces.
pub struct LabGuard(pub String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = outboard(&["lab", "down", &self.0]);
        for ns in namespaces_of(&self.0) {
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
    }
}

// ---------------------------------------------------------------- namespaces

/// A namespace of our own (loopback up), deleted on drop.
pub struct NsGuard(pub String);

impl NsGuard {
    pub fn new(name: &str) -> NsGuard {
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        let o = Command::new("ip")
            .args(["netns", "add", name])
            .output()
            .expect("ip netns add");
        assert!(o.status.success(), "ip netns add {name}: {}", super::text(&o));
        let g = NsGuard(name.to_string());
        let o = in_ns(name, &["ip", "link", "set", "lo", "up"]);
        assert!(o.status.success(), "lo up: {}", super::text(&o));
        g
    }
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// The processes whose network namespace is `ns` (`ip netns pids`).
pub fn pids_in(ns: &str) -> Vec<u32> {
    let o = Command::new("ip").args(["netns", "pids", ns]).output().expect("ip netns pids");
    String::from_utf8_lossy(&o.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// Waits (at most `limit`) until some process runs in `ns`; their pids.
pub fn wait_for_pids(ns: &str, limit: Duration) -> Vec<u32> {
    let t0 = std::time::Instant::now();
    loop {
        let pids = pids_in(ns);
        if !pids.is_empty() {
            return pids;
        }
        assert!(t0.elapsed() < limit, "no process in namespace {ns} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops, on drop, every process left in a namespace: daemons a test
/// started detach from it (they fork and their parent exits), and deleting
/// the namespace would not stop them. SIGTERM, then SIGKILL after 5 s.
pub struct Reaper(String);

impl Reaper {
    pub fn new(ns: &str) -> Reaper {
        Reaper(ns.to_string())
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let signal = |sig: i32| {
            for p in pids_in(&self.0) {
                // SAFETY: kill(2) with a pid and a signal number.
                unsafe { libc::kill(p as i32, sig) };
            }
        };
        signal(libc::SIGTERM);
        let t0 = std::time::Instant::now();
        while !pids_in(&self.0).is_empty() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        signal(libc::SIGKILL);
    }
}

/// Runs a command inside a namespace and returns its output.
pub fn in_ns(ns: &str, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip netns exec {ns} {args:?}: {e}"))
}

/// `timeout -k KILL_AFTER LIMIT ip netns exec NS ARGS...`: SIGTERM after
/// `limit`, SIGKILL `kill_after_s` later.
pub fn ns_command(ns: &str, limit: Duration, kill_after_s: u64, args: &[&str]) -> Command {
    let mut c = Command::new("timeout");
    c.args([
        "-k",
        &kill_after_s.to_string(),
        &limit.as_secs().to_string(),
        "ip",
        "netns",
        "exec",
        ns,
    ])
    .args(args);
    c
}

/// `timeout -k 5 SECS ip netns exec NS ARGS...`, stdin null, output captured.
pub fn ns_run(ns: &str, secs: u64, args: &[&str]) -> Output {
    ns_command(ns, Duration::from_secs(secs), 5, args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {args:?} in {ns}: {e}"))
}

/// `timeout -k 5 SECS ip netns exec NS ARGS...` in the background, its stdout
/// read line by line, stderr inherited, stdin piped when `stdin`; stopped on
/// drop (SIGTERM, which `timeout` passes on, then SIGKILL).
pub fn ns_spawn_lines(ns: &str, secs: u64, args: &[&str], stdin: bool) -> ChildGuard {
    ChildGuard::spawn_lines(
        ns_command(ns, Duration::from_secs(secs), 5, args)
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::inherit()),
        GRACE,
    )
}
