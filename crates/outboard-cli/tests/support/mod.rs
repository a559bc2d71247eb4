//! Test support shared by the `outboard-cli` integration tests, one module
//! per kind of harness:
//!
//! - this file: the `outboard` binary and its companions (examples, the
//!   socket shim, Python scripts, the real python3), running a command and
//!   reading its output (text, JSON), sizes, scratch and run directories;
//! - [`engine`]: `outboard engine` processes (on a fabric in a run directory,
//!   or in a lab namespace), a child guard that stops and reaps, `stat`
//!   polling;
//! - [`netns`]: root and tool checks, labs, namespaces and running in them;
//! - [`cases`]: the shim-versus-Linux C-cases harness (compile, run, nftables);
//! - [`rig`]: the shim tests' lab (a lab, its engine daemon, programs under
//!   the shim and on Linux's side, background servers).
//!
//! Each file in `tests/` is its own crate and compiles all of this, so what
//! one test file does not use is allowed to be dead.
#![allow(dead_code)]
#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

pub mod cases;
pub mod engine;
pub mod netns;
pub mod rig;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

// ---------------------------------------------------------------- the binaries

/// `outboard ARGS`, output captured.
pub fn outboard(args: &[&str]) -> Output {
    Command::new(OUTBOARD).args(args).output().expect("run outboard")
}

/// `outboard ARGS` with `OUTBOARD_RUN_DIR=dir`, output captured.
pub fn outboard_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(OUTBOARD)
        .args(args)
        .env("OUTBOARD_RUN_DIR", dir)
        .output()
        .expect("run outboard")
}

/// A native-API example of `crates/outboard-api` (built by `cargo test --workspace`
/// or `cargo build -p outboard-api --examples` next to the `outboard` binary).
pub fn example(name: &str) -> PathBuf {
    let p = Path::new(OUTBOARD)
        .parent()
        .expect("target dir")
        .join("examples")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: the native-API examples are built by `cargo test --workspace` (or `cargo build -p outboard-api --examples`)",
        p.display()
    );
    p
}

/// The example handlers of `sdk/` (docs/HANDLERS.md), built once per test
/// binary by `sdk/build.sh` into a directory of the target dir: `NAME.wasm`.
/// Needs the `wasm32-unknown-unknown` Rust target (the README's test command
/// installs it); the C examples (`NAME_c.wasm`) only where clang and lld are.
#[allow(dead_code)]
pub fn handlers() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let exe = std::env::current_exe().expect("the test binary");
        let tag = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("tests").to_string();
        let out = Path::new(OUTBOARD).parent().expect("target dir").join(format!("handlers-{tag}"));
        let o = Command::new(root.join("sdk/build.sh")).arg(&out).output().expect("run sdk/build.sh");
        assert!(o.status.success(), "sdk/build.sh failed:\n{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        out
    })
}

/// The socket shim, beside the `outboard` binary the tests run (or in its deps/).
pub fn shim_lib() -> PathBuf {
    built_lib("liboutboard_shim.so", "outboard-shim")
}

/// `liboutboard_shim_inline.so` (the shim with the engine inside the program), built beside `outboard`.
pub fn inline_shim_lib() -> PathBuf {
    built_lib("liboutboard_shim_inline.so", "outboard-shim-inline")
}

fn built_lib(file: &str, package: &str) -> PathBuf {
    let dir = Path::new(OUTBOARD).parent().expect("target dir");
    [dir.join(file), dir.join("deps").join(file)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "{file} is not in {} (or deps/): build it with `cargo build -p {package}` \
                 (scripts/test.sh builds the whole workspace first)",
                dir.display()
            )
        })
}

/// A Python script of `tests/scripts/`.
pub fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scripts")
        .join(name)
        .display()
        .to_string()
}

/// The real Python executable (not a pyenv wrapper script), so the pid of
/// a program `outboard run` execs is the interpreter's.
pub fn python3() -> &'static str {
    static PY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PY.get_or_init(|| {
        let o = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 is needed by these tests");
        assert!(
            o.status.success(),
            "python3 does not run: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(
            !p.is_empty() && Path::new(&p).exists(),
            "python3 reports no executable: {p:?}"
        );
        p
    })
}

// ---------------------------------------------------------------- running commands

/// `argv[0] argv[1..]`, output captured.
pub fn sh(argv: &[&str]) -> Output {
    Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .unwrap_or_else(|e| panic!("run {argv:?}: {e}"))
}

/// Writes `contents` to `path`, mode 755, for a test to execute: written by a
/// child `sh`, never through a file this process opens. A file open for
/// writing cannot be executed (ETXTBSY), and while it is open here any other
/// test thread's fork holds a copy of that descriptor until its child execs:
/// the next exec of the file would then fail at random.
pub fn write_executable(path: &Path, contents: &[u8]) {
    let mut child = Command::new("sh")
        .args(["-c", "cat > \"$0\" && chmod 755 \"$0\""])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run sh to write {}: {e}", path.display()));
    // The pipe closes at the end of this statement: `cat` sees its end.
    let wrote = child.stdin.take().unwrap().write_all(contents);
    let status = child.wait().unwrap();
    assert!(status.success() && wrote.is_ok(), "write {}: sh {status}, pipe {wrote:?}", path.display());
}

/// Copies `from` to `to`, mode 755, through [`write_executable`] (reading
/// `from` here is harmless: only a descriptor open for writing blocks an exec).
pub fn copy_executable(from: &Path, to: &Path) {
    let bytes = std::fs::read(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    write_executable(to, &bytes);
}

/// Runs `c` (stdin null, stdout and stderr read as it runs); after `limit` it
/// is sent SIGTERM, given `grace` to exit, then SIGKILLed. Returns (success,
/// stdout, stderr); a run stopped at the limit is not a success and its stderr
/// starts with "timed out after LIMIT".
pub fn output_within(mut c: Command, limit: Duration, grace: Duration) -> (bool, String, String) {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {c:?}: {e}"));
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let t_out = reader(Box::new(child.stdout.take().expect("stdout")));
    let t_err = reader(Box::new(child.stderr.take().expect("stderr")));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if t0.elapsed() > limit {
            engine::terminate(&mut child, grace);
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (o, e) = (t_out.join().unwrap_or_default(), t_err.join().unwrap_or_default());
    match status {
        Some(st) => (st.success(), o, e),
        None => (false, o, format!("timed out after {limit:?}\n{e}")),
    }
}

/// Lines of `r` (a child's stdout) on a channel, read by a thread of their own.
pub fn line_channel(r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

// ---------------------------------------------------------------- reading output

/// The exit status and both streams of `o`, for a failure message.
pub fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// All of stdout as JSON.
pub fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

/// The last line of `s` that starts (after blanks) with `{`, as JSON.
pub fn json_line(s: &str) -> Value {
    let line = s
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in {s:?}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
}

/// The last JSON line of `o`'s stdout (the whole output in the failure message).
pub fn last_json(o: &Output) -> Value {
    let s = String::from_utf8_lossy(&o.stdout);
    let line = s.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("no JSON line ({e}): {}", text(o)))
}

/// The number at `a.b.c` in `v`.
pub fn num(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    cur.as_f64().unwrap_or_else(|| panic!("{path} is not a number in {v}"))
}

/// The number at `path` is finite and above zero.
pub fn positive(v: &Value, path: &str) {
    let x = num(v, path);
    assert!(x > 0.0 && x.is_finite(), "{path} = {x}, expected > 0");
}

// ---------------------------------------------------------------- sizes

/// Sizes like 1GiB, 256M, 4096.
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

/// A size from environment variable `var`, or `default` when it is unset.
pub fn size_from_env(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(v) => parse_size(&v).unwrap_or_else(|| panic!("{var}={v:?}: not a size")),
        Err(_) => default,
    }
}

/// Bytes per interop run: OUTBOARD_INTEROP_BYTES or 1 GiB.
pub fn interop_bytes() -> u64 {
    size_from_env("OUTBOARD_INTEROP_BYTES", 1 << 30)
}

// ---------------------------------------------------------------- directories

/// The directory engine control sockets live in for this test process
/// (shared by every test of the process; the lab tests' engines).
pub fn run_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("outboard-test-run-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("run dir");
    d
}

/// A directory of this test process for `tag`: `$TMP/PREFIX-PID-TAG`
/// (created if missing; a private run directory, or scratch space).
pub fn test_dir(prefix: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("{prefix}-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
    d
}

// ---------------------------------------------------------------- processes

/// Clock ticks per second (the unit of `utime`/`stime` in /proc).
pub fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// (state, utime + stime in ticks) of a process or thread from its stat file.
pub fn proc_stat(path: &Path) -> Option<(char, u64)> {
    let s = std::fs::read_to_string(path).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let st = f.first()?.chars().next()?;
    Some((st, f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?))
}

/// The pids whose parent is `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(s) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let ppid = s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid == Some(pid) {
            v.push(child);
        }
    }
    v
}
