#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test harness
//! Message mailboxes through boards, between engine daemons on the fabric
//! (no root), with loss and reordering on both engines' sends: the Rust
//! examples of `crates/outboard-api` (built by `cargo test --workspace`)
//! attached to `outboard engine --messages` processes.
//!
//! - the key-value example: `msg_kv_server` binds `kv` on engine A and
//!   answers in place; `msg_kv_client` on engine B looks it up by name, puts
//!   and gets every key (blocking, then 32 calls outstanding) and checks each
//!   answer, and a call to a mailbox nobody holds fails with a clear error;
//!   A's `stat` shows each request executed once, retransmissions and all;
//! - the queue-pair ping-pong: `qp_pingpong pong` on A, `ping` on B, every
//!   counter checked through posted receives and one completion queue.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::engine::{start_engine, stat_in, ChildGuard, GRACE};
use support::{example, json_line, test_dir};

const UP: Duration = Duration::from_secs(10);
const KEYS: u64 = 2000;
const ROUNDS: u64 = 2000;
/// Each run's bound (loss makes some calls wait a retransmission).
const RUN: Duration = Duration::from_secs(120);

fn engines(dir: &Path, tag: &str) -> (ChildGuard, ChildGuard) {
    let fabric = format!("fabric:{tag}{}", std::process::id());
    let faults = |seed: &'static str| ["--loss", "1%", "--reorder", "3%", "--seed", seed];
    let a = start_engine(dir, &format!("{tag}-a"), &[&["--link", &fabric, "--addr", "10.0.0.1/24", "--messages"][..], &faults("1")].concat(), UP);
    let b = start_engine(dir, &format!("{tag}-b"), &[&["--link", &fabric, "--addr", "10.0.0.2/24", "--messages"][..], &faults("2")].concat(), UP);
    (a, b)
}

fn app(dir: &Path, name: &str, args: &[&str]) -> ChildGuard {
    let mut c = Command::new(example(name));
    c.args(args).env("OUTBOARD_RUN_DIR", dir).stdin(Stdio::null()).stderr(Stdio::piped());
    ChildGuard::spawn_lines(&mut c, GRACE)
}

/// The child's exit and last JSON line; it must exit 0.
fn finished(mut c: ChildGuard, what: &str) -> serde_json::Value {
    let (st, lines) = c.finish_lines(RUN);
    let out = lines.join("\n");
    assert!(st.is_some_and(|s| s.success()), "{what} failed ({st:?}):\n{out}");
    json_line(&out)
}

#[test]
fn key_value_example_over_rpc_between_engines() {
    let dir = test_dir("ob-msg-boards", "kv");
    let (_a, _b) = engines(&dir, "mkv");
    // Puts, gets, and the one get of a missing key.
    let served = 2 * KEYS + 1;
    let server = app(&dir, "msg_kv_server", &["mkv-a", &served.to_string()]);
    let ready = json_line(&server.line(UP).expect("the server says where it is"));
    assert!(ready["mailbox"].as_str().is_some_and(|m| m.starts_with("10.0.0.1:7373/")), "{ready}");
    let client = app(&dir, "msg_kv_client", &["mkv-b", "10.0.0.1:7373", &KEYS.to_string()]);
    let report = finished(client, "msg_kv_client");
    assert_eq!(report["calls"], 2 * KEYS, "{report}");
    assert_eq!(report["wrong"], 0, "{report}");
    let done = finished(server, "msg_kv_server");
    assert_eq!(done["requests"], served);
    assert_eq!(done["keys"], KEYS);
    // Under loss, every request ran exactly once (retransmissions answered
    // from the reply cache, never handed to the board again).
    let stat = stat_in(&dir, "mkv-a").expect("stat");
    let m = &stat["messages"]["stats"];
    assert_eq!(m["requests_executed"].as_u64(), Some(served), "{m}");
    eprintln!("kv over RPC: {report}; server protocol stats {m}");
}

#[test]
fn queue_pair_ping_pong_between_engines() {
    let dir = test_dir("ob-msg-boards", "qp");
    let (_a, _b) = engines(&dir, "mqp");
    let pong = app(&dir, "qp_pingpong", &["mqp-a", "pong", &ROUNDS.to_string()]);
    let ready = json_line(&pong.line(UP).expect("pong says where it is"));
    let addr = ready["qp"].as_str().expect("qp address").to_string();
    let ping = app(&dir, "qp_pingpong", &["mqp-b", "ping", &addr, &ROUNDS.to_string()]);
    let report = finished(ping, "ping");
    assert_eq!(report["rounds"], ROUNDS, "{report}");
    assert_eq!(finished(pong, "pong")["rounds"], ROUNDS);
    eprintln!("queue-pair ping-pong: {report}");
}
