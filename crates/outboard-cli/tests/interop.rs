//! Interop: the engine against the Linux kernel's own stack, in the lab.
//!
//! Every test needs root (namespaces, veth, AF_PACKET/AF_XDP, TAP) and skips
//! loudly without it; a missing tool (python3, ping, tshark) FAILS the test
//! with the package to install. Linux's side is the kernel's `ping` and small
//! Python scripts in `tests/scripts/interop_*.py`. Labs, namespaces, engines
//! and scripts are torn down by guards even when a test fails; every child
//! runs under `timeout`.
//!
//! The echo matrix sends `OUTBOARD_INTEROP_BYTES` (default 1 GiB; accepts
//! suffixes K/M/G/KiB/MiB/GiB) through the engine's TCP echo for each of six
//! impairments (fixed seeds, printed), on af_xdp and af_packet, in the direct
//! and the routed lab, and prints a throughput table per link × topology.

#![allow(clippy::disallowed_methods)] // wall-clock timeouts in a test harness

mod support;

use outboard_lab::{Impairment, LabConfig, Topology};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::engine::EngineProc;
use support::netns::{in_ns, lab, lab_name, need, ns_run, ns_spawn_lines, skip_unless_root, NsGuard};
use support::{last_json, script, text, OUTBOARD};

const ENGINE_ADDR: &str = "10.77.0.2";
/// How often the tests poll an engine's `stat` while waiting for it to settle.
const POLL: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------- helpers

fn need_python() {
    need("python3", "python3");
}

/// `ping -c 3 -W 2 TARGET` from `ns`: all three answered.
fn assert_ping(ns: &str, target: &str, what: &str) {
    let o = ns_run(ns, 30, &["ping", "-n", "-c", "3", "-W", "2", target]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && s.contains("3 packets transmitted, 3 received"),
        "{what}: ping {target} from {ns} did not get 3 replies: {}",
        text(&o)
    );
}

/// The engine answered the pings itself (the target address is on no kernel interface).
fn assert_engine_answered_pings(e: &EngineProc) {
    let st = e.stat();
    let req = st["stack"]["icmp_echo_requests_in"].as_u64().unwrap_or(0);
    let rep = st["stack"]["icmp_echo_replies_out"].as_u64().unwrap_or(0);
    assert!(
        req >= 3 && rep >= 3,
        "engine counted {req} echo requests in, {rep} replies out"
    );
}

/// Engine connection rows (state names as the engine prints them, e.g. `LastAck`).
fn conn_states(st: &serde_json::Value) -> Vec<String> {
    st["connections"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| c["state"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn is_closing(state: &str) -> bool {
    matches!(
        state,
        "FinWait1" | "FinWait2" | "Closing" | "LastAck" | "TimeWait" | "Closed"
    )
}

// ---------------------------------------------------------------- 1. ping

fn ping_in_lab(kind: &str, tag: &str) {
    need("ping", "iputils-ping");
    let name = lab_name(tag);
    let lab = lab(&LabConfig::new(&name));
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), kind, &[]);
    assert_ping(lab.linux_ns(), ENGINE_ADDR, kind);
    assert_engine_answered_pings(&e);
    let st = e.stat();
    assert_eq!(st["link"]["kind"], kind, "link in stat: {}", st["link"]);
}

#[test]
fn ping_from_linux_is_answered_by_engine_on_af_xdp() {
    if skip_unless_root("ping_from_linux_is_answered_by_engine_on_af_xdp") {
        return;
    }
    ping_in_lab("af_xdp", "pxdp");
}

#[test]
fn ping_from_linux_is_answered_by_engine_on_af_packet() {
    if skip_unless_root("ping_from_linux_is_answered_by_engine_on_af_packet") {
        return;
    }
    ping_in_lab("af_packet", "ppkt");
}

#[test]
fn ping_from_linux_is_answered_by_engine_on_tap() {
    if skip_unless_root("ping_from_linux_is_answered_by_engine_on_tap") {
        return;
    }
    need("ping", "iputils-ping");
    assert!(
        std::path::Path::new("/dev/net/tun").exists(),
        "/dev/net/tun is missing: load the tun module (modprobe tun)"
    );
    let n = lab_name("ptap");
    let ns = NsGuard::new(&format!("ob-{n}-tap"));
    let dev = format!("obtap{}", &n[n.len() - 3..]);
    let e = EngineProc::start(
        &ns.0,
        &format!("{n}-e"),
        &["--link", &format!("tap:{dev}"), "--addr", "10.79.0.2/24"],
    );
    // The engine created the TAP device and brought it up; the kernel side gets 10.79.0.1.
    let o = in_ns(&ns.0, &["ip", "addr", "add", "10.79.0.1/24", "dev", &dev]);
    assert!(o.status.success(), "address on {dev}: {}", text(&o));
    let o = in_ns(&ns.0, &["ip", "-o", "link", "show", "dev", &dev]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(",UP"),
        "{dev} not up: {}",
        text(&o)
    );
    assert_ping(&ns.0, "10.79.0.2", "tap");
    assert_engine_answered_pings(&e);
    assert_eq!(e.stat()["link"]["kind"], "tap");
    drop(e);
    drop(ns);
}

// ---------------------------------------------------------------- 2. echo matrix

struct Case {
    name: &'static str,
    imp: Impairment,
}

fn impairments() -> Vec<Case> {
    let clean = Impairment::default();
    let reorder = Impairment {
        reorder: 0.25,
        reorder_delay_ms: 2.0,
        delay_ms: 1.0,
        ..clean.clone()
    };
    vec![
        Case {
            name: "clean",
            imp: clean.clone(),
        },
        Case {
            name: "loss 1%",
            imp: Impairment {
                loss: 0.01,
                ..clean.clone()
            },
        },
        Case {
            name: "reorder 25%",
            imp: reorder.clone(),
        },
        Case {
            name: "duplicate 1%",
            imp: Impairment {
                duplicate: 0.01,
                ..clean.clone()
            },
        },
        Case {
            name: "corrupt 0.1%",
            imp: Impairment {
                corrupt: 0.001,
                ..clean.clone()
            },
        },
        Case {
            name: "all at once",
            imp: Impairment {
                loss: 0.01,
                duplicate: 0.01,
                corrupt: 0.001,
                ..reorder
            },
        },
    ]
}

/// One line from the relay's report: per direction seen/lost/dup/reordered/corrupted.
fn relay_line(report: &Option<serde_json::Value>) -> String {
    let Some(r) = report else {
        return "no relay (kernel bridge)".into();
    };
    let dir = |d: &serde_json::Value| {
        let s = &d["stats"];
        format!(
            "{}->{}: seen {} lost {} dup {} reord {} corrupt {} fwd {} kdrops {}",
            d["from"].as_str().unwrap_or("?"),
            d["to"].as_str().unwrap_or("?"),
            s["frames_seen"],
            s["dropped"],
            s["duplicated"],
            s["reordered"],
            s["corrupted"],
            d["frames_forwarded"],
            d["rx_kernel_drops"],
        )
    };
    format!(
        "relay seed {}: {}; {}",
        r["seed"],
        dir(&r["a_to_b"]),
        dir(&r["b_to_a"])
    )
}

/// Checks the relay really applied each knob (summed over both directions).
fn relay_applied(imp: &Impairment, report: &Option<serde_json::Value>) -> Result<(), String> {
    if imp.is_none() {
        return Ok(());
    }
    let r = report.as_ref().ok_or("the relay left no report")?;
    let sum = |k: &str| {
        r["a_to_b"]["stats"][k].as_u64().unwrap_or(0)
            + r["b_to_a"]["stats"][k].as_u64().unwrap_or(0)
    };
    for (knob, p) in [
        ("dropped", imp.loss),
        ("duplicated", imp.duplicate),
        ("reordered", imp.reorder),
        ("corrupted", imp.corrupt),
    ] {
        if p > 0.0 && sum(knob) == 0 {
            return Err(format!("relay report shows no frame {knob}: {r}"));
        }
    }
    Ok(())
}

struct Row {
    case: &'static str,
    seed: u64,
    seconds: f64,
    mbit: f64,
    ok: bool,
}

fn echo_matrix(kind: &str, topology: Topology, tag: &str) {
    echo_matrix_with(kind, topology, tag, 1, false);
}

fn echo_matrix_shards(kind: &str, topology: Topology, tag: &str, shards: u32) {
    echo_matrix_with(kind, topology, tag, shards, false);
}

/// The engine's lab address for the matrix: IPv4, or with IPv6 its IPv6 one.
fn matrix_target(ipv6: bool) -> &'static str {
    if ipv6 {
        "fd77::2"
    } else {
        ENGINE_ADDR
    }
}

/// The matrix against an engine of `shards` shards (the lab's veth with as
/// many queues), over IPv4 or (`ipv6`) over IPv6 in a dual-stack lab.
fn echo_matrix_with(kind: &str, topology: Topology, tag: &str, shards: u32, ipv6: bool) {
    need_python();
    // A multi-shard run proves forwarding and placement under faults, an
    // IPv6 run the other family under them; 256 MiB each (at most) keeps
    // their six runs to a few minutes in CI.
    let bytes = if shards > 1 || ipv6 { support::interop_bytes().min(256 << 20) } else { support::interop_bytes() };
    // Bounded: a floor of 1 MB/s plus set-up time (the slowest cases, 25 %
    // reordering, run at about 30 MB/s since the adaptive reordering threshold).
    let limit_s = 120 + bytes / 1_000_000;
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (i, case) in impairments().into_iter().enumerate() {
        let seed = 4200 + i as u64;
        let name = lab_name(&format!("{tag}{i}"));
        eprintln!(
            "=== echo {kind} {topology} ({shards} shard(s), {}) [{}] {}: {} bytes, seed {seed}, lab {name}",
            if ipv6 { "IPv6" } else { "IPv4" },
            case.name,
            case.imp.summary(),
            bytes
        );
        let mut cfg = LabConfig::new(&name);
        cfg.topology = topology;
        cfg.impairment = case.imp.clone();
        cfg.seed = seed;
        cfg.queues = shards;
        cfg.ipv6 = ipv6;
        let lab = lab(&cfg);
        let mut extra: Vec<String> = Vec::new();
        if shards > 1 {
            extra.extend(["--shards".to_string(), shards.to_string()]);
        }
        if let Some(a) = lab.engine_addr6() {
            extra.extend(["--addr".to_string(), format!("{a}/64")]);
        }
        if let Some(g) = lab.gateway6() {
            extra.extend(["--gateway".to_string(), g.to_string()]);
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let e = EngineProc::in_lab(&lab, &format!("{name}-e"), kind, &extra);
        let o = ns_run(
            lab.linux_ns(),
            limit_s + 10,
            &[
                "python3",
                &script("interop_echo_client.py"),
                matrix_target(ipv6),
                "7",
                &bytes.to_string(),
                &limit_s.to_string(),
            ],
        );
        let what = format!("{kind} {topology} {} [{}] seed {seed}", if ipv6 { "IPv6" } else { "IPv4" }, case.name);
        let v = serde_json::from_str::<serde_json::Value>(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .last()
                .unwrap_or(""),
        )
        .ok();
        let ok = o.status.success() && v.as_ref().is_some_and(|v| v["ok"] == true);
        let (seconds, mbit) = v
            .as_ref()
            .map(|v| {
                (
                    v["seconds"].as_f64().unwrap_or(0.0),
                    v["mbit_s"].as_f64().unwrap_or(0.0),
                )
            })
            .unwrap_or((0.0, 0.0));
        if !ok {
            failures.push(format!(
                "{what}: echo not byte-identical or failed: {}",
                text(&o)
            ));
        }
        // The echo closed after the client's FIN: the connection is gone or closing now...
        let st = e.stat();
        let states = conn_states(&st);
        if let Some(bad) = states.iter().find(|s| !is_closing(s)) {
            failures.push(format!(
                "{what}: after the transfer the engine holds a connection in {bad}: {states:?}"
            ));
        }
        // ...and gone soon (the engine closes last: LAST-ACK, no TIME-WAIT).
        let (st2, gone) = e.poll_stat(Duration::from_secs(30), POLL, |s| conn_states(s).is_empty());
        if gone.is_none() {
            failures.push(format!(
                "{what}: connections still held 30 s later: {:?}",
                conn_states(&st2)
            ));
        }
        let stack = &st2["stack"];
        let engine_line = format!(
            "engine: segs in {} out {}, drops checksum {} malformed {}, resets out {}",
            stack["tcp_segments_in"],
            stack["tcp_segments_out"],
            stack["drops_checksum"],
            stack["drops_malformed"],
            stack["tcp_resets_out"]
        );
        let log = e.stop();
        let down = lab
            .teardown()
            .unwrap_or_else(|err| panic!("{what}: lab down: {err}"));
        let relay = relay_line(&down.relay_report);
        if let Err(why) = relay_applied(&case.imp, &down.relay_report) {
            failures.push(format!("{what}: {why}"));
        }
        if !ok {
            failures.push(format!("{what}: engine log tail: {}", tail(&log, 2000)));
        }
        eprintln!(
            "    {} {:.3} s, {:.1} Mbit/s; {engine_line}\n    {relay}",
            if ok { "ok" } else { "FAILED" },
            seconds,
            mbit
        );
        rows.push(Row {
            case: case.name,
            seed,
            seconds,
            mbit,
            ok,
        });
    }
    eprintln!(
        "\necho throughput, {kind} {topology}, {} MiB each way per run:",
        bytes >> 20
    );
    eprintln!(
        "  {:<14} {:>6} {:>9} {:>10}  result",
        "impairment", "seed", "seconds", "Mbit/s"
    );
    for r in &rows {
        eprintln!(
            "  {:<14} {:>6} {:>9.2} {:>10.1}  {}",
            r.case,
            r.seed,
            r.seconds,
            r.mbit,
            if r.ok { "ok" } else { "FAILED" }
        );
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[test]
fn echo_matrix_af_xdp_direct_is_byte_exact_under_impairments() {
    if skip_unless_root("echo_matrix_af_xdp_direct_is_byte_exact_under_impairments") {
        return;
    }
    echo_matrix("af_xdp", Topology::Direct, "mxd");
}

#[test]
fn echo_matrix_af_xdp_routed_is_byte_exact_under_impairments() {
    if skip_unless_root("echo_matrix_af_xdp_routed_is_byte_exact_under_impairments") {
        return;
    }
    echo_matrix("af_xdp", Topology::Routed, "mxr");
}

#[test]
fn echo_matrix_af_packet_direct_is_byte_exact_under_impairments() {
    if skip_unless_root("echo_matrix_af_packet_direct_is_byte_exact_under_impairments") {
        return;
    }
    echo_matrix("af_packet", Topology::Direct, "mpd");
}

#[test]
fn echo_matrix_af_packet_routed_is_byte_exact_under_impairments() {
    if skip_unless_root("echo_matrix_af_packet_routed_is_byte_exact_under_impairments") {
        return;
    }
    echo_matrix("af_packet", Topology::Routed, "mpr");
}

#[test]
fn echo_matrix_af_packet_direct_two_shards_is_byte_exact_under_impairments() {
    if skip_unless_root("echo_matrix_af_packet_direct_two_shards_is_byte_exact_under_impairments") {
        return;
    }
    echo_matrix_shards("af_packet", Topology::Direct, "msd", 2);
}

#[test]
fn echo_matrix_ipv6_af_packet_direct_is_byte_exact_under_impairments() {
    if skip_unless_root("echo_matrix_ipv6_af_packet_direct_is_byte_exact_under_impairments") {
        return;
    }
    echo_matrix_with("af_packet", Topology::Direct, "m6d", 1, true);
}

#[test]
fn echo_matrix_ipv6_af_xdp_routed_is_byte_exact_under_impairments() {
    if skip_unless_root("echo_matrix_ipv6_af_xdp_routed_is_byte_exact_under_impairments") {
        return;
    }
    echo_matrix_with("af_xdp", Topology::Routed, "m6r", 1, true);
}

/// IPv6 beside IPv4 against Linux: neighbour discovery both ways, ping6
/// answered by the engine, UDP echo and port unreachable (ECONNREFUSED at
/// Linux), IPv4 still answered, and `stat` showing the addresses and counters.
#[test]
fn ipv6_ping_udp_and_stat_against_linux() {
    if skip_unless_root("ipv6_ping_udp_and_stat_against_linux") {
        return;
    }
    need_python();
    let name = lab_name("v6");
    let mut cfg = LabConfig::new(&name);
    cfg.ipv6 = true;
    let lab = lab(&cfg);
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &["--addr", "fd77::2/64"]);
    // RFC 4862: the engine's addresses pass duplicate-address detection (1 s) first.
    let (st, ready) = e.poll_stat(Duration::from_secs(10), POLL, |s| {
        s["ipv6"]["addresses"].as_array().is_some_and(|a| a.iter().all(|x| x.as_str().unwrap_or("").contains("preferred")))
    });
    assert!(ready.is_some(), "IPv6 addresses never became preferred: {}", st["ipv6"]);
    let addrs = st["ipv6"]["addresses"].to_string();
    assert!(addrs.contains("fd77::2/64 preferred static") && addrs.contains("fe80::"), "{addrs}");
    assert_ping(lab.linux_ns(), "fd77::2", "ping6");
    assert_ping(lab.linux_ns(), ENGINE_ADDR, "ping over IPv4 beside IPv6");
    let o = ns_run(lab.linux_ns(), 60, &["python3", &script("interop_udp.py"), "fd77::2", "7", "4444"]);
    assert!(o.status.success() && last_json(&o)["ok"] == true, "UDP over IPv6 failed: {}", text(&o));
    let s = e.stat()["stack"].clone();
    for (k, min) in [("ndisc_solicits_in", 1), ("ndisc_adverts_out", 1), ("icmpv6_errors_out", 1), ("ipv6_packets_in", 5), ("fragments_in", 2)] {
        assert!(s[k].as_u64().unwrap_or(0) >= min, "{k} = {} in {s}", s[k]);
    }
    assert_eq!(s["ipv6_dad_failures"].as_u64(), Some(0), "{s}");
}

// ---------------------------------------------------------------- 3. UDP

#[test]
fn udp_echo_returns_datagram_and_closed_port_gives_econnrefused() {
    if skip_unless_root("udp_echo_returns_datagram_and_closed_port_gives_econnrefused") {
        return;
    }
    need_python();
    let name = lab_name("udp");
    let lab = lab(&LabConfig::new(&name));
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &[]);
    let o = ns_run(
        lab.linux_ns(),
        60,
        &[
            "python3",
            &script("interop_udp.py"),
            ENGINE_ADDR,
            "7",
            "4444",
        ],
    );
    let v = last_json(&o);
    eprintln!("udp: {v}");
    assert!(
        o.status.success() && v["ok"] == true,
        "UDP interop failed: {}",
        text(&o)
    );
    let st = e.stat();
    let s = &st["stack"];
    assert!(
        s["udp_no_port"].as_u64().unwrap_or(0) >= 1,
        "udp_no_port not counted: {s}"
    );
    assert!(
        s["icmp_dest_unreachable_out"].as_u64().unwrap_or(0) >= 1,
        "no ICMP unreachable counted: {s}"
    );
    let echo = st["services"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["service"] == "echo"))
        .cloned();
    let echo = echo.expect("echo service in stat");
    assert!(
        echo["udp_datagrams_out"].as_u64().unwrap_or(0) >= 3,
        "echo service counters: {echo}"
    );
}

// ---------------------------------------------------------------- 4. pcap

#[test]
fn pcap_of_ping_tcp_and_udp_has_no_malformed_frames_or_bad_checksums() {
    if skip_unless_root("pcap_of_ping_tcp_and_udp_has_no_malformed_frames_or_bad_checksums") {
        return;
    }
    need_python();
    need("ping", "iputils-ping");
    need("tshark", "tshark");
    let name = lab_name("pcap");
    let pcap = std::env::temp_dir().join(format!("outboard-interop-{name}.pcap"));
    let _ = std::fs::remove_file(&pcap);
    let lab = lab(&LabConfig::new(&name));
    let pcap_s = pcap.display().to_string();
    let e = EngineProc::in_lab(&lab,
        &format!("{name}-e"),
        "af_packet",
        &["--pcap", &pcap_s],
    );
    assert_ping(lab.linux_ns(), ENGINE_ADDR, "pcap");
    let o = ns_run(
        lab.linux_ns(),
        70,
        &[
            "python3",
            &script("interop_echo_client.py"),
            ENGINE_ADDR,
            "7",
            &(1u64 << 20).to_string(),
            "60",
        ],
    );
    assert!(
        o.status.success() && last_json(&o)["ok"] == true,
        "TCP echo: {}",
        text(&o)
    );
    let o = ns_run(
        lab.linux_ns(),
        60,
        &[
            "python3",
            &script("interop_udp.py"),
            ENGINE_ADDR,
            "7",
            "4444",
        ],
    );
    assert!(o.status.success(), "UDP: {}", text(&o));
    // Let the final ACKs of the TCP close reach the engine (and the capture).
    let _ = e.poll_stat(Duration::from_secs(10), POLL, |s| conn_states(s).is_empty());
    let log = e.stop(); // SIGTERM: the engine flushes and closes the capture
    drop(lab);
    let _rm = RemoveOnDrop(pcap.clone());
    let meta = std::fs::metadata(&pcap)
        .unwrap_or_else(|err| panic!("no pcap {pcap_s} ({err}); engine log: {log}"));
    assert!(
        meta.len() > 24,
        "pcap {pcap_s} holds no frames ({} bytes)",
        meta.len()
    );
    let o = Command::new("timeout")
        .args(["120", "tshark", "-n", "-r", &pcap_s])
        .args([
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args([
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "frame.number",
            "-e",
            "frame.protocols",
            "-e",
            "_ws.expert.message",
        ])
        .output()
        .expect("run tshark");
    assert!(o.status.success(), "tshark failed: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let frames: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    let count = |proto: &str| {
        frames
            .iter()
            .filter(|l| {
                l.split('|')
                    .nth(1)
                    .is_some_and(|p| p.split(':').any(|x| x == proto))
            })
            .count()
    };
    let (icmp, tcp, udp) = (count("icmp"), count("tcp"), count("udp"));
    eprintln!(
        "pcap {pcap_s}: {} frames ({icmp} icmp, {tcp} tcp, {udp} udp)",
        frames.len()
    );
    assert!(!frames.is_empty(), "tshark counted no frames: {}", text(&o));
    assert!(
        icmp >= 6 && tcp > 100 && udp >= 4,
        "capture lacks traffic: {icmp} icmp, {tcp} tcp, {udp} udp"
    );
    let bad: Vec<&&str> = frames
        .iter()
        .filter(|l| {
            let m = l.split('|').nth(2).unwrap_or("").to_ascii_lowercase();
            m.contains("malformed")
                || m.contains("bad checksum")
                || m.contains("incorrect")
                || m.contains("checksum error")
        })
        .collect();
    // ICMP errors quote the offending datagram; a quoted (truncated) UDP header is not malformed.
    assert!(
        bad.is_empty(),
        "{} frame(s) malformed or with a bad checksum, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ---------------------------------------------------------------- 5. 1000 connections

#[test]
fn thousand_concurrent_echo_connections_all_answered_then_freed() {
    if skip_unless_root("thousand_concurrent_echo_connections_all_answered_then_freed") {
        return;
    }
    need_python();
    need("ping", "iputils-ping");
    const N: usize = 1000;
    let name = lab_name("conn");
    let lab = lab(&LabConfig::new(&name));
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &[]);
    // Baseline with ARP resolved both ways (the ARP entry is part of memory_in_use).
    assert_ping(lab.linux_ns(), ENGINE_ADDR, "baseline");
    let st = e.stat();
    assert!(
        conn_states(&st).is_empty(),
        "connections before the test: {:?}",
        conn_states(&st)
    );
    let baseline = st["memory_in_use"].as_u64().expect("memory_in_use");
    let mut c = ns_spawn_lines(
        lab.linux_ns(),
        150,
        &[
            "python3",
            &script("interop_many.py"),
            ENGINE_ADDR,
            "7",
            &N.to_string(),
            "120",
            "--hold",
        ],
        true,
    );
    let held = c.line(Duration::from_secs(120));
    if held.as_deref() != Some(&format!("HELD {N}")) {
        let (st, rest) = c.finish_lines(Duration::from_secs(5));
        panic!("client did not hold {N} connections: {held:?} {st:?} {rest:?}");
    }
    // Every connection is open and answered: the engine holds N established ones.
    let (st, at) = e.poll_stat(Duration::from_secs(10), POLL, |s| {
        conn_states(s)
            .iter()
            .filter(|x| x.as_str() == "Established")
            .count()
            >= N
    });
    let peak_mem = st["memory_in_use"].as_u64().unwrap_or(0);
    assert!(
        at.is_some(),
        "engine shows {} connections, not {N} established",
        conn_states(&st).len()
    );
    eprintln!("{N} connections established; memory_in_use {peak_mem} B (baseline {baseline} B)");
    let mut stdin = c.stdin().expect("stdin");
    writeln!(stdin).expect("release the client");
    drop(stdin);
    let (status, lines) = c.finish_lines(Duration::from_secs(60));
    let v: serde_json::Value = lines
        .iter()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("client printed no JSON: {status:?} {lines:?}"));
    eprintln!("client: {v}");
    assert!(
        status.is_some_and(|s| s.success()) && v["ok"] == true,
        "client failed: {status:?} {v}"
    );
    assert_eq!(v["matched"], N as u64, "{v}");
    // The clients closed first, so the engine ends in LAST-ACK, not TIME-WAIT
    // (60 s, outboard-tcp Config::time_wait): they should all go within
    // seconds; the bound allows a full TIME-WAIT in case the engine closed first.
    // Tolerance: 256 B = four ARP entries (64 B each, arp::ENTRY_OVERHEAD); one
    // leftover connection costs KiBs, so any leak exceeds it.
    let (st, took) = e.poll_stat(Duration::from_secs(75), POLL, |s| {
        conn_states(s).is_empty()
            && s["memory_in_use"].as_u64().unwrap_or(u64::MAX) <= baseline + 256
    });
    let states = conn_states(&st);
    let mut by_state = std::collections::BTreeMap::new();
    for s in &states {
        *by_state.entry(s.clone()).or_insert(0) += 1;
    }
    assert!(
        took.is_some(),
        "75 s after closing: {} connections left {by_state:?}, memory_in_use {} (baseline {baseline})",
        states.len(),
        st["memory_in_use"]
    );
    eprintln!(
        "all {N} freed {:.2} s after the client closed; memory_in_use {} (baseline {baseline}, peak {peak_mem})",
        took.unwrap_or_default().as_secs_f64(),
        st["memory_in_use"]
    );
    let s = &st["stack"];
    assert!(
        s["tcp_connections_accepted"].as_u64().unwrap_or(0) >= N as u64,
        "accepted: {s}"
    );
    assert_eq!(
        s["tcp_resets_out"].as_u64().unwrap_or(0),
        0,
        "the engine sent resets: {s}"
    );
}

// ---------------------------------------------------------------- 6. engine as client

/// ECN against Linux (RFC 3168): Linux asks (`net.ipv4.tcp_ecn = 1` in its
/// namespace), the engine answers as Linux's default does; the echo is
/// byte-exact and the engine's connection shows ECN negotiated.
#[test]
fn ecn_negotiated_with_linux_when_linux_asks() {
    if skip_unless_root("ecn_negotiated_with_linux_when_linux_asks") {
        return;
    }
    need_python();
    let name = lab_name("ecn");
    let lab = lab(&LabConfig::new(&name));
    let o = ns_run(lab.linux_ns(), 10, &["sysctl", "-qw", "net.ipv4.tcp_ecn=1"]);
    assert!(o.status.success(), "sysctl: {}", text(&o));
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &[]);
    let client = ns_spawn_lines(
        lab.linux_ns(),
        120,
        &["python3", &script("interop_echo_client.py"), ENGINE_ADDR, "7", &(256u64 << 20).to_string(), "110"],
        false,
    );
    let (st, seen) = e.poll_stat(Duration::from_secs(30), Duration::from_millis(20), |s| {
        s["connections"].as_array().is_some_and(|c| c.iter().any(|c| c["ecn"] == true))
    });
    let mut client = client;
    let (cst, lines) = client.finish_lines(Duration::from_secs(120));
    let v: serde_json::Value = lines.iter().rev().find_map(|l| serde_json::from_str(l).ok()).unwrap_or_default();
    assert!(v["ok"] == true, "echo with ECN failed ({cst:?}): {lines:?}");
    assert!(seen.is_some(), "no ECN connection in the engine's stat: {}", st["connections"]);
}

/// Path MTU discovery through a narrow hop: the routed lab with a 1280-byte
/// link between the router and Linux, Linux advertising the MSS of 1500.
/// The engine's full-size segments (DF set) meet the router's "fragmentation
/// needed" (RFC 1191) or "packet too big" (RFC 8201), the engine lowers its
/// segment size and resends; both families' echoes arrive byte-exact.
#[test]
fn path_mtu_discovery_through_a_1280_byte_hop_both_families() {
    if skip_unless_root("path_mtu_discovery_through_a_1280_byte_hop_both_families") {
        return;
    }
    need_python();
    let name = lab_name("pmtu");
    let mut cfg = LabConfig::new(&name);
    cfg.topology = Topology::Routed;
    cfg.ipv6 = true;
    cfg.far_mtu = Some(1280);
    let lab = lab(&cfg);
    let addr6 = format!("{}/64", lab.engine_addr6().expect("IPv6 lab"));
    let gw6 = lab.gateway6().expect("routed").to_string();
    let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &["--addr", &addr6, "--gateway", &gw6]);
    for (target, what) in [(ENGINE_ADDR, "IPv4"), ("fd77::2", "IPv6")] {
        let o = ns_run(
            lab.linux_ns(),
            130,
            &["python3", &script("interop_echo_client.py"), target, "7", &(8u64 << 20).to_string(), "120"],
        );
        assert!(o.status.success() && last_json(&o)["ok"] == true, "{what} echo through the 1280-byte hop: {}", text(&o));
    }
    let s = e.stat()["stack"].clone();
    assert!(s["icmp_dest_unreachable_in"].as_u64().unwrap_or(0) >= 1, "no fragmentation needed reached the engine: {s}");
    assert!(s["icmpv6_packet_too_big_in"].as_u64().unwrap_or(0) >= 1, "no packet too big reached the engine: {s}");
    assert!(s["icmp_errors_delivered"].as_u64().unwrap_or(0) >= 2, "{s}");
}

/// RFC 4821 §7 black-hole detection, as Linux's `tcp_mtu_probing = 1`: the
/// routed lab's 1280-byte hop with the router's ICMP errors (fragmentation
/// needed, packet too big) dropped by nftables, so path MTU discovery never
/// hears of it. The engine's full-sized echo segments vanish; after about
/// 3 s of timeouts it falls back to 1024-byte segments and both families'
/// echoes arrive byte-exact. With `--mtu-probing off` the same path stalls.
#[test]
fn rfc4821_black_hole_through_a_1280_byte_hop_without_icmp_both_families() {
    if skip_unless_root("rfc4821_black_hole_through_a_1280_byte_hop_without_icmp_both_families") {
        return;
    }
    need_python();
    let name = lab_name("bhole");
    let mut cfg = LabConfig::new(&name);
    cfg.topology = Topology::Routed;
    cfg.ipv6 = true;
    cfg.far_mtu = Some(1280);
    let lab = lab(&cfg);
    let router = lab.router_ns().expect("routed lab");
    let nft = support::cases::Nft { ns: router, table: "blackhole" };
    nft.drop_icmp_too_big();
    let addr6 = format!("{}/64", lab.engine_addr6().expect("IPv6 lab"));
    let gw6 = lab.gateway6().expect("routed").to_string();
    let echo = |target: &str, bytes: u64, timeout_s: u64| {
        ns_run(
            lab.linux_ns(),
            timeout_s + 10,
            &["python3", &script("interop_echo_client.py"), target, "7", &bytes.to_string(), &timeout_s.to_string()],
        )
    };
    {
        let e = EngineProc::in_lab(&lab, &format!("{name}-e"), "af_packet", &["--addr", &addr6, "--gateway", &gw6]);
        for (target, what) in [(ENGINE_ADDR, "IPv4"), ("fd77::2", "IPv6")] {
            let t0 = Instant::now();
            let o = echo(target, 4 << 20, 90);
            eprintln!("{what} echo through the black hole: {:.1} s", t0.elapsed().as_secs_f64());
            assert!(o.status.success() && last_json(&o)["ok"] == true, "{what} echo through the black hole: {}", text(&o));
        }
        let s = e.stat()["stack"].clone();
        assert_eq!(s["icmp_dest_unreachable_in"].as_u64().unwrap_or(0), 0, "an ICMP error got through: {s}");
        assert_eq!(s["icmpv6_packet_too_big_in"].as_u64().unwrap_or(0), 0, "an ICMPv6 error got through: {s}");
    }
    let _e = EngineProc::in_lab(&lab, &format!("{name}-off"), "af_packet", &["--addr", &addr6, "--gateway", &gw6, "--mtu-probing", "off"]);
    let o = echo(ENGINE_ADDR, 1 << 20, 12);
    assert!(!(o.status.success() && last_json(&o)["ok"] == true), "without black-hole detection the echo should stall: {}", text(&o));
}

/// The engine as an IPv6 client: `outboard fetch` through the routed lab's
/// Linux router (its default IPv6 gateway) to a Linux echo server on `::`.
#[test]
fn engine_fetch_over_ipv6_through_a_router_is_byte_exact() {
    if skip_unless_root("engine_fetch_over_ipv6_through_a_router_is_byte_exact") {
        return;
    }
    need_python();
    let name = lab_name("f6");
    let mut cfg = LabConfig::new(&name);
    cfg.topology = Topology::Routed;
    cfg.ipv6 = true;
    let lab = lab(&cfg);
    let server = ns_spawn_lines(lab.linux_ns(), 120, &["python3", &script("interop_echo_server.py"), "7777", "100", "6"], false);
    assert_eq!(server.line(Duration::from_secs(20)).as_deref(), Some("LISTENING"), "echo server did not start");
    let connect = format!("[{}]:7777", lab.linux_addr6().expect("an IPv6 lab"));
    let addr = format!("{}/{}", lab.engine_addr(), lab.engine_prefix());
    let addr6 = format!("{}/64", lab.engine_addr6().expect("an IPv6 lab"));
    let gw = lab.gateway().expect("routed").to_string();
    let gw6 = lab.gateway6().expect("routed").to_string();
    let o = Command::new("timeout")
        .args(["-k", "5", "110", "ip", "netns", "exec", lab.engine_ns(), OUTBOARD, "fetch"])
        .args(["--link", "af_packet:eng0", "--addr", &addr, "--addr", &addr6, "--gateway", &gw, "--gateway", &gw6])
        .args(["--connect", &connect, "--send", "32MiB", "--expect-echo", "--json", "--timeout-s", "90"])
        .args(["--name", &format!("{name}-f")])
        .env("OUTBOARD_RUN_DIR", support::run_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run outboard fetch");
    let v = last_json(&o);
    let mut server = server;
    let (sst, slines) = server.finish_lines(Duration::from_secs(20));
    eprintln!("fetch over IPv6: {v}\nserver: {slines:?} ({sst:?})");
    assert!(o.status.success() && v["ok"] == true, "fetch failed: {}", text(&o));
    assert_eq!(v["bytes_received"], 32u64 << 20, "{v}");
    assert_eq!(v["sha256_sent"], v["sha256_received"], "{v}");
}

#[test]
fn engine_fetch_from_linux_echo_server_is_byte_exact_256mib() {
    if skip_unless_root("engine_fetch_from_linux_echo_server_is_byte_exact_256mib") {
        return;
    }
    need_python();
    let name = lab_name("fetch");
    let lab = lab(&LabConfig::new(&name));
    let server = ns_spawn_lines(
        lab.linux_ns(),
        200,
        &["python3", &script("interop_echo_server.py"), "7777", "190"],
        false,
    );
    let first = server.line(Duration::from_secs(20));
    assert_eq!(
        first.as_deref(),
        Some("LISTENING"),
        "echo server did not start"
    );
    let connect = format!("{}:7777", lab.linux_addr());
    let addr = format!("{}/{}", lab.engine_addr(), lab.engine_prefix());
    let t0 = Instant::now();
    let o = Command::new("timeout")
        .args([
            "-k",
            "5",
            "200",
            "ip",
            "netns",
            "exec",
            lab.engine_ns(),
            OUTBOARD,
            "fetch",
        ])
        .args([
            "--link",
            "af_packet:eng0",
            "--addr",
            &addr,
            "--connect",
            &connect,
        ])
        .args([
            "--send",
            "256MiB",
            "--expect-echo",
            "--json",
            "--timeout-s",
            "180",
            "--name",
            &format!("{name}-f"),
        ])
        .env("OUTBOARD_RUN_DIR", support::run_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run outboard fetch");
    let wall = t0.elapsed().as_secs_f64();
    let v = last_json(&o);
    let mut server = server;
    let (sst, slines) = server.finish_lines(Duration::from_secs(20));
    eprintln!("fetch: {v}\nserver: {slines:?} ({sst:?})");
    assert!(
        o.status.success() && v["ok"] == true,
        "fetch failed: {}",
        text(&o)
    );
    assert_eq!(v["bytes_sent"], 256u64 << 20, "{v}");
    assert_eq!(v["bytes_received"], 256u64 << 20, "{v}");
    assert_eq!(v["sha256_sent"], v["sha256_received"], "{v}");
    assert_eq!(v["state"], "done", "{v}");
    let total = v["total_s"].as_f64().unwrap_or(wall);
    eprintln!(
        "fetch 256 MiB each way in {total:.2} s: {:.1} Mbit/s each way ({wall:.2} s wall)",
        (256u64 << 20) as f64 * 8.0 / total / 1e6
    );
    let sv: serde_json::Value = slines
        .iter()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("server printed no report: {slines:?}"));
    assert_eq!(sv["echoed"], 256u64 << 20, "server: {sv}");
}
