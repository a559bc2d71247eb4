//! `outboard engine` processes for the tests, and the child guard they run
//! under:
//!
//! - [`ChildGuard`]: any child process, stopped on drop (SIGTERM, a grace
//!   period, SIGKILL) and reaped; optionally its stdout as lines on a channel;
//! - fabric engines, no root: [`spawn_engine`] in a private run directory,
//!   [`wait_up`] until `outboard stat` answers, [`stat_in`], [`until`];
//! - lab engines, root: [`EngineProc`] in a lab's engine namespace (its
//!   output in a log file), with `stat`, counters and [`EngineProc::poll_stat`].
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

use super::{line_channel, run_dir, OUTBOARD};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// How long a child gets between SIGTERM and SIGKILL unless a test says otherwise.
pub const GRACE: Duration = Duration::from_secs(3);

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

/// Polls `probe` every `every` until `done` holds of what it returned or
/// `limit` has passed (it is probed at least once). Returns the last probe
/// and, when `done` held, the time it took.
pub fn poll<T>(
    limit: Duration,
    every: Duration,
    mut probe: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> (T, Option<Duration>) {
    let t0 = Instant::now();
    loop {
        let v = probe();
        if done(&v) {
            return (v, Some(t0.elapsed()));
        }
        if t0.elapsed() >= limit {
            return (v, None);
        }
        std::thread::sleep(every);
    }
}

// ---------------------------------------------------------------- any child

/// A child process stopped on drop: SIGTERM, `grace` to exit, then SIGKILL;
/// reaped either way (see [`terminate`]). A program run under `timeout`
/// passes the SIGTERM on.
pub struct ChildGuard {
    pub child: Child,
    grace: Duration,
    lines: Option<Receiver<String>>,
}

impl ChildGuard {
    pub fn new(child: Child, grace: Duration) -> ChildGuard {
        ChildGuard {
            child,
            grace,
            lines: None,
        }
    }

    /// Spawns `c` with its stdout piped and read line by line (see [`ChildGuard::line`]);
    /// stdin and stderr are as `c` sets them.
    pub fn spawn_lines(c: &mut Command, grace: Duration) -> ChildGuard {
        let mut child = c
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {c:?}: {e}"));
        let lines = line_channel(child.stdout.take().expect("stdout"));
        ChildGuard {
            child,
            grace,
            lines: Some(lines),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next stdout line within `limit` (None at EOF or timeout).
    pub fn line(&self, limit: Duration) -> Option<String> {
        self.lines.as_ref()?.recv_timeout(limit).ok()
    }

    /// The receiving end of the stdout lines (of [`ChildGuard::spawn_lines`]).
    pub fn lines(&self) -> &Receiver<String> {
        self.lines.as_ref().expect("a child spawned with spawn_lines")
    }

    pub fn stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Waits at most `limit` for the exit; returns the status (None: still
    /// running) and every stdout line still to come.
    pub fn finish_lines(&mut self, limit: Duration) -> (Option<ExitStatus>, Vec<String>) {
        let st = self.wait_for(limit, Duration::from_millis(20));
        let mut lines = Vec::new();
        while let Some(l) = self.line(Duration::from_millis(500)) {
            lines.push(l);
        }
        (st, lines)
    }

    /// Waits at most `limit` for the exit; returns the status (None: still
    /// running) and, when it exited, its piped stdout and stderr.
    pub fn finish(mut self, limit: Duration) -> (Option<ExitStatus>, String, String) {
        let status = self.wait_for(limit, Duration::from_millis(5));
        let mut out = String::new();
        let mut err = String::new();
        if status.is_some() {
            use std::io::Read;
            if let Some(mut o) = self.child.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            if let Some(mut e) = self.child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
        }
        (status, out, err)
    }

    fn wait_for(&mut self, limit: Duration, every: Duration) -> Option<ExitStatus> {
        poll(limit, every, || self.child.try_wait().ok().flatten(), Option::is_some).0
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        terminate(&mut self.child, self.grace);
    }
}

// ---------------------------------------------------------------- fabric engines (no root)

/// `outboard engine ARGS --log-level warn` with `OUTBOARD_RUN_DIR=dir`;
/// returns at once (see [`wait_up`]).
pub fn spawn_engine(dir: &Path, args: &[&str]) -> ChildGuard {
    let child = Command::new(OUTBOARD)
        .arg("engine")
        .args(args)
        .args(["--log-level", "warn"])
        .env("OUTBOARD_RUN_DIR", dir)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn outboard engine");
    ChildGuard::new(child, GRACE)
}

/// [`spawn_engine`] of `--name NAME ARGS`, then [`wait_up`] (at most `limit`).
pub fn start_engine(dir: &Path, name: &str, args: &[&str], limit: Duration) -> ChildGuard {
    let e = spawn_engine(dir, &[&["--name", name], args].concat());
    wait_up(dir, name, limit);
    e
}

/// `outboard stat --json --name NAME` in run directory `dir`; None while the
/// engine does not answer.
pub fn stat_in(dir: &Path, name: &str) -> Option<Value> {
    let out = Command::new(OUTBOARD)
        .args(["stat", "--json", "--name", name])
        .env("OUTBOARD_RUN_DIR", dir)
        .output()
        .expect("run outboard stat");
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Waits (at most `limit`) until engine `name` in `dir` answers `stat`; its first stat.
pub fn wait_up(dir: &Path, name: &str, limit: Duration) -> Value {
    poll(limit, Duration::from_millis(50), || stat_in(dir, name), Option::is_some)
        .0
        .unwrap_or_else(|| panic!("engine {name} did not come up within {limit:?}"))
}

/// Waits until `pred(stat)` holds of engine `name` in `dir`, polling every
/// `every`, at most `limit`; returns the time it took.
pub fn until(
    dir: &Path,
    name: &str,
    limit: Duration,
    every: Duration,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Duration {
    let (last, took) = poll(limit, every, || stat_in(dir, name), |s| s.as_ref().is_some_and(&pred));
    took.unwrap_or_else(|| panic!("{what}: not within {limit:?}: {last:?}"))
}

// ---------------------------------------------------------------- lab engines (root)

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

/// An `outboard engine` process in a namespace; SIGTERM then SIGKILL on drop.
pub struct EngineProc {
    pub child: Child,
    pub name: String,
    pub log: PathBuf,
}

impl EngineProc {
    /// Starts `outboard engine --name NAME ARGS...` in `ns` and waits until
    /// its control socket (in [`run_dir`]) answers (at most 10 s).
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
        let mut e = EngineProc {
            child,
            name: name.to_string(),
            log,
        };
        let t0 = Instant::now();
        loop {
            if e.try_stat().is_some() {
                break;
            }
            if let Ok(Some(st)) = e.child.try_wait() {
                panic!("engine {name} exited at start ({st}): {}", e.log_text());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "engine {name} did not come up: {}",
                e.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        e
    }

    /// An engine on `lab`'s engine side: [`engine_args`] for link `kind`, then `extra`.
    pub fn in_lab(lab: &outboard_lab::Lab, name: &str, kind: &str, extra: &[&str]) -> EngineProc {
        let mut args = engine_args(lab, kind);
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        EngineProc::start(lab.engine_ns(), name, &args)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn try_stat(&self) -> Option<Value> {
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
    pub fn stat(&self) -> Value {
        self.try_stat()
            .unwrap_or_else(|| panic!("stat of engine {} failed: {}", self.name, self.log_text()))
    }

    /// One stack counter from `stat`.
    pub fn counter(&self, key: &str) -> u64 {
        self.stat()["stack"][key].as_u64().unwrap_or(0)
    }

    /// Polls `stat` every `every` until `done` holds or `limit` passes;
    /// returns the last snapshot and, when `done` held, the time taken.
    pub fn poll_stat(
        &self,
        limit: Duration,
        every: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> (Value, Option<Duration>) {
        poll(limit, every, || self.stat(), done)
    }

    /// Stops the engine (SIGTERM) and waits for it.
    pub fn stop(mut self) -> String {
        self.terminate();
        self.log_text()
    }

    fn terminate(&mut self) {
        // `ip netns exec` execs the engine, so the child pid is the engine's.
        terminate(&mut self.child, GRACE);
    }
}

impl Drop for EngineProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

// ---------------------------------------------------------------- a fake engine (no root)

/// A private run directory holding a fake engine's board socket (a bound
/// Unix socket nobody answers): enough for `outboard run` to find "the
/// engine" and exec the program. Removed on drop.
pub struct FakeEngine {
    pub dir: PathBuf,
    _listener: std::os::unix::net::UnixListener,
}

impl FakeEngine {
    pub fn new(tag: &str, name: &str) -> FakeEngine {
        let dir = std::env::temp_dir().join(format!("ob-fake-engine-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let l = std::os::unix::net::UnixListener::bind(dir.join(format!("{name}.board"))).expect("bind fake board socket");
        FakeEngine { dir, _listener: l }
    }

    /// A file in the run directory (removed with it).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
