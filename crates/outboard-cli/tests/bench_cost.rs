//! `outboard bench cost`: a short run of both stacks, checked for the JSON
//! shape and for counts that say the workload ran (both moved the segments
//! asked for, full-sized, every byte verified inside the bench) and were
//! counted (positive instructions per segment). No ratio is asserted: the
//! figures belong in docs/PERFORMANCE.md, not in a test. Bad flags exit 2.
//! Where neither hardware counters nor valgrind are here, the bench must say
//! so and exit 1; scripts/test.sh installs valgrind, so CI counts.

#![allow(clippy::disallowed_methods)] // a wall-clock bound on the run

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

fn valgrind_here() -> bool {
    Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success())
}

fn positive(v: &Value, key: &str) -> f64 {
    let x = v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number: {v}"));
    assert!(x.is_finite() && x > 0.0, "{key} = {x}: {v}");
    x
}

#[test]
fn bench_cost_counts_both_stacks_per_segment() {
    let t0 = Instant::now();
    let out = Command::new(OUTBOARD)
        .args(["bench", "cost", "--json", "--segments", "400", "--warmup", "100"])
        .output()
        .expect("run outboard");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && !valgrind_here() && stderr.contains("no valgrind") {
        // A machine with neither way to count: the refusal is the behaviour.
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        return;
    }
    assert!(out.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(t0.elapsed() < Duration::from_secs(300), "took {:?}", t0.elapsed());
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}"));
    let method = v["method"].as_str().expect("method");
    assert!(["perf", "callgrind"].contains(&method), "{stdout}");
    assert_eq!(v["perf_unavailable"].is_null(), method == "perf", "{stdout}");
    for (key, name) in [("ours", "outboard"), ("smoltcp", "smoltcp")] {
        let s = &v[key];
        assert_eq!(s["stack"], name, "{stdout}");
        assert!(s["segments"].as_u64().expect("segments") >= 400, "{stdout}");
        // Full-sized segments: MSS 1460 less options.
        let bytes = positive(s, "payload_bytes_per_segment");
        assert!((1400.0..=1460.0).contains(&bytes), "{key}: {bytes} bytes per segment");
        positive(s, "acks_per_segment");
        for k in ["send_instructions", "receive_instructions", "send_ns", "receive_ns"] {
            positive(s, k);
        }
        assert_eq!(s["send_cycles"].is_null(), method != "perf", "{stdout}");
    }
    for k in ["ratio_send_instructions", "ratio_receive_instructions", "ratio_send_ns", "ratio_receive_ns"] {
        positive(&v, k);
    }
    assert!(v["command"].as_str().expect("command").starts_with("outboard bench cost"), "{stdout}");
}

#[test]
fn bench_cost_refuses_bad_flags_with_exit_2() {
    for args in [
        &["bench", "cost", "--segments", "5"][..],
        &["bench", "cost", "--method", "cycles"],
        &["bench", "cost", "--warmup", "x"],
    ] {
        let out = Command::new(OUTBOARD).args(args).output().expect("run outboard");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = Command::new(OUTBOARD).args(["bench", "cost", "--phase", "nobody:send"]).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown phase"));
}
