#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! The C examples (`examples/c/`) against `include/outboard.h` and
//! `liboutboard.so`:
//!
//! - always: every example compiles with `cc -Wall -Wextra -Werror -O2`, and
//!   `examples/c/sha256.h` agrees with the `sha2` crate;
//! - live runs against engine daemons on a shared-memory fabric (no root):
//!   `sink_server` on engine A receives 64 MiB from `source` on engine B;
//!   `fetch` on B reads from `source` listening on A; `echo_server` on A
//!   echoes 8 concurrent connections of a client that drives the C API from
//!   Rust through an embedded engine.
//!
//! The live runs build the `outboard` binary (`cargo build -p outboard-cli`,
//! same target directory and profile) unless `OUTBOARD_BIN` names one.
//! Every child process is killed when its test ends, passing or not, and
//! every wait is bounded; the engines also stop by themselves (`--run-for-s`).

use std::ffi::CString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

const EXAMPLES: [&str; 4] = ["echo_server", "sink_server", "fetch", "source"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `target/<profile>/deps`, where this test binary is.
fn deps_dir() -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().to_path_buf()
}

/// `target/<profile>`.
fn profile_dir() -> PathBuf {
    deps_dir().parent().unwrap().to_path_buf()
}

/// `cargo build` flags that build into `profile_dir()` with this test's
/// profile (`debug` holds `cargo test`'s `test` profile: reuse its artifacts).
fn profile_flags() -> Vec<String> {
    match profile_dir().file_name().and_then(|n| n.to_str()) {
        Some("debug") => vec!["--profile".into(), "test".into()],
        Some("release") => vec!["--release".into()],
        Some(other) => vec!["--profile".into(), other.into()],
        None => Vec::new(),
    }
}

fn cargo_build(args: &[&str]) {
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
struct Built {
    bin: PathBuf,
}

/// Compiles every example once per test run (into `CARGO_TARGET_TMPDIR`).
fn built() -> &'static Built {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    match BUILT.get_or_init(build_examples) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    }
}

fn build_examples() -> Result<Built, String> {
    // `cargo test` builds this package's cdylib with the rlib the test links
    // (same rustc run), into deps/; a plain `cargo build` puts it in the
    // profile directory. Build it if neither has it.
    let lib = [deps_dir(), profile_dir()].into_iter().map(|d| d.join("liboutboard.so")).find(|p| p.exists());
    let lib = match lib {
        Some(l) => l,
        None => {
            cargo_build(&["-p", "outboard-capi", "--lib"]);
            profile_dir().join("liboutboard.so")
        }
    };
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
fn sweep_stale() {
    let Ok(dir) = std::fs::read_dir(env!("CARGO_TARGET_TMPDIR")) else { return };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = ["c-examples-", "sha256-check-", "capi-"].iter().any(|p| name.starts_with(p));
        let pid = name.rsplit('-').next().and_then(|p| p.parse::<u32>().ok());
        if let (true, Some(pid)) = (ours, pid) {
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

#[test]
fn c_examples_compile_with_warnings_as_errors() {
    let b = built();
    for name in EXAMPLES {
        assert!(b.bin.join(name).exists(), "{name} was not built");
    }
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// `examples/c/sha256.h` against the `sha2` crate, on lengths around the
/// padding boundaries, fed in uneven pieces.
#[test]
fn sha256_h_matches_sha2() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sha256-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prog = r#"
#include "sha256.h"
int main(void) {
    static uint8_t data[100003];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 131 + (i >> 9));
    size_t lens[] = {0, 1, 3, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000, 100003};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        sha256_t h;
        sha256_init(&h);
        for (size_t at = 0, step = 1; at < lens[k]; at += step, step = step * 3 % 97 + 1)
            sha256_update(&h, data + at, at + step > lens[k] ? lens[k] - at : step);
        char hex[65];
        sha256_final_hex(&h, hex);
        printf("%zu %s\n", lens[k], hex);
    }
    return 0;
}
"#;
    std::fs::write(dir.join("check.c"), prog).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-Wall", "-Wextra", "-Werror", "-O2", "-I"])
        .arg(root().join("examples/c"))
        .arg("-o")
        .arg(dir.join("check"))
        .arg(dir.join("check.c"))
        .status()
        .expect("run cc");
    assert!(st.success(), "the sha256.h check did not compile");
    let out = Command::new(dir.join("check")).output().unwrap();
    let data: Vec<u8> = (0..100003usize).map(|i| (i * 131 + (i >> 9)) as u8).collect();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 14, "{text}");
    for line in text.lines() {
        let (len, hex) = line.split_once(' ').unwrap();
        let len: usize = len.parse().unwrap();
        assert_eq!(hex, sha256_hex(&data[..len]), "sha256.h is wrong for {len} bytes");
    }
}

/// `source.c`'s seeded pattern, for the expected SHA-256.
fn pattern(seed: u64, n: usize) -> Vec<u8> {
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

// ---------------------------------------------------------------- live runs

/// A child process: its stdout lines arrive on a channel, its stderr goes to
/// a file shown on failure. Dropping it SIGTERMs, then SIGKILLs, and reaps.
struct Proc {
    name: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl Proc {
    fn spawn(name: &str, mut cmd: Command, dir: &Path) -> Proc {
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

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The first stdout line that starts with `prefix`, within `timeout`.
    fn line(&mut self, prefix: &str, timeout: Duration) -> String {
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
    fn exit(&mut self, timeout: Duration) -> ExitStatus {
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
    fn result(&mut self, timeout: Duration) -> (u64, String) {
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

fn parse_result(l: &str) -> (u64, String) {
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
fn outboard_bin() -> &'static Path {
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
struct Lab {
    dir: PathBuf,
    a: String,
    b: String,
    _engines: Vec<Proc>,
}

impl Lab {
    fn start(tag: &str) -> Lab {
        let bin = outboard_bin();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fabric = format!("fabric:c{}{tag}", std::process::id());
        let (a, b) = (format!("{tag}-a"), format!("{tag}-b"));
        let mut engines = Vec::new();
        for (name, addr) in [(&a, "10.0.0.1/24"), (&b, "10.0.0.2/24")] {
            let mut cmd = Command::new(bin);
            cmd.args(["engine", "--link", &fabric, "--addr", addr, "--name", name, "--services", "none"])
                .args(["--log-level", "warn", "--run-for-s", "300"])
                .env("OUTBOARD_RUN_DIR", &dir);
            engines.push(Proc::spawn(&format!("engine {name}"), cmd, &dir));
        }
        let lab = Lab { dir, a, b, _engines: engines };
        for name in [&lab.a, &lab.b] {
            lab.wait_up(name);
        }
        lab
    }

    /// Until the engine takes boards (its board socket answers `stat`'s peer, the control socket).
    fn wait_up(&self, name: &str) {
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
    fn run(&self, name: &str, args: &[&str]) -> Proc {
        let mut cmd = Command::new(built().bin.join(name));
        // `cargo test` puts target/<profile> on LD_LIBRARY_PATH, which wins over
        // the examples' RUNPATH: it may hold an older liboutboard.so.
        cmd.args(args).env("OUTBOARD_RUN_DIR", &self.dir).env_remove("LD_LIBRARY_PATH");
        Proc::spawn(name, cmd, &self.dir)
    }
}

/// Live: `sink_server` attached to engine A receives 64 MiB that `source`
/// attached to engine B sends through the fabric; both SHA-256 agree with
/// the pattern's.
#[test]
fn live_source_to_sink_server_64mib() {
    let _ = built();
    let lab = Lab::start("ss");
    let mut sink = lab.run("sink_server", &[&lab.a, "5001"]);
    sink.line("listening on 5001", Duration::from_secs(20));
    let n = 64usize << 20;
    let mut src = lab.run("source", &[&lab.b, "connect", "10.0.0.1", "5001", &n.to_string(), "7"]);
    let (sent, sent_sha) = src.result(Duration::from_secs(240));
    let (got, got_sha) = sink.result(Duration::from_secs(30));
    let want = sha256_hex(&pattern(7, n));
    assert_eq!((sent, sent_sha.as_str()), (n as u64, want.as_str()), "source sent something else");
    assert_eq!((got, got_sha.as_str()), (n as u64, want.as_str()), "sink_server received something else");
}

/// Live: `fetch` on engine B reads to end of stream from `source` listening on engine A.
#[test]
fn live_fetch_from_listening_source() {
    let _ = built();
    let lab = Lab::start("fs");
    let n = (3usize << 20) + 12345;
    let mut src = lab.run("source", &[&lab.a, "listen", "5002", &n.to_string(), "3"]);
    src.line("listening on 5002", Duration::from_secs(20));
    let mut fetch = lab.run("fetch", &[&lab.b, "10.0.0.1", "5002"]);
    let (got, got_sha) = fetch.result(Duration::from_secs(120));
    let (sent, sent_sha) = src.result(Duration::from_secs(30));
    let want = sha256_hex(&pattern(3, n));
    assert_eq!((sent, sent_sha.as_str()), (n as u64, want.as_str()));
    assert_eq!((got, got_sha.as_str()), (n as u64, want.as_str()));
}

/// The C API from Rust, through `outboard` (this crate's rlib).
mod c {
    pub use outboard::*;
    pub fn errno() -> i32 {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() }
    }
}

/// Live: `echo_server` on engine A echoes 8 concurrent connections from a
/// client on an embedded engine (10.0.0.3 on the same fabric) that uses the
/// C API's functions from Rust; every byte comes back in order.
#[test]
fn live_echo_server_many_connections() {
    const CONNS: usize = 8;
    const CHUNK: usize = 16 << 10;
    const ROUNDS: usize = 16;
    let _ = built();
    let lab = Lab::start("es");
    let mut server = lab.run("echo_server", &[&lab.a, "7007", &CONNS.to_string()]);
    server.line("listening on 7007", Duration::from_secs(20));

    let fabric = CString::new(format!("fabric:c{}es", std::process::id())).unwrap();
    let name = CString::new("es-client").unwrap();
    let addr = CString::new("10.0.0.3/24").unwrap();
    let opts = c::ob_embedded_options_t {
        name: name.as_ptr(),
        link: fabric.as_ptr(),
        addr: addr.as_ptr(),
        gateway: std::ptr::null(),
        services: std::ptr::null(),
        mtu: 0,
        control: 0,
    };
    outboard_engine::log::set_level(outboard_engine::log::Level::Warn); // the embedded engine's log
    let deadline = Instant::now() + Duration::from_secs(120);
    let left = || assert!(Instant::now() < deadline, "echo client timed out");
    unsafe {
        let engine = c::ob_embedded_start(&opts);
        assert!(!engine.is_null(), "ob_embedded_start: errno {}", c::errno());
        let mut ao = c::ob_attach_options_default();
        ao.mode = c::OB_MODE_NONBLOCKING; // bounded waits: the test polls with a deadline
        let board = c::ob_embedded_attach(engine, &ao);
        assert!(!board.is_null(), "ob_embedded_attach: errno {}", c::errno());
        let streams: Vec<*mut c::ob_stream_t> = (0..CONNS)
            .map(|k| {
                let s = c::ob_connect(board, 0x0a00_0001, 7007);
                assert!(!s.is_null(), "ob_connect {k}: errno {}", c::errno());
                s
            })
            .collect();
        let data: Vec<Vec<u8>> = (0..CONNS).map(|k| pattern(100 + k as u64, CHUNK * ROUNDS)).collect();
        let mut buf = vec![0u8; CHUNK];
        for r in 0..ROUNDS {
            for (k, &s) in streams.iter().enumerate() {
                let mut chunk = &data[k][r * CHUNK..(r + 1) * CHUNK];
                while !chunk.is_empty() {
                    let n = c::ob_send(s, chunk.as_ptr().cast(), chunk.len());
                    if n < 0 {
                        assert_eq!(c::errno(), libc::EAGAIN, "ob_send on {k}");
                        left();
                        std::thread::sleep(Duration::from_micros(200));
                        continue;
                    }
                    chunk = &chunk[n as usize..];
                }
            }
            for (k, &s) in streams.iter().enumerate() {
                let mut got = 0;
                while got < CHUNK {
                    let n = c::ob_recv(s, buf[got..].as_mut_ptr().cast(), CHUNK - got);
                    if n < 0 {
                        assert_eq!(c::errno(), libc::EAGAIN, "ob_recv on {k}");
                        left();
                        std::thread::sleep(Duration::from_micros(200));
                        continue;
                    }
                    assert!(n > 0, "connection {k} ended early");
                    got += n as usize;
                }
                assert!(buf == data[k][r * CHUNK..(r + 1) * CHUNK], "connection {k}, round {r}: wrong bytes echoed");
            }
        }
        // Everything came back: close our side, then see the server's end of stream.
        for (k, &s) in streams.iter().enumerate() {
            assert_eq!(c::ob_shutdown(s), 0, "ob_shutdown {k}");
            loop {
                let n = c::ob_recv(s, buf.as_mut_ptr().cast(), buf.len());
                if n == 0 || (n < 0 && c::errno() == libc::ECONNRESET) {
                    break;
                }
                assert!(n < 0 && c::errno() == libc::EAGAIN, "connection {k}: {n} more bytes after the echo, errno {}", c::errno());
                left();
                std::thread::sleep(Duration::from_micros(200));
            }
            assert_eq!(c::ob_close(s), 0);
        }
        let served = server.line("served=", Duration::from_secs(30));
        assert_eq!(served, format!("served={CONNS} bytes={}", CONNS * CHUNK * ROUNDS));
        assert!(server.exit(Duration::from_secs(10)).success(), "echo_server failed: {}", server.stderr());
        assert_eq!(c::ob_detach(board), 0);
        assert_eq!(c::ob_embedded_stop(engine), 0);
    }
}
