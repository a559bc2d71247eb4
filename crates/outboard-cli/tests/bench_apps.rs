//! `outboard bench latency` and `outboard bench throughput` (no root): two
//! applications through two engines on the fabric beside Linux TCP on
//! loopback, with tiny settings. Checks the JSON's shape, that every figure
//! is positive, that the engines copied each delivered byte once each way
//! (copies_per_byte within 0.05 of 1.0), that the applications' API copied
//! nothing, and that the plot was written where `--plot` said — and that
//! without `--plot` nothing is written.

// Tests are the imperative shell: they may read the wall clock.
#![allow(clippy::disallowed_methods)]

mod support;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use support::{num, output_within, positive, OUTBOARD};

/// One benchmark of this file at a time. Each spins engines and
/// applications on every core it can get; two at once on a 2-core machine
/// starve each other's round trips, stalling them in a different hop each
/// time, so a breakdown's medians stop adding up to its round trip (seen in
/// CI: hops of 21 µs against a 105 µs blocking round trip while the other
/// test's polling case spun four processes).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held while a benchmark runs (see `ONE_AT_A_TIME`).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `outboard ARGS`, stopped after `limit` (SIGTERM first: the bench
/// stops its engines and peers on the way out; SIGKILL 8 s later); returns
/// (success, stdout, stderr).
fn run(args: &[&str], limit: Duration) -> (bool, String, String) {
    let _one = one_at_a_time();
    let mut c = Command::new(OUTBOARD);
    c.args(args);
    output_within(c, limit, Duration::from_secs(8))
}

fn json_of(ok: bool, out: &str, err: &str, what: &str) -> Value {
    assert!(ok, "{what} failed:\nstdout:\n{out}\nstderr:\n{err}");
    serde_json::from_str(out)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{out}\nstderr:\n{err}"))
}

#[test]
fn bench_latency_json_both_modes() {
    let (ok, out, err) = run(
        &[
            "bench",
            "latency",
            "--json",
            "--round-trips",
            "300",
            "--warmup",
            "30",
            "--seconds",
            "2",
        ],
        Duration::from_secs(240),
    );
    let v = json_of(ok, &out, &err, "bench latency");
    for side in ["outboard", "kernel"] {
        positive(&v, &format!("{side}.p50_us"));
        positive(&v, &format!("{side}.p99_us"));
        assert!(
            num(&v, &format!("{side}.p99_us")) >= num(&v, &format!("{side}.p50_us")),
            "{v}"
        );
    }
    positive(&v, "ratio_p50");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 5, "blocking and polling, ours and Linux, and our inline engines: {v}");
    for (side, modes) in [("outboard", &["blocking", "polling", "inline"][..]), ("kernel", &["blocking", "polling"][..])] {
        for &mode in modes {
            let r = rows
                .iter()
                .find(|r| r["side"] == side && r["mode"] == mode)
                .unwrap_or_else(|| panic!("no row {side}/{mode} in {v}"));
            positive(r, "p50_us");
            positive(r, "p99_us");
            positive(r, "round_trips");
        }
    }
    for r in rows.iter().filter(|r| r["side"] == "outboard") {
        assert_eq!(
            r["api_copied_bytes"].as_u64(),
            Some(0),
            "the zero-copy calls copy nothing: {r}"
        );
    }
    assert!(v["ratio_p50_by_mode"]["polling"].as_f64().is_some(), "{v}");
    // The machine's floor: a positive time on the two CPUs it names where it
    // was measured (null on one CPU, or when the other tests kept the two
    // pinned threads from running together for its 100 ms).
    if !v["floor"].is_null() {
        positive(&v, "floor.cache_line_round_trip_us");
        let cpus = v["floor"]["cpus"].as_array().map_or(0, |c| c.len());
        assert_eq!(cpus, 2, "{v}");
        // The board rings' round trip, where measured, cannot beat the line's.
        if let Some(ring) = v["floor"]["board_ring_round_trip_us"].as_f64() {
            let line = v["floor"]["cache_line_round_trip_us"].as_f64().unwrap_or(f64::MAX);
            assert!(ring > 0.0 && ring >= line * 0.5, "board ring round trip {ring} us against the line's {line}: {v}");
        }
    }
    // Without --breakdown nothing is traced, so there is no hop table to show.
    assert!(v["breakdown"].is_null(), "no breakdown unless asked: {v}");
}

/// `--pin beside`: each application pinned beside its own engine (the
/// placement that keeps the daemon's blocking round trip in its fast mode
/// on a 2-vCPU machine), reported in the JSON; on one CPU, a clear refusal.
#[test]
fn bench_latency_pin_beside_reports_its_placement_and_one_cpu_is_refused() {
    let cpus = outboard_engine::cpu::allowed();
    if cpus.len() >= 2 {
        let (ok, out, err) = run(
            &["bench", "latency", "--json", "--mode", "blocking", "--pin", "beside", "--round-trips", "300", "--warmup", "30", "--seconds", "2"],
            Duration::from_secs(240),
        );
        let v = json_of(ok, &out, &err, "bench latency --pin beside");
        assert_eq!(v["pin"], "beside", "{v}");
        let p = &v["placement"];
        let cpu = |k: &str| p[k].as_u64().unwrap_or_else(|| panic!("placement.{k} in {v}")) as usize;
        assert_eq!((cpu("engine_a"), cpu("engine_b")), (cpus[0], cpus[1]), "{v}");
        assert_eq!((cpu("server"), cpu("client")), (cpus[0], cpus[1]), "each application beside its engine: {v}");
        for r in v["rows"].as_array().expect("rows") {
            positive(r, "p50_us");
            positive(r, "round_trips");
        }
        assert!(v["command"].as_str().is_some_and(|c| c.contains("--pin beside")), "{v}");
    }
    pin_on_one_cpu_is_refused("latency", "crosswise", cpus[0]);
}

/// `outboard bench BENCH --pin PIN` on one CPU: refused before anything
/// starts, exit 2, saying why.
fn pin_on_one_cpu_is_refused(bench: &str, pin: &str, cpu: usize) {
    let _one = one_at_a_time();
    let out = Command::new("taskset")
        .args(["-c", &cpu.to_string(), OUTBOARD, "bench", bench, "--pin", pin])
        .output()
        .expect("run taskset");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("--pin {pin} needs two CPUs this process may run on; it has 1")), "{err}");
}

/// `--breakdown`: every process of our cases traces the marked round trips
/// hop by hop (daemon engines in their own processes, inline engines inside
/// the applications); each case's hops are all seen in nearly every round
/// trip, and their medians add up to about the traced round trip.
#[test]
fn bench_latency_breakdown_accounts_for_every_hop() {
    let (ok, out, err) = run(
        &["bench", "latency", "--json", "--breakdown", "--round-trips", "300", "--warmup", "30", "--seconds", "2"],
        Duration::from_secs(240),
    );
    let v = json_of(ok, &out, &err, "bench latency --breakdown");
    let cases = v["breakdown"].as_array().expect("breakdown");
    let modes: Vec<&str> = cases.iter().map(|b| b["mode"].as_str().unwrap_or("")).collect();
    assert_eq!(modes, ["blocking", "polling", "inline"], "{v}");
    for b in cases {
        let marked = b["marked"].as_u64().unwrap_or(0);
        let complete = b["complete"].as_u64().unwrap_or(0);
        assert!(marked >= 250 && complete * 10 >= marked * 9, "most round trips traced at every hop: {b}");
        let hops = b["hops"].as_array().expect("hops");
        let names: Vec<&str> = hops.iter().map(|h| h["hop"].as_str().unwrap_or("")).collect();
        assert_eq!(names, ["app -> engine", "engine -> link", "link", "engine -> board", "board -> app"], "{b}");
        for h in hops {
            for leg in ["request_us", "response_us"] {
                let x = h[leg].as_f64().unwrap_or(-1.0);
                assert!(x >= 0.0, "{leg} of {h} in {b}");
            }
        }
        let sum = num(b, "sum_us");
        let round = num(b, "round_trip_us");
        assert!(round > 0.0 && sum < 2.0 * round, "hops are not counted twice: {b}");
        // The medians of the hops add up to about the median round trip where
        // no thread waits for a core. In polling mode four threads spin (two
        // applications, two engines) on a 2-core machine also running the
        // other tests: each round trip stalls in whichever hop the scheduler
        // parked, different hops in different trips, so every hop's median
        // stays short while the round trip's grows (CI: 350 us of medians
        // against a 1,486 us round trip). Not a fault of the accounting.
        if b["mode"] != "polling" {
            assert!(sum > 0.3 * round, "hops add up to about the round trip: {b}");
        }
        assert_eq!(b["dropped"].as_u64(), Some(0), "{b}");
    }
}

#[test]
fn bench_throughput_json_copies_once_each_way() {
    let dir = std::env::temp_dir().join(format!("ob-bench-apps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plot: PathBuf = dir.join("tput.svg");
    let plot_s = plot.display().to_string();
    let (ok, out, err) = run(
        &[
            "bench",
            "throughput",
            "--json",
            "--sizes",
            "64,64KiB",
            "--bytes",
            "2MiB",
            "--seconds",
            "3",
            "--plot",
            &plot_s,
        ],
        Duration::from_secs(240),
    );
    let v = json_of(ok, &out, &err, "bench throughput");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v}");
    assert_eq!(rows[0]["write_size"].as_u64(), Some(64));
    assert_eq!(rows[1]["write_size"].as_u64(), Some(64 << 10));
    for r in rows {
        for f in [
            "outboard_gbps",
            "kernel_gbps",
            "outboard_efficiency",
            "kernel_efficiency",
        ] {
            positive(r, f);
        }
        positive(r, "outboard.app_cpu_s_per_gb");
        positive(r, "kernel.app_cpu_s_per_gb");
    }
    for k in ["copies_per_byte_tx", "copies_per_byte_rx"] {
        let c = v[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} is not a number: {v}"));
        assert!(
            (c - 1.0).abs() <= 0.05,
            "{k} = {c}, expected 1.0 (one copy per delivered byte): {v}"
        );
    }
    assert_eq!(v["api_copied_bytes"].as_u64(), Some(0), "{v}");
    assert!(v["efficiency_ratio_64k"].as_f64().is_some(), "{v}");
    let svg = std::fs::read_to_string(&plot).expect("the plot was written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("64 KiB") && svg.contains("<polyline"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--pin crosswise`: each application beside the other side's engine (the
/// placement of the slow 64 KiB efficiency runs), pinned and then seen
/// there by the bench's own watch of where each process ran; an unpinned
/// point says where the scheduler put its processes; on one CPU, a clear
/// refusal.
#[test]
fn bench_throughput_pin_crosswise_is_seen_where_it_was_put_and_one_cpu_is_refused() {
    let cpus = outboard_engine::cpu::allowed();
    if cpus.len() >= 2 {
        let (ok, out, err) = run(
            &["bench", "throughput", "--json", "--sizes", "64KiB", "--bytes", "128MiB", "--seconds", "3", "--pin", "crosswise"],
            Duration::from_secs(240),
        );
        let v = json_of(ok, &out, &err, "bench throughput --pin crosswise");
        assert_eq!(v["pin"], "crosswise", "{v}");
        let p = &v["placement"];
        let cpu = |x: &serde_json::Value, k: &str| x[k].as_u64().unwrap_or_else(|| panic!("{k} in {x}")) as usize;
        assert_eq!((cpu(p, "engine_a"), cpu(p, "engine_b")), (cpus[0], cpus[1]), "{v}");
        assert_eq!((cpu(p, "server"), cpu(p, "client")), (cpus[1], cpus[0]), "the sink beside B, the source beside A: {v}");
        let r = &v["rows"][0];
        let (o, k) = (&r["outboard"]["placement"], &r["kernel"]["placement"]);
        assert_eq!(o["kind"], "crosswise", "the watch saw the pinned placement: {o}");
        assert_eq!((cpu(o, "engine_a"), cpu(o, "engine_b"), cpu(o, "server"), cpu(o, "client")), (cpus[0], cpus[1], cpus[1], cpus[0]), "{o}");
        assert_eq!((cpu(k, "server"), cpu(k, "client"), k["kind"].as_str()), (cpus[1], cpus[0], Some("apart")), "Linux's peers where ours are: {k}");
        for m in ["server_migrations", "client_migrations"] {
            // Pinned, a thread has nowhere to go.
            assert!(o[m].is_null() || o[m].as_u64() == Some(0), "{m}: {o}");
        }
        positive(r, "efficiency_ratio");
        assert!(v["command"].as_str().is_some_and(|c| c.contains("--pin crosswise")), "{v}");
        // Unpinned: no placement asked, and each point still says where it ran.
        let (ok, out, err) = run(&["bench", "throughput", "--json", "--sizes", "64KiB", "--bytes", "32MiB", "--seconds", "3"], Duration::from_secs(240));
        let v = json_of(ok, &out, &err, "bench throughput unpinned");
        assert_eq!((v["pin"].as_str(), v["placement"].is_null()), (Some("none"), true), "{v}");
        let o = &v["rows"][0]["outboard"]["placement"];
        assert!(cpus.contains(&cpu(o, "server")) && cpus.contains(&cpu(o, "client")), "{o}");
        assert!(o["kind"].as_str().is_some_and(|k| !k.is_empty()), "{o}");
    }
    pin_on_one_cpu_is_refused("throughput", "beside", cpus[0]);
}

#[test]
fn bench_throughput_writes_no_file_unless_told() {
    // Run in an empty directory: nothing may appear in it.
    let dir = std::env::temp_dir().join(format!("ob-bench-noplot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _one = one_at_a_time();
    let mut c = Command::new(OUTBOARD);
    c.args(["bench", "throughput", "--json", "--sizes", "4KiB", "--bytes", "256KiB", "--seconds", "2"])
        .current_dir(&dir);
    let (ok, out, err) = output_within(c, Duration::from_secs(120), Duration::from_secs(8));
    let v = json_of(ok, &out, &err, "bench throughput without --plot");
    assert!(v["plot"].is_null(), "no plot named: {v}");
    assert!(!v["command"].as_str().unwrap_or("").contains("--plot"), "{v}");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "files written unasked: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_throughput_plot_it_cannot_write_is_an_error_after_the_results() {
    // /proc exists, and nobody (root included) can create a file in it.
    let _one = one_at_a_time();
    let mut c = Command::new(OUTBOARD);
    c.args(["bench", "throughput", "--json", "--sizes", "4KiB", "--bytes", "256KiB", "--plot", "/proc/ob-test.svg"]);
    let (ok, out, err) = output_within(c, Duration::from_secs(120), Duration::from_secs(8));
    assert!(!ok, "a plot that cannot be written fails the run: {err}");
    assert!(err.contains("cannot write the plot to /proc/ob-test.svg"), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("results still printed ({e}): {out}\n{err}"));
    assert!(v["plot"].is_null(), "{v}");
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(1), "{v}");
}

#[test]
fn bench_throughput_plot_into_a_missing_directory_or_a_directory_exits_2() {
    // Checked before anything runs.
    let missing = std::env::temp_dir().join(format!("ob-no-such-dir-{}", std::process::id()));
    for (plot, says) in [
        (missing.join("p.svg"), "no such directory"),
        (std::env::temp_dir(), "is a directory"),
    ] {
        let o = Command::new(OUTBOARD)
            .args(["bench", "throughput", "--plot"])
            .arg(&plot)
            .output()
            .expect("run outboard");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "--plot {}: {err}", plot.display());
        assert!(err.contains("--plot") && err.contains(says), "{err}");
    }
}

#[test]
fn bench_throughput_rejects_bad_sizes() {
    let (ok, _out, err) = run(
        &["bench", "throughput", "--sizes", "0"],
        Duration::from_secs(30),
    );
    assert!(!ok);
    assert!(err.contains("--sizes"), "{err}");
}
