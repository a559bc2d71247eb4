//! `outboard bench cost`: instructions (and cycles, where the CPU's counters
//! are lent) per in-order TCP data segment received and per segment sent, for
//! our stack and for smoltcp's on the same in-memory workload, in one run.
//!
//! The workload (decided here): two stacks of the same kind connected back to
//! back over an in-memory Ethernet wire (MTU 1500, frames in pooled buffers,
//! see `frames.rs`), on virtual time that moves 10 µs a round. A sends a
//! prime-period byte pattern to B as fast as the windows allow; each round is
//! a **send phase** (A takes its incoming ACKs, the application writes what
//! fits, A emits segments), the wire carrying A's frames to B, a **receive
//! phase** (B takes the segments, the application reads everything, B emits
//! its ACKs), and the wire carrying them back. Both stacks run at their
//! defaults (ours with timestamps and SACK, as Linux; smoltcp without: see
//! `smol.rs`) but with the same 256 KiB buffers each way, and both compute
//! and verify every checksum in software. How often each receiver ACKs is its
//! own policy, and is reported beside the costs (`acks/seg`).
//! Every byte read is checked against the pattern outside the phases.
//!
//! A phase's count divided by the data segments carried is the cost per
//! segment sent (send phase: writing, segmenting, checksumming, taking ACKs)
//! and per segment received (receive phase: parsing, verifying, reassembly
//! bookkeeping, the copy out, ACKing). `--warmup` segments run first,
//! uncounted (windows open, caches and predictors warm).
//!
//! Counting: hardware counters (`perf_event_open`, user space only) where the
//! machine lends them, else callgrind (instructions only; `valgrind` must be
//! installed). Either way, a native pass times each phase with the wall clock
//! (best of three passes) for ns per segment. Exit codes: 0 done; 1 the
//! workload failed or nothing can count instructions; 2 bad arguments.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

mod counters;
mod frames;
mod ours;
mod smol;

use clap::{Args, ValueEnum};
use ours::Ours;
use serde::{Deserialize, Serialize};
use smol::Smol;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Method {
    /// Hardware counters where lent, else callgrind.
    Auto,
    /// Hardware counters (`perf_event_open`): instructions and cycles.
    Perf,
    /// valgrind's callgrind: instructions only.
    Callgrind,
}

#[derive(Args, Debug)]
pub struct CostArgs {
    /// Data segments measured per stack (100 to 10^7).
    #[arg(long, default_value_t = 20_000, value_parser = crate::args::count_in(100u64, 10_000_000, u64::MAX))]
    pub segments: u64,
    /// Data segments moved before measuring (0 to 10^7).
    #[arg(long, default_value_t = 2_000, value_parser = crate::args::count_in(0u64, 10_000_000, u64::MAX))]
    pub warmup: u64,
    /// How instructions are counted.
    #[arg(long, value_enum, default_value = "auto")]
    pub method: Method,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Internal: run one stack's phase for callgrind (`outboard:send`, `smoltcp:receive`, …).
    #[arg(long, hide = true)]
    pub phase: Option<String>,
}

/// The two stacks' worlds, as the driver sees them.
pub(crate) trait World: Sized {
    const NAME: &'static str;
    /// Both stacks, connected (unmeasured).
    fn new() -> Result<Self, String>;
    fn send_phase(&mut self);
    fn receive_phase(&mut self);
    /// Moves the sender's frames onto the wire to the receiver; returns the data segments among them.
    fn carry_to_receiver(&mut self) -> u64;
    /// Moves the receiver's frames to the sender; returns how many.
    fn carry_to_sender(&mut self) -> u64;
    /// Checks what the last receive phase read against the pattern; returns its length.
    fn check_read(&mut self) -> Result<u64, String>;
    /// Advances virtual time; when the round moved nothing, to the next timer.
    fn tick(&mut self, idle: bool) -> Result<(), String>;
}

// The measured calls go through these unmangled functions, and only they do:
// callgrind collects inside the one named by `--toggle-collect`.
#[no_mangle]
#[inline(never)]
pub fn outboard_cost_outboard_send(w: &mut Ours) {
    w.send_phase()
}
#[no_mangle]
#[inline(never)]
pub fn outboard_cost_outboard_receive(w: &mut Ours) {
    w.receive_phase()
}
#[no_mangle]
#[inline(never)]
pub fn outboard_cost_smoltcp_send(w: &mut Smol) {
    w.send_phase()
}
#[no_mangle]
#[inline(never)]
pub fn outboard_cost_smoltcp_receive(w: &mut Smol) {
    w.receive_phase()
}

/// How a pass measures the phases.
enum Meter {
    /// Not at all (warm-up, and the callgrind child, whose valgrind counts).
    None,
    /// Wall-clock nanoseconds, summed per phase.
    Clock { send: Duration, receive: Duration },
    /// Hardware counters per phase.
    Perf { send: counters::PhaseCounters, receive: counters::PhaseCounters },
}

impl Meter {
    #[inline(always)]
    fn send(&mut self, f: impl FnOnce()) {
        match self {
            Meter::None => f(),
            Meter::Clock { send, .. } => {
                let t = Instant::now();
                f();
                *send += t.elapsed();
            }
            Meter::Perf { send, .. } => send.count(f),
        }
    }

    #[inline(always)]
    fn receive(&mut self, f: impl FnOnce()) {
        match self {
            Meter::None => f(),
            Meter::Clock { receive, .. } => {
                let t = Instant::now();
                f();
                *receive += t.elapsed();
            }
            Meter::Perf { receive, .. } => receive.count(f),
        }
    }
}

/// What a pass moved.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
pub struct Moved {
    pub segments: u64,
    pub bytes: u64,
    /// Frames from the receiver (its ACKs and window updates).
    pub acks: u64,
}

/// Runs rounds until at least `segments` data segments have crossed, the
/// phases through `send`/`receive` and measured by `meter`.
fn drive<W: World>(
    w: &mut W,
    segments: u64,
    send: fn(&mut W),
    receive: fn(&mut W),
    meter: &mut Meter,
) -> Result<Moved, String> {
    let mut m = Moved::default();
    let mut idle_rounds = 0;
    while m.segments < segments {
        meter.send(|| send(w));
        let segs = w.carry_to_receiver();
        meter.receive(|| receive(w));
        m.bytes += w.check_read().map_err(|e| format!("{}: {e}", W::NAME))?;
        let acks = w.carry_to_sender();
        m.segments += segs;
        m.acks += acks;
        let idle = segs == 0 && acks == 0;
        idle_rounds = if idle { idle_rounds + 1 } else { 0 };
        if idle_rounds > 1_000 {
            return Err(format!("{}: no progress in 1,000 rounds after {} segments", W::NAME, m.segments));
        }
        w.tick(idle).map_err(|e| format!("{}: {e}", W::NAME))?;
    }
    Ok(m)
}

/// A fresh world, warmed up, then one measured pass.
fn pass<W: World>(
    a: &CostArgs,
    send: fn(&mut W),
    receive: fn(&mut W),
    meter: &mut Meter,
) -> Result<Moved, String> {
    let mut w = W::new()?;
    drive(&mut w, a.warmup, W::send_phase, W::receive_phase, &mut Meter::None)?;
    drive(&mut w, a.segments, send, receive, meter)
}

/// One stack's costs, per data segment.
#[derive(Debug, Serialize)]
pub struct StackCost {
    pub stack: String,
    pub segments: u64,
    pub payload_bytes_per_segment: f64,
    pub acks_per_segment: f64,
    pub send_instructions: f64,
    pub receive_instructions: f64,
    /// With hardware counters only.
    pub send_cycles: Option<f64>,
    pub receive_cycles: Option<f64>,
    /// Wall clock, native pass (best of three).
    pub send_ns: f64,
    pub receive_ns: f64,
}

#[derive(Debug, Serialize)]
pub struct CostReport {
    /// "perf" or "callgrind".
    pub method: String,
    /// Why hardware counters were not used, when they were not.
    pub perf_unavailable: Option<String>,
    pub warmup_segments: u64,
    pub ours: StackCost,
    pub smoltcp: StackCost,
    /// Ours over smoltcp's (the goal is ≤ 0.5 for instructions).
    pub ratio_send_instructions: f64,
    pub ratio_receive_instructions: f64,
    pub ratio_send_ns: f64,
    pub ratio_receive_ns: f64,
    pub command: String,
}

pub fn main(a: &CostArgs) -> ExitCode {
    if let Some(phase) = &a.phase {
        return match child(a, phase) {
            Ok(m) => {
                println!("{}", serde_json::to_string(&m).expect("serialises"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("outboard bench cost --phase {phase}: {e}");
                ExitCode::from(1)
            }
        };
    }
    match run(a) {
        Ok(r) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r).expect("report serialises"));
            } else {
                print_table(&r);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("outboard bench cost: {e}");
            ExitCode::from(1)
        }
    }
}

/// The callgrind child: one pass whose measured calls go through the phase's
/// unmangled function.
fn child(a: &CostArgs, phase: &str) -> Result<Moved, String> {
    let m = &mut Meter::None;
    match phase {
        "outboard:send" => pass::<Ours>(a, outboard_cost_outboard_send, Ours::receive_phase, m),
        "outboard:receive" => pass::<Ours>(a, Ours::send_phase, outboard_cost_outboard_receive, m),
        "smoltcp:send" => pass::<Smol>(a, outboard_cost_smoltcp_send, Smol::receive_phase, m),
        "smoltcp:receive" => pass::<Smol>(a, Smol::send_phase, outboard_cost_smoltcp_receive, m),
        other => Err(format!("unknown phase {other:?}")),
    }
}

/// Per-segment instructions and cycles of one stack: (send, receive) each.
struct Counted {
    moved: Moved,
    instructions: (f64, f64),
    cycles: Option<(f64, f64)>,
}

fn per_segment(total: u64, m: &Moved) -> f64 {
    total as f64 / m.segments.max(1) as f64
}

fn count_perf<W: World>(a: &CostArgs) -> Result<Counted, String> {
    let mut meter = Meter::Perf { send: counters::PhaseCounters::open()?, receive: counters::PhaseCounters::open()? };
    let moved = pass::<W>(a, W::send_phase, W::receive_phase, &mut meter)?;
    let Meter::Perf { send, receive } = meter else { unreachable!("built as Perf") };
    let (si, sc) = send.totals();
    let (ri, rc) = receive.totals();
    if si == 0 || ri == 0 {
        return Err("the hardware counters counted nothing".into());
    }
    Ok(Counted {
        moved,
        instructions: (per_segment(si, &moved), per_segment(ri, &moved)),
        cycles: Some((per_segment(sc, &moved), per_segment(rc, &moved))),
    })
}

fn count_callgrind(a: &CostArgs, stack: &str) -> Result<Counted, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let dir = std::env::temp_dir();
    let mut totals = [0u64; 2];
    let mut moved = None;
    for (i, phase) in ["send", "receive"].into_iter().enumerate() {
        let args = vec![
            "bench".to_string(),
            "cost".into(),
            "--segments".into(),
            a.segments.to_string(),
            "--warmup".into(),
            a.warmup.to_string(),
            "--phase".into(),
            format!("{stack}:{phase}"),
        ];
        let out = dir.join(format!("outboard-cost-{}-{stack}-{phase}.callgrind", std::process::id()));
        let function = format!("outboard_cost_{stack}_{phase}");
        let (ir, stdout) = counters::callgrind(&exe, &args, &function, &out)?;
        if ir == 0 {
            return Err(format!("callgrind counted nothing in {function}"));
        }
        totals[i] = ir;
        let m: Moved = serde_json::from_str(stdout.trim())
            .map_err(|e| format!("the {stack}:{phase} pass printed {stdout:?}: {e}"))?;
        moved = Some(m);
    }
    let moved = moved.expect("two passes ran");
    Ok(Counted {
        moved,
        instructions: (per_segment(totals[0], &moved), per_segment(totals[1], &moved)),
        cycles: None,
    })
}

/// Nanoseconds per segment (send, receive): the best of three native passes each.
fn clock<W: World>(a: &CostArgs) -> Result<(f64, f64), String> {
    let mut best = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        let mut meter = Meter::Clock { send: Duration::ZERO, receive: Duration::ZERO };
        let m = pass::<W>(a, W::send_phase, W::receive_phase, &mut meter)?;
        let Meter::Clock { send, receive } = meter else { unreachable!("built as Clock") };
        best.0 = best.0.min(send.as_nanos() as f64 / m.segments as f64);
        best.1 = best.1.min(receive.as_nanos() as f64 / m.segments as f64);
    }
    Ok(best)
}

fn stack_cost(name: &str, c: Counted, ns: (f64, f64)) -> StackCost {
    let m = c.moved;
    StackCost {
        stack: name.to_string(),
        segments: m.segments,
        payload_bytes_per_segment: m.bytes as f64 / m.segments.max(1) as f64,
        acks_per_segment: m.acks as f64 / m.segments.max(1) as f64,
        send_instructions: c.instructions.0,
        receive_instructions: c.instructions.1,
        send_cycles: c.cycles.map(|c| c.0),
        receive_cycles: c.cycles.map(|c| c.1),
        send_ns: ns.0,
        receive_ns: ns.1,
    }
}

fn run(a: &CostArgs) -> Result<CostReport, String> {
    let perf = match a.method {
        Method::Callgrind => Err("--method callgrind".to_string()),
        _ => counters::PhaseCounters::open().map(|_| ()),
    };
    let (method, perf_unavailable, ours, smol) = match perf {
        Ok(()) => ("perf", None, count_perf::<Ours>(a)?, count_perf::<Smol>(a)?),
        Err(why) => {
            if a.method == Method::Perf {
                return Err(format!("no hardware counters here: {why}"));
            }
            if !counters::valgrind_available() {
                return Err(format!(
                    "no hardware counters here ({why}) and no valgrind to count instructions with: \
                     install valgrind (apt-get install valgrind)"
                ));
            }
            ("callgrind", Some(why), count_callgrind(a, "outboard")?, count_callgrind(a, "smoltcp")?)
        }
    };
    let ours_ns = clock::<Ours>(a)?;
    let smol_ns = clock::<Smol>(a)?;
    let ours = stack_cost(Ours::NAME, ours, ours_ns);
    let smoltcp = stack_cost(Smol::NAME, smol, smol_ns);
    Ok(CostReport {
        method: method.into(),
        perf_unavailable,
        warmup_segments: a.warmup,
        ratio_send_instructions: ours.send_instructions / smoltcp.send_instructions,
        ratio_receive_instructions: ours.receive_instructions / smoltcp.receive_instructions,
        ratio_send_ns: ours.send_ns / smoltcp.send_ns,
        ratio_receive_ns: ours.receive_ns / smoltcp.receive_ns,
        ours,
        smoltcp,
        command: format!(
            "outboard bench cost --segments {} --warmup {} --method {}",
            a.segments,
            a.warmup,
            match a.method {
                Method::Auto => "auto",
                Method::Perf => "perf",
                Method::Callgrind => "callgrind",
            }
        ),
    })
}

pub fn print_table(r: &CostReport) {
    println!("outboard bench cost: per in-order TCP data segment, in-memory Ethernet, MTU 1500");
    match &r.perf_unavailable {
        None => println!("counted by: hardware counters (user space)"),
        Some(why) => println!("counted by: callgrind (instructions only; no hardware counters: {why})"),
    }
    println!(
        "{:>9} {:>9} {:>10} {:>9} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9}",
        "stack", "segments", "bytes/seg", "acks/seg", "send instr", "recv instr", "send cyc", "recv cyc", "send ns", "recv ns"
    );
    for s in [&r.ours, &r.smoltcp] {
        let cyc = |c: Option<f64>| c.map_or("-".to_string(), |c| format!("{c:.0}"));
        println!(
            "{:>9} {:>9} {:>10.1} {:>9.3} {:>12.0} {:>12.0} {:>10} {:>10} {:>9.0} {:>9.0}",
            s.stack,
            s.segments,
            s.payload_bytes_per_segment,
            s.acks_per_segment,
            s.send_instructions,
            s.receive_instructions,
            cyc(s.send_cycles),
            cyc(s.receive_cycles),
            s.send_ns,
            s.receive_ns
        );
    }
    println!(
        "ours / smoltcp: instructions send {:.2}x, receive {:.2}x (goal <= 0.5x); time send {:.2}x, receive {:.2}x",
        r.ratio_send_instructions, r.ratio_receive_instructions, r.ratio_send_ns, r.ratio_receive_ns
    );
}
