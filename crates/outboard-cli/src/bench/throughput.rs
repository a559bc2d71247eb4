//! `outboard bench throughput`: application-to-application throughput
//! against write size, through two engines on the shared-memory fabric
//! (native API, zero-copy calls), beside Linux TCP on loopback, with the CPU
//! time the application processes spent and Gigabit Nectar's efficiency
//! figure; and the engines' copy counters. One run.
//!
//! Method (decided here; the application side is `peer.rs`):
//!
//! - For each write size (default 64 B, 256 B, 1 KiB, 4 KiB, 16 KiB, 64 KiB,
//!   256 KiB, 1 MiB): one connection, a `source` peer writing `--bytes`
//!   (whole writes of that size; it stops early after `--seconds`), then FIN;
//!   a `sink` peer reading at most that size per read until end of stream.
//!   Both generate and check the data in place per `--touch` (default
//!   `stamp`: one byte per 4 KiB, so the comparison is of the communication,
//!   like ttcp; `all` touches every byte on both sides). Nagle stays on.
//! - **Linux first** (no engine running), on 127.0.0.1 with the kernel's
//!   default socket buffers; then **ours**: two engine daemons on
//!   `fabric:bench-PID` (A 10.0.0.1 with the sink, on port 5400+point; B
//!   10.0.0.2 with the source), the peers attached with `--mode` (default
//!   blocking), moving bytes only with `begin_put`/`end_put` and
//!   `begin_get`/`end_get`.
//! - **Throughput** = bytes the sink consumed × 8 / the sink's wall time
//!   (accept to end of stream), in Gbit/s (10^9). The source's count must
//!   equal the sink's.
//! - **Application CPU**: each peer's own `getrusage(RUSAGE_SELF)` user+sys
//!   over its measured phase (source: connect to FIN; sink: accept to end of
//!   stream), summed. On Linux this includes the kernel's protocol work done
//!   in the applications' system calls (softirq work is charged to whichever
//!   task it interrupts: on loopback mostly the sender). On ours the engines
//!   do the protocol work: their shard CPU (`cpu_s` from `outboard stat`, A
//!   and B, over the point) is reported beside it, with an efficiency that
//!   counts it, for information.
//! - **Efficiency** (Gigabit Nectar: throughput per unit of host CPU) =
//!   Gbit/s ÷ (application CPU seconds ÷ wall seconds), i.e. the Gbit/s the
//!   applications would move per fully used core. CPU per GB = application
//!   CPU seconds per 10^9 bytes. Goal: ours ≥ 3× Linux's at 64 KiB.
//! - **Copies**: `tcp_tx_payload_copied` of B (the sender's engine) and
//!   `tcp_rx_payload_copied` of A (the receiver's), deltas over our sweep,
//!   each divided by the bytes the sinks consumed; 1.0 each way means the
//!   engines copied every byte once and nothing else did (the peers' API
//!   copy counters, also reported, must stay 0). `null` where an engine
//!   does not report the counter.
//! - **Placement** (`--pin`, `bench::placement`): by default the scheduler
//!   places every process, and each point says where they ran (the
//!   engines' shards watched every 5 ms, the applications' CPUs sampled
//!   every 64 KiB). `--pin beside` puts each application on its own
//!   engine's CPU, `--pin crosswise` on the other side's; Linux's sink and
//!   source go on the same CPUs. Which one a run is in decides the
//!   applications' CPU on a machine where a wake-up from another CPU costs
//!   many times one from the same CPU: the bench measures both first
//!   (`bench::floor::wake_cost`) and prints them.
//! - **Plot**: only with `--plot FILE` (SVG, written exactly there; without
//!   it no file is written), three stacked panels over a log-x write-size
//!   axis: throughput, application CPU utilisation, efficiency; ours and
//!   Linux in each. `FILE`'s directory is checked before anything runs.
//!
//! Engines and peers are stopped (SIGTERM, grace, SIGKILL, reaped) on every
//! path out, Ctrl-C included; their logs and sockets live in a private
//! temporary directory, removed on the way out. Exit codes: 0 done; 1 a point
//! failed (its message, with the logs, says which), or the plot could not be
//! written (the results are printed first); 2 bad arguments (a `--plot`
//! whose directory does not exist, or that names a directory, included).

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::peer::{
    self, counter, machine, num, Api, Engines, Machine, PairSpec, Role, RunDir, Touch, WaitMode,
};
use super::floor::{self, WakeCost};
use super::placement::{cpu_flag, placement, Observed, Pin, Placement};
use super::plot::{self, size_label, Panel, Series};
use clap::Args;
use outboard_engine::stat::Snapshot;
use outboard_lab::sys;
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const DEFAULT_SIZES: &str = "64,256,1KiB,4KiB,16KiB,64KiB,256KiB,1MiB";

#[derive(Args, Debug)]
pub struct ThroughputArgs {
    /// Write sizes, comma-separated (1 B to 64 MiB each).
    #[arg(long, value_delimiter = ',', value_parser = crate::args::size_in(1, 64 << 20), default_value = DEFAULT_SIZES)]
    pub sizes: Vec<u64>,
    /// Bytes moved per write size and side (at least one write; at least 1 B).
    #[arg(long, default_value = "256MiB", value_parser = crate::args::nonzero_size())]
    pub bytes: u64,
    /// Upper bound on each point's transfer, in seconds (0.001 to 3600).
    #[arg(long, default_value = "2", value_parser = crate::args::bench_seconds())]
    pub seconds: f64,
    /// How our applications wait (the API's Blocking or Polling mode; Linux does the same).
    #[arg(long, value_enum, default_value = "blocking")]
    pub mode: WaitMode,
    /// What the applications generate and check: none, stamp (a byte per 4 KiB) or all.
    #[arg(long, value_enum, default_value = "stamp")]
    pub touch: Touch,
    /// Where each process runs: `none` leaves them to the scheduler (both
    /// sides; each row says where they were); `beside` pins each
    /// application beside its own engine (engine A and the sink on the first
    /// CPU this process may use, engine B and the source on the second);
    /// `crosswise` pins each beside the other side's engine, as on a machine
    /// whose engines have cores of their own. Linux's sink and source run on
    /// the CPUs ours do. Needs two CPUs.
    #[arg(long, value_enum, default_value = "none")]
    pub pin: Pin,
    /// Write the plot (SVG) to FILE; without this flag no file is written.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One side at one write size.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub bytes: u64,
    /// The sink's wall time, accept to end of stream.
    pub seconds: f64,
    pub gbps: f64,
    pub sender_cpu_s: f64,
    pub receiver_cpu_s: f64,
    pub app_cpu_s: f64,
    /// app_cpu_s / seconds (1.0 = one core busy).
    pub app_cpu_util: f64,
    pub app_cpu_s_per_gb: f64,
    /// gbps / app_cpu_util.
    pub efficiency: f64,
    /// Ours: both engines' shard CPU over the point.
    pub engine_cpu_s: Option<f64>,
    pub engine_cpu_s_per_gb: Option<f64>,
    /// Ours: gbps / ((app + engine CPU) / seconds).
    pub efficiency_with_engine: Option<f64>,
    /// Ours: the engines' payload copies per byte consumed over this point.
    pub copies_per_byte_tx: Option<f64>,
    pub copies_per_byte_rx: Option<f64>,
    /// Ours: bytes the API copied for the two applications (0 expected).
    pub api_copied_bytes: Option<u64>,
    /// Ours: times the sender's and the receiver's blocking waits slept
    /// (each a futex wake-up: what the applications' CPU mostly is).
    pub sender_sleeps: Option<u64>,
    pub receiver_sleeps: Option<u64>,
    /// Ours: the sender's writes and the receiver's reads, and the blocking
    /// waits each made (a wait spins first, and sleeps if that was not enough).
    pub sender_writes: Option<u64>,
    pub receiver_reads: Option<u64>,
    pub sender_waits: Option<u64>,
    pub receiver_waits: Option<u64>,
    /// Where the sink (server), the source (client) and, ours, the engines
    /// ran during the point (the CPU each was seen on most), and how often
    /// the applications moved.
    pub placement: Observed,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub write_size: u64,
    pub outboard_gbps: f64,
    pub kernel_gbps: f64,
    pub outboard_efficiency: f64,
    pub kernel_efficiency: f64,
    pub gbps_ratio: f64,
    pub efficiency_ratio: f64,
    pub outboard_app_cpu_s_per_gb: f64,
    pub kernel_app_cpu_s_per_gb: f64,
    pub outboard_engine_cpu_s_per_gb: Option<f64>,
    pub outboard_efficiency_with_engine: Option<f64>,
    pub outboard: Point,
    pub kernel: Point,
}

#[derive(Debug, Serialize)]
pub struct ThroughputReport {
    pub command: String,
    pub machine: Machine,
    pub fabric: String,
    pub mode: WaitMode,
    pub touch: Touch,
    pub bytes_per_point: u64,
    pub seconds_per_point: f64,
    pub rows: Vec<Row>,
    /// Sender engine: tcp_tx_payload_copied / bytes delivered, over our whole sweep.
    pub copies_per_byte_tx: Option<f64>,
    /// Receiver engine: tcp_rx_payload_copied / bytes delivered.
    pub copies_per_byte_rx: Option<f64>,
    pub bytes_delivered: u64,
    pub api_copied_bytes: u64,
    /// Why a copies figure is null, if one is.
    pub copies_note: Option<String>,
    /// ours/Linux efficiency at 64 KiB writes (null if 64 KiB was not measured).
    pub efficiency_ratio_64k: Option<f64>,
    pub goal_efficiency_ratio_64k: f64,
    pub goal_met: Option<bool>,
    pub plot: Option<String>,
    /// `--pin`: "none", "beside" or "crosswise", and the CPUs it used.
    pub pin: String,
    pub placement: Option<Placement>,
    /// What a futex wake-up costs the woken thread on this machine, from
    /// its own CPU and from the other (`bench::floor::wake_cost`), measured
    /// before the points; None with one CPU or on a machine too busy.
    pub wake_cost: Option<WakeCost>,
}

/// `outboard bench throughput`.
pub fn main(a: &ThroughputArgs) -> ExitCode {
    // Each of --sizes and --bytes was checked when parsed (crate::args).
    if a.sizes.is_empty() {
        eprintln!("outboard bench throughput: --sizes must name at least one write size");
        return ExitCode::from(2);
    }
    if let Some(p) = &a.plot {
        if let Err(e) = peer::check_plot_path(p) {
            eprintln!("outboard bench throughput: --plot {e}");
            return ExitCode::from(2);
        }
    }
    let place = match placement(a.pin, &outboard_engine::cpu::allowed()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("outboard bench throughput: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = sys::install_stop_handler();
    let mut report = match run(a, place) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("outboard bench throughput: {e}");
            return ExitCode::from(1);
        }
    };
    // The plot, only where asked; a failure still prints the results.
    let mut plot_failed = false;
    if let Some(p) = &a.plot {
        if let Err(e) = std::fs::write(p, figure(&report)) {
            eprintln!(
                "outboard bench throughput: cannot write the plot to {}: {e}",
                p.display()
            );
            report.plot = None;
            plot_failed = true;
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        );
    } else {
        print_table(&report);
    }
    if plot_failed {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn spec(
    a: &ThroughputArgs,
    api: Api,
    size: u64,
    port: u16,
    engines: Option<(String, String)>,
    place: Option<Placement>,
) -> PairSpec {
    let secs = a.seconds.max(0.001);
    let common = vec![
        "--size".to_string(),
        size.to_string(),
        "--touch".into(),
        a.touch.name().into(),
    ];
    let mut client = common.clone();
    client.extend([
        "--bytes".into(),
        a.bytes.to_string(),
        "--seconds".into(),
        format!("{secs}"),
    ]);
    client.extend(cpu_flag(place.map(|p| p.client)));
    let mut server = common;
    server.extend(cpu_flag(place.map(|p| p.server)));
    PairSpec {
        label: size_label(size as f64),
        api,
        mode: a.mode,
        engines,
        server_role: Role::Sink,
        client_role: Role::Source,
        port,
        server_extra: server,
        client_extra: client,
        timeout: Duration::from_secs_f64(secs + 60.0),
    }
}

fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

fn div(x: f64, y: f64) -> f64 {
    if y > 0.0 {
        x / y
    } else {
        0.0
    }
}

/// A point from the two peers' reports (the sink is the server).
fn point(sink: &Value, source: &Value) -> Result<Point, String> {
    let bytes = sink["bytes"].as_u64().unwrap_or(0);
    let sent = source["bytes"].as_u64().unwrap_or(0);
    if bytes != sent || bytes == 0 {
        return Err(format!(
            "the sink consumed {bytes} bytes, the source wrote {sent}"
        ));
    }
    let seconds = num(sink, "seconds");
    let (s_cpu, r_cpu) = (num(source, "cpu_s"), num(sink, "cpu_s"));
    let app = s_cpu + r_cpu;
    let gbps = div(bytes as f64 * 8.0, seconds) / 1e9;
    // A floor on utilisation: a run too short for rusage's resolution must not divide by zero.
    let util = div(app, seconds).max(1e-6);
    let copied = [sink, source]
        .iter()
        .map(|v| {
            v["api_send_copied"]
                .as_u64()
                .map(|s| s + v["api_recv_copied"].as_u64().unwrap_or(0))
        })
        .sum::<Option<u64>>();
    Ok(Point {
        bytes,
        seconds,
        gbps,
        sender_cpu_s: s_cpu,
        receiver_cpu_s: r_cpu,
        app_cpu_s: app,
        app_cpu_util: div(app, seconds),
        app_cpu_s_per_gb: div(app, gb(bytes)),
        efficiency: gbps / util,
        engine_cpu_s: None,
        engine_cpu_s_per_gb: None,
        efficiency_with_engine: None,
        copies_per_byte_tx: None,
        copies_per_byte_rx: None,
        api_copied_bytes: copied,
        sender_sleeps: source["api_sleeps"].as_u64(),
        receiver_sleeps: sink["api_sleeps"].as_u64(),
        sender_writes: source["writes"].as_u64(),
        receiver_reads: sink["reads"].as_u64(),
        sender_waits: source["api_waits"].as_u64(),
        receiver_waits: sink["api_waits"].as_u64(),
        placement: Observed::new([None, None], where_(sink), where_(source)),
    })
}

/// The CPU a peer was seen on most in its measured phase, and its migrations during it.
fn where_(peer: &Value) -> (Option<usize>, Option<u64>) {
    (peer["cpu"].as_u64().map(|c| c as usize), peer["migrations"].as_u64())
}

/// Copies per byte each way between two pairs of snapshots (A receives, B sends).
fn copies(
    before: &(Snapshot, Snapshot),
    after: &(Snapshot, Snapshot),
    delivered: u64,
) -> (Option<f64>, Option<f64>) {
    let d = |s0: &Snapshot, s1: &Snapshot, k: &str| -> Option<f64> {
        let (x0, x1) = (counter(s0, k)?, counter(s1, k)?);
        Some(div(x1.saturating_sub(x0) as f64, delivered as f64))
    };
    (
        d(&before.1, &after.1, "tcp_tx_payload_copied"),
        d(&before.0, &after.0, "tcp_rx_payload_copied"),
    )
}

fn engine_cpu(before: &(Snapshot, Snapshot), after: &(Snapshot, Snapshot)) -> f64 {
    (after.0.shard.cpu_s - before.0.shard.cpu_s).max(0.0)
        + (after.1.shard.cpu_s - before.1.shard.cpu_s).max(0.0)
}

fn run(a: &ThroughputArgs, place: Option<Placement>) -> Result<ThroughputReport, String> {
    let run = RunDir::new("throughput")?;
    let wake_cost = floor::wake_cost();
    let mut kernel = Vec::new();
    for &size in &a.sizes {
        let (s, c) = peer::run_pair(&run, &spec(a, Api::Kernel, size, 0, None, place))
            .map_err(|e| format!("Linux, {} writes: {e}", size_label(size as f64)))?;
        kernel.push(
            point(&s, &c).map_err(|e| format!("Linux, {} writes: {e}", size_label(size as f64)))?,
        );
    }
    peer::stopped()?;
    let mut engines = Engines::start(&run, "tput", place.map(|p| [p.engine_a, p.engine_b]))?;
    let fabric = engines.fabric.clone();
    let first = engines.stats().map_err(|e| engines.explain(e))?;
    let mut last = None;
    let mut ours = Vec::new();
    for (i, &size) in a.sizes.iter().enumerate() {
        let what = format!("ours, {} writes", size_label(size as f64));
        let names = Some((engines.a_name.clone(), engines.b_name.clone()));
        let before = match &last {
            Some(s) => s,
            None => &first,
        };
        let watch = engines.watch_cpus();
        let r = peer::run_pair(&run, &spec(a, Api::Outboard, size, 5400 + i as u16, names, place))
            .and_then(|(s, c)| point(&s, &c));
        let shard_cpus = watch.finish();
        let mut p = match r {
            Ok(p) => p,
            Err(e) => return Err(engines.explain(format!("{what}: {e}"))),
        };
        p.placement = p.placement.with_engines([shard_cpus.first().copied().flatten(), shard_cpus.get(1).copied().flatten()]);
        let after = engines
            .stats()
            .map_err(|e| engines.explain(format!("{what}: {e}")))?;
        let ecpu = engine_cpu(before, &after);
        p.engine_cpu_s = Some(ecpu);
        p.engine_cpu_s_per_gb = Some(div(ecpu, gb(p.bytes)));
        p.efficiency_with_engine = Some(p.gbps / div(p.app_cpu_s + ecpu, p.seconds).max(1e-6));
        let (tx, rx) = copies(before, &after, p.bytes);
        p.copies_per_byte_tx = tx;
        p.copies_per_byte_rx = rx;
        ours.push(p);
        last = Some(after);
    }
    drop(engines);
    let last = last.ok_or("no point measured")?;
    let delivered: u64 = ours.iter().map(|p| p.bytes).sum();
    let (tx, rx) = copies(&first, &last, delivered);
    let copies_note = if tx.is_none() || rx.is_none() {
        Some("the engines do not report tcp_tx_payload_copied / tcp_rx_payload_copied".to_string())
    } else {
        None
    };
    let rows: Vec<Row> = a
        .sizes
        .iter()
        .zip(ours.iter().zip(kernel.iter()))
        .map(|(&size, (o, k))| Row {
            write_size: size,
            outboard_gbps: o.gbps,
            kernel_gbps: k.gbps,
            outboard_efficiency: o.efficiency,
            kernel_efficiency: k.efficiency,
            gbps_ratio: div(o.gbps, k.gbps),
            efficiency_ratio: div(o.efficiency, k.efficiency),
            outboard_app_cpu_s_per_gb: o.app_cpu_s_per_gb,
            kernel_app_cpu_s_per_gb: k.app_cpu_s_per_gb,
            outboard_engine_cpu_s_per_gb: o.engine_cpu_s_per_gb,
            outboard_efficiency_with_engine: o.efficiency_with_engine,
            outboard: o.clone(),
            kernel: k.clone(),
        })
        .collect();
    let eff64 = rows
        .iter()
        .find(|r| r.write_size == 64 << 10)
        .map(|r| r.efficiency_ratio);
    Ok(ThroughputReport {
        command: command(a),
        machine: machine(),
        fabric,
        mode: a.mode,
        touch: a.touch,
        bytes_per_point: a.bytes,
        seconds_per_point: a.seconds,
        rows,
        copies_per_byte_tx: tx,
        copies_per_byte_rx: rx,
        bytes_delivered: delivered,
        api_copied_bytes: ours.iter().filter_map(|p| p.api_copied_bytes).sum(),
        copies_note,
        efficiency_ratio_64k: eff64,
        goal_efficiency_ratio_64k: 3.0,
        goal_met: eff64.map(|r| r >= 3.0),
        plot: a.plot.as_ref().map(|p| p.display().to_string()),
        pin: a.pin.name().into(),
        placement: place,
        wake_cost,
    })
}

fn command(a: &ThroughputArgs) -> String {
    let sizes: Vec<String> = a.sizes.iter().map(|s| s.to_string()).collect();
    let mut c = format!(
        "outboard bench throughput --sizes {} --bytes {} --seconds {} --mode {} --touch {}",
        sizes.join(","),
        a.bytes,
        a.seconds,
        a.mode.name(),
        a.touch.name()
    );
    if a.pin != Pin::None {
        c.push_str(" --pin ");
        c.push_str(a.pin.name());
    }
    if let Some(p) = &a.plot {
        c.push_str(&format!(" --plot {}", p.display()));
    }
    if a.json {
        c.push_str(" --json");
    }
    c
}

/// The SVG: throughput, application CPU utilisation and efficiency against write size.
pub fn figure(r: &ThroughputReport) -> String {
    let xs: Vec<f64> = r.rows.iter().map(|w| w.write_size as f64).collect();
    let two = |name_o: &str,
               name_k: &str,
               f_o: &dyn Fn(&Row) -> f64,
               f_k: &dyn Fn(&Row) -> f64|
     -> Vec<Series> {
        vec![
            Series {
                name: name_o.to_string(),
                color: "#1f77b4",
                dashed: false,
                points: xs.iter().copied().zip(r.rows.iter().map(f_o)).collect(),
            },
            Series {
                name: name_k.to_string(),
                color: "#d62728",
                dashed: true,
                points: xs.iter().copied().zip(r.rows.iter().map(f_k)).collect(),
            },
        ]
    };
    let mut eff = two(
        "Outboard (apps)",
        "Linux TCP",
        &|w| w.outboard_efficiency,
        &|w| w.kernel_efficiency,
    );
    eff.push(Series {
        name: "Outboard (apps+engines)".into(),
        color: "#2ca02c",
        dashed: false,
        points: xs
            .iter()
            .copied()
            .zip(
                r.rows
                    .iter()
                    .map(|w| w.outboard_efficiency_with_engine.unwrap_or(f64::NAN)),
            )
            .collect(),
    });
    let panels = [
        Panel {
            title: "Throughput, application to application".into(),
            y_label: "Gbit/s".into(),
            series: two(
                "Outboard (fabric)",
                "Linux TCP (loopback)",
                &|w| w.outboard_gbps,
                &|w| w.kernel_gbps,
            ),
        },
        Panel {
            title: "Application CPU utilisation (sender + receiver)".into(),
            y_label: "CPU (1.0 = one core)".into(),
            series: two(
                "Outboard",
                "Linux TCP",
                &|w| w.outboard.app_cpu_util,
                &|w| w.kernel.app_cpu_util,
            ),
        },
        Panel {
            title: "Efficiency: throughput / application CPU utilisation".into(),
            y_label: "Gbit/s per core".into(),
            series: eff,
        },
    ];
    plot::svg(
        "outboard bench throughput: Outboard vs Linux TCP",
        &format!(
            "{}; {} x {}; mode {}, touch {}",
            r.fabric,
            r.machine.nproc,
            r.machine.cpu_model,
            r.mode.name(),
            r.touch.name()
        ),
        &panels,
    )
}

pub fn print_table(r: &ThroughputReport) {
    println!(
        "outboard bench throughput: application to application against write size ({})",
        r.command
    );
    println!(
        "machine: {} x {}, Linux {}",
        r.machine.nproc, r.machine.cpu_model, r.machine.kernel
    );
    println!(
        "ours: two processes on the native API (zero-copy calls, {} mode) through two engines on {}; Linux: two processes, TCP on 127.0.0.1",
        r.mode.name(),
        r.fabric
    );
    println!("efficiency = Gbit/s / (application CPU s / wall s): Gbit/s per core the applications spend (Gigabit Nectar)");
    match &r.placement {
        Some(p) => println!(
            "placement (--pin {}): engine A and the sink on CPU {} and {}, engine B and the source on CPU {} and {}; Linux's sink on {}, source on {}",
            r.pin, p.engine_a, p.server, p.engine_b, p.client, p.server, p.client
        ),
        None => println!("placement: the scheduler's (--pin none); where each point's processes were is under the table"),
    }
    if let Some(w) = &r.wake_cost {
        println!(
            "a wake-up costs the woken application {:.1} us of its CPU from its own CPU, {:.1} us from the other (CPUs {} and {}): an application beside the other side's engine pays the second",
            w.same_cpu_us, w.other_cpu_us, w.cpus[0], w.cpus[1]
        );
    }
    println!();
    println!(
        "  {:>8} {:>9} {:>9} {:>6} | {:>9} {:>9} | {:>8} {:>8} {:>6} | {:>9} {:>8}",
        "write",
        "ours",
        "Linux",
        "ratio",
        "ours CPU",
        "Linux CPU",
        "ours",
        "Linux",
        "ratio",
        "engine",
        "ours eff"
    );
    println!(
        "  {:>8} {:>9} {:>9} {:>6} | {:>9} {:>9} | {:>8} {:>8} {:>6} | {:>9} {:>8}",
        "size", "Gbit/s", "Gbit/s", "", "s/GB", "s/GB", "eff", "eff", "", "CPU s/GB", "w/engine"
    );
    for w in &r.rows {
        println!(
            "  {:>8} {:>9.3} {:>9.3} {:>5.2}x | {:>9.3} {:>9.3} | {:>8.2} {:>8.2} {:>5.2}x | {:>9} {:>8}",
            size_label(w.write_size as f64),
            w.outboard_gbps,
            w.kernel_gbps,
            w.gbps_ratio,
            w.outboard_app_cpu_s_per_gb,
            w.kernel_app_cpu_s_per_gb,
            w.outboard_efficiency,
            w.kernel_efficiency,
            w.efficiency_ratio,
            w.outboard_engine_cpu_s_per_gb.map_or("-".into(), |c| format!("{c:.3}")),
            w.outboard_efficiency_with_engine.map_or("-".into(), |c| format!("{c:.2}"))
        );
    }
    println!();
    let cpu = |c: Option<usize>| c.map_or("?".to_string(), |c| c.to_string());
    for w in &r.rows {
        let (o, k) = (&w.outboard.placement, &w.kernel.placement);
        println!(
            "  {:>8}: ours {} (engine A {}, sink {}, engine B {}, source {}); Linux {} (sink {}, source {})",
            size_label(w.write_size as f64),
            o.kind,
            cpu(o.engine_a),
            cpu(o.server),
            cpu(o.engine_b),
            cpu(o.client),
            k.kind,
            cpu(k.server),
            cpu(k.client)
        );
    }
    println!();
    let f = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:.3}"));
    println!(
        "engine copies per delivered byte: tx (sender engine) {}, rx (receiver engine) {} over {} bytes{}",
        f(r.copies_per_byte_tx),
        f(r.copies_per_byte_rx),
        r.bytes_delivered,
        r.copies_note.as_ref().map_or(String::new(), |n| format!(" ({n})"))
    );
    println!(
        "bytes the API copied for our applications: {} (the zero-copy calls copy nothing)",
        r.api_copied_bytes
    );
    match r.efficiency_ratio_64k {
        Some(x) => println!(
            "efficiency ours/Linux at 64 KiB writes: {x:.2}x; goal >= {:.1}x: {}",
            r.goal_efficiency_ratio_64k,
            if x >= r.goal_efficiency_ratio_64k {
                "met"
            } else {
                "NOT met"
            }
        ),
        None => println!("efficiency at 64 KiB writes: not measured (add 64KiB to --sizes)"),
    }
    if let Some(p) = &r.plot {
        println!("plot: {p}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_point_from_two_reports() {
        let sink = json!({"ok": true, "bytes": 1_000_000_000u64, "seconds": 2.0, "cpu_s": 0.5, "api_send_copied": 0, "api_recv_copied": 0});
        let source = json!({"ok": true, "bytes": 1_000_000_000u64, "seconds": 1.9, "cpu_s": 0.5, "api_send_copied": 0, "api_recv_copied": 0});
        let p = point(&sink, &source).unwrap();
        assert!((p.gbps - 4.0).abs() < 1e-9);
        assert!((p.app_cpu_util - 0.5).abs() < 1e-9);
        assert!((p.efficiency - 8.0).abs() < 1e-9);
        assert!((p.app_cpu_s_per_gb - 1.0).abs() < 1e-9);
        assert_eq!(p.api_copied_bytes, Some(0));
        let short = json!({"ok": true, "bytes": 10u64, "seconds": 1.0, "cpu_s": 0.1});
        assert!(point(&short, &source).is_err());
        let k = point(
            &json!({"bytes": 5u64, "seconds": 1.0, "cpu_s": 0.0}),
            &json!({"bytes": 5u64, "cpu_s": 0.0}),
        )
        .unwrap();
        assert!(k.efficiency.is_finite() && k.api_copied_bytes.is_none());
    }
}
