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
        (&["sim", "transfer", "--loss", "150%"][..], "must be between 0% and 25%"),
        (&["sim", "transfer", "--bytes", "lots"][..], "not a size"),
        (&["sim", "transfer", "--cc", "vegas"][..], "unknown congestion controller"),
        (&["sim", "transfer", "--direction", "sideways"][..], "unknown direction"),
        (&["sim", "transfer", "--delay-ms=-3"][..], "must be between 0 and 1000 ms"),
        (&["bench", "nonsense"][..], "unrecognized subcommand"),
    ] {
        let out = outboard(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
    }
}

/// Impossible settings: exit 2, a message naming the flag, the value and the range that
/// works, and nothing started (no engine, no demo, no simulation), so each is quick.
#[test]
fn impossible_settings_exit_2_naming_the_flag_and_the_range() {
    let dir = std::env::temp_dir().join(format!("ob-bounds-{}", std::process::id()));
    let engine = ["engine", "--link", "fabric:ob-bounds", "--addr", "10.0.0.1/24", "--name", "ob-bounds"];
    let fetch = ["fetch", "--link", "fabric:ob-bounds", "--addr", "10.0.0.2/24", "--connect", "10.0.0.1:7"];
    let with = |base: &[&'static str], more: &[&'static str]| -> Vec<&'static str> { [base, more].concat() };
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (with(&engine, &["--memory-cap", "0"]), "--memory-cap", "must be between 1 MiB and 1 TiB"),
        (with(&engine, &["--mtu", "100"]), "--mtu", "must be between 576 and 9000"),
        (with(&engine, &["--loss", "100%"]), "--loss", "must be between 0% and 25%"),
        (with(&engine, &["--delay-ms", "1e9"]), "--delay-ms", "must be between 0 and 1000 ms"),
        (with(&engine, &["--run-for-s", "0"]), "--run-for-s", "must be between 0.001 and 31536000 s"),
        (with(&engine, &["--loss", "20%", "--corrupt", "10%"]), "--loss 20% with --corrupt 10%", "must be between 0% and 25%"),
        (with(&fetch, &["--timeout-s", "0"]), "--timeout-s", "must be between 0.001"),
        (with(&fetch, &["--recv-limit", "0"]), "--recv-limit", "must be at least 1 B"),
        (vec!["sim", "transfer", "--send-buffer", "0"], "--send-buffer", "must be between 4 KiB and 1 GiB"),
        (vec!["sim", "transfer", "--recv-buffer", "2GiB"], "--recv-buffer", "must be between 4 KiB and 1 GiB"),
        (vec!["sim", "transfer", "--queue-bytes", "1"], "--queue-bytes", "must be between 16 KiB and 1 GiB"),
        (vec!["sim", "transfer", "--corrupt", "50%"], "--corrupt", "must be between 0% and 25%"),
        (vec!["sim", "transfer", "--bandwidth-mbit", "1e-300"], "--bandwidth-mbit", "0 (unlimited) or between 0.1"),
        (vec!["sim", "transfer", "--time-limit-s=-1"], "--time-limit-s", "must be between 0.001"),
        (vec!["sim", "transfer", "--loss", "20%", "--corrupt", "10%"], "--corrupt 10%", "must be between 0% and 25%"),
        (vec!["demo", "--loss", "100%"], "--loss", "must be between 0% and 25%"),
        (vec!["demo", "--bytes", "0"], "--bytes", "must be at least 1 B"),
        (vec!["demo", "--delay-ms", "5000"], "--delay-ms", "must be between 0 and 1000 ms"),
        (vec!["demo", "--cc", "vegas"], "--cc", "unknown congestion controller"),
        (vec!["lab", "up", "x", "--mtu", "10"], "--mtu", "must be between 68 and 9000"),
        (vec!["lab", "up", "x", "--loss", "100%"], "--loss", "must be between 0% and 25%"),
        (vec!["lab", "up", "x", "--rate-mbit=-1"], "--rate-mbit", "0 (unlimited)"),
        (vec!["bench", "checksum", "--seconds", "0"], "--seconds", "must be between 0.001 and 3600 s"),
        (vec!["bench", "latency", "--round-trips", "0"], "--round-trips", "must be between 1 and"),
        (vec!["bench", "latency", "--size", "4"], "--size", "must be between 8 and 1048576"),
        (vec!["bench", "latency", "--breakdown", "--size", "8"], "--breakdown", "--size of at least 16"),
        (vec!["bench", "throughput", "--sizes", "64,0"], "--sizes", "must be between 1 B and 64 MiB"),
        (vec!["bench", "link", "--mtu", "100"], "--mtu", "must be between 576 and 9000"),
        (vec!["bench", "apps", "--seconds", "0.5"], "--seconds", "must be between 1 and 3600 s"),
    ];
    for (args, flag, range) in cases {
        #[allow(clippy::disallowed_methods)] // wall-clock bound of a test harness
        let t = std::time::Instant::now();
        let out = outboard_in(&dir, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains(range), "{args:?}: expected {flag:?} and {range:?} in {err}");
        // Nothing started: no engine log line, no demo banner, no simulation output.
        assert!(!err.contains("engine_started") && text.is_empty(), "{args:?} started something: {text}{err}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{args:?} took {:?}", t.elapsed());
    }
}

/// The ends of each range work: the bounds refuse only what cannot work.
#[test]
fn extreme_settings_inside_the_ranges_still_run() {
    for args in [
        &["sim", "transfer", "--bytes", "256KiB", "--loss", "25%", "--seed", "3", "--json"][..],
        &["sim", "transfer", "--bytes", "64KiB", "--send-buffer", "4KiB", "--recv-buffer", "4KiB", "--queue-bytes", "16KiB", "--json"],
        &["sim", "transfer", "--bytes", "64KiB", "--reorder", "100%", "--duplicate", "100%", "--delay-ms", "1000", "--json"],
        &["sim", "transfer", "--bytes", "16KiB", "--bandwidth-mbit", "0.1", "--json"],
        &["sim", "transfer", "--bytes", "0", "--bandwidth-mbit", "0", "--json"],
    ] {
        let out = outboard(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(json(&out)["ok"], true, "{args:?}");
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
