#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! The native message protocol between engine processes (docs/MESSAGES.md):
//! a server `outboard engine --messages` (mailboxes `echo` = 1, `sink` = 2)
//! and `outboard msg`, a client engine of its own, each run verified.
//!
//! - on the fabric (no root), with faults on both sides' sends: 10,000 calls
//!   to `echo` by name, then 64 MiB of reliable messages to `sink` by
//!   number; the server's `stat` shows every request executed exactly once;
//! - in the lab (root; skips loudly otherwise), through the relay's loss,
//!   duplication, reordering and corruption, the server on the engine side
//!   (af_packet) and the client on Linux's interface (af_packet beside the
//!   kernel's address): 10,000 calls, then `OUTBOARD_MSG_LAB_BYTES` (default
//!   1 GiB, about a minute on 2 cores) to `sink`;
//! - a server SIGKILLed mid-run: the client's outstanding call times out
//!   (5 s, the default call timeout) and `outboard msg` exits 1 saying so.

mod support;

use outboard_lab::{Impairment, LabConfig};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::engine::{start_engine, stat_in, ChildGuard, EngineProc, GRACE};
use support::netns::{lab, lab_name, ns_command, skip_unless_root};
use support::{output_within, run_dir, size_from_env, test_dir, OUTBOARD};

/// How long an engine may take to answer `stat` after it starts.
const UP: Duration = Duration::from_secs(10);
/// Calls to `echo` per run.
const CALLS: u64 = 10_000;
/// `outboard msg --send`'s message size when `--size` is not given.
const SEND_MESSAGE: u64 = 64 << 10;
/// Bytes `sink` gets on the fabric.
const FABRIC_BYTES: u64 = 64 << 20;
/// `outboard_msg::Config::default().call_timeout`, which `outboard msg` uses.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The fabric's faults on one engine's sends (`seed` differs per engine).
fn faults(seed: &str) -> Vec<&str> {
    vec!["--loss", "2%", "--reorder", "5%", "--duplicate", "1%", "--corrupt", "0.5%", "--seed", seed]
}

/// `outboard msg --json --log-level warn --name NAME ARGS` on fabric `link`
/// in run directory `dir`.
fn msg_on_fabric(dir: &Path, link: &str, name: &str, addr: &str, args: &[&str]) -> Command {
    let mut c = Command::new(OUTBOARD);
    c.args(["msg", "--json", "--log-level", "warn", "--name", name, "--link", link, "--addr", addr])
        .args(args)
        .env("OUTBOARD_RUN_DIR", dir);
    c
}

/// Runs an `outboard msg` command (at most `limit`); it must exit 0 with a
/// verified report, which is returned with the wall time it took.
fn verified_run(what: &str, c: Command, limit: Duration) -> (Value, f64) {
    let t0 = Instant::now();
    let (ok, out, err) = output_within(c, limit, GRACE);
    let secs = t0.elapsed().as_secs_f64();
    let report = out
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| panic!("{what}: no JSON report (exit ok={ok}, {secs:.1} s)\nstdout:\n{out}\nstderr:\n{err}"));
    assert!(
        ok && report["ok"] == true && report["verified"] == true && report["state"] == "done" && report["error"].is_null(),
        "{what}: not verified (exit ok={ok}, {secs:.1} s): {report}\nstderr:\n{err}"
    );
    (report, secs)
}

/// The mailbox named `name` in a `stat` snapshot's `messages.mailboxes`.
fn mailbox<'a>(stat: &'a Value, name: &str) -> &'a Value {
    stat["messages"]["mailboxes"]
        .as_array()
        .unwrap_or_else(|| panic!("stat has no messages.mailboxes: {stat}"))
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no mailbox {name:?} in {}", stat["messages"]["mailboxes"]))
}

fn u(v: &Value, path: &str) -> u64 {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    cur.as_u64().unwrap_or_else(|| panic!("{path} is not a count in {v}"))
}

/// The server's counters after `calls` echo calls and one `sink` stream of
/// `bytes` (between a reset call and a digest call): each request executed exactly once.
fn assert_executed_once(stat: &Value, calls: u64, bytes: u64) {
    let m = &stat["messages"];
    let echo = mailbox(stat, "echo");
    let sink = mailbox(stat, "sink");
    eprintln!(
        "server: echo {} sink {}; requests_executed {} duplicate_requests {} replies_resent {} lookups_answered {} drop_duplicate {} drop_malformed {} acks_sent {}",
        echo["stats"], sink["stats"], m["stats"]["requests_executed"], m["stats"]["duplicate_requests"], m["stats"]["replies_resent"],
        m["stats"]["lookups_answered"], m["stats"]["drop_duplicate"], m["stats"]["drop_malformed"], m["stats"]["acks_sent"]
    );
    assert_eq!(u(echo, "number"), 1, "{echo}");
    assert_eq!(u(sink, "number"), 2, "{sink}");
    // Each call reached `echo` once, no more (the brief's ">= calls", held exactly).
    assert!(u(echo, "stats.requests") >= calls, "echo took fewer requests than the calls answered: {echo}");
    assert_eq!(u(echo, "stats.requests"), calls, "a call ran twice at echo: {echo}");
    assert_eq!(u(m, "echo_calls"), calls, "{m}");
    // The sink: every message once, and exactly two requests (the reset call before, the digest call after).
    assert_eq!(u(sink, "stats.requests"), 2, "the reset and digest calls ran other than once each: {sink}");
    assert_eq!(u(sink, "stats.messages"), bytes.div_ceil(SEND_MESSAGE), "{sink}");
    assert_eq!(u(m, "sink_bytes"), bytes, "{m}");
    // The name lookup is answered by the control mailbox: not a request.
    assert!(u(m, "stats.lookups_answered") >= 1, "the lookup of `echo` was not answered by the server: {m}");
    // At most once: requests executed = calls made (the echo calls + the sink's reset and digest calls).
    assert_eq!(u(m, "stats.requests_executed"), calls + 2, "requests executed other than once per call: {}", m["stats"]);
}

/// Fabric, no root: faults on both ends' sends; 10,000 calls to `echo` by
/// name, then 64 MiB of reliable messages to mailbox 2 (`sink`) by number,
/// each verified; the server executed every request exactly once.
#[test]
fn fabric_calls_and_reliable_messages_through_faults_are_verified_and_executed_once() {
    let dir = test_dir("ob-msg-test", "fab");
    let link = format!("fabric:mf{}", std::process::id());
    let srv_args = [&["--link", &link, "--addr", "10.9.0.1/24", "--messages", "--services", "none"][..], &faults("71")].concat();
    let _srv = start_engine(&dir, "mf-srv", &srv_args, UP);

    let calls = CALLS.to_string();
    let args = [&["--to", "10.9.0.1:7373/echo", "--calls", &calls, "--timeout-s", "120"][..], &faults("72")].concat();
    let (r, secs) = verified_run("calls to echo", msg_on_fabric(&dir, &link, "mf-c1", "10.9.0.2/24", &args), Duration::from_secs(150));
    eprintln!(
        "fabric (2% loss, 5% reorder, 1% dup, 0.5% corrupt each way): {CALLS} calls to echo in {secs:.2} s ({:.0} calls/s), p50 {:.0} us p99 {:.0} us max {:.0} us",
        r["rate"].as_f64().unwrap_or(0.0), r["p50_us"].as_f64().unwrap_or(0.0), r["p99_us"].as_f64().unwrap_or(0.0), r["max_us"].as_f64().unwrap_or(0.0)
    );
    assert_eq!(r["done"].as_u64(), Some(CALLS), "{r}");
    assert_eq!(r["target"], "10.9.0.1:7373/echo", "{r}");

    let bytes = FABRIC_BYTES.to_string();
    let args = [&["--to", "10.9.0.1:7373/2", "--send", &bytes, "--timeout-s", "120"][..], &faults("73")].concat();
    let (r, secs) = verified_run("messages to sink", msg_on_fabric(&dir, &link, "mf-c2", "10.9.0.3/24", &args), Duration::from_secs(150));
    eprintln!(
        "fabric: {} MiB of reliable messages to sink (2) in {secs:.2} s ({:.0} Mbit/s by the report)",
        FABRIC_BYTES >> 20,
        r["rate"].as_f64().unwrap_or(0.0) * 8.0 / 1e6
    );
    assert_eq!(r["bytes"].as_u64(), Some(FABRIC_BYTES), "{r}");
    assert_eq!(r["done"].as_u64(), Some(FABRIC_BYTES.div_ceil(SEND_MESSAGE)), "every message acknowledged: {r}");

    let stat = stat_in(&dir, "mf-srv").expect("the server still answers stat");
    assert_executed_once(&stat, CALLS, FABRIC_BYTES);
    let dups = u(&stat["messages"], "stats.duplicate_requests") + u(&stat["messages"], "stats.replies_resent");
    assert!(dups > 0, "the faults never made a client re-send a request: {}", stat["messages"]["stats"]);
}

/// Lab, root: the relay's loss, duplication, reordering and corruption
/// between a server on the engine side and `outboard msg` on Linux's
/// interface; 10,000 calls, then `OUTBOARD_MSG_LAB_BYTES` (default 1 GiB)
/// of reliable messages to `sink`, each verified.
#[test]
fn lab_calls_and_reliable_messages_through_the_relays_faults_are_verified() {
    if skip_unless_root("lab_calls_and_reliable_messages_through_the_relays_faults_are_verified") {
        return;
    }
    let bytes = size_from_env("OUTBOARD_MSG_LAB_BYTES", 1 << 30);
    let name = lab_name("msgl");
    let mut cfg = LabConfig::new(&name);
    cfg.impairment = Impairment { loss: 0.01, duplicate: 0.01, reorder: 0.05, reorder_delay_ms: 2.0, corrupt: 0.001, ..Impairment::default() };
    cfg.seed = 7373;
    let lab = lab(&cfg);
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &["--messages", "--services", "none"]);
    let to = |mb: &str| format!("{}:7373/{mb}", lab.engine_addr());
    let link = format!("af_packet:{}", lab.linux_iface());
    let client = |tag: &str, limit: Duration, args: &[&str]| {
        let cname = format!("{name}-{tag}");
        let timeout = limit.as_secs().to_string();
        let mut c = ns_command(lab.linux_ns(), limit + Duration::from_secs(10), 5, &[OUTBOARD, "msg", "--json", "--log-level", "warn"]);
        c.args(["--name", &cname, "--link", &link, "--addr", "10.77.0.3/24", "--allow-kernel-address", "--timeout-s", &timeout])
            .args(args)
            .env("OUTBOARD_RUN_DIR", run_dir());
        c
    };

    let limit = Duration::from_secs(120);
    let (r, secs) = verified_run("lab calls to echo", client("c1", limit, &["--to", &to("echo"), "--calls", &CALLS.to_string()]), limit + Duration::from_secs(20));
    eprintln!(
        "lab (relay seed {}: 1% loss, 1% dup, 5% reorder 2 ms, 0.1% corrupt): {CALLS} calls to echo in {secs:.2} s ({:.0} calls/s), p50 {:.0} us p99 {:.0} us max {:.0} us",
        cfg.seed,
        r["rate"].as_f64().unwrap_or(0.0), r["p50_us"].as_f64().unwrap_or(0.0), r["p99_us"].as_f64().unwrap_or(0.0), r["max_us"].as_f64().unwrap_or(0.0)
    );
    assert_eq!(r["done"].as_u64(), Some(CALLS), "{r}");

    // Generous: 60 s, plus 1 s per 4 MiB (1 Mbit/s would be far slower than the engine ever is).
    let limit = Duration::from_secs(60 + bytes / (4 << 20));
    let (r, secs) = verified_run(
        "lab messages to sink",
        client("c2", limit, &["--to", &to("sink"), "--send", &bytes.to_string()]),
        limit + Duration::from_secs(20),
    );
    let mbit = r["rate"].as_f64().unwrap_or(0.0) * 8.0 / 1e6;
    eprintln!("lab: {} MiB of reliable messages to sink in {secs:.1} s wall ({mbit:.0} Mbit/s by the report, {:.1} s)", bytes >> 20, r["elapsed_s"].as_f64().unwrap_or(0.0));
    assert_eq!(r["bytes"].as_u64(), Some(bytes), "{r}");
    assert_eq!(r["done"].as_u64(), Some(bytes.div_ceil(SEND_MESSAGE)), "{r}");

    let stat = e.stat();
    assert_executed_once(&stat, CALLS, bytes);
    drop(e);
    let down = lab.teardown().expect("lab down");
    let report = down.relay_report.expect("the relay ran and reported");
    let sum = |k: &str| u(&report["a_to_b"]["stats"], k) + u(&report["b_to_a"]["stats"], k);
    eprintln!("relay: dropped {} duplicated {} reordered {} corrupted {}", sum("dropped"), sum("duplicated"), sum("reordered"), sum("corrupted"));
    for k in ["dropped", "duplicated", "reordered", "corrupted"] {
        assert!(sum(k) > 0, "the relay never {k} a frame: {report}");
    }
}

/// Removes fabric NAME's file on drop (`$OUTBOARD_FABRIC_DIR` or /dev/shm),
/// which an engine killed with SIGKILL leaves behind.
struct FabricFile(String);

impl Drop for FabricFile {
    fn drop(&mut self) {
        let dir = std::env::var_os("OUTBOARD_FABRIC_DIR").unwrap_or_else(|| "/dev/shm".into());
        let _ = std::fs::remove_file(Path::new(&dir).join(format!("outboard-fabric-{}", self.0)));
    }
}

/// A server SIGKILLed about 1 s into a long run of calls: the call in flight
/// times out after the call timeout (5 s) and `outboard msg` exits 1 with a
/// report that says "timed out".
#[test]
fn a_server_killed_mid_run_fails_the_client_with_a_timeout() {
    let dir = test_dir("ob-msg-test", "kill");
    let fabric = format!("mk{}", std::process::id());
    let link = format!("fabric:{fabric}");
    // A SIGKILLed engine leaves the fabric's file behind (see link/fabric): removed last.
    let _file = FabricFile(fabric);
    let mut srv = start_engine(&dir, "mk-srv", &["--link", &link, "--addr", "10.9.0.1/24", "--messages", "--services", "none"], UP);
    // One call at a time: a million of them take far longer than the second before the kill.
    let mut c = msg_on_fabric(&dir, &link, "mk-cli", "10.9.0.2/24", &["--to", "10.9.0.1:7373/echo", "--calls", "1000000", "--outstanding", "1", "--timeout-s", "120"]);
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let cli = ChildGuard::new(c.spawn().expect("spawn outboard msg"), GRACE);
    // Calls are being answered before the server dies.
    let answered = |s: &Option<Value>| s.as_ref().is_some_and(|s| s["messages"]["echo_calls"].as_u64().unwrap_or(0) > 0);
    let (last, took) = support::engine::poll(Duration::from_secs(10), Duration::from_millis(50), || stat_in(&dir, "mk-srv"), answered);
    assert!(took.is_some(), "the server answered no call within 10 s: {last:?}");
    if let Some(rest) = Duration::from_secs(1).checked_sub(started.elapsed()) {
        std::thread::sleep(rest);
    }
    let before = stat_in(&dir, "mk-srv").map(|s| s["messages"]["echo_calls"].clone());
    srv.child.kill().expect("SIGKILL the server");
    let killed = Instant::now();
    let _ = srv.child.wait();
    let margin = Duration::from_secs(3);
    let (status, out, err) = cli.finish(CALL_TIMEOUT + margin);
    let after = killed.elapsed();
    let status = status.unwrap_or_else(|| panic!("outboard msg still runs {after:?} after the server was killed"));
    let report = out
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| panic!("no JSON report ({status}): {out}\n{err}"));
    eprintln!("server killed {:.2} s into the run after {before:?} calls; outboard msg exited {status} {:.2} s later: {report}", (killed - started).as_secs_f64(), after.as_secs_f64());
    assert_eq!(status.code(), Some(1), "{report}\n{err}");
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["verified"], false, "{report}");
    assert_eq!(report["state"], "failed", "{report}");
    let why = report["error"].as_str().unwrap_or_else(|| panic!("a failed run without an error: {report}"));
    assert!(why.contains("timed out"), "the error does not say it timed out: {why:?}");
    let done = report["done"].as_u64().unwrap_or(0);
    assert!(done > 0 && done < 1_000_000, "{report}");
    // Not before the call timeout either: the last call was made just before the kill.
    assert!(after >= CALL_TIMEOUT - Duration::from_secs(1), "gave up {after:?} after the kill, before the {CALL_TIMEOUT:?} call timeout");
}
