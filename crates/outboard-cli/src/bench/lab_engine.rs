//! What a lab bench (`bench link`, `bench apps`) runs on the engine's side
//! of the veth pair: the engine daemon in the engine's namespace, and, for
//! the kernel's turn on the same pair, a kernel address on the engine's
//! interface. Both are undone on drop, on every path out.

// A benchmark's shell: it reads the wall clock to bound its waits.
#![allow(clippy::disallowed_methods)]

use outboard_engine::stat::Snapshot;
use outboard_lab::sys;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long the engine has to answer `outboard stat` and open its board socket.
const START_LIMIT: Duration = Duration::from_secs(10);

/// An `outboard engine` daemon in a lab namespace; stopped on drop.
pub struct EngineProc {
    child: Child,
    /// Its name (`--name`): what `outboard stat` and `outboard run` take.
    pub name: String,
    run_dir: PathBuf,
    log: PathBuf,
}

impl EngineProc {
    /// Starts `outboard engine --link LINK --addr CIDR --services SERVICES`
    /// as `name` in namespace `ns`, its sockets under `run_dir` and its
    /// output in `log`; returns once it answers `outboard stat` and accepts
    /// applications on its board socket.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        ns: &str,
        link: &str,
        cidr: &str,
        services: &str,
        name: String,
        run_dir: &Path,
        log: PathBuf,
        extra: &[&str],
    ) -> Result<EngineProc, String> {
        let exe = std::env::current_exe().map_err(|e| format!("find the outboard executable: {e}"))?;
        let f = File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let f2 = f.try_clone().map_err(|e| format!("dup log: {e}"))?;
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(exe)
            .args(["engine", "--link", link, "--addr", cidr, "--name", &name, "--services", services])
            .args(extra)
            .env("OUTBOARD_RUN_DIR", run_dir)
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(f2)
            .spawn()
            .map_err(|e| format!("start the engine: {e}"))?;
        let mut e = EngineProc { child, name, run_dir: run_dir.to_path_buf(), log };
        let board = run_dir.join(format!("{}.board", e.name));
        let t0 = Instant::now();
        loop {
            if board.exists() && e.stat().is_ok() {
                return Ok(e);
            }
            if let Ok(Some(st)) = e.child.try_wait() {
                return Err(format!("the engine exited at start ({st}): {}", e.log_text().trim_end()));
            }
            if t0.elapsed() > START_LIMIT || sys::stop_requested() {
                return Err(format!(
                    "the engine did not come up in {} s: {}",
                    START_LIMIT.as_secs(),
                    e.log_text().trim_end()
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// An engine process started some other way (`engine --upgrade`), as an `EngineProc`.
    pub fn adopt(child: Child, name: String, run_dir: &Path, log: PathBuf) -> EngineProc {
        EngineProc { child, name, run_dir: run_dir.to_path_buf(), log }
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits up to `limit` for the process to exit by itself (an engine that
    /// handed over to an upgrade): an error if it does not, or exits non-zero.
    pub fn wait_gone(mut self, limit: Duration) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.exited() {
                return if st.success() { Ok(()) } else { Err(format!("the old engine exited {st}: {}", self.log_text().trim_end())) };
            }
            if t0.elapsed() > limit {
                return Err(format!("the old engine did not exit within {limit:?} of the upgrade"));
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `outboard stat --json` of this engine.
    pub fn stat(&self) -> Result<Snapshot, String> {
        let exe = std::env::current_exe().map_err(|e| format!("find the outboard executable: {e}"))?;
        let out = Command::new("timeout")
            .arg("10")
            .arg(exe)
            .args(["stat", "--json", "--name", &self.name])
            .env("OUTBOARD_RUN_DIR", &self.run_dir)
            .output()
            .map_err(|e| format!("outboard stat: {e}"))?;
        if !out.status.success() {
            return Err(format!("outboard stat failed: {}", String::from_utf8_lossy(&out.stderr).trim_end()));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("outboard stat: {e}"))
    }

    /// Stops the engine; returns its log.
    pub fn stop(mut self) -> String {
        terminate(&mut self.child);
        self.log_text()
    }
}

impl Drop for EngineProc {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// SIGTERM (`ip netns exec` and `timeout` exec or pass it on), up to 5 s,
/// then SIGKILL; reaped.
pub fn terminate(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let _ = sys::kill(child.id() as i32, libc::SIGTERM);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A kernel address on the engine's interface for the kernel's turn (the
/// engine stopped); removed on drop.
pub struct KernelAddr {
    ns: String,
    iface: String,
    cidr: String,
}

impl KernelAddr {
    pub fn add(ns: &str, iface: &str, cidr: &str) -> Result<KernelAddr, String> {
        let a = KernelAddr { ns: ns.into(), iface: iface.into(), cidr: cidr.into() };
        a.ip("add")?;
        Ok(a)
    }

    fn ip(&self, verb: &str) -> Result<(), String> {
        let o = Command::new("timeout")
            .args(["10", "ip", "-n", &self.ns, "addr", verb, &self.cidr, "dev", &self.iface])
            .output()
            .map_err(|e| format!("ip addr {verb}: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "ip -n {} addr {verb} {} dev {}: {}",
                self.ns,
                self.cidr,
                self.iface,
                String::from_utf8_lossy(&o.stderr).trim_end()
            ));
        }
        Ok(())
    }
}

impl Drop for KernelAddr {
    fn drop(&mut self) {
        let _ = self.ip("del");
    }
}
