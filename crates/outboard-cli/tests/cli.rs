//! The `outboard` binary as a user runs it: flags, exit codes, JSON shapes.

mod support;

use support::{outboard, outboard_in, stdout_json as json};

#[test]
fn sim_transfer_json_has_the_documented_fields() {
    let out = outboard(&["sim", "transfer", "--bytes", "256KiB", "--loss", "1%", "--seed", "7", "--json"]);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    for key in ["ok", "bytes", "sha256_match", "virtual_seconds", "goodput_mbit", "retransmits", "seed"] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["ok"], true);
    assert_eq!(v["sha256_match"], true);
    assert_eq!(v["bytes"], 256 * 1024);
    assert_eq!(v["seed"], 7);
    assert!(v["goodput_mbit"].as_f64().unwrap() > 0.0);
}

#[test]
fn sim_transfer_is_reproducible_from_its_seed() {
    let args = ["sim", "transfer", "--bytes", "128KiB", "--loss", "2%", "--reorder", "5%", "--jitter-ms", "1", "--seed", "42", "--json"];
    let a = json(&outboard(&args));
    let b = json(&outboard(&args));
    assert_eq!(a, b);
}

#[test]
fn sim_transfer_both_directions_with_every_fault() {
    let out = outboard(&[
        "sim", "transfer", "--bytes", "512KiB", "--loss", "1%", "--duplicate", "1%", "--reorder", "10%",
        "--corrupt", "0.1%", "--jitter-ms", "2", "--cc", "cubic", "--direction", "both", "--json",
    ]);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    assert_eq!(v["ok"], true);
    assert_eq!(v["direction"], "both");
}

#[test]
fn a_transfer_that_cannot_finish_exits_1_and_names_the_seed() {
    let out = outboard(&["sim", "transfer", "--bytes", "64MiB", "--time-limit-s", "0.05", "--seed", "99"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("seed 99"), "stderr: {err}");
    assert!(err.contains("first wrong byte offset"), "stderr: {err}");
}

#[test]
fn bad_flags_exit_2_with_a_precise_message() {
    for (args, needle) in [
        (&["sim", "transfer", "--loss", "150%"][..], "outside 0..1"),
        (&["sim", "transfer", "--bytes", "lots"][..], "not a size"),
        (&["sim", "transfer", "--cc", "vegas"][..], "unknown congestion controller"),
        (&["sim", "transfer", "--direction", "sideways"][..], "unknown direction"),
        (&["sim", "transfer", "--delay-ms=-3"][..], ">= 0"),
        (&["bench", "nonsense"][..], "unrecognized subcommand"),
    ] {
        let out = outboard(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
    }
}

#[test]
fn bench_checksum_json_has_a_row_per_size() {
    let out = outboard(&["bench", "checksum", "--json", "--seconds", "0.01"]);
    assert!(out.status.success());
    let v = json(&out);
    let rows = v["rows"].as_array().expect("rows");
    let sizes: Vec<u64> = rows.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, [64, 1500, 65536, 1048576]);
    for r in rows {
        for k in ["memcpy_gbps", "checksum_gbps", "copy_checksum_gbps"] {
            assert!(r[k].as_f64().unwrap() > 0.0, "{k} in {r}");
        }
    }
}

#[test]
fn demo_runs_two_engine_processes_on_the_fabric_and_verifies() {
    let dir = std::env::temp_dir().join(format!("ob-demo-{}", std::process::id()));
    let out = outboard_in(&dir, &["demo", "--bytes", "4MiB"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stdout: {text}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("echo verified: byte-identical"), "{text}");
    assert!(text.contains("Demo passed"), "{text}");
}

#[test]
fn sim_demo_runs_and_verifies() {
    let out = outboard(&["sim", "demo", "--bytes", "1MiB"]);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SHA-256 identical"), "{text}");
    assert!(text.contains("faults"), "{text}");
}
