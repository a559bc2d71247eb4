#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! Multi-process servers under the socket shim, run the way their users
//! run them, served from Linux's side of the lab (root):
//!
//! - nginx in its default master/worker configuration (`master_process on`,
//!   2 workers, the workers dropping to `nobody`), in the foreground and as
//!   a daemon: curl byte-exact and wrk without an error; both workers take
//!   connections (two boards with accepts), the master none.
//! - a pre-forking Python server (the parent listens, two forked children
//!   accept) and two independent processes sharing a port with
//!   SO_REUSEPORT: every connection echoed, each process given a share.
//! - redis with a `BGSAVE` while a benchmark runs: the fork leaves the
//!   parent's sockets working and the save completes.
//! - `socketserver.ForkingTCPServer`: the parent accepts and forks a child
//!   per connection; each child takes the connection over (with the bytes
//!   already queued) and echoes it byte-exact.
//! - a server that forked, stopped and started again at once binds its
//!   port again (as `systemctl restart` does on Linux).
//! - PostgreSQL: a backend forked per connection, pgbench from Linux, a
//!   restart on its port.

mod support;
#[path = "../src/bench/tools.rs"]
#[allow(dead_code)]
mod tools;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::netns::{need_all, skip_unless_root};
use support::rig::{must, output, random_file, sha256, AppRig, Rig, STEP};
use support::python3;

/// The boards attached to the rig's engine that accepted connections: (pid, accepts).
fn accepting_boards(rig: &Rig) -> Vec<(u64, u64)> {
    let stat: Value = rig.engine.stat();
    stat["boards"]
        .as_array()
        .map(|b| {
            b.iter()
                .map(|r| (r["pid"].as_u64().unwrap_or(0), r["accepts"].as_u64().unwrap_or(0)))
                .filter(|(_, a)| *a > 0)
                .collect()
        })
        .unwrap_or_default()
}

/// nginx.conf for `workers` worker processes as `user` (what
/// `tools::nginx_conf` writes, with these two settings).
fn nginx_conf(rig: &Rig, port: u16, workers: u32, daemon: bool) -> std::path::PathBuf {
    let p = must(tools::nginx_conf(&rig.tmp, port));
    let text = std::fs::read_to_string(&p).unwrap().replace(
        "worker_processes 1;",
        &format!("worker_processes {workers};\nuser nobody nogroup;\ndaemon {};", if daemon { "on" } else { "off" }),
    );
    std::fs::write(&p, text).unwrap();
    // The workers (nobody) read the files.
    let _ = std::process::Command::new("chmod").args(["-R", "a+rX"]).arg(&rig.tmp).status();
    p
}

/// Stops a daemon this test started, and what it forked, when the test ends
/// however it ends (a failed assertion too): the daemon left the test's
/// process tree, so nothing else would (its group, by the pid in this file;
/// a daemon leads its own session). Declared after the rig: it runs first.
struct DaemonReaper(std::path::PathBuf);

impl Drop for DaemonReaper {
    fn drop(&mut self) {
        let pid: i32 = std::fs::read_to_string(&self.0).unwrap_or_default().trim().parse().unwrap_or(0);
        if pid <= 1 {
            return;
        }
        // SAFETY: kill(2) of the process group of the daemon this test started.
        unsafe { libc::kill(-pid, libc::SIGTERM) };
        let t0 = Instant::now();
        // SAFETY: signal 0 only asks whether the pid exists.
        while unsafe { libc::kill(pid, 0) } == 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above; whatever of the group is left.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

/// `ipv6`: a dual-stack rig, nginx listening on `8080` and `[::]:8080`
/// (an AF_INET and an IPv6-only socket on one port, both inherited by the
/// workers), fetched over IPv6 and checked over IPv4.
fn nginx_master_and_workers(daemon: bool, shards: u32, ipv6: bool) {
    let tag = match (daemon, shards, ipv6) {
        (_, _, true) => "ngx6",
        (true, _, _) => "ngxd",
        (false, 1, _) => "ngxm",
        (false, _, _) => "ngxs",
    };
    need_all(&[("nginx", "nginx-light"), ("curl", "curl"), ("wrk", "wrk")]);
    // The workers drop to nobody after joining the listeners (as root): the
    // engine admits nobody for the boards they may open later.
    let rig = if ipv6 {
        Rig::up_ipv6_sharded(tag, outboard_lab::Impairment::default(), shards, &["--allow-user", "nobody"])
    } else {
        Rig::up_sharded(tag, shards, &["--allow-user", "nobody"])
    };
    let www = rig.tmp.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let src = www.join("blob");
    random_file(&src, 4 << 20, 21);
    random_file(&www.join("small"), 4096, 22);
    let conf = nginx_conf(&rig, 8080, 2, daemon);
    if ipv6 {
        let text = std::fs::read_to_string(&conf).unwrap().replace("listen 8080;", "listen 8080; listen [::]:8080;");
        std::fs::write(&conf, text).unwrap();
    }
    let args = ["nginx", "-p", rig.tmp.to_str().unwrap(), "-c", conf.to_str().unwrap()];
    let errlog = || format!("\nnginx error.log:\n{}", std::fs::read_to_string(rig.tmp.join("error.log")).unwrap_or_default());
    let mut fg = None;
    let _reaper = DaemonReaper(rig.tmp.join("nginx.pid"));
    if daemon {
        // The command returns once the daemon runs (its parent exits right after forking).
        let (ok, out, err) = output(rig.shim_cmd(STEP, &args));
        assert!(ok, "nginx did not start as a daemon: {out}\n{err}{}", errlog());
    } else {
        fg = Some(rig.bg("nginx-mw", rig.shim_cmd(STEP * 3, &args)));
    }
    // Wait for the port on Linux's side.
    let host = if ipv6 { format!("[{}]", rig.eip6()) } else { rig.eip() };
    let url = |name: &str| format!("http://{host}:8080/{name}");
    let t0 = Instant::now();
    loop {
        let (ok, _, _) = output(rig.linux_cmd(Duration::from_secs(5), &["curl", "-sS", "--fail", "-o", "/dev/null", "--max-time", "2", &url("small")]));
        if ok {
            break;
        }
        if let Some(bg) = fg.as_mut() {
            bg.assert_running();
        }
        assert!(t0.elapsed() < STEP, "nginx never answered{}", errlog());
        std::thread::sleep(Duration::from_millis(200));
    }
    let dst = rig.tmp.join("got");
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["curl", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &url("blob")]));
    assert!(ok, "curl: {out}\n{err}{}", errlog());
    assert_eq!(sha256(&dst), sha256(&src), "what curl got differs from the file");
    if ipv6 {
        // The AF_INET listener of the same port, inherited the same way.
        let (ok, out, err) = output(rig.linux_cmd(STEP, &["curl", "-4", "-sS", "--fail", "--max-time", "50", "-o", dst.to_str().unwrap(), &format!("http://{}:8080/blob", rig.eip())]));
        assert!(ok, "curl -4: {out}\n{err}{}", errlog());
        assert_eq!(sha256(&dst), sha256(&src), "what curl -4 got differs from the file");
    }
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["wrk", "-t2", "-c32", "-d3s", &url("small")]));
    assert!(ok, "wrk failed: {out}\n{err}{}", errlog());
    let w = tools::wrk(&out, &err).unwrap_or_else(|e| panic!("{e}{}", errlog()));
    let boards = accepting_boards(&rig);
    let master: u64 = std::fs::read_to_string(rig.tmp.join("nginx.pid")).unwrap_or_default().trim().parse().unwrap_or(0);
    assert!(boards.len() >= 2, "both workers accept: boards with accepts {boards:?}{}", errlog());
    assert!(boards.iter().all(|(pid, _)| *pid != master), "the master ({master}) accepted: {boards:?}");
    let st = rig.engine.stat();
    let per_shard: Vec<u64> = st["shards"].as_array().map(|r| r.iter().map(|x| x["rx_frames"].as_u64().unwrap_or(0)).collect()).unwrap_or_default();
    assert_eq!(per_shard.len(), shards as usize, "{}", st["shards"]);
    assert!(per_shard.iter().all(|f| *f > 0), "every shard carried frames: {per_shard:?}");
    eprintln!("nginx master/2 workers (daemon {daemon}, {shards} shards, IPv6 {ipv6}): 4 MiB byte-exact; wrk {} requests, {:.0}/s; accepts per worker {boards:?}; frames per shard {per_shard:?}", w.requests, w.per_s);
    if master > 0 {
        // SAFETY: kill(2) of the nginx master we started.
        unsafe { libc::kill(master as i32, libc::SIGQUIT) };
        let t0 = Instant::now();
        // SAFETY: signal 0 only asks whether the pid exists.
        while unsafe { libc::kill(master as i32, 0) } == 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    drop(fg);
}

#[test]
fn shim_nginx_master_and_two_workers_in_the_foreground() {
    if skip_unless_root("shim_nginx_master_and_two_workers_in_the_foreground") {
        return;
    }
    nginx_master_and_workers(false, 1, false);
}

#[test]
fn shim_nginx_as_a_daemon_with_two_workers() {
    if skip_unless_root("shim_nginx_as_a_daemon_with_two_workers") {
        return;
    }
    nginx_master_and_workers(true, 1, false);
}

#[test]
fn shim_nginx_workers_on_a_two_shard_engine() {
    if skip_unless_root("shim_nginx_workers_on_a_two_shard_engine") {
        return;
    }
    nginx_master_and_workers(false, 2, false);
}

/// nginx's master and two workers on a two-shard engine over IPv6: the
/// workers inherit `listen 8080` and `listen [::]:8080` across fork, Linux's
/// `curl -6` and `wrk` over IPv6 and `curl -4` are served, every shard
/// carries frames.
#[test]
fn shim_nginx_workers_on_a_two_shard_engine_over_ipv6() {
    if skip_unless_root("shim_nginx_workers_on_a_two_shard_engine_over_ipv6") {
        return;
    }
    nginx_master_and_workers(false, 2, true);
}

/// A Python echo server: `prefork` (the parent listens and forks two
/// accepting children) or `reuseport` (this process binds with SO_REUSEPORT
/// and accepts). Each connection: one line echoed, then closed.
const PY_SERVER: &str = r#"
import os, socket, sys
mode, port = sys.argv[1], int(sys.argv[2])
def serve(ls):
    while True:
        c, _ = ls.accept()
        data = b""
        while not data.endswith(b"\n"):
            d = c.recv(4096)
            if not d:
                break
            data += d
        c.sendall(str(os.getpid()).encode() + b" " + data)
        c.close()
ls = socket.socket()
if mode == "reuseport":
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
ls.bind(("0.0.0.0", port))
ls.listen(64)
print("ready", flush=True)
if mode == "prefork":
    kids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            serve(ls)
            os._exit(0)
        kids.append(pid)
    for k in kids:
        os.waitpid(k, 0)
else:
    serve(ls)
"#;

/// A Linux client: `n` connections, each sends a line and reads the echo;
/// prints the pids that answered, one per line.
const PY_CLIENT: &str = r#"
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    s = socket.create_connection((host, port), timeout=10)
    line = b"hello %d\n" % i
    s.sendall(line)
    got = b""
    while not got.endswith(b"\n"):
        d = s.recv(4096)
        if not d:
            break
        got += d
    pid, _, echo = got.partition(b" ")
    assert echo == line, (echo, line)
    print(pid.decode())
    s.close()
"#;

/// Runs the client for `n` connections; returns how many each pid served.
fn echo_clients(rig: &Rig, port: u16, n: usize) -> std::collections::BTreeMap<String, usize> {
    let (ok, out, err) = output(rig.linux_cmd(STEP, &[python3(), "-c", PY_CLIENT, &rig.eip(), &port.to_string(), &n.to_string()]));
    assert!(ok, "client: {out}\n{err}");
    let mut by_pid = std::collections::BTreeMap::new();
    for l in out.lines() {
        *by_pid.entry(l.trim().to_string()).or_insert(0) += 1;
    }
    assert_eq!(by_pid.values().sum::<usize>(), n, "{out}");
    by_pid
}

#[test]
fn shim_preforked_python_children_accept_on_the_parents_listener() {
    if skip_unless_root("shim_preforked_python_children_accept_on_the_parents_listener") {
        return;
    }
    let rig = Rig::up("pyfork");
    let mut srv = rig.bg("prefork", rig.shim_cmd(STEP * 2, &[python3(), "-c", PY_SERVER, "prefork", "9100"]));
    rig.wait_tcp(&rig.eip(), 9100, &mut srv);
    let by_pid = echo_clients(&rig, 9100, 40);
    assert_eq!(by_pid.len(), 2, "both children served (round robin): {by_pid:?}");
    assert!(by_pid.values().all(|n| *n >= 10), "{by_pid:?}");
    srv.assert_running();
}

#[test]
fn shim_reuseport_processes_share_a_port() {
    if skip_unless_root("shim_reuseport_processes_share_a_port") {
        return;
    }
    let rig = Rig::up("pyrp");
    let mut a = rig.bg("reuse-a", rig.shim_cmd(STEP * 2, &[python3(), "-c", PY_SERVER, "reuseport", "9101"]));
    rig.wait_tcp(&rig.eip(), 9101, &mut a);
    let mut b = rig.bg("reuse-b", rig.shim_cmd(STEP * 2, &[python3(), "-c", PY_SERVER, "reuseport", "9101"]));
    b.wait_log("ready");
    let by_pid = echo_clients(&rig, 9101, 40);
    assert_eq!(by_pid.len(), 2, "both processes served: {by_pid:?}");
    assert!(by_pid.values().all(|n| *n >= 10), "{by_pid:?}");
    a.assert_running();
    b.assert_running();
}

#[test]
fn shim_redis_bgsave_under_load_leaves_the_server_working() {
    if skip_unless_root("shim_redis_bgsave_under_load_leaves_the_server_working") {
        return;
    }
    need_all(&[("redis-server", "redis-server"), ("redis-benchmark", "redis-tools"), ("redis-cli", "redis-tools")]);
    let rig = Rig::up("rbgs");
    let dir = rig.tmp.to_str().unwrap().to_string();
    let mut srv = rig.bg(
        "redis",
        rig.shim_cmd(STEP * 3, &["redis-server", "--port", "6379", "--save", "", "--appendonly", "no", "--dir", &dir, "--protected-mode", "no"]),
    );
    rig.wait_tcp(&rig.eip(), 6379, &mut srv);
    let eip = rig.eip();
    // Some data to save, from Linux.
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["redis-benchmark", "-h", &eip, "-q", "-n", "20000", "-r", "10000", "-t", "set"]));
    assert!(ok, "redis-benchmark: {out}\n{err}");
    // A benchmark in the background while BGSAVE forks.
    let bench = rig.bg("bench", rig.linux_cmd(STEP, &["redis-benchmark", "-h", &eip, "-q", "-n", "100000", "-c", "8", "-t", "get,set"]));
    std::thread::sleep(Duration::from_millis(300));
    let (ok, out, err) = output(rig.linux_cmd(STEP, &["redis-cli", "-h", &eip, "BGSAVE"]));
    assert!(ok && out.contains("Background saving started"), "BGSAVE: {out}\n{err}");
    let t0 = Instant::now();
    loop {
        let (_, info, _) = output(rig.linux_cmd(STEP, &["redis-cli", "-h", &eip, "INFO", "persistence"]));
        if info.contains("rdb_bgsave_in_progress:0") && info.contains("rdb_last_bgsave_status:ok") {
            break;
        }
        assert!(t0.elapsed() < STEP, "BGSAVE did not finish: {info}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(rig.tmp.join("dump.rdb").exists(), "no dump.rdb written");
    let (ok, log) = bench.wait(STEP);
    assert!(ok, "the benchmark during BGSAVE failed: {log}");
    let (ok, out, _) = output(rig.linux_cmd(STEP, &["redis-cli", "-h", &eip, "PING"]));
    assert!(ok && out.contains("PONG"), "{out}");
    srv.assert_running();
}

/// `socketserver.ForkingTCPServer`: the parent accepts, forks a child per
/// connection and closes its copy; the child echoes what it reads (its pid
/// first) until end of stream.
const PY_FORKING: &str = r#"
import os, socketserver, sys
class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"%d\n" % os.getpid())
        while True:
            d = self.request.recv(65536)
            if not d:
                break
            self.request.sendall(d)
socketserver.ForkingTCPServer.allow_reuse_address = True
with socketserver.ForkingTCPServer(("0.0.0.0", int(sys.argv[1])), Echo) as srv:
    print("ready", flush=True)
    srv.serve_forever()
"#;

/// Linux's client: `n` connections one after another, each writes `size`
/// bytes at once (so they are queued before the child takes the stream
/// over), half-closes and checks the echo; prints the serving pid per line.
const PY_FORKING_CLIENT: &str = r#"
import hashlib, os, socket, sys
host, port, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for i in range(n):
    s = socket.create_connection((host, port), timeout=20)
    data = hashlib.sha256(b"%d" % i).digest() * (size // 32)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    pid, _, echo = got.partition(b"\n")
    assert echo == data, ("echo differs", i, len(echo), len(data))
    print(pid.decode(), flush=True)
    s.close()
"#;

#[test]
fn shim_forking_tcp_server_children_take_over_the_accepted_connections() {
    if skip_unless_root("shim_forking_tcp_server_children_take_over_the_accepted_connections") {
        return;
    }
    let rig = Rig::up("pyfts");
    let mut srv = rig.bg("forking", rig.shim_cmd(STEP * 2, &[python3(), "-c", PY_FORKING, "9102"]));
    rig.wait_tcp(&rig.eip(), 9102, &mut srv);
    let (ok, out, err) = output(rig.linux_cmd(STEP, &[python3(), "-c", PY_FORKING_CLIENT, &rig.eip(), "9102", "12", "262144"]));
    assert!(ok, "client: {out}\n{err}\n{}", srv.text());
    let pids: std::collections::BTreeSet<&str> = out.lines().map(str::trim).collect();
    assert_eq!(out.lines().count(), 12, "{out}");
    assert_eq!(pids.len(), 12, "a child per connection: {pids:?}");
    let stat = rig.engine.stat();
    eprintln!("ForkingTCPServer: 12 connections of 256 KiB echoed byte-exact by 12 children; boards now {}", stat["boards"]);
    srv.assert_running();
}

/// A server that forks helpers holding its listener (PostgreSQL's
/// postmaster and its background processes, nginx's master and workers),
/// stopped: the helpers exit, then the parent. No SO_REUSEADDR.
const PY_FORK_AND_STOP: &str = r#"
import os, socket, sys
ls = socket.socket()
ls.bind(("0.0.0.0", int(sys.argv[1])))
ls.listen(16)
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("stopped", flush=True)
"#;

/// Restarting a server that forked: on Linux the port is free the moment
/// its last holder closes it, so `systemctl restart` (stop, then start at
/// once) binds it again. Here a board that dies after forking leaves its
/// listeners lingering for a child still on its way to join them; once
/// every child it forked with the listener has attached (`CHILD_OF`), none
/// is, and the port must be free at once: five stop/start cycles back to
/// back, then a server that serves on it. A child's board counts only the
/// child's own forks (it counted its parent's too, and when the parent's
/// close reached the engine before its children's deaths, the last child
/// out left the listener lingering). Before: one start in two to eight
/// failed with EADDRINUSE, for two seconds after the stop.
#[test]
fn shim_a_server_that_forked_restarts_on_its_port_at_once() {
    if skip_unless_root("shim_a_server_that_forked_restarts_on_its_port_at_once") {
        return;
    }
    let rig = Rig::up("pyrestart");
    for cycle in 0..5 {
        let t0 = Instant::now();
        let (ok, out, err) = output(rig.shim_cmd(STEP, &[python3(), "-c", PY_FORK_AND_STOP, "9103"]));
        assert!(ok && out.trim() == "stopped", "start {cycle} after a stop: {out}\n{err}");
        eprintln!("cycle {cycle}: bound, forked two, stopped in {:?}", t0.elapsed());
    }
    let mut srv = rig.bg("prefork-after-restarts", rig.shim_cmd(STEP * 2, &[python3(), "-c", PY_SERVER, "prefork", "9103"]));
    rig.wait_tcp(&rig.eip(), 9103, &mut srv);
    let by_pid = echo_clients(&rig, 9103, 8);
    assert_eq!(by_pid.len(), 2, "{by_pid:?}");
    let stat = rig.engine.stat();
    let l = &stat["host"]["listeners"];
    assert_eq!(l["lingered"].as_u64(), Some(0), "no listener waited for a child that had already attached: {l}");
    srv.assert_running();
}

/// A parent listens, then (once `go` exists) forks a child that watches
/// the inherited listener with poll and epoll for 1.5 s each and prints how
/// many waits came back with events.
const PY_FORK_WATCHER: &str = r#"
import os, select, socket, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
ls = socket.socket()
ls.bind(("0.0.0.0", port))
ls.listen(16)
print("listening", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
pid = os.fork()
if pid == 0:
    p = select.poll()
    p.register(ls, select.POLLIN)
    woke, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 1.5 and woke < 1000:
        if p.poll(100):
            woke += 1
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    ewoke, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 1.5 and ewoke < 1000:
        if ep.poll(0.1):
            ewoke += 1
    print("woke", woke, ewoke, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"#;

/// A child forked while the engine is down cannot join the listener it
/// inherits. Its copy must then stay quiet, as every engine socket does while
/// the engine is gone, not poll ready for ever: nginx's workers forked so
/// (a reload during an engine restart) took it as a connection, failed
/// `accept` with EOPNOTSUPP, logged an alert and looked again, a CPU each,
/// filling the disk with their error log (47 GB in 20 minutes).
#[test]
fn shim_a_listener_a_child_could_not_join_stays_quiet() {
    if skip_unless_root("shim_a_listener_a_child_could_not_join_stays_quiet") {
        return;
    }
    let mut rig = Rig::up("pyunjoined");
    let go = rig.tmp.join("go");
    let mut srv = rig.bg("fork-watcher", rig.shim_cmd(STEP, &[python3(), "-c", PY_FORK_WATCHER, "9104", go.to_str().unwrap()]));
    srv.wait_log("listening");
    rig.kill_engine();
    std::fs::write(&go, b"").unwrap();
    let (ok, text) = srv.wait(STEP);
    let line = text.lines().find(|l| l.starts_with("woke")).unwrap_or_default();
    assert!(ok && line.trim() == "woke 0 0", "poll and epoll on the listener the child could not join: {text}");
}

/// PostgreSQL as its users run it: the postmaster as the `postgres` user
/// (it refuses root; `setpriv` drops to it, and the engine admits it),
/// forking a backend per connection (each takes its connection over from
/// the postmaster, which accepted it) and its background processes, all on
/// one engine. From Linux's side: pgbench's select-only load, then one new
/// connection per transaction (a fork each), then a stop and an immediate
/// start on the same port (as `systemctl restart postgresql` does).
#[test]
fn shim_postgres_forks_a_backend_per_connection_and_restarts_on_its_port() {
    if skip_unless_root("shim_postgres_forks_a_backend_per_connection_and_restarts_on_its_port") {
        return;
    }
    need_all(&[("pgbench", "postgresql"), ("psql", "postgresql-client"), ("setpriv", "util-linux")]);
    let bin = tools::postgres_bin_dir().expect("no /usr/lib/postgresql/*/bin/postgres (apt-get install postgresql; scripts/test.sh installs it)");
    let rig = Rig::up_engine_with("pgsql", &["--allow-user", "postgres"]);
    // The postgres user reaches its data directory.
    let _ = std::process::Command::new("chmod").args(["755"]).arg(&rig.tmp).status();
    let cmd = must(tools::postgres_cluster(&bin, &rig.tmp.join("pgdata"), 5432, &format!("{}/32", rig.lip())));
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let start = |what: &str| {
        let mut srv = rig.bg(what, rig.shim_cmd(STEP * 3, &cmd));
        rig.wait_tcp(&rig.eip(), 5432, &mut srv);
        srv
    };
    let eip = rig.eip();
    let pgbench = |args: &[&str]| {
        let mut a = vec!["pgbench", "-h", eip.as_str(), "-U", "postgres"];
        a.extend(args);
        a.push("postgres");
        let (ok, out, err) = output(rig.linux_cmd(STEP, &a));
        assert!(ok, "pgbench {args:?}: {out}\n{err}");
        if args.contains(&"-i") { 0.0 } else { must(tools::pgbench(&out, &err)) }
    };
    let psql = |sql: &str| {
        let (ok, out, err) = output(rig.linux_cmd(STEP, &["psql", "-h", &eip, "-U", "postgres", "-Atc", sql]));
        assert!(ok, "psql {sql}: {out}\n{err}");
        out.trim().to_string()
    };
    let mut srv = start("postgres");
    pgbench(&["-i", "-s", "1", "-q"]);
    let select_only = pgbench(&["-S", "-c", "4", "-j", "2", "-T", "2"]);
    let per_connection = pgbench(&["-S", "-C", "-c", "2", "-j", "2", "-t", "40"]);
    assert_eq!(psql("select inet_server_addr()"), eip, "served by the engine's address");
    assert_eq!(psql("select count(*) from pgbench_accounts"), "100000");
    let stat = rig.engine.stat();
    let attached = stat["host"]["attached"].as_u64().unwrap_or(0);
    let adopted = stat["host"]["handover"]["adopted"].as_u64().unwrap_or(0);
    assert!(attached >= 80, "a board per backend (80 connections and more): {attached} attached");
    assert!(adopted >= 80, "each backend took its connection over from the postmaster: {adopted} adopted; {}", stat["host"]);
    // A stop (SIGINT: fast shutdown; the backends and helpers exit, then
    // the postmaster), and a start at once on the same port.
    let pid = srv.program_pid();
    // SAFETY: kill(2) of the postmaster this test started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let (_, log) = srv.wait(STEP);
    let mut again = start("postgres-restarted");
    assert_eq!(psql("select count(*) from pgbench_accounts"), "100000", "after the restart; first run's log:\n{log}");
    eprintln!("postgres under the shim: select-only {select_only:.0} tps; a connection per transaction {per_connection:.0} tps; {attached} boards attached, {adopted} connections adopted; restarted at once on its port");
    again.assert_running();
}

#[test]
fn engine_killed_under_nginx_master_and_workers_they_stay_quiet_then_serve_again() {
    if skip_unless_root("engine_killed_under_nginx_master_and_workers_they_stay_quiet_then_serve_again") {
        return;
    }
    need_all(&[("nginx", "nginx-light"), ("curl", "curl")]);
    let mut rig = Rig::up_engine_with("ngxk", &["--allow-user", "nobody"]);
    let www = rig.tmp.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("small"), "served\n").unwrap();
    let conf = nginx_conf(&rig, 8080, 2, false);
    let args = ["nginx", "-p", rig.tmp.to_str().unwrap(), "-c", conf.to_str().unwrap()];
    let mut nginx = rig.bg("nginx-kill", rig.shim_cmd(STEP * 3, &args));
    rig.wait_tcp(&rig.eip(), 8080, &mut nginx);
    let eip = rig.eip();
    let probe = |rig: &Rig| {
        let url = format!("http://{eip}:8080/small");
        let (ok, out, _) = output(rig.linux_cmd(Duration::from_secs(10), &["curl", "-sS", "--max-time", "3", &url]));
        ok && out.trim() == "served"
    };
    assert!(probe(&rig), "nginx did not serve before the engine was killed");
    let master = nginx.program_pid();
    let workers = support::children_of(master);
    assert_eq!(workers.len(), 2, "nginx's master {master} has two workers: {workers:?}");
    let all: Vec<u32> = std::iter::once(master).chain(workers.iter().copied()).collect();
    let error_log = rig.tmp.join("error.log");
    let lines = || std::fs::read_to_string(&error_log).unwrap_or_default().lines().count();
    let before = lines();

    rig.kill_engine();
    std::thread::sleep(Duration::from_secs(1));
    let cpu = |pid: u32| support::proc_stat(std::path::Path::new(&format!("/proc/{pid}/stat"))).map(|(_, t)| t);
    let cpu0: Vec<Option<u64>> = all.iter().map(|p| cpu(*p)).collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let cpu1: Vec<Option<u64>> = all.iter().map(|p| cpu(*p)).collect();
    let wall = t0.elapsed().as_secs_f64();
    nginx.assert_running();
    for (i, pid) in all.iter().enumerate() {
        let (Some(a), Some(b)) = (cpu0[i], cpu1[i]) else { panic!("nginx process {pid} is gone") };
        let share = (b - a) as f64 / support::clk_tck() / wall;
        eprintln!("nginx {} {pid} after the engine died: {:.2} % CPU", if i == 0 { "master" } else { "worker" }, 100.0 * share);
        assert!(share <= 0.05, "nginx process {pid} used {:.2} % CPU after the engine died (limit 5 %)", 100.0 * share);
    }
    let new_lines = lines() - before;
    assert!(new_lines <= 6, "nginx wrote {new_lines} log lines after the engine died (a few at most)");

    let before_restart = lines();
    rig.restart_engine();
    let t0 = Instant::now();
    while !probe(&rig) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "nginx does not serve on the restarted engine; error.log:\n{}",
            std::fs::read_to_string(&error_log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("nginx (master and 2 workers) serves again {:.2} s after the restart", t0.elapsed().as_secs_f64());
    // Both workers take connections again (they re-created the shared listener).
    for _ in 0..40 {
        assert!(probe(&rig));
    }
    let boards = accepting_boards(&rig);
    assert!(boards.len() >= 2, "both workers accept on the restarted engine: {boards:?}");
    // No process spins on a socket that fails at once (the master's listener, which it never
    // accepted on, is left to the workers: it must not take the port first).
    let after = lines() - before_restart;
    assert!(after <= 8, "nginx wrote {after} log lines around the restart:\n{}", std::fs::read_to_string(&error_log).unwrap_or_default());
    assert_eq!(nginx.program_pid(), master, "nginx was not restarted");
    assert_eq!(support::children_of(master), workers, "the workers are the same processes");
}

/// A server that re-executes itself with its listening socket and an
/// accepted connection inheritable (the way servers upgrade their binary
/// or hand sockets to a worker program).
const PY_EXEC: &str = r#"
import os, socket, sys
if sys.argv[1] == "parent":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", int(sys.argv[2])))
    ls.listen(8)
    print("ready %d" % os.getpid(), flush=True)
    c, a = ls.accept()
    os.set_inheritable(ls.fileno(), True)
    os.set_inheritable(c.fileno(), True)
    os.execv(sys.executable, [sys.executable, sys.argv[0], "child", str(ls.fileno()), str(c.fileno())])
else:
    ls = socket.socket(fileno=int(sys.argv[2]))
    c = socket.socket(fileno=int(sys.argv[3]))
    got = b""
    while not got.endswith(b"\n"):
        d = c.recv(100)
        if not d:
            break
        got += d
    c.sendall(b"after-exec %d " % os.getpid() + got)
    c.close()
    c2, _ = ls.accept()
    d = c2.recv(100)
    c2.sendall(b"second " + d)
    c2.close()
    print("child-done", flush=True)
"#;

const PY_EXEC_CLIENT: &str = r#"
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
def talk(msg):
    s = socket.create_connection((host, port), timeout=20)
    s.sendall(msg)
    got = b""
    while True:
        d = s.recv(100)
        if not d:
            break
        got += d
    s.close()
    return got.decode()
print(talk(b"before-exec\n").strip(), flush=True)
print(talk(b"hello").strip(), flush=True)
"#;

#[test]
fn shim_sockets_survive_exec_into_a_new_image() {
    if skip_unless_root("shim_sockets_survive_exec_into_a_new_image") {
        return;
    }
    let rig = Rig::up("pyexec");
    let script = rig.tmp.join("exec_server.py");
    std::fs::write(&script, PY_EXEC).unwrap();
    let mut srv = rig.bg("exec", rig.shim_cmd(STEP * 2, &[python3(), script.to_str().unwrap(), "parent", "9104"]));
    // Not wait_tcp: its probe connection would be the one the server accepts and carries.
    srv.wait_log("ready");
    let pid = srv.program_pid();
    let (ok, out, err) = output(rig.linux_cmd(STEP, &[python3(), "-c", PY_EXEC_CLIENT, &rig.eip(), "9104"]));
    assert!(ok, "client: {out}\n{err}\nserver: {}", srv.text());
    let lines: Vec<&str> = out.lines().collect();
    // The connection accepted before the exec, with the bytes the client had sent, is served by the new image.
    assert_eq!(lines.first().copied(), Some(format!("after-exec {pid} before-exec").as_str()), "{out}\nserver: {}", srv.text());
    // The listening socket works in the new image.
    assert_eq!(lines.get(1).copied(), Some("second hello"), "{out}");
    srv.wait_log("child-done");
}
