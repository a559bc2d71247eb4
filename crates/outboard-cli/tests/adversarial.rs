//! Adversarial segments and a SYN flood against a real engine, from the Linux
//! side of a lab (direct topology, `af_packet:eng0`, engine 10.77.0.2/24).
//!
//! The segments are crafted with scapy (`tests/scripts/adv_tcp.py`, driven
//! one JSON line at a time so the test can read `outboard stat` between
//! steps); the handshake is done by hand. The Linux kernel in the lnx
//! namespace knows nothing of these flows and would answer the engine's
//! segments with RSTs: an nftables rule drops every RST it sends.
//!
//! Every case asserts on what scapy saw on the wire *and* on the engine's
//! counters. Per-connection counters (`challenge_acks`, `dropped_segments`)
//! are not in `stat`'s connection rows; where a row carries them the tests
//! check them too, otherwise they rely on the stack's segment counters and
//! the row's state and byte counts.
//!
//! The SYN-flood tests send with plain Python (`adv_flood.py`) and connect
//! with the kernel's TCP (`adv_client.py`, `adv_connects.py`); one of them
//! runs the same flood against Linux on the same interface and compares the
//! legitimate clients' connect times.
//!
//! Needs root, `python3` with scapy (`python3 -m pip install scapy`, or the
//! Debian package python3-scapy) and `nft` (apt package nftables). Without
//! root the tests print SKIPPED; without the tools they fail naming the package.

// A test harness measures wall time (the sans-IO rule is for protocol crates);
// crate-wide so that it covers `support` too.
#![allow(clippy::disallowed_methods)]

mod support;

use outboard_lab::LabConfig;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};
use support::engine::{ChildGuard, EngineProc};
use support::netns::{have, in_ns, lab, lab_name, ns_command, skip_unless_root};
use support::script;

const ENGINE_IP: &str = "10.77.0.2";
const LINUX_IP: &str = "10.77.0.1";

/// Fails (not skips) when a tool the test needs is missing, naming its package.
fn require_tools() {
    assert!(
        have("python3"),
        "python3 is missing: apt-get install python3"
    );
    let scapy = Command::new("timeout")
        .args(["30", "python3", "-c", "import scapy.all"])
        .output()
        .expect("run python3");
    assert!(
        scapy.status.success(),
        "scapy is missing: `python3 -m pip install scapy` (or apt-get install python3-scapy): {}",
        String::from_utf8_lossy(&scapy.stderr)
    );
    assert!(have("nft"), "nft is missing: apt-get install nftables");
    assert!(have("timeout"), "timeout is missing: apt-get install coreutils");
}

/// Drops every RST the Linux kernel in `ns` would send: the crafted flows
/// (and the flood's SYN-ACKs) belong to no kernel socket.
fn drop_kernel_rsts(ns: &str) {
    for args in [
        vec!["nft", "add", "table", "inet", "adv"],
        vec!["nft", "add", "chain", "inet", "adv", "out", "{ type filter hook output priority 0 ; }"],
        vec!["nft", "add", "rule", "inet", "adv", "out", "tcp", "flags", "rst", "drop"],
    ] {
        let mut full = vec!["timeout", "10"];
        full.extend_from_slice(&args);
        let o = in_ns(ns, &full);
        assert!(
            o.status.success(),
            "{args:?} in {ns}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// `adv_tcp.py` running in the Linux namespace: one JSON command per line in,
/// one JSON answer per line out.
struct Scapy {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: PathBuf,
}

impl Scapy {
    fn start(ns: &str) -> Scapy {
        let stderr = std::env::temp_dir().join(format!("outboard-adv-scapy-{}-{ns}.log", std::process::id()));
        let errf = std::fs::File::create(&stderr).expect("scapy log");
        let mut child = ns_command(ns, Duration::from_secs(180), 5, &["python3", &script("adv_tcp.py")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(errf)
            .spawn()
            .expect("spawn adv_tcp.py");
        let stdin = child.stdin.take();
        let lines = support::line_channel(child.stdout.take().expect("stdout"));
        let mut s = Scapy { child, stdin, lines, stderr };
        let ready = s.answer(Duration::from_secs(30));
        assert_eq!(ready["ready"], json!(true), "adv_tcp.py did not start: {ready}");
        s
    }

    fn answer(&mut self, wait: Duration) -> Value {
        match self.lines.recv_timeout(wait) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| panic!("adv_tcp.py said {line:?}: {e}")),
            Err(e) => panic!(
                "no answer from adv_tcp.py within {wait:?} ({e}); its stderr: {}",
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            ),
        }
    }

    fn cmd(&mut self, c: Value) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{c}").expect("write to adv_tcp.py");
        stdin.flush().expect("flush");
        let a = self.answer(Duration::from_secs(15));
        assert!(a.get("error").is_none(), "adv_tcp.py {c}: {a}");
        a
    }

    /// Hand-made 3-way handshake from `sport` to the echo port.
    fn connect(&mut self, sport: u16) -> Value {
        let a = self.cmd(json!({"op": "connect", "dport": 7, "sport": sport}));
        assert_eq!(a["ok"], json!(true), "handshake from port {sport}: {a}");
        a
    }

    /// Sends data at SND.NXT, expects it echoed, and acknowledges the echo.
    fn echo_round(&mut self, text: &str) {
        let a = self.cmd(json!({"op": "send", "flags": "PA", "payload": text, "advance": true, "wait": 3.0, "expect": 1}));
        let echoed: String = got(&a).iter().map(|s| s["payload"].as_str().unwrap_or("").to_string()).collect();
        assert_eq!(echoed, text, "echo of {text:?}: {a}");
        self.cmd(json!({"op": "send", "flags": "A", "wait": 0.1}));
    }
}

impl Drop for Scapy {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "{}", json!({"op": "quit"}));
        }
        let t0 = Instant::now();
        let mut exited = false;
        while t0.elapsed() < Duration::from_secs(3) {
            if let Ok(Some(_)) = self.child.try_wait() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !exited {
            // `timeout` passes SIGTERM on to python.
            let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
            std::thread::sleep(Duration::from_millis(300));
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.stderr);
        }
    }
}

/// The tests of this file run side by side (each in its own lab), except
/// the one that measures latency against Linux: it runs alone.
static MACHINE: RwLock<()> = RwLock::new(());

fn shared_machine() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}

fn whole_machine() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

/// Lab + engine + scapy; dropped in this order (scapy, engine, lab).
struct Fixture {
    scapy: Scapy,
    engine: EngineProc,
    _lab: outboard_lab::Lab,
    _machine: RwLockReadGuard<'static, ()>,
}

fn setup(test: &str, tag: &str) -> Option<Fixture> {
    if skip_unless_root(test) {
        return None;
    }
    require_tools();
    let machine = shared_machine();
    let name = lab_name(tag);
    let lab = lab(&LabConfig::new(&name));
    let lnx = format!("ob-{name}-lnx");
    drop_kernel_rsts(&lnx);
    // With br_netfilter loaded on the host, the lab's bridge would run
    // IPv4 frames through netfilter, which drops bad IP header checksums
    // before they reach the engine. Not a middlebox we want here.
    let _ = in_ns(
        &format!("ob-{name}-imp"),
        &["timeout", "10", "sh", "-c", "[ ! -e /proc/sys/net/bridge ] || sysctl -qw net.bridge.bridge-nf-call-iptables=0"],
    );
    let engine = EngineProc::start(
        &format!("ob-{name}-eng"),
        &name,
        &["--link", "af_packet:eng0", "--addr", "10.77.0.2/24", "--memory-cap", "64MiB"],
    );
    let scapy = Scapy::start(&lnx);
    Some(Fixture { scapy, engine, _lab: lab, _machine: machine })
}

fn got(a: &Value) -> Vec<Value> {
    a["got"].as_array().cloned().unwrap_or_default()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn stack(s: &Value, key: &str) -> u64 {
    s["stack"][key].as_u64().unwrap_or(0)
}

/// The connection row of the engine's echo port and `sport` on 10.77.0.1.
fn row(s: &Value, sport: u16) -> Option<Value> {
    let remote = format!("{LINUX_IP}:{sport}");
    s["connections"]
        .as_array()?
        .iter()
        .find(|c| c["remote"] == json!(remote) && c["local"] == json!(format!("{ENGINE_IP}:7")))
        .cloned()
}

/// Bytes the echo service read: what the connection really took in order
/// (a row's `bytes_in` counts every payload byte that arrived, dropped or not).
fn echo_bytes_in(s: &Value) -> u64 {
    let echo = s["services"].as_array().and_then(|v| v.iter().find(|x| x["service"] == json!("echo")).cloned());
    n(&echo.unwrap_or_else(|| panic!("no echo service in stat: {}", s["services"]))["bytes_in"])
}

fn established_row(s: &Value, sport: u16) -> Value {
    let r = row(s, sport).unwrap_or_else(|| panic!("no connection from port {sport} in stat: {}", s["connections"]));
    assert_eq!(r["state"], json!("Established"), "connection from port {sport}: {r}");
    r
}

/// Where the row exposes it, a per-connection counter went up by `by`.
fn row_counter_up(before: &Value, after: &Value, key: &str, by: u64) {
    if let (Some(b), Some(a)) = (before.get(key).and_then(Value::as_u64), after.get(key).and_then(Value::as_u64)) {
        assert_eq!(a, b + by, "connection counter {key}: {before} -> {after}");
    }
}

/// A challenge ACK (RFC 5961 §3.2, §4.2, §5.2): a bare ACK carrying the
/// engine's SND.NXT and exactly our RCV.NXT (SND.NXT as we keep it).
fn assert_challenge_ack(a: &Value, what: &str) {
    let segs = got(a);
    assert_eq!(segs.len(), 1, "{what}: expected exactly one challenge ACK, saw {a}");
    let s = &segs[0];
    assert_eq!(s["flags"], json!("A"), "{what}: challenge ACK flags: {a}");
    assert_eq!(s["len"], json!(0), "{what}: challenge ACK carries no data: {a}");
    assert_eq!(n(&s["ack"]), n(&a["snd_nxt"]), "{what}: challenge ACK must carry the exact RCV.NXT: {a}");
    assert_eq!(n(&s["seq"]), n(&a["rcv_nxt"]), "{what}: challenge ACK must carry the engine's SND.NXT: {a}");
}

fn assert_silence(a: &Value, what: &str) {
    assert!(got(a).is_empty(), "{what}: the engine must not answer, but sent {a}");
}

/// RFC 5961 §3.2: a RST inside the window but not at RCV.NXT is answered
/// with a challenge ACK and the connection stays; one outside the window
/// is dropped silently.
#[test]
fn rfc5961_3_2_in_window_rst_gets_challenge_ack_and_connection_stays() {
    let Some(mut f) = setup("rfc5961_3_2_in_window_rst", "advrw") else { return };
    let sport = 41001;
    f.scapy.connect(sport);
    f.scapy.echo_round("before");
    let s0 = f.engine.stat();
    let r0 = established_row(&s0, sport);

    let a = f.scapy.cmd(json!({"op": "send", "flags": "R", "seq_off": 100, "wait": 1.5, "expect": 1}));
    assert_challenge_ack(&a, "RST at RCV.NXT+100");
    let s1 = f.engine.stat();
    let r1 = established_row(&s1, sport);
    assert_eq!(stack(&s1, "tcp_segments_in"), stack(&s0, "tcp_segments_in") + 1, "{}", s1["stack"]);
    assert_eq!(stack(&s1, "tcp_segments_out"), stack(&s0, "tcp_segments_out") + 1, "one challenge ACK out");
    assert_eq!(stack(&s1, "tcp_connections_freed"), stack(&s0, "tcp_connections_freed"));
    row_counter_up(&r0, &r1, "challenge_acks", 1);

    // Just left of the window (RCV.NXT - 1): out of window, silently dropped.
    let a = f.scapy.cmd(json!({"op": "send", "flags": "R", "seq_off": -1, "wait": 1.0}));
    assert_silence(&a, "RST at RCV.NXT-1 (outside the window)");
    let s2 = f.engine.stat();
    established_row(&s2, sport);
    assert_eq!(stack(&s2, "tcp_segments_in"), stack(&s1, "tcp_segments_in") + 1);
    assert_eq!(stack(&s2, "tcp_segments_out"), stack(&s1, "tcp_segments_out"));

    // Still fully working.
    f.scapy.echo_round("after");
    let s3 = f.engine.stat();
    established_row(&s3, sport);
    assert_eq!(echo_bytes_in(&s3), 11, "only the two real payloads were taken");
}

/// RFC 5961 §4.2: any SYN on a synchronized connection, whatever its
/// sequence number, gets a challenge ACK; no second handshake, no reset.
#[test]
fn rfc5961_4_2_syn_on_established_gets_challenge_ack_and_connection_stays() {
    let Some(mut f) = setup("rfc5961_4_2_syn_on_established", "advsy") else { return };
    let sport = 41002;
    f.scapy.connect(sport);
    let s0 = f.engine.stat();
    let r0 = established_row(&s0, sport);

    let a = f.scapy.cmd(json!({"op": "send", "flags": "S", "seq_off": 0, "ack_off": 0, "wait": 1.5, "expect": 1}));
    assert_challenge_ack(&a, "SYN at RCV.NXT");
    let s1 = f.engine.stat();
    let r1 = established_row(&s1, sport);
    row_counter_up(&r0, &r1, "challenge_acks", 1);
    assert_eq!(stack(&s1, "tcp_segments_out"), stack(&s0, "tcp_segments_out") + 1);

    // Far outside the window: still a (challenge) ACK, never a SYN-ACK.
    let a = f.scapy.cmd(json!({"op": "send", "flags": "S", "seq_off": 0x4000_0000, "wait": 1.5, "expect": 1}));
    assert_challenge_ack(&a, "SYN at RCV.NXT+2^30");
    let s2 = f.engine.stat();
    established_row(&s2, sport);
    for k in ["tcp_syn_queue_adds", "tcp_syncookies_sent", "tcp_connections_freed"] {
        assert_eq!(stack(&s2, k), stack(&s0, k), "{k}: a SYN on an established connection opens nothing");
    }
    assert_eq!(stack(&s2, "tcp_segments_in"), stack(&s0, "tcp_segments_in") + 2);
    assert_eq!(s2["connections"].as_array().map(Vec::len), Some(1), "{}", s2["connections"]);
    f.scapy.echo_round("still here");
}

/// RFC 5961 §3.2 / RFC 9293 §3.10.7.4: a RST at exactly RCV.NXT resets the
/// connection: it leaves `stat`, the echo service counts a reset, nothing
/// answers the RST, and later segments on the 4-tuple get a RST.
#[test]
fn rfc5961_3_2_rfc9293_3_10_7_4_exact_rst_closes_connection() {
    let Some(mut f) = setup("rfc5961_3_2_exact_rst", "advrx") else { return };
    let sport = 41003;
    f.scapy.connect(sport);
    f.scapy.echo_round("hello");
    let s0 = f.engine.stat();
    established_row(&s0, sport);

    let a = f.scapy.cmd(json!({"op": "send", "flags": "R", "seq_off": 0, "wait": 1.0}));
    assert_silence(&a, "exact RST");
    let (s1, _) = f.engine.poll_stat(Duration::from_secs(3), Duration::from_millis(50), |s| row(s, sport).is_none());
    assert!(row(&s1, sport).is_none(), "the reset connection is still in stat: {}", s1["connections"]);
    assert_eq!(stack(&s1, "tcp_connections_freed"), stack(&s0, "tcp_connections_freed") + 1, "{}", s1["stack"]);
    assert_eq!(stack(&s1, "tcp_segments_out"), stack(&s0, "tcp_segments_out"), "nothing answers a RST");
    let echo = s1["services"].as_array().and_then(|v| v.iter().find(|s| s["service"] == json!("echo")).cloned());
    let echo = echo.unwrap_or_else(|| panic!("no echo service in stat: {}", s1["services"]));
    assert_eq!(echo["tcp_reset"], json!(1), "echo service: {echo}");
    assert_eq!(echo["tcp_active"], json!(0), "echo service: {echo}");

    // RFC 9293 §3.10.7.1: the 4-tuple is gone, so data on it is refused with <SEQ=SEG.ACK><CTL=RST>.
    let a = f.scapy.cmd(json!({"op": "send", "flags": "PA", "payload": "ghost", "wait": 1.5, "expect": 1}));
    let segs = got(&a);
    assert_eq!(segs.len(), 1, "data after the reset: {a}");
    assert_eq!(segs[0]["flags"], json!("R"), "data after the reset: {a}");
    assert_eq!(segs[0]["seq"], a["sent"]["ack"], "RST seq = SEG.ACK: {a}");
    let s2 = f.engine.stat();
    assert!(row(&s2, sport).is_none(), "{}", s2["connections"]);
    assert_eq!(stack(&s2, "tcp_resets_out"), stack(&s1, "tcp_resets_out") + 1, "{}", s2["stack"]);
}

/// RFC 5961 §5.2: a segment acknowledging data never sent (SEG.ACK >
/// SND.NXT) is dropped, its data not taken, and answered with an ACK.
#[test]
fn rfc5961_5_2_ack_of_unsent_data_is_dropped_and_answered_with_ack() {
    let Some(mut f) = setup("rfc5961_5_2_ack_unsent", "advak") else { return };
    let sport = 41004;
    f.scapy.connect(sport);
    let s0 = f.engine.stat();
    let r0 = established_row(&s0, sport);

    let a = f.scapy.cmd(json!({"op": "send", "flags": "PA", "payload": "evil", "ack_off": 100_000, "wait": 1.5, "expect": 1}));
    assert_challenge_ack(&a, "data with SEG.ACK = SND.NXT + 100000");
    let s1 = f.engine.stat();
    let r1 = established_row(&s1, sport);
    assert_eq!(echo_bytes_in(&s1), 0, "the data of a segment with a bad ACK must not be taken: {}", s1["services"]);
    assert_eq!(r1["recv_queue"], json!(0), "{r1}");
    row_counter_up(&r0, &r1, "challenge_acks", 1);
    assert_eq!(stack(&s1, "tcp_segments_in"), stack(&s0, "tcp_segments_in") + 1);
    assert_eq!(stack(&s1, "tcp_segments_out"), stack(&s0, "tcp_segments_out") + 1, "one ACK, no echo");

    // The same bytes with an honest ACK are taken (and echoed) once.
    f.scapy.echo_round("evil");
    let s2 = f.engine.stat();
    established_row(&s2, sport);
    assert_eq!(echo_bytes_in(&s2), 4, "{}", s2["services"]);
}

/// RFC 9293 §3.10.7 / RFC 1122 §4.2.2.7 (and §3.2.1.2 for the IP header):
/// a segment with a bad checksum is dropped without an answer and counted.
#[test]
fn rfc9293_3_10_7_rfc1122_bad_checksum_is_dropped_and_counted() {
    let Some(mut f) = setup("rfc9293_bad_checksum", "advck") else { return };
    let sport = 41005;
    f.scapy.connect(sport);
    let s0 = f.engine.stat();
    established_row(&s0, sport);

    let a = f.scapy.cmd(json!({"op": "send", "flags": "PA", "payload": "corrupt", "bad_tcp_checksum": true, "wait": 1.0}));
    assert_silence(&a, "bad TCP checksum");
    let s1 = f.engine.stat();
    assert_eq!(stack(&s1, "drops_checksum"), stack(&s0, "drops_checksum") + 1, "{}", s1["stack"]);
    assert_eq!(stack(&s1, "tcp_segments_in"), stack(&s0, "tcp_segments_in"), "not a TCP segment for the stack");
    assert_eq!(stack(&s1, "ip_packets_in"), stack(&s0, "ip_packets_in") + 1);
    assert_eq!(stack(&s1, "tcp_segments_out"), stack(&s0, "tcp_segments_out"));
    established_row(&s1, sport);
    assert_eq!(echo_bytes_in(&s1), 0);

    let a = f.scapy.cmd(json!({"op": "send", "flags": "PA", "payload": "corrupt", "bad_ip_checksum": true, "wait": 1.0}));
    assert_silence(&a, "bad IPv4 header checksum");
    let s2 = f.engine.stat();
    assert_eq!(stack(&s2, "drops_checksum"), stack(&s0, "drops_checksum") + 2, "{}", s2["stack"]);
    assert_eq!(stack(&s2, "ip_packets_in"), stack(&s1, "ip_packets_in"));
    assert_eq!(echo_bytes_in(&s2), 0);

    f.scapy.echo_round("corrupt");
    let s3 = f.engine.stat();
    established_row(&s3, sport);
    assert_eq!(echo_bytes_in(&s3), 7, "{}", s3["services"]);
}

/// Sends `flags` from a fresh port to the echo listener and checks it was
/// dropped silently at the listener: no answer, no state, `drops_tcp_listener` + 1.
fn assert_listener_drops(f: &mut Fixture, flags: &str, sport: u16) {
    let s0 = f.engine.stat();
    let a = f.scapy.cmd(json!({"op": "send", "flags": flags, "sport": sport, "seq": 77_777, "wait": 1.0}));
    assert_silence(&a, &format!("{flags:?} to the listener"));
    let s1 = f.engine.stat();
    assert_eq!(
        stack(&s1, "drops_tcp_listener"),
        stack(&s0, "drops_tcp_listener") + 1,
        "{flags:?} to the listener must be counted in drops_tcp_listener: {}",
        s1["stack"]
    );
    assert!(row(&s1, sport).is_none(), "{flags:?} created a connection: {}", s1["connections"]);
    for k in ["tcp_syn_queue_adds", "tcp_syncookies_sent", "tcp_segments_out", "tcp_resets_out"] {
        assert_eq!(stack(&s1, k), stack(&s0, k), "{k} after {flags:?} to the listener");
    }
    assert_eq!(stack(&s1, "tcp_segments_in"), stack(&s0, "tcp_segments_in") + 1);
}

/// SYN+FIN: dropped and counted at a listener (as Linux and FreeBSD do); on an
/// established connection it is a SYN, so RFC 5961 §4.2 applies: a challenge
/// ACK and nothing else (its FIN is not processed).
#[test]
fn invalid_flags_syn_fin_is_dropped_and_counted() {
    let Some(mut f) = setup("invalid_flags_syn_fin", "advsf") else { return };
    assert_listener_drops(&mut f, "SF", 42001);

    let sport = 41006;
    f.scapy.connect(sport);
    let s0 = f.engine.stat();
    let r0 = established_row(&s0, sport);
    let a = f.scapy.cmd(json!({"op": "send", "flags": "SF", "seq_off": 0, "wait": 1.5, "expect": 1}));
    assert_challenge_ack(&a, "SYN+FIN on an established connection");
    let s1 = f.engine.stat();
    let r1 = established_row(&s1, sport); // not CloseWait: the FIN was not taken
    row_counter_up(&r0, &r1, "challenge_acks", 1);
    assert_eq!(stack(&s1, "tcp_segments_out"), stack(&s0, "tcp_segments_out") + 1);
    f.scapy.echo_round("open");
}

/// SYN+RST: dropped and counted at a listener (RFC 9293 §3.10.7.2: a RST
/// there is ignored); in the window of an established connection it gets
/// a challenge ACK (RFC 5961 §3.2 and §4.2 agree) and the connection stays.
#[test]
fn invalid_flags_syn_rst_is_dropped_and_counted() {
    let Some(mut f) = setup("invalid_flags_syn_rst", "advsr") else { return };
    assert_listener_drops(&mut f, "SR", 42002);

    let sport = 41007;
    f.scapy.connect(sport);
    let s0 = f.engine.stat();
    let r0 = established_row(&s0, sport);
    let a = f.scapy.cmd(json!({"op": "send", "flags": "SR", "seq_off": 100, "wait": 1.5, "expect": 1}));
    assert_challenge_ack(&a, "SYN+RST in the window of an established connection");
    let s1 = f.engine.stat();
    let r1 = established_row(&s1, sport);
    row_counter_up(&r0, &r1, "challenge_acks", 1);
    assert_eq!(stack(&s1, "tcp_connections_freed"), stack(&s0, "tcp_connections_freed"));
    f.scapy.echo_round("open");
}

/// No flags at all: dropped and counted at a listener (RFC 9293 §3.10.7.2:
/// neither RST, ACK nor SYN); on an established connection dropped without
/// an answer and its data not taken (RFC 9293 §3.10.7.4 fifth: "if the ACK
/// bit is off, drop the segment and return").
#[test]
fn invalid_flags_none_is_dropped_and_counted() {
    let Some(mut f) = setup("invalid_flags_none", "advnf") else { return };
    assert_listener_drops(&mut f, "", 42003);

    let sport = 41008;
    f.scapy.connect(sport);
    let s0 = f.engine.stat();
    let r0 = established_row(&s0, sport);
    let a = f.scapy.cmd(json!({"op": "send", "flags": "", "payload": "null", "seq_off": 0, "wait": 1.0}));
    assert_silence(&a, "a segment without flags on an established connection");
    let s1 = f.engine.stat();
    let r1 = established_row(&s1, sport);
    assert_eq!(echo_bytes_in(&s1), 0, "data of a flagless segment must not be taken: {}", s1["services"]);
    row_counter_up(&r0, &r1, "dropped_segments", 1);
    assert_eq!(stack(&s1, "tcp_segments_in"), stack(&s0, "tcp_segments_in") + 1);
    assert_eq!(stack(&s1, "tcp_segments_out"), stack(&s0, "tcp_segments_out"));
    f.scapy.echo_round("null");
    let s2 = f.engine.stat();
    established_row(&s2, sport);
    assert_eq!(echo_bytes_in(&s2), 4, "{}", s2["services"]);
}

/// A helper script in `ns` under `timeout`, its stdout lines on a channel
/// (see [`json_line`]); stopped on drop (SIGTERM, 200 ms, SIGKILL).
fn spawn_json(ns: &str, secs: u32, script_name: &str, args: &[&str]) -> ChildGuard {
    let path = script(script_name);
    let mut argv = vec!["python3", path.as_str()];
    argv.extend_from_slice(args);
    ChildGuard::spawn_lines(
        ns_command(ns, Duration::from_secs(secs.into()), 5, &argv).stdin(Stdio::null()).stderr(Stdio::piped()),
        Duration::from_millis(200),
    )
}

fn json_line(rx: &Receiver<String>, secs: u64, what: &str) -> Value {
    let line = rx
        .recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|e| panic!("{what}: no output within {secs} s ({e})"));
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{what} said {line:?}: {e}"))
}

/// RFC 4987 §3.6: under a SYN flood (~3 s at full speed, random source ports)
/// the listener falls back to SYN cookies, state and memory stay bounded
/// (memory_in_use ≤ memory_cap throughout), and a legitimate client's request
/// during the flood and another after it both succeed.
#[test]
fn rfc4987_syn_flood_syn_cookies_bounded_memory_and_legit_client_served() {
    let Some(f) = setup("rfc4987_syn_flood", "advfl") else { return };
    let lnx = format!("ob-{}-lnx", f.engine.name);
    let s0 = f.engine.stat();
    let cap = n(&s0["memory_cap"]);
    assert_eq!(cap, 64 << 20, "--memory-cap 64MiB");
    let mac = s0["link"]["mac"].as_str().expect("link mac").to_string();
    // The legitimate client must find the engine's MAC: resolve it before the
    // flood. Under 90k SYN/s on a loaded 2-core machine the engine's receive
    // ring overflows and a fresh ARP request can be among the frames the
    // kernel drops (rx_kernel_drops); what this test checks is SYN cookies.
    let _ = in_ns(&lnx, &["ping", "-c", "1", "-W", "2", "10.77.0.2"]);

    let t0 = Instant::now();
    let flood = spawn_json(
        &lnx,
        60,
        "adv_flood.py",
        &["--dst-mac", &mac, "--distinct", "100000", "--count", "400000", "--seconds", "3"],
    );
    let flood_out = flood.lines();
    let started = json_line(flood_out, 30, "adv_flood.py");
    assert_eq!(started["flooding"], json!(true), "{started}");

    // A legitimate kernel client during the flood.
    let client = spawn_json(&lnx, 40, "adv_client.py", &["--timeout", "30"]);
    let client_out = client.lines();
    let mut max_mem = 0;
    let mut max_conns = 0;
    let mut during = Vec::new();
    let mut flood_report = None;
    while t0.elapsed() < Duration::from_secs(45) {
        let s = f.engine.stat();
        let mem = n(&s["memory_in_use"]);
        assert!(mem <= cap, "memory_in_use {mem} > memory_cap {cap} during the flood");
        max_mem = max_mem.max(mem);
        max_conns = max_conns.max(s["connections"].as_array().map_or(0, Vec::len));
        during.push(stack(&s, "tcp_syncookies_sent"));
        if flood_report.is_none() {
            if let Ok(line) = flood_out.try_recv() {
                flood_report = Some(serde_json::from_str::<Value>(&line).unwrap_or(json!({"raw": line})));
            }
        }
        if flood_report.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let flood_report = flood_report.expect("the flood did not finish within 45 s");
    drop(flood);
    let legit = json_line(client_out, 40, "adv_client.py (during the flood)");
    drop(client);
    eprintln!("flood: {flood_report}; legit client during it: {legit}; max memory {max_mem} B, max connections {max_conns}");

    assert!(n(&flood_report["sent"]) >= 50_000, "the flood was too small to mean anything: {flood_report}");
    assert!(
        during.iter().any(|&c| c > 0),
        "no SYN cookies sent while the flood ran: samples {during:?}"
    );
    assert_eq!(legit["ok"], json!(true), "the legitimate request during the flood failed: {legit}");

    // After the flood: the engine still serves, memory still within the cap.
    let client2 = spawn_json(&lnx, 40, "adv_client.py", &["--timeout", "30", "--message", "after the flood\n"]);
    let client2_out = client2.lines();
    let legit2 = json_line(client2_out, 40, "adv_client.py (after the flood)");
    drop(client2);
    assert_eq!(legit2["ok"], json!(true), "the legitimate request after the flood failed: {legit2}");

    let s1 = f.engine.stat();
    let mem = n(&s1["memory_in_use"]);
    assert!(mem <= cap, "memory_in_use {mem} > memory_cap {cap} after the flood");
    let sent = stack(&s1, "tcp_syncookies_sent");
    assert!(sent > 0, "tcp_syncookies_sent is 0 after the flood: {}", s1["stack"]);
    assert!(
        stack(&s1, "tcp_syncookies_accepted") >= 1,
        "the legitimate client should have come in through a cookie (SYN queue full): {}",
        s1["stack"]
    );
    assert!(
        stack(&s1, "tcp_syn_queue_adds") <= 128 + 16,
        "the SYN queue must stay bounded (RFC 4987 §3.6): {}",
        s1["stack"]
    );
    // Embryonic state is bounded by the SYN queue, not by the flood.
    assert!(max_conns <= 256, "{max_conns} connections in stat during the flood: state grew with the flood");
    assert!(sent + stack(&s1, "tcp_syn_queue_adds") >= 10_000, "too few flood SYNs reached the listener: {}", s1["stack"]);
    eprintln!(
        "after: cookies sent {sent}, accepted {}, syn queue adds {}, memory {mem} B of {cap} B, link {}",
        stack(&s1, "tcp_syncookies_accepted"),
        stack(&s1, "tcp_syn_queue_adds"),
        s1["link"]["counters"]
    );
}

/// One side's legitimate clients under a SYN flood: the flood (3 s, from
/// Linux's address, random ports) is started, then `adv_connects.py` opens
/// connection after connection to 10.77.0.2:7 for 2.5 s while it runs.
fn legit_connects_under_flood(lnx: &str, mac: &str, who: &str) -> (Value, Value) {
    let _ = in_ns(lnx, &["ping", "-c", "1", "-W", "2", ENGINE_IP]);
    let pps = std::env::var("OB_FLOOD_PPS").unwrap_or_else(|_| "50000".into());
    let flood = spawn_json(lnx, 60, "adv_flood.py", &["--dst-mac", mac, "--distinct", "100000", "--count", "400000", "--seconds", "3", "--pps", &pps]);
    let started = json_line(flood.lines(), 30, "adv_flood.py");
    assert_eq!(started["flooding"], json!(true), "{started}");
    let client = spawn_json(lnx, 40, "adv_connects.py", &["--seconds", "2.5", "--timeout", "5"]);
    let _ = json_line(client.lines(), 30, "adv_connects.py");
    let legit = json_line(client.lines(), 40, &format!("adv_connects.py against {who}"));
    let report = json_line(flood.lines(), 40, &format!("adv_flood.py against {who}"));
    (legit, report)
}

/// RFC 4987 under load, against Linux in the same run: legitimate clients
/// connecting while a SYN flood runs get their connections as quickly (p99
/// within 3× Linux's under the same flood, on the same interface) and none
/// fails. Linux: the engine stopped, 10.77.0.2/24 given to the kernel on
/// eng0, a Python listener on port 7 (kernel SYN cookies on, as by default).
///
/// The same flood for both: 50,000 SYN/s (`OB_FLOOD_PPS`) for 3 s. Unpaced,
/// the flood is not the same: on veth the sender's own CPU does Linux's
/// receive work, which slows it to about half the rate it reaches against
/// the engine. Linux's p99 is taken as at least 1 ms: on the 2-core CI
/// machine sub-millisecond tails are scheduling noise (measured 0.27–0.52
/// ms for Linux, 0.53–0.83 ms for the engine), while the failure guarded
/// against costs seconds (a SYN the kernel drops for a full receive ring
/// waits 1 s for its retransmission) or tens of milliseconds. The test
/// runs alone (no other test of this file beside it).
#[test]
fn syn_flood_legit_connect_p99_within_3x_linux() {
    if skip_unless_root("syn_flood_legit_connect_p99_within_3x_linux") {
        return;
    }
    require_tools();
    let _machine = whole_machine();
    let name = lab_name("advp99");
    let lab = lab(&LabConfig::new(&name));
    let lnx = format!("ob-{name}-lnx");
    let eng = format!("ob-{name}-eng");
    drop_kernel_rsts(&lnx);
    let engine = EngineProc::start(&eng, &name, &["--link", "af_packet:eng0", "--addr", "10.77.0.2/24", "--memory-cap", "64MiB"]);
    let mac = engine.stat()["link"]["mac"].as_str().expect("link mac").to_string();
    let (ours, ours_flood) = legit_connects_under_flood(&lnx, &mac, "the engine");
    let s = engine.stat();
    eprintln!("engine: legit {ours}; flood {ours_flood}; link {}", s["link"]["counters"]);
    drop(engine.stop());

    let added = in_ns(&eng, &["ip", "addr", "add", "10.77.0.2/24", "dev", "eng0"]);
    assert!(added.status.success(), "ip addr add: {}", String::from_utf8_lossy(&added.stderr));
    let listener = ChildGuard::spawn_lines(
        ns_command(
            &eng,
            Duration::from_secs(60),
            5,
            &[
                "python3",
                "-c",
                "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
                 s.bind(('0.0.0.0',7))\ns.listen(4096)\nprint('ready',flush=True)\n\
                 while True:\n    c,_=s.accept()\n    c.close()\n",
            ],
        )
        .stdin(Stdio::null()),
        Duration::from_millis(200),
    );
    assert_eq!(listener.line(Duration::from_secs(10)).as_deref(), Some("ready"), "the Linux listener did not start");
    let (linux, linux_flood) = legit_connects_under_flood(&lnx, &mac, "Linux");
    eprintln!("linux: legit {linux}; flood {linux_flood}");
    drop(listener);
    drop(lab);

    for (who, r, flood) in [("the engine", &ours, &ours_flood), ("Linux", &linux, &linux_flood)] {
        assert!(n(&flood["sent"]) >= 50_000, "the flood against {who} was too small to mean anything: {flood}");
        assert!(n(&r["n"]) >= 20, "too few legitimate connections against {who}: {r}");
    }
    assert_eq!(n(&ours["failed"]), 0, "legitimate connections failed under the flood: {ours}");
    let (p_ours, p_linux) = (ours["p99_ms"].as_f64().unwrap(), linux["p99_ms"].as_f64().unwrap());
    eprintln!("legitimate connect p99 under a SYN flood: engine {p_ours:.2} ms, Linux {p_linux:.2} ms ({:.2}×)", p_ours / p_linux);
    let bound = 3.0 * p_linux.max(1.0);
    assert!(
        p_ours <= bound,
        "connect p99 {p_ours:.2} ms under the flood, more than {bound:.2} ms (3× Linux's {p_linux:.2} ms, at least 1 ms): {ours} vs {linux}"
    );
}
