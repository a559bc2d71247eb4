//! `outboard bench scale` (no root): a short run at 1 and 2 shards, checked
//! for the JSON shape (a row per shard count and workload, positive
//! throughput, the 1-shard rows the baseline), and the refusal of a shard
//! count of 0. As root: the nginx workload at 1 and 2 shards (nginx under
//! the shim on an N-shard engine and on the kernel, wrk from Linux's side).

mod support;

use serde_json::Value;
use std::process::Command;
use std::time::Duration;
use support::netns::{lab_name, need_all, skip_unless_root};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

#[test]
fn bench_scale_json_has_both_workloads_at_each_shard_count() {
    let out = Command::new(OUTBOARD)
        .args([
            "bench",
            "scale",
            "--shards",
            "1,2",
            "--seconds",
            "0.3",
            "--json",
        ])
        .output()
        .expect("run outboard");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}"));
    let obj = v.as_object().expect("an object");
    assert_eq!(obj.keys().collect::<Vec<_>>(), ["rows"], "{stdout}");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "{stdout}");
    for shards in [1u64, 2] {
        for workload in ["rr", "bulk"] {
            let r = rows
                .iter()
                .find(|r| r["shards"].as_u64() == Some(shards) && r["workload"] == workload)
                .unwrap_or_else(|| panic!("no row for {shards} shard(s), {workload}:\n{stdout}"));
            let ops = r["ops_per_s"].as_f64().expect("ops_per_s");
            let speedup = r["speedup"].as_f64().expect("speedup");
            let efficiency = r["efficiency"].as_f64().expect("efficiency");
            assert!(ops > 0.0, "{shards} shard(s), {workload}: ops_per_s {ops}");
            assert!(speedup > 0.0 && speedup.is_finite(), "{r}");
            assert!((efficiency - speedup / shards as f64).abs() < 1e-9, "{r}");
            if shards == 1 {
                assert_eq!(speedup, 1.0, "{r}");
            }
            assert_eq!(r["mismatches"].as_u64(), Some(0), "{r}");
            assert_eq!(
                r["per_shard"].as_array().map(|a| a.len() as u64),
                Some(shards),
                "{r}"
            );
        }
    }
}

#[test]
fn bench_scale_refuses_zero_shards() {
    for bad in ["0", "", "1,0"] {
        let out = Command::new(OUTBOARD)
            .args(["bench", "scale", "--shards", bad, "--seconds", "0.01"])
            .output()
            .expect("run outboard");
        assert_eq!(out.status.code(), Some(2), "--shards {bad:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--shards"), "--shards {bad:?}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "--shards {bad:?}: printed {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn bench_scale_nginx_measures_the_shim_and_the_kernel_at_each_shard_count() {
    if skip_unless_root("bench_scale_nginx_measures_the_shim_and_the_kernel_at_each_shard_count") {
        return;
    }
    need_all(&[("nginx", "nginx-light"), ("wrk", "wrk")]);
    let shim = support::shim_lib();
    let lab = lab_name("bsng");
    let mut c = Command::new(OUTBOARD);
    c.args(["bench", "scale", "--workload", "nginx", "--shards", "1,2", "--seconds", "1", "--json"])
        .arg("--shim")
        .arg(&shim)
        .args(["--lab-name", &lab]);
    // Two labs, two engines, four nginx runs of 1 s each: well under this.
    let (ok, stdout, stderr) = support::output_within(c, Duration::from_secs(120), Duration::from_secs(10));
    assert!(ok, "bench scale --workload nginx failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{stdout}");
    for (r, shards) in rows.iter().zip([1u64, 2]) {
        assert_eq!(r["workload"], "nginx", "{r}");
        assert_eq!(r["shards"].as_u64(), Some(shards), "{r}");
        let ops = r["ops_per_s"].as_f64().expect("ops_per_s");
        let kernel = r["kernel_ops_per_s"].as_f64().expect("kernel_ops_per_s");
        assert!(ops > 0.0 && kernel > 0.0, "{r}");
        let speedup = r["speedup"].as_f64().expect("speedup");
        assert!((r["efficiency"].as_f64().unwrap() - speedup / shards as f64).abs() < 1e-9, "{r}");
        assert!((r["ratio"].as_f64().unwrap() - ops / kernel).abs() < 1e-9, "{r}");
        if shards == 1 {
            assert_eq!(speedup, 1.0, "{r}");
            assert_eq!(r["kernel_speedup"].as_f64(), Some(1.0), "{r}");
        }
        // Each shard's queue carried frames (the Toeplitz hash spread wrk's 32 connections).
        let frames: Vec<u64> = r["rx_frames_per_shard"]
            .as_array()
            .expect("rx_frames_per_shard")
            .iter()
            .map(|f| f.as_u64().unwrap_or(0))
            .collect();
        assert_eq!(frames.len() as u64, shards, "{r}");
        assert!(frames.iter().all(|f| *f > 0), "{r}");
    }
    // Nothing left behind: the lab's namespaces are gone.
    let ns = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.contains(&format!("ob-{lab}-")), "lab {lab} left behind:\n{ns}");
}
