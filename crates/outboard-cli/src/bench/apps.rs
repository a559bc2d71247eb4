//! `outboard bench apps`: unmodified servers under the socket shim (their
//! sockets on an engine daemon) beside the same servers on the kernel, on the
//! same veth pair, in one run (root).
//!
//! Method:
//!
//! - One lab (direct topology, MTU 1500, no impairment): `ob-N-eng` holds
//!   eng0, `ob-N-lnx` holds lnx0 (10.77.0.1), the bridge between them. Every
//!   client runs on Linux's side, in `ob-N-lnx`; every server in `ob-N-eng`.
//! - **outboard** first: an engine daemon on eng0 (`--link af_xdp:eng0`, or
//!   `--link af_packet`; 10.77.0.2/24, `--services none`), eng0 with no
//!   kernel address; each server runs as
//!   `ip netns exec ob-N-eng outboard run --name ENGINE -- SERVER …`.
//! - **kernel** right after, on the same veth pair, the engine stopped: eng0
//!   gets 10.77.0.3/24 for this phase only (removed after, as in
//!   `bench link`), and the same servers run without the shim. The path
//!   (lnx0, the bridge, eng0) and the lab's offload settings are the same.
//! - The cases, each bounded (`--seconds` S, at least 1, whole seconds):
//!   redis-server (`--save '' --appendonly no`) and `redis-benchmark -c 50
//!   -n 30000*S -t get -q` (GET requests/s); memcached started as root with
//!   `-u nobody -t 2` (it makes its sockets after dropping to nobody: the
//!   engine runs with `--allow-user nobody`) and `memcaslap -c 16 -T 2 -t S`
//!   (9 gets to 1 set, operations/s); nginx (`master_process off`,
//!   one worker, a 4 KiB file) and `wrk -t2 -c16 -dS` (requests/s; socket
//!   errors or non-2xx answers fail the run); `iperf3 -s -1 -B ADDR` and
//!   `iperf3 -c -t S -J` (Linux client to the server, Gbit/s received);
//!   `sockperf server --tcp` and `sockperf ping-pong --tcp -t S` (latency
//!   p50 and p99 as sockperf reports it, half the round trip, µs), then
//!   the same with `--mps 1000` (p50): a server that sleeps between
//!   requests, as one with sporadic traffic does; PostgreSQL (as the
//!   `postgres` user, the engine with `--allow-user postgres`; a cluster
//!   made for the run, no fsync) and `pgbench -S -c 8 -j 2 -T S`
//!   (select-only transactions/s), then `pgbench -S -C -c 2 -j 2 -T S` (a
//!   new connection per transaction: the server forks a backend for each).
//!   Not with `--inline`: a forked backend cannot share its parent's engine.
//! - Ratio = outboard / kernel: above 1 is better for rates, below 1 is
//!   better for latencies.
//! - Placement: by default the scheduler puts every process. On a machine
//!   whose cores the client, the server and the engine share, that decides
//!   the latency rows more than either stack does (docs/PERFORMANCE.md,
//!   "sockperf's ratio is placement too"). `--pin-engine` (the daemon's
//!   `--cores`), `--pin-server` and `--pin-client` (`taskset -c`, on both
//!   sides alike) fix it.
//!
//! Every server, the engine and the lab are stopped on every path out (guards),
//! Ctrl-C included. Exit codes: 0 done; 1 a measurement failed (its message
//! and the server's output say which); 2 bad arguments; 10 not root; 11 a
//! program is missing; 12-14 the lab failed; 16 the shim library was not found.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::lab_engine::{terminate, EngineProc, KernelAddr};
use super::peer::{machine, Machine};
use super::tools;
use clap::Args;
use outboard_lab::{sys, Lab, LabConfig};
use serde::Serialize;
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Ports of the servers (in the lab's own namespaces: nothing else there).
const REDIS_PORT: u16 = 6379;
const MEMCACHED_PORT: u16 = 11211;
const NGINX_PORT: u16 = 8080;
const IPERF_PORT: u16 = 5201;
const SOCKPERF_PORT: u16 = 11111;
const POSTGRES_PORT: u16 = 5432;
/// The paced sockperf run's rate (messages per second): the server sleeps
/// between requests, as one with sporadic traffic does.
const PACED_MPS: u32 = 1000;
/// Longest any one step may take past its own duration.
const SLACK: Duration = Duration::from_secs(60);

#[derive(Args, Debug)]
pub struct AppsArgs {
    /// Seconds of each timed case (wrk, iperf3, sockperf; redis-benchmark sends 30000 GETs per second asked; 1 to 3600).
    #[arg(long, default_value = "3", value_parser = crate::args::number_in(1.0, crate::args::MAX_BENCH_S, "s"))]
    pub seconds: f64,
    /// The engine's link: af_xdp or af_packet.
    #[arg(long, default_value = "af_xdp", value_parser = ["af_xdp", "af_packet"])]
    pub link: String,
    /// The socket shim (default as for `outboard run`; liboutboard_shim_inline.so with --inline).
    #[arg(long)]
    pub shim: Option<PathBuf>,
    /// Run each server with the engine inside it (`outboard run --inline`, no daemon)
    /// instead of on an engine daemon.
    #[arg(long)]
    pub inline: bool,
    /// Lab name (1 to 8 of a-z 0-9; default `ba` and this process's id in base 36).
    #[arg(long)]
    pub lab_name: Option<String>,
    /// Run the engine daemon's shard on this CPU (`--cores`; not with --inline,
    /// where the engine runs inside each server). Default: where the scheduler puts it.
    #[arg(long, value_name = "CPU")]
    pub pin_engine: Option<usize>,
    /// Run every server (ours and the kernel's) on this CPU (`taskset`).
    #[arg(long, value_name = "CPU")]
    pub pin_server: Option<usize>,
    /// Run every client (the load generators, on Linux's side) on this CPU (`taskset`).
    #[arg(long, value_name = "CPU")]
    pub pin_client: Option<usize>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Where `--pin-*` put the processes (None: the scheduler's choice).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Pins {
    pub engine: Option<usize>,
    pub server: Option<usize>,
    pub client: Option<usize>,
}

impl Pins {
    /// The pins asked for, checked against the CPUs this process may run
    /// on; an error names the flag and the CPUs there are.
    fn checked(a: &AppsArgs, allowed: &[usize]) -> Result<Pins, String> {
        if a.inline && a.pin_engine.is_some() {
            return Err("--pin-engine is for the engine daemon; with --inline the engine runs inside each server (use --pin-server)".into());
        }
        let pins = Pins { engine: a.pin_engine, server: a.pin_server, client: a.pin_client };
        for (flag, cpu) in pins.flags() {
            if let Some(c) = cpu.filter(|c| !allowed.contains(c)) {
                let list: Vec<String> = allowed.iter().map(|c| c.to_string()).collect();
                return Err(format!("{flag} {c}: not a CPU this process may run on ({})", list.join(",")));
            }
        }
        Ok(pins)
    }

    /// Each pin with the flag that sets it.
    fn flags(&self) -> [(&'static str, Option<usize>); 3] {
        [("--pin-engine", self.engine), ("--pin-server", self.server), ("--pin-client", self.client)]
    }

    fn any(&self) -> bool {
        *self != Pins::default()
    }
}

/// `taskset -c CPU` to put before a program (nothing when unpinned).
fn taskset(cpu: Option<usize>) -> Vec<String> {
    cpu.map_or(Vec::new(), |c| vec!["taskset".into(), "-c".into(), c.to_string()])
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub name: String,
    pub unit: String,
    pub outboard: f64,
    pub kernel: f64,
    /// outboard / kernel (for latencies, lower is better).
    pub ratio: f64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub command: String,
    pub machine: Machine,
    pub lab: String,
    pub link: String,
    /// Where our engine ran: "daemon" (an `outboard engine` process) or
    /// "inline" (inside each server, `outboard run --inline`).
    pub engine: String,
    pub seconds_per_case: u64,
    /// `--pin-*`: the CPUs the engine daemon, the servers and the clients ran on (null: unpinned).
    pub pins: Pins,
    /// The server address under the shim (the engine's).
    pub engine_addr: String,
    /// The server address on the kernel (eng0, that phase only).
    pub kernel_addr: String,
    pub shim: String,
    pub rows: Vec<Row>,
}

/// One phase's figures.
#[derive(Debug, Default)]
struct Figures {
    redis_get_rps: f64,
    memcached_ops: f64,
    nginx_rps: f64,
    iperf3_gbit: f64,
    sockperf_p50_us: f64,
    sockperf_p99_us: f64,
    sockperf_paced_p50_us: f64,
    /// PostgreSQL (engine daemon only: it forks a process per connection).
    pg_select_tps: f64,
    pg_connect_tps: f64,
}

// ---------------------------------------------------------------- entry

pub fn main(a: &AppsArgs) -> ExitCode {
    let pins = match Pins::checked(a, &outboard_engine::cpu::allowed()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("outboard bench apps: {e}");
            return ExitCode::from(2);
        }
    };
    if sys::euid() != 0 {
        eprintln!(
            "outboard bench apps: needs root (it builds network namespaces and a veth pair and runs the engine on AF_XDP/AF_PACKET); run it as root, e.g. with sudo"
        );
        return ExitCode::from(10);
    }
    let mut tools = vec![
        ("redis-server", "redis-server"),
        ("redis-benchmark", "redis-tools"),
        ("memcached", "memcached"),
        ("memcaslap", "libmemcached-tools"),
        ("nginx", "nginx-light"),
        ("wrk", "wrk"),
        ("iperf3", "iperf3"),
        ("sockperf", "sockperf"),
        ("bash", "bash"),
        ("pgbench", "postgresql-client"),
        ("setpriv", "util-linux"),
    ];
    if pins.server.is_some() || pins.client.is_some() {
        tools.push(("taskset", "util-linux"));
    }
    let mut missing: Vec<String> = tools
        .iter()
        .filter(|(p, _)| !on_path(p))
        .map(|(p, pkg)| format!("{p} (package {pkg})"))
        .collect();
    if !a.inline && tools::postgres_bin_dir().is_none() {
        missing.push("/usr/lib/postgresql/*/bin/postgres (package postgresql)".into());
    }
    if !missing.is_empty() {
        eprintln!("outboard bench apps: missing programs: {}; install them with apt-get (scripts/test.sh does)", missing.join(", "));
        return ExitCode::from(11);
    }
    let file = if a.inline { crate::run_cmd::INLINE_SHIM_FILE } else { crate::run_cmd::SHIM_FILE };
    let shim = match crate::run_cmd::find_library(a.shim.as_deref(), file) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("outboard bench apps: {e}");
            return ExitCode::from(crate::run_cmd::NO_SHIM);
        }
    };
    let name = a.lab_name.clone().unwrap_or_else(|| super::lab_name("ba"));
    if let Err(e) = outboard_lab::validate_name(&name) {
        eprintln!("outboard bench apps: {e}");
        return ExitCode::from(2);
    }
    let _ = sys::install_stop_handler();
    let lab = match Lab::up(&LabConfig::new(&name)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("outboard bench apps: lab {name}: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let secs = a.seconds.round().max(1.0) as u64;
    let tmp = std::env::temp_dir().join(format!("outboard-bench-apps-{}", std::process::id()));
    let result = std::fs::create_dir_all(&tmp)
        .map_err(|e| format!("create {}: {e}", tmp.display()))
        .and_then(|_| run(&lab, a, pins, &shim, &tmp, secs));
    let _ = std::fs::remove_dir_all(&tmp);
    let down = lab.teardown();
    super::finish("apps", &name, result, down, a.json, print_table)
}


pub(crate) fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

pub(crate) fn stopped() -> Result<(), String> {
    if sys::stop_requested() {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// How the servers of one phase run.
pub(crate) struct Side<'a> {
    /// `ob-N-eng`.
    pub(crate) eng_ns: String,
    /// `ob-N-lnx`, where the clients run.
    pub(crate) lnx_ns: String,
    /// The servers' address.
    pub(crate) addr: Ipv4Addr,
    /// (`outboard` executable, engine name, shim, run dir) under the shim; None on the kernel.
    pub(crate) shim: Option<(PathBuf, String, &'a Path, &'a Path)>,
    /// `outboard run --inline` flags (`--inline --link … --addr …`): each
    /// server runs its own engine; None: the servers use the engine daemon.
    pub(crate) inline: Option<Vec<String>>,
    pub(crate) tmp: PathBuf,
    pub(crate) secs: u64,
    /// `--pin-server`, `--pin-client`.
    pub(crate) pins: Pins,
}

fn run(lab: &Lab, a: &AppsArgs, pins: Pins, shim: &Path, tmp: &Path, secs: u64) -> Result<Report, String> {
    let exe = std::env::current_exe().map_err(|e| format!("find the outboard executable: {e}"))?;
    let eng_ns = lab.engine_ns().to_string();
    let lnx_ns = lab.linux_ns().to_string();
    let iface = lab.engine_iface().to_string();
    let engine_addr = lab.engine_addr();
    let kernel_addr = Ipv4Addr::from(u32::from(engine_addr) + 1);
    let run_dir = tmp.join("run");
    std::fs::create_dir_all(&run_dir).map_err(|e| format!("create {}: {e}", run_dir.display()))?;
    // ---- outboard: the engine on eng0, servers under the shim
    stopped()?;
    let (link, cidr) = (format!("{}:{iface}", a.link), format!("{engine_addr}/{}", lab.engine_prefix()));
    let engine = if a.inline {
        None
    } else {
        let name = format!("bench-apps-{}", std::process::id());
        let core = pins.engine.map(|c| c.to_string());
        // memcached drops to nobody; PostgreSQL runs as postgres.
        let mut extra = vec!["--allow-user", "nobody,postgres"];
        if let Some(c) = core.as_deref() {
            extra.extend(["--cores", c]);
        }
        Some(EngineProc::start(&eng_ns, &link, &cidr, "none", name, &run_dir, run_dir.join("engine.log"), &extra)?)
    };
    let ours = {
        let name = engine.as_ref().map_or_else(|| format!("bench-apps-inline-{}", std::process::id()), |e| e.name.clone());
        let side = Side {
            eng_ns: eng_ns.clone(),
            lnx_ns: lnx_ns.clone(),
            addr: engine_addr,
            shim: Some((exe.clone(), name, shim, &run_dir)),
            inline: a.inline.then(|| ["--inline", "--link", &link, "--addr", &cidr].map(String::from).to_vec()),
            tmp: tmp.join("outboard"),
            secs,
            pins,
        };
        measure(&side)
    };
    let log = engine.map(EngineProc::stop).unwrap_or_else(|| "(no daemon: each server ran its engine inside it; their logs are in the servers' output)".into());
    let (ours, ours_errors) =
        ours.map_err(|e| format!("under the shim: {e}\nengine log:\n{}", log.trim_end()))?;
    let mut errors: Vec<String> = ours_errors
        .into_iter()
        .map(|e| format!("under the shim: {e}"))
        .collect();
    if !errors.is_empty() {
        errors.push(format!("engine log:\n{}", log.trim_end()));
    }
    // ---- kernel: the engine stopped, an address on eng0, the same servers
    stopped()?;
    let theirs = {
        let _addr = KernelAddr::add(&eng_ns, &iface, &format!("{kernel_addr}/{}", lab.engine_prefix()))?;
        let side = Side {
            eng_ns,
            lnx_ns,
            addr: kernel_addr,
            shim: None,
            inline: None,
            tmp: tmp.join("kernel"),
            secs,
            pins,
        };
        measure(&side).map_err(|e| format!("on the kernel: {e}"))?
    };
    let (theirs, their_errors) = theirs;
    errors.extend(
        their_errors
            .into_iter()
            .map(|e| format!("on the kernel: {e}")),
    );
    let row = |name: &str, unit: &str, o: f64, k: f64| Row {
        name: name.into(),
        unit: unit.into(),
        outboard: o,
        kernel: k,
        ratio: if k > 0.0 { o / k } else { 0.0 },
    };
    let mut rows = vec![
        row(
            "redis GET (redis-benchmark -c 50)",
            "requests/s",
            ours.redis_get_rps,
            theirs.redis_get_rps,
        ),
        row(
            "memcached get/set 9:1 (memcaslap -c 16 -T 2)",
            "operations/s",
            ours.memcached_ops,
            theirs.memcached_ops,
        ),
        row(
            "nginx 4 KiB (wrk -t2 -c16)",
            "requests/s",
            ours.nginx_rps,
            theirs.nginx_rps,
        ),
        row(
            "iperf3 Linux client -> server",
            "Gbit/s",
            ours.iperf3_gbit,
            theirs.iperf3_gbit,
        ),
        row(
            "sockperf TCP ping-pong p50",
            "us",
            ours.sockperf_p50_us,
            theirs.sockperf_p50_us,
        ),
        row(
            "sockperf TCP ping-pong p99",
            "us",
            ours.sockperf_p99_us,
            theirs.sockperf_p99_us,
        ),
        row(
            "sockperf TCP ping-pong p50, 1,000 messages/s",
            "us",
            ours.sockperf_paced_p50_us,
            theirs.sockperf_paced_p50_us,
        ),
    ];
    if !a.inline {
        rows.push(row("PostgreSQL select-only (pgbench -S -c 8)", "tps", ours.pg_select_tps, theirs.pg_select_tps));
        rows.push(row("PostgreSQL a connection per transaction (-C -c 2)", "tps", ours.pg_connect_tps, theirs.pg_connect_tps));
    }
    if !errors.is_empty() {
        let measured: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "  {}: outboard {:.1}, kernel {:.1} {} (0 = failed)",
                    r.name, r.outboard, r.kernel, r.unit
                )
            })
            .collect();
        return Err(format!(
            "some cases failed:\n{}\nwhat was measured:\n{}",
            errors.join("\n"),
            measured.join("\n")
        ));
    }
    let mut command = format!("outboard bench apps --seconds {}", a.seconds);
    if a.link != "af_xdp" {
        command.push_str(&format!(" --link {}", a.link));
    }
    if a.inline {
        command.push_str(" --inline");
    }
    for (flag, cpu) in pins.flags() {
        if let Some(c) = cpu {
            command.push_str(&format!(" {flag} {c}"));
        }
    }
    if a.json {
        command.push_str(" --json");
    }
    Ok(Report {
        pins,
        command,
        machine: machine(),
        lab: lab.name().to_string(),
        link: a.link.clone(),
        engine: if a.inline { "inline" } else { "daemon" }.into(),
        seconds_per_case: secs,
        engine_addr: engine_addr.to_string(),
        kernel_addr: kernel_addr.to_string(),
        shim: shim.display().to_string(),
        rows,
    })
}

/// The four cases, one after the other, for one side.
/// Runs one case of `measure` (after checking for Ctrl-C): its failure is
/// recorded in `errors` under `name`, and the run goes on.
fn case(errors: &mut Vec<String>, name: &str, run: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    stopped()?;
    if let Err(e) = run() {
        errors.push(format!("{name}: {e}"));
    }
    Ok(())
}

fn measure(s: &Side) -> Result<(Figures, Vec<String>), String> {
    std::fs::create_dir_all(&s.tmp).map_err(|e| format!("create {}: {e}", s.tmp.display()))?;
    let ip = s.addr.to_string();
    let mut f = Figures::default();
    // A case that fails is reported; the next one still runs.
    let mut errors = Vec::new();
    let limit = Duration::from_secs(s.secs) + SLACK;
    // redis
    case(&mut errors, "redis", || {
        let cmd = tools::redis_server_cmd(REDIS_PORT, &s.tmp);
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let mut srv = s.server("redis", &cmd, limit * 2)?;
        s.wait_tcp(&ip, REDIS_PORT, &mut srv)?;
        let n = (30_000 * s.secs).to_string();
        let (out, err) = s
            .client(
                &[
                    "redis-benchmark",
                    "-h",
                    &ip,
                    "-p",
                    &REDIS_PORT.to_string(),
                    "-c",
                    "50",
                    "-n",
                    &n,
                    "-t",
                    "get",
                    "-q",
                ],
                limit,
            )
            .map_err(|e| srv.with_log(e))?;
        f.redis_get_rps = tools::redis_benchmark(&out, &err, "GET").map_err(|e| srv.with_log(e))?;
        srv.check_alive()?;
        Ok(())
    })?;

    // memcached, dropping to nobody as packaged daemons do (with the engine
    // inside it, it stays root: an unprivileged process cannot open the
    // link, and it opens it at its first socket, after the drop)
    case(&mut errors, "memcached", || {
        let port = MEMCACHED_PORT.to_string();
        let user = if s.inline.is_some() { "root" } else { "nobody" };
        let mut srv = s.server(
            "memcached",
            &["memcached", "-u", user, "-l", "0.0.0.0", "-p", &port, "-t", "2", "-U", "0", "-m", "256"],
            limit * 2,
        )?;
        s.wait_tcp(&ip, MEMCACHED_PORT, &mut srv)?;
        let (out, err) = s
            .client(
                &["memcaslap", "-s", &format!("{ip}:{port}"), "-c", "16", "-T", "2", "-t", &format!("{}s", s.secs)],
                limit,
            )
            .map_err(|e| srv.with_log(e))?;
        f.memcached_ops = tools::memcaslap(&out, &err).map_err(|e| srv.with_log(e))?;
        srv.check_alive()?;
        Ok(())
    })?;

    // nginx
    case(&mut errors, "nginx", || {
        let dir = s.tmp.join("nginx");
        std::fs::create_dir_all(dir.join("www")).map_err(|e| format!("nginx dir: {e}"))?;
        std::fs::write(dir.join("www/small"), vec![b'x'; 4096])
            .map_err(|e| format!("nginx file: {e}"))?;
        let conf = tools::nginx_conf(&dir, NGINX_PORT)?;
        let (d, c) = (dir.display().to_string(), conf.display().to_string());
        let mut srv = s.server(
            "nginx",
            &[
                "nginx",
                "-p",
                &d,
                "-c",
                &c,
                "-g",
                "daemon off; master_process off;",
            ],
            limit * 2,
        )?;
        s.wait_tcp(&ip, NGINX_PORT, &mut srv)?;
        let url = format!("http://{ip}:{NGINX_PORT}/small");
        let (out, err) = s
            .client(
                &["wrk", "-t2", "-c16", &format!("-d{}s", s.secs), &url],
                limit,
            )
            .map_err(|e| srv.with_log(e))?;
        f.nginx_rps = tools::wrk(&out, &err).map_err(|e| srv.with_log(e))?.per_s;
        srv.check_alive()?;
        Ok(())
    })?;

    // iperf3
    case(&mut errors, "iperf3", || {
        let mut srv = s.server(
            "iperf3",
            &[
                "iperf3",
                "-s",
                "-1",
                // The same IPv4 listener on both sides (by default iperf3 listens on dual-stack [::]).
                "-B",
                &ip,
                "-p",
                &IPERF_PORT.to_string(),
                "--forceflush",
            ],
            limit * 2,
        )?;
        srv.wait_log("Server listening")?;
        let (out, err) = s
            .client(
                &[
                    "iperf3",
                    "-c",
                    &ip,
                    "-p",
                    &IPERF_PORT.to_string(),
                    "-t",
                    &s.secs.to_string(),
                    "-J",
                ],
                limit,
            )
            .map_err(|e| srv.with_log(e))?;
        f.iperf3_gbit = tools::iperf3(&out, &err).map_err(|e| srv.with_log(e))?.bits_per_s / 1e9;
        Ok(())
    })?;

    // sockperf
    case(&mut errors, "sockperf", || {
        let port = SOCKPERF_PORT.to_string();
        let mut srv = s.server(
            "sockperf",
            &["sockperf", "server", "--tcp", "-i", &ip, "-p", &port],
            limit * 2,
        )?;
        s.wait_tcp(&ip, SOCKPERF_PORT, &mut srv)?;
        let (out, err) = s
            .client(
                &[
                    "sockperf",
                    "ping-pong",
                    "--tcp",
                    "-i",
                    &ip,
                    "-p",
                    &port,
                    "-t",
                    &s.secs.to_string(),
                ],
                limit,
            )
            .map_err(|e| srv.with_log(e))?;
        let r = tools::sockperf(&out, &err).map_err(|e| srv.with_log(e))?;
        f.sockperf_p50_us = r.p50_us;
        f.sockperf_p99_us = r.p99_us;
        // The same server, asked PACED_MPS times a second: between
        // requests it has time to sleep, as a service with sporadic traffic.
        let mps = PACED_MPS.to_string();
        let (out, err) = s
            .client(
                &["sockperf", "ping-pong", "--tcp", "-i", &ip, "-p", &port, "-t", &s.secs.to_string(), "--mps", &mps],
                limit,
            )
            .map_err(|e| srv.with_log(e))?;
        f.sockperf_paced_p50_us = tools::sockperf(&out, &err).map_err(|e| srv.with_log(e))?.p50_us;
        srv.check_alive()?;
        Ok(())
    })?;

    // PostgreSQL as its users run it: the postgres user, a backend forked
    // per connection. Not with the engine inside the server: a forked
    // backend cannot share its parent's engine.
    if s.inline.is_none() {
        case(&mut errors, "postgres", || {
            let bin = tools::postgres_bin_dir().ok_or("no /usr/lib/postgresql/*/bin/postgres (package postgresql)")?;
            // The postgres user reaches its data directory.
            for d in [s.tmp.parent(), Some(s.tmp.as_path())].into_iter().flatten() {
                let _ = Command::new("chmod").arg("755").arg(d).status();
            }
            let cmd = tools::postgres_cluster(&bin, &s.tmp.join("pgdata"), POSTGRES_PORT, "0.0.0.0/0")?;
            let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let mut srv = s.server("postgres", &cmd, limit * 4)?;
            s.wait_tcp(&ip, POSTGRES_PORT, &mut srv)?;
            let port = POSTGRES_PORT.to_string();
            let pgbench = |args: &[&str]| -> Result<(String, String), String> {
                let mut a = vec!["pgbench", "-h", ip.as_str(), "-p", port.as_str(), "-U", "postgres"];
                a.extend(args);
                a.push("postgres");
                s.client(&a, limit)
            };
            pgbench(&["-i", "-s", "1", "-q"]).map_err(|e| srv.with_log(e))?;
            let secs = s.secs.to_string();
            let (out, err) = pgbench(&["-S", "-c", "8", "-j", "2", "-T", &secs]).map_err(|e| srv.with_log(e))?;
            f.pg_select_tps = tools::pgbench(&out, &err).map_err(|e| srv.with_log(e))?;
            let (out, err) = pgbench(&["-S", "-C", "-c", "2", "-j", "2", "-T", &secs]).map_err(|e| srv.with_log(e))?;
            f.pg_connect_tps = tools::pgbench(&out, &err).map_err(|e| srv.with_log(e))?;
            srv.check_alive()?;
            Ok(())
        })?;
    }
    Ok((f, errors))
}

impl Side<'_> {
    /// A server in the eng namespace (under the shim on our side), bounded by `timeout`.
    pub(crate) fn server(&self, what: &str, args: &[&str], limit: Duration) -> Result<Server, String> {
        let log = self.tmp.join(format!("{what}.log"));
        let f = File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let f2 = f.try_clone().map_err(|e| format!("dup log: {e}"))?;
        let mut c = Command::new("timeout");
        c.args([
            "-k",
            "3",
            &limit.as_secs().to_string(),
            "ip",
            "netns",
            "exec",
            &self.eng_ns,
        ]);
        // Pinned before the shim's `outboard run`: the affinity outlives the exec.
        c.args(taskset(self.pins.server));
        if let Some((exe, engine, shim, run_dir)) = &self.shim {
            c.arg(exe)
                .args(["run", "--name", engine, "--shim"])
                .arg(shim)
                .args(self.inline.iter().flatten())
                .arg("--")
                .env("OUTBOARD_RUN_DIR", run_dir);
        }
        let child = c
            .args(args)
            .current_dir(&self.tmp)
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(f2)
            .spawn()
            .map_err(|e| format!("start {what}: {e}"))?;
        Ok(Server {
            child,
            what: what.to_string(),
            log,
        })
    }

    /// A client in the Linux namespace; (stdout, stderr) if it succeeded.
    pub(crate) fn client(&self, args: &[&str], limit: Duration) -> Result<(String, String), String> {
        let o = Command::new("timeout")
            .args([
                "-k",
                "3",
                &limit.as_secs().to_string(),
                "ip",
                "netns",
                "exec",
                &self.lnx_ns,
            ])
            .args(taskset(self.pins.client))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", args[0]))?;
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        );
        if o.status.code() == Some(124) {
            return Err(format!(
                "{} ran past {limit:?}: {out}\n{err}",
                args.join(" ")
            ));
        }
        if !o.status.success() {
            return Err(format!(
                "{} failed ({}): {out}\n{err}",
                args.join(" "),
                o.status
            ));
        }
        Ok((out, err))
    }

    /// Waits until IP:PORT takes TCP connections, probed from the Linux namespace.
    pub(crate) fn wait_tcp(&self, ip: &str, port: u16, srv: &mut Server) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            let ok = Command::new("timeout")
                .args([
                    "2",
                    "ip",
                    "netns",
                    "exec",
                    &self.lnx_ns,
                    "bash",
                    "-c",
                    &format!("exec 3<>/dev/tcp/{ip}/{port}"),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Ok(());
            }
            srv.check_alive()?;
            stopped()?;
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(srv.with_log(format!(
                    "{} did not listen on {ip}:{port} within 20 s",
                    srv.what
                )));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

// ---------------------------------------------------------------- processes

/// A server (`timeout … ip netns exec …`); SIGTERM, then SIGKILL, on drop.
pub(crate) struct Server {
    child: Child,
    what: String,
    log: PathBuf,
}

impl Server {
    /// The pid of its `timeout`, which leads the server's process group.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn with_log(&self, e: String) -> String {
        format!("{e}\n{} output:\n{}", self.what, self.log_text().trim_end())
    }

    pub(crate) fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(st)) => Err(self.with_log(format!("{} exited ({st})", self.what))),
            _ => Ok(()),
        }
    }

    fn wait_log(&mut self, pat: &str) -> Result<(), String> {
        let t0 = Instant::now();
        while !self.log_text().contains(pat) {
            self.check_alive()?;
            stopped()?;
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(
                    self.with_log(format!("{} did not print {pat:?} within 20 s", self.what))
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Server {
    /// The whole group goes, not only `timeout`: a server's other processes
    /// (nginx's workers) can outlive it, and with an in-process engine they
    /// hold the link and the engine's name the next server needs.
    fn drop(&mut self) {
        let group = self.pid() as i32;
        terminate(&mut self.child);
        let t0 = Instant::now();
        while sys::kill_group(group, 0).is_ok() {
            if t0.elapsed() > Duration::from_secs(5) {
                let _ = sys::kill_group(group, libc::SIGKILL);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}


// ---------------------------------------------------------------- output

pub fn print_table(r: &Report) {
    println!(
        "outboard bench apps: servers under the socket shim vs on the kernel, same veth pair ({})",
        r.command
    );
    println!(
        "machine: {} x {}, Linux {}; lab ob-{}-*, link {}, {} s per case; servers on {} (outboard) and {} (kernel), clients on Linux's side",
        r.machine.nproc, r.machine.cpu_model, r.machine.kernel, r.lab, r.link, r.seconds_per_case, r.engine_addr, r.kernel_addr
    );
    if r.pins.any() {
        let cpu = |c: Option<usize>| c.map_or("unpinned".to_string(), |c| format!("CPU {c}"));
        println!(
            "placement: engine daemon {}, servers {}, clients {} (both sides' servers and clients alike)",
            if r.engine == "inline" { "none (inline)".to_string() } else { cpu(r.pins.engine) },
            cpu(r.pins.server),
            cpu(r.pins.client)
        );
    }
    println!(
        "  {:<36} {:>11} {:>12} {:>12} {:>16}",
        "case", "unit", "outboard", "kernel", "outboard/kernel"
    );
    for row in &r.rows {
        println!(
            "  {:<36} {:>11} {:>12.1} {:>12.1} {:>15.2}x",
            row.name, row.unit, row.outboard, row.kernel, row.ratio
        );
    }
    println!("  (rates: a ratio above 1 is better; latencies (us): below 1 is better)");
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: AppsArgs,
    }

    fn args(extra: &[&str]) -> AppsArgs {
        Cli::parse_from(std::iter::once("apps").chain(extra.iter().copied())).a
    }

    #[test]
    fn pins_are_checked_against_the_allowed_cpus_and_named_in_the_error() {
        let p = Pins::checked(&args(&["--pin-engine", "0", "--pin-server", "1", "--pin-client", "1"]), &[0, 1]).unwrap();
        assert_eq!(p, Pins { engine: Some(0), server: Some(1), client: Some(1) });
        assert!(p.any());
        assert!(!Pins::checked(&args(&[]), &[0]).unwrap().any(), "no pin asked: nothing checked");
        let e = Pins::checked(&args(&["--pin-client", "7"]), &[0, 1]).unwrap_err();
        assert_eq!(e, "--pin-client 7: not a CPU this process may run on (0,1)");
        let e = Pins::checked(&args(&["--inline", "--pin-engine", "0"]), &[0, 1]).unwrap_err();
        assert!(e.contains("--pin-engine is for the engine daemon"), "{e}");
    }

    #[test]
    fn a_pinned_program_runs_under_taskset() {
        assert_eq!(taskset(Some(3)), ["taskset", "-c", "3"]);
        assert!(taskset(None).is_empty());
    }
}
