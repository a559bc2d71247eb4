//! Multi-shard engines against the Linux stack in the lab (root): an
//! engine with `--shards 2` on af_packet (a fanout group) and on af_xdp
//! (two queues of a two-queue veth) answers pings, holds 200 concurrent
//! echo connections from Linux with each on the shard its Toeplitz hash
//! names (the kernel's own choice of socket or queue is a different hash,
//! so frames are forwarded between shards, and counted), echoes a bulk
//! transfer byte-exact clean and through the relay's loss, reordering and
//! duplication, and frees every connection afterwards.

#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

mod support;

use outboard_lab::{Impairment, LabConfig};
use outboard_stack::steer::{shard_for, FlowTuple};
use std::io::Write;
use std::net::SocketAddrV4;
use std::time::Duration;
use support::engine::EngineProc;
use support::netns::{lab, lab_name, need, ns_run, ns_spawn_lines, skip_unless_root};
use support::{script, text};

const ENGINE_ADDR: &str = "10.77.0.2";
const POLL: Duration = Duration::from_millis(100);

fn rows(st: &serde_json::Value) -> Vec<serde_json::Value> {
    st["connections"].as_array().cloned().unwrap_or_default()
}

/// Every connection row sits on the shard the hash of its tuple (as the
/// engine receives it) names among `shards`; returns how many each shard holds.
fn check_placement(st: &serde_json::Value, shards: u16) -> Vec<usize> {
    let mut per = vec![0; usize::from(shards)];
    for r in rows(st) {
        let local: SocketAddrV4 = r["local"].as_str().unwrap().parse().unwrap();
        let remote: SocketAddrV4 = r["remote"].as_str().unwrap().parse().unwrap();
        let t = FlowTuple { src_ip: *remote.ip(), dst_ip: *local.ip(), src_port: remote.port(), dst_port: local.port() };
        let want = shard_for(&t, shards);
        let shard = r["shard"].as_u64().unwrap();
        assert_eq!(shard, u64::from(want), "connection {local} <- {remote} is on shard {shard}, its hash names {want}");
        per[usize::from(want)] += 1;
    }
    per
}

fn many_connections(kind: &str, tag: &str) {
    need("python3", "python3");
    need("ping", "iputils-ping");
    const N: usize = 200;
    let name = lab_name(tag);
    let mut cfg = LabConfig::new(&name);
    cfg.queues = 2;
    let lab = lab(&cfg);
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), kind, &["--shards", "2"]);
    let st = e.stat();
    assert_eq!(st["shards"].as_array().map(Vec::len), Some(2), "two shards: {}", st["shards"]);
    // ARP (shard 0 answers, shard 1 learns from its copy) and ICMP echo.
    let o = ns_run(lab.linux_ns(), 30, &["ping", "-n", "-c", "3", "-W", "2", ENGINE_ADDR]);
    assert!(o.status.success(), "ping: {}", text(&o));
    let mut c = ns_spawn_lines(
        lab.linux_ns(),
        150,
        &["python3", &script("interop_many.py"), ENGINE_ADDR, "7", &N.to_string(), "120", "--hold"],
        true,
    );
    let held = c.line(Duration::from_secs(120));
    if held.as_deref() != Some(&format!("HELD {N}")) {
        let (st, rest) = c.finish_lines(Duration::from_secs(5));
        panic!("client did not hold {N} connections: {held:?} {st:?} {rest:?}\n{}", e.log_text());
    }
    let (st, at) = e.poll_stat(Duration::from_secs(10), POLL, |s| rows(s).iter().filter(|r| r["state"] == "Established").count() >= N);
    assert!(at.is_some(), "engine shows {} connections, not {N} established", rows(&st).len());
    let per = check_placement(&st, 2);
    assert!(per.iter().all(|n| *n > N / 5), "both shards hold connections: {per:?}");
    let shard_rows = st["shards"].as_array().unwrap();
    let drops: u64 = shard_rows.iter().map(|r| r["forward_drops"].as_u64().unwrap_or(0)).sum();
    let per_shard: Vec<String> = shard_rows
        .iter()
        .map(|r| format!("shard {}: frames in {} out {}, forwarded out {} in {}", r["shard"], r["rx_frames"], r["tx_frames"], r["forwarded_out"], r["forwarded_in"]))
        .collect();
    eprintln!("{kind} 2 shards, {N} connections {per:?}; {}", per_shard.join("; "));
    // The kernel may hand a flow's frames to either shard (its hash is not
    // ours): what must hold is the placement above, and no frame lost between shards.
    assert_eq!(drops, 0, "{per_shard:?}");
    let mut stdin = c.stdin().expect("stdin");
    writeln!(stdin).expect("release the client");
    drop(stdin);
    let (status, lines) = c.finish_lines(Duration::from_secs(60));
    let v: serde_json::Value = lines.iter().rev().find_map(|l| serde_json::from_str(l).ok()).expect("client JSON");
    assert!(status.is_some_and(|s| s.success()) && v["ok"] == true && v["matched"] == N as u64, "client: {v}");
    let (st, gone) = e.poll_stat(Duration::from_secs(30), POLL, |s| rows(s).is_empty());
    assert!(gone.is_some(), "connections left: {}", rows(&st).len());
    assert_eq!(st["stack"]["tcp_resets_out"].as_u64().unwrap_or(0), 0, "resets: {}", st["stack"]);
    // A bulk echo on top (one connection: one shard, whichever its hash names).
    let o = ns_run(lab.linux_ns(), 130, &["python3", &script("interop_echo_client.py"), ENGINE_ADDR, "7", &(32u64 << 20).to_string(), "120"]);
    assert!(o.status.success(), "bulk echo: {}", text(&o));
    drop(e);
    lab.teardown().expect("lab down");
}

#[test]
fn two_shards_on_af_packet_hold_linux_connections_on_their_hash_shards() {
    if skip_unless_root("two_shards_on_af_packet_hold_linux_connections_on_their_hash_shards") {
        return;
    }
    many_connections("af_packet", "shp");
}

#[test]
fn two_shards_on_two_af_xdp_queues_hold_linux_connections_on_their_hash_shards() {
    if skip_unless_root("two_shards_on_two_af_xdp_queues_hold_linux_connections_on_their_hash_shards") {
        return;
    }
    many_connections("af_xdp", "shx");
}

#[test]
fn two_shards_echo_byte_exact_through_loss_reordering_and_duplication() {
    if skip_unless_root("two_shards_echo_byte_exact_through_loss_reordering_and_duplication") {
        return;
    }
    need("python3", "python3");
    let name = lab_name("shi");
    let mut cfg = LabConfig::new(&name);
    cfg.impairment = Impairment { loss: 0.01, duplicate: 0.01, reorder: 0.1, reorder_delay_ms: 2.0, delay_ms: 1.0, ..Impairment::default() };
    cfg.seed = 4300;
    let lab = lab(&cfg);
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &["--shards", "2"]);
    // Several connections at once, so both shards carry some.
    let mut kids = Vec::new();
    for _ in 0..4 {
        kids.push(ns_spawn_lines(
            lab.linux_ns(),
            200,
            &["python3", &script("interop_echo_client.py"), ENGINE_ADDR, "7", &(8u64 << 20).to_string(), "180"],
            false,
        ));
    }
    for mut k in kids {
        let (status, lines) = k.finish_lines(Duration::from_secs(200));
        let v: Option<serde_json::Value> = lines.iter().rev().find_map(|l| serde_json::from_str(l).ok());
        assert!(status.is_some_and(|s| s.success()) && v.as_ref().is_some_and(|v| v["ok"] == true), "echo under faults: {status:?} {lines:?}\n{}", e.log_text());
    }
    let st = e.stat();
    eprintln!("impaired 2-shard echo: shards {}", st["shards"]);
    drop(e);
    let down = lab.teardown().expect("lab down");
    assert!(down.relay_report.is_some(), "the relay ran");
}
