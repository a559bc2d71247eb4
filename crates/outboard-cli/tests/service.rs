#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness
//! The engine as a service (no root): the sample configuration in
//! `packaging/` checks out with `--check-config`, broken ones are refused
//! with exit 2 naming the key, and an engine started with `NOTIFY_SOCKET`
//! (as systemd's `Type=notify` does) says `READY=1` once it takes requests
//! and `STOPPING=1` when told to stop.

mod support;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::engine::{stat_in, ChildGuard};
use support::{outboard, test_dir, text, OUTBOARD};

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/engine.toml")
}

#[test]
fn the_sample_config_checks_out_and_broken_ones_exit_2_naming_the_key() {
    let s = sample();
    let o = outboard(&["engine", "--check-config", s.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("valid: engine \"edge\" on af_packet:eth1, address 192.0.2.10/24 via 192.0.2.1"), "{out}");

    let dir = test_dir("ob-service", "cfg");
    let sample_text = std::fs::read_to_string(&s).unwrap();
    let cases = [
        ("memory_cap = \"512MiB\"", "memory_cap = \"0\"", "memory_cap"),
        ("gateway = \"192.0.2.1\"", "gateway = \"198.51.100.1\"", "--gateway"),
        ("allow_user = [\"nobody\"]", "allow_user = [\"no-such-user-obx\"]", "no such user"),
        ("cc = \"cubic\"", "cc = \"cubic\"\nwindow = 3", "window"),
    ];
    for (from, to, want) in cases {
        assert!(sample_text.contains(from), "the sample has {from:?}");
        let p = dir.join("broken.toml");
        std::fs::write(&p, sample_text.replace(from, to)).unwrap();
        let o = outboard(&["engine", "--check-config", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{to:?}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(want), "{to:?} names {want:?}: {}", text(&o));
    }
    let o = outboard(&["engine", "--check-config", dir.join("missing.toml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_engine_tells_its_init_system_when_it_is_ready_and_when_it_stops() {
    let dir = test_dir("ob-service", "notify");
    let sock = dir.join("notify");
    let rx = UnixDatagram::bind(&sock).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let name = format!("svc-{}", std::process::id());
    let fabric = format!("fabric:svc{}", std::process::id());
    let child = Command::new(OUTBOARD)
        .args(["engine", "--name", &name, "--link", &fabric, "--addr", "10.0.0.1/24", "--log-level", "warn"])
        .env("OUTBOARD_RUN_DIR", &dir)
        .env("NOTIFY_SOCKET", &sock)
        .spawn()
        .unwrap();
    let mut engine = ChildGuard::new(child, Duration::from_secs(5));
    let mut b = [0u8; 512];
    let n = rx.recv(&mut b).expect("READY=1 within 20 s");
    let msg = String::from_utf8_lossy(&b[..n]).into_owned();
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg}");
    assert!(msg.contains(&format!("MAINPID={}", engine.pid())) && msg.contains(&format!("STATUS=engine {name} on {fabric}")), "{msg}");
    assert!(stat_in(&dir, &name).is_some(), "ready means the control socket answers");
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(engine.pid() as i32, libc::SIGTERM) };
    let n = rx.recv(&mut b).expect("STOPPING=1 after SIGTERM");
    assert_eq!(&b[..n], b"STOPPING=1");
    let (st, _) = engine.finish_lines(Duration::from_secs(10));
    assert!(st.is_some_and(|s| s.success()), "{st:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Parses OpenMetrics text from stdin with the Prometheus project's own
/// Python parser; prints {family: {"type": T, "samples": [[name, labels, value], ...]}}.
const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = {"type": f.type, "samples": [[s.name, s.labels, s.value] for s in f.samples]}
print(json.dumps(out))
"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn metrics_are_served_in_the_prometheus_format_a_real_client_and_parser_read() {
    assert!(support::netns::have("curl"), "curl is missing: apt-get install curl");
    let have_parser = Command::new("python3").args(["-c", "import prometheus_client"]).status().is_ok_and(|s| s.success());
    assert!(have_parser, "the Prometheus parser is missing: python3 -m pip install prometheus-client (scripts/test.sh does)");
    let dir = test_dir("ob-service", "metrics");
    let name = format!("met-{}", std::process::id());
    let fabric = format!("fabric:met{}", std::process::id());
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let _e = support::engine::start_engine(&dir, &name, &["--link", &fabric, "--addr", "10.0.0.1/24", "--metrics", &addr], Duration::from_secs(15));
    let url = format!("http://{addr}/metrics");
    let o = Command::new("curl").args(["-sS", "--fail", "--max-time", "10", "-D", "-", &url]).output().unwrap();
    let page = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "curl {url}: {}", text(&o));
    assert!(page.contains("Content-Type: application/openmetrics-text"), "{page}");
    let body = page.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    assert!(body.ends_with("# EOF\n"), "{body}");
    let mut py = Command::new("python3")
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    py.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let po = py.wait_with_output().unwrap();
    assert!(po.status.success(), "the Prometheus parser refused the page: {}\n{body}", text(&po));
    let m: serde_json::Value = serde_json::from_slice(&po.stdout).unwrap();
    let stat = stat_in(&dir, &name).expect("stat");
    let sample = |fam: &str| m[fam]["samples"][0].clone();
    assert_eq!(m["outboard_engine"]["type"], "info", "{m}");
    assert_eq!(sample("outboard_engine")[1]["name"], name.as_str());
    assert_eq!(m["outboard_shard_turns"]["type"], "counter");
    assert_eq!(sample("outboard_shard_turns")[1]["shard"], "0");
    assert!(sample("outboard_shard_turns")[2].as_f64().unwrap() > 0.0);
    assert_eq!(m["outboard_memory_cap_bytes"]["type"], "gauge");
    assert_eq!(sample("outboard_memory_cap_bytes")[2].as_f64().unwrap(), stat["memory_cap"].as_f64().unwrap());
    let stack_families = m.as_object().unwrap().keys().filter(|k| k.starts_with("outboard_stack_")).count();
    assert_eq!(stack_families, stat["stack"].as_object().unwrap().len(), "every stack counter is a family");
    assert_eq!(m["outboard_service_tcp_accepted"]["samples"].as_array().unwrap().len(), stat["services"].as_array().unwrap().len());

    // Elsewhere: 404; the port taken by another engine: exit 14 before anything starts.
    let o = Command::new("curl").args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &format!("http://{addr}/")]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "404");
    let o = Command::new(OUTBOARD)
        .args(["engine", "--name", "met-b", "--link", &format!("{fabric}b"), "--addr", "10.0.0.2/24", "--metrics", &addr])
        .env("OUTBOARD_RUN_DIR", &dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(14), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("--metrics {addr}")), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}
