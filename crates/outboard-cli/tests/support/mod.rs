//! Shared by the root integration tests: a lab (namespaces + veth, from
//! `outboard-lab`) and engine processes run inside it, both torn down on drop
//! even when the test fails. Each test uses its own lab name, so tests may
//! run in parallel.
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

use outboard_lab::{Lab, LabConfig};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

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

/// True if `prog` is on PATH.
pub fn have(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A lab name unique to this process and `tag` (≤ 8 chars of a-z0-9).
pub fn lab_name(tag: &str) -> String {
    let pid = std::process::id() % 46656; // 3 base-36 digits
    let mut p = String::new();
    let mut n = pid;
    for _ in 0..3 {
        let d = (n % 36) as u8;
        p.push(if d < 10 { (b'0' + d) as char } else { (b'a' + d - 10) as char });
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

/// Runs a command inside a namespace and returns its output.
pub fn in_ns(ns: &str, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip netns exec {ns} {args:?}: {e}"))
}

/// The directory engine control sockets live in for this test process.
pub fn run_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("outboard-test-run-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("run dir");
    d
}

/// An `outboard engine` process in a namespace; SIGTERM then SIGKILL on drop.
pub struct EngineProc {
    pub child: Child,
    pub name: String,
    pub log: PathBuf,
}

impl EngineProc {
    /// Starts `outboard engine --name NAME ARGS...` in `ns` and waits until
    /// its control socket answers (at most 10 s).
    pub fn start(ns: &str, name: &str, args: &[&str]) -> EngineProc {
        let log = std::env::temp_dir().join(format!("outboard-test-{name}-{}.log", std::process::id()));
        let logf = std::fs::File::create(&log).expect("engine log");
        let child = Command::new("ip")
            .args(["netns", "exec", ns, OUTBOARD, "engine", "--name", name])
            .args(args)
            .env("OUTBOARD_RUN_DIR", run_dir())
            .stdin(Stdio::null())
            .stdout(logf.try_clone().expect("log"))
            .stderr(logf)
            .spawn()
            .expect("spawn engine");
        let mut e = EngineProc { child, name: name.to_string(), log };
        let t0 = Instant::now();
        loop {
            if e.try_stat().is_some() {
                break;
            }
            if let Ok(Some(st)) = e.child.try_wait() {
                panic!("engine {name} exited at start ({st}): {}", e.log_text());
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "engine {name} did not come up: {}", e.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
        e
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn try_stat(&self) -> Option<serde_json::Value> {
        let out = Command::new(OUTBOARD)
            .args(["stat", "--json", "--name", &self.name])
            .env("OUTBOARD_RUN_DIR", run_dir())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// `outboard stat --json` of this engine.
    pub fn stat(&self) -> serde_json::Value {
        self.try_stat().unwrap_or_else(|| panic!("stat of engine {} failed: {}", self.name, self.log_text()))
    }

    /// One stack counter from `stat`.
    pub fn counter(&self, key: &str) -> u64 {
        self.stat()["stack"][key].as_u64().unwrap_or(0)
    }

    /// Stops the engine (SIGTERM) and waits for it.
    pub fn stop(mut self) -> String {
        self.terminate();
        self.log_text()
    }

    fn terminate(&mut self) {
        // `ip netns exec` execs the engine, so the child pid is the engine's.
        terminate(&mut self.child, Duration::from_secs(3));
    }
}

impl Drop for EngineProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

/// Sizes like 1GiB, 256M, 4096.
/// Stops `child` if it still runs: SIGTERM, up to `grace` for it to exit,
/// then SIGKILL; reaped either way.
pub fn terminate(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Bytes per interop run: OUTBOARD_INTEROP_BYTES or 1 GiB.
pub fn interop_bytes() -> u64 {
    match std::env::var("OUTBOARD_INTEROP_BYTES") {
        Ok(v) => {
            parse_size(&v).unwrap_or_else(|| panic!("OUTBOARD_INTEROP_BYTES={v:?}: not a size"))
        }
        Err(_) => 1 << 30,
    }
}

/// `--link KIND:eng0 --addr 10.77.0.2/24 [--gateway 10.77.0.1]` for a lab.
pub fn engine_args(lab: &outboard_lab::Lab, kind: &str) -> Vec<String> {
    let mut v = vec![
        "--link".to_string(),
        format!("{kind}:{}", lab.engine_iface()),
        "--addr".to_string(),
        format!("{}/{}", lab.engine_addr(), lab.engine_prefix()),
    ];
    if let Some(gw) = lab.gateway() {
        v.push("--gateway".into());
        v.push(gw.to_string());
    }
    v
}

/// A native-API example of `crates/outboard-api` (built by `cargo test --workspace`
/// or `cargo build -p outboard-api --examples` next to the `outboard` binary).
pub fn example(name: &str) -> PathBuf {
    let p = std::path::Path::new(OUTBOARD).parent().expect("target dir").join("examples").join(name);
    assert!(
        p.exists(),
        "{} is missing: the native-API examples are built by `cargo test --workspace` (or `cargo build -p outboard-api --examples`)",
        p.display()
    );
    p
}
