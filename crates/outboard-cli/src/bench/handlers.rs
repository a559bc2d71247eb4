//! `outboard bench handlers`: a request answered by a WebAssembly handler on
//! the engine (docs/HANDLERS.md), beside the same request answered by an
//! application through its board and by a kernel UDP server, in one run (no
//! root needed); then what the sandbox itself costs.
//!
//! Method (decided here):
//!
//! - **The RPC**: 64-byte requests echoed back, as in `bench messages`.
//!   p50/p99 with one call outstanding, rate with 32 in flight.
//!   - *kernel* first, with no engine running: `bench messages`' UDP
//!     request-response on 127.0.0.1 (a blocking server thread echoing one
//!     datagram at a time, a blocking client thread).
//!   - Then one server engine, `outboard engine --messages` on
//!     `fabric:bhnd-PID` at 10.0.0.1, started with the echo handler (below)
//!     on mailbox 10 (`--handler bench-echo=echo.wasm:mailbox=10`). Every
//!     case's client is an `outboard msg` client engine at 10.0.0.2 (this
//!     executable, spawned): a warm-up of unmeasured calls, then `--calls N
//!     --outstanding 1` (round trips timed per call by the client engine's
//!     clock), then `--calls 5xN --outstanding 32` (calls over the job's
//!     elapsed time); every response is checked equal to its request.
//!   - *handler*: the calls go to mailbox 10: the engine runs the handler
//!     inside its message service's turn, on shard 0, and the handler's
//!     `reply` answers the call there.
//!   - *board*: the calls go to mailbox `board-echo`, bound through the
//!     server engine's board by a thread of this process that answers each
//!     request in place (`Mailbox::reply_in_place`), as `bench messages`'
//!     rpc-board server does (board in its default blocking mode).
//!   - The engine's built-in `echo` mailbox (native code in the service) is
//!     measured the same way for reference (`builtin_echo`, a note): the
//!     handler row less it is what running the handler adds to the path.
//! - **`invoke_ns`**: in this process, the empty handler (`ob_message`
//!   returns 0) loaded with `outboard_handler` on a runtime with epochs (the
//!   engine's), invoked with a 64-byte message in batches of 2^20 (up to 5
//!   batches within `--seconds`); the median batch's ns per invocation. The
//!   echo handler (`input_read` and `reply`, 64 bytes) is timed the same way.
//! - **`epoch_overhead`**: a compute-bound handler (a loop of 4,000,000
//!   iterations of FNV-1a-style 64-bit integer hashing over its counter, one
//!   loop back-edge per iteration, returning the checksum) timed on a
//!   runtime with epoch interruption and on one without
//!   (`Runtime::without_epochs`): (with − without) / without, from the
//!   medians of up to 11 invocations each, interleaved. A tighter loop (one
//!   64-bit add per iteration: the check's worst case) is reported beside it.
//!   Both runtimes exist throughout, so the epoch ticker runs during both.
//! - **Pinning** as in `bench messages`: the server engine and the kernel's
//!   server thread on the first CPU this process may use, the client engines
//!   and the kernel's client thread on the second; the board's server thread
//!   on a third when there is one, else on the server engine's CPU (as
//!   `bench messages`' rpc-board). The in-process measurements run on the
//!   second CPU.
//!
//! Engines are stopped on every path out, Ctrl-C included. Exit codes: 0
//! done; 1 a case failed; 2 bad arguments.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::messages::{self as m, Latency, MsgRun, Pins, Rate, Side, RATE_OUTSTANDING, SERVER_ADDR, SIZE, WARMUP};
use super::peer::{self, machine, RunDir};
use clap::Args;
use outboard_engine::stat::Snapshot;
use outboard_handler::{Addr, Attach, Handler, HostIo, Input, Limits, MessageKind, Outcome, Runtime, MAX_DEADLINE};
use outboard_lab::sys;
use serde::Serialize;
use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

/// The rate cases make this many times `--calls` calls.
const RATE_FACTOR: u64 = 5;
/// The server engine's mailbox for the echo handler.
const HANDLER_MAILBOX: u32 = 10;
const HANDLER_NAME: &str = "bench-echo";
/// The board's mailbox name.
const BOARD_MAILBOX: &str = "board-echo";
/// Invocations per batch in `invoke_ns`, and batches at most.
const INVOKE_BATCH: u64 = 1 << 20;
const INVOKE_BATCHES: usize = 5;
/// Iterations of the compute handler, and invocations per runtime at most.
const COMPUTE_ITERATIONS: u32 = 4_000_000;
const COMPUTE_REPS: usize = 11;
/// Goals.
const GOAL_HANDLER_BOARD: f64 = 0.6;
const GOAL_INVOKE_NS: f64 = 200.0;
const GOAL_EPOCH: f64 = 0.15;

#[derive(Args, Debug)]
pub struct HandlersArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Calls in each latency case; the rate cases make 5x as many (10 to 200000).
    #[arg(long, default_value_t = 20_000, value_parser = crate::args::count_in(10u64, 200_000, u64::MAX))]
    pub calls: u64,
    /// Upper bound on each case's measured phase, in seconds (0.001 to 3600); also bounds
    /// the in-process invocation batches and the compute runs.
    #[arg(long, default_value = "5", value_parser = crate::args::bench_seconds())]
    pub seconds: f64,
}

// ================================================================ the modules

/// Answers a request with its own bytes (`input_read` into memory, `reply`);
/// takes anything else without an answer.
const ECHO_WAT: &str = r#"(module
  (import "outboard" "input_read" (func $input_read (param i32 i32 i32) (result i32)))
  (import "outboard" "reply" (func $reply (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "ob_abi") (result i32) i32.const 1)
  (func (export "ob_message") (param $kind i32) (param $len i32) (result i32)
    (local $n i32)
    (if (i32.ne (local.get $kind) (i32.const 3)) (then (return (i32.const 0))))
    (local.set $n (call $input_read (i32.const 0) (i32.const 0) (local.get $len)))
    (if (i32.lt_s (local.get $n) (i32.const 0)) (then (return (local.get $n))))
    (call $reply (i32.const 0) (local.get $n))))
"#;

/// Does nothing: what an invocation costs by itself.
const EMPTY_WAT: &str = r#"(module
  (memory (export "memory") 1)
  (func (export "ob_abi") (result i32) i32.const 1)
  (func (export "ob_message") (param $kind i32) (param $len i32) (result i32) i32.const 0))
"#;

/// Compute-bound: the message holds the iteration count (u32, little-endian)
/// and the loop (u32: 0 FNV-1a-style hashing of the counter, 1 a plain
/// sum); returns the checksum's low 31 bits. One back-edge per iteration.
const COMPUTE_WAT: &str = r#"(module
  (import "outboard" "input_read" (func $input_read (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "ob_abi") (result i32) i32.const 1)
  (func (export "ob_message") (param $kind i32) (param $len i32) (result i32)
    (local $i i32) (local $n i32) (local $acc i64)
    (i64.store (i32.const 0) (i64.const 0))
    (drop (call $input_read (i32.const 0) (i32.const 0) (i32.const 8)))
    (local.set $n (i32.load (i32.const 0)))
    (if (i32.eqz (i32.load (i32.const 4)))
      (then
        (local.set $acc (i64.const 0xcbf29ce484222325))
        (block $done
          (loop $l
            (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
            (local.set $acc (i64.mul (i64.xor (local.get $acc) (i64.extend_i32_u (local.get $i))) (i64.const 0x100000001b3)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $l))))
      (else
        (block $done
          (loop $l
            (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
            (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (local.get $i))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $l)))))
    (i32.and (i32.wrap_i64 (i64.xor (local.get $acc) (i64.shr_u (local.get $acc) (i64.const 32)))) (i32.const 0x7fffffff))))
"#;

fn wasm(what: &str, wat: &str) -> Result<Vec<u8>, String> {
    wat::parse_str(wat).map_err(|e| format!("the {what} handler's text: {e}"))
}

// ================================================================ the report

#[derive(Debug, Serialize)]
pub struct Row {
    /// `handler`, `board` or `kernel`.
    pub server: String,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Calls a second with 32 outstanding.
    pub rate: f64,
    /// This row / the kernel row.
    pub p50_vs_kernel: Option<f64>,
    pub rate_vs_kernel: Option<f64>,
    /// Calls measured in the latency and rate cases.
    pub calls: u64,
    pub rate_calls: u64,
}

#[derive(Debug, Serialize)]
pub struct Reference {
    pub p50_us: f64,
    pub p99_us: f64,
    pub rate: f64,
}

#[derive(Debug, Serialize)]
pub struct Goal {
    pub name: String,
    pub value: f64,
    /// `<= X`.
    pub goal: String,
    pub met: bool,
}

#[derive(Debug, Serialize)]
pub struct HandlersReport {
    pub rows: Vec<Row>,
    /// handler p50 / board p50.
    pub handler_board_p50: Option<f64>,
    /// handler p50 / kernel p50.
    pub handler_kernel_p50: Option<f64>,
    /// ns per invocation of the empty handler, in process.
    pub invoke_ns: f64,
    /// ns per invocation of the echo handler on a 64-byte request, in process.
    pub echo_invoke_ns: f64,
    /// Invocations timed for `invoke_ns` (over all its batches).
    pub invocations: u64,
    /// (with epochs − without) / without, the hashing loop.
    pub epoch_overhead: f64,
    /// The same for the one-add loop (the checks' worst case).
    pub epoch_overhead_tight: f64,
    /// The hashing loop's median invocation, ms: with epochs, without.
    pub compute_ms: [f64; 2],
    pub compute_tight_ms: [f64; 2],
    /// The engine's built-in `echo` mailbox, the same calls.
    pub builtin_echo: Reference,
    /// The server engine's CPU per call in the rate cases, µs: builtin echo,
    /// handler, board (the engine's part only; the application thread's is not in it).
    pub server_cpu_us_per_call: [Option<f64>; 3],
    pub goals: Vec<Goal>,
    pub machine: String,
    pub notes: Vec<String>,
}

/// `outboard bench handlers`.
pub fn main(a: &HandlersArgs) -> ExitCode {
    let _ = sys::install_stop_handler();
    match run(a) {
        Ok(r) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r).expect("report serialises"));
            } else {
                print_table(a, &r);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("outboard bench handlers: {e}");
            ExitCode::from(1)
        }
    }
}

// ================================================================ in process

/// The engine's side of an in-process invocation: a reply is counted, nothing else happens.
#[derive(Default)]
struct BenchIo {
    replies: u64,
    reply_bytes: u64,
}

impl HostIo for BenchIo {
    fn reply(&mut self, data: &[u8]) -> Result<(), i32> {
        self.replies += 1;
        self.reply_bytes += data.len() as u64;
        Ok(())
    }
    fn send(&mut self, _to: Addr, _data: &[u8], _reliable: bool) -> Result<(), i32> {
        Err(libc::EINVAL)
    }
    fn enqueue(&mut self, _mailbox: u32, _data: &[u8]) -> Result<(), i32> {
        Err(libc::ENOENT)
    }
    fn tcp_write(&mut self, _conn: u32, _data: &[u8]) -> Result<usize, i32> {
        Err(libc::ENOTCONN)
    }
    fn tcp_close(&mut self, _conn: u32) -> Result<(), i32> {
        Err(libc::ENOTCONN)
    }
    fn now_ns(&self) -> u64 {
        0
    }
    fn log(&mut self, _line: &str) {}
}

fn client_addr() -> Addr {
    Addr { host: SocketAddr::from((Ipv4Addr::new(10, 0, 0, 2), 7373)), mailbox: 0x8000_0000 }
}

fn load(rt: &Runtime, name: &str, wasm: &[u8], limits: Limits, io: &mut BenchIo) -> Result<Handler, String> {
    Handler::load(rt, name, wasm, Attach::Mailbox, limits, io).map_err(|e| format!("the {name} handler: {e}"))
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per invocation of `h` on `kind` (64 bytes): the median of up to
/// `INVOKE_BATCHES` batches of `INVOKE_BATCH`, within `budget` (at least
/// 1024 invocations). (ns, invocations timed).
fn time_invokes(h: &mut Handler, io: &mut BenchIo, kind: MessageKind, budget: Duration) -> Result<(f64, u64), String> {
    let data = [0x5au8; SIZE];
    let input = Input::Message { kind, from: client_addr(), data: &data };
    let want = Outcome::Returned(0);
    // Warm-up: the instance's pages, the caches, the branch predictors.
    for _ in 0..10_000 {
        if h.invoke(io, input).outcome != want {
            return Err(format!("{}: an invocation did not return 0", h.name()));
        }
    }
    let start = Instant::now();
    let (mut per, mut total) = (Vec::new(), 0u64);
    for _ in 0..INVOKE_BATCHES {
        peer::stopped()?;
        let (t0, mut n, mut bad) = (Instant::now(), 0u64, 0u64);
        while n < INVOKE_BATCH {
            for _ in 0..1024 {
                bad += u64::from(black_box(h.invoke(io, black_box(input))).outcome != want);
            }
            n += 1024;
            if start.elapsed() >= budget {
                break;
            }
        }
        per.push(t0.elapsed().as_nanos() as f64 / n as f64);
        total += n;
        if bad > 0 {
            return Err(format!("{}: {bad} invocations did not return 0", h.name()));
        }
        if start.elapsed() >= budget {
            break;
        }
    }
    Ok((median(&mut per), total))
}

struct InvokeCost {
    empty_ns: f64,
    echo_ns: f64,
    invocations: u64,
    echo_invocations: u64,
}

fn invoke_cost(budget: Duration) -> Result<InvokeCost, String> {
    let rt = Runtime::new(4)?;
    let mut io = BenchIo::default();
    let mut empty = load(&rt, "empty", &wasm("empty", EMPTY_WAT)?, Limits::default(), &mut io)?;
    let (empty_ns, invocations) = time_invokes(&mut empty, &mut io, MessageKind::Message, budget)?;
    let mut echo = load(&rt, "echo", &wasm("echo", ECHO_WAT)?, Limits::default(), &mut io)?;
    let (echo_ns, echo_invocations) = time_invokes(&mut echo, &mut io, MessageKind::Request, budget)?;
    if io.replies == 0 || io.reply_bytes != io.replies * SIZE as u64 {
        return Err(format!("the echo handler replied {} times with {} bytes in all", io.replies, io.reply_bytes));
    }
    for h in [&empty, &echo] {
        let s = h.stats();
        if s.instances != 1 || s.traps + s.overruns + s.out_of_bounds + s.stack_overflows > 0 {
            return Err(format!("the {} handler faulted while timed: {s:?}", h.name()));
        }
    }
    Ok(InvokeCost { empty_ns, echo_ns, invocations, echo_invocations })
}

/// One compute invocation: (ms, checksum).
fn compute_once(h: &mut Handler, io: &mut BenchIo, iterations: u32, tight: bool) -> Result<(f64, i32), String> {
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&iterations.to_le_bytes());
    msg[4..].copy_from_slice(&u32::from(tight).to_le_bytes());
    let t0 = Instant::now();
    let r = h.invoke(io, Input::Message { kind: MessageKind::Message, from: client_addr(), data: &msg });
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    match r.outcome {
        Outcome::Returned(v) if v >= 0 => Ok((ms, v)),
        o => Err(format!("the compute handler ({}): {o:?}", h.name())),
    }
}

struct EpochCost {
    /// Medians, ms: [with, without], the hashing loop then the tight loop.
    hash: [f64; 2],
    tight: [f64; 2],
    reps: usize,
}

impl EpochCost {
    fn overhead(x: [f64; 2]) -> f64 {
        if x[1] > 0.0 {
            (x[0] - x[1]) / x[1]
        } else {
            0.0
        }
    }
}

fn epoch_cost(budget: Duration) -> Result<EpochCost, String> {
    let with = Runtime::new(2)?;
    let without = Runtime::without_epochs(2)?;
    let code = wasm("compute", COMPUTE_WAT)?;
    // The longest deadline: a slow machine must not turn the loop into an overrun.
    let limits = Limits { deadline: MAX_DEADLINE, ..Limits::default() };
    let mut io = BenchIo::default();
    let mut hw = load(&with, "compute-epochs", &code, limits, &mut io)?;
    let mut hn = load(&without, "compute-no-epochs", &code, limits, &mut io)?;
    let mut out = [[0.0; 2]; 2];
    let mut reps = 0;
    for (k, tight) in [false, true].into_iter().enumerate() {
        // One unmeasured run each (the instance's first touch of its code).
        let (_, sum_w) = compute_once(&mut hw, &mut io, COMPUTE_ITERATIONS, tight)?;
        let (_, sum_n) = compute_once(&mut hn, &mut io, COMPUTE_ITERATIONS, tight)?;
        if sum_w != sum_n {
            return Err(format!("the compute handler's checksums differ: {sum_w} with epochs, {sum_n} without"));
        }
        let (mut w, mut n) = (Vec::new(), Vec::new());
        let start = Instant::now();
        for i in 0..COMPUTE_REPS {
            peer::stopped()?;
            // Interleaved, the order alternating, so drift falls on both.
            let order = if i % 2 == 0 { [true, false] } else { [false, true] };
            for epochs in order {
                let (h, v) = if epochs { (&mut hw, &mut w) } else { (&mut hn, &mut n) };
                let (ms, sum) = compute_once(h, &mut io, COMPUTE_ITERATIONS, tight)?;
                if sum != sum_w {
                    return Err(format!("the compute handler's checksum changed: {sum} against {sum_w}"));
                }
                v.push(ms);
            }
            if start.elapsed() >= budget {
                break;
            }
        }
        reps = reps.max(w.len());
        out[k] = [median(&mut w), median(&mut n)];
    }
    Ok(EpochCost { hash: out[0], tight: out[1], reps })
}

// ================================================================ the engine

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; sched_getaffinity only writes it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid and writable, of the size given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads the set within its size.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// One RPC case of ours: its latency and rate runs.
struct Case {
    lat: MsgRun,
    rate: MsgRun,
    /// The server engine's shard CPU over the rate run, seconds.
    server_cpu_s: Option<f64>,
}

impl Case {
    fn cpu_us_per_call(&self) -> Option<f64> {
        let done = m::num(&self.rate.report, "done");
        self.server_cpu_s.filter(|_| done > 0.0).map(|c| c * 1e6 / done)
    }
}

/// Warm-up, latency and rate runs of `outboard msg` to `to`.
fn case(run: &RunDir, side: &Side, server: &str, c_cpu: Option<usize>, tag: &str, to: &str, a: &HandlersArgs) -> Result<Case, String> {
    let size = SIZE.to_string();
    let calls = |n: u64, outstanding: usize| m::strings(&["--to", to, "--calls", &n.to_string(), "--size", &size, "--outstanding", &outstanding.to_string()]);
    m::msg(run, side, c_cpu, &format!("{tag}-warmup"), &calls(WARMUP.min(a.calls), 1), a.seconds.max(5.0))?;
    let lat = m::msg(run, side, c_cpu, &format!("{tag}-latency"), &calls(a.calls, 1), a.seconds)?;
    let s0 = m::stat(run, server).ok();
    let rate = m::msg(run, side, c_cpu, &format!("{tag}-rate"), &calls(a.calls * RATE_FACTOR, RATE_OUTSTANDING), a.seconds)?;
    let s1 = m::stat(run, server).ok();
    let server_cpu_s = match (s0, s1) {
        (Some(x), Some(y)) => Some(y.shard.cpu_s - x.shard.cpu_s),
        _ => None,
    };
    Ok(Case { lat, rate, server_cpu_s })
}

/// The handler's row in the server engine's `stat`: (invocations, faults, requests answered as failed).
fn handler_counts(s: &Snapshot) -> Option<(u64, u64, u64)> {
    let h = s.messages.as_ref()?.handlers.iter().find(|h| h.info.name == HANDLER_NAME)?;
    let st = h.info.stats;
    Some((st.invocations, st.overruns + st.out_of_bounds + st.stack_overflows + st.traps + st.init_failures, h.failed_answers))
}

/// The board's echo server: a thread of this process attached to the
/// server engine's board, answering every request in place until its
/// engine stops (then `begin_get` fails and the thread ends).
fn board_server(run: &RunDir, engine: &str, cpu: Option<usize>) -> Result<thread::JoinHandle<Result<u64, String>>, String> {
    use outboard_api::{AttachOptions, Board, MessageKind};
    let opts = AttachOptions { run_dir: Some(run.path.clone()), ..Default::default() };
    let engine = engine.to_string();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let t = thread::spawn(move || -> Result<u64, String> {
        m::pin_thread(cpu);
        let attached = Board::attach_with(&engine, &opts).and_then(|b| Ok((b.bind_mailbox(None, Some(BOARD_MAILBOX))?, b)));
        let (mut mb, _board) = match attached {
            Ok(v) => v,
            Err(e) => {
                let _ = ready_tx.send(Err(format!("board server: {e}")));
                return Err(e.to_string());
            }
        };
        let _ = ready_tx.send(Ok(()));
        let mut served = 0;
        loop {
            let Ok(msg) = mb.begin_get() else { return Ok(served) };
            if msg.kind != MessageKind::Request {
                mb.end_get().map_err(|e| e.to_string())?;
                continue;
            }
            let n = msg.data.len();
            // The echo is the request itself, already in the buffer.
            mb.reply_in_place(n).map_err(|e| format!("board server reply: {e}"))?;
            served += 1;
        }
    });
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => Ok(t),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the board server thread did not start within 10 s".into()),
    }
}

struct Ours {
    builtin: Case,
    handler: Case,
    board: Case,
    handler_counts: Option<(u64, u64, u64)>,
    board_served: Option<u64>,
}

fn ours(a: &HandlersArgs, s_cpu: Option<usize>, c_cpu: Option<usize>, b_cpu: Option<usize>) -> Result<Ours, String> {
    let run = RunDir::new("handlers")?;
    let pid = std::process::id();
    let fabric = format!("fabric:bhnd-{pid}");
    let server = format!("bench-hnd-{pid}");
    let module = run.path.join("echo.wasm");
    std::fs::write(&module, wasm("echo", ECHO_WAT)?).map_err(|e| format!("write {}: {e}", module.display()))?;
    let spec = format!("{HANDLER_NAME}={}:mailbox={HANDLER_MAILBOX}", module.display());
    let side = Side::fabric(&fabric);
    let mut engine = m::start_engine_with(&run, &fabric, &server, &format!("{SERVER_ADDR}/24"), &None, s_cpu, &["--handler".into(), spec])?;
    let r = (|| {
        let to = |mb: &str| format!("{SERVER_ADDR}:7373/{mb}");
        let builtin = case(&run, &side, &server, c_cpu, "builtin", &to("echo"), a)?;
        let handler = case(&run, &side, &server, c_cpu, "handler", &to(&HANDLER_MAILBOX.to_string()), a)?;
        let handler_counts = m::stat(&run, &server).ok().as_ref().and_then(handler_counts);
        let srv = board_server(&run, &server, b_cpu)?;
        let board = case(&run, &side, &server, c_cpu, "board", &to(BOARD_MAILBOX), a);
        engine.terminate();
        // The thread sees its engine gone within its board's liveness check.
        let t0 = Instant::now();
        while !srv.is_finished() && t0.elapsed() < Duration::from_secs(3) {
            thread::sleep(Duration::from_millis(10));
        }
        let board_served = if srv.is_finished() { srv.join().ok().and_then(Result::ok) } else { None };
        Ok(Ours { builtin, handler, board: board?, handler_counts, board_served })
    })();
    r.map_err(|e: String| {
        let log = engine.log_text();
        if log.trim().is_empty() {
            e
        } else {
            format!("{e}\nserver engine's log:\n{}", log.trim_end())
        }
    })
}

// ================================================================ the run

fn goal(name: &str, value: f64, max: f64) -> Goal {
    Goal { name: name.into(), value, goal: format!("<= {max}"), met: value <= max }
}

fn run(a: &HandlersArgs) -> Result<HandlersReport, String> {
    let budget = Duration::from_secs_f64(a.seconds);
    let cpus = allowed_cpus();
    let (s_cpu, c_cpu) = (cpus.first().copied(), cpus.get(1).copied());
    let b_cpu = cpus.get(2).copied().or(s_cpu);
    let kp = Pins { server: s_cpu.filter(|_| c_cpu.is_some()), client: c_cpu };
    let (s_cpu, c_cpu) = (kp.server, kp.client);
    let b_cpu = b_cpu.filter(|_| c_cpu.is_some());
    let rate_calls = a.calls * RATE_FACTOR;
    let warmup = WARMUP.min(a.calls);

    // In process first, on the client's CPU, nothing else of ours running.
    let inv = m::on_cpu(c_cpu, || invoke_cost(budget))?;
    let ep = m::on_cpu(c_cpu, || epoch_cost(budget))?;
    peer::stopped()?;

    // The kernel, with no engine running.
    let net = m::KernelNet::loopback();
    let k_lat: Latency = m::on_cpu(c_cpu, || m::udp_latency(a.calls, warmup, budget, kp, false, &net)).map_err(|e| format!("kernel UDP latency: {e}"))?;
    let k_rate: Rate = m::on_cpu(c_cpu, || m::udp_rate(rate_calls, RATE_OUTSTANDING, budget, kp, &net)).map_err(|e| format!("kernel UDP rate: {e}"))?;
    peer::stopped()?;

    let o = ours(a, s_cpu, c_cpu, b_cpu)?;

    let num = |c: &MsgRun, k: &str| m::num(&c.report, k);
    let row = |server: &str, c: &Case| Row {
        server: server.into(),
        p50_us: num(&c.lat, "p50_us"),
        p99_us: num(&c.lat, "p99_us"),
        rate: num(&c.rate, "rate"),
        p50_vs_kernel: m::ratio(Some(num(&c.lat, "p50_us")), Some(k_lat.p50_us)),
        rate_vs_kernel: m::ratio(Some(num(&c.rate, "rate")), Some(k_rate.per_s)),
        calls: num(&c.lat, "done") as u64,
        rate_calls: num(&c.rate, "done") as u64,
    };
    let rows = vec![
        row("handler", &o.handler),
        row("board", &o.board),
        Row {
            server: "kernel".into(),
            p50_us: k_lat.p50_us,
            p99_us: k_lat.p99_us,
            rate: k_rate.per_s,
            p50_vs_kernel: Some(1.0),
            rate_vs_kernel: Some(1.0),
            calls: k_lat.calls,
            rate_calls: k_rate.done,
        },
    ];
    let handler_board_p50 = m::ratio(Some(rows[0].p50_us), Some(rows[1].p50_us));
    let handler_kernel_p50 = rows[0].p50_vs_kernel;
    let epoch_overhead = EpochCost::overhead(ep.hash);
    let epoch_overhead_tight = EpochCost::overhead(ep.tight);
    let mut goals = Vec::new();
    if let Some(r) = handler_board_p50 {
        goals.push(goal("handler p50 / board p50", r, GOAL_HANDLER_BOARD));
    }
    goals.push(goal("invoke_ns", inv.empty_ns, GOAL_INVOKE_NS));
    goals.push(goal("epoch_overhead", epoch_overhead, GOAL_EPOCH));

    let mut notes = Vec::new();
    notes.push(format!(
        "ours: `outboard engine --messages --handler {HANDLER_NAME}=echo.wasm:mailbox={HANDLER_MAILBOX}` (server, {SERVER_ADDR}) and one `outboard msg` client engine per case (10.0.0.2) on the fabric, {SIZE}-byte calls; latency: {} calls with 1 outstanding after {warmup} unmeasured, timed per call by the client engine's clock; rate: {} calls with {RATE_OUTSTANDING} outstanding over the client job's elapsed time",
        a.calls, rate_calls,
    ));
    notes.push(format!(
        "handler: the echo handler (WebAssembly text compiled in the bench: `input_read` then `reply`) runs in the server engine's message service turn on shard 0; board: a thread of this process answers `{BOARD_MAILBOX}` through the server engine's board in place (blocking mode); kernel: UDP request-response on 127.0.0.1 ({} calls, {} re-sent; rate {} calls in {:.3} s, {} re-sent)",
        k_lat.calls, k_lat.resent, k_rate.done, k_rate.seconds, k_rate.resent,
    ));
    let b = &o.builtin;
    let builtin_echo = Reference { p50_us: num(&b.lat, "p50_us"), p99_us: num(&b.lat, "p99_us"), rate: num(&b.rate, "rate") };
    notes.push(format!(
        "reference, the engine's built-in `echo` mailbox (native code in the service, the same calls): p50 {:.1} us, p99 {:.1} us, {:.0} calls/s; the handler adds {:+.2} us at p50",
        builtin_echo.p50_us,
        builtin_echo.p99_us,
        builtin_echo.rate,
        rows[0].p50_us - builtin_echo.p50_us,
    ));
    let cpu = [o.builtin.cpu_us_per_call(), o.handler.cpu_us_per_call(), o.board.cpu_us_per_call()];
    let show = |x: Option<f64>| x.map_or("unknown".to_string(), |v| format!("{v:.2} us"));
    notes.push(format!(
        "server engine CPU per call in the rate cases: built-in echo {}, handler {}, board {} (the engine only; the board's application thread is not counted)",
        show(cpu[0]),
        show(cpu[1]),
        show(cpu[2]),
    ));
    match o.handler_counts {
        Some((inv, faults, failed)) => notes.push(format!("the handler ran {inv} times on the engine, {faults} faults, {failed} requests answered as failed")),
        None => notes.push("the handler's counters were not in the server engine's stat".into()),
    }
    if let Some(n) = o.board_served {
        notes.push(format!("the board's server thread answered {n} requests"));
    }
    notes.push(format!(
        "invoke_ns: the empty handler in this process (`Handler::invoke` on a 64-byte message, on a runtime with epochs), {} invocations in batches of up to {INVOKE_BATCH}, the median batch; the echo handler on a 64-byte request (`input_read`, `reply`): {:.1} ns per invocation over {} invocations",
        inv.invocations, inv.echo_ns, inv.echo_invocations,
    ));
    notes.push(format!(
        "epoch_overhead: a compute handler of {COMPUTE_ITERATIONS} iterations, medians of {} invocations each: hashing loop (xor, 64-bit multiply) {:.3} ms with epoch checks, {:.3} ms without ({:+.1}%); one-add loop {:.3} ms with, {:.3} ms without ({:+.1}%)",
        ep.reps,
        ep.hash[0],
        ep.hash[1],
        epoch_overhead * 100.0,
        ep.tight[0],
        ep.tight[1],
        epoch_overhead_tight * 100.0,
    ));
    notes.push(match (s_cpu, c_cpu) {
        (Some(s), Some(c)) => format!(
            "pinned: the server engine and the kernel's server thread on CPU {s}, the client engines, the kernel's client thread and the in-process measurements on CPU {c}, the board's server thread on CPU {}",
            b_cpu.map_or("-".into(), |b| b.to_string()),
        ),
        _ => "not pinned: this process may run on one CPU only".to_string(),
    });
    for (what, c) in [("built-in echo", &o.builtin), ("handler", &o.handler), ("board", &o.board)] {
        for (phase, r) in [("latency", &c.lat), ("rate", &c.rate)] {
            if r.cut_short {
                notes.push(format!("{what}, {phase}: cut short by --seconds {}: reported from what was done", a.seconds));
            }
        }
    }
    let mach = machine();
    Ok(HandlersReport {
        rows,
        handler_board_p50,
        handler_kernel_p50,
        invoke_ns: inv.empty_ns,
        echo_invoke_ns: inv.echo_ns,
        invocations: inv.invocations,
        epoch_overhead,
        epoch_overhead_tight,
        compute_ms: ep.hash,
        compute_tight_ms: ep.tight,
        builtin_echo,
        server_cpu_us_per_call: cpu,
        goals,
        machine: format!("{} x {}, Linux {}", mach.nproc, mach.cpu_model, mach.kernel),
        notes,
    })
}

// ================================================================ the table

fn show(x: Option<f64>, prec: usize) -> String {
    x.map_or("-".into(), |v| format!("{v:.prec$}"))
}

pub fn print_table(a: &HandlersArgs, r: &HandlersReport) {
    println!(
        "outboard bench handlers --calls {} --seconds {}: a {SIZE}-byte echo RPC answered by a WebAssembly handler on the engine, by an application through its board, and by the kernel",
        a.calls, a.seconds
    );
    println!("machine: {}", r.machine);
    println!();
    println!("  {:<8} {:>8} {:>8} {:>12} {:>9} {:>10}", "server", "p50_us", "p99_us", "rate", "p50/kern", "rate/kern");
    for w in &r.rows {
        println!(
            "  {:<8} {:>8.1} {:>8.1} {:>10.0}/s {:>9} {:>10}",
            w.server,
            w.p50_us,
            w.p99_us,
            w.rate,
            show(w.p50_vs_kernel, 2),
            show(w.rate_vs_kernel, 2)
        );
    }
    println!();
    println!("handler p50 / board p50:  {}", show(r.handler_board_p50, 2));
    println!("handler p50 / kernel p50: {}", show(r.handler_kernel_p50, 2));
    println!("invoke_ns:       {:.1} ns (empty handler; echo handler {:.1} ns)", r.invoke_ns, r.echo_invoke_ns);
    println!(
        "epoch_overhead:  {:+.3} (hashing loop {:.3} ms with checks, {:.3} ms without; one-add loop {:+.3})",
        r.epoch_overhead, r.compute_ms[0], r.compute_ms[1], r.epoch_overhead_tight
    );
    println!();
    for g in &r.goals {
        println!("goal {} {}: {:.3}, {}", g.name, g.goal, g.value, if g.met { "met" } else { "NOT met" });
    }
    for n in &r.notes {
        println!("- {n}");
    }
}
