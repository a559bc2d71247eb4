//! `outboard bench messages`: a short run, checked for the JSON shape (rows
//! `rpc`, `rpc-vs-tcp`, `rpc-board` and `reliable` on the fabric, and as
//! root also `rpc` over the lab's veth with `--veth`; the
//! machine, the notes) and for numbers that are positive and finite where
//! present. The ratios are not checked: the machines are noisy.

mod support;

use serde_json::Value;
use std::process::Command;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

fn positive(r: &Value, key: &str) -> Option<f64> {
    match &r[key] {
        Value::Null => None,
        v => {
            let x = v
                .as_f64()
                .unwrap_or_else(|| panic!("{key} is not a number: {r}"));
            assert!(x.is_finite() && x > 0.0, "{key} = {x}: {r}");
            Some(x)
        }
    }
}

#[test]
fn bench_messages_json_has_a_row_per_service() {
    // As root (CI), the veth row too; without root it would fail to build its lab.
    let veth = support::netns::is_root();
    let out = Command::new(OUTBOARD)
        .args([
            "bench",
            "messages",
            "--json",
            "--count",
            "200",
            "--seconds",
            "10",
        ])
        .args(veth.then_some("--veth"))
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
    let mut keys: Vec<&String> = v.as_object().expect("an object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["machine", "notes", "rows"], "{stdout}");
    assert!(
        !v["machine"].as_str().expect("machine").is_empty(),
        "{stdout}"
    );
    let notes = v["notes"].as_array().expect("notes");
    assert!(notes.iter().all(Value::is_string), "{stdout}");
    let rows = v["rows"].as_array().expect("rows");
    let services: Vec<&str> = rows
        .iter()
        .map(|r| r["service"].as_str().expect("service"))
        .collect();
    if veth {
        assert_eq!(services, ["rpc", "rpc-vs-tcp", "rpc-board", "rpc", "reliable"], "{stdout}");
        assert_eq!(rows[3]["link"], "veth", "{stdout}");
    } else {
        assert_eq!(services, ["rpc", "rpc-vs-tcp", "rpc-board", "reliable"], "{stdout}");
    }
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["link"], if veth && i == 3 { "veth" } else { "fabric" }, "{r}");
        let nums: Vec<Option<f64>> = [
            "outboard_p50_us",
            "outboard_p99_us",
            "kernel_p50_us",
            "kernel_p99_us",
            "outboard_rate",
            "kernel_rate",
        ]
        .iter()
        .map(|k| positive(r, k))
        .collect();
        // Both rates in every row; round trips in the RPC rows.
        assert!(nums[4].is_some() && nums[5].is_some(), "{r}");
        if r["service"] != "reliable" {
            assert!(nums.iter().all(Option::is_some), "{r}");
            assert!(
                nums[0] <= nums[1] && nums[2] <= nums[3],
                "p50 above p99: {r}"
            );
            assert_eq!(r["rate_unit"], "calls/s", "{r}");
        } else {
            assert_eq!(r["rate_unit"], "bytes/s", "{r}");
        }
    }
}
