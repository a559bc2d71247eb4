//! `outboard bench scale`: protocol-processing throughput against the
//! number of shards, with speedup and efficiency per point — the speedup
//! experiment of CDP, on a synthetic workload (`rr`, `bulk`) and on a real
//! one (`nginx`: nginx under the shim on an N-shard engine against nginx on
//! the kernel, wrk from Linux across a multi-queue veth).
//!
//! Method:
//!
//! - For each shard count *n* of `--shards` (default 1, 2, …, the cores
//!   this process may run on; more shards than cores are allowed; 1 is
//!   always measured, as the baseline) and each workload, a fresh run of
//!   *n* threads. Thread *i* pins itself to the *(i mod cores)*-th CPU it
//!   may run on (`sched_setaffinity`; a failure is logged and the thread
//!   runs unpinned) and builds, all its own:
//!   - one engine [`Shard`] (`outboard_engine::shard`, the engine's own
//!     loop turn) on a [`MemoryLink`], its stack at 10.9.0.1/24 with
//!     `shard_index` = *i*, `shard_count` = *n*, running the built-in
//!     services echo (TCP 7) and discard (TCP 9);
//!   - a peer `Stack` at 10.9.0.2/24 on the link's other end, in the same
//!     thread: no load-generator process competes for the cores.
//!
//!   The thread loops: `shard.turn(now)`; frames from the link into the
//!   peer stack; the peer's timers; the peer's application logic (below);
//!   the peer's frames onto the link. `now` is the engine clock, read once
//!   per loop. Nothing sleeps.
//! - Workloads, measured separately so each is clean:
//!   - `rr`: [`RR_CONNS`] connections to echo, each keeping one 64-byte
//!     request in flight (request, wait for the whole echo, next request).
//!     Each reply is compared with its request byte for byte; an op is one
//!     verified round trip. `ops_per_s` = round trips per second.
//!   - `bulk`: [`BULK_CONNS`] connections to discard, the peer keeping
//!     their send buffers full. `ops_per_s` = **bytes** per second that the
//!     engine's discard service read (from the shard's snapshot);
//!     `mb_per_s` = the same in 10^6 bytes per second.
//! - Each thread connects, runs a warm-up (a quarter of `--seconds`, 10 ms
//!   to 0.5 s), then waits at a barrier with the others; the main thread
//!   releases them together, sleeps `--seconds`, and raises a stop flag.
//!   Each thread measures its own window (barrier to stop, engine clock)
//!   and its CPU time (`CLOCK_THREAD_CPUTIME_ID`) over it: CPU/wall near 1
//!   shows each shard had a core to itself. A row's `ops_per_s` is the sum
//!   over its shards of ops / window.
//! - **Speedup** = ops_per_s(*n*) / ops_per_s(1) of the same workload;
//!   **efficiency** = speedup / *n*. Goal: speedup ≥ 0.9 × *n* for every *n*
//!   up to the cores available (`meets_goal`; null above them).
//!
//! - `--workload nginx` (root; `all` = both): the real workload. For each
//!   shard count *n* (default 1, 2; 1 to 16, the lab's queues; 1 always
//!   measured), one lab with `queues` = *n* (multi-queue veth), and on it,
//!   as `outboard bench apps` runs its servers (its `Side`, engine and
//!   kernel-address guards):
//!   - **outboard**: `outboard engine --link af_xdp:eng0 --shards n
//!     --allow-user nobody --services none` (shard *i* binds queue *i*);
//!     nginx in its master/worker mode with *n* workers (`user nobody`)
//!     under the shim, serving a 4 KiB file; `wrk -tn -c32 -dSs` from
//!     Linux's namespace (whole seconds, at least 1). Socket errors or
//!     non-2xx answers fail the run. The engine's per-shard received frames
//!     and the workers that accepted are read before nginx stops.
//!   - **kernel**, right after on the same lab: the engine stopped, eng0
//!     given 10.77.0.3 for this phase, the same nginx (*n* workers) without
//!     the shim, the same wrk.
//!
//!   `ops_per_s` = wrk's requests/s under the shim; speedup and efficiency
//!   as above against the 1-shard figure; `kernel_ops_per_s`,
//!   `kernel_speedup` (against the kernel with 1 worker) and `ratio` =
//!   outboard / kernel. The engine shards, nginx's workers, wrk and the
//!   kernel's softirq work all share the machine's cores.
//!
//! Output: a table (the synthetic one, then the nginx one), or with `--json`
//! one object `{"rows": [{"shards", "workload", "ops_per_s", "speedup",
//! "efficiency", …}]}` (further fields: synthetic rows `unit`, `mb_per_s`
//! for bulk, `seconds`, `cpu_util_min`, `meets_goal`, `mismatches`,
//! `per_shard`; nginx rows `unit`, `seconds`, `kernel_ops_per_s`,
//! `kernel_speedup`, `kernel_efficiency`, `ratio`, `rx_frames_per_shard`,
//! `accepting_workers`). `--plot FILE` writes an SVG of speedup against
//! shards with the linear ideal, as CDP drew it. Exit codes: 0 done; 1 a
//! run failed, or an echo reply differed from its request (the results are
//! printed first), or the plot could not be written; 2 bad arguments; for
//! nginx also 10 not root, 11 nginx, wrk or bash missing, 12-14 the lab
//! failed, 16 the shim library was not found. Every server, the engine and
//! the lab are stopped on every path out, Ctrl-C included.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::apps::{on_path, stopped, Pins, Side};
use super::lab_engine::{EngineProc, KernelAddr};
use super::peer::{self, machine, Machine};
use super::tools;
use clap::Args;
use outboard_engine::clock;
use outboard_engine::link::memory::{MemoryLink, MemoryPeer};
use outboard_engine::link::TxStatus;
use outboard_engine::services::{ServiceKind, ServiceSpec, Services};
use outboard_engine::shard::Shard;
use outboard_lab::{sys, Lab, LabConfig};
use outboard_stack::{ConnId, Stack, StackConfig};
use outboard_tcp::Event;
use outboard_time::Instant;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Largest `--shards` value.
pub const MAX_SHARDS: u32 = 256;
/// Echo connections per shard in `rr`.
pub const RR_CONNS: usize = 16;
/// Discard connections per shard in `bulk`.
pub const BULK_CONNS: usize = 2;
/// Request (and reply) size in `rr`.
pub const REQUEST: usize = 64;
/// The engine shard's memory cap (far above what the connections use).
const MEMORY_CAP: usize = 1 << 30;
/// Longest a shard may take to connect everything.
const SETUP_LIMIT: Duration = Duration::from_secs(10);

const ENGINE_MAC: [u8; 6] = [0x02, 0x5c, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [0x02, 0x5c, 0, 0, 0, 2];
const ENGINE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const PEER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const MTU: usize = 1500;
const ECHO_PORT: u16 = 7;
const DISCARD_PORT: u16 = 9;
/// Largest shard count of the nginx workload (the lab's veth has at most 16 queues).
pub const MAX_NGINX_SHARDS: u32 = 16;
/// Shard counts of the nginx workload without `--shards`.
const NGINX_DEFAULT_SHARDS: [u32; 2] = [1, 2];
/// wrk's connections (all shard counts).
pub const WRK_CONNS: u32 = 32;
/// nginx's port (in the lab's own namespaces: nothing else there).
const NGINX_PORT: u16 = 8080;
/// The file wrk asks for.
const NGINX_FILE_BYTES: usize = 4096;
/// Longest any one step of the nginx workload may take past its own duration.
const NGINX_SLACK: Duration = Duration::from_secs(60);

#[derive(Args, Debug)]
pub struct ScaleArgs {
    /// Shard counts, comma-separated (1 to 256 each; the nginx workload 1 to 16; default
    /// 1,2,…,the cores available, for nginx 1,2). 1 is always measured: it is the baseline of
    /// the speedup.
    #[arg(long, value_delimiter = ',', value_name = "N,...", value_parser = crate::args::count_in(1u32, MAX_SHARDS, u32::MAX))]
    pub shards: Vec<u32>,
    /// Seconds measured per (shard count, workload) (0.001 to 3600; nginx: wrk's duration, whole
    /// seconds, at least 1).
    #[arg(long, default_value = "2", value_parser = crate::args::bench_seconds())]
    pub seconds: f64,
    /// synthetic: rr and bulk, in-process (no root); nginx: nginx under the shim with N workers
    /// on an N-shard engine against nginx on the kernel, wrk from Linux across a multi-queue
    /// veth (root); all: both.
    #[arg(long, default_value = "synthetic", value_parser = ["synthetic", "nginx", "all"])]
    pub workload: String,
    /// The socket shim, for the nginx workload (default as for `outboard run`).
    #[arg(long, value_name = "PATH")]
    pub shim: Option<PathBuf>,
    /// The nginx workload's lab name (1 to 8 of a-z 0-9; default `bs` and this process's id in
    /// base 36).
    #[arg(long)]
    pub lab_name: Option<String>,
    /// Write the plot (SVG: speedup against shards, with the linear ideal) to FILE.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Rr,
    Bulk,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Rr => "rr",
            Workload::Bulk => "bulk",
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Workload::Rr => "round trips/s",
            Workload::Bulk => "bytes/s",
        }
    }
}

/// One shard's share of a row.
#[derive(Debug, Clone, Serialize)]
pub struct ShardStat {
    pub shard: u32,
    /// The CPU the thread pinned itself to; null when pinning failed.
    pub cpu: Option<usize>,
    pub ops: u64,
    pub ops_per_s: f64,
    pub wall_s: f64,
    pub cpu_s: f64,
    /// cpu_s / wall_s: 1.0 = the thread had its core all the time.
    pub cpu_util: f64,
    /// Engine loop turns over the window.
    pub turns: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub shards: u32,
    pub workload: Workload,
    /// rr: verified round trips per second; bulk: bytes per second (all shards summed).
    pub ops_per_s: f64,
    pub speedup: f64,
    pub efficiency: f64,
    pub unit: &'static str,
    /// bulk only: ops_per_s in 10^6 bytes per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mb_per_s: Option<f64>,
    /// Mean measured window of the shards.
    pub seconds: f64,
    /// The lowest CPU/wall of the row's shards.
    pub cpu_util_min: f64,
    /// speedup >= 0.9 x shards; null above the cores available.
    pub meets_goal: Option<bool>,
    /// Echo replies that differed from their request (must be 0).
    pub mismatches: u64,
    pub per_shard: Vec<ShardStat>,
}

/// One shard count of the nginx workload.
#[derive(Debug, Clone, Serialize)]
pub struct NginxRow {
    pub shards: u32,
    /// Always "nginx".
    pub workload: &'static str,
    /// wrk's requests/s, nginx under the shim on an N-shard engine.
    pub ops_per_s: f64,
    pub speedup: f64,
    pub efficiency: f64,
    pub unit: &'static str,
    /// wrk's duration.
    pub seconds: u64,
    /// wrk's requests/s, nginx (N workers) on the kernel.
    pub kernel_ops_per_s: f64,
    pub kernel_speedup: f64,
    pub kernel_efficiency: f64,
    /// ops_per_s / kernel_ops_per_s.
    pub ratio: f64,
    /// Frames each engine shard's queue received over the outboard phase.
    pub rx_frames_per_shard: Vec<u64>,
    /// nginx processes (boards) that accepted connections in the outboard phase.
    pub accepting_workers: usize,
}

/// Every row measured: the synthetic ones, then nginx's. `--json` prints
/// `{"rows": [...]}`, both kinds in one list.
#[derive(Debug)]
pub struct ScaleReport {
    pub rows: Vec<Row>,
    pub nginx: Vec<NginxRow>,
}

impl Serialize for ScaleReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum AnyRow<'a> {
            Synthetic(&'a Row),
            Nginx(&'a NginxRow),
        }
        #[derive(Serialize)]
        struct Rows<'a> {
            rows: Vec<AnyRow<'a>>,
        }
        Rows {
            rows: self
                .rows
                .iter()
                .map(AnyRow::Synthetic)
                .chain(self.nginx.iter().map(AnyRow::Nginx))
                .collect(),
        }
        .serialize(s)
    }
}

/// `outboard bench scale`.
pub fn main(a: &ScaleArgs) -> ExitCode {
    if let Some(p) = &a.plot {
        if let Err(e) = peer::check_plot_path(p) {
            eprintln!("outboard bench scale: --plot {e}");
            return ExitCode::from(2);
        }
    }
    let (synthetic, real) = match a.workload.as_str() {
        "nginx" => (false, true),
        "all" => (true, true),
        _ => (true, false),
    };
    // The nginx workload's checks come first: a refusal costs nothing.
    let plan = if real {
        match NginxPlan::new(a) {
            Ok(p) => Some(p),
            Err(code) => return ExitCode::from(code),
        }
    } else {
        None
    };
    let m = machine();
    let cpus = allowed_cpus();
    let cores = cpus.len().max(1);
    let mut counts: Vec<u32> = if a.shards.is_empty() {
        (1..=cores as u32).collect()
    } else {
        a.shards.clone()
    };
    counts.push(1);
    counts.sort_unstable();
    counts.dedup();
    let seconds = a.seconds;
    let mut rows = Vec::new();
    let synthetic_workloads: &[Workload] = if synthetic {
        &[Workload::Rr, Workload::Bulk]
    } else {
        &[]
    };
    for &workload in synthetic_workloads {
        let mut base = None;
        for &n in &counts {
            let r = match measure(n, workload, seconds, &cpus) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!(
                        "outboard bench scale: {} shard(s), {}: {e}",
                        n,
                        workload.name()
                    );
                    return ExitCode::from(1);
                }
            };
            let base = *base.get_or_insert(r.ops_per_s);
            rows.push(row(n, workload, r, base, cores));
        }
    }
    // Rows by shard count, rr before bulk.
    rows.sort_by_key(|r| (r.shards, r.workload == Workload::Bulk));
    let nginx = match &plan {
        Some(p) => match p.run() {
            Ok(n) => n,
            Err((code, e)) => {
                eprintln!("outboard bench scale: nginx: {e}");
                return ExitCode::from(code);
            }
        },
        None => Vec::new(),
    };
    let report = ScaleReport { rows, nginx };
    let mut failed = false;
    if let Some(p) = &a.plot {
        if let Err(e) = std::fs::write(p, figure(&report, &m, cores)) {
            eprintln!(
                "outboard bench scale: cannot write the plot to {}: {e}",
                p.display()
            );
            failed = true;
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        );
    } else {
        print_table(&report, &m, cores, &command(a), a.plot.as_ref());
    }
    let mismatches: u64 = report.rows.iter().map(|r| r.mismatches).sum();
    if mismatches > 0 {
        eprintln!("outboard bench scale: {mismatches} echo replies differed from their requests");
        failed = true;
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn command(a: &ScaleArgs) -> String {
    let mut c = String::from("outboard bench scale");
    if !a.shards.is_empty() {
        let s: Vec<String> = a.shards.iter().map(|n| n.to_string()).collect();
        let _ = write!(c, " --shards {}", s.join(","));
    }
    let _ = write!(c, " --seconds {}", a.seconds);
    if a.workload != "synthetic" {
        let _ = write!(c, " --workload {}", a.workload);
    }
    if let Some(p) = &a.shim {
        let _ = write!(c, " --shim {}", p.display());
    }
    if let Some(n) = &a.lab_name {
        let _ = write!(c, " --lab-name {n}");
    }
    if let Some(p) = &a.plot {
        let _ = write!(c, " --plot {}", p.display());
    }
    if a.json {
        c.push_str(" --json");
    }
    c
}

/// A row from one measurement and the workload's 1-shard figure.
fn row(n: u32, workload: Workload, r: Measured, base: f64, cores: usize) -> Row {
    let speedup = if base > 0.0 { r.ops_per_s / base } else { 0.0 };
    let efficiency = speedup / n as f64;
    let k = r.per_shard.len().max(1) as f64;
    Row {
        shards: n,
        workload,
        ops_per_s: r.ops_per_s,
        speedup,
        efficiency,
        unit: workload.unit(),
        mb_per_s: (workload == Workload::Bulk).then_some(r.ops_per_s / 1e6),
        seconds: r.per_shard.iter().map(|s| s.wall_s).sum::<f64>() / k,
        cpu_util_min: r
            .per_shard
            .iter()
            .map(|s| s.cpu_util)
            .reduce(f64::min)
            .unwrap_or(0.0),
        meets_goal: (n as usize <= cores).then_some(speedup >= 0.9 * n as f64),
        mismatches: r.mismatches,
        per_shard: r.per_shard,
    }
}

/// One (shard count, workload) measurement.
struct Measured {
    ops_per_s: f64,
    mismatches: u64,
    per_shard: Vec<ShardStat>,
}

/// Runs `n` shard threads on `workload` for `seconds`.
fn measure(n: u32, workload: Workload, seconds: f64, cpus: &[usize]) -> Result<Measured, String> {
    let warmup = Duration::from_secs_f64((seconds / 4.0).clamp(0.01, 0.5));
    let barrier = Arc::new(Barrier::new(n as usize + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..n {
        let cpu = cpus.get(i as usize % cpus.len().max(1)).copied();
        let (barrier, stop) = (barrier.clone(), stop.clone());
        let t = std::thread::Builder::new()
            .name(format!("scale-{i}"))
            .spawn(move || shard_thread(i, n, cpu, workload, warmup, &barrier, &stop))
            .map_err(|e| format!("starting shard thread {i}: {e}"))?;
        threads.push(t);
    }
    // Every shard is connected and warm: measure them together.
    barrier.wait();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut per_shard = Vec::new();
    let mut mismatches = 0;
    let mut first_err = None;
    for (i, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(Ok((s, bad))) => {
                mismatches += bad;
                per_shard.push(s);
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(format!("shard {i}: {e}"));
            }
            Err(_) => {
                first_err.get_or_insert(format!("shard {i}: its thread panicked"));
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(Measured {
        ops_per_s: per_shard.iter().map(|s| s.ops_per_s).sum(),
        mismatches,
        per_shard,
    })
}

/// The CPUs this process may run on (all of `nproc` if that cannot be read).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    let cpus: Vec<usize> = if rc == 0 {
        // SAFETY: CPU_ISSET reads the set; every index is below CPU_SETSIZE.
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    } else {
        Vec::new()
    };
    if cpus.is_empty() {
        (0..machine().nproc.max(1)).collect()
    } else {
        cpus
    }
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of `set`; `cpu` comes from sched_getaffinity (< CPU_SETSIZE).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 = the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// One shard's thread: pin, build, connect, warm up, wait for the others,
/// measure until `stop`. Always reaches the barrier once, so a failing shard
/// cannot hold up the rest.
fn shard_thread(
    i: u32,
    n: u32,
    cpu: Option<usize>,
    workload: Workload,
    warmup: Duration,
    barrier: &Barrier,
    stop: &AtomicBool,
) -> Result<(ShardStat, u64), String> {
    let pinned = cpu.and_then(|c| match pin(c) {
        Ok(()) => Some(c),
        Err(e) => {
            eprintln!(
                "outboard bench scale: shard {i}: cannot pin to CPU {c} ({e}); running unpinned"
            );
            None
        }
    });
    // A panic here must not leave the others waiting at the barrier.
    let setup = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Rig::new(i, n, workload).and_then(|mut rig| rig.warm_up(warmup).map(|()| rig))
    }))
    .unwrap_or_else(|_| Err("panicked while connecting".to_string()));
    barrier.wait();
    let mut rig = setup?;
    let stat = rig.measure(stop)?;
    Ok((
        ShardStat {
            cpu: pinned,
            ..stat
        },
        rig.peer.mismatches,
    ))
}

/// One shard and its peer, in one thread.
struct Rig {
    index: u32,
    workload: Workload,
    shard: Shard,
    peer: PeerSide,
}

impl Rig {
    fn new(i: u32, n: u32, workload: Workload) -> Result<Rig, String> {
        let now = clock::now();
        let mut cfg = StackConfig::new(ENGINE_MAC, ENGINE_ADDR, 24);
        cfg.mtu = MTU;
        cfg.shard_index = i as u16;
        cfg.shard_count = n as u16;
        cfg.secret = secret(0x5ca1e, i);
        let mut stack = Stack::new(cfg, now);
        let specs = [
            ServiceSpec {
                kind: ServiceKind::Echo,
                port: ECHO_PORT,
            },
            ServiceSpec {
                kind: ServiceKind::Discard,
                port: DISCARD_PORT,
            },
        ];
        let services = Services::start(&mut stack, &specs)?;
        let (link, end) =
            MemoryLink::pair(&format!("scale{i}"), ENGINE_MAC, MTU).map_err(|e| e.to_string())?;
        let mut shard = Shard::new(
            &format!("scale-{i}"),
            i,
            stack,
            Box::new(link),
            None,
            MEMORY_CAP,
            now,
        );
        shard.add_app(Box::new(services));
        let mut pcfg = StackConfig::new(PEER_MAC, PEER_ADDR, 24);
        pcfg.mtu = MTU;
        pcfg.secret = secret(0xbee, i);
        pcfg.tcp.nodelay = true;
        let stack = Stack::new(pcfg, now);
        let mut peer = PeerSide::new(stack, end);
        let (port, count) = match workload {
            Workload::Rr => (ECHO_PORT, RR_CONNS),
            Workload::Bulk => (DISCARD_PORT, BULK_CONNS),
        };
        for _ in 0..count {
            peer.connect(now, SocketAddrV4::new(ENGINE_ADDR, port), workload)?;
        }
        let mut rig = Rig {
            index: i,
            workload,
            shard,
            peer,
        };
        // Every connection established.
        let t0 = clock::now();
        while rig.peer.connected < count {
            let now = rig.step()?;
            if let Some(e) = &rig.peer.error {
                return Err(e.clone());
            }
            if now.saturating_duration_since(t0) > SETUP_LIMIT {
                return Err(format!(
                    "only {} of {count} connections established after {:?}",
                    rig.peer.connected, SETUP_LIMIT
                ));
            }
        }
        Ok(rig)
    }

    fn warm_up(&mut self, d: Duration) -> Result<(), String> {
        let t0 = clock::now();
        while self.step()?.saturating_duration_since(t0) < d {}
        Ok(())
    }

    /// One pass: the engine's turn, frames across, the peer's timers,
    /// application logic and frames back.
    fn step(&mut self) -> Result<Instant, String> {
        let now = clock::now();
        self.shard
            .turn(now)
            .map_err(|e| format!("shard turn: {e}"))?;
        self.peer.step(now);
        Ok(now)
    }

    /// The workload's count so far: verified round trips, or bytes discard read.
    fn ops(&mut self, now: Instant) -> u64 {
        match self.workload {
            Workload::Rr => self.peer.round_trips,
            Workload::Bulk => self
                .shard
                .snapshot(now)
                .services
                .iter()
                .filter(|s| s.service == "discard")
                .map(|s| s.bytes_in)
                .sum(),
        }
    }

    fn turns(&mut self, now: Instant) -> u64 {
        self.shard.snapshot(now).shard.turns
    }

    fn measure(&mut self, stop: &AtomicBool) -> Result<ShardStat, String> {
        let t0 = clock::now();
        let (ops0, turns0) = (self.ops(t0), self.turns(t0));
        let cpu0 = clock::thread_cpu_time();
        let mut now = t0;
        while !stop.load(Ordering::Relaxed) {
            now = self.step()?;
        }
        let cpu_s = clock::thread_cpu_time().saturating_sub(cpu0).as_secs_f64();
        let wall_s = now.saturating_duration_since(t0).as_secs_f64();
        let ops = self.ops(now) - ops0;
        let turns = self.turns(now) - turns0;
        if let Some(e) = &self.peer.error {
            return Err(e.clone());
        }
        let per_s = |x: f64| if wall_s > 0.0 { x / wall_s } else { 0.0 };
        Ok(ShardStat {
            shard: self.index,
            cpu: None,
            ops,
            ops_per_s: per_s(ops as f64),
            wall_s,
            cpu_s,
            cpu_util: per_s(cpu_s),
            turns,
        })
    }
}

/// A stack secret for shard `i` (ISNs and SYN cookies; any value works here).
fn secret(salt: u64, i: u32) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&salt.to_le_bytes());
    s[8..12].copy_from_slice(&i.to_le_bytes());
    s
}

/// A peer connection.
struct Client {
    id: ConnId,
    workload: Workload,
    up: bool,
    /// rr: the request in flight, how much of it is sent, and of its echo read.
    request: [u8; REQUEST],
    sent: usize,
    echoed: usize,
    seq: u64,
}

/// The peer stack, its end of the link, and the workload's logic.
struct PeerSide {
    stack: Stack,
    end: MemoryPeer,
    clients: Vec<Client>,
    by_id: HashMap<ConnId, usize>,
    connected: usize,
    round_trips: u64,
    mismatches: u64,
    /// A connection that failed (reset, timed out): the run is void.
    error: Option<String>,
    bulk: Vec<u8>,
    scratch: Vec<u8>,
}

impl PeerSide {
    fn new(stack: Stack, end: MemoryPeer) -> PeerSide {
        PeerSide {
            stack,
            end,
            clients: Vec::new(),
            by_id: HashMap::new(),
            connected: 0,
            round_trips: 0,
            mismatches: 0,
            error: None,
            bulk: (0..64 * 1024).map(|i| (i % 251) as u8).collect(),
            scratch: vec![0; 64 * 1024],
        }
    }

    fn connect(
        &mut self,
        now: Instant,
        to: SocketAddrV4,
        workload: Workload,
    ) -> Result<(), String> {
        let id = self
            .stack
            .tcp_connect(now, to)
            .map_err(|e| format!("connect to {to}: {e:?}"))?;
        let k = self.clients.len();
        self.by_id.insert(id, k);
        let mut c = Client {
            id,
            workload,
            up: false,
            request: [0; REQUEST],
            sent: 0,
            echoed: 0,
            seq: 0,
        };
        fill_request(&mut c.request, k, 0);
        self.clients.push(c);
        Ok(())
    }

    /// Frames from the shard, timers, the connections with events, frames to the shard.
    fn step(&mut self, now: Instant) {
        let stack = &mut self.stack;
        self.end
            .receive(usize::MAX, |f| stack.receive_frame(now, f));
        if self.stack.poll_timeout().is_some_and(|t| t <= now) {
            self.stack.handle_timeout(now);
        }
        while let Some(id) = self.stack.tcp_poll_ready() {
            if let Some(&k) = self.by_id.get(&id) {
                self.serve(k);
            }
        }
        let stack = &mut self.stack;
        while self.end.transmit(|b| stack.poll_transmit(now, b)) == TxStatus::Queued {}
        self.end.flush();
    }

    fn serve(&mut self, k: usize) {
        let c = &mut self.clients[k];
        let Some(conn) = self.stack.tcp(c.id) else {
            self.error.get_or_insert(format!("connection {k} vanished"));
            return;
        };
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Connected => {
                    if !c.up {
                        c.up = true;
                        self.connected += 1;
                    }
                }
                Event::Readable | Event::Writable => {}
                Event::PeerClosed | Event::Closed | Event::Reset | Event::TimedOut => {
                    self.error
                        .get_or_insert(format!("connection {k} ended: {ev:?}"));
                }
            }
        }
        if !c.up {
            return;
        }
        match c.workload {
            Workload::Rr => loop {
                if c.sent < REQUEST {
                    match conn.send(&c.request[c.sent..]) {
                        Ok(n) => c.sent += n,
                        Err(_) => break,
                    }
                    if c.sent < REQUEST {
                        break;
                    }
                }
                let want = REQUEST - c.echoed;
                let n = match conn.recv(&mut self.scratch[..want]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if self.scratch[..n] != c.request[c.echoed..c.echoed + n] {
                    self.mismatches += 1;
                }
                c.echoed += n;
                if c.echoed == REQUEST {
                    self.round_trips += 1;
                    c.seq += 1;
                    fill_request(&mut c.request, k, c.seq);
                    c.sent = 0;
                    c.echoed = 0;
                }
            },
            Workload::Bulk => {
                // Keep the send buffer full; discard's reads and the ACKs make room.
                loop {
                    let room = conn.send_capacity().min(self.bulk.len());
                    if room == 0 {
                        break;
                    }
                    match conn.send(&self.bulk[..room]) {
                        Ok(n) if n > 0 => {}
                        _ => break,
                    }
                }
                conn.request_writable();
                // Nothing comes back from discard; read anything that does.
                while let Ok(n) = conn.recv(&mut self.scratch) {
                    if n == 0 {
                        break;
                    }
                }
            }
        }
    }
}

/// Request `seq` of connection `k`: its sequence number, then bytes that
/// differ from connection to connection and request to request.
fn fill_request(r: &mut [u8; REQUEST], k: usize, seq: u64) {
    r[..8].copy_from_slice(&seq.to_le_bytes());
    for (j, b) in r.iter_mut().enumerate().skip(8) {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(k * 7 + j) as u8;
    }
}

// ---------------------------------------------------------------- the nginx workload

/// What the nginx workload needs, checked before anything runs.
struct NginxPlan {
    /// Shard counts, 1 first.
    counts: Vec<u32>,
    /// wrk's duration.
    secs: u64,
    exe: PathBuf,
    shim: PathBuf,
    lab: String,
}

/// One shard count's measurement.
struct NginxPoint {
    ours: f64,
    kernel: f64,
    rx_frames_per_shard: Vec<u64>,
    accepting_workers: usize,
}

impl NginxPlan {
    /// Root, the programs, the shim, the lab name, the shard counts; Err = the exit code.
    fn new(a: &ScaleArgs) -> Result<NginxPlan, u8> {
        let mut counts: Vec<u32> = if a.shards.is_empty() {
            NGINX_DEFAULT_SHARDS.to_vec()
        } else {
            a.shards.clone()
        };
        counts.push(1);
        counts.sort_unstable();
        counts.dedup();
        if let Some(n) = counts.iter().find(|&&n| n > MAX_NGINX_SHARDS) {
            eprintln!(
                "outboard bench scale: --shards {n}: the nginx workload takes 1 to {MAX_NGINX_SHARDS} shards (one queue of the lab's veth each)"
            );
            return Err(2);
        }
        if sys::euid() != 0 {
            eprintln!(
                "outboard bench scale: --workload {} needs root (it builds network namespaces and a multi-queue veth pair and runs the engine on AF_XDP); run it as root, e.g. with sudo, or use --workload synthetic",
                a.workload
            );
            return Err(10);
        }
        let missing: Vec<String> = [("nginx", "nginx-light"), ("wrk", "wrk"), ("bash", "bash")]
            .iter()
            .filter(|(p, _)| !on_path(p))
            .map(|(p, pkg)| format!("{p} (package {pkg})"))
            .collect();
        if !missing.is_empty() {
            eprintln!(
                "outboard bench scale: the nginx workload needs missing programs: {}; install them with apt-get (scripts/test.sh does)",
                missing.join(", ")
            );
            return Err(11);
        }
        let shim = crate::run_cmd::find_shim(a.shim.as_deref()).map_err(|e| {
            eprintln!("outboard bench scale: {e}");
            crate::run_cmd::NO_SHIM
        })?;
        let exe = std::env::current_exe().map_err(|e| {
            eprintln!("outboard bench scale: find the outboard executable: {e}");
            1
        })?;
        let lab = a.lab_name.clone().unwrap_or_else(|| super::lab_name("bs"));
        if let Err(e) = outboard_lab::validate_name(&lab) {
            eprintln!("outboard bench scale: --lab-name: {e}");
            return Err(2);
        }
        Ok(NginxPlan {
            counts,
            secs: a.seconds.round().max(1.0) as u64,
            exe,
            shim,
            lab,
        })
    }

    /// Every shard count, each on a lab of its own (torn down before the next);
    /// Err = (exit code, message).
    fn run(&self) -> Result<Vec<NginxRow>, (u8, String)> {
        let _ = sys::install_stop_handler();
        let tmp = std::env::temp_dir().join(format!("outboard-bench-scale-{}", std::process::id()));
        let result = std::fs::create_dir_all(&tmp)
            .map_err(|e| (1, format!("create {}: {e}", tmp.display())))
            .and_then(|()| {
                let mut points = Vec::new();
                for &n in &self.counts {
                    points.push((n, self.point(n, &tmp)?));
                }
                Ok(points)
            });
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(nginx_rows(result?, self.secs))
    }

    /// One shard count: a lab with `n` queues, the outboard phase, the kernel phase.
    fn point(&self, n: u32, tmp: &Path) -> Result<NginxPoint, (u8, String)> {
        stopped().map_err(|e| (1, e))?;
        let cfg = LabConfig {
            queues: n,
            ..LabConfig::new(&self.lab)
        };
        let lab = Lab::up(&cfg)
            .map_err(|e| (e.exit_code(), format!("lab {} ({n} queues): {e}", self.lab)))?;
        let dir = tmp.join(n.to_string());
        let r = std::fs::create_dir_all(&dir)
            .map_err(|e| format!("create {}: {e}", dir.display()))
            .and_then(|()| self.on_lab(&lab, n, &dir, tmp))
            .map_err(|e| (1, format!("{n} shard(s): {e}")));
        if let Err(e) = lab.teardown() {
            eprintln!("outboard bench scale: tearing down lab {}: {e}", self.lab);
        }
        r
    }

    fn on_lab(&self, lab: &Lab, n: u32, dir: &Path, tmp: &Path) -> Result<NginxPoint, String> {
        let eng_ns = lab.engine_ns().to_string();
        let lnx_ns = lab.linux_ns().to_string();
        let iface = lab.engine_iface().to_string();
        let engine_addr = lab.engine_addr();
        let kernel_addr = Ipv4Addr::from(u32::from(engine_addr) + 1);
        let prefix = lab.engine_prefix();
        let run_dir = dir.join("run");
        std::fs::create_dir_all(&run_dir)
            .map_err(|e| format!("create {}: {e}", run_dir.display()))?;
        // ---- outboard: an n-shard engine on eng0 (a queue each), nginx under the shim
        let shards = n.to_string();
        let engine = EngineProc::start(
            &eng_ns,
            &format!("af_xdp:{iface}"),
            &format!("{engine_addr}/{prefix}"),
            "none",
            format!("bench-scale-{}-{n}", std::process::id()),
            &run_dir,
            dir.join("engine.log"),
            &["--shards", &shards, "--allow-user", "nobody"],
        )?;
        let ours = {
            let side = Side {
                eng_ns: eng_ns.clone(),
                lnx_ns: lnx_ns.clone(),
                addr: engine_addr,
                shim: Some((
                    self.exe.clone(),
                    engine.name.clone(),
                    self.shim.as_path(),
                    run_dir.as_path(),
                )),
                inline: None,
                tmp: dir.join("outboard"),
                secs: self.secs,
                pins: Pins::default(),
            };
            nginx_wrk(&side, n, tmp, || engine.stat())
        };
        let log = engine.stop();
        let (ours, stat) =
            ours.map_err(|e| format!("under the shim: {e}\nengine log:\n{}", log.trim_end()))?;
        let stat = stat.map_err(|e| format!("under the shim: {e}"))?;
        // ---- kernel: the engine stopped, an address on eng0, the same nginx
        stopped()?;
        let _addr = KernelAddr::add(&eng_ns, &iface, &format!("{kernel_addr}/{prefix}"))?;
        let side = Side {
            eng_ns,
            lnx_ns,
            addr: kernel_addr,
            shim: None,
            inline: None,
            tmp: dir.join("kernel"),
            secs: self.secs,
            pins: Pins::default(),
        };
        let (kernel, ()) = nginx_wrk(&side, n, tmp, || ()).map_err(|e| format!("on the kernel: {e}"))?;
        Ok(NginxPoint {
            ours: ours.per_s,
            kernel: kernel.per_s,
            rx_frames_per_shard: stat.shards.iter().map(|s| s.rx_frames).collect(),
            accepting_workers: stat.boards.iter().filter(|b| b.accepts > 0).count(),
        })
    }
}

/// Rows from the points (the first is the 1-shard baseline).
fn nginx_rows(points: Vec<(u32, NginxPoint)>, secs: u64) -> Vec<NginxRow> {
    let base = points.first().map_or(0.0, |p| p.1.ours);
    let kbase = points.first().map_or(0.0, |p| p.1.kernel);
    let over = |x: f64, b: f64| if b > 0.0 { x / b } else { 0.0 };
    points
        .into_iter()
        .map(|(n, p)| {
            let (speedup, kernel_speedup) = (over(p.ours, base), over(p.kernel, kbase));
            NginxRow {
                shards: n,
                workload: "nginx",
                ops_per_s: p.ours,
                speedup,
                efficiency: speedup / n as f64,
                unit: "requests/s",
                seconds: secs,
                kernel_ops_per_s: p.kernel,
                kernel_speedup,
                kernel_efficiency: kernel_speedup / n as f64,
                ratio: over(p.ours, p.kernel),
                rx_frames_per_shard: p.rx_frames_per_shard,
                accepting_workers: p.accepting_workers,
            }
        })
        .collect()
}

/// The group nginx's workers run in beside `nobody` (Debian's `nogroup`, else `nobody`).
fn nobody_group() -> &'static str {
    let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
    if groups.lines().any(|l| l.starts_with("nogroup:")) {
        "nogroup"
    } else {
        "nobody"
    }
}

/// `dir/nginx.conf` for `workers` workers running as nobody (what
/// `tools::nginx_conf` writes, master/worker mode, in the foreground).
fn nginx_workers_conf(dir: &Path, workers: u32) -> Result<PathBuf, String> {
    let p = tools::nginx_conf(dir, NGINX_PORT)?;
    let text = std::fs::read_to_string(&p).map_err(|e| format!("read {}: {e}", p.display()))?;
    let text = text.replacen(
        "worker_processes 1;",
        &format!("worker_processes {workers};\nuser nobody {};", nobody_group()),
        1,
    );
    std::fs::write(&p, text).map_err(|e| format!("write {}: {e}", p.display()))?;
    Ok(p)
}

/// nginx with `workers` workers on `s` (under the shim or on the kernel), a
/// 4 KiB file, `wrk -t{workers} -c32 -d{secs}s` from Linux's side; `probe`
/// runs after wrk, while nginx still runs. nginx's process group is gone on
/// return.
fn nginx_wrk<T>(
    s: &Side,
    workers: u32,
    tmp: &Path,
    probe: impl FnOnce() -> T,
) -> Result<(tools::Wrk, T), String> {
    stopped()?;
    let dir = s.tmp.join("nginx");
    std::fs::create_dir_all(dir.join("www")).map_err(|e| format!("nginx dir: {e}"))?;
    std::fs::write(dir.join("www/small"), vec![b'x'; NGINX_FILE_BYTES])
        .map_err(|e| format!("nginx file: {e}"))?;
    let conf = nginx_workers_conf(&dir, workers)?;
    // The workers (nobody) read the files: every directory down to them.
    let chmod = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(tmp)
        .status()
        .map_err(|e| format!("chmod: {e}"))?;
    if !chmod.success() {
        return Err(format!("chmod -R a+rX {} failed ({chmod})", tmp.display()));
    }
    let error_log = dir.join("error.log");
    let with_error_log = |e: String| {
        format!(
            "{e}\nnginx error.log:\n{}",
            std::fs::read_to_string(&error_log).unwrap_or_default().trim_end()
        )
    };
    let limit = Duration::from_secs(s.secs) + NGINX_SLACK;
    let (d, c) = (dir.display().to_string(), conf.display().to_string());
    let mut srv = s.server(
        "nginx",
        &["nginx", "-p", &d, "-c", &c, "-g", "daemon off;"],
        limit * 2,
    )?;
    let group = srv.pid();
    let ip = s.addr.to_string();
    let measured = || -> Result<(tools::Wrk, T), String> {
        s.wait_tcp(&ip, NGINX_PORT, &mut srv)?;
        let url = format!("http://{ip}:{NGINX_PORT}/small");
        let (out, err) = s
            .client(
                &[
                    "wrk",
                    &format!("-t{workers}"),
                    &format!("-c{WRK_CONNS}"),
                    &format!("-d{}s", s.secs),
                    &url,
                ],
                limit,
            )
            .map_err(|e| srv.with_log(e))?;
        let w = tools::wrk(&out, &err).map_err(|e| srv.with_log(e))?;
        srv.check_alive()?;
        Ok((w, probe()))
    };
    let r = measured().map_err(with_error_log);
    // SIGTERM to `timeout`, which passes it to its process group (nginx's
    // master and workers), then SIGKILL of whatever of that group is left.
    drop(srv);
    kill_group(group);
    r
}

/// SIGKILL to process group `pgid` (a server's `timeout`, already reaped,
/// led it): workers whose master died without them.
fn kill_group(pgid: u32) {
    let Ok(pgid) = i32::try_from(pgid) else {
        return;
    };
    if pgid > 1 {
        // SAFETY: kill(2) with plain integers; -pgid names the group the
        // server's `timeout` made for itself and its children (ESRCH when empty).
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

pub fn print_table(
    r: &ScaleReport,
    m: &Machine,
    cores: usize,
    command: &str,
    plot: Option<&PathBuf>,
) {
    println!("outboard bench scale: throughput against shards, CDP's speedup experiment ({command})");
    println!(
        "machine: {} x {}, Linux {}; {cores} CPU(s) available to this process",
        m.nproc, m.cpu_model, m.kernel
    );
    if !r.rows.is_empty() {
        print_synthetic(r, cores);
    }
    if !r.nginx.is_empty() {
        print_nginx(&r.nginx);
    }
    if let Some(p) = plot {
        println!("plot: {}", p.display());
    }
}

fn print_synthetic(r: &ScaleReport, cores: usize) {
    println!();
    println!(
        "synthetic: each shard: a thread pinned to one CPU running an engine shard (echo, discard) on an in-memory link and, in the same thread, the peer stack that loads it"
    );
    println!(
        "rr: {RR_CONNS} connections per shard, one {REQUEST}-byte request in flight each, ops = verified round trips; bulk: {BULK_CONNS} connections per shard to discard, ops = bytes discard read"
    );
    println!("speedup = ops/s(n) / ops/s(1); efficiency = speedup / n; CPU/wall = the lowest of the row's shards");
    println!();
    println!(
        "  {:<8} {:>6} {:>14} {:>10} {:>8} {:>10} {:>9} {:>6}",
        "workload", "shards", "ops/s", "MB/s", "speedup", "efficiency", "CPU/wall", "goal"
    );
    for w in &r.rows {
        println!(
            "  {:<8} {:>6} {:>14.0} {:>10} {:>7.2}x {:>10.2} {:>9.2} {:>6}",
            w.workload.name(),
            w.shards,
            w.ops_per_s,
            w.mb_per_s.map_or("-".to_string(), |x| format!("{x:.1}")),
            w.speedup,
            w.efficiency,
            w.cpu_util_min,
            match w.meets_goal {
                Some(true) => "met",
                Some(false) => "NOT",
                None => "-",
            }
        );
    }
    println!();
    for wl in [Workload::Rr, Workload::Bulk] {
        let judged: Vec<&Row> = r
            .rows
            .iter()
            .filter(|w| w.workload == wl && w.meets_goal.is_some())
            .collect();
        let met = judged.iter().all(|w| w.meets_goal == Some(true));
        println!(
            "goal, {}: speedup >= 0.9 x shards for every shard count up to {cores} (the CPUs available): {}",
            wl.name(),
            if met { "met" } else { "NOT met" }
        );
    }
    let bad: u64 = r.rows.iter().map(|w| w.mismatches).sum();
    println!("echo replies that differed from their requests: {bad}");
}

fn print_nginx(rows: &[NginxRow]) {
    let secs = rows.first().map_or(0, |w| w.seconds);
    println!();
    println!(
        "nginx: for each N, a lab whose veth has N queues; outboard = nginx (master + N workers, as nobody) under the socket shim on an N-shard engine (af_xdp, shard i on queue i); kernel = the same nginx on the kernel, same lab, right after"
    );
    println!(
        "load: wrk -tN -c{WRK_CONNS} -d{secs}s from Linux's side, a {NGINX_FILE_BYTES}-byte file; speedup = requests/s(N) / requests/s(1) of the same side; efficiency = speedup / N"
    );
    println!();
    println!(
        "  {:>6} {:>14} {:>8} {:>10} {:>14} {:>8} {:>10} {:>9}  frames per shard (workers accepting)",
        "shards",
        "outboard req/s",
        "speedup",
        "efficiency",
        "kernel req/s",
        "speedup",
        "efficiency",
        "ob/kernel"
    );
    for w in rows {
        let frames: Vec<String> = w.rx_frames_per_shard.iter().map(u64::to_string).collect();
        println!(
            "  {:>6} {:>14.0} {:>7.2}x {:>10.2} {:>14.0} {:>7.2}x {:>10.2} {:>8.2}x  {} ({})",
            w.shards,
            w.ops_per_s,
            w.speedup,
            w.efficiency,
            w.kernel_ops_per_s,
            w.kernel_speedup,
            w.kernel_efficiency,
            w.ratio,
            frames.join("/"),
            w.accepting_workers
        );
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG: speedup against shards for each workload, the linear ideal,
/// the goal (0.9 x ideal) and the CPUs available.
pub fn figure(r: &ScaleReport, m: &Machine, cores: usize) -> String {
    const W: f64 = 720.0;
    const H: f64 = 520.0;
    const L: f64 = 70.0;
    const R: f64 = 190.0;
    const T: f64 = 70.0;
    const B: f64 = 60.0;
    let (pw, ph) = (W - L - R, H - T - B);
    let xmax = r
        .rows
        .iter()
        .map(|w| w.shards)
        .chain(r.nginx.iter().map(|w| w.shards))
        .max()
        .unwrap_or(1)
        .max(2) as f64;
    let ymax = r
        .rows
        .iter()
        .map(|w| w.speedup)
        .chain(r.nginx.iter().flat_map(|w| [w.speedup, w.kernel_speedup]))
        .filter(|y| y.is_finite())
        .fold(xmax, f64::max)
        .ceil();
    let what = match (r.rows.is_empty(), r.nginx.is_empty()) {
        (false, true) => "one thread per shard, peer stack in the same thread",
        (true, false) => "nginx: N workers on an N-shard engine vs on the kernel, wrk from Linux",
        _ => "synthetic: one thread per shard; nginx: N workers, N shards, wrk from Linux",
    };
    let sx = |x: f64| L + x / xmax * pw;
    let sy = |y: f64| T + ph - (y.clamp(0.0, ymax) / ymax) * ph;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{L}" y="24" font-size="16" font-weight="bold">outboard bench scale: speedup against shards</text>"#
    );
    let _ = writeln!(
        o,
        r##"<text x="{L}" y="44" fill="#444">{}</text>"##,
        esc(&format!("{} x {}; {cores} CPU(s) available; {what}", m.nproc, m.cpu_model))
    );
    let step = ((xmax / 10.0).ceil()).max(1.0);
    let mut x = 0.0;
    while x <= xmax + 1e-9 {
        let px = sx(x);
        let _ = writeln!(
            o,
            r##"<line x1="{px:.1}" y1="{T}" x2="{px:.1}" y2="{:.1}" stroke="#eee"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{x}</text>"##,
            T + ph,
            T + ph + 18.0
        );
        x += step;
    }
    let ystep = ((ymax / 10.0).ceil()).max(1.0);
    let mut y = 0.0;
    while y <= ymax + 1e-9 {
        let py = sy(y);
        let _ = writeln!(
            o,
            r##"<line x1="{L}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{y}</text>"##,
            L + pw,
            L - 6.0,
            py + 4.0
        );
        y += ystep;
    }
    let _ = writeln!(
        o,
        r##"<rect x="{L}" y="{T}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#000"/>"##
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">shards (one thread each)</text>"#,
        L + pw / 2.0,
        T + ph + 40.0
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle">speedup over one shard</text>"#,
        L - 44.0,
        T + ph / 2.0
    );
    // The CPUs available.
    if (cores as f64) < xmax {
        let px = sx(cores as f64);
        let _ = writeln!(
            o,
            r##"<line x1="{px:.1}" y1="{T}" x2="{px:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="2,3"/><text x="{:.1}" y="{:.1}" fill="#666">{cores} CPUs</text>"##,
            T + ph,
            px + 4.0,
            T + 14.0
        );
    }
    // (name, colour, dash attribute, points)
    type Curve = (String, &'static str, &'static str, Vec<(f64, f64)>);
    let mut series: Vec<Curve> = vec![
        (
            "ideal (linear)".into(),
            "#000",
            r#" stroke-dasharray="6,4""#,
            vec![(0.0, 0.0), (xmax, xmax)],
        ),
        (
            "goal: 0.9 x ideal".into(),
            "#999",
            r#" stroke-dasharray="2,3""#,
            vec![(0.0, 0.0), (xmax, 0.9 * xmax)],
        ),
    ];
    for (wl, color) in [(Workload::Rr, "#1f77b4"), (Workload::Bulk, "#2ca02c")] {
        let pts: Vec<(f64, f64)> = r
            .rows
            .iter()
            .filter(|w| w.workload == wl)
            .map(|w| (w.shards as f64, w.speedup))
            .collect();
        let name = match wl {
            Workload::Rr => format!("rr ({REQUEST}-byte request/response)"),
            Workload::Bulk => "bulk (to discard)".to_string(),
        };
        if !pts.is_empty() {
            series.push((name, color, "", pts));
        }
    }
    if !r.nginx.is_empty() {
        let ours = r.nginx.iter().map(|w| (w.shards as f64, w.speedup)).collect();
        let kernel = r.nginx.iter().map(|w| (w.shards as f64, w.kernel_speedup)).collect();
        series.push(("nginx under the shim".into(), "#d62728", "", ours));
        series.push(("nginx on the kernel".into(), "#9467bd", "", kernel));
    }
    for (k, (name, color, dash, pts)) in series.iter().enumerate() {
        let path: Vec<String> = pts
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        if !path.is_empty() {
            let _ = writeln!(
                o,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
                path.join(" ")
            );
            if k >= 2 {
                for q in &path {
                    let (x, y) = q.split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(o, r#"<circle cx="{x}" cy="{y}" r="3.5" fill="{color}"/>"#);
                }
            }
        }
        let (lx, ly) = (L + pw + 14.0, T + 14.0 + k as f64 * 18.0);
        let _ = writeln!(
            o,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0,
            esc(name)
        );
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_differ_by_connection_and_sequence() {
        let (mut a, mut b, mut c) = ([0u8; REQUEST], [0u8; REQUEST], [0u8; REQUEST]);
        fill_request(&mut a, 0, 1);
        fill_request(&mut b, 1, 1);
        fill_request(&mut c, 0, 2);
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn rows_and_figure() {
        let m = Machine {
            nproc: 2,
            cpu_model: "cpu <x>".into(),
            kernel: "6".into(),
        };
        let meas = |ops: f64| Measured {
            ops_per_s: ops,
            mismatches: 0,
            per_shard: Vec::new(),
        };
        let r1 = row(1, Workload::Rr, meas(100.0), 100.0, 2);
        let r2 = row(2, Workload::Rr, meas(190.0), 100.0, 2);
        let r4 = row(4, Workload::Bulk, meas(200.0), 100.0, 2);
        assert_eq!(r1.speedup, 1.0);
        assert!((r2.efficiency - 0.95).abs() < 1e-12);
        assert_eq!(r2.meets_goal, Some(true));
        assert_eq!(r4.meets_goal, None);
        assert_eq!(r4.mb_per_s, Some(200.0 / 1e6));
        let rep = ScaleReport {
            rows: vec![r1, r2, r4],
            nginx: Vec::new(),
        };
        let v: serde_json::Value = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["rows"][0]["workload"], "rr");
        assert!(v["rows"][0].get("mb_per_s").is_none());
        let s = figure(&rep, &m, 2);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(s.contains("cpu &lt;x&gt;") && !s.contains("NaN"));
        assert_eq!(s.matches("<polyline").count(), 4);
    }

    #[test]
    fn nginx_rows_and_json() {
        let point = |ours: f64, kernel: f64, shards: usize| NginxPoint {
            ours,
            kernel,
            rx_frames_per_shard: vec![10; shards],
            accepting_workers: shards,
        };
        let rows = nginx_rows(vec![(1, point(100.0, 200.0, 1)), (2, point(150.0, 300.0, 2))], 3);
        assert_eq!((rows[0].speedup, rows[0].kernel_speedup, rows[0].ratio), (1.0, 1.0, 0.5));
        assert_eq!((rows[1].speedup, rows[1].efficiency), (1.5, 0.75));
        assert_eq!((rows[1].kernel_speedup, rows[1].kernel_efficiency), (1.5, 0.75));
        let rep = ScaleReport {
            rows: Vec::new(),
            nginx: rows,
        };
        let v: serde_json::Value = serde_json::to_value(&rep).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.keys().collect::<Vec<_>>(), ["rows"]);
        let r = &v["rows"][1];
        assert_eq!(r["workload"], "nginx");
        assert_eq!(r["shards"], 2);
        for k in ["ops_per_s", "speedup", "efficiency", "kernel_ops_per_s", "kernel_speedup", "ratio"] {
            assert!(r[k].as_f64().is_some(), "{k}: {r}");
        }
        let m = Machine {
            nproc: 2,
            cpu_model: "cpu".into(),
            kernel: "6".into(),
        };
        let s = figure(&rep, &m, 2);
        // ideal, goal, nginx under the shim, nginx on the kernel
        assert_eq!(s.matches("<polyline").count(), 4);
        assert!(s.contains("nginx on the kernel") && !s.contains("NaN"));
    }
}
