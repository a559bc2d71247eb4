//! The harness of the C tests: compiling the C examples (`examples/c/`)
//! against `include/outboard.h` and `liboutboard.so`, child processes that
//! are always reaped, and two engine daemons on a shared-memory fabric (no
//! root). Used by `c_examples.rs` here and by `outboard-embedded`'s
//! `c_embedded.rs` (through `#[path]`).
//!
//! The live runs build the `outboard` binary (`cargo build -p outboard-cli`,
//! same target directory and profile) unless `OUTBOARD_BIN` names one.
//! Every child process is killed when its test ends, passing or not, and
//! every wait is bounded; the engines also stop by themselves (`--run-for-s`).

#![allow(dead_code)] // each test file uses part of it

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

pub const EXAMPLES: [&str; 8] = ["echo_server", "sink_server", "fetch", "source", "msg_kv_server", "msg_kv_client", "qp_pingpong", "handler_load"];

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `target/<profile>/deps`, where this test binary is.
pub fn deps_dir() -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().to_path_buf()
}

/// `target/<profile>`.
pub fn profile_dir() -> PathBuf {
    deps_dir().parent().unwrap().to_path_buf()
}

/// `cargo build` flags that build into `profile_dir()` with this test's
/// profile (`debug` holds `cargo test`'s `test` profile: reuse its artifacts).
pub fn profile_flags() -> Vec<String> {
    match profile_dir().file_name().and_then(|n| n.to_str()) {
        Some("debug") => vec!["--profile".into(), "test".into()],
        Some("release") => vec!["--release".into()],
        Some(other) => vec!["--profile".into(), other.into()],
        None => Vec::new(),
    }
}

pub fn cargo_build(args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = profile_dir().parent().unwrap().to_path_buf();
    let out = Command::new(cargo)
        .current_dir(root())
        .env("CARGO_TARGET_DIR", &target)
        .arg("build")
        .args(profile_flags())
        .args(args)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo build {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the compile step made: the example binaries and the library they load.
pub struct Built {
    pub bin: PathBuf,
}

/// Compiles every example once per test run (into `CARGO_TARGET_TMPDIR`).
pub fn built() -> &'static Built {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    match BUILT.get_or_init(build_examples) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    }
}

/// The shared library `file` of `package` (e.g. `liboutboard.so` of
/// `outboard-capi`): `cargo test` builds the tested package's cdylib with the
/// rlib the test links (same rustc run), into deps/; a plain `cargo build`
/// puts it in the profile directory. Built if neither has it.
pub fn shared_lib(file: &str, package: &str) -> PathBuf {
    let lib = [deps_dir(), profile_dir()].into_iter().map(|d| d.join(file)).find(|p| p.exists());
    match lib {
        Some(l) => l,
        None => {
            cargo_build(&["-p", package, "--lib"]);
            profile_dir().join(file)
        }
    }
}

pub fn build_examples() -> Result<Built, String> {
    let lib = shared_lib("liboutboard.so", "outboard-capi");
    sweep_stale();
    // A private copy: a concurrent cargo run cannot swap it under the examples.
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("c-examples-{}", std::process::id()));
    let lib_dir = out.join("lib");
    std::fs::create_dir_all(&lib_dir).map_err(|e| e.to_string())?;
    std::fs::copy(&lib, lib_dir.join("liboutboard.so")).map_err(|e| format!("copy {}: {e}", lib.display()))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let root = root();
    let mut errors = String::new();
    for name in EXAMPLES {
        let res = Command::new(&cc)
            .args(["-Wall", "-Wextra", "-Werror", "-O2", "-I"])
            .arg(root.join("include"))
            .arg("-o")
            .arg(out.join(name))
            .arg(root.join("examples/c").join(format!("{name}.c")))
            .arg("-L")
            .arg(&lib_dir)
            .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
            .arg("-loutboard")
            .output()
            .map_err(|e| format!("cannot run {cc}: {e}"))?;
        if !res.status.success() {
            errors += &format!("{name}.c:\n{}{}\n", String::from_utf8_lossy(&res.stdout), String::from_utf8_lossy(&res.stderr));
        }
    }
    if !errors.is_empty() {
        return Err(format!("C examples failed to compile:\n{errors}"));
    }
    Ok(Built { bin: out })
}

/// Removes what earlier runs of this test left in `CARGO_TARGET_TMPDIR`
/// (directories named `...-PID` of processes that are gone).
pub fn sweep_stale() {
    let Ok(dir) = std::fs::read_dir(env!("CARGO_TARGET_TMPDIR")) else { return };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = ["c-examples-", "sha256-check-", "capi-", "embedded-c-"].iter().any(|p| name.starts_with(p));
        let pid = name.rsplit('-').next().and_then(|p| p.parse::<u32>().ok());
        if let (true, Some(pid)) = (ours, pid) {
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// `source.c`'s seeded pattern, for the expected SHA-256.
pub fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// A child process: its stdout lines arrive on a channel, its stderr goes to
/// a file shown on failure. Dropping it SIGTERMs, then SIGKILLs, and reaps.
pub struct Proc {
    name: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command, dir: &Path) -> Proc {
        let stderr = dir.join(format!("{name}.stderr"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let (tx, lines) = mpsc::channel();
        let mut child = child;
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { name: name.into(), child, lines, stderr }
    }

    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The first stdout line that starts with `prefix`, within `timeout`.
    pub fn line(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!(
                    "{}: no line starting {prefix:?} ({e:?}; exit {:?}); stderr:\n{}",
                    self.name,
                    self.child.try_wait().ok().flatten(),
                    self.stderr()
                ),
            }
        }
    }

    /// Waits for the process to exit, within `timeout`.
    pub fn exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "{} did not exit within {timeout:?}; stderr:\n{}", self.name, self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `bytes=N sha256=HEX` line, then a successful exit.
    pub fn result(&mut self, timeout: Duration) -> (u64, String) {
        let l = self.line("bytes=", timeout);
        let st = self.exit(Duration::from_secs(10));
        assert!(st.success(), "{} exited with {st}; stderr:\n{}", self.name, self.stderr());
        parse_result(&l)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

pub fn parse_result(l: &str) -> (u64, String) {
    let mut bytes = None;
    let mut sha = None;
    for kv in l.split_whitespace() {
        match kv.split_once('=') {
            Some(("bytes", v)) => bytes = v.parse().ok(),
            Some(("sha256", v)) => sha = Some(v.to_string()),
            _ => {}
        }
    }
    (bytes.unwrap_or_else(|| panic!("no bytes= in {l:?}")), sha.unwrap_or_else(|| panic!("no sha256= in {l:?}")))
}

/// The `outboard` binary: `OUTBOARD_BIN`, or built once per test run.
pub fn outboard_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(b) = std::env::var_os("OUTBOARD_BIN") {
            return PathBuf::from(b);
        }
        cargo_build(&["-p", "outboard-cli", "--bin", "outboard"]);
        profile_dir().join("outboard")
    })
}

/// Two engines on one fabric: A (10.0.0.1) and B (10.0.0.2), each in its own
/// run directory and with its own name, for one test.
pub struct Lab {
    pub dir: PathBuf,
    pub a: String,
    pub b: String,
    _engines: Vec<Proc>,
}

impl Lab {
    pub fn start(tag: &str) -> Lab {
        Lab::start_with(tag, false)
    }

    /// With `ipv6`, the engines run IPv6 beside IPv4 too (A fd00::1/64, B
    /// fd00::2/64); returns once their IPv6 addresses passed duplicate-address detection.
    pub fn start_with(tag: &str, ipv6: bool) -> Lab {
        Lab::start_opts(tag, ipv6, false)
    }

    /// Engines that run the message service too (`--messages`: message
    /// addresses 10.0.0.1:7373 and 10.0.0.2:7373).
    pub fn start_messages(tag: &str) -> Lab {
        Lab::start_opts(tag, false, true)
    }

    pub fn start_opts(tag: &str, ipv6: bool, messages: bool) -> Lab {
        let bin = outboard_bin();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fabric = format!("fabric:c{}{tag}", std::process::id());
        let (a, b) = (format!("{tag}-a"), format!("{tag}-b"));
        let mut engines = Vec::new();
        for (name, addr, addr6) in [(&a, "10.0.0.1/24", "fd00::1/64"), (&b, "10.0.0.2/24", "fd00::2/64")] {
            let mut cmd = Command::new(bin);
            cmd.args(["engine", "--link", &fabric, "--addr", addr, "--name", name, "--services", "none"])
                .args(["--log-level", "warn", "--run-for-s", "300"])
                .env("OUTBOARD_RUN_DIR", &dir);
            if ipv6 {
                cmd.args(["--addr", addr6]);
            }
            if messages {
                cmd.arg("--messages");
            }
            engines.push(Proc::spawn(&format!("engine {name}"), cmd, &dir));
        }
        let lab = Lab { dir, a, b, _engines: engines };
        for name in [&lab.a, &lab.b] {
            lab.wait_up(name);
            if ipv6 {
                lab.wait_ipv6(name);
            }
        }
        lab
    }

    /// Until every IPv6 address of the engine is preferred (past duplicate-address detection).
    pub fn wait_ipv6(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = Command::new(outboard_bin())
                .args(["stat", "--json", "--name", name])
                .env("OUTBOARD_RUN_DIR", &self.dir)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
                .unwrap_or_default();
            // `stat` lists each address with its state ("fd00::1/64 preferred static").
            if out.contains(" preferred static") && !out.contains("tentative") {
                return;
            }
            assert!(Instant::now() < deadline, "engine {name}: IPv6 addresses never became preferred: {out}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Until the engine takes boards (its board socket answers `stat`'s peer, the control socket).
    pub fn wait_up(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let board = self.dir.join(format!("{name}.board"));
            let stat = Command::new(outboard_bin())
                .args(["stat", "--json", "--name", name])
                .env("OUTBOARD_RUN_DIR", &self.dir)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if stat && board.exists() {
                return;
            }
            assert!(Instant::now() < deadline, "engine {name} did not come up in {}", self.dir.display());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs the C example `name` with `args` (the engine name first).
    pub fn run(&self, name: &str, args: &[&str]) -> Proc {
        let mut cmd = Command::new(built().bin.join(name));
        // `cargo test` puts target/<profile> on LD_LIBRARY_PATH, which wins over
        // the examples' RUNPATH: it may hold an older liboutboard.so.
        cmd.args(args).env("OUTBOARD_RUN_DIR", &self.dir).env_remove("LD_LIBRARY_PATH");
        Proc::spawn(name, cmd, &self.dir)
    }
}
