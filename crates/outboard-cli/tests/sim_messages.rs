//! `outboard sim messages`: each service under seeded faults exits 0 with a
//! verified JSON report, the same seed gives the same report, impossible
//! settings exit 2 naming the range, and the pcap it writes decodes in tshark
//! with the Wireshark dissector (requests, responses, response-acks).
//!
//! Without tshark the pcap test says so on stderr and passes, unless `CI` is
//! set (CI installs tshark), where it fails.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::{num, outboard, stdout_json, test_dir, text};

const FAULTS: [&str; 6] = ["--loss", "2%", "--reorder", "5%", "--duplicate", "2%"];

/// `sim messages --service SERVICE --count COUNT` under `FAULTS` with `extra`: must exit 0; its JSON.
fn run_ok(service: &str, count: u64, extra: &[&str]) -> Value {
    let count_s = count.to_string();
    let mut args = vec!["sim", "messages", "--service", service, "--count", &count_s, "--json"];
    args.extend(FAULTS);
    args.extend(extra);
    let out = outboard(&args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    let v = stdout_json(&out);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["service"], service, "{v}");
    assert_eq!(v["count"], count, "{v}");
    assert!(v["reason"].is_null(), "{v}");
    assert!(num(&v, "virtual_seconds") > 0.0, "{v}");
    assert!(num(&v, "faults.dropped") > 0.0, "the faults did something: {v}");
    assert!(num(&v, "faults.duplicated") > 0.0, "{v}");
    let endpoints = v["endpoints"].as_array().expect("endpoints");
    assert_eq!(endpoints.len(), 2, "{v}");
    for e in endpoints {
        assert!(num(e, "frames_in") > 0.0 && num(e, "frames_out") > 0.0, "{e}");
    }
    v
}

#[test]
fn reliable_messages_arrive_once_in_order_under_faults() {
    let v = run_ok("reliable", 300, &["--size", "1KiB"]);
    assert_eq!(v["size"], 1024);
    assert_eq!(v["delivered"], 300, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["bytes"], 300 * 1024, "{v}");
    assert!(num(&v, "retransmissions") > 0.0, "2% loss needs retransmissions: {v}");
    assert!(num(&v, "throughput_mbit") > 0.0, "{v}");
    assert_eq!(v["endpoints"][0]["role"], "sender");
    assert_eq!(v["endpoints"][0]["messages_acked"], 300, "{v}");
    assert!(v["latency_p50_ms"].is_null(), "{v}");
}

#[test]
fn rpc_calls_are_answered_and_run_exactly_once_under_faults() {
    let v = run_ok("rpc", 300, &["--outstanding", "8", "--seed", "3"]);
    assert_eq!(v["delivered"], 300, "{v}");
    assert_eq!(v["outstanding"], 8, "{v}");
    assert_eq!(v["bytes"], 2 * 300 * 64, "requests and responses: {v}");
    let server = &v["endpoints"][1];
    assert_eq!(server["role"], "server");
    assert_eq!(server["requests_executed"], 300, "{v}");
    let (p50, p99) = (num(&v, "latency_p50_ms"), num(&v, "latency_p99_ms"));
    // One-way delay 1 ms: no call is answered in under a round trip.
    assert!((2.0..=p99).contains(&p50), "p50 {p50} ms, p99 {p99} ms");
    assert!(num(&v, "per_second") > 0.0, "{v}");
    // The same seed replays the same run.
    assert_eq!(v, run_ok("rpc", 300, &["--outstanding", "8", "--seed", "3"]));
}

#[test]
fn datagrams_delivered_are_intact_and_the_rest_counted_lost() {
    let v = run_ok("datagram", 500, &["--size", "2KiB"]);
    let (delivered, lost) = (num(&v, "delivered"), num(&v, "lost"));
    assert_eq!(delivered + lost, 500.0, "{v}");
    assert!(delivered > 400.0 && lost > 0.0, "2% loss of 2-frame datagrams: {v}");
    assert_eq!(num(&v, "retransmissions"), 0.0, "{v}");
}

#[test]
fn the_text_report_names_the_result_time_and_latency() {
    let out = outboard(&["sim", "messages", "--count", "100", "--loss", "5%"]);
    assert!(out.status.success(), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    for needle in ["result           OK", "service          rpc, 100 calls of 64 B", "virtual time", "calls/s", "call latency     p50", "retransmissions", "faults"] {
        assert!(s.contains(needle), "expected {needle:?} in:\n{s}");
    }
}

#[test]
fn impossible_settings_exit_2_naming_the_range() {
    for (args, needle) in [
        (&["--count", "0"][..], "must be between 1 and 1000000"),
        (&["--size", "2MiB"][..], "must be between 8 B and 1 MiB"),
        (&["--size", "lots"][..], "not a size"),
        (&["--loss", "100%"][..], "must be between 0% and 25%"),
        (&["--loss", "20%", "--corrupt", "10%"][..], "must be between 0% and 25%"),
        (&["--outstanding", "0"][..], "must be between 1 and 4096"),
        (&["--service", "carrier-pigeon"][..], "possible values: reliable, rpc, datagram"),
    ] {
        let out = outboard(&[&["sim", "messages"], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
    }
}

#[test]
fn a_run_that_cannot_finish_in_time_exits_1_and_says_why() {
    let out = outboard(&["sim", "messages", "--service", "reliable", "--count", "1000", "--size", "64KiB", "--time-limit-s", "0.01", "--seed", "9"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("seed 9") && err.contains("not finished after 0.01 s"), "stderr: {err}");
}

/// True when tshark runs; false (after saying so) when it is missing outside CI.
fn have_tshark() -> bool {
    match Command::new("tshark").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        other => {
            let why = match other {
                Ok(o) => format!("`tshark --version` exited with {}", o.status),
                Err(e) => format!("tshark could not be run: {e}"),
            };
            if std::env::var_os("CI").is_some() {
                panic!("{why}; CI must install tshark (apt-get install tshark)");
            }
            eprintln!("SKIPPED: the sim messages pcap test needs tshark: {why}. Install it with `apt-get install tshark`.");
            false
        }
    }
}

#[test]
fn the_rpc_pcap_decodes_in_tshark_with_the_dissector() {
    if !have_tshark() {
        return;
    }
    let dir = test_dir("ob-sim-messages", "pcap");
    let file = dir.join("rpc.pcap");
    let out = outboard(&["sim", "messages", "--service", "rpc", "--count", "50", "--pcap", file.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", text(&out));
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/outboard-msg.lua");
    let o = Command::new("tshark")
        .arg("-r")
        .arg(&file)
        .arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .args(["-T", "fields", "-e", "outboard_msg.kind"])
        .output()
        .expect("run tshark");
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "tshark failed: {stderr}\n{stdout}");
    assert!(!stderr.contains("Lua"), "tshark reported a Lua problem: {stderr}");
    let count = |kind: &str| stdout.lines().filter(|l| l.trim() == kind).count();
    // Kind numbers (docs/MESSAGES.md): 4 request, 5 response, 6 response-ack.
    let (requests, responses, response_acks) = (count("4"), count("5"), count("6"));
    assert!(requests >= 50 && responses >= 50, "{requests} requests, {responses} responses:\n{stdout}");
    assert!(response_acks > 0, "no response-ack decoded:\n{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
