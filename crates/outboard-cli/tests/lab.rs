//! `outboard lab` for real: namespaces, veths, the bridge, the router and the
//! seeded relay, checked with the kernel's own ping. Needs root (skips loudly
//! otherwise), iproute2, ethtool and iputils-ping. Each test uses its own lab
//! name (from the pid) and a guard that takes the lab down even on failure.

mod support;

use std::process::Output;
use support::netns::{lab_name, namespaces_of, skip_unless_root_and, LabGuard};
use support::{outboard, sh, text, OUTBOARD};

/// True (after a loud line) when the test cannot run here: not root, or a tool missing.
fn skip(test: &str) -> bool {
    skip_unless_root_and(
        test,
        &["ip", "ethtool", "ping", "timeout"],
        "apt-get install iproute2 ethtool iputils-ping coreutils",
    )
}

fn up(name: &str, extra: &[&str]) -> (LabGuard, serde_json::Value) {
    let mut args = vec!["lab", "up", name, "--json"];
    args.extend_from_slice(extra);
    let out = outboard(&args);
    let guard = LabGuard(name.to_string());
    assert!(
        out.status.success(),
        "lab up {extra:?} failed: {}",
        text(&out)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("lab up --json: {e}: {}", text(&out)));
    (guard, info)
}

/// Puts the engine's address on eng0 as a kernel address, standing in for the engine.
fn kernel_engine(name: &str, routed: bool) {
    let eng = format!("ob-{name}-eng");
    let o = sh(&[
        "ip",
        "netns",
        "exec",
        &eng,
        "ip",
        "addr",
        "add",
        "10.77.0.2/24",
        "dev",
        "eng0",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    if routed {
        let o = sh(&[
            "ip",
            "netns",
            "exec",
            &eng,
            "ip",
            "route",
            "add",
            "default",
            "via",
            "10.77.0.1",
        ]);
        assert!(o.status.success(), "{}", text(&o));
    }
}

/// Pings the engine's address from Linux (bounded by -c, -W and timeout).
fn ping(name: &str, count: u32, interval: &str, limit_s: u32) -> (Output, String) {
    let lnx = format!("ob-{name}-lnx");
    let out = sh(&[
        "timeout",
        &limit_s.to_string(),
        "ip",
        "netns",
        "exec",
        &lnx,
        "ping",
        "-n",
        "-c",
        &count.to_string(),
        "-i",
        interval,
        "-W",
        "1",
        "10.77.0.2",
    ]);
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, s)
}

fn received(ping_out: &str) -> u32 {
    // "200 packets transmitted, 131 received, ..."
    ping_out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no ping summary in {ping_out}"))
}

fn down_json(name: &str) -> serde_json::Value {
    let out = outboard(&["lab", "down", name, "--json"]);
    assert!(out.status.success(), "lab down: {}", text(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("lab down --json: {e}: {}", text(&out)))
}

#[test]
fn direct_lab_bridges_linux_to_the_engine_side() {
    if skip("direct_lab_bridges_linux_to_the_engine_side") {
        return;
    }
    let name = lab_name("labd");
    let (_g, info) = up(&name, &[]);
    assert_eq!(info["topology"], "direct");
    assert_eq!(info["stage"]["kind"], "bridge");
    assert_eq!(info["engine"]["addr"], "10.77.0.2");
    assert_eq!(info["linux"]["addr"], "10.77.0.1");
    assert_eq!(namespaces_of(&name).len(), 3);
    // eng0: no address, IPv6 off, one queue each way.
    let eng = format!("ob-{name}-eng");
    let addrs = sh(&["ip", "-n", &eng, "-o", "addr", "show", "dev", "eng0"]);
    assert!(
        String::from_utf8_lossy(&addrs.stdout).trim().is_empty(),
        "eng0 has addresses: {}",
        text(&addrs)
    );
    let d = sh(&["ip", "-n", &eng, "-d", "link", "show", "eng0"]);
    let d = String::from_utf8_lossy(&d.stdout).into_owned();
    assert!(d.contains("numtxqueues 1 numrxqueues 1"), "{d}");
    assert!(d.contains("state UP"), "{d}");
    // Linux's end sends full checksums.
    let lnx = format!("ob-{name}-lnx");
    let k = sh(&["ip", "netns", "exec", &lnx, "ethtool", "-k", "lnx0"]);
    assert!(
        String::from_utf8_lossy(&k.stdout).contains("tx-checksum-ip-generic: off"),
        "{}",
        text(&k)
    );

    kernel_engine(&name, false);
    let (out, s) = ping(&name, 3, "0.2", 15);
    assert!(out.status.success(), "ping failed: {s}");
    assert_eq!(received(&s), 3, "{s}");
    assert!(s.contains("ttl=64"), "{s}");

    let st = outboard(&["lab", "status", &name, "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["state"], "up");

    let r = down_json(&name);
    assert_eq!(r["namespaces_deleted"].as_array().unwrap().len(), 3);
    assert!(namespaces_of(&name).is_empty());
    assert!(!std::path::Path::new(&format!("/run/outboard/lab/{name}")).exists());
}

#[test]
fn routed_lab_routes_through_the_router() {
    if skip("routed_lab_routes_through_the_router") {
        return;
    }
    let name = lab_name("labr");
    let (_g, info) = up(&name, &["--topology", "routed", "--mtu", "9000"]);
    assert_eq!(info["engine"]["gateway"], "10.77.0.1");
    assert_eq!(info["linux"]["addr"], "10.78.0.2");
    assert!(info["commands"]["engine"]
        .as_str()
        .unwrap()
        .ends_with("--gateway 10.77.0.1"));
    assert_eq!(namespaces_of(&name).len(), 4);
    kernel_engine(&name, true);
    let (out, s) = ping(&name, 3, "0.2", 15);
    assert!(out.status.success(), "ping failed: {s}");
    // One hop: the reply's TTL went down by one.
    assert!(s.contains("ttl=63"), "{s}");
    // The jumbo MTU holds end to end: 8972 bytes of ICMP payload, don't fragment.
    let lnx = format!("ob-{name}-lnx");
    let big = sh(&[
        "timeout",
        "10",
        "ip",
        "netns",
        "exec",
        &lnx,
        "ping",
        "-c",
        "1",
        "-W",
        "2",
        "-M",
        "do",
        "-s",
        "8972",
        "10.77.0.2",
    ]);
    assert!(big.status.success(), "jumbo ping: {}", text(&big));
    down_json(&name);
    assert!(namespaces_of(&name).is_empty());
}

#[test]
fn impaired_lab_loses_frames_and_reports_them() {
    if skip("impaired_lab_loses_frames_and_reports_them") {
        return;
    }
    let name = lab_name("labl");
    let (_g, info) = up(&name, &["--loss", "20%", "--seed", "7"]);
    assert_eq!(info["stage"]["kind"], "relay");
    assert_eq!(info["stage"]["seed"], 7);
    assert!(info["stage"]["relay_pid"].as_u64().unwrap() > 0);
    kernel_engine(&name, false);
    let (_out, s) = ping(&name, 200, "0.01", 40);
    let got = received(&s);
    // Each echo survives two 20% coin flips: about 64% come back.
    assert!(got > 60 && got < 190, "received {got} of 200: {s}");
    let r = down_json(&name);
    let rep = &r["relay_report"];
    assert!(rep.is_object(), "no relay report: {r}");
    assert_eq!(rep["seed"], 7);
    let dropped = rep["a_to_b"]["stats"]["dropped"].as_u64().unwrap()
        + rep["b_to_a"]["stats"]["dropped"].as_u64().unwrap();
    assert!(dropped > 0, "{rep}");
    assert!(rep["frames_forwarded"].as_u64().unwrap() > 0, "{rep}");
    assert_eq!(rep["a_to_b"]["seed"], 7);
    assert_eq!(rep["b_to_a"]["seed"], 8);
    // The relay saw every echo request: 200 from Linux, minus none (Linux's side is b).
    let seen_b = rep["b_to_a"]["stats"]["frames_seen"].as_u64().unwrap();
    assert!(seen_b >= 200, "{rep}");
    assert!(namespaces_of(&name).is_empty());
}

#[test]
fn delayed_lab_adds_the_delay_both_ways() {
    if skip("delayed_lab_adds_the_delay_both_ways") {
        return;
    }
    let name = lab_name("laby");
    let (_g, _info) = up(&name, &["--delay-ms", "20"]);
    kernel_engine(&name, false);
    let (out, s) = ping(&name, 5, "0.1", 20);
    assert!(out.status.success(), "ping failed: {s}");
    // "rtt min/avg/max/mdev = 40.4/51.0/90.3/19.6 ms"
    let line = s
        .lines()
        .find(|l| l.starts_with("rtt "))
        .unwrap_or_else(|| panic!("{s}"));
    let min: f64 = line
        .split(" = ")
        .nth(1)
        .and_then(|v| v.split('/').next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(min >= 40.0, "min RTT {min} ms < 40 ms: {s}");
    assert!(min < 200.0, "min RTT {min} ms: {s}");
    let r = down_json(&name);
    assert!(
        r["relay_report"]["frames_forwarded"].as_u64().unwrap() >= 10,
        "{r}"
    );
}

#[test]
fn down_is_idempotent_and_up_twice_is_refused() {
    if skip("down_is_idempotent_and_up_twice_is_refused") {
        return;
    }
    let name = lab_name("labx");
    let out = outboard(&["lab", "down", &name]);
    assert!(
        out.status.success(),
        "down of a missing lab: {}",
        text(&out)
    );
    let (_g, _) = up(&name, &[]);
    let again = outboard(&["lab", "up", &name]);
    assert_eq!(again.status.code(), Some(13), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr)
        .contains(&format!("lab {name} is up; run `outboard lab down {name}`")));
    // The refused `up` did not harm the running lab.
    assert_eq!(namespaces_of(&name).len(), 3);
    let bad = outboard(&["lab", "up", "Bad-Name"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    for _ in 0..2 {
        let out = outboard(&["lab", "down", &name]);
        assert!(out.status.success(), "{}", text(&out));
    }
    assert!(namespaces_of(&name).is_empty());
}

#[test]
fn lab_with_a_killed_relay_still_goes_down() {
    if skip("lab_with_a_killed_relay_still_goes_down") {
        return;
    }
    let name = lab_name("labk");
    let (_g, info) = up(&name, &["--loss", "1%", "--topology", "routed"]);
    let pid = info["stage"]["relay_pid"].as_u64().unwrap().to_string();
    let k = sh(&["kill", "-9", &pid]);
    assert!(k.status.success(), "{}", text(&k));
    // Bounded wait for the kill to land.
    for _ in 0..100 {
        let st = outboard(&["lab", "status", &name, "--json"]);
        let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
        if st["relay_running"] == false {
            assert_eq!(st["state"], "partial");
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let r = down_json(&name);
    assert!(r["relay_report"].is_null(), "{r}");
    assert_eq!(r["namespaces_deleted"].as_array().unwrap().len(), 4);
    assert!(namespaces_of(&name).is_empty());
}

#[test]
fn library_guard_tears_down_on_drop_and_failed_up_cleans_up() {
    if skip("library_guard_tears_down_on_drop_and_failed_up_cleans_up") {
        return;
    }
    use outboard_lab::{Lab, LabConfig, LabError, Topology};
    let name = lab_name("labg");
    let _g = LabGuard(name.clone());
    let mut cfg = LabConfig::new(&name);
    cfg.topology = Topology::Routed;
    cfg.impairment.delay_ms = 1.0;
    cfg.relay_exe = Some(OUTBOARD.into());
    {
        let lab = Lab::up(&cfg).unwrap_or_else(|e| panic!("Lab::up: {e}"));
        assert_eq!(lab.engine_ns(), format!("ob-{name}-eng"));
        assert_eq!(lab.linux_ns(), format!("ob-{name}-lnx"));
        assert_eq!(lab.router_ns(), Some(format!("ob-{name}-rtr").as_str()));
        assert_eq!(lab.engine_iface(), "eng0");
        assert_eq!(lab.engine_addr().to_string(), "10.77.0.2");
        assert_eq!(lab.engine_prefix(), 24);
        assert_eq!(
            lab.gateway().map(|g| g.to_string()).as_deref(),
            Some("10.77.0.1")
        );
        assert_eq!(lab.linux_addr().to_string(), "10.78.0.2");
        assert!(lab.relay_pid().is_some());
        assert_eq!(namespaces_of(&name).len(), 4);
        assert!(matches!(Lab::up(&cfg), Err(LabError::Exists(_))));
    }
    // Dropped: everything is gone, the relay included.
    assert!(namespaces_of(&name).is_empty());
    assert!(!std::path::Path::new(&format!("/run/outboard/lab/{name}")).exists());

    // A relay that cannot start fails `up` (exit code 14) and leaves nothing behind.
    cfg.relay_exe = Some("/nonexistent/outboard".into());
    let err = Lab::up(&cfg).expect_err("a missing relay binary must fail");
    assert!(matches!(err, LabError::Relay(_)), "{err}");
    assert_eq!(err.exit_code(), 14);
    assert!(namespaces_of(&name).is_empty());
    assert!(!std::path::Path::new(&format!("/run/outboard/lab/{name}")).exists());
}
