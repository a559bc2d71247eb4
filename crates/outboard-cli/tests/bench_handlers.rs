//! `outboard bench handlers`: a short run, checked for the JSON shape (rows
//! `handler`, `board` and `kernel`; `invoke_ns`, `epoch_overhead`, the
//! goals) and for numbers that are positive and finite. No performance is
//! asserted: the machines are noisy. Bad flags exit 2.

#![allow(clippy::disallowed_methods)] // a wall-clock bound on the run

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

fn positive(v: &Value, key: &str) -> f64 {
    let x = v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number: {v}"));
    assert!(x.is_finite() && x > 0.0, "{key} = {x}: {v}");
    x
}

#[test]
fn bench_handlers_json_has_the_three_servers_and_the_sandbox_costs() {
    let t0 = Instant::now();
    let out = Command::new(OUTBOARD)
        .args(["bench", "handlers", "--json", "--calls", "200", "--seconds", "1"])
        .output()
        .expect("run outboard");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    // Bounded: every case within --seconds, the engines' starts within seconds.
    assert!(t0.elapsed() < Duration::from_secs(120), "took {:?}", t0.elapsed());
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}"));
    let rows = v["rows"].as_array().expect("rows");
    let servers: Vec<&str> = rows.iter().map(|r| r["server"].as_str().expect("server")).collect();
    assert_eq!(servers, ["handler", "board", "kernel"], "{stdout}");
    for r in rows {
        let (p50, p99) = (positive(r, "p50_us"), positive(r, "p99_us"));
        assert!(p50 <= p99, "p50 above p99: {r}");
        positive(r, "rate");
        positive(r, "p50_vs_kernel");
        positive(r, "rate_vs_kernel");
        assert!(r["calls"].as_u64().expect("calls") > 0, "{r}");
        assert!(r["rate_calls"].as_u64().expect("rate_calls") > 0, "{r}");
    }
    for key in ["invoke_ns", "echo_invoke_ns", "handler_board_p50", "handler_kernel_p50"] {
        positive(&v, key);
    }
    assert!(v["invocations"].as_u64().expect("invocations") >= 1024, "{stdout}");
    // The checks' cost may measure as nothing (or below it) on a noisy machine: finite is all.
    for key in ["epoch_overhead", "epoch_overhead_tight"] {
        let x = v[key].as_f64().unwrap_or_else(|| panic!("{key}: {stdout}"));
        assert!(x.is_finite() && x > -1.0, "{key} = {x}");
    }
    for key in ["compute_ms", "compute_tight_ms"] {
        let ms = v[key].as_array().expect(key);
        assert_eq!(ms.len(), 2, "{stdout}");
        assert!(ms.iter().all(|x| x.as_f64().is_some_and(|x| x.is_finite() && x > 0.0)), "{key}: {stdout}");
    }
    for key in ["p50_us", "p99_us", "rate"] {
        positive(&v["builtin_echo"], key);
    }
    let goals: Vec<&str> = v["goals"].as_array().expect("goals").iter().map(|g| g["name"].as_str().expect("name")).collect();
    assert_eq!(goals, ["handler p50 / board p50", "invoke_ns", "epoch_overhead"], "{stdout}");
    assert!(v["goals"].as_array().unwrap().iter().all(|g| g["met"].is_boolean()), "{stdout}");
    assert!(!v["machine"].as_str().expect("machine").is_empty(), "{stdout}");
    assert!(v["notes"].as_array().expect("notes").iter().all(Value::is_string), "{stdout}");
}

#[test]
fn bench_handlers_refuses_bad_flags() {
    for args in [&["--calls", "5"][..], &["--calls", "many"], &["--seconds", "0"], &["--bogus"]] {
        let out = Command::new(OUTBOARD).args(["bench", "handlers"]).args(args).output().expect("run outboard");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!out.stderr.is_empty(), "{args:?}: no message");
    }
}
