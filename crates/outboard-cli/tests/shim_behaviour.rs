//! The socket shim's behaviour, without root: engine daemons on a private
//! shared-memory fabric (each test its own fabric, engine names and
//! OUTBOARD_RUN_DIR), programs (Python scripts, shell tools) run under the
//! shim through `outboard run --name ENGINE --shim liboutboard_shim.so`.
//!
//! - fork: inherited engine sockets fail with EOPNOTSUPP in the child (close
//!   succeeds), the child makes sockets of its own, the parent keeps serving;
//! - idle: a server with an idle connection sleeps (CPU, thread states);
//! - pass-through: programs that never use an engine address run unchanged;
//! - mixed poll/epoll over an engine socket and a pipe;
//! - unsupported options and flags fail, are named and counted;
//! - TCP_INFO and the other read-back options;
//! - gathered writes (writev, sendmsg): one segment each, partial counts in order;
//! - many threads: ThreadingHTTPServer serving 20 parallel downloads.
//! - stdio (`fdopen`) over an engine socket;
//! - epoll semantics over 200 engine connections (LT, ET, one-shot,
//!   maxevents, delete and close);
//! - the engine dying under programs waiting in epoll and poll;
//! - 200 threads blocked in recv, each woken for its own connection.
//!
//! Every process is killed (its whole process group) on drop, even when the
//! test panics; every wait is bounded. The tests run one at a time (a lock):
//! timing checks on a small machine need it.
#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use support::engine::{spawn_engine, stat_in, wait_up, ChildGuard};
use support::netns::have;
use support::{clk_tck, proc_stat, python3, shim_lib, OUTBOARD};

// ---------------------------------------------------------------- harness

static SERIAL: Mutex<()> = Mutex::new(());

/// One test at a time (2-core machines; CPU and timing checks).
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn sigkill_group(pid: u32) {
    // SAFETY: plain kill(2) of a process group this test created.
    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
}

/// A background engine daemon (stopped and reaped on drop).
struct Engine {
    name: String,
    addr: String,
    child: ChildGuard,
}

/// A private fabric with engines 10.0.0.1, 10.0.0.2…; its run directory is
/// removed on drop (after the engines are gone).
struct Net {
    dir: PathBuf,
    engines: Vec<Engine>,
}

impl Net {
    fn new(tag: &str, n: usize) -> Net {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("ob-shimbeh-{pid}-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut net = Net { dir, engines: Vec::new() };
        for i in 0..n {
            let name = format!("sb-{tag}-{pid}-{}", (b'a' + i as u8) as char);
            let addr = format!("10.0.0.{}", i + 1);
            let child = net.spawn(tag, &name, &addr);
            net.engines.push(Engine { name, addr, child });
        }
        for e in &net.engines {
            wait_up(&net.dir, &e.name, Duration::from_secs(15));
        }
        net
    }

    fn spawn(&self, tag: &str, name: &str, addr: &str) -> ChildGuard {
        let fabric = format!("fabric:sb{tag}{}", std::process::id());
        spawn_engine(&self.dir, &["--link", &fabric, "--addr", &format!("{addr}/24"), "--name", name, "--services", "none"])
    }

    /// Engine `i` again, after it died: same name, fabric and address.
    /// Starts engine `i` again (its process killed by the caller). The dead
    /// one is reaped first: a zombie still owns its fabric port (`kill(pid,
    /// 0)` succeeds), and the new engine would take another port and MAC,
    /// which the other engine's ARP entry does not know.
    fn restart(&mut self, tag: &str, i: usize) {
        let (name, addr) = (self.engines[i].name.clone(), self.engines[i].addr.clone());
        let _ = self.engines[i].child.child.wait();
        self.engines[i].child = self.spawn(tag, &name, &addr);
        wait_up(&self.dir, &name, Duration::from_secs(15));
    }

    fn name(&self, i: usize) -> &str {
        &self.engines[i].name
    }
    fn addr(&self, i: usize) -> &str {
        &self.engines[i].addr
    }

    fn stat(&self, i: usize) -> Value {
        stat_in(&self.dir, self.name(i)).unwrap_or_else(|| panic!("outboard stat of engine {} failed", self.name(i)))
    }

    /// `outboard run` of `cmd` on engine `i`, with extra environment.
    fn run(&self, i: usize, cmd: &[&str], env: &[(&str, &str)]) -> Prog {
        let mut c = Command::new(OUTBOARD);
        c.args(["run", "--name", self.name(i), "--shim"]).arg(shim_lib()).arg("--").args(cmd);
        c.env("OUTBOARD_RUN_DIR", &self.dir);
        for (k, v) in env {
            c.env(k, v);
        }
        Prog::spawn(c, &format!("{} (engine {})", cmd.join(" "), self.name(i)))
    }

    /// A Python script (`python3 -u -c SCRIPT ARGS…`) under the shim on engine `i`.
    fn py(&self, i: usize, script: &str, args: &[&str], env: &[(&str, &str)]) -> Prog {
        let mut cmd = vec![python3(), "-u", "-c", script];
        cmd.extend_from_slice(args);
        let mut p = self.run(i, &cmd, env);
        p.what = format!("python script {:?}… {args:?} (engine {})", script.trim().lines().next().unwrap_or(""), self.name(i));
        p
    }

    fn boards(&self, i: usize) -> Vec<Value> {
        self.stat(i)["boards"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.engines.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A program in its own process group: stdout lines arrive on a channel (and
/// are kept), stderr is kept; the group is SIGKILLed and reaped on drop.
struct Prog {
    child: Child,
    what: String,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    out_done: Arc<AtomicBool>,
    err_done: Arc<AtomicBool>,
}

impl Prog {
    fn spawn(mut c: Command, what: &str) -> Prog {
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        let mut child = c.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        let (tx, lines) = channel();
        let out = Arc::new(Mutex::new(String::new()));
        let err = Arc::new(Mutex::new(String::new()));
        let out_done = Arc::new(AtomicBool::new(false));
        let err_done = Arc::new(AtomicBool::new(false));
        {
            let so = child.stdout.take().unwrap();
            let (out, done) = (out.clone(), out_done.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(so).lines() {
                    let Ok(line) = line else { break };
                    out.lock().unwrap().push_str(&format!("{line}\n"));
                    let _ = tx.send(line);
                }
                done.store(true, Ordering::SeqCst);
            });
        }
        {
            let mut se = child.stderr.take().unwrap();
            let (err, done) = (err.clone(), err_done.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    match se.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => err.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n])),
                    }
                }
                done.store(true, Ordering::SeqCst);
            });
        }
        let stdin = child.stdin.take();
        Prog { child, what: what.to_string(), stdin, lines, out, err, out_done, err_done }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stdout(&self) -> String {
        self.out.lock().unwrap().clone()
    }
    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    fn report(&self) -> String {
        format!("{}\n--- stdout:\n{}--- stderr:\n{}", self.what, self.stdout(), self.stderr())
    }

    /// The next stdout line starting with `prefix` (earlier lines skipped), within `limit`.
    fn expect_line(&self, prefix: &str, limit: Duration) -> String {
        let end = Instant::now() + limit;
        loop {
            let rest = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(rest) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no line {prefix:?} within {limit:?} from {}", self.report())
                }
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(100));
                    panic!("{} ended its output without a line {prefix:?}: {}", self.what, self.report())
                }
            }
        }
    }

    fn send_stdin(&mut self, s: &str) {
        let w = self.stdin.as_mut().expect("stdin open");
        w.write_all(s.as_bytes()).expect("write to the program's stdin");
        w.flush().unwrap();
    }

    fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits (bounded) for the program to exit; returns (exit code, stdout, stderr).
    fn finish(&mut self, limit: Duration) -> (i32, String, String) {
        self.close_stdin();
        let end = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if Instant::now() >= end {
                sigkill_group(self.pid());
                let _ = self.child.wait();
                panic!("{} did not exit within {limit:?}; killed. {}", self.what, self.report());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Output may still be in flight (bounded: a grandchild could hold the pipes).
        let t0 = Instant::now();
        while !(self.out_done.load(Ordering::SeqCst) && self.err_done.load(Ordering::SeqCst)) && t0.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(10));
        }
        use std::os::unix::process::ExitStatusExt;
        let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        (code, self.stdout(), self.stderr())
    }

    /// Like `finish`, asserting exit status 0; returns stdout.
    fn finish_ok(&mut self, limit: Duration) -> String {
        let (code, out, _) = self.finish(limit);
        assert_eq!(code, 0, "{} exited {code}: {}", self.what, self.report());
        out
    }
}

impl Drop for Prog {
    fn drop(&mut self) {
        sigkill_group(self.pid());
        let _ = self.child.wait();
    }
}

/// A command without the shim, bounded by `timeout`.
fn plain(cmd: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-k", "2", "30"])
        .args(cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {cmd:?}: {e}"))
}

/// A TCP server for the peer engine: `echo` (optionally answering after
/// DELAY seconds) or `sink` (reads to EOF, then prints the count). Prints
/// "ready" when listening and "conn LOCAL PEER" per connection.
const SERVER: &str = r#"
import socket, sys, threading, time
port, mode, delay = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(64)
print("ready", flush=True)
def serve(c, a):
    print("conn %s:%d %s:%d" % (c.getsockname() + a), flush=True)
    n = 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        n += len(d)
        if mode == "echo":
            if delay:
                time.sleep(delay)
            c.sendall(d)
    print("eof %d" % n, flush=True)
    c.close()
while True:
    c, a = s.accept()
    threading.Thread(target=serve, args=(c, a), daemon=True).start()
"#;

fn start_server(net: &Net, i: usize, port: u16, mode: &str, delay: f64) -> Prog {
    let p = net.py(i, SERVER, &[&port.to_string(), mode, &delay.to_string()], &[]);
    p.expect_line("ready", Duration::from_secs(15));
    p
}

fn json_line(line: &str, prefix: &str) -> Value {
    let j = line.strip_prefix(prefix).unwrap_or(line).trim();
    serde_json::from_str(j).unwrap_or_else(|e| panic!("not JSON after {prefix:?} ({e}): {line}"))
}

// ---------------------------------------------------------------- 1. fork

const FORK_PROG: &str = r#"
import os, socket, sys, json
port, peer, peer_port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
lst = socket.socket()
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("0.0.0.0", port))
lst.listen(8)
# A connected stream made before the fork: it stays the parent's.
conn = socket.create_connection((peer, peer_port), timeout=15)
print("listening %d" % os.getpid(), flush=True)
pid = os.fork()
if pid == 0:
    res = {"pid": os.getpid()}
    def attempt(name, f):
        try:
            f()
            res[name] = 0
        except socket.timeout:
            res[name] = "timeout"
        except OSError as e:
            res[name] = e.errno
    # The inherited listener is shared: accept waits for a connection (none comes).
    lst.settimeout(0.3)
    attempt("accept", lst.accept)
    try:
        res["getsockname_value"] = "%s:%d" % lst.getsockname()
    except OSError as e:
        res["getsockname_value"] = "errno %d" % e.errno
    attempt("getpeername", lst.getpeername)
    attempt("listen", lambda: lst.listen(4))
    attempt("close", lst.close)
    # The inherited stream is not shared.
    attempt("stream_send", lambda: conn.send(b"x"))
    attempt("stream_recv", lambda: conn.recv(1))
    attempt("stream_close", conn.close)
    try:
        c = socket.create_connection((peer, peer_port), timeout=15)
        res["child_local"] = c.getsockname()[0]
        c.sendall(b"child-hello")
        got = b""
        while len(got) < 11:
            d = c.recv(64)
            if not d:
                break
            got += d
        res["child_echo"] = got.decode()
        c.close()
    except OSError as e:
        res["child_echo"] = "error: %r" % (e,)
    print("child " + json.dumps(res), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("child-exited %d %d" % (pid, status), flush=True)
conn.sendall(b"parent-stream")
got = b""
while len(got) < 13:
    d = conn.recv(64)
    if not d:
        break
    got += d
print("parent-stream %s" % got.decode(), flush=True)
conn.close()
c, a = lst.accept()
d = c.recv(100)
c.sendall(d)
print("parent-accepted %s %s" % (a[0], d.decode()), flush=True)
c.close()
lst.close()
"#;

const CLIENT_ECHO: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=15)
msg = sys.argv[3].encode()
s.sendall(msg)
got = b""
while len(got) < len(msg):
    d = s.recv(100)
    if not d:
        break
    got += d
print("echo " + got.decode(), flush=True)
s.close()
"#;

#[test]
fn fork_child_shares_the_inherited_listener_and_the_parent_keeps_its_sockets() {
    let _s = serial();
    let net = Net::new("fork", 2);
    let peer = start_server(&net, 1, 7100, "echo", 0.0);
    let mut prog = net.py(0, FORK_PROG, &["7000", net.addr(1), "7100"], &[]);
    let parent_pid: u64 = prog.expect_line("listening", Duration::from_secs(15))[10..].trim().parse().unwrap();
    assert_eq!(parent_pid, u64::from(prog.pid()), "outboard run execs the program (same pid)");
    let child_line = prog.expect_line("child ", Duration::from_secs(20));
    let child = json_line(&child_line, "child ");
    eprintln!("fork child: {child}");
    // The inherited listener works in the child as on Linux (docs/SHIM.md "fork and exec"):
    // accept waits (no connection comes), its address is the parent's.
    assert_eq!(child["accept"], "timeout", "child: accept on the shared listener waits: {child}\n{}", prog.report());
    assert_eq!(child["getsockname_value"], "0.0.0.0:7000", "{child}");
    assert_eq!(child["getpeername"].as_i64(), Some(i64::from(libc::ENOTCONN)), "{child}");
    assert_eq!(child["listen"].as_i64(), Some(0), "{child}");
    assert_eq!(child["close"].as_i64(), Some(0), "child: close of the inherited listener succeeds: {child}");
    // An inherited connected stream is not shared: EOPNOTSUPP, and close only drops the child's descriptor.
    let eop = i64::from(libc::EOPNOTSUPP);
    assert_eq!((child["stream_send"].as_i64(), child["stream_recv"].as_i64()), (Some(eop), Some(eop)), "{child}");
    assert_eq!(child["stream_close"].as_i64(), Some(0), "{child}");
    assert_eq!(child["child_echo"], "child-hello", "child: its own socket to engine B works: {child}\n{}", prog.report());
    assert_eq!(child["child_local"], net.addr(0), "child's socket is on engine A: {child}");
    let child_pid = child["pid"].as_u64().unwrap();
    let exited = prog.expect_line("child-exited", Duration::from_secs(10));
    assert!(exited.ends_with(" 0"), "child exit status: {exited}");
    peer.expect_line(&format!("conn {}:7100 {}:", net.addr(1), net.addr(0)), Duration::from_secs(5));
    // The parent's stream made before the fork still works.
    let ps = prog.expect_line("parent-stream", Duration::from_secs(10));
    assert_eq!(ps, "parent-stream parent-stream", "{}", prog.report());

    // The parent's board is still attached; the child's is gone.
    let t0 = Instant::now();
    let boards = loop {
        let b = net.boards(0);
        let has_child = b.iter().any(|x| x["pid"].as_u64() == Some(child_pid));
        if !has_child || t0.elapsed() > Duration::from_secs(3) {
            break b;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("engine A boards after the child exited: {}", Value::Array(boards.clone()));
    assert!(boards.iter().any(|x| x["pid"].as_u64() == Some(parent_pid)), "the parent's board is attached: {boards:?}");
    assert!(!boards.iter().any(|x| x["pid"].as_u64() == Some(child_pid)), "the child's board went with it: {boards:?}");

    // A client on engine B reaches the parent's listener (the child left the group).
    let mut cli = net.py(1, CLIENT_ECHO, &[net.addr(0), "7000", "after-fork"], &[]);
    let out = cli.finish_ok(Duration::from_secs(20));
    assert!(out.contains("echo after-fork"), "client: {}", cli.report());
    let acc = prog.expect_line("parent-accepted", Duration::from_secs(10));
    assert_eq!(acc, format!("parent-accepted {} after-fork", net.addr(1)));
    prog.finish_ok(Duration::from_secs(10));
}

// ---------------------------------------------------------------- 2. idle

const IDLE_SERVER: &str = r#"
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(8)
print("ready", flush=True)
c, a = s.accept()
def reader():
    print("reader %d" % threading.get_native_id(), flush=True)
    d = c.recv(100)
    print("reader-got %r" % d, flush=True)
threading.Thread(target=reader).start()
c2, a2 = s.accept()   # the main thread stays blocked in accept
"#;

const IDLE_CLIENT: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=15)
s.settimeout(None)
print("connected", flush=True)
sys.stdin.readline()
s.sendall(b"wake")
print("sent", flush=True)
sys.stdin.readline()
"#;

fn thread_states(pid: u32) -> Vec<(u32, char, String)> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in rd.flatten() {
            let tid: u32 = e.file_name().to_string_lossy().parse().unwrap_or(0);
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default().trim().to_string();
            if let Some((st, _)) = proc_stat(&e.path().join("stat")) {
                v.push((tid, st, comm));
            }
        }
    }
    v.sort();
    v
}

#[test]
fn an_idle_server_under_the_shim_sleeps() {
    let _s = serial();
    let net = Net::new("idle", 2);
    let srv = net.py(0, IDLE_SERVER, &["7200"], &[]);
    srv.expect_line("ready", Duration::from_secs(15));
    let mut cli = net.py(1, IDLE_CLIENT, &[net.addr(0), "7200"], &[]);
    cli.expect_line("connected", Duration::from_secs(15));
    let reader: u32 = srv.expect_line("reader ", Duration::from_secs(10))[7..].trim().parse().unwrap();
    let pid = srv.pid();
    let stat_path = PathBuf::from(format!("/proc/{pid}/stat"));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert!(comm.starts_with("python"), "pid {pid} is the interpreter itself, not a wrapper: comm {comm:?}");
    // Let the connection and both blocked calls settle.
    std::thread::sleep(Duration::from_millis(500));

    let (_, cpu0) = proc_stat(&stat_path).expect("server stat");
    let t0 = Instant::now();
    let mut samples = Vec::new();
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(400));
        samples.push(thread_states(pid));
    }
    let (_, cpu1) = proc_stat(&stat_path).expect("server stat");
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu1 - cpu0) as f64 / clk_tck();
    eprintln!("idle server under the shim: {cpu:.3} s CPU in {wall:.2} s ({:.2} %); threads: {:?}", 100.0 * cpu / wall, samples.last().unwrap());
    assert!(wall >= 2.0);
    assert!(cpu / wall < 0.02, "the idle server used {:.2} % CPU (limit 2 %)\n{}", 100.0 * cpu / wall, srv.report());
    for (k, threads) in samples.iter().enumerate() {
        assert!(threads.len() >= 2, "the server has its threads: {threads:?}");
        for (tid, st, comm) in threads {
            assert_eq!(*st, 'S', "sample {k}: thread {tid} ({comm}) of the idle server is in state {st}, not S (sleeping): {threads:?}");
        }
        let r = threads.iter().find(|t| t.0 == reader).unwrap_or_else(|| panic!("reader thread {reader} missing: {threads:?}"));
        assert_eq!(r.1, 'S', "the thread blocked in recv() on an engine socket sleeps: {threads:?}");
    }
    // The blocked recv really was on the engine socket: it wakes for the peer's bytes.
    cli.send_stdin("go\n");
    cli.expect_line("sent", Duration::from_secs(10));
    let got = srv.expect_line("reader-got", Duration::from_secs(10));
    assert_eq!(got, "reader-got b'wake'");
    cli.finish(Duration::from_secs(10));
}

// ---------------------------------------------------------------- 3. pass-through

const PASS_SCRIPT: &str = r#"
import os, socket, sys, tempfile
maps = open("/proc/self/maps").read()
sys.stderr.write("shim-loaded %s\n" % ("liboutboard_shim" in maps))
out = []
a, b = socket.socketpair()
a.sendall(b"unix")
out.append(b.recv(10).decode())
a.close(); b.close()
r, w = os.pipe()
os.write(w, b"pipe")
out.append(os.read(r, 10).decode())
os.close(r); os.close(w)
with tempfile.TemporaryFile() as f:
    f.write(b"file"); f.flush(); f.seek(0)
    out.append(f.read().decode())
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0))
srv.listen(4)
cli = socket.create_connection(srv.getsockname(), timeout=10)
conn, addr = srv.accept()
cli.sendall(b"tcp-lo")
out.append(conn.recv(10).decode())
conn.sendall(b"tcp-back")
out.append(cli.recv(10).decode())
out.append(addr[0])
out.append(conn.getsockname()[0])
cli.close(); conn.close(); srv.close()
u1 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u1.bind(("127.0.0.1", 0))
u2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u2.settimeout(10); u1.settimeout(10)
u2.sendto(b"udp-lo", u1.getsockname())
d, fr = u1.recvfrom(100)
out.append(d.decode())
out.append(fr[0])
u1.sendto(b"udp-back", fr)
out.append(u2.recv(100).decode())
print(" ".join(out))
"#;

#[test]
fn programs_that_never_use_an_engine_address_run_unchanged() {
    let _s = serial();
    let net = Net::new("pass", 1);
    let mut cases: Vec<Vec<&str>> = vec![vec!["sh", "-c", "echo hi | cat"], vec!["sysctl", "-n", "kernel.ostype"], vec![python3(), "-c", PASS_SCRIPT]];
    if have("ip") {
        cases.push(vec!["ip", "-o", "link", "show", "lo"]);
    } else {
        eprintln!("SKIPPED (loudly): `ip` is not installed: the `ip -o link show lo` case did not run");
    }
    for cmd in &cases {
        let want = plain(cmd);
        assert!(want.status.success(), "{cmd:?} fails even without the shim: {}", String::from_utf8_lossy(&want.stderr));
        let mut p = net.run(0, cmd, &[]);
        let (code, out, err) = p.finish(Duration::from_secs(30));
        assert_eq!(code, 0, "{cmd:?} under the shim exited {code}: {}", p.report());
        assert_eq!(out, String::from_utf8_lossy(&want.stdout), "{cmd:?}: output under the shim differs from without it (stderr: {err})");
        eprintln!("{:?} -> {:?}", cmd.first(), out.trim());
        if cmd[0] == python3() {
            assert!(err.contains("shim-loaded True"), "the shim was loaded into python: {err}");
            assert_eq!(out.trim(), "unix pipe file tcp-lo tcp-back 127.0.0.1 127.0.0.1 udp-lo 127.0.0.1 udp-back");
        }
    }
    assert_eq!(plain(&["sh", "-c", "echo hi | cat"]).stdout, b"hi\n");
    // The shim really is in those programs.
    let mut p = net.run(0, &["cat", "/proc/self/maps"], &[]);
    let maps = p.finish_ok(Duration::from_secs(10));
    assert!(maps.contains("liboutboard_shim.so"), "cat under `outboard run` has the shim mapped");
    // …and the engine saw nothing of them.
    let s = net.stat(0);
    assert_eq!(s["connections"].as_array().map(Vec::len), Some(0), "no connections on the engine: {}", s["connections"]);
    assert_eq!(s["boards"].as_array().map(Vec::len), Some(0), "no board left attached: {}", s["boards"]);
    for k in ["tcp_segments_in", "tcp_segments_out", "tcp_connections_opened", "tcp_connections_accepted", "udp_datagrams_in", "udp_datagrams_out"] {
        let v = s["stack"][k].as_u64().unwrap_or_else(|| panic!("engine stat lacks stack counter {k}: {}", s["stack"]));
        assert_eq!(v, 0, "engine stack counter {k}: {}", s["stack"]);
    }
}

// ---------------------------------------------------------------- 4. mixed poll/epoll

const MIXED_SCRIPT: &str = r#"
import json, os, select, socket, sys, threading, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=15)
s.settimeout(None)
r, w = os.pipe()
names = {s.fileno(): "sock", r: "pipe"}
ep = select.epoll()
ep.register(s.fileno(), select.EPOLLIN)
ep.register(r, select.EPOLLIN)
pl = select.poll()
pl.register(s.fileno(), select.POLLIN)
pl.register(r, select.POLLIN)
def later(f):
    threading.Timer(0.2, f).start()
def wait(kind, timeout_s):
    t = time.monotonic()
    if kind == "epoll":
        ev = ep.poll(timeout_s)
    else:
        ev = pl.poll(int(timeout_s * 1000))
    dt = time.monotonic() - t
    return sorted(names.get(fd, str(fd)) for fd, m in ev if m & select.POLLIN), dt, [m for fd, m in ev]
for kind in ("epoll", "poll"):
    ready, dt, masks = wait(kind, 0.5)
    print(json.dumps({"kind": kind, "case": "timeout", "ready": ready, "dt": dt, "masks": masks}), flush=True)
    later(lambda: os.write(w, b"p"))
    ready, dt, masks = wait(kind, 5)
    print(json.dumps({"kind": kind, "case": "pipe", "ready": ready, "dt": dt, "masks": masks}), flush=True)
    assert os.read(r, 10) == b"p"
    s.sendall(b"ping")   # the peer echoes after 0.2 s
    ready, dt, masks = wait(kind, 5)
    print(json.dumps({"kind": kind, "case": "sock", "ready": ready, "dt": dt, "masks": masks}), flush=True)
    got = b""
    while len(got) < 4:
        got += s.recv(10)
    assert got == b"ping", got
    ready, dt, masks = wait(kind, 0)
    print(json.dumps({"kind": kind, "case": "drained", "ready": ready, "dt": dt, "masks": masks}), flush=True)
print("done", flush=True)
s.close()
"#;

#[test]
fn poll_and_epoll_mix_an_engine_socket_and_a_pipe() {
    let _s = serial();
    let net = Net::new("mix", 2);
    let _peer = start_server(&net, 1, 7300, "echo", 0.2);
    let mut p = net.py(0, MIXED_SCRIPT, &[net.addr(1), "7300"], &[]);
    let out = p.finish_ok(Duration::from_secs(60));
    let rows: Vec<Value> = out.lines().filter(|l| l.starts_with('{')).map(|l| json_line(l, "")).collect();
    eprintln!("{out}");
    assert_eq!(rows.len(), 8, "every case ran: {}", p.report());
    for r in &rows {
        let dt = r["dt"].as_f64().unwrap();
        let ready: Vec<&str> = r["ready"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        match r["case"].as_str().unwrap() {
            "timeout" => {
                assert!(ready.is_empty(), "{r}: nothing ready on a timeout");
                assert!((0.25..=0.75).contains(&dt), "{r}: a 0.5 s timeout took {dt:.3} s (±50 %)");
            }
            "pipe" => {
                assert_eq!(ready, ["pipe"], "{r}: the pipe (alone) is ready");
                assert!((0.1..2.0).contains(&dt), "{r}: woken by the pipe write after ~0.2 s, took {dt:.3} s");
            }
            "sock" => {
                assert_eq!(ready, ["sock"], "{r}: the engine socket (alone) is ready");
                assert!((0.1..2.0).contains(&dt), "{r}: woken by the peer's bytes after ~0.2 s, took {dt:.3} s");
            }
            "drained" => assert!(ready.is_empty(), "{r}: nothing left ready"),
            other => panic!("unknown case {other}"),
        }
    }
}

// ---------------------------------------------------------------- 5. unsupported

const UNSUPPORTED_SCRIPT: &str = r#"
import errno, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=15)
s.settimeout(None)
try:
    s.setsockopt(socket.IPPROTO_TCP, 10, 16384)  # TCP_WINDOW_CLAMP
    print("lowat ok", flush=True)
except OSError as e:
    print("lowat %d" % e.errno, flush=True)
try:
    s.send(b"!", socket.MSG_OOB)
    print("oob ok", flush=True)
except OSError as e:
    print("oob %d" % e.errno, flush=True)
s.sendall(b"still-works")
got = b""
while len(got) < 11:
    got += s.recv(64)
print("echo " + got.decode(), flush=True)
sys.stdin.readline()
s.close()
"#;

#[test]
fn unsupported_options_and_flags_fail_are_named_and_counted() {
    let _s = serial();
    let net = Net::new("unsup", 2);
    let _peer = start_server(&net, 1, 7400, "echo", 0.0);
    let mut p = net.py(0, UNSUPPORTED_SCRIPT, &[net.addr(1), "7400"], &[("OUTBOARD_LOG", "debug")]);
    let lowat = p.expect_line("lowat", Duration::from_secs(15));
    assert_eq!(lowat, format!("lowat {}", libc::ENOPROTOOPT), "setsockopt(TCP_WINDOW_CLAMP) on an engine socket: {}", p.report());
    let oob = p.expect_line("oob", Duration::from_secs(10));
    assert_eq!(oob, format!("oob {}", libc::EOPNOTSUPP), "send(MSG_OOB) on an engine socket: {}", p.report());
    assert_eq!(p.expect_line("echo", Duration::from_secs(10)), "echo still-works", "the socket still works");

    // While it is attached: its board's application counters.
    let pid = u64::from(p.pid());
    let t0 = Instant::now();
    let app = loop {
        let boards = net.boards(0);
        let app = boards.iter().find(|b| b["pid"].as_u64() == Some(pid)).map(|b| b["app"].clone());
        if let Some(a) = &app {
            if a["unsupported_options"].as_u64().unwrap_or(0) >= 1 && a["unsupported"].as_u64().unwrap_or(0) >= 1 {
                break a.clone();
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(2), "engine A's board of pid {pid} lacks the counts after 2 s: {boards:?}\n{}", p.report());
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("board app counters: {app}");
    assert!(app["engine_sockets"].as_u64().unwrap_or(0) >= 1, "{app}");

    let (code, _, err) = p.finish(Duration::from_secs(10));
    assert_eq!(code, 0, "{}", p.report());
    let unsup: Vec<&str> = err.lines().filter(|l| l.contains("unsupported")).collect();
    eprintln!("shim's unsupported lines:\n{}", unsup.join("\n"));
    let lowat_named = format!("setsockopt level={} name=10", libc::IPPROTO_TCP);
    assert!(unsup.iter().any(|l| l.contains(&lowat_named) && l.contains("ENOPROTOOPT")), "a line names setsockopt TCP_WINDOW_CLAMP ({lowat_named}): {err}");
    assert!(unsup.iter().any(|l| l.contains("call=send") && l.contains("MSG_OOB")), "a line names send's MSG_OOB: {err}");
}

// ---------------------------------------------------------------- 6. TCP_INFO

const TCPINFO_SCRIPT: &str = r#"
import json, socket, struct, sys
peer, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((peer, port), timeout=30)
s.settimeout(None)
data = bytes(range(256)) * 4096
s.sendall(data)
raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
u8 = struct.unpack_from("8B", raw, 0)
names = ["rto", "ato", "snd_mss", "rcv_mss", "unacked", "sacked", "lost", "retrans", "fackets",
         "last_data_sent", "last_ack_sent", "last_data_recv", "last_ack_recv", "pmtu", "rcv_ssthresh",
         "rtt", "rttvar", "snd_ssthresh", "snd_cwnd"]
u32 = struct.unpack_from("%dI" % len(names), raw, 8)
info = dict(zip(["state", "ca_state", "retransmits", "probes", "backoff", "options", "wscales", "flags"], u8))
info.update(zip(names, u32))
info["len"] = len(raw)
r = {"info": info}
r["so_type"] = s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
r["so_error"] = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
r["nodelay0"] = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
r["nodelay1"] = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
r["nodelay2"] = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
r["sockname"] = list(s.getsockname())
r["peername"] = list(s.getpeername())
print("result " + json.dumps(r), flush=True)
s.shutdown(socket.SHUT_WR)
print("tail %r" % s.recv(10), flush=True)
s.close()
"#;

#[test]
fn tcp_info_and_socket_options_read_back_the_engine_connection() {
    let _s = serial();
    let net = Net::new("tinfo", 2);
    let peer = start_server(&net, 1, 7600, "sink", 0.0);
    let mut p = net.py(0, TCPINFO_SCRIPT, &[net.addr(1), "7600"], &[]);
    let r = json_line(&p.expect_line("result ", Duration::from_secs(60)), "result ");
    eprintln!("{r}");
    let i = &r["info"];
    let g = |k: &str| i[k].as_u64().unwrap_or_else(|| panic!("tcp_info lacks {k}: {i}"));
    assert_eq!(g("len"), 232, "getsockopt(TCP_INFO, 232) fills 232 bytes");
    assert_eq!(g("state"), 1, "tcpi_state is TCP_ESTABLISHED: {i}");
    assert!(g("rtt") > 0, "tcpi_rtt: {i}");
    assert!(g("snd_mss") > 0, "tcpi_snd_mss: {i}");
    assert!(g("snd_cwnd") > 0, "tcpi_snd_cwnd: {i}");
    assert!(g("options") & 2 != 0, "tcpi_options has TCPI_OPT_SACK: {i}");
    assert!(g("options") & 4 != 0, "tcpi_options has TCPI_OPT_WSCALE: {i}");
    assert_eq!(r["so_type"].as_i64(), Some(i64::from(libc::SOCK_STREAM)));
    assert_eq!(r["so_error"].as_i64(), Some(0));
    assert_eq!(r["nodelay1"].as_i64().map(|v| v != 0), Some(true), "TCP_NODELAY set reads back: {r}");
    assert_eq!(r["nodelay2"].as_i64(), Some(0), "TCP_NODELAY cleared reads back: {r}");
    assert_eq!(r["sockname"][0], net.addr(0), "getsockname is engine A's address: {r}");
    assert_eq!(r["peername"], serde_json::json!([net.addr(1), 7600]), "getpeername is the server on engine B: {r}");
    let port = r["sockname"][1].as_u64().unwrap();
    assert!(port > 0);
    // The server saw the same pair, and all of the MiB.
    peer.expect_line(&format!("conn {}:7600 {}:{port}", net.addr(1), net.addr(0)), Duration::from_secs(5));
    assert_eq!(peer.expect_line("eof", Duration::from_secs(30)), format!("eof {}", 1 << 20));
    p.finish_ok(Duration::from_secs(20));
}

/// Gathered writes (`writev`, `sendmsg` with several pieces, one of them
/// empty): with TCP_NODELAY each small one leaves in one segment, as
/// Linux sends it (TCP_INFO's segs_out, read on this socket, counts them);
/// one larger than the send buffer, on a socket with a timeout (non-blocking
/// underneath), returns partial counts and every byte comes back in order
/// (read back by `recv` and scattered `recvmsg_into` in turn).
const GATHER_SCRIPT: &str = r#"
import json, os, socket, struct, sys, threading
peer, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((peer, port), timeout=30)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def segs_out():
    return struct.unpack_from("I", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232), 136)[0]
def echo(n):
    got = b""
    while len(got) < n:
        d = s.recv(n - len(got))
        if not d:
            break
        got += d
    return got
r = {"rounds": 200, "rounds_ok": 0}
before = segs_out()
for k in range(r["rounds"]):
    head, body = b"%05d:" % k, bytes([k % 256]) * 24
    if k % 2:
        n = s.sendmsg([head, b"", body])
    else:
        n = os.writev(s.fileno(), [head, b"", body])
    if n == 30 and echo(30) == head + body:
        r["rounds_ok"] += 1
r["segs"] = segs_out() - before
pieces = [bytes([i + 1]) * (300000 + i) for i in range(8)]
total = sum(map(len, pieces))
back = bytearray()
def drain():
    k = 0
    while len(back) < total:
        k += 1
        if k % 2:
            d = s.recv(65536)
        else:
            # A scattered read: 7 bytes, then the rest.
            a, b = bytearray(7), bytearray(65529)
            n = s.recvmsg_into([a, b])[0]
            d = bytes(a[:n]) + bytes(b[:max(0, n - 7)])
        if not d:
            break
        back.extend(d)
t = threading.Thread(target=drain)
t.start()
sent, calls = 0, 0
while sent < total:
    rest, skip = [], sent
    for p in pieces:
        if skip >= len(p):
            skip -= len(p)
            continue
        rest.append(p[skip:])
        skip = 0
    sent += s.sendmsg(rest)
    calls += 1
t.join(60)
r["big_ok"] = bytes(back) == b"".join(pieces)
r["big_calls"] = calls
print("result " + json.dumps(r), flush=True)
s.close()
"#;

#[test]
fn gathered_writes_leave_in_one_segment_and_arrive_in_order() {
    let _s = serial();
    let net = Net::new("gathr", 2);
    let _peer = start_server(&net, 1, 7610, "echo", 0.0);
    let mut p = net.py(0, GATHER_SCRIPT, &[net.addr(1), "7610"], &[]);
    let r = json_line(&p.expect_line("result ", Duration::from_secs(90)), "result ");
    eprintln!("{r}");
    let rounds = r["rounds"].as_u64().unwrap();
    assert_eq!(r["rounds_ok"].as_u64(), Some(rounds), "every three-piece request echoed whole: {r}");
    let segs = r["segs"].as_u64().unwrap();
    // One each (the echo's ACK rides on the next request), and room for a
    // few delayed ACKs on a slow machine; a push per piece took 280 here.
    assert!(segs <= rounds + rounds / 5, "{rounds} three-piece requests took {segs} segments: {r}");
    assert_eq!(r["big_ok"], true, "a gathered write larger than the send buffer came back whole and in order: {r}");
    assert!(r["big_calls"].as_u64().unwrap() >= 2, "it was taken in parts (the send region is smaller): {r}");
    p.finish_ok(Duration::from_secs(20));
}

// ---------------------------------------------------------------- 7. many threads

const DOWNLOADS: &str = r#"
import hashlib, json, sys, threading, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
barrier = threading.Barrier(n)
res = [None] * n
def get(k):
    try:
        barrier.wait(30)
        with urllib.request.urlopen(url, timeout=90) as r:
            body = r.read()
        res[k] = {"len": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    except Exception as e:
        res[k] = {"error": repr(e)}
ts = [threading.Thread(target=get, args=(k,)) for k in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print("result " + json.dumps(res), flush=True)
"#;

#[test]
fn threading_http_server_serves_20_parallel_downloads() {
    let _s = serial();
    let net = Net::new("http", 2);
    let root = net.dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    let mut blob = vec![0u8; 2 << 20];
    std::fs::File::open("/dev/urandom").unwrap().read_exact(&mut blob).unwrap();
    std::fs::write(root.join("blob"), &blob).unwrap();
    let want = plain(&[python3(), "-c", &format!("import hashlib; print(hashlib.sha256(open({:?},'rb').read()).hexdigest())", root.join("blob").display().to_string())]);
    let want = String::from_utf8_lossy(&want.stdout).trim().to_string();
    assert_eq!(want.len(), 64);

    let srv = net.run(0, &[python3(), "-u", "-m", "http.server", "--bind", "0.0.0.0", "--directory", root.to_str().unwrap(), "8000"], &[]);
    srv.expect_line("Serving HTTP", Duration::from_secs(15));
    let url = format!("http://{}:8000/blob", net.addr(0));
    let t0 = Instant::now();
    let mut cli = net.py(1, DOWNLOADS, &[&url, "20"], &[]);
    let r = json_line(&cli.expect_line("result ", Duration::from_secs(180)), "result ");
    eprintln!("20 parallel downloads of 2 MiB through the shim on both ends: {:.1} s", t0.elapsed().as_secs_f64());
    cli.finish_ok(Duration::from_secs(20));
    let rows = r.as_array().unwrap();
    assert_eq!(rows.len(), 20);
    for (k, row) in rows.iter().enumerate() {
        assert!(row.get("error").is_none(), "download {k} failed: {row}\nserver: {}\nclient: {}", srv.report(), cli.report());
        assert_eq!(row["len"].as_u64(), Some(2 << 20), "download {k}: {row}");
        assert_eq!(row["sha256"], want.as_str(), "download {k}: sha256 differs");
    }
    let served = srv.stderr().matches("\"GET /blob HTTP/1.1\" 200").count();
    assert_eq!(served, 20, "the server logged 20 GETs: {}", srv.report());
    // The engine carried them: 20 connections to A:8000, each 2 MiB out.
    let s = net.stat(0);
    let local = format!("{}:8000", net.addr(0));
    let conns: Vec<&Value> = s["connections"].as_array().unwrap().iter().filter(|c| c["local"] == local.as_str()).collect();
    assert_eq!(conns.len(), 20, "engine A shows the 20 connections (TIME-WAIT or closing): {}", s["connections"]);
    for c in &conns {
        assert!(c["bytes_out"].as_u64().unwrap() >= 2 << 20, "each carried the file: {c}");
    }
}

// ---------------------------------------------------------------- 8. stdio

/// glibc's stdio bypasses `read`/`write`: a FILE made by `fdopen` on an
/// engine socket must still carry bytes through the engine, and after
/// `fclose` the descriptor number, reused for a file, must be the file's.
#[test]
fn stdio_over_an_engine_socket_and_the_descriptor_after_fclose() {
    let _g = serial();
    let net = Net::new("stdio", 2);
    let dir = net.dir.clone();
    let bin = dir.join("behaviour_fdopen");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shim/behaviour_fdopen.c");
    let st = Command::new("cc").args(["-O1", "-Wall", "-o"]).arg(&bin).arg(&src).status().expect("cc (install gcc)");
    assert!(st.success(), "compiling behaviour_fdopen.c failed");
    let file = dir.join("content");
    std::fs::write(&file, "file-bytes\n").unwrap();
    let _srv = start_server(&net, 1, 7700, "echo", 0.0);
    let mut p = net.run(0, &[bin.to_str().unwrap(), net.addr(1), "7700", file.to_str().unwrap()], &[]);
    let out = p.finish_ok(Duration::from_secs(20));
    assert!(out.contains("echo: hello"), "the line went through the engine and came back: {out}");
    assert!(out.contains("fd reused=1 read=11 ok=1"), "the reused descriptor reads the file: {out}");
}


// ---------------------------------------------------------------- 9. epoll over many sockets

/// 200 engine connections (to an echo server on the other engine) in epoll
/// sets: Linux's level-triggered, edge-triggered, one-shot, maxevents and
/// delete/close semantics with only a few of them active, and what a wait
/// costs with every connection idle (printed, not asserted).
const EPOLL_MANY_SCRIPT: &str = r#"
import json, select, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conns = [socket.create_connection((host, port), timeout=15) for _ in range(n)]
for c in conns:
    c.setblocking(False)
idx = {c.fileno(): i for i, c in enumerate(conns)}
res = {}
def ready(ep, timeout):
    return sorted(idx[fd] for fd, m in ep.poll(timeout))
def wait_for(ep, want, limit=10.0):
    got, t = set(), time.monotonic()
    while not want <= got and time.monotonic() - t < limit:
        got |= set(ready(ep, 1.0))
    return sorted(got)
def drain(i):
    got = b""
    while True:
        try:
            d = conns[i].recv(100)
        except BlockingIOError:
            return got
        if not d:
            return got
        got += d
lt = select.epoll()
for c in conns:
    lt.register(c.fileno(), select.EPOLLIN)
res["idle"] = ready(lt, 0.2)
t = time.perf_counter()
for _ in range(2000):
    lt.poll(0)
res["idle_wait_us"] = (time.perf_counter() - t) / 2000 * 1e6
active = sorted({3, 42, 77, 150 % n, n - 1})
for i in active:
    conns[i].send(b"x")
res["active"] = active
res["lt_first"] = wait_for(lt, set(active))
time.sleep(0.1)
res["lt_again"] = ready(lt, 0)
for i in active:
    drain(i)
res["lt_drained"] = ready(lt, 0)
out = select.epoll()
for c in conns:
    out.register(c.fileno(), select.EPOLLOUT)
seen = []
for _ in range((n + 63) // 64):
    seen += [idx[fd] for fd, m in out.poll(0, 64)]
res["out_calls_distinct"] = len(set(seen))
res["out_calls_total"] = len(seen)
et = select.epoll()
for c in conns:
    et.register(c.fileno(), select.EPOLLIN | select.EPOLLET)
conns[5].send(b"e1")
res["et_first"] = wait_for(et, {5})
res["et_unread_again"] = ready(et, 0.3)
conns[5].send(b"e2")
res["et_new_data"] = wait_for(et, {5})
drain(5)
one = select.epoll()
one.register(conns[6].fileno(), select.EPOLLIN | select.EPOLLONESHOT)
conns[6].send(b"o")
res["oneshot_first"] = wait_for(one, {6})
res["oneshot_again"] = ready(one, 0.3)
one.modify(conns[6].fileno(), select.EPOLLIN | select.EPOLLONESHOT)
res["oneshot_rearmed"] = ready(one, 0)
drain(6)
lt.unregister(conns[3].fileno())
conns[3].send(b"d")
gone = conns[77]
del idx[gone.fileno()]
gone.close()
conns[8].send(b"z")
res["after_del_close"] = wait_for(lt, {8})
time.sleep(0.2)
res["after_del_close"] = sorted(set(res["after_del_close"]) | set(ready(lt, 0)))
print(json.dumps(res), flush=True)
"#;

#[test]
fn epoll_semantics_over_200_engine_connections() {
    let _g = serial();
    let net = Net::new("epmany", 2);
    let _srv = start_server(&net, 1, 7800, "echo", 0.0);
    let mut p = net.py(0, EPOLL_MANY_SCRIPT, &[net.addr(1), "7800", "200"], &[]);
    let out = p.finish_ok(Duration::from_secs(90));
    let line = out.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no result: {}", p.report()));
    let r = json_line(line, "");
    eprintln!("{r}");
    let list = |k: &str| -> Vec<u64> { r[k].as_array().unwrap_or_else(|| panic!("{k} missing: {r}")).iter().map(|v| v.as_u64().unwrap()).collect() };
    let active = list("active");
    assert!(list("idle").is_empty(), "200 idle connections: nothing ready: {r}");
    assert_eq!(list("lt_first"), active, "exactly the connections with data became ready: {r}");
    assert_eq!(list("lt_again"), active, "level-triggered: unread data is reported again: {r}");
    assert!(list("lt_drained").is_empty(), "after reading, nothing is ready: {r}");
    // Linux's ready list is round-robin: 4 × 64 reports, the first 200 of them distinct.
    assert_eq!(r["out_calls_total"], 256, "EPOLLOUT, all writable, maxevents 64: 64 a call: {r}");
    assert_eq!(r["out_calls_distinct"], 200, "… and every connection within four calls: {r}");
    assert_eq!(list("et_first"), [5], "edge-triggered: the new data is reported: {r}");
    assert!(list("et_unread_again").is_empty(), "edge-triggered: unread data is not reported again: {r}");
    assert_eq!(list("et_new_data"), [5], "edge-triggered: more data is a new edge: {r}");
    assert_eq!(list("oneshot_first"), [6], "one-shot: reported once: {r}");
    assert!(list("oneshot_again").is_empty(), "one-shot: disarmed after: {r}");
    assert_eq!(list("oneshot_rearmed"), [6], "one-shot: EPOLL_CTL_MOD re-arms it: {r}");
    assert_eq!(list("after_del_close"), [8], "a deleted and a closed descriptor are not reported: {r}");
    eprintln!("epoll_wait(0) over 200 idle engine connections: {:.1} us", r["idle_wait_us"].as_f64().unwrap_or(0.0));
}

// ---------------------------------------------------------------- 10. the engine dies

/// A program waiting in epoll (level- and edge-triggered) and in poll on
/// engine connections when its engine is killed: every wait returns with
/// the connections failed, and recv says ECONNRESET, as for a reset.
const ENGINE_DEATH_SCRIPT: &str = r#"
import json, select, socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
a = socket.create_connection((host, port), timeout=15)
b = socket.create_connection((host, port), timeout=15)
for s in (a, b):
    s.setblocking(False)
lt, et = select.epoll(), select.epoll()
lt.register(a.fileno(), select.EPOLLIN)
et.register(b.fileno(), select.EPOLLIN | select.EPOLLET)
res = {"quiet": lt.poll(0.2) + et.poll(0)}
print("waiting", flush=True)
t = time.monotonic()
res["lt"] = [m for fd, m in lt.poll(20)]
res["lt_s"] = time.monotonic() - t
res["et"] = [m for fd, m in et.poll(5)]
pl = select.poll()
pl.register(a.fileno(), select.POLLIN)
res["poll"] = [m for fd, m in pl.poll(5000)]
for name, s in (("recv_a", a), ("recv_b", b)):
    try:
        res[name] = "data %r" % s.recv(10)
    except OSError as e:
        res[name] = e.errno
print(json.dumps(res), flush=True)
"#;

#[test]
fn waits_on_engine_sockets_end_when_the_engine_dies() {
    let _g = serial();
    let net = Net::new("death", 2);
    let _srv = start_server(&net, 1, 7900, "echo", 0.0);
    let mut p = net.py(0, ENGINE_DEATH_SCRIPT, &[net.addr(1), "7900"], &[("OUTBOARD_LOG", "info")]);
    p.expect_line("waiting", Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) of our own child, the engine the program is attached to.
    unsafe { libc::kill(net.engines[0].child.pid() as i32, libc::SIGKILL) };
    let out = p.finish_ok(Duration::from_secs(40));
    let line = out.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no result: {}", p.report()));
    let r = json_line(line, "");
    eprintln!("{r}");
    let masks = |k: &str| -> Vec<u32> { r[k].as_array().unwrap_or_else(|| panic!("{k} missing: {r}")).iter().map(|v| v.as_u64().unwrap() as u32).collect() };
    assert!(p.stderr().contains("the engine is gone"), "the shim said so: {}", p.report());
    assert!(r["quiet"].as_array().is_some_and(|v| v.is_empty()), "nothing ready before: {r}");
    let failed = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
    for k in ["lt", "et"] {
        let m = masks(k);
        assert!(m.len() == 1 && m[0] & failed == failed, "{k}: the connection reported failed (EPOLLERR|EPOLLHUP): {r}");
    }
    assert!(r["lt_s"].as_f64().unwrap() < 10.0, "the wait ended soon after the engine died: {r}");
    let m = masks("poll");
    let pfail = (libc::POLLERR | libc::POLLHUP) as u32;
    assert!(m.len() == 1 && m[0] & pfail == pfail, "poll: failed too: {r}");
    assert_eq!(r["recv_a"], libc::ECONNRESET, "recv after the engine died: ECONNRESET: {r}");
    assert_eq!(r["recv_b"], libc::ECONNRESET, "… on every stream: {r}");
}

// ---------------------------------------------------------------- 11. many blocked threads

/// 200 connections to a server with a thread blocked in recv on each (the
/// shim wakes only the threads whose connections had events): rounds of
/// requests on random connections are each answered by their own thread,
/// and when the client closes them (half, then the rest), every thread sees
/// its end of stream.
const MANY_BLOCKED_CLIENT: &str = r#"
import random, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conns = [socket.create_connection((host, port), timeout=15) for _ in range(n)]
random.seed(5)
for _ in range(5):
    pick = random.sample(range(n), 20)
    for i in pick:
        conns[i].sendall(b"r%d;" % i)
    for i in pick:
        want, got = b"r%d;" % i, b""
        while len(got) < len(want):
            d = conns[i].recv(64)
            if not d:
                break
            got += d
        assert got == want, (i, got)
print("answered", flush=True)
time.sleep(1)  # every server thread asleep in recv again
# Half, then the rest: the threads that end (the first to block, which
# sleeps on the board for the others, among them) must leave someone
# watching the board for the threads still waiting.
for c in conns[: n // 2]:
    c.close()
time.sleep(0.5)
for c in conns[n // 2 :]:
    c.close()
print("closed", flush=True)
"#;

#[test]
fn two_hundred_threads_blocked_in_recv_are_each_woken_for_their_own_connection() {
    let _g = serial();
    let net = Net::new("blocked", 2);
    let srv = start_server(&net, 1, 7950, "echo", 0.0);
    let mut c = net.py(0, MANY_BLOCKED_CLIENT, &[net.addr(1), "7950", "200"], &[]);
    let out = c.finish_ok(Duration::from_secs(60));
    assert!(out.contains("answered") && out.contains("closed"), "{}", c.report());
    // Every server thread saw its end of stream and closed its connection.
    let t0 = Instant::now();
    loop {
        // (Lines from different threads may run together: count the words.)
        let eofs = srv.stdout().matches("eof ").count();
        if eofs == 200 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "{eofs} of 200 server threads saw the end of stream in 15 s: {}", srv.report());
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    while net.stat(1)["connections"].as_array().is_some_and(|v| !v.is_empty()) {
        assert!(t0.elapsed() < Duration::from_secs(10), "connections left on the server's engine: {}", net.stat(1)["connections"]);
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------- 12. no spinning on a dead engine

/// A `selectors` server (a non-blocking listener and a datagram socket on
/// one selector) and a thread in a blocking `accept` loop on a second
/// listener — both the shapes real servers take — counting every error.
const DEAD_ENGINE_SERVER: &str = r#"
import errno, os, selectors, socket, sys, threading
port = int(sys.argv[1])
sel = selectors.DefaultSelector()
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", port)); ls.listen(16); ls.setblocking(False)
us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); us.bind(("0.0.0.0", port)); us.setblocking(False)
bl = socket.socket(); bl.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
bl.bind(("0.0.0.0", port + 1)); bl.listen(16)
sel.register(ls, selectors.EVENT_READ, "listener")
sel.register(us, selectors.EVENT_READ, "datagram")
errors = {"listener": 0, "datagram": 0, "blocking": 0}
def blocking_loop():
    while True:
        try:
            c, _ = bl.accept()
            print("served blocking", flush=True)
            c.close()
        except OSError as e:
            errors["blocking"] += 1
            print("error blocking %s" % errno.errorcode.get(e.errno, e.errno), flush=True)
threading.Thread(target=blocking_loop, daemon=True).start()
print("ready", flush=True)
while True:
    for key, _ in sel.select(timeout=None):
        try:
            if key.data == "listener":
                c, _ = ls.accept()
                print("served listener", flush=True)
                c.close()
            else:
                d, a = us.recvfrom(2048)
                us.sendto(d, a)
                print("served datagram", flush=True)
        except BlockingIOError:
            pass
        except OSError as e:
            errors[key.data] += 1
            print("error %s %s" % (key.data, errno.errorcode.get(e.errno, e.errno)), flush=True)
"#;

/// A client of the server above: connects to both listeners and sends a datagram.
const DEAD_ENGINE_CLIENT: &str = r#"
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
for p in (port, port + 1):
    socket.create_connection((host, p), timeout=10).close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(10)
u.sendto(b"ping", (host, port))
print("echo", u.recvfrom(64)[0].decode(), flush=True)
"#;

/// The engine dies under a server: each of its sockets fails once with the
/// documented error, and then the server sleeps instead of spinning on
/// sockets that would fail forever (listeners and datagram sockets go
/// quiet). The engine restarted (same name): the server re-attaches by
/// itself, its listeners and datagram socket are back on their ports, and a
/// new client is served.
#[test]
fn a_server_whose_engine_died_does_not_spin_and_serves_again_once_it_is_back() {
    let _g = serial();
    let mut net = Net::new("nospin", 2);
    let srv = net.py(0, DEAD_ENGINE_SERVER, &["7950"], &[]);
    srv.expect_line("ready", Duration::from_secs(15));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) of our own child, the engine the server is attached to.
    unsafe { libc::kill(net.engines[0].child.pid() as i32, libc::SIGKILL) };
    // Each socket reports the death once, in whatever order.
    let want = ["error listener ENETDOWN", "error datagram ENETDOWN", "error blocking ENETDOWN"];
    let end = Instant::now() + Duration::from_secs(10);
    while !want.iter().all(|w| srv.stdout().contains(w)) {
        assert!(Instant::now() < end, "every socket should fail once with ENETDOWN\n{}", srv.report());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let pid = srv.pid();
    let stat_path = PathBuf::from(format!("/proc/{pid}/stat"));
    let (_, cpu0) = proc_stat(&stat_path).expect("the server is still running");
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let (_, cpu1) = proc_stat(&stat_path).expect("the server is still running");
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu1 - cpu0) as f64 / clk_tck();
    eprintln!("server after its engine died: {cpu:.3} s CPU in {wall:.2} s ({:.2} %)", 100.0 * cpu / wall);
    assert!(cpu / wall < 0.05, "the server used {:.2} % CPU after its engine died (limit 5 %)\n{}", 100.0 * cpu / wall, srv.report());
    let errors = srv.stdout().lines().filter(|l| l.starts_with("error ")).count();
    assert!(errors <= 6, "each socket failed once, not over and over ({errors} errors)\n{}", srv.report());

    net.restart("nospin", 0);
    let end = Instant::now() + Duration::from_secs(10);
    while !srv.stderr().contains("the engine is back") {
        assert!(Instant::now() < end, "the server re-attaches to the restarted engine\n{}", srv.report());
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut cli = net.py(1, DEAD_ENGINE_CLIENT, &[net.addr(0), "7950"], &[]);
    assert_eq!(cli.expect_line("echo", Duration::from_secs(20)).trim(), "echo ping");
    cli.finish_ok(Duration::from_secs(10));
    let want = ["served listener", "served blocking", "served datagram"];
    let end = Instant::now() + Duration::from_secs(10);
    while !want.iter().all(|w| srv.stdout().contains(w)) {
        assert!(Instant::now() < end, "the server serves on the restarted engine\n{}", srv.report());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two threads, each in epoll_wait on an epoll set of its own with an engine
/// listener (the shape of memcached's or libuv's workers); thread 0 serves
/// a ping-pong client, thread 1 has nothing to do.
const TWO_EPOLL_THREADS: &str = include_str!("scripts/two_epoll_threads.py");

const PING_PONG: &str = r#"
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
n, end = 0, time.monotonic() + 2.0
while time.monotonic() < end:
    s.sendall(b"x" * 32)
    got = b""
    while len(got) < 32:
        got += s.recv(64)
    n += 1
print("rounds", n, flush=True)
"#;

/// Thread 0 of `TWO_EPOLL_THREADS` serves `PING_PONG` for 2 s: the round
/// trips, and the epoll sleeps the server announced meanwhile.
fn two_epoll_threads_ping_pong(net: &Net, port: &str, env: &[(&str, &str)]) -> (u64, u64) {
    let srv = net.py(0, TWO_EPOLL_THREADS, &[port], env);
    srv.expect_line("ready", Duration::from_secs(15));
    std::thread::sleep(Duration::from_millis(200));
    let waits = |net: &Net| -> u64 {
        let pid = u64::from(srv.pid());
        net.boards(0).iter().find(|b| b["pid"].as_u64() == Some(pid)).map_or(0, |b| b["app"]["poll_waits"].as_u64().unwrap_or(0))
    };
    let before = waits(net);
    let mut cli = net.py(1, PING_PONG, &[net.addr(0), port], &[]);
    let line = cli.expect_line("rounds", Duration::from_secs(20));
    cli.finish_ok(Duration::from_secs(10));
    let rounds: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("rounds N");
    // The shim publishes its counters as it goes: give it a wait or two to.
    std::thread::sleep(Duration::from_millis(300));
    let spent = waits(net) - before;
    eprintln!("{env:?}: {rounds} round trips, {spent} epoll sleeps announced ({:.2} per round trip)", spent as f64 / rounds as f64);
    assert!(rounds >= 50, "too few round trips to mean anything: {rounds}\n{}", srv.report());
    (rounds, spent)
}

/// Several threads each sleeping in epoll_wait on its own set. The engine's
/// shared wake-up eventfd (one per process, in every set) must not stay
/// ready for the threads that have nothing to do — with it level-triggered
/// and drained only when the last sleeper left, idle threads never slept
/// while another was in epoll, and each request cost some twenty wasted
/// waits (memcached with 4 workers ran at a fifth of its 1-worker rate);
/// each engine write wakes each set once. And with wake groups (each set
/// in a group of its own, `OUTBOARD_WAKE_GROUPS` unset) the idle thread is
/// not woken at all: about one sleep per round trip, the serving thread's,
/// where every set woken for every event made two.
#[test]
fn epoll_sleepers_in_several_threads_do_not_spin_on_the_wake_eventfd() {
    let _g = serial();
    let net = Net::new("ettwo", 2);
    let (rounds, spent) = two_epoll_threads_ping_pong(&net, "7960", &[("OUTBOARD_WAKE_GROUPS", "0")]);
    assert!(spent <= 4 * rounds + 50, "{spent} epoll sleeps for {rounds} round trips: threads with nothing to do are spinning");
    let (rounds, spent) = two_epoll_threads_ping_pong(&net, "7962", &[]);
    assert!(
        spent <= rounds * 13 / 10 + 50,
        "{spent} epoll sleeps for {rounds} round trips with wake groups: the idle thread is woken for the other's connection"
    );
}

const ECHO_ONCE: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(b"hello outboard")
got = b""
while len(got) < 14:
    b = s.recv(64)
    if not b:
        break
    got += b
print("echo", got.decode(), flush=True)
"#;

/// The native API on request: `echo_server` (an example on `Board`) sees
/// its engine die, calls `Board::reattach`, and once an engine of the same
/// name is back it listens again on its port and serves a new client —
/// without being restarted.
#[test]
fn a_native_api_server_reattaches_when_its_engine_is_back() {
    let _g = serial();
    let mut net = Net::new("natre", 2);
    let mut c = Command::new(support::example("echo_server"));
    c.args([net.name(0), "7970"]).env("OUTBOARD_RUN_DIR", &net.dir);
    let srv = Prog::spawn(c, "echo_server (native API)");
    let serve_one = |net: &Net| {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let mut cli = net.py(1, ECHO_ONCE, &[net.addr(0), "7970"], &[]);
            let (code, out, _) = cli.finish(Duration::from_secs(15));
            if code == 0 && out.trim() == "echo hello outboard" {
                return;
            }
            assert!(Instant::now() < end, "the native server does not serve\n{}\n{}", cli.report(), srv.report());
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    serve_one(&net);
    // SAFETY: kill(2) of our own child, the engine the server is attached to.
    unsafe { libc::kill(net.engines[0].child.pid() as i32, libc::SIGKILL) };
    let end = Instant::now() + Duration::from_secs(10);
    while !srv.stderr().contains("the engine is gone") {
        assert!(Instant::now() < end, "the server noticed the engine's death\n{}", srv.report());
        std::thread::sleep(Duration::from_millis(50));
    }
    net.restart("natre", 0);
    let end = Instant::now() + Duration::from_secs(10);
    while !srv.stderr().contains("re-attached") {
        assert!(Instant::now() < end, "the server re-attaches\n{}", srv.report());
        std::thread::sleep(Duration::from_millis(50));
    }
    serve_one(&net);
}
