#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! `outboard run --inline`: the engine inside the program (the shim's
//! `liboutboard_shim_inline.so`), without root, on a private fabric beside
//! an engine daemon (10.0.0.1) whose programs run under the daemon's shim.
//! The application matrix with the engine inside each program (nginx, redis,
//! Python's http.server serving Linux over af_xdp) is in `shim_apps.rs`
//! (`inline_*`, root).
//!
//! - Impossible flags exit 2 and say what works.
//! - A Python server with its engine inside (10.0.0.3) receives from a
//!   sender under the daemon's shim, byte-exact, and `outboard stat --name`
//!   answers from the program's own process; a Python sender with its engine
//!   inside writes 8 MiB and exits without closing: every byte reaches the
//!   receiver (the process lingers until its engine has delivered them).
//! - A forked child cannot share its parent's engine: it is told why, its
//!   sockets stay with the kernel, and the parent is served on.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::engine::{start_engine, stat_in, ChildGuard};
use support::netns::skip_unless_root;
use support::{output_within, python3, text, OUTBOARD};

const LIMIT: Duration = Duration::from_secs(60);

/// A private run directory and fabric with an engine daemon at 10.0.0.1; gone on drop.
struct Fabric {
    dir: PathBuf,
    fabric: String,
    daemon: String,
    _engine: ChildGuard,
}

impl Fabric {
    fn up(tag: &str) -> Fabric {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("ob-inline-{tag}-{pid}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fabric = format!("fabric:il{tag}{pid}");
        let daemon = format!("il-{tag}-{pid}");
        let engine = start_engine(&dir, &daemon, &["--link", &fabric, "--addr", "10.0.0.1/24", "--services", "none"], Duration::from_secs(15));
        Fabric { dir, fabric, daemon, _engine: engine }
    }

    /// `outboard run --inline --name NAME --link FABRIC --addr ADDR/24 -- ARGS`.
    fn inline(&self, name: &str, addr: &str, args: &[&str]) -> Command {
        let mut c = Command::new(OUTBOARD);
        c.args(["run", "--inline", "--name", name, "--link", &self.fabric, "--addr", &format!("{addr}/24"), "--shim"])
            .arg(support::inline_shim_lib())
            .arg("--")
            .args(args)
            .env("OUTBOARD_RUN_DIR", &self.dir)
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::null());
        c
    }

    /// `outboard run --name DAEMON -- ARGS` (the daemon's shim).
    fn daemon_shim(&self, args: &[&str]) -> Command {
        let mut c = Command::new(OUTBOARD);
        c.args(["run", "--name", &self.daemon, "--shim"])
            .arg(support::shim_lib())
            .arg("--")
            .args(args)
            .env("OUTBOARD_RUN_DIR", &self.dir)
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::null());
        c
    }

    fn script(&self, name: &str, body: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_string()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Receives `N` connections on port 9000 (pausing `PAUSE` seconds after
/// each read of at most 64 KiB, default 0: a slow reader); prints
/// "listening", then per connection `BYTES SHA256`.
const SINK: &str = r#"
import socket, hashlib, sys, time
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", 9000)); l.listen(8); print("listening", flush=True)
for _ in range(int(sys.argv[1])):
    c, _ = l.accept(); h = hashlib.sha256(); n = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        h.update(b); n += len(b)
        time.sleep(pause)
    print(n, h.hexdigest(), flush=True); c.close()
"#;

/// Sends N seeded pseudo-random bytes to HOST:9000, prints `BYTES SHA256`, and exits without closing.
const SEND_AND_EXIT: &str = r#"
import socket, sys, hashlib, random
n = int(sys.argv[2]); data = random.Random(7).randbytes(n)
s = socket.create_connection((sys.argv[1], 9000)); s.sendall(data)
print(n, hashlib.sha256(data).hexdigest(), flush=True)
"#;

fn run(c: Command) -> (bool, String, String) {
    output_within(c, LIMIT, Duration::from_secs(3))
}

/// The first line of `path` that `f` accepts, waiting up to `limit`.
fn wait_line(path: &Path, limit: Duration, f: impl Fn(&str) -> bool) -> Option<String> {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        let s = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(l) = s.lines().find(|l| f(l)) {
            return Some(l.to_string());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn run_inline_refuses_impossible_flags_with_2() {
    let cases: [(&[&str], &str); 7] = [
        (&["--inline", "--addr", "10.0.0.2/24"], "--link"),
        (&["--inline", "--link", "fabric:x"], "--addr"),
        (&["--inline", "--link", "wifi:wlan0", "--addr", "10.0.0.2/24"], "unknown link kind"),
        (&["--inline", "--link", "fabric:x", "--addr", "10.0.0.2"], "A.B.C.D/N"),
        (&["--inline", "--link", "fabric:x", "--addr", "10.0.0.2/24", "--mtu", "100"], "576"),
        (&["--link", "fabric:x", "--", "true"], "--inline"),
        (&["--allow-kernel-address", "--", "true"], "--inline"),
    ];
    for (args, want) in cases {
        let o: Output = Command::new(OUTBOARD)
            .arg("run")
            .args(args)
            .args(if args.contains(&"--") { &[][..] } else { &["--", "true"][..] })
            .output()
            .expect("run outboard");
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "outboard run {args:?}: {t}");
        assert!(t.contains(want), "outboard run {args:?} should mention {want:?}: {t}");
    }
}

/// `setpriv` drops privileges keeping capabilities thread by thread
/// (PR_SET_KEEPCAPS, the uid change, `capset` of its own thread, then the gid
/// change) and execs the program. glibc makes every thread of the process do
/// each set*id call and aborts the process when one thread's result differs:
/// an in-process engine started at the uid change (its threads without the
/// capabilities `setpriv` set back on its own) made the gid change fail there,
/// and the run ended in SIGABRT, without a word (`outboard run --inline --
/// setpriv --reuid postgres … postgres`). No engine starts in such a drop.
#[test]
fn run_inline_through_setpriv_runs_the_program() {
    if skip_unless_root("run_inline_through_setpriv_runs_the_program") {
        return;
    }
    let o = Command::new(OUTBOARD)
        .args(["run", "--inline", "--name", "setpriv-i", "--link", "fabric:setpriv-i", "--addr", "10.0.0.9/24", "--shim"])
        .arg(support::inline_shim_lib())
        .args(["--", "setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "sh", "-c", "echo ran as $(id -un)"])
        .env("OUTBOARD_RUN_DIR", support::run_dir())
        .output()
        .expect("run outboard");
    let t = text(&o);
    assert!(o.status.success() && t.contains("ran as nobody"), "status {:?}: {t}", o.status);
}

#[test]
fn run_inline_preloads_the_inline_shim_and_passes_the_engine_settings() {
    let lib = support::inline_shim_lib();
    let o = Command::new(OUTBOARD)
        .args(["run", "--inline", "--name", "envcheck", "--link", "fabric:envcheck", "--addr", "10.0.0.9/24"])
        .args(["--gateway", "10.0.0.1", "--mtu", "1400", "--allow-kernel-address", "--shim"])
        .arg(&lib)
        .args(["--", "env"])
        .env("LD_PRELOAD", "/nonexistent-before.so")
        .env("OUTBOARD_INLINE_MTU", "9000")
        .output()
        .expect("run outboard");
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let lib = std::fs::canonicalize(&lib).unwrap();
    for want in [
        format!("LD_PRELOAD={}:/nonexistent-before.so", lib.display()),
        "OUTBOARD_ENGINE=envcheck".into(),
        "OUTBOARD_INLINE_LINK=fabric:envcheck".into(),
        "OUTBOARD_INLINE_ADDR=10.0.0.9/24".into(),
        "OUTBOARD_INLINE_GATEWAY=10.0.0.1".into(),
        "OUTBOARD_INLINE_MTU=1400".into(),
        "OUTBOARD_INLINE_ALLOW_KERNEL_ADDRESS=1".into(),
    ] {
        assert!(t.lines().any(|l| l == want), "{want} not in the program's environment:\n{t}");
    }
}

#[test]
fn inline_engine_serves_and_delivers_everything_before_exit() {
    let f = Fabric::up("sx");
    let py = python3();
    let (sink, send) = (f.script("sink.py", SINK), f.script("send.py", SEND_AND_EXIT));
    let n = (8 << 20).to_string();

    // A server with its engine inside; a sender on the daemon.
    let log = f.dir.join("inline-sink.log");
    let logf = std::fs::File::create(&log).unwrap();
    let mut srv = f.inline("il-srv", "10.0.0.3", &[py, "-u", &sink, "1"]);
    srv.stdout(logf.try_clone().unwrap()).stderr(logf);
    let mut srv = ChildGuard::new(srv.spawn().expect("start the inline server"), Duration::from_secs(3));
    assert!(wait_line(&log, LIMIT, |l| l == "listening").is_some(), "the inline server never listened: {}", std::fs::read_to_string(&log).unwrap_or_default());
    let (ok, out, err) = run(f.daemon_shim(&[py, &send, "10.0.0.3", &n]));
    assert!(ok, "sender under the daemon's shim: {out}\n{err}");
    let sent = out.trim().to_string();
    let got = wait_line(&log, LIMIT, |l| l.starts_with(|c: char| c.is_ascii_digit()));
    assert_eq!(got.as_deref(), Some(sent.as_str()), "what the inline server received: {}", std::fs::read_to_string(&log).unwrap_or_default());
    // Its engine answers stat from the program's own process while it runs... (it
    // exits after one connection, so ask a second server.)
    let _ = srv.child.wait();
    let log2 = f.dir.join("inline-sink2.log");
    let logf = std::fs::File::create(&log2).unwrap();
    let mut srv2 = f.inline("il-srv2", "10.0.0.3", &[py, "-u", &sink, "1"]);
    srv2.stdout(logf.try_clone().unwrap()).stderr(logf);
    let mut srv2 = ChildGuard::new(srv2.spawn().expect("start the inline server"), Duration::from_secs(3));
    assert!(wait_line(&log2, LIMIT, |l| l == "listening").is_some(), "the second inline server never listened");
    let st = stat_in(&f.dir, "il-srv2").expect("the in-process engine answers outboard stat");
    assert_eq!(st["pid"].as_u64(), Some(u64::from(srv2.child.id())), "stat answers from the program's own process: {st}");
    assert_eq!(st["host"]["attached"].as_u64(), Some(1), "the program's board: {}", st["host"]);
    let (ok, out, err) = run(f.daemon_shim(&[py, &send, "10.0.0.3", "1000"]));
    assert!(ok, "{out}\n{err}");
    let _ = srv2.child.wait();

    // A sender with its engine inside that exits right after its last write,
    // to a slow receiver (64 KiB per 5 ms): a megabyte or more is still
    // queued in the sender's engine when the program exits.
    let log3 = f.dir.join("daemon-sink.log");
    let logf = std::fs::File::create(&log3).unwrap();
    let mut sink_d = f.daemon_shim(&[py, "-u", &sink, "1", "0.005"]);
    sink_d.stdout(logf.try_clone().unwrap()).stderr(logf);
    let _sink_d = ChildGuard::new(sink_d.spawn().expect("start the daemon-side sink"), Duration::from_secs(3));
    assert!(wait_line(&log3, LIMIT, |l| l == "listening").is_some(), "the daemon-side sink never listened");
    let (ok, out, err) = run(f.inline("il-send", "10.0.0.4", &[py, &send, "10.0.0.1", &n]));
    assert!(ok, "the inline sender: {out}\n{err}");
    let sent = out.trim().to_string();
    let got = wait_line(&log3, LIMIT, |l| l.starts_with(|c: char| c.is_ascii_digit()));
    assert_eq!(got.as_deref(), Some(sent.as_str()), "what a program that exited right after writing delivered");
    assert!(!f.dir.join("il-send.sock").exists(), "the exited program's engine left its control socket");
}

#[test]
fn a_forked_child_is_told_it_cannot_share_the_engine_and_the_parent_is_served_on() {
    let f = Fabric::up("fk");
    let py = python3();
    let sink = f.script("sink.py", SINK);
    let forker = f.script(
        "forker.py",
        r#"
import socket, os, sys
first = socket.socket(); first.bind(("0.0.0.0", 0))  # the engine starts in this process
pid = os.fork()
if pid == 0:
    s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(1)
    print("child bound", flush=True); os._exit(0)
os.waitpid(pid, 0)
s = socket.create_connection(("10.0.0.1", 9000), timeout=10); s.sendall(b"x" * 100000); s.close()
print("parent sent", flush=True)
"#,
    );
    let log = f.dir.join("sink.log");
    let logf = std::fs::File::create(&log).unwrap();
    let mut sink_d = f.daemon_shim(&[py, "-u", &sink, "1"]);
    sink_d.stdout(logf.try_clone().unwrap()).stderr(logf);
    let _sink = ChildGuard::new(sink_d.spawn().expect("start the sink"), Duration::from_secs(3));
    assert!(wait_line(&log, LIMIT, |l| l == "listening").is_some(), "the sink never listened");
    let (ok, out, err) = run(f.inline("il-fork", "10.0.0.5", &[py, &forker]));
    assert!(ok && out.contains("child bound") && out.contains("parent sent"), "{out}\n{err}");
    assert!(err.contains("a forked process cannot share it"), "the child was not told why: {err}");
    let got = wait_line(&log, LIMIT, |l| l.starts_with(|c: char| c.is_ascii_digit()));
    assert!(got.is_some_and(|l| l.starts_with("100000 ")), "the parent's bytes: {}", std::fs::read_to_string(&log).unwrap_or_default());
}

/// A server with a thread per connection, each in blocking `recv`.
const THREADED_ECHO: &str = r#"
import socket, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", 9000)); l.listen(16); print("listening", flush=True)
def serve(c):
    while True:
        b = c.recv(1 << 16)
        if not b: break
        c.sendall(b)
    c.close()
while True:
    c, _ = l.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// Threads each making round trips of random sizes on a connection of their own; checks every echo.
const THREADED_CLIENT: &str = r#"
import socket, sys, threading, random
host, threads, trips = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = []
def client(k):
    r = random.Random(k); s = socket.create_connection((host, 9000), timeout=20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(trips):
        m = r.randbytes(r.randint(1, 20000)); s.sendall(m); got = b""
        while len(got) < len(m):
            b = s.recv(1 << 16)
            if not b: break
            got += b
        if got != m:
            bad.append(k); break
    s.close()
ts = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
print("bad" if bad else "ok", threads * trips, flush=True)
"#;

/// The program's threads run the engine's turns while they wait (the
/// engine shared between its thread and theirs), with a thread per
/// connection waiting and sending at once: every echo is exact, the engine
/// counts turns by the application's threads, and with
/// `OUTBOARD_INLINE_DRIVE=0` only the engine's thread runs it.
#[test]
fn the_programs_waiting_threads_run_the_engine_and_every_echo_is_exact() {
    let f = Fabric::up("dr");
    let py = python3();
    let (echo, client) = (f.script("echo.py", THREADED_ECHO), f.script("client.py", THREADED_CLIENT));
    for (drive, name) in [("1", "il-drive"), ("0", "il-nodrive")] {
        let log = f.dir.join(format!("{name}.log"));
        let logf = std::fs::File::create(&log).unwrap();
        let mut srv = f.inline(name, "10.0.0.6", &[py, "-u", &echo]);
        srv.env("OUTBOARD_INLINE_DRIVE", drive).stdout(logf.try_clone().unwrap()).stderr(logf);
        let _srv = ChildGuard::new(srv.spawn().expect("start the inline echo server"), Duration::from_secs(3));
        assert!(wait_line(&log, LIMIT, |l| l == "listening").is_some(), "{name} never listened: {}", std::fs::read_to_string(&log).unwrap_or_default());
        let (ok, out, err) = run(f.daemon_shim(&[py, &client, "10.0.0.6", "6", "150"]));
        assert!(ok && out.trim() == "ok 900", "{name}: the clients' echoes: {out}\n{err}\nserver: {}", std::fs::read_to_string(&log).unwrap_or_default());
        let st = stat_in(&f.dir, name).expect("the in-process engine answers outboard stat");
        let app_turns = st["shards"][0]["app_turns"].as_u64().unwrap_or(0);
        let turns = st["shards"][0]["turns"].as_u64().unwrap_or(0);
        if drive == "1" {
            assert!(app_turns > 0 && app_turns <= turns, "{name}: turns {turns}, by the program's threads {app_turns}");
        } else {
            assert_eq!(app_turns, 0, "{name}: with OUTBOARD_INLINE_DRIVE=0 only the engine's thread runs turns (of {turns})");
        }
    }
}
