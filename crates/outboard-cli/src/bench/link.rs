//! `outboard bench link`: the engine against the Linux stack on the lab's veth
//! pair, side by side, in one run.
//!
//! The bench builds its own lab (direct, no impairment, `--mtu`), then for
//! each link kind asked for (af_xdp, af_packet or both) measures two cases
//! twice, engine first, Linux right after:
//!
//! - **throughput**: one TCP connection from a Linux client in `ob-N-lnx`
//!   writing 64 KiB at a time for `--seconds`, then closing its side and
//!   waiting for the server's FIN (so every byte counted has been consumed by
//!   the server). Ours: the engine's `sink` on 10.77.0.2:5001. Linux: a sink
//!   thread in `ob-N-eng` on 10.77.0.3:5001, an address put on eng0 for that
//!   case only and removed after, with the engine stopped (with af_packet
//!   the kernel sees every frame the engine sees; so the two never run at
//!   the same time).
//! - **64-byte request/response**: TCP_NODELAY, one 64-byte message out, the
//!   same 64 bytes back (checked), for `--seconds`; mean, p50, p99 and
//!   transactions/s. Ours: the engine's `echo` (port 7); Linux: an echo
//!   thread in `ob-N-eng`.
//!
//! Clients and Linux servers are threads of this process that entered their
//! namespace with `setns(2)` (only the calling thread moves). The engine is
//! `ip netns exec ob-N-eng <this exe> engine ...` with `OUTBOARD_RUN_DIR` in a
//! temporary directory; its CPU (`cpu_s`/`wall_s` from `outboard stat`) is
//! recorded per case, with the offloads `ethtool -k` reports for eng0 and
//! lnx0 and the mean size of the frames eng0 received (which shows whether
//! the kernel moved GSO super-packets). The lab and the engine are torn down
//! on every path out (guards), also after SIGINT/SIGTERM.
//!
//! Exit codes: 0 done; 1 a measurement failed (its message says which);
//! 2 bad arguments; 10 not root; 11 a tool is missing; 12-14 the lab failed.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::lab_engine::{EngineProc, KernelAddr};
use clap::{Args, ValueEnum};
use outboard_engine::stat::Snapshot;
use outboard_lab::{sys, Lab, LabConfig};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, ExitCode};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The engine's address (the lab's).
const ENGINE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The address eng0 gets for the Linux-to-Linux case only.
const LINUX_SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 3);
const SINK_PORT: u16 = 5001;
const ECHO_PORT: u16 = 7;
/// Bytes per write of the throughput client.
const WRITE_SIZE: usize = 64 * 1024;
/// Bytes per request (and response) of the round-trip case.
const RR_SIZE: usize = 64;
/// Unmeasured round trips before the measured ones (ARP, first-use costs).
const RR_WARMUP: u32 = 200;
/// An upper bound on measured round trips (keeps the sample vector bounded).
const RR_MAX: usize = 20_000_000;
/// A socket call that makes no progress for this long fails the case.
const IO_TIMEOUT: Duration = Duration::from_secs(20);
/// Socket timeouts: a blocked call wakes this often to look at the stop flag
/// (so Ctrl-C, which also stops the engine, ends the bench at once).
const IO_POLL: Duration = Duration::from_millis(250);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LinkChoice {
    #[value(name = "af_xdp")]
    AfXdp,
    #[value(name = "af_packet")]
    AfPacket,
    /// af_xdp, then af_packet.
    #[value(name = "both")]
    Both,
}

#[derive(Args, Debug)]
pub struct LinkArgs {
    /// The engine's link: af_xdp, af_packet, or both (one after the other).
    #[arg(long, value_enum, default_value = "af_xdp")]
    pub link: LinkChoice,
    /// Seconds each case runs (each case runs once for ours and once for Linux; 0.001 to 3600).
    #[arg(long, default_value = "3", value_parser = crate::args::bench_seconds())]
    pub seconds: f64,
    /// MTU of the lab's veths, 576 to 9000 (af_xdp takes at most 3498; `both` then skips it).
    #[arg(long, default_value = "1500", value_parser = crate::args::engine_mtu_u32())]
    pub mtu: u32,
    /// Lab name (1 to 8 of a-z 0-9; default `bl` and this process's id in base 36).
    #[arg(long)]
    pub lab_name: Option<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

// ---------------------------------------------------------------- the report

pub use super::peer::{machine, Machine};

#[derive(Debug, Serialize)]
pub struct Throughput {
    /// Bytes written by the client (and, checked, consumed by the server).
    pub bytes: u64,
    /// From connect to the server's FIN.
    pub seconds: f64,
    pub mbit_s: f64,
    /// eng0's kernel counters during the case: frames and mean frame size received.
    pub eng0_rx_frames: u64,
    pub eng0_rx_mean_frame_bytes: f64,
}

#[derive(Debug, Serialize)]
pub struct RoundTrip {
    pub transactions: u64,
    pub seconds: f64,
    pub transactions_per_s: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// The engine's shard CPU over one case: `cpu_s` and `wall_s` deltas from `outboard stat`.
#[derive(Debug, Serialize)]
pub struct EngineCpu {
    pub cpu_s: f64,
    pub wall_s: f64,
    /// cpu_s / wall_s.
    pub utilisation: f64,
}

#[derive(Debug, Serialize)]
pub struct EngineSide {
    pub link: String,
    /// The engine's link mode and offloads as it reports them.
    pub link_mode: String,
    pub link_offloads: Vec<String>,
    pub mtu: usize,
    pub throughput: Throughput,
    pub throughput_cpu: EngineCpu,
    pub round_trip: RoundTrip,
    pub round_trip_cpu: EngineCpu,
}

#[derive(Debug, Serialize)]
pub struct LinuxSide {
    /// The server address (on eng0, in ob-N-eng, for this case only).
    pub server: String,
    pub throughput: Throughput,
    pub round_trip: RoundTrip,
    /// The throughput case again with TX checksum offload turned back on on
    /// every kernel end of the path (lnx0, imp-l, imp-e, br0; the lab turns it
    /// off because the engine needs full checksums): what Linux-to-Linux gets
    /// with TSO/GSO super-packets end to end on the veths.
    pub throughput_lnx0_tx_offload_on: Throughput,
    /// `ethtool -k lnx0` during that case.
    pub lnx0_offloads_then: BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub case: String,
    pub ours: f64,
    pub linux: f64,
    /// ours / Linux (for latencies, lower is better).
    pub ratio: f64,
}

#[derive(Debug, Serialize)]
pub struct LinkResult {
    pub link: String,
    pub engine: EngineSide,
    pub linux: LinuxSide,
    pub rows: Vec<Row>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub command: String,
    pub machine: Machine,
    pub lab: String,
    pub mtu: u32,
    pub seconds_per_case: f64,
    /// `ethtool -k` of eng0 and lnx0 (the Linux-to-Linux case's ends), feature -> on/off.
    pub offloads: BTreeMap<String, BTreeMap<String, String>>,
    pub results: Vec<LinkResult>,
    /// Link kinds asked for but not run, and why.
    pub skipped: Vec<String>,
}

// ---------------------------------------------------------------- entry

/// `outboard bench link`.
pub fn main(a: &LinkArgs) -> ExitCode {
    if sys::euid() != 0 {
        eprintln!(
            "outboard bench link: needs root (it builds network namespaces and veth pairs and runs the engine on AF_XDP/AF_PACKET); run it as root, e.g. with sudo"
        );
        return ExitCode::from(10);
    }
    let links: Vec<&str> = match a.link {
        LinkChoice::AfXdp => vec!["af_xdp"],
        LinkChoice::AfPacket => vec!["af_packet"],
        LinkChoice::Both => vec!["af_xdp", "af_packet"],
    };
    let xdp_max = outboard_engine::link::af_xdp::MAX_MTU as u32;
    let mut skipped = Vec::new();
    let links: Vec<&str> = links
        .into_iter()
        .filter(|l| {
            let keep = !(*l == "af_xdp" && a.mtu > xdp_max);
            if !keep {
                skipped.push(format!(
                    "af_xdp: MTU {} is above {xdp_max}, the most one 4 KiB UMEM frame holds without multi-buffer; use af_packet",
                    a.mtu
                ));
            }
            keep
        })
        .collect();
    if links.is_empty() {
        eprintln!("outboard bench link: {}", skipped.join("; "));
        return ExitCode::from(2);
    }
    let name = a.lab_name.clone().unwrap_or_else(|| super::lab_name("bl"));
    if let Err(e) = outboard_lab::validate_name(&name) {
        eprintln!("outboard bench link: {e}");
        return ExitCode::from(2);
    }
    // Ctrl-C and SIGTERM set a flag: the loops stop and every guard runs.
    let _ = sys::install_stop_handler();
    let mut cfg = LabConfig::new(&name);
    cfg.mtu = a.mtu;
    let lab = match Lab::up(&cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("outboard bench link: lab {name}: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let dur = Duration::from_secs_f64(a.seconds.max(0.05));
    let result = run(&name, &links, a, dur, skipped);
    let down = lab.teardown();
    super::finish("link", &name, result, down, a.json, print_table)
}


fn run(
    lab: &str,
    links: &[&str],
    a: &LinkArgs,
    dur: Duration,
    skipped: Vec<String>,
) -> Result<Report, String> {
    let eng_ns = outboard_lab::namespace(lab, "eng");
    let lnx_ns = outboard_lab::namespace(lab, "lnx");
    let mut offloads = BTreeMap::new();
    offloads.insert("eng0".to_string(), ethtool_k(&eng_ns, "eng0")?);
    offloads.insert("lnx0".to_string(), ethtool_k(&lnx_ns, "lnx0")?);
    let run_dir = std::env::temp_dir().join(format!("outboard-bench-link-{}", std::process::id()));
    std::fs::create_dir_all(&run_dir).map_err(|e| format!("create {}: {e}", run_dir.display()))?;
    let mut results = Vec::new();
    let mut outcome = Ok(());
    for link in links {
        match run_link(link, lab, &run_dir, dur) {
            Ok(r) => results.push(r),
            Err(e) => {
                outcome = Err(format!("{link}: {e}"));
                break;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&run_dir);
    outcome?;
    let mut command = format!("outboard bench link --link {}", link_choice_name(a.link));
    command.push_str(&format!(" --seconds {}", a.seconds));
    if a.mtu != 1500 {
        command.push_str(&format!(" --mtu {}", a.mtu));
    }
    if a.json {
        command.push_str(" --json");
    }
    Ok(Report {
        command,
        machine: machine(),
        lab: lab.to_string(),
        mtu: a.mtu,
        seconds_per_case: dur.as_secs_f64(),
        offloads,
        results,
        skipped,
    })
}

fn link_choice_name(c: LinkChoice) -> &'static str {
    match c {
        LinkChoice::AfXdp => "af_xdp",
        LinkChoice::AfPacket => "af_packet",
        LinkChoice::Both => "both",
    }
}

fn stopped() -> Result<(), String> {
    if sys::stop_requested() {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Ours, then Linux, for one link kind.
fn run_link(
    link: &str,
    lab: &str,
    run_dir: &std::path::Path,
    dur: Duration,
) -> Result<LinkResult, String> {
    let eng_ns = &outboard_lab::namespace(lab, "eng");
    let imp_ns = &outboard_lab::namespace(lab, "imp");
    let lnx_ns = &outboard_lab::namespace(lab, "lnx");
    stopped()?;
    // ---- ours
    let engine = EngineProc::start(
        eng_ns,
        &format!("{link}:eng0"),
        &format!("{ENGINE_ADDR}/24"),
        "sink,echo",
        format!("bench-{}", std::process::id()),
        run_dir,
        run_dir.join(format!("engine-{link}.log")),
        &[],
    )?;
    let engine_side = (|| {
        let s0 = engine.stat()?;
        let rx0 = iface_rx(eng_ns, "eng0")?;
        let tput = throughput_client(lnx_ns, SocketAddrV4::new(ENGINE_ADDR, SINK_PORT), dur)
            .map_err(|e| format!("throughput to the engine's sink: {e}"))?;
        let rx1 = iface_rx(eng_ns, "eng0")?;
        let s1 = engine.stat()?;
        let sunk = service_bytes_in(&s1, "sink") - service_bytes_in(&s0, "sink");
        if sunk != tput.0 {
            return Err(format!(
                "the engine's sink consumed {sunk} bytes, the client wrote {}",
                tput.0
            ));
        }
        let rr = round_trip_client(lnx_ns, SocketAddrV4::new(ENGINE_ADDR, ECHO_PORT), dur)
            .map_err(|e| format!("round trips with the engine's echo: {e}"))?;
        let s2 = engine.stat()?;
        Ok(EngineSide {
            link: link.to_string(),
            link_mode: s1.link.mode.clone(),
            link_offloads: s1.link.offloads.clone(),
            mtu: s1.link.mtu,
            throughput: throughput_report(tput, rx0, rx1),
            throughput_cpu: cpu_delta(&s0, &s1),
            round_trip: rr,
            round_trip_cpu: cpu_delta(&s1, &s2),
        })
    })();
    let log = engine.stop();
    let engine_side = engine_side.map_err(|e| format!("{e}\nengine log:\n{}", log.trim_end()))?;
    stopped()?;
    // ---- Linux, on the same veth, engine stopped
    let _addr = KernelAddr::add(eng_ns, "eng0", &format!("{LINUX_SERVER_ADDR}/24"))?;
    let sink = LinuxServer::start(eng_ns, SINK_PORT, ServerKind::Sink)?;
    let rx0 = iface_rx(eng_ns, "eng0")?;
    let tput = throughput_client(lnx_ns, SocketAddrV4::new(LINUX_SERVER_ADDR, SINK_PORT), dur)
        .map_err(|e| format!("throughput to the Linux sink: {e}"))?;
    let rx1 = iface_rx(eng_ns, "eng0")?;
    let sunk = sink.join()?;
    if sunk != tput.0 {
        return Err(format!(
            "the Linux sink read {sunk} bytes, the client wrote {}",
            tput.0
        ));
    }
    let echo = LinuxServer::start(eng_ns, ECHO_PORT, ServerKind::Echo)?;
    let rr = round_trip_client(lnx_ns, SocketAddrV4::new(LINUX_SERVER_ADDR, ECHO_PORT), dur)
        .map_err(|e| format!("round trips with the Linux echo: {e}"))?;
    echo.join()?;
    stopped()?;
    // ---- Linux again, lnx0's TX checksum offload (and so TSO) back on
    let (full, lnx0_offloads_then) = {
        let _tx = TxOffload::on(lnx_ns, imp_ns)?;
        let offs = ethtool_k(lnx_ns, "lnx0")?;
        let sink = LinuxServer::start(eng_ns, SINK_PORT, ServerKind::Sink)?;
        let rx0 = iface_rx(eng_ns, "eng0")?;
        let t = throughput_client(lnx_ns, SocketAddrV4::new(LINUX_SERVER_ADDR, SINK_PORT), dur)
            .map_err(|e| format!("throughput to the Linux sink, lnx0 tx offload on: {e}"))?;
        let rx1 = iface_rx(eng_ns, "eng0")?;
        let sunk = sink.join()?;
        if sunk != t.0 {
            return Err(format!(
                "the Linux sink read {sunk} bytes, the client wrote {}",
                t.0
            ));
        }
        (throughput_report(t, rx0, rx1), offs)
    };
    let linux = LinuxSide {
        server: LINUX_SERVER_ADDR.to_string(),
        throughput: throughput_report(tput, rx0, rx1),
        round_trip: rr,
        throughput_lnx0_tx_offload_on: full,
        lnx0_offloads_then,
    };
    let rows = rows(&engine_side, &linux);
    Ok(LinkResult {
        link: link.to_string(),
        engine: engine_side,
        linux,
        rows,
    })
}

fn rows(e: &EngineSide, l: &LinuxSide) -> Vec<Row> {
    let row = |case: &str, ours: f64, linux: f64| Row {
        case: case.to_string(),
        ours,
        linux,
        ratio: if linux > 0.0 { ours / linux } else { 0.0 },
    };
    vec![
        row(
            "throughput, 1 connection (Mbit/s)",
            e.throughput.mbit_s,
            l.throughput.mbit_s,
        ),
        row(
            "64 B request/response (transactions/s)",
            e.round_trip.transactions_per_s,
            l.round_trip.transactions_per_s,
        ),
        row(
            "64 B round trip, mean (us)",
            e.round_trip.mean_us,
            l.round_trip.mean_us,
        ),
        row(
            "64 B round trip, p50 (us)",
            e.round_trip.p50_us,
            l.round_trip.p50_us,
        ),
        row(
            "64 B round trip, p99 (us)",
            e.round_trip.p99_us,
            l.round_trip.p99_us,
        ),
    ]
}

fn throughput_report(t: (u64, f64), rx0: (u64, u64), rx1: (u64, u64)) -> Throughput {
    let frames = rx1.1.saturating_sub(rx0.1);
    let bytes = rx1.0.saturating_sub(rx0.0);
    Throughput {
        bytes: t.0,
        seconds: t.1,
        mbit_s: t.0 as f64 * 8.0 / t.1 / 1e6,
        eng0_rx_frames: frames,
        eng0_rx_mean_frame_bytes: if frames > 0 {
            bytes as f64 / frames as f64
        } else {
            0.0
        },
    }
}

fn cpu_delta(a: &Snapshot, b: &Snapshot) -> EngineCpu {
    let cpu_s = (b.shard.cpu_s - a.shard.cpu_s).max(0.0);
    let wall_s = (b.shard.wall_s - a.shard.wall_s).max(0.0);
    EngineCpu {
        cpu_s,
        wall_s,
        utilisation: if wall_s > 0.0 { cpu_s / wall_s } else { 0.0 },
    }
}

fn service_bytes_in(s: &Snapshot, service: &str) -> u64 {
    s.services
        .iter()
        .filter(|c| c.service == service)
        .map(|c| c.bytes_in)
        .sum()
}

// ---------------------------------------------------------------- namespaces

extern "C" {
    /// glibc's `setns(2)`.
    fn setns(fd: i32, nstype: i32) -> i32;
}

/// `CLONE_NEWNET` from linux/sched.h.
const CLONE_NEWNET: i32 = 0x4000_0000;

/// Moves the calling thread (only it) into network namespace `ns`.
pub(super) fn enter_netns(ns: &str) -> Result<(), String> {
    let path = format!("/var/run/netns/{ns}");
    let f = File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
    // SAFETY: `f` is an open namespace file for the call's duration; setns
    // changes only this thread's network namespace and touches no memory of ours.
    let rc = unsafe { setns(f.as_raw_fd(), CLONE_NEWNET) };
    if rc != 0 {
        return Err(format!("setns({path}): {}", io::Error::last_os_error()));
    }
    Ok(())
}

/// Runs `f` on a new thread inside namespace `ns` and waits for it.
fn in_netns<R: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<R, String> + Send + 'static,
) -> thread::JoinHandle<Result<R, String>> {
    let ns = ns.to_string();
    thread::spawn(move || {
        enter_netns(&ns)?;
        f()
    })
}

fn join<R>(h: thread::JoinHandle<Result<R, String>>) -> Result<R, String> {
    h.join()
        .unwrap_or_else(|_| Err("a bench thread panicked".into()))
}

/// `ip -n NS args`, checked.
fn ip(ns: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("timeout")
        .args(["10", "ip", "-n", ns])
        .args(args)
        .output()
        .map_err(|e| format!("ip -n {ns} {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip -n {ns} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// eng0's kernel receive counters: (bytes, packets).
fn iface_rx(ns: &str, iface: &str) -> Result<(u64, u64), String> {
    let text = ip(ns, &["-j", "-s", "link", "show", "dev", iface])?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("ip -j -s link: {e}"))?;
    let rx = &v[0]["stats64"]["rx"];
    Ok((
        rx["bytes"].as_u64().unwrap_or(0),
        rx["packets"].as_u64().unwrap_or(0),
    ))
}

/// The offloads the report names, from `ethtool -k IFACE` in `ns`.
fn ethtool_k(ns: &str, iface: &str) -> Result<BTreeMap<String, String>, String> {
    let out = Command::new("timeout")
        .args(["10", "ip", "netns", "exec", ns, "ethtool", "-k", iface])
        .output()
        .map_err(|e| format!("ethtool -k {iface}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ethtool -k {iface} in {ns} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let wanted = [
        "tx-checksumming",
        "rx-checksumming",
        "scatter-gather",
        "tcp-segmentation-offload",
        "generic-segmentation-offload",
        "generic-receive-offload",
    ];
    let mut m = BTreeMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if wanted.contains(&k.trim()) {
                m.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    Ok(m)
}

/// `ethtool -K IFACE tx on` on every kernel end of the path (lnx0, the
/// bridge's ports and the bridge) for one case; back off on drop (the lab's
/// setting). With any hop left off, that hop segments the super-packets.
struct TxOffload {
    ifaces: Vec<(String, String)>,
}

impl TxOffload {
    fn on(lnx_ns: &str, imp_ns: &str) -> Result<TxOffload, String> {
        let mut g = TxOffload { ifaces: Vec::new() };
        for (ns, i) in [
            (lnx_ns, "lnx0"),
            (imp_ns, "imp-l"),
            (imp_ns, "imp-e"),
            (imp_ns, "br0"),
        ] {
            ethtool_set(ns, i, "on")?;
            g.ifaces.push((ns.to_string(), i.to_string()));
        }
        Ok(g)
    }
}

impl Drop for TxOffload {
    fn drop(&mut self) {
        for (ns, i) in &self.ifaces {
            let _ = ethtool_set(ns, i, "off");
        }
    }
}

fn ethtool_set(ns: &str, iface: &str, tx: &str) -> Result<(), String> {
    let out = Command::new("timeout")
        .args([
            "10", "ip", "netns", "exec", ns, "ethtool", "-K", iface, "tx", tx,
        ])
        .output()
        .map_err(|e| format!("ethtool -K {iface} tx {tx}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ethtool -K {iface} tx {tx} in {ns} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- Linux servers

#[derive(Clone, Copy)]
enum ServerKind {
    /// Reads until EOF, returns the byte count, closes.
    Sink,
    /// Writes back what it reads until EOF.
    Echo,
}

/// A one-connection server thread in the eng namespace.
struct LinuxServer {
    handle: thread::JoinHandle<Result<u64, String>>,
}

impl LinuxServer {
    /// Binds (before returning, so the client may connect at once) and serves one connection.
    fn start(ns: &str, port: u16, kind: ServerKind) -> Result<LinuxServer, String> {
        let (tx, rx) = mpsc::channel::<Result<(), String>>();
        let handle = in_netns(ns, move || {
            let bound = TcpListener::bind(SocketAddrV4::new(LINUX_SERVER_ADDR, port))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|e| format!("bind {LINUX_SERVER_ADDR}:{port}: {e}"));
            let listener = match bound {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(e.clone()));
                    return Err(e);
                }
            };
            let t0 = Instant::now();
            let mut s = loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if t0.elapsed() > Duration::from_secs(10) || sys::stop_requested() {
                            return Err(format!(
                                "no connection to {LINUX_SERVER_ADDR}:{port} in 10 s"
                            ));
                        }
                        thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => return Err(format!("accept: {e}")),
                }
            };
            s.set_nonblocking(false)
                .map_err(|e| format!("set_nonblocking: {e}"))?;
            s.set_read_timeout(Some(IO_POLL))
                .map_err(|e| format!("set_read_timeout: {e}"))?;
            s.set_write_timeout(Some(IO_POLL))
                .map_err(|e| format!("set_write_timeout: {e}"))?;
            let _ = s.set_nodelay(true);
            let mut buf = vec![0u8; 256 * 1024];
            let mut total = 0u64;
            loop {
                let n = read_some(&mut s, &mut buf, "server read")?;
                if n == 0 {
                    break;
                }
                total += n as u64;
                if let ServerKind::Echo = kind {
                    write_full(&mut s, &buf[..n], "echo write")?;
                }
            }
            Ok(total)
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(LinuxServer { handle }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(join(handle)
                .err()
                .unwrap_or_else(|| "the Linux server did not start".into())),
        }
    }

    fn join(self) -> Result<u64, String> {
        join(self.handle)
    }
}

// ---------------------------------------------------------------- Linux clients

fn connect(to: SocketAddrV4) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&SocketAddr::V4(to), Duration::from_secs(5))
        .map_err(|e| format!("connect {to}: {e}"))?;
    s.set_read_timeout(Some(IO_POLL))
        .map_err(|e| format!("set_read_timeout: {e}"))?;
    s.set_write_timeout(Some(IO_POLL))
        .map_err(|e| format!("set_write_timeout: {e}"))?;
    Ok(s)
}

/// What to do after a socket call failed: go on (interrupted, or a poll
/// timeout while the stop flag is down and progress is recent) or give up.
fn io_retry(e: io::Error, since: Instant, what: &str) -> Result<(), String> {
    match e.kind() {
        io::ErrorKind::Interrupted => Ok(()),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            if sys::stop_requested() {
                Err(format!("{what}: interrupted"))
            } else if since.elapsed() > IO_TIMEOUT {
                Err(format!("{what}: no progress in {} s", IO_TIMEOUT.as_secs()))
            } else {
                Ok(())
            }
        }
        _ => Err(format!("{what}: {e}")),
    }
}

/// One `read` (0 at EOF), retried across poll timeouts.
fn read_some(s: &mut TcpStream, buf: &mut [u8], what: &str) -> Result<usize, String> {
    let t0 = Instant::now();
    loop {
        match s.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) => io_retry(e, t0, what)?,
        }
    }
}

/// Fills `buf` exactly; EOF first is an error.
fn read_full(s: &mut TcpStream, mut buf: &mut [u8], what: &str) -> Result<(), String> {
    let mut t0 = Instant::now();
    while !buf.is_empty() {
        match s.read(buf) {
            Ok(0) => return Err(format!("{what}: the peer closed")),
            Ok(n) => {
                buf = &mut buf[n..];
                t0 = Instant::now();
            }
            Err(e) => io_retry(e, t0, what)?,
        }
    }
    Ok(())
}

/// Writes all of `buf`, retried across poll timeouts.
fn write_full(s: &mut TcpStream, mut buf: &[u8], what: &str) -> Result<(), String> {
    let mut t0 = Instant::now();
    while !buf.is_empty() {
        match s.write(buf) {
            Ok(0) => return Err(format!("{what}: wrote nothing")),
            Ok(n) => {
                buf = &buf[n..];
                t0 = Instant::now();
            }
            Err(e) => io_retry(e, t0, what)?,
        }
    }
    Ok(())
}

/// Writes 64 KiB at a time for `dur`, closes its side, waits for the server's
/// FIN. Returns (bytes, seconds from connect to that FIN).
fn throughput_client(ns: &str, to: SocketAddrV4, dur: Duration) -> Result<(u64, f64), String> {
    join(in_netns(ns, move || {
        let buf: Vec<u8> = (0..WRITE_SIZE).map(|i| (i % 251) as u8).collect();
        let t0 = Instant::now();
        let mut s = connect(to)?;
        let mut bytes = 0u64;
        while t0.elapsed() < dur && !sys::stop_requested() {
            write_full(&mut s, &buf, "write").map_err(|e| format!("{e} (after {bytes} bytes)"))?;
            bytes += WRITE_SIZE as u64;
        }
        s.shutdown(Shutdown::Write)
            .map_err(|e| format!("shutdown: {e}"))?;
        let mut rest = [0u8; 4096];
        let n = read_some(&mut s, &mut rest, "waiting for the sink's FIN")
            .map_err(|e| format!("{e} (after {bytes} bytes)"))?;
        if n > 0 {
            return Err(format!("the sink sent {n} bytes"));
        }
        Ok((bytes, t0.elapsed().as_secs_f64()))
    }))
}

/// 64-byte request, 64-byte response, for `dur` (after a warm-up).
fn round_trip_client(ns: &str, to: SocketAddrV4, dur: Duration) -> Result<RoundTrip, String> {
    join(in_netns(ns, move || {
        let mut s = connect(to)?;
        s.set_nodelay(true)
            .map_err(|e| format!("TCP_NODELAY: {e}"))?;
        let mut msg = [0u8; RR_SIZE];
        let mut back = [0u8; RR_SIZE];
        let mut one = |s: &mut TcpStream, i: u64| -> Result<(), String> {
            msg[..8].copy_from_slice(&i.to_le_bytes());
            msg[8] = msg[8].wrapping_add(1);
            write_full(s, &msg, "request").map_err(|e| format!("{e} (#{i})"))?;
            read_full(s, &mut back, "response").map_err(|e| format!("{e} (#{i})"))?;
            if back != msg {
                return Err(format!("response #{i} differs from the request"));
            }
            Ok(())
        };
        for i in 0..RR_WARMUP {
            one(&mut s, u64::from(i))?;
        }
        let mut samples: Vec<u64> = Vec::with_capacity(1 << 16);
        let t0 = Instant::now();
        while t0.elapsed() < dur && samples.len() < RR_MAX && !sys::stop_requested() {
            let t = Instant::now();
            one(&mut s, samples.len() as u64)?;
            samples.push(t.elapsed().as_nanos() as u64);
        }
        let secs = t0.elapsed().as_secs_f64();
        let _ = s.shutdown(Shutdown::Write);
        let mut rest = [0u8; 64];
        let _ = read_some(&mut s, &mut rest, "close");
        if samples.is_empty() {
            return Err("no round trip completed".into());
        }
        let n = samples.len();
        let mean = samples.iter().sum::<u64>() as f64 / n as f64;
        samples.sort_unstable();
        let pct = |p: f64| samples[((n as f64 * p).ceil() as usize).clamp(1, n) - 1] as f64;
        Ok(RoundTrip {
            transactions: n as u64,
            seconds: secs,
            transactions_per_s: n as f64 / secs,
            mean_us: mean / 1e3,
            p50_us: pct(0.50) / 1e3,
            p99_us: pct(0.99) / 1e3,
        })
    }))
}

// ---------------------------------------------------------------- machine and output


fn offload_line(m: &BTreeMap<String, String>) -> String {
    let short = [
        ("tx-checksumming", "tx-csum"),
        ("rx-checksumming", "rx-csum"),
        ("scatter-gather", "sg"),
        ("tcp-segmentation-offload", "tso"),
        ("generic-segmentation-offload", "gso"),
        ("generic-receive-offload", "gro"),
    ];
    short
        .iter()
        .filter_map(|(k, s)| m.get(*k).map(|v| format!("{s} {v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn print_table(r: &Report) {
    println!(
        "outboard bench link: the engine vs Linux on the lab's veth pair ({})",
        r.command
    );
    println!(
        "machine: {} x {}, Linux {}; lab ob-{}-*, MTU {}, {:.1} s per case",
        r.machine.nproc, r.machine.cpu_model, r.machine.kernel, r.lab, r.mtu, r.seconds_per_case
    );
    for (iface, m) in &r.offloads {
        println!("ethtool -k {iface}: {}", offload_line(m));
    }
    for s in &r.skipped {
        println!("skipped {s}");
    }
    for l in &r.results {
        let e = &l.engine;
        println!();
        println!(
            "link {} (mode {}, MTU {}{}); Linux: server {} on eng0, engine stopped",
            l.link,
            e.link_mode,
            e.mtu,
            if e.link_offloads.is_empty() {
                String::new()
            } else {
                format!(", offloads {}", e.link_offloads.join(","))
            },
            l.linux.server
        );
        println!(
            "  {:<40} {:>12} {:>12} {:>12}",
            "case", "ours", "Linux", "ours/Linux"
        );
        for row in &l.rows {
            println!(
                "  {:<40} {:>12.1} {:>12.1} {:>11.2}x",
                row.case, row.ours, row.linux, row.ratio
            );
        }
        println!(
            "  engine CPU (cpu_s/wall_s): {:.2} during throughput, {:.2} during round trips",
            e.throughput_cpu.utilisation, e.round_trip_cpu.utilisation
        );
        println!(
            "  eng0 received during throughput: ours {} frames of {:.0} B mean, Linux {} frames of {:.0} B mean",
            e.throughput.eng0_rx_frames,
            e.throughput.eng0_rx_mean_frame_bytes,
            l.linux.throughput.eng0_rx_frames,
            l.linux.throughput.eng0_rx_mean_frame_bytes
        );
        let f = &l.linux.throughput_lnx0_tx_offload_on;
        println!(
            "  Linux with tx offload on along the path (lnx0: {}): {:.1} Mbit/s (ours/that {:.2}x), eng0 got {} frames of {:.0} B mean",
            offload_line(&l.linux.lnx0_offloads_then),
            f.mbit_s,
            if f.mbit_s > 0.0 { e.throughput.mbit_s / f.mbit_s } else { 0.0 },
            f.eng0_rx_frames,
            f.eng0_rx_mean_frame_bytes
        );
    }
}
