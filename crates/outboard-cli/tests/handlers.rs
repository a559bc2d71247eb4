#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test harness
//! Handlers on the engine (docs/HANDLERS.md), between engine daemons on the
//! fabric (no root), with faults on both engines' sends. The modules are the
//! SDK's examples (`sdk/build.sh`).
//!
//! - the key-value handler answers `msg_kv_client` (the message issue's
//!   client, unchanged) on another engine: `OUTBOARD_HANDLER_KV_KEYS` keys
//!   (default 10,000: 20,001 calls; the 100,000-call run is the lab's,
//!   below), every answer checked, each request run once (the handler's
//!   invocations equal the requests executed);
//! - the Rust and C echo handlers answer `outboard msg --calls`, verified;
//! - hostile handlers (an infinite loop, unbounded memory growth,
//!   out-of-bounds accesses, garbage replies and bad host calls), each called
//!   while a 512 MiB reliable transfer to the `sink` mailbox of the same
//!   shard runs (and, for comparison, beside the same callers of a
//!   well-behaved handler):
//!   each fault is trapped, counted and answered as failed, the loop is
//!   disabled after its faults in a row, the transfer keeps at least half
//!   its rate and is verified byte-exact, and the engine serves on;
//! - a module that fails validation is refused at start with exit 2 and a
//!   message naming it;
//! - at runtime (`outboard handler load|unload|enable|list`): the key-value
//!   handler loaded into a running engine, replaced five times while
//!   `msg_kv_client` runs (every answer right: the store and the mailbox
//!   outlive each replacement, no call lost), then unloaded (its mailbox goes);
//! - in the lab (root; skips loudly otherwise), through the relay's loss,
//!   duplication, reordering and corruption: the key-value handler on an
//!   af_packet engine answers `msg_kv_client` on an engine on Linux's
//!   interface (`OUTBOARD_HANDLER_LAB_KEYS`, default 50,000 keys: 100,001
//!   calls), every answer right and each request run once; and the TCP
//!   line-protocol handler (`line`, on an af_packet
//!   engine) serves Linux clients — 16 concurrent connections of 300
//!   commands each from a Python client in the Linux namespace, every answer
//!   checked, `QUIT` answered and the connection closed by the handler.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::engine::{start_engine, stat_in, ChildGuard, EngineProc, GRACE};
use support::netns::{lab, lab_name, ns_command, skip_unless_root};
use support::{example, handlers, json_line, output_within, size_from_env, test_dir, OUTBOARD};

const UP: Duration = Duration::from_secs(10);

/// The tests here compare rates and run many engines: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}
const RUN: Duration = Duration::from_secs(300);

fn faults(seed: &'static str) -> [&'static str; 6] {
    ["--loss", "1%", "--reorder", "3%", "--seed", seed]
}

fn module(name: &str) -> String {
    handlers().join(format!("{name}.wasm")).display().to_string()
}

/// The handler row named `name` in a `stat` snapshot.
fn handler<'a>(stat: &'a Value, name: &str) -> &'a Value {
    stat["messages"]["handlers"]
        .as_array()
        .unwrap_or_else(|| panic!("stat has no messages.handlers: {stat}"))
        .iter()
        .find(|h| h["name"] == name)
        .unwrap_or_else(|| panic!("no handler {name:?} in {}", stat["messages"]["handlers"]))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// `outboard msg --json` from a client engine of its own on `fabric`; its report.
fn msg(dir: &Path, fabric: &str, name: &str, addr: &str, args: &[&str], limit: Duration) -> Value {
    let mut c = Command::new(OUTBOARD);
    c.args(["msg", "--json", "--log-level", "warn", "--name", name, "--link", fabric, "--addr", addr])
        .args(args)
        .env("OUTBOARD_RUN_DIR", dir);
    let (_, out, err) = output_within(c, limit, GRACE);
    out.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| panic!("outboard msg {args:?}: no report\nstdout:\n{out}\nstderr:\n{err}"))
}

#[test]
fn the_key_value_handler_answers_another_engines_calls_under_faults_each_once() {
    let _one = serial();
    let keys = size_from_env("OUTBOARD_HANDLER_KV_KEYS", 10_000);
    let dir = test_dir("ob-handlers", "kv");
    let fabric = format!("fabric:hkv{}", std::process::id());
    // Up to 900-byte values: 50,000 keys need about 25 MB of store.
    let kv = format!("kv={}:mailbox=kv:kv=256MiB", module("kv"));
    let _a = start_engine(&dir, "hkv-a", &[&["--link", &fabric, "--addr", "10.0.0.1/24", "--messages", "--handler", &kv][..], &faults("1")].concat(), UP);
    let _b = start_engine(&dir, "hkv-b", &[&["--link", &fabric, "--addr", "10.0.0.2/24", "--messages"][..], &faults("2")].concat(), UP);
    let t = Instant::now();
    let mut c = Command::new(example("msg_kv_client"));
    c.args(["hkv-b", "10.0.0.1:7373", &keys.to_string()]).env("OUTBOARD_RUN_DIR", &dir).stdin(Stdio::null()).stderr(Stdio::piped());
    let (st, lines) = ChildGuard::spawn_lines(&mut c, GRACE).finish_lines(RUN);
    let out = lines.join("\n");
    assert!(st.is_some_and(|s| s.success()), "msg_kv_client failed ({st:?}):\n{out}");
    let report = json_line(&out);
    assert_eq!(report["calls"], 2 * keys, "{report}");
    assert_eq!(report["wrong"], 0, "{report}");
    let stat = stat_in(&dir, "hkv-a").expect("stat");
    let h = handler(&stat, "kv");
    let executed = u(&stat["messages"]["stats"], "requests_executed");
    // The puts, the gets and one get of a missing key, each run once.
    assert_eq!(executed, 2 * keys + 1, "each request ran once: {}", stat["messages"]["stats"]);
    assert_eq!(u(&h["stats"], "invocations"), executed, "{h}");
    assert_eq!(u(h, "failed_answers"), 0, "{h}");
    assert_eq!(u(h, "kv_keys"), keys, "{h}");
    assert_eq!(h["state"], "ready");
    eprintln!("kv handler: {} calls in {:.1} s: {report}; handler {h}", 2 * keys, t.elapsed().as_secs_f64());
}

#[test]
fn echo_handlers_in_rust_and_c_answer_verified_calls() {
    let _one = serial();
    let dir = test_dir("ob-handlers", "echo");
    let fabric = format!("fabric:hec{}", std::process::id());
    let mut args = vec!["--link".to_string(), fabric.clone(), "--addr".into(), "10.0.0.1/24".into(), "--messages".into()];
    args.extend(["--handler".into(), format!("echo-rust={}:mailbox=40", module("echo"))]);
    let c_echo = handlers().join("echo_c.wasm");
    if c_echo.exists() {
        args.extend(["--handler".into(), format!("echo-c={}:mailbox=41", c_echo.display())]);
    } else {
        eprintln!("SKIP the C echo handler: clang and lld are not installed (apt-get install clang lld)");
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let _a = start_engine(&dir, "hec-a", &argv, UP);
    for (mb, name) in [("40", "echo-rust"), ("41", "echo-c")] {
        if name == "echo-c" && !c_echo.exists() {
            continue;
        }
        let to = format!("10.0.0.1:7373/{mb}");
        let r = msg(&dir, &fabric, &format!("hec-{mb}"), "10.0.0.2/24", &["--to", &to, "--calls", "5000", "--size", "1000", "--outstanding", "32"], RUN);
        assert!(r["ok"] == true && r["verified"] == true, "{name}: {r}");
        let h = handler(&stat_in(&dir, "hec-a").expect("stat"), name).clone();
        assert_eq!(u(&h["stats"], "invocations"), 5000, "{h}");
    }
}

/// Bytes/s of a verified reliable transfer of `bytes` to the sink of engine A.
fn sink_rate(dir: &Path, fabric: &str, name: &str, bytes: &str) -> f64 {
    let r = msg(dir, fabric, name, "10.0.0.3/24", &["--to", "10.0.0.1:7373/2", "--send", bytes, "--timeout-s", "200"], RUN);
    assert!(r["ok"] == true && r["verified"] == true, "transfer to sink: {r}");
    r["rate"].as_f64().unwrap_or_else(|| panic!("no rate in {r}"))
}

#[test]
fn hostile_handlers_are_trapped_counted_and_answered_while_another_transfer_runs() {
    let _one = serial();
    let dir = test_dir("ob-handlers", "hostile");
    let fabric = format!("fabric:hho{}", std::process::id());
    let hs = [
        format!("spin={}:mailbox=50:deadline_ms=20", module("spin")),
        format!("hog={}:mailbox=51:memory=1MiB", module("hog")),
        format!("oob={}:mailbox=52", module("oob")),
        format!("garbage={}:mailbox=53", module("garbage")),
        format!("echo={}:mailbox=54", module("echo")),
    ];
    let mut argv = vec!["--link", &fabric, "--addr", "10.0.0.1/24", "--messages"];
    for h in &hs {
        argv.extend(["--handler", h]);
    }
    let _a = start_engine(&dir, "hho-a", &argv, UP);
    // The transfer beside callers of a well-behaved handler, then beside the
    // same callers of the hostile ones: the callers' own CPU is in both.
    let callers = |mailboxes: [&'static str; 4], tag: &'static str| {
        let (dir, fabric) = (dir.clone(), fabric.clone());
        std::thread::spawn(move || {
            let mut reports = Vec::new();
            for (i, mb) in mailboxes.into_iter().enumerate() {
                let to = format!("10.0.0.1:7373/{mb}");
                let name = format!("hho-{tag}{i}");
                reports.push((mb, msg(&dir, &fabric, &name, "10.0.0.2/24", &["--to", &to, "--calls", "16", "--outstanding", "16", "--timeout-s", "20"], RUN)));
            }
            reports
        })
    };
    let polite = callers(["54"; 4], "p");
    let baseline = sink_rate(&dir, &fabric, "hho-base", "512MiB");
    for (_, r) in polite.join().expect("the callers") {
        assert!(r["ok"] == true && r["verified"] == true, "echo: {r}");
    }
    let hostile = callers(["50", "51", "52", "53"], "h");
    let during = sink_rate(&dir, &fabric, "hho-load", "512MiB");
    let reports = hostile.join().expect("the hostile callers");
    eprintln!("sink transfer: {:.1} MB/s beside echo calls, {:.1} MB/s beside the hostile handlers", baseline / 1e6, during / 1e6);
    assert!(during >= baseline / 2.0, "the transfer dropped by more than half: {during:.0} B/s against {baseline:.0}");
    for (mb, r) in &reports {
        assert_eq!(r["ok"], false, "mailbox {mb}: a hostile handler's calls verified: {r}");
        eprintln!("hostile mailbox {mb}: {}", r["error"]);
    }
    // The loop: overruns answered as failed, then disabled after 8 in a row.
    let stat = stat_in(&dir, "hho-a").expect("the engine is up");
    let spin = handler(&stat, "spin");
    assert!(reports[0].1["error"].as_str().is_some_and(|e| e.contains("failed on the request")), "{}", reports[0].1);
    assert_eq!(u(&spin["stats"], "overruns"), 8, "{spin}");
    assert!(spin["state"].as_str().is_some_and(|s| s.starts_with("disabled: 8 faults in a row, the last: overrun (deadline 20 ms)")), "{spin}");
    // Memory growth refused at the cap, and the handler answered (its page count is not an echo).
    let hog = handler(&stat, "hog");
    assert!(u(&hog["stats"], "grow_refused") >= 1, "{hog}");
    assert_eq!(u(&hog["stats"], "overruns") + u(&hog["stats"], "traps"), 0, "{hog}");
    assert!(reports[1].1["error"].as_str().is_some_and(|e| e.contains("is not the request")), "{}", reports[1].1);
    // Out-of-bounds accesses trap; each request answered as failed.
    let oob = handler(&stat, "oob");
    assert!(u(&oob["stats"], "out_of_bounds") >= 1, "{oob}");
    assert!(u(oob, "failed_answers") >= 1, "{oob}");
    // Garbage: bad host calls refused and counted; its reply is well-formed (a response, just not an echo).
    let garbage = handler(&stat, "garbage");
    assert!(u(&garbage["stats"], "bad_args") >= 1, "{garbage}");
    assert!(reports[3].1["error"].as_str().is_some_and(|e| e.contains("is not the request")), "{}", reports[3].1);
    let m = &stat["messages"]["stats"];
    assert_eq!(u(m, "drop_malformed"), 0, "{m}");
    // The disabled loop is listed as such and can be enabled again from the shell.
    let list = support::outboard_in(&dir, &["handler", "list", "--json", "--name", "hho-a"]);
    assert!(list.status.success(), "{}", support::text(&list));
    assert!(String::from_utf8_lossy(&list.stdout).contains("disabled: 8 faults in a row"));
    let en = support::outboard_in(&dir, &["handler", "enable", "spin", "--name", "hho-a"]);
    assert!(en.status.success(), "{}", support::text(&en));
    let none = support::outboard_in(&dir, &["handler", "enable", "nobody", "--name", "hho-a"]);
    assert_eq!(none.status.code(), Some(1), "{}", support::text(&none));
    // And the engine serves on: a well-behaved handler beside them answers.
    let r = msg(&dir, &fabric, "hho-after", "10.0.0.2/24", &["--to", "10.0.0.1:7373/54", "--calls", "500"], RUN);
    assert!(r["ok"] == true && r["verified"] == true, "echo after the hostile ones: {r}");
}

#[test]
fn a_module_that_fails_validation_is_refused_at_start_with_its_name() {
    let _one = serial();
    let dir = test_dir("ob-handlers", "invalid");
    let bad = dir.join("bad.wasm");
    std::fs::write(&bad, b"\0asm\x01\0\0\0 not really").unwrap();
    let fabric = format!("fabric:hbad{}", std::process::id());
    let cases: Vec<(String, &str)> = vec![
        (format!("bad={}:mailbox=5", bad.display()), "not a valid module"),
        (format!("missing={}:mailbox=5", dir.join("nope.wasm").display()), "nope.wasm"),
        (format!("spin={}:mailbox=5:memory=0", module("spin")), "between 64 KiB"),
        (format!("line={}:mailbox=5", module("line")), "ob_message"),
    ];
    for (spec, why) in cases {
        let mut c = Command::new(OUTBOARD);
        c.args(["engine", "--name", "hbad", "--link", &fabric, "--addr", "10.0.0.1/24", "--messages", "--handler", &spec, "--run-for-s", "5"])
            .env("OUTBOARD_RUN_DIR", &dir);
        let o = c.output().expect("run the engine");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{spec}: {err}");
        assert!(err.contains(why), "{spec}: {err}");
    }
    // Without --messages there is no mailbox to attach to.
    let o = Command::new(OUTBOARD)
        .args(["engine", "--name", "hbad", "--link", &fabric, "--addr", "10.0.0.1/24", "--handler", &format!("e={}:mailbox=5", module("echo"))])
        .env("OUTBOARD_RUN_DIR", &dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--messages"));
}

#[test]
fn handlers_are_loaded_replaced_and_unloaded_at_runtime_while_calls_flow() {
    let _one = serial();
    let keys: u64 = 10_000;
    let dir = test_dir("ob-handlers", "runtime");
    let fabric = format!("fabric:hrt{}", std::process::id());
    let _a = start_engine(&dir, "hrt-a", &[&["--link", &fabric, "--addr", "10.0.0.1/24", "--messages"][..], &faults("3")].concat(), UP);
    let _b = start_engine(&dir, "hrt-b", &[&["--link", &fabric, "--addr", "10.0.0.2/24", "--messages"][..], &faults("4")].concat(), UP);
    let spec = format!("kv={}:mailbox=kv:kv=64MiB", module("kv"));
    let load = || support::outboard_in(&dir, &["handler", "load", &spec, "--name", "hrt-a"]);
    let o = load();
    assert!(o.status.success(), "{}", support::text(&o));
    let mut c = Command::new(example("msg_kv_client"));
    c.args(["hrt-b", "10.0.0.1:7373", &keys.to_string()]).env("OUTBOARD_RUN_DIR", &dir).stdin(Stdio::null()).stderr(Stdio::piped());
    let mut client = ChildGuard::spawn_lines(&mut c, GRACE);
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(150));
        let o = load();
        assert!(o.status.success(), "replace: {}", support::text(&o));
    }
    let (st, lines) = client.finish_lines(RUN);
    let out = lines.join("\n");
    assert!(st.is_some_and(|s| s.success()), "msg_kv_client failed ({st:?}):\n{out}");
    let report = json_line(&out);
    assert_eq!((report["calls"].as_u64(), report["wrong"].as_u64()), (Some(2 * keys), Some(0)), "{report}");
    let stat = stat_in(&dir, "hrt-a").expect("stat");
    assert_eq!(u(&stat["messages"]["stats"], "requests_executed"), 2 * keys + 1, "{}", stat["messages"]["stats"]);
    let h = handler(&stat, "kv");
    assert_eq!(u(h, "kv_keys"), keys, "the store outlived every replacement: {h}");
    // Unloaded: the mailbox goes with it, and a call to it is refused.
    let o = support::outboard_in(&dir, &["handler", "unload", "kv", "--name", "hrt-a"]);
    assert!(o.status.success(), "{}", support::text(&o));
    let stat = stat_in(&dir, "hrt-a").expect("stat");
    assert!(stat["messages"]["handlers"].as_array().is_none_or(|a| a.is_empty()), "{}", stat["messages"]["handlers"]);
    assert!(!stat["messages"]["mailboxes"].as_array().unwrap().iter().any(|m| m["name"] == "kv"));
    let r = msg(&dir, &fabric, "hrt-c", "10.0.0.5/24", &["--to", "10.0.0.1:7373/kv", "--calls", "1"], RUN);
    assert_eq!(r["ok"], false, "{r}");
    let o = support::outboard_in(&dir, &["handler", "unload", "kv", "--name", "hrt-a"]);
    assert_eq!(o.status.code(), Some(1), "{}", support::text(&o));
}

/// Linux's side of the line-protocol test: N connections at once, each sends
/// its commands in a few pipelined bursts and checks every answer.
const LINE_CLIENT: &str = r#"
import socket, sys, threading
host, port, conns, cmds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
errors = []
def one(k):
    try:
        s = socket.create_connection((host, port), timeout=20)
        f = s.makefile("rwb")
        sent, want = 0, []
        while sent < cmds:
            burst = min(25, cmds - sent)
            for i in range(sent, sent + burst):
                if i % 3 == 0:
                    f.write(b"PING\n"); want.append(b"PONG\n")
                elif i % 3 == 1:
                    t = (b"conn %d line %d " % (k, i)) + b"x" * (i % 200)
                    f.write(b"ECHO " + t + b"\n"); want.append(t + b"\n")
                else:
                    f.write(b"WHAT %d\n" % i); want.append(b"ERR unknown command\n")
            f.flush()
            for w in want:
                got = f.readline()
                if got != w:
                    errors.append("conn %d: %r, wanted %r" % (k, got[:60], w[:60])); return
            want, sent = [], sent + burst
        f.write(b"QUIT\n"); f.flush()
        if f.readline() != b"BYE\n": errors.append("conn %d: no BYE" % k); return
        if f.read(1) != b"": errors.append("conn %d: not closed after BYE" % k)
    except Exception as e:
        errors.append("conn %d: %s" % (k, e))
ts = [threading.Thread(target=one, args=(k,)) for k in range(conns)]
[t.start() for t in ts]; [t.join() for t in ts]
print("errors: %d" % len(errors)); [print(e) for e in errors[:10]]
sys.exit(1 if errors else 0)
"#;

#[test]
fn the_tcp_line_handler_serves_linux_clients_across_the_lab() {
    if skip_unless_root("the_tcp_line_handler_serves_linux_clients_across_the_lab") {
        return;
    }
    let _one = serial();
    let name = lab_name("hln");
    let mut cfg = outboard_lab::LabConfig::new(&name);
    cfg.impairment = outboard_lab::Impairment { loss: 0.01, reorder: 0.02, reorder_delay_ms: 1.0, ..Default::default() };
    cfg.seed = 77;
    let lab = lab(&cfg);
    let spec = format!("line={}:tcp=7000", module("line"));
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &["--services", "none", "--handler", &spec]);
    let (conns, cmds) = (16, 300);
    let limit = Duration::from_secs(120);
    let addr = lab.engine_addr().to_string();
    let mut c = ns_command(lab.linux_ns(), limit, 5, &["python3", "-c", LINE_CLIENT, &addr, "7000", &conns.to_string(), &cmds.to_string()]);
    let (ok, out, err) = output_within(
        {
            c.stdin(Stdio::null());
            c
        },
        limit + Duration::from_secs(10),
        GRACE,
    );
    assert!(ok, "the Linux clients failed:\n{out}\n{err}");
    let stat = e.stat();
    let rows = stat["tcp_handlers"].as_array().unwrap_or_else(|| panic!("no tcp_handlers in stat: {stat}"));
    let accepted: u64 = rows.iter().map(|r| u(r, "accepted")).sum();
    let reset: u64 = rows.iter().map(|r| u(r, "reset")).sum();
    assert_eq!((accepted, reset), (conns, 0), "{rows:?}");
    assert!(rows.iter().all(|r| r["state"] == "ready" && u(&r["stats"], "traps") + u(&r["stats"], "overruns") == 0), "{rows:?}");
    eprintln!("line handler: {conns} Linux connections x {cmds} commands through the relay: {out}");
    drop(e);
    let _ = lab.teardown();
}

#[test]
fn the_key_value_handler_answers_calls_through_the_labs_relay_each_once() {
    if skip_unless_root("the_key_value_handler_answers_calls_through_the_labs_relay_each_once") {
        return;
    }
    let _one = serial();
    let keys = size_from_env("OUTBOARD_HANDLER_LAB_KEYS", 50_000);
    let name = lab_name("hkl");
    let mut cfg = outboard_lab::LabConfig::new(&name);
    cfg.impairment = outboard_lab::Impairment { loss: 0.01, duplicate: 0.01, reorder: 0.03, reorder_delay_ms: 1.0, corrupt: 0.001, ..Default::default() };
    cfg.seed = 7374;
    let lab = lab(&cfg);
    let spec = format!("kv={}:mailbox=kv:kv=256MiB", module("kv"));
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &["--services", "none", "--messages", "--handler", &spec]);
    // The client's engine on Linux's interface, beside the kernel's address; the application attaches to it.
    let cname = format!("{name}-c");
    let link = format!("af_packet:{}", lab.linux_iface());
    let limit = Duration::from_secs(240);
    let mut c = ns_command(lab.linux_ns(), limit + Duration::from_secs(30), 5, &[OUTBOARD, "engine", "--log-level", "warn"]);
    c.args(["--name", &cname, "--link", &link, "--addr", "10.77.0.3/24", "--allow-kernel-address", "--messages", "--services", "none"])
        .env("OUTBOARD_RUN_DIR", support::run_dir())
        .stdin(Stdio::null());
    let _client_engine = ChildGuard::new(c.spawn().expect("the client engine"), GRACE);
    support::engine::wait_up(&support::run_dir(), &cname, UP);
    let t = Instant::now();
    let mut app = Command::new(example("msg_kv_client"));
    app.args([cname.as_str(), &format!("{}:7373", lab.engine_addr()), &keys.to_string()])
        .env("OUTBOARD_RUN_DIR", support::run_dir())
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    let (st, lines) = ChildGuard::spawn_lines(&mut app, GRACE).finish_lines(limit);
    let out = lines.join("\n");
    assert!(st.is_some_and(|s| s.success()), "msg_kv_client failed ({st:?}):\n{out}");
    let report = json_line(&out);
    assert_eq!((report["calls"].as_u64(), report["wrong"].as_u64()), (Some(2 * keys), Some(0)), "{report}");
    let stat = e.stat();
    let executed = u(&stat["messages"]["stats"], "requests_executed");
    assert_eq!(executed, 2 * keys + 1, "each request ran once: {}", stat["messages"]["stats"]);
    let h = handler(&stat, "kv");
    assert_eq!((u(&h["stats"], "invocations"), u(h, "failed_answers")), (executed, 0), "{h}");
    eprintln!("kv handler through the relay: {} calls in {:.1} s: {report}", 2 * keys, t.elapsed().as_secs_f64());
    drop(e);
    let down = lab.teardown().expect("lab down");
    let relay = down.relay_report.expect("the relay ran and reported");
    let sum = |k: &str| u(&relay["a_to_b"]["stats"], k) + u(&relay["b_to_a"]["stats"], k);
    for k in ["dropped", "duplicated", "reordered"] {
        assert!(sum(k) > 0, "the relay never {k} a frame: {relay}");
    }
}
