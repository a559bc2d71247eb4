//! `outboard bench latency`: 64-byte request/response round trips between two
//! application processes, through two engines on the shared-memory fabric
//! (native API), beside two processes over Linux TCP on loopback, in one run.
//!
//! Method (decided here; see `peer.rs` for the application side):
//!
//! - **Linux first**: for each wait mode asked for, an `echo` peer listens on
//!   127.0.0.1 (port picked by the kernel) and a `ping` peer connects
//!   (TCP_NODELAY on both). Blocking mode is ordinary blocking sockets;
//!   polling mode is a non-blocking socket spun on `EAGAIN`. The engines are
//!   not running yet, so they take no CPU from Linux's case.
//! - **Ours**: two engine daemons on `fabric:bench-PID`, 10.0.0.1 (A) and
//!   10.0.0.2 (B), no services, each `--name`d, with a private
//!   `OUTBOARD_RUN_DIR`. The `echo` peer attaches to A
//!   (`Board::attach_with`, `Mode::Blocking` or `Mode::Polling`) and listens on
//!   port 5300+case; the `ping` peer attaches to B and connects. Requests and
//!   responses are written and read in place (`begin_put`/`end_put`,
//!   `begin_get`/`end_get`). The engines' shard CPU over each case comes
//!   from `outboard stat` (for information).
//! - The ping peer makes `--warmup` unmeasured round trips, then up to
//!   `--round-trips` measured ones, stopping early after `--seconds`; each
//!   round trip is timed with `Instant` from the request's first byte written
//!   to the response's last byte read and checked equal to the request.
//!   p50/p99 (nearest rank) are computed in the peer and reported as a JSON
//!   line.
//! - **Headline** (`outboard`, `kernel`, `ratio_p50` in the JSON): the same
//!   mode on both sides: blocking when it was run (each side's default way
//!   of waiting), else polling. `ratio_p50_by_mode` has every mode run;
//!   the goal is ratio_p50 ≤ 0.25.
//! - **Placement** (`--pin`): by default every process runs where the
//!   scheduler puts it, on both sides. With two engines and two blocking
//!   applications on two CPUs, that decides the daemon's blocking round
//!   trip: an application beside its own engine is woken on the waker's CPU,
//!   one beside the other side's engine through an interrupt to the other
//!   (docs/PERFORMANCE.md, "The daemon's two blocking modes are two
//!   placements"). `--pin beside` and `--pin crosswise` fix each placement
//!   (engines with `--cores`, applications with their affinity), so a user
//!   can see which one a machine is in; Linux's two applications are pinned
//!   to the same CPUs as ours.
//! - **Floor** (`floor` in the JSON, a line under the headline): before any
//!   case, one cache line's round trip between two pinned cores
//!   (`bench::floor`), the least any cross-core round trip costs on this
//!   machine; printed as ours and the goal in multiples of it. Beside it,
//!   a 64-byte command's round trip through two board rings between the
//!   same cores (`board_ring_round_trip_us`): the hand-over between an
//!   application and an engine on two cores, at the least.
//!
//! Engines and peers are stopped (SIGTERM, grace, SIGKILL, reaped) on every
//! path out, Ctrl-C included. Exit codes: 0 done; 1 a case failed (its
//! message, with the logs, says which); 2 bad arguments.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::breakdown::{self, Breakdown};
use super::placement::{cpu_flag, placement, Pin, Placement};
use super::peer::{self, machine, num, Api, Engines, Machine, PairSpec, Role, RunDir, WaitMode};
use clap::{Args, ValueEnum};
use outboard_lab::sys;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeChoice {
    Blocking,
    Polling,
    /// Ours with inline engines (each application's thread runs its engine), polling.
    Inline,
    /// Blocking, then polling.
    Both,
    /// Blocking, polling, then inline.
    All,
}

/// One of our cases: how the applications wait, and where their engines run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Daemon(WaitMode),
    /// Inline engines, polling.
    Inline,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Daemon(m) => m.name(),
            Case::Inline => "inline",
        }
    }
    /// The kernel's row it is compared with (inline spins, as kernel polling does).
    fn kernel_mode(self) -> WaitMode {
        match self {
            Case::Daemon(m) => m,
            Case::Inline => WaitMode::Polling,
        }
    }
    /// The p50 ratio to the kernel's row that the project aims for
    /// (issue 16): an engine in the application's thread at a quarter of
    /// the kernel's polling round trip; applications of a daemon, waiting
    /// on it, at half the kernel's blocking one (each direction still pays
    /// a wake-up, as the kernel's does); daemon polling, like inline, at a
    /// quarter.
    fn goal_p50(self) -> f64 {
        match self {
            Case::Daemon(WaitMode::Blocking) => 0.5,
            Case::Daemon(_) | Case::Inline => 0.25,
        }
    }
}

#[derive(Args, Debug)]
pub struct LatencyArgs {
    /// How the applications wait: blocking, polling, or both (a row each).
    #[arg(long, value_enum, default_value = "all")]
    pub mode: ModeChoice,
    /// Measured round trips per case (at most; `--seconds` may stop it first; 1 to 10^9).
    #[arg(long, default_value_t = 20_000, value_parser = crate::args::count_in(1u64, crate::args::MAX_COUNT, u64::MAX))]
    pub round_trips: u64,
    /// Unmeasured round trips before them (0 to 10^9).
    #[arg(long, default_value_t = 1_000, value_parser = crate::args::count_in(0u64, crate::args::MAX_COUNT, u64::MAX))]
    pub warmup: u64,
    /// Upper bound on each case's measured phase, in seconds (0.001 to 3600).
    #[arg(long, default_value = "5", value_parser = crate::args::bench_seconds())]
    pub seconds: f64,
    /// Bytes per request and per response (8 to 1 MiB: the first 8 bytes carry a sequence number).
    #[arg(long, default_value_t = 64, value_parser = crate::args::count_in(8usize, 1 << 20, usize::MAX))]
    pub size: usize,
    /// Also trace where our round trips' time goes, hop by hop (application,
    /// engine, link, engine, board, application; see `bench::breakdown`):
    /// the medians per hop, beside the traced run's own round trip. Needs
    /// --size ≥ 16 (the trace's mark sits in bytes 8..16).
    #[arg(long)]
    pub breakdown: bool,
    /// Where each process runs: `none` leaves them to the scheduler (both
    /// sides); `beside` pins each application beside its own engine (engine
    /// A and the echo on the first CPU this process may use, engine B and
    /// the ping on the second); `crosswise` pins each beside the other
    /// side's engine. Every application (Linux's and inline ones too) runs
    /// on the CPU its daemon case's application would. Needs two CPUs.
    #[arg(long, value_enum, default_value = "none")]
    pub pin: Pin,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct LatencyRow {
    /// "outboard" or "kernel".
    pub side: String,
    pub mode: String,
    pub round_trips: u64,
    pub seconds: f64,
    pub mean_us: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// CPU seconds of the application processes over the measured phase.
    pub client_cpu_s: f64,
    pub server_cpu_s: f64,
    /// Both engines' shard CPU over the case (ours only).
    pub engine_cpu_s: Option<f64>,
    /// Bytes the API copied for the applications (ours only; 0 expected: zero-copy calls).
    pub api_copied_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Headline {
    pub mode: String,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
}

#[derive(Debug, Serialize)]
pub struct LatencyReport {
    pub command: String,
    pub machine: Machine,
    pub size: usize,
    pub fabric: String,
    pub outboard: Headline,
    pub kernel: Headline,
    /// outboard.p50_us / kernel.p50_us (lower is better; goal ≤ 0.25).
    pub ratio_p50: f64,
    pub ratio_p99: f64,
    pub ratio_p50_by_mode: BTreeMap<String, f64>,
    pub goal_ratio_p50: f64,
    pub goal_met: bool,
    pub rows: Vec<LatencyRow>,
    /// With --breakdown: each of our cases, hop by hop.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breakdown: Vec<Breakdown>,
    /// `--pin`: "none", "beside" or "crosswise", and the CPUs it used.
    pub pin: String,
    pub placement: Option<Placement>,
    /// The machine's floor (`bench::floor`), measured before the cases;
    /// None where it could not be (one CPU, pinning refused, or a machine
    /// too busy for the two threads to run at once within 100 ms).
    pub floor: Option<Floor>,
}

/// One cache line's round trip between two pinned cores: what any round
/// trip between applications on two cores costs at the least.
#[derive(Debug, Serialize)]
pub struct Floor {
    pub cache_line_round_trip_us: f64,
    pub cpus: [usize; 2],
    /// A 64-byte command's round trip through two board rings between the
    /// same CPUs (`bench::floor::board_ring_round_trip`): the hand-over an
    /// application and an engine on two cores pay at the least. None when
    /// it could not be measured.
    pub board_ring_round_trip_us: Option<f64>,
}

/// `outboard bench latency`.
pub fn main(a: &LatencyArgs) -> ExitCode {
    // --size, --round-trips, --warmup and --seconds were checked when parsed (crate::args).
    if a.breakdown && a.size < 16 {
        eprintln!("outboard bench latency: --breakdown needs --size of at least 16 (the trace's mark is bytes 8..16), not {}", a.size);
        return ExitCode::from(2);
    }
    let place = match placement(a.pin, &outboard_engine::cpu::allowed()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("outboard bench latency: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = sys::install_stop_handler();
    match run(a, place) {
        Ok(r) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&r).expect("report serialises")
                );
            } else {
                print_table(&r);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("outboard bench latency: {e}");
            ExitCode::from(1)
        }
    }
}

fn cases(m: ModeChoice) -> Vec<Case> {
    match m {
        ModeChoice::Blocking => vec![Case::Daemon(WaitMode::Blocking)],
        ModeChoice::Polling => vec![Case::Daemon(WaitMode::Polling)],
        ModeChoice::Inline => vec![Case::Inline],
        ModeChoice::Both => vec![Case::Daemon(WaitMode::Blocking), Case::Daemon(WaitMode::Polling)],
        ModeChoice::All => vec![Case::Daemon(WaitMode::Blocking), Case::Daemon(WaitMode::Polling), Case::Inline],
    }
}

fn spec(
    a: &LatencyArgs,
    api: Api,
    mode: WaitMode,
    port: u16,
    engines: Option<(String, String)>,
    place: Option<Placement>,
) -> PairSpec {
    let secs = a.seconds.max(0.001);
    let mut sp = PairSpec {
        label: format!("{} B round trips", a.size),
        api,
        mode,
        engines,
        server_role: Role::Echo,
        client_role: Role::Ping,
        port,
        server_extra: vec![],
        client_extra: vec![
            "--size".into(),
            a.size.to_string(),
            "--count".into(),
            a.round_trips.to_string(),
            "--warmup".into(),
            a.warmup.to_string(),
            "--seconds".into(),
            format!("{secs}"),
        ],
        // Warm-up and measurement are each bounded by --seconds; the rest is start-up.
        timeout: Duration::from_secs_f64(2.0 * secs + 60.0),
    };
    sp.server_extra.extend(cpu_flag(place.map(|p| p.server)));
    sp.client_extra.extend(cpu_flag(place.map(|p| p.client)));
    sp
}

fn row(
    side: Api,
    mode: WaitMode,
    server: &serde_json::Value,
    client: &serde_json::Value,
) -> LatencyRow {
    let copied = match side {
        Api::Outboard => Some(
            [server, client]
                .iter()
                .map(|v| {
                    v["api_send_copied"].as_u64().unwrap_or(0)
                        + v["api_recv_copied"].as_u64().unwrap_or(0)
                })
                .sum(),
        ),
        Api::Kernel => None,
    };
    LatencyRow {
        side: side.name().into(),
        mode: mode.name().into(),
        round_trips: client["round_trips"].as_u64().unwrap_or(0),
        seconds: num(client, "seconds"),
        mean_us: num(client, "mean_us"),
        min_us: num(client, "min_us"),
        p50_us: num(client, "p50_us"),
        p90_us: num(client, "p90_us"),
        p99_us: num(client, "p99_us"),
        max_us: num(client, "max_us"),
        client_cpu_s: num(client, "cpu_s"),
        server_cpu_s: num(server, "cpu_s"),
        engine_cpu_s: None,
        api_copied_bytes: copied,
    }
}

fn run(a: &LatencyArgs, place: Option<Placement>) -> Result<LatencyReport, String> {
    let mut run = RunDir::new("latency")?;
    run.trace_hops = a.breakdown;
    // First, while nothing else of ours runs.
    let floor = super::floor::cache_line_round_trip().map(|(us, cpus)| Floor {
        cache_line_round_trip_us: us,
        cpus,
        board_ring_round_trip_us: super::floor::board_ring_round_trip().map(|(ring, _)| ring),
    });
    // With --breakdown: (mode, client side's log names, server side's), analysed
    // once every traced process has exited and written its records.
    let mut traced: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    let mark = |sp: &mut PairSpec| {
        if a.breakdown {
            sp.client_extra.push("--mark-hops".into());
        }
    };
    let cases = cases(a.mode);
    let mut kernel_modes: Vec<WaitMode> = Vec::new();
    for c in &cases {
        if !kernel_modes.contains(&c.kernel_mode()) {
            kernel_modes.push(c.kernel_mode());
        }
    }
    let mut rows = Vec::new();
    // Linux first, with no engine running.
    for &m in &kernel_modes {
        let (s, c) = peer::run_pair(&run, &spec(a, Api::Kernel, m, 0, None, place))
            .map_err(|e| format!("Linux, {}: {e}", m.name()))?;
        rows.push(row(Api::Kernel, m, &s, &c));
    }
    peer::stopped()?;
    let daemon: Vec<WaitMode> = cases.iter().filter_map(|c| if let Case::Daemon(m) = c { Some(*m) } else { None }).collect();
    let mut fabric = String::new();
    if !daemon.is_empty() {
        let mut engines = Engines::start(&run, "lat", place.map(|p| [p.engine_a, p.engine_b]))?;
        fabric = engines.fabric.clone();
        for (i, &m) in daemon.iter().enumerate() {
            let names = Some((engines.a_name.clone(), engines.b_name.clone()));
            let before = engines.stats();
            let mut sp = spec(a, Api::Outboard, m, 5300 + i as u16, names, place);
            mark(&mut sp);
            if a.breakdown {
                let (server_log, client_log) = sp.log_names();
                traced.push((m.name().into(), vec![client_log, engines.b_name.clone()], vec![server_log, engines.a_name.clone()]));
            }
            let r = peer::run_pair(&run, &sp);
            let (s, c) = match r {
                Ok(x) => x,
                Err(e) => return Err(engines.explain(format!("ours, {}: {e}", m.name()))),
            };
            let after = engines.stats();
            let mut r = row(Api::Outboard, m, &s, &c);
            if let (Ok((a0, b0)), Ok((a1, b1))) = (before, after) {
                r.engine_cpu_s =
                    Some((a1.shard.cpu_s - a0.shard.cpu_s) + (b1.shard.cpu_s - b0.shard.cpu_s));
            }
            rows.push(r);
        }
    }
    if cases.contains(&Case::Inline) {
        // Each application runs its own engine in its thread: no daemons.
        let f = format!("fabric:benchi-{}", std::process::id());
        let mut sp = spec(a, Api::Outboard, WaitMode::Polling, 5390, None, place);
        sp.label = format!("{} B round trips inline", a.size);
        sp.server_extra.extend(["--inline".into(), format!("{f},10.0.0.1/24")]);
        sp.client_extra.extend(["--inline".into(), format!("{f},10.0.0.2/24")]);
        mark(&mut sp);
        if a.breakdown {
            let (server_log, client_log) = sp.log_names();
            traced.push(("inline".into(), vec![client_log], vec![server_log]));
        }
        let (s, c) = peer::run_pair(&run, &sp).map_err(|e| format!("ours, inline: {e}"))?;
        let mut r = row(Api::Outboard, WaitMode::Polling, &s, &c);
        r.mode = "inline".into();
        // The engines ran inside the applications: their CPU is the applications'.
        r.engine_cpu_s = Some(0.0);
        if fabric.is_empty() {
            fabric = f;
        }
        rows.push(r);
    }
    // The daemons have exited (their records are written): put each case's hops together.
    let breakdown = traced
        .iter()
        .map(|(mode, client, server)| breakdown::analyse(&run.path, mode, client, server))
        .collect::<Result<Vec<_>, _>>()?;
    let find = |side: &str, m: &str| rows.iter().find(|r| r.side == side && r.mode == m);
    let mut by_mode = BTreeMap::new();
    for &c in &cases {
        if let (Some(o), Some(k)) = (find("outboard", c.name()), find("kernel", c.kernel_mode().name())) {
            by_mode.insert(c.name().to_string(), ratio(o.p50_us, k.p50_us));
        }
    }
    // Headline: our fastest case against the kernel in the same way of waiting.
    let head = *cases
        .iter()
        .min_by(|x, y| {
            let p = |c: &Case| find("outboard", c.name()).map_or(f64::MAX, |r| r.p50_us);
            p(x).total_cmp(&p(y))
        })
        .ok_or("internal: no case")?;
    let (o, k) = match (find("outboard", head.name()), find("kernel", head.kernel_mode().name())) {
        (Some(o), Some(k)) => (o, k),
        _ => return Err("internal: a headline row is missing".into()),
    };
    let headline = |r: &LatencyRow| Headline {
        mode: r.mode.clone(),
        p50_us: r.p50_us,
        p99_us: r.p99_us,
        mean_us: r.mean_us,
    };
    let ratio_p50 = ratio(o.p50_us, k.p50_us);
    let report = LatencyReport {
        pin: a.pin.name().into(),
        placement: place,
        floor,
        command: command(a),
        machine: machine(),
        size: a.size,
        fabric,
        outboard: headline(o),
        kernel: headline(k),
        ratio_p50,
        ratio_p99: ratio(o.p99_us, k.p99_us),
        ratio_p50_by_mode: by_mode,
        goal_ratio_p50: head.goal_p50(),
        goal_met: ratio_p50 <= head.goal_p50(),
        rows,
        breakdown,
    };
    Ok(report)
}

fn ratio(x: f64, y: f64) -> f64 {
    if y > 0.0 {
        x / y
    } else {
        0.0
    }
}

fn command(a: &LatencyArgs) -> String {
    let mode = match a.mode {
        ModeChoice::Blocking => "blocking",
        ModeChoice::Polling => "polling",
        ModeChoice::Inline => "inline",
        ModeChoice::Both => "both",
        ModeChoice::All => "all",
    };
    let mut c = format!(
        "outboard bench latency --mode {mode} --round-trips {} --warmup {} --seconds {} --size {}",
        a.round_trips, a.warmup, a.seconds, a.size
    );
    if a.breakdown {
        c.push_str(" --breakdown");
    }
    if a.pin != Pin::None {
        c.push_str(" --pin ");
        c.push_str(a.pin.name());
    }
    if a.json {
        c.push_str(" --json");
    }
    c
}

pub fn print_table(r: &LatencyReport) {
    println!(
        "outboard bench latency: {}-byte request/response, application to application ({})",
        r.size, r.command
    );
    println!(
        "machine: {} x {}, Linux {}",
        r.machine.nproc, r.machine.cpu_model, r.machine.kernel
    );
    println!(
        "ours: two processes on the native API (zero-copy calls) through two engines on {}; Linux: two processes, TCP on 127.0.0.1, TCP_NODELAY",
        r.fabric
    );
    match &r.placement {
        Some(p) => println!(
            "placement (--pin {}): engine A and its echo application on CPU {} and {}, engine B and its ping application on CPU {} and {}; Linux's echo on {}, ping on {}",
            r.pin, p.engine_a, p.server, p.engine_b, p.client, p.server, p.client
        ),
        None => println!("placement: the scheduler's (--pin none)"),
    }
    println!();
    println!(
        "  {:<9} {:<9} {:>11} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "side",
        "mode",
        "round trips",
        "mean us",
        "p50 us",
        "p99 us",
        "max us",
        "app CPU s",
        "engine CPU"
    );
    for w in &r.rows {
        println!(
            "  {:<9} {:<9} {:>11} {:>9.2} {:>9.2} {:>9.2} {:>9.1} {:>10.3} {:>10}",
            if w.side == "kernel" { "Linux" } else { "ours" },
            w.mode,
            w.round_trips,
            w.mean_us,
            w.p50_us,
            w.p99_us,
            w.max_us,
            w.client_cpu_s + w.server_cpu_s,
            w.engine_cpu_s
                .map_or("-".to_string(), |c| format!("{c:.3} s"))
        );
    }
    println!();
    let modes: Vec<String> = r
        .ratio_p50_by_mode
        .iter()
        .map(|(m, x)| format!("{m} {x:.2}x"))
        .collect();
    println!("p50 ours/Linux by mode: {}", modes.join(", "));
    println!(
        "headline ({} on both sides): p50 {:.2} us vs {:.2} us = {:.2}x, p99 {:.2}x; goal <= {:.2}x: {}",
        r.outboard.mode,
        r.outboard.p50_us,
        r.kernel.p50_us,
        r.ratio_p50,
        r.ratio_p99,
        r.goal_ratio_p50,
        if r.goal_met { "met" } else { "NOT met" }
    );
    if let Some(f) = &r.floor {
        let goal_us = r.goal_ratio_p50 * r.kernel.p50_us;
        println!(
            "floor: one cache line's round trip between CPUs {} and {} takes {:.2} us on this machine; ours is {:.1}x that, the goal ({:.2} us) {:.1}x",
            f.cpus[0],
            f.cpus[1],
            f.cache_line_round_trip_us,
            ratio(r.outboard.p50_us, f.cache_line_round_trip_us),
            goal_us,
            ratio(goal_us, f.cache_line_round_trip_us)
        );
        if let Some(ring) = f.board_ring_round_trip_us {
            println!(
                "board rings: a 64-byte command's round trip through two board rings between the same CPUs takes {:.2} us ({:.1}x the floor), the least an application and an engine on two cores pay to hand over a request and its answer",
                ring,
                ratio(ring, f.cache_line_round_trip_us)
            );
        }
    }
    if r.floor.is_none() {
        println!("floor: not measured (fewer than two CPUs, or two pinned threads could not run at once within 100 ms)");
    }
    let copied: u64 = r.rows.iter().filter_map(|w| w.api_copied_bytes).sum();
    println!(
        "bytes the API copied for our applications: {copied} (the zero-copy calls copy nothing)"
    );
    for b in &r.breakdown {
        println!();
        breakdown::print(b);
    }
}
