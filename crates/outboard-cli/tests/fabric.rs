#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! Engine processes on the shared-memory fabric: no root needed. Two
//! engines move data through the fabric's seeded faults; an idle engine
//! sleeps; every start-up error has its exit code and message.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::engine::{spawn_engine, stat_in, wait_up};
use support::netns::{have, is_root};
use support::{outboard_in, test_dir, OUTBOARD};

/// How long an engine may take to answer `stat` after it starts.
const UP: Duration = Duration::from_secs(10);

fn fetch_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = outboard_in(dir, &[&["fetch", "--json", "--log-level", "warn"], args].concat());
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("fetch printed no JSON ({e}): {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

/// DESIGN.md "done": two engine processes on a fabric with loss and
/// reordering move 1 GiB byte-exact, without root. Echo: 1 GiB each way.
#[test]
fn two_engines_move_1gib_byte_exact_through_loss_and_reordering() {
    let dir = test_dir("ob-fabric-test", "gib");
    let fabric = format!("fabric:tg{}", std::process::id());
    let bytes = std::env::var("OUTBOARD_FABRIC_BYTES").unwrap_or_else(|_| "1GiB".into());
    let _srv = spawn_engine(&dir, &["--link", &fabric, "--addr", "10.0.0.1/24", "--services", "echo", "--name", "gib-srv", "--loss", "1%", "--reorder", "5%", "--seed", "11"]);
    wait_up(&dir, "gib-srv", UP);
    let t0 = Instant::now();
    let r = fetch_json(&dir, &["--link", &fabric, "--addr", "10.0.0.2/24", "--connect", "10.0.0.1:7", "--send", &bytes, "--expect-echo", "--timeout-s", "600", "--loss", "1%", "--reorder", "5%", "--seed", "12"]);
    eprintln!("fabric echo of {bytes} with 1% loss + 5% reordering each way: {:.1} s, {} retransmits", t0.elapsed().as_secs_f64(), r["retransmits"]);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["sha256_sent"], r["sha256_received"]);
    assert!(r["retransmits"].as_u64().unwrap() > 0, "the faults really dropped frames: {r}");
    let s = stat_in(&dir, "gib-srv").expect("server still answers");
    let svc = &s["services"][0];
    assert_eq!(svc["bytes_in"], svc["bytes_out"], "the echo sent back what it got: {svc}");
}

/// The shard sleeps when idle: well under 5 % of a core (it wakes for its
/// timers and a short spin after each wake-up).
#[test]
fn an_idle_engine_uses_almost_no_cpu() {
    let dir = test_dir("ob-fabric-test", "idle");
    let fabric = format!("fabric:ti{}", std::process::id());
    let _e = spawn_engine(&dir, &["--link", &fabric, "--addr", "10.0.0.1/24", "--name", "idle"]);
    let a = wait_up(&dir, "idle", UP);
    std::thread::sleep(Duration::from_secs(2));
    let b = stat_in(&dir, "idle").unwrap();
    let cpu = b["shard"]["cpu_s"].as_f64().unwrap() - a["shard"]["cpu_s"].as_f64().unwrap();
    let wall = b["shard"]["wall_s"].as_f64().unwrap() - a["shard"]["wall_s"].as_f64().unwrap();
    eprintln!("idle engine: {:.4} s CPU in {:.2} s ({:.2} %), sleeps {}", cpu, wall, 100.0 * cpu / wall, b["shard"]["sleeps"]);
    assert!(wall > 1.5);
    assert!(cpu / wall < 0.05, "idle engine used {:.1} % CPU", 100.0 * cpu / wall);
}

#[test]
fn stat_shows_connections_services_and_counters() {
    let dir = test_dir("ob-fabric-test", "stat");
    let fabric = format!("fabric:ts{}", std::process::id());
    let _e = spawn_engine(&dir, &["--link", &fabric, "--addr", "10.0.0.1/24", "--name", "st", "--services", "echo,source"]);
    wait_up(&dir, "st", UP);
    let r = fetch_json(&dir, &["--link", &fabric, "--addr", "10.0.0.2/24", "--connect", "10.0.0.1:5002", "--recv-limit", "1MiB"]);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["bytes_received"], 1 << 20);
    let s = stat_in(&dir, "st").unwrap();
    assert_eq!(s["link"]["kind"], "fabric");
    assert!(s["stack"]["tcp_segments_out"].as_u64().unwrap() > 700);
    assert!(s["memory_cap"].as_u64().unwrap() > 0);
    let src = s["services"].as_array().unwrap().iter().find(|v| v["service"] == "source").unwrap().clone();
    assert!(src["bytes_out"].as_u64().unwrap() >= 1 << 20, "{src}");
    let text = String::from_utf8_lossy(&outboard_in(&dir, &["stat", "--name", "st"]).stdout).to_string();
    for want in ["engine st", "link fabric:", "connections:", "services:", "source:5002", "tcp_segments_out"] {
        assert!(text.contains(want), "stat text lacks {want:?}:\n{text}");
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

#[test]
fn startup_errors_have_distinct_codes_and_say_what_to_do() {
    let dir = test_dir("ob-fabric-test", "err");
    // Bad flags: usage (2).
    let o = outboard_in(&dir, &["engine", "--link", "wifi:wlan0", "--addr", "10.0.0.1/24"]);
    assert_eq!(code(&o), 2, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown link kind"));
    let o = outboard_in(&dir, &["engine", "--link", "fabric:x", "--addr", "10.0.0.1"]);
    assert_eq!(code(&o), 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("A.B.C.D/N"));
    let o = outboard_in(&dir, &["engine", "--link", "af_packet:eth0", "--addr", "10.0.0.1/24", "--loss", "1%"]);
    assert_eq!(code(&o), 2);
    // Engine name taken (13).
    let fabric = format!("fabric:te{}", std::process::id());
    let _e = spawn_engine(&dir, &["--link", &fabric, "--addr", "10.0.0.1/24", "--name", "taken"]);
    wait_up(&dir, "taken", UP);
    let o = outboard_in(&dir, &["engine", "--link", &fabric, "--addr", "10.0.0.9/24", "--name", "taken", "--run-for-s", "1"]);
    assert_eq!(code(&o), 13, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("name taken"));
    // Stat of an engine that is not running (3).
    let o = outboard_in(&dir, &["stat", "--name", "nobody-here"]);
    assert_eq!(code(&o), 3);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no engine named"));
    // No such interface (11) — as root; without root the privilege error (10) comes first.
    let o = outboard_in(&dir, &["engine", "--link", "af_packet:nosuchif0", "--addr", "10.0.0.1/24", "--name", "nsi"]);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(code(&o) == 11 && stderr.contains("no such interface") || code(&o) == 10 && stderr.contains("root"), "{} {stderr}", code(&o));
}

/// Not root: a precise message and exit code 10, for each privileged link.
#[test]
fn without_root_privileged_links_say_so() {
    if !is_root() || !have("setpriv") {
        eprintln!("SKIPPED: dropping privileges needs root and setpriv (util-linux)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ob-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _ = Command::new("chmod").args(["777", dir.to_str().unwrap()]).status();
    // (af_xdp has its own privilege test in outboard-engine: it needs an Ethernet interface.)
    for link in ["af_packet:lo", "tap:obnobody0"] {
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", OUTBOARD, "engine", "--link", link, "--addr", "10.0.0.1/24", "--name", "np"])
            .env("OUTBOARD_RUN_DIR", &dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 10, "{link}: {stderr}");
        assert!(stderr.contains("root"), "{link}: {stderr}");
    }
}
