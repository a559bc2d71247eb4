#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! `outboard bench apps --json --seconds 1` (root): unmodified servers under
//! the socket shim and on the kernel, on one lab's veth pair. Checks that the
//! JSON has the nine rows (PostgreSQL's two with the engine daemon), each
//! with positive outboard and kernel figures and their ratio. Without root: the bench refuses with exit 10.

mod support;

use std::process::Command;
use std::time::Instant;
use support::netns::{is_root, lab_name, skip_unless_root};
use support::{outboard, OUTBOARD};

#[test]
fn bench_apps_without_root_exits_10() {
    if is_root() {
        return;
    }
    let o = outboard(&["bench", "apps", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(10),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs root"));
}

#[test]
fn bench_apps_reports_every_row_for_both_sides() {
    if skip_unless_root("bench_apps_reports_every_row_for_both_sides") {
        return;
    }
    let name = lab_name("bapps");
    let t0 = Instant::now();
    // Bounded: 2 phases x 6 cases x (1 s + start-up); `timeout` stops a stuck
    // run with SIGTERM first, so the bench tears its lab down on the way out.
    let o = Command::new("timeout")
        .args([
            "-k",
            "15",
            "300",
            OUTBOARD,
            "bench",
            "apps",
            "--json",
            "--seconds",
            "1",
            "--lab-name",
            &name,
        ])
        .env("OUTBOARD_LOG", "warn")
        .output()
        .expect("outboard bench apps");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success(),
        "outboard bench apps failed ({}): {out}\n{err}",
        o.status
    );
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"));
    let rows = v["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows: {v}"));
    let want = [
        ("redis GET", "requests/s"),
        ("memcached", "operations/s"),
        ("nginx", "requests/s"),
        ("iperf3", "Gbit/s"),
        ("sockperf TCP ping-pong p50", "us"),
        ("sockperf TCP ping-pong p99", "us"),
        ("sockperf TCP ping-pong p50, 1,000 messages/s", "us"),
        ("PostgreSQL select-only", "tps"),
        ("PostgreSQL a connection per transaction", "tps"),
    ];
    assert_eq!(rows.len(), want.len(), "{v}");
    for (row, (name, unit)) in rows.iter().zip(want) {
        let n = row["name"].as_str().unwrap_or_default();
        assert!(n.starts_with(name), "row {n:?}, expected {name:?}: {v}");
        assert_eq!(row["unit"], unit, "{row}");
        for k in ["outboard", "kernel", "ratio"] {
            let x = row[k].as_f64().unwrap_or(0.0);
            assert!(x > 0.0 && x.is_finite(), "{n}: {k} = {x}: {row}");
        }
        let r = row["outboard"].as_f64().unwrap() / row["kernel"].as_f64().unwrap();
        assert!(
            (row["ratio"].as_f64().unwrap() - r).abs() < 1e-9 * r.max(1.0),
            "{row}"
        );
    }
    // The lab is gone.
    let ns = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip");
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains(&format!("ob-{name}-")),
        "lab {name} left behind"
    );
    eprintln!(
        "bench apps ran in {:.0} s:\n{}",
        t0.elapsed().as_secs_f64(),
        serde_json::to_string_pretty(&v["rows"]).unwrap()
    );
}
