//! Network-device mode against the Linux stack (root): an engine on
//! af_packet with `--kernel-tap` shares its address with the host kernel
//! in its namespace. A kernel-stack HTTP server there answers Linux's curl
//! on a port the engine leaves alone, while the engine's own echo answers
//! on its port — and the kernel never sees a frame of the engine's
//! connection (a capture on the TAP has none, and the kernel sent no
//! reset). The kernel's own traffic (a ping out) leaves through the
//! engine's link; the engine's counters show both directions.

#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

mod support;

use outboard_lab::LabConfig;
use std::time::Duration;
use support::engine::EngineProc;
use support::netns::{lab, lab_name, need, ns_run, ns_spawn_lines, skip_unless_root};
use support::{script, text};

const ENGINE_ADDR: &str = "10.77.0.2";
const TAP: &str = "obk0";

/// The kernel's TCP counters in `ns`: (active opens, resets sent).
fn kernel_tcp(ns: &str) -> (u64, u64) {
    let o = ns_run(ns, 10, &["cat", "/proc/net/snmp"]);
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    let mut lines = s.lines().filter(|l| l.starts_with("Tcp:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else { return (0, 0) };
    let get = |k: &str| {
        let i = names.split_whitespace().position(|n| n == k)?;
        values.split_whitespace().nth(i)?.parse().ok()
    };
    (get("ActiveOpens").unwrap_or(0), get("OutRsts").unwrap_or(0))
}

#[test]
fn kernel_tap_gives_the_kernel_what_the_engine_does_not_take() {
    if skip_unless_root("kernel_tap_gives_the_kernel_what_the_engine_does_not_take") {
        return;
    }
    need("python3", "python3");
    need("curl", "curl");
    need("tshark", "tshark");
    need("ping", "iputils-ping");
    let name = lab_name("ktap");
    let lab = lab(&LabConfig::new(&name));
    let eng = lab.engine_ns().to_string();
    let lnx = lab.linux_ns().to_string();
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &["--services", "echo", "--kernel-tap", TAP]);
    // The kernel's end: the engine's address on the TAP (the engine gave it its MAC).
    for args in [
        vec!["sysctl", "-qw", &format!("net.ipv6.conf.{TAP}.disable_ipv6=1")],
        vec!["ip", "addr", "add", &format!("{ENGINE_ADDR}/24"), "dev", TAP],
        vec!["ip", "link", "set", TAP, "up"],
    ] {
        let o = ns_run(&eng, 10, &args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    // A kernel-stack server on a port the engine has nothing on.
    let www = std::env::temp_dir().join(format!("ob-ktap-{}", std::process::id()));
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("hello"), "from the kernel\n").unwrap();
    let _http = ns_spawn_lines(&eng, 120, &["python3", "-m", "http.server", "8000", "--bind", ENGINE_ADDR, "--directory", www.to_str().unwrap()], false);
    let url = format!("http://{ENGINE_ADDR}:8000/hello");
    let mut served = false;
    for _ in 0..50 {
        let o = ns_run(&lnx, 10, &["curl", "-sS", "--max-time", "2", &url]);
        if o.status.success() && String::from_utf8_lossy(&o.stdout).contains("from the kernel") {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(served, "the kernel's HTTP server did not answer through the TAP\n{}", e.log_text());

    // The engine's echo, with a capture on the TAP running: the kernel sees none of it.
    let cap = www.join("tap.pcap");
    let mut tshark = ns_spawn_lines(&eng, 60, &["tshark", "-q", "-i", TAP, "-a", "duration:6", "-w", cap.to_str().unwrap()], false);
    std::thread::sleep(Duration::from_secs(2));
    let (_, rsts_before) = kernel_tcp(&eng);
    let o = ns_run(&lnx, 60, &["python3", &script("interop_echo_client.py"), ENGINE_ADDR, "7", &(4u64 << 20).to_string(), "50"]);
    assert!(o.status.success(), "engine echo: {}", text(&o));
    let (_, rsts_after) = kernel_tcp(&eng);
    let _ = tshark.finish_lines(Duration::from_secs(20));
    let o = ns_run(&eng, 30, &["tshark", "-r", cap.to_str().unwrap(), "-Y", "tcp.port == 7", "-T", "fields", "-e", "frame.number"]);
    let leaked = String::from_utf8_lossy(&o.stdout).lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(leaked, 0, "the kernel saw {leaked} frames of the engine's echo connection");
    assert_eq!(rsts_after, rsts_before, "the kernel sent resets while the engine served port 7");

    // Pings to the address: the engine answers (default policy).
    let o = ns_run(&lnx, 30, &["ping", "-n", "-c", "3", "-W", "2", ENGINE_ADDR]);
    assert!(o.status.success(), "ping: {}", text(&o));
    // The kernel's own traffic leaves through the engine's link.
    let o = ns_run(&eng, 30, &["ping", "-n", "-c", "2", "-W", "2", "-I", TAP, "10.77.0.1"]);
    assert!(o.status.success(), "the kernel's ping out through the engine: {}", text(&o));

    let st = e.stat();
    let k = &st["shards"][0]["kernel"];
    eprintln!("kernel tap counters: {k}; engine ICMP echo requests {}", st["stack"]["icmp_echo_requests_in"]);
    assert!(k["to_kernel"].as_u64().unwrap_or(0) > 0 && k["from_kernel"].as_u64().unwrap_or(0) > 0, "{k}");
    assert!(st["stack"]["icmp_echo_requests_in"].as_u64().unwrap_or(0) >= 3, "the engine answered the pings");
    let _ = std::fs::remove_dir_all(&www);
    drop(e);
    lab.teardown().expect("lab down");
}

#[test]
fn on_the_fabric_curl_through_the_kernel_tap_fetches_from_a_server_under_the_shim_on_another_engine() {
    if skip_unless_root("on_the_fabric_curl_through_the_kernel_tap_fetches_from_a_server_under_the_shim_on_another_engine") {
        return;
    }
    need("python3", "python3");
    need("curl", "curl");
    let id = std::process::id();
    let (ns_a, ns_b) = (format!("ob-kfa{id}"), format!("ob-kfb{id}"));
    let _ga = support::netns::NsGuard::new(&ns_a);
    let _gb = support::netns::NsGuard::new(&ns_b);
    let fabric = format!("fabric:ktf{id}");
    let a = EngineProc::start(&ns_a, &format!("ktfa{id}"), &["--link", &fabric, "--addr", "10.88.0.1/24", "--services", "none", "--kernel-tap", "obk1"]);
    let b = EngineProc::start(&ns_b, &format!("ktfb{id}"), &["--link", &fabric, "--addr", "10.88.0.2/24", "--services", "none"]);
    for args in [
        vec!["sysctl", "-qw", "net.ipv6.conf.obk1.disable_ipv6=1"],
        vec!["ip", "addr", "add", "10.88.0.1/24", "dev", "obk1"],
        vec!["ip", "link", "set", "obk1", "up"],
    ] {
        let o = ns_run(&ns_a, 10, &args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    let www = std::env::temp_dir().join(format!("ob-ktf-{id}"));
    std::fs::create_dir_all(&www).unwrap();
    let blob = www.join("blob");
    support::rig::random_file(&blob, 1 << 20, 77);
    let shim = support::shim_lib();
    let mut server = std::process::Command::new("timeout");
    server
        .args(["-k", "3", "60", "ip", "netns", "exec", &ns_b, support::OUTBOARD, "run", "--name", &b.name, "--shim"])
        .arg(&shim)
        .args(["--", "python3", "-m", "http.server", "8080", "--bind", "0.0.0.0", "--directory", www.to_str().unwrap()])
        .env("OUTBOARD_RUN_DIR", support::run_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _server = support::engine::ChildGuard::new(server.spawn().expect("spawn the shim server"), Duration::from_secs(3));
    let got = www.join("got");
    let url = "http://10.88.0.2:8080/blob";
    let mut ok = false;
    for _ in 0..100 {
        let o = ns_run(&ns_a, 20, &["curl", "-sS", "--fail", "--max-time", "10", "-o", got.to_str().unwrap(), url]);
        if o.status.success() {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ok, "curl through the kernel TAP never got the file\nA: {}\nB: {}", a.log_text(), b.log_text());
    assert_eq!(support::rig::sha256(&got), support::rig::sha256(&blob), "the file differs");
    let sa = a.stat();
    let sb = b.stat();
    eprintln!("engine A kernel tap: {}; engine B boards: {}", sa["shards"][0]["kernel"], sb["host"]);
    assert!(sb["host"]["attached"].as_u64().unwrap_or(0) >= 1, "the server ran under the shim on engine B");
    let _ = std::fs::remove_dir_all(&www);
}
