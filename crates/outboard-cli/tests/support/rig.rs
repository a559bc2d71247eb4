//! The lab of the shim tests (root): a [`Rig`] is a lab of two network
//! namespaces joined by a veth pair (`ob-NAME-eng`, `ob-NAME-lnx`), an engine
//! daemon on the engine side (`--services none`, af_xdp; the engine side has
//! no kernel address) and a scratch directory. Programs on the engine side run
//! under the socket shim ([`Rig::shim_cmd`]: `ip netns exec ob-NAME-eng
//! outboard run --name ENGINE -- PROGRAM …`), Linux's side plainly
//! ([`Rig::linux_cmd`]); servers run in the background as [`Bg`], logged to
//! the scratch directory. Every command is bounded by `timeout`; background
//! processes are stopped on drop, the engine before the lab.
//!
//! Used by `shim_apps.rs` (C programs and Python) and `shim_runtimes.rs`
//! (node, Java).

use super::engine::{terminate, EngineProc};
use super::netns::{lab, lab_name, ns_command};
use super::{run_dir, shim_lib, OUTBOARD};
use outboard_lab::{Lab, LabConfig};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long any one step may take before the test fails.
pub const STEP: Duration = Duration::from_secs(60);

/// A lab, its engine daemon, and a scratch directory; all gone on drop
/// (the engine before the lab).
pub struct Rig {
    pub engine: EngineProc,
    /// The engine's extra flags (a restarted engine gets them again).
    pub extra: Vec<String>,
    pub lab: Lab,
    pub tmp: PathBuf,
    pub shim: PathBuf,
}

impl Drop for Rig {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "engine {} log:\n{}",
                self.engine.name,
                self.engine.log_text()
            );
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

impl Rig {
    pub fn up(tag: &str) -> Rig {
        Rig::up_with(tag, outboard_lab::Impairment::default())
    }

    /// A lab whose path goes through the seeded impairment relay.
    pub fn up_with(tag: &str, impairment: outboard_lab::Impairment) -> Rig {
        Rig::build(tag, impairment, &[])
    }

    /// A lab whose engine gets `extra` flags too.
    pub fn up_engine_with(tag: &str, extra: &[&str]) -> Rig {
        Rig::build(tag, outboard_lab::Impairment::default(), extra)
    }

    /// A lab whose engine runs `shards` shards (af_xdp, one queue of a
    /// `shards`-queue veth each).
    pub fn up_sharded(tag: &str, shards: u32, extra: &[&str]) -> Rig {
        let n = shards.to_string();
        Rig::build_with(tag, outboard_lab::Impairment::default(), shards, false, &[&["--shards", n.as_str()], extra].concat())
    }

    pub fn build(tag: &str, impairment: outboard_lab::Impairment, extra: &[&str]) -> Rig {
        Rig::build_with(tag, impairment, 1, false, extra)
    }

    /// A dual-stack lab (`LabConfig::ipv6`): the engine is 10.77.0.2 and
    /// fd77::2/64, Linux 10.77.0.1 and fd77::1; returns once the engine's
    /// IPv6 addresses passed duplicate-address detection.
    pub fn up_ipv6(tag: &str, impairment: outboard_lab::Impairment) -> Rig {
        Rig::up_ipv6_sharded(tag, impairment, 1, &[])
    }

    /// As `up_ipv6`, with `shards` shards (one af_xdp queue each) and `extra` flags.
    pub fn up_ipv6_sharded(tag: &str, impairment: outboard_lab::Impairment, shards: u32, extra: &[&str]) -> Rig {
        let n = shards.to_string();
        let rig = Rig::build_with(tag, impairment, shards, true, &[&["--addr", "fd77::2/64", "--shards", n.as_str()], extra].concat());
        let (st, ready) = rig.engine.poll_stat(Duration::from_secs(10), Duration::from_millis(100), |s| {
            s["ipv6"]["addresses"].as_array().is_some_and(|a| !a.is_empty() && a.iter().all(|x| x.as_str().unwrap_or("").contains("preferred")))
        });
        assert!(ready.is_some(), "the engine's IPv6 addresses never became preferred: {}", st["ipv6"]);
        rig
    }

    fn build_with(tag: &str, impairment: outboard_lab::Impairment, queues: u32, ipv6: bool, extra: &[&str]) -> Rig {
        let shim = shim_lib();
        let name = lab_name(tag);
        let lab = lab(&LabConfig { impairment, queues, ipv6, ..LabConfig::new(&name) });
        let engine = Rig::start_engine(&lab, &format!("{name}-e"), extra);
        let extra = extra.iter().map(|s| s.to_string()).collect();
        let tmp = std::env::temp_dir().join(format!("ob-shim-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        Rig {
            engine,
            extra,
            lab,
            tmp,
            shim,
        }
    }

    pub fn start_engine(lab: &Lab, name: &str, extra: &[&str]) -> EngineProc {
        EngineProc::in_lab(lab, name, "af_xdp", &[&["--services", "none"], extra].concat())
    }

    /// SIGKILL of the engine (no goodbye to anyone), reaped.
    pub fn kill_engine(&mut self) {
        // SAFETY: kill(2) of our own child (`ip netns exec` execs the engine).
        unsafe { libc::kill(self.engine.child.id() as i32, libc::SIGKILL) };
        let _ = self.engine.child.wait();
    }

    /// An engine of the same name, link and address as the killed one.
    pub fn restart_engine(&mut self) {
        let name = self.engine.name.clone();
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        self.engine = Rig::start_engine(&self.lab, &name, &extra);
    }

    /// The engine's IPv6 address (a dual-stack rig).
    pub fn eip6(&self) -> String {
        self.lab.engine_addr6().expect("an IPv6 rig").to_string()
    }

    /// Linux's IPv6 address (a dual-stack rig).
    pub fn lip6(&self) -> String {
        self.lab.linux_addr6().expect("an IPv6 rig").to_string()
    }

    /// `timeout … ip netns exec ENG outboard run --name ENGINE -- ARGS`.
    pub fn shim_cmd(&self, limit: Duration, args: &[&str]) -> Command {
        let mut c = ns_command(self.lab.engine_ns(), limit, 3, &[OUTBOARD, "run"]);
        c.args(["--name", &self.engine.name, "--shim"])
        .arg(&self.shim)
        .arg("--")
        .args(args)
        .env("OUTBOARD_RUN_DIR", run_dir())
        .env(
            "OUTBOARD_LOG",
            std::env::var("OUTBOARD_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null());
        c
    }

    /// The engine's board counters: (applications attached ever, stream
    /// bytes read by applications, stream bytes they sent that peers
    /// acknowledged — counted while the sending endpoint is open, so a server
    /// that closes right after its last write may show less than it sent).
    pub fn through_engine(&self) -> (u64, u64, u64) {
        let h = &self.engine.stat()["host"];
        let n = |k: &str| h[k].as_u64().unwrap_or(0);
        (n("attached"), n("rx_delivered"), n("tx_delivered"))
    }

}

/// A lab whose engine side runs programs under the socket shim: with an
/// engine daemon ([`Rig`]) or with the engine inside each program
/// ([`InlineRig`], `outboard run --inline`). The application tests are
/// written once against this and run both ways.
pub trait AppRig {
    fn lab(&self) -> &Lab;
    /// The scratch directory.
    fn tmp(&self) -> &Path;
    /// `timeout … ip netns exec ENG outboard run … -- ARGS`.
    fn shim_cmd(&self, limit: Duration, args: &[&str]) -> Command;
    /// The engine's board counters (applications attached ever, stream bytes
    /// read by applications, stream bytes they sent that peers acknowledged);
    /// an in-process engine answers while its program runs.
    fn through_engine(&self) -> (u64, u64, u64);
    /// Whether the engine is still there after a program exits (a daemon),
    /// so its counters can be read then; an in-process engine ends with its program.
    fn engine_outlives_programs(&self) -> bool;

    fn eip(&self) -> String {
        self.lab().engine_addr().to_string()
    }

    fn lip(&self) -> String {
        self.lab().linux_addr().to_string()
    }

    /// `timeout … ip netns exec LNX ARGS`.
    fn linux_cmd(&self, limit: Duration, args: &[&str]) -> Command {
        let mut c = ns_command(self.lab().linux_ns(), limit, 3, args);
        c.stdin(Stdio::null());
        c
    }

    /// A server in the background, its output in `TMP/LOG.log`.
    fn bg(&self, what: &str, mut c: Command) -> Bg {
        let log = self.tmp().join(format!("{what}.log"));
        let f = File::create(&log).unwrap();
        let child = c
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        Bg {
            child,
            what: what.to_string(),
            log,
        }
    }

    /// Waits until IP:PORT takes TCP connections, probed from Linux's side.
    fn wait_tcp(&self, ip: &str, port: u16, server: &mut Bg) {
        let t0 = Instant::now();
        loop {
            let ok = Command::new("timeout")
                .args([
                    "2",
                    "ip",
                    "netns",
                    "exec",
                    self.lab().linux_ns(),
                    "bash",
                    "-c",
                ])
                .arg(format!("exec 3<>/dev/tcp/{ip}/{port}"))
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            server.assert_running();
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{} never listened on {ip}:{port}: {}",
                server.what,
                server.text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Writes `n` pseudo-random bytes to TMP/NAME; returns its path.
    fn random_file(&self, name: &str, n: u64, seed: u64) -> PathBuf {
        let p = self.tmp().join(name);
        random_file(&p, n, seed);
        p
    }
}

impl AppRig for Rig {
    fn lab(&self) -> &Lab {
        &self.lab
    }
    fn tmp(&self) -> &Path {
        &self.tmp
    }
    fn shim_cmd(&self, limit: Duration, args: &[&str]) -> Command {
        Rig::shim_cmd(self, limit, args)
    }
    fn through_engine(&self) -> (u64, u64, u64) {
        Rig::through_engine(self)
    }
    fn engine_outlives_programs(&self) -> bool {
        true
    }
}

/// A lab with no engine daemon: each program on the engine side runs its
/// own engine inside it (`outboard run --inline --name NAME --link
/// af_xdp:IFACE --addr …`), one at a time (they would share the interface).
pub struct InlineRig {
    /// The name the in-process engine answers `outboard stat` by.
    pub name: String,
    pub lab: Lab,
    pub tmp: PathBuf,
    pub shim: PathBuf,
}

impl Drop for InlineRig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

impl InlineRig {
    pub fn up(tag: &str) -> InlineRig {
        let shim = super::inline_shim_lib();
        let name = lab_name(tag);
        let lab = lab(&LabConfig::new(&name));
        let tmp = std::env::temp_dir().join(format!("ob-inline-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        InlineRig { name: format!("{name}-i"), lab, tmp, shim }
    }
}

impl AppRig for InlineRig {
    fn lab(&self) -> &Lab {
        &self.lab
    }
    fn tmp(&self) -> &Path {
        &self.tmp
    }
    fn shim_cmd(&self, limit: Duration, args: &[&str]) -> Command {
        let mut c = ns_command(self.lab.engine_ns(), limit, 3, &[OUTBOARD, "run", "--inline"]);
        let engine: Vec<String> = super::engine::engine_args(&self.lab, "af_xdp");
        c.args(["--name", &self.name, "--shim"])
            .arg(&self.shim)
            .args(&engine)
            .arg("--")
            .args(args)
            .env("OUTBOARD_RUN_DIR", run_dir())
            .env("OUTBOARD_LOG", std::env::var("OUTBOARD_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null());
        c
    }
    fn through_engine(&self) -> (u64, u64, u64) {
        let st = super::engine::stat_in(&run_dir(), &self.name).unwrap_or_else(|| panic!("no in-process engine {} answers stat", self.name));
        let h = &st["host"];
        let n = |k: &str| h[k].as_u64().unwrap_or(0);
        (n("attached"), n("rx_delivered"), n("tx_delivered"))
    }
    fn engine_outlives_programs(&self) -> bool {
        false
    }
}

pub fn random_file(p: &Path, n: u64, seed: u64) {
    use std::io::Write;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, File::create(p).unwrap());
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut left = n;
    let mut buf = vec![0u8; 1 << 16];
    while left > 0 {
        for c in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
        }
        let k = left.min(buf.len() as u64) as usize;
        w.write_all(&buf[..k]).unwrap();
        left -= k as u64;
    }
    w.flush().unwrap();
}

pub fn sha256(p: &Path) -> String {
    let o = Command::new("sha256sum")
        .arg(p)
        .output()
        .expect("sha256sum");
    assert!(o.status.success(), "sha256sum {}", p.display());
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string()
}

/// A background process; SIGTERM (then SIGKILL) on drop.
pub struct Bg {
    pub child: Child,
    pub what: String,
    pub log: PathBuf,
}

impl Bg {
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn assert_running(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            panic!("{} exited ({st}): {}", self.what, self.text());
        }
    }

    /// Waits until the log holds `pat`.
    pub fn wait_log(&mut self, pat: &str) {
        let t0 = Instant::now();
        while !self.text().contains(pat) {
            self.assert_running();
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{} never printed {pat:?}: {}",
                self.what,
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for it to exit on its own (bounded); returns success and its log.
    pub fn wait(mut self, limit: Duration) -> (bool, String) {
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return (st.success(), self.text());
            }
            assert!(
                t0.elapsed() < limit,
                "{} ran past {limit:?}: {}",
                self.what,
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The program's pid: the child of `timeout` (`ip netns exec` and
    /// `outboard run` exec it).
    pub fn program_pid(&mut self) -> u32 {
        let t0 = Instant::now();
        loop {
            if let Some(&pid) = super::children_of(self.child.id()).first() {
                return pid;
            }
            self.assert_running();
            assert!(t0.elapsed() < Duration::from_secs(5), "{} has no process under timeout", self.what);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stop(&mut self) {
        // `timeout` passes SIGTERM on to the program.
        terminate(&mut self.child, Duration::from_secs(5));
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("--- {} output:\n{}", self.what, self.text());
        }
    }
}

/// Runs a (timeout-bounded) command; (success, stdout, stderr).
pub fn output(mut c: Command) -> (bool, String, String) {
    let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    if o.status.code() == Some(124) {
        panic!(
            "{c:?} ran past its time limit: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The tool's report, or the test fails with what it printed.
#[track_caller]
pub fn must<T>(r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}
