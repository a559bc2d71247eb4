//! The application processes of `outboard bench latency` and `outboard bench
//! throughput`, and how those benches run them.
//!
//! **The peer** (`outboard bench-peer`, a hidden subcommand) is one
//! application process. The same code runs over two transports:
//!
//! - `--api outboard`: attaches to a daemon engine with
//!   `Board::attach_with(--engine, mode)` and moves its bytes with the
//!   zero-copy calls only: it writes each message or each write's bytes in
//!   place into the board (`begin_put`/`end_put`) and reads them in place
//!   (`begin_get`/`end_get`), so the only copies of payload are the engines'
//!   (one each way). The copying `send`/`recv` are never called; the board's
//!   own counter of API copies (`Board::copy_counters`) is reported to prove it.
//! - `--api kernel`: `std::net` TCP on 127.0.0.1. Blocking mode uses
//!   blocking sockets (with a 250 ms timeout so no call can hang); polling
//!   mode makes the socket non-blocking and spins on `EAGAIN`, the kernel's
//!   equivalent of the API's `Mode::Polling`.
//!
//! Roles: `echo` (listens, writes back what it reads) and `ping` (connects,
//! `--warmup` unmeasured then up to `--count` measured request/response
//! round trips of `--size` bytes, bounded by `--seconds`; p50/p99 computed
//! here) for latency; `sink` (listens, consumes until end of stream, at most
//! `--size` bytes per read) and `source` (connects, `--size`-byte writes until
//! `--bytes` or `--seconds`, then FIN and waits for the sink's FIN) for
//! throughput. Servers print `{"ready":true,"port":P}` once they listen;
//! every peer ends with one JSON line `{"ok":true,...}` or
//! `{"ok":false,"error":...}` on stdout (exit 0 or 1). CPU time is the
//! process's own (`getrusage(RUSAGE_SELF)`, user and system) over the
//! measured phase only: from accept/connect to the end of the transfer.
//!
//! The bytes a source generates and a sink consumes (`--touch`): the byte at
//! stream offset `o` is `(o >> 12) as u8`. `stamp` (default) writes and
//! checks only the bytes at offsets that are multiples of 4096 (ordering is
//! verified at a cost of one store/load per 4 KiB, like ttcp which touches
//! nothing); `all` writes and checks every byte; `none` touches nothing.
//! Both transports do exactly the same work per byte.
//!
//! **The harness** (the rest of this file) is what the benches use in the
//! parent: a private run directory (`OUTBOARD_RUN_DIR`, so the engines'
//! control sockets and boards are this run's only), guarded child processes
//! (SIGTERM, a grace period, SIGKILL, reaped, on every path out: errors,
//! panics unwinding, and Ctrl-C, which sets a flag the waits look at), the
//! pair of engines on `fabric:bench-PID`, and `run_pair`, which starts a
//! server peer, waits for it to listen, starts the client peer and collects
//! both reports within a deadline.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::placement;
use clap::{Args, ValueEnum};
use outboard_api::{AttachOptions, Board, Error as ApiError, Mode, Stream};
use outboard_engine::stat::Snapshot;
use outboard_lab::sys;
use serde::Serialize;
use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- the peer's arguments

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// Outboard's native API through a daemon engine.
    Outboard,
    /// Linux TCP (std::net) on 127.0.0.1.
    Kernel,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Outboard => "outboard",
            Api::Kernel => "kernel",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    /// Spin briefly, then sleep (the API's `Mode::Blocking`; blocking sockets).
    Blocking,
    /// Spin, never sleep (the API's `Mode::Polling`; non-blocking sockets spun on EAGAIN).
    Polling,
}

impl WaitMode {
    pub fn name(self) -> &'static str {
        match self {
            WaitMode::Blocking => "blocking",
            WaitMode::Polling => "polling",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Latency server: writes back what it reads.
    Echo,
    /// Latency client: request/response round trips, timed.
    Ping,
    /// Throughput receiver: consumes until end of stream.
    Sink,
    /// Throughput sender: fixed-size writes, then FIN.
    Source,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Touch {
    /// Generate and check nothing.
    None,
    /// One byte per 4 KiB of stream (ordering check at almost no cost).
    Stamp,
    /// Every byte.
    All,
}

impl Touch {
    pub fn name(self) -> &'static str {
        match self {
            Touch::None => "none",
            Touch::Stamp => "stamp",
            Touch::All => "all",
        }
    }
}

#[derive(Args, Debug)]
pub struct PeerArgs {
    #[arg(long, value_enum)]
    pub role: Role,
    #[arg(long, value_enum)]
    pub api: Api,
    #[arg(long, value_enum, default_value = "blocking")]
    pub mode: WaitMode,
    /// `--api outboard`: the engine to attach to (its --name).
    #[arg(long)]
    pub engine: Option<String>,
    /// `--api outboard`: instead of attaching to a daemon, run an inline
    /// engine in this process's own thread on LINK with ADDR (e.g.
    /// `fabric:bench-1,10.0.0.1/24`): its turns run whenever the peer waits.
    #[arg(long, value_name = "LINK,ADDR/N")]
    pub inline: Option<String>,
    /// Servers: the port to listen on (kernel: on 127.0.0.1, 0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Clients: the server's address.
    #[arg(long)]
    pub connect: Option<SocketAddrV4>,
    /// Bytes per request (ping) or per write/read (source/sink).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Ping: measured round trips (at most).
    #[arg(long, default_value_t = 20_000)]
    pub count: u64,
    /// Ping: unmeasured round trips first.
    #[arg(long, default_value_t = 1_000)]
    pub warmup: u64,
    /// Source: bytes to send (rounded down to whole writes, at least one).
    #[arg(long, default_value_t = 1 << 20)]
    pub bytes: u64,
    /// Ping and source: stop measuring after this many seconds.
    #[arg(long, default_value = "5", value_parser = crate::args::parse_non_negative)]
    pub seconds: f64,
    /// Source and sink: what is generated and checked.
    #[arg(long, value_enum, default_value = "stamp")]
    pub touch: Touch,
    /// Ping: mark the measured requests for the hop trace (`outboard_trace`):
    /// bytes 8..16 carry its magic and bytes 0..8 a tag unique to this
    /// process (its pid above a round-trip count). Needs --size ≥ 16.
    #[arg(long, hide = true)]
    pub mark_hops: bool,
    /// Run on this CPU only (`bench latency --pin`): set before the peer
    /// starts any thread, so every thread of it (an inline engine's too)
    /// stays there.
    #[arg(long, hide = true)]
    pub cpu: Option<usize>,
}

/// `outboard bench-peer`: runs one role and prints its report line.
pub fn main(a: &PeerArgs) -> ExitCode {
    let pinned = match a.cpu {
        Some(c) => outboard_engine::cpu::pin_current_thread(c).map_err(|e| format!("--cpu {c}: {e}")),
        None => Ok(()),
    };
    let r = pinned.and_then(|()| match a.api {
        Api::Kernel => run_kernel(a),
        Api::Outboard => run_outboard(a),
    });
    match r {
        Ok(mut v) => {
            v["ok"] = Value::Bool(true);
            // The hop trace's records (when this process traces) are on disk
            // before the report says the run is over.
            if let Err(e) = outboard_trace::flush() {
                v["trace_error"] = json!(e.to_string());
            }
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{}", json!({"ok": false, "error": e}));
            ExitCode::from(1)
        }
    }
}

/// No progress for this long fails a kernel socket call (the API's calls are
/// bounded by the engine: a dead peer or engine gives an error; the parent's
/// deadline covers the rest).
const STALL: Duration = Duration::from_secs(30);
const IO_POLL: Duration = Duration::from_millis(250);

fn ready(port: u16) {
    println!("{}", json!({"ready": true, "port": port}));
}

// ---------------------------------------------------------------- transports

/// One connected stream, either transport.
trait Conn {
    /// Writes exactly `len` bytes, generated in place by `fill` on consecutive pieces.
    fn put(&mut self, len: usize, fill: &mut impl FnMut(&mut [u8])) -> Result<(), String>;
    /// Waits for data and hands at most `max` bytes, in one piece, to
    /// `take`; returns how many (0: end of stream).
    fn get(
        &mut self,
        max: usize,
        take: &mut impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<usize, String>;
    /// FIN after what is queued.
    fn shutdown(&mut self) -> Result<(), String>;
    /// Bytes the API copied for us (send_copied, recv_copied); kernel: none known.
    fn api_copies(&self) -> Option<(u64, u64)>;
    /// Ours: the board's blocking waits and the sleeps among them.
    fn api_waits(&self) -> Option<(u64, u64)> {
        None
    }
}

struct KernelConn {
    s: TcpStream,
    polling: bool,
    buf: Vec<u8>,
}

impl KernelConn {
    fn new(s: TcpStream, mode: WaitMode, nodelay: bool) -> Result<KernelConn, String> {
        let polling = mode == WaitMode::Polling;
        if nodelay {
            s.set_nodelay(true)
                .map_err(|e| format!("TCP_NODELAY: {e}"))?;
        }
        if polling {
            s.set_nonblocking(true)
                .map_err(|e| format!("O_NONBLOCK: {e}"))?;
        } else {
            s.set_read_timeout(Some(IO_POLL))
                .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
            s.set_write_timeout(Some(IO_POLL))
                .map_err(|e| format!("SO_SNDTIMEO: {e}"))?;
        }
        Ok(KernelConn {
            s,
            polling,
            buf: Vec::new(),
        })
    }
}

/// After a failed socket call: go on (nothing yet, still within the stall
/// limit) or give up.
/// `spinning`: the call returned at once (non-blocking); read the clock only
/// every 1024th time (it costs ~20 ns). Otherwise the call waited `IO_POLL`.
fn retry(
    e: io::Error,
    since: Instant,
    spins: &mut u32,
    spinning: bool,
    what: &str,
) -> Result<(), String> {
    match e.kind() {
        io::ErrorKind::Interrupted => Ok(()),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            *spins = spins.wrapping_add(1);
            if (!spinning || spins.is_multiple_of(1024)) && since.elapsed() > STALL {
                return Err(format!("{what}: no progress in {} s", STALL.as_secs()));
            }
            std::hint::spin_loop();
            Ok(())
        }
        _ => Err(format!("{what}: {e}")),
    }
}

impl Conn for KernelConn {
    fn put(&mut self, len: usize, fill: &mut impl FnMut(&mut [u8])) -> Result<(), String> {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        fill(&mut self.buf[..len]);
        let mut off = 0;
        let mut since = Instant::now();
        let mut spins = 0u32;
        while off < len {
            match self.s.write(&self.buf[off..len]) {
                Ok(0) => return Err("write: the socket took nothing".into()),
                Ok(n) => {
                    off += n;
                    if off < len {
                        since = Instant::now();
                    }
                }
                Err(e) => retry(e, since, &mut spins, self.polling, "write")?,
            }
        }
        Ok(())
    }

    fn get(
        &mut self,
        max: usize,
        take: &mut impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<usize, String> {
        let max = max.max(1);
        if self.buf.len() < max {
            self.buf.resize(max, 0);
        }
        let since = Instant::now();
        let mut spins = 0u32;
        loop {
            match self.s.read(&mut self.buf[..max]) {
                Ok(n) => {
                    if n > 0 {
                        take(&self.buf[..n])?;
                    }
                    return Ok(n);
                }
                Err(e) => retry(e, since, &mut spins, self.polling, "read")?,
            }
        }
    }

    fn shutdown(&mut self) -> Result<(), String> {
        self.s
            .shutdown(Shutdown::Write)
            .map_err(|e| format!("shutdown: {e}"))
    }

    fn api_copies(&self) -> Option<(u64, u64)> {
        None
    }
}

/// A stream through an engine, driven by the zero-copy calls only.
struct ObConn {
    // Declared first: dropped (closed) before the board detaches.
    s: Stream,
    board: Board,
}

fn api_err(what: &str, e: ApiError) -> String {
    format!("{what}: {e}")
}

impl Conn for ObConn {
    fn put(&mut self, len: usize, fill: &mut impl FnMut(&mut [u8])) -> Result<(), String> {
        let mut left = len;
        let since = Instant::now();
        let mut spins = 0u32;
        while left > 0 {
            let room = match self.s.begin_put() {
                Ok(r) => r,
                Err(ApiError::WouldBlock) => {
                    retry(
                        io::ErrorKind::WouldBlock.into(),
                        since,
                        &mut spins,
                        true,
                        "begin_put",
                    )?;
                    continue;
                }
                Err(e) => return Err(api_err("begin_put", e)),
            };
            let n = room.len().min(left);
            if n == 0 {
                return Err("begin_put gave no room".into());
            }
            fill(&mut room[..n]);
            self.s.end_put(n).map_err(|e| api_err("end_put", e))?;
            left -= n;
        }
        Ok(())
    }

    fn get(
        &mut self,
        max: usize,
        take: &mut impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<usize, String> {
        let since = Instant::now();
        let mut spins = 0u32;
        loop {
            let data = match self.s.begin_get() {
                Ok(d) => d,
                Err(ApiError::WouldBlock) => {
                    retry(
                        io::ErrorKind::WouldBlock.into(),
                        since,
                        &mut spins,
                        true,
                        "begin_get",
                    )?;
                    continue;
                }
                Err(e) => return Err(api_err("begin_get", e)),
            };
            if data.is_empty() {
                return Ok(0);
            }
            let n = data.len().min(max.max(1));
            take(&data[..n])?;
            self.s.end_get(n).map_err(|e| api_err("end_get", e))?;
            return Ok(n);
        }
    }

    fn shutdown(&mut self) -> Result<(), String> {
        self.s.shutdown().map_err(|e| api_err("shutdown", e))
    }

    fn api_copies(&self) -> Option<(u64, u64)> {
        let c = self.board.copy_counters();
        Some((c.send_copied, c.recv_copied))
    }

    fn api_waits(&self) -> Option<(u64, u64)> {
        let w = self.board.wait_counters();
        Some((w.waits, w.sleeps))
    }
}

// ---------------------------------------------------------------- setting up

fn is_server(r: Role) -> bool {
    matches!(r, Role::Echo | Role::Sink)
}

fn run_kernel(a: &PeerArgs) -> Result<Value, String> {
    let nodelay = matches!(a.role, Role::Echo | Role::Ping);
    let s = if is_server(a.role) {
        let l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, a.port))
            .map_err(|e| format!("bind 127.0.0.1:{}: {e}", a.port))?;
        let port = l
            .local_addr()
            .map_err(|e| format!("local_addr: {e}"))?
            .port();
        l.set_nonblocking(true)
            .map_err(|e| format!("O_NONBLOCK: {e}"))?;
        ready(port);
        let t0 = Instant::now();
        loop {
            match l.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if t0.elapsed() > STALL {
                        return Err(format!("no connection in {} s", STALL.as_secs()));
                    }
                    thread::sleep(Duration::from_micros(200));
                }
                Err(e) => return Err(format!("accept: {e}")),
            }
        }
    } else {
        let to = a.connect.ok_or("--connect is required")?;
        let s = TcpStream::connect_timeout(&to.into(), Duration::from_secs(5))
            .map_err(|e| format!("connect {to}: {e}"))?;
        s.set_nonblocking(false)
            .map_err(|e| format!("blocking: {e}"))?;
        s
    };
    let mut c = KernelConn::new(s, a.mode, nodelay)?;
    run_role(&mut c, a)
}

fn run_outboard(a: &PeerArgs) -> Result<Value, String> {
    let mode = match a.mode {
        WaitMode::Blocking => Mode::Blocking,
        WaitMode::Polling => Mode::Polling,
    };
    let opts = AttachOptions {
        mode,
        ..AttachOptions::default()
    };
    // Kept alive for the board's whole life (it runs in this thread).
    let mut _inline = None;
    let board = if let Some(spec) = a.inline.as_deref() {
        let (link, addr) = spec.split_once(',').ok_or("--inline takes LINK,ADDR/N")?;
        let (ip, prefix) = addr.split_once('/').ok_or("--inline address needs /N")?;
        let link: outboard_engine::link::LinkSpec = link.parse().map_err(|e| format!("--inline link: {e}"))?;
        let ip: Ipv4Addr = ip.parse().map_err(|e| format!("--inline address: {e}"))?;
        let prefix: u8 = prefix.parse().map_err(|e| format!("--inline prefix: {e}"))?;
        let mut set = outboard_engine::engine::EngineSettings::new(&format!("inline-{}", std::process::id()), link, ip, prefix);
        set.control = false;
        set.services = Vec::new();
        let e = outboard_embedded::InlineEngine::start(set).map_err(|e| api_err("start the inline engine", e))?;
        let b = e.attach(&opts).map_err(|e| api_err("attach to the inline engine", e))?;
        _inline = Some(e);
        b
    } else {
        let name = a
            .engine
            .as_deref()
            .ok_or("--engine NAME (or --inline) is required with --api outboard")?;
        Board::attach_with(name, &opts).map_err(|e| api_err(&format!("attach to {name}"), e))?
    };
    let mut s = if is_server(a.role) {
        if a.port == 0 {
            return Err("--port is required with --api outboard".into());
        }
        let mut l = board
            .listen(a.port, 8)
            .map_err(|e| api_err(&format!("listen on {}", a.port), e))?;
        ready(a.port);
        l.accept().map_err(|e| api_err("accept", e))?
    } else {
        let to = a.connect.ok_or("--connect is required")?;
        board
            .connect(to)
            .map_err(|e| api_err(&format!("connect {to}"), e))?
    };
    if matches!(a.role, Role::Echo | Role::Ping) {
        s.set_nodelay(true).map_err(|e| api_err("set_nodelay", e))?;
    }
    let mut c = ObConn { s, board };
    run_role(&mut c, a)
}

fn run_role<C: Conn>(c: &mut C, a: &PeerArgs) -> Result<Value, String> {
    let mut v = match a.role {
        Role::Echo => echo(c)?,
        Role::Ping => ping(c, a)?,
        Role::Sink => sink(c, a)?,
        Role::Source => source(c, a)?,
    };
    if let Some((s, r)) = c.api_copies() {
        v["api_send_copied"] = json!(s);
        v["api_recv_copied"] = json!(r);
    }
    if let Some((w, s)) = c.api_waits() {
        v["api_waits"] = json!(w);
        v["api_sleeps"] = json!(s);
    }
    Ok(v)
}

// ---------------------------------------------------------------- CPU time

/// This process's (user, system) CPU seconds so far, all threads.
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; RUSAGE_SELF needs nothing else.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

struct CpuMark {
    user: f64,
    sys: f64,
    migrations: Option<u64>,
    /// How often [`CpuMark::sample`] found this thread on each CPU.
    seen: Vec<u32>,
}

impl CpuMark {
    fn now() -> CpuMark {
        let (user, sys) = cpu_times();
        CpuMark { user, sys, migrations: placement::migrations(), seen: Vec::new() }
    }
    /// Notes the CPU this thread is on (a vDSO call: call it every few
    /// dozen KiB moved, not every byte).
    fn sample(&mut self) {
        if let Some(c) = placement::current_cpu().filter(|&c| c < 4096) {
            if self.seen.len() <= c {
                self.seen.resize(c + 1, 0);
            }
            self.seen[c] += 1;
        }
    }
    /// {"cpu_user_s", "cpu_sys_s", "cpu_s"} since this mark, the CPU this
    /// thread was seen on most ("cpu": by `sample`, else the one it is on
    /// now) and how often it moved since ("migrations").
    fn since(&self, v: &mut Value) {
        let (u, s) = cpu_times();
        let (du, ds) = ((u - self.user).max(0.0), (s - self.sys).max(0.0));
        v["cpu_user_s"] = json!(du);
        v["cpu_sys_s"] = json!(ds);
        v["cpu_s"] = json!(du + ds);
        let most = self.seen.iter().enumerate().filter(|(_, n)| **n > 0).max_by_key(|(_, n)| **n).map(|(c, _)| c);
        v["cpu"] = json!(most.or_else(placement::current_cpu));
        v["migrations"] = json!(placement::migrations().zip(self.migrations).map(|(n, m)| n.saturating_sub(m)));
    }
}

// ---------------------------------------------------------------- latency roles

/// Writes back everything until end of stream, then FIN.
fn echo<C: Conn>(c: &mut C) -> Result<Value, String> {
    let mut tmp = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    let cpu = CpuMark::now();
    loop {
        let k = c.get(tmp.len(), &mut |d: &[u8]| {
            tmp[..d.len()].copy_from_slice(d);
            Ok(())
        })?;
        if k == 0 {
            break;
        }
        let mut off = 0;
        c.put(k, &mut |b: &mut [u8]| {
            b.copy_from_slice(&tmp[off..off + b.len()]);
            off += b.len();
        })?;
        total += k as u64;
    }
    let _ = c.shutdown();
    let mut v = json!({"bytes": total});
    cpu.since(&mut v);
    Ok(v)
}

/// One request out, the same bytes back (checked piece by piece).
fn round_trip<C: Conn>(c: &mut C, req: &[u8]) -> Result<(), String> {
    let mut off = 0;
    c.put(req.len(), &mut |b: &mut [u8]| {
        b.copy_from_slice(&req[off..off + b.len()]);
        off += b.len();
    })?;
    let mut got = 0;
    while got < req.len() {
        let want = &req[got..];
        let n = c.get(want.len(), &mut |d: &[u8]| {
            if d == &want[..d.len()] {
                Ok(())
            } else {
                Err("the response differs from the request".into())
            }
        })?;
        if n == 0 {
            return Err(format!(
                "the echo closed after {got} of {} bytes",
                req.len()
            ));
        }
        got += n;
    }
    Ok(())
}

/// Percentile `p` (0..1) of sorted nanosecond samples, in microseconds (nearest rank).
pub fn percentile_us(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let n = sorted.len();
    let rank = ((n as f64 * p).ceil() as usize).clamp(1, n);
    sorted[rank - 1] as f64 / 1e3
}

fn ping<C: Conn>(c: &mut C, a: &PeerArgs) -> Result<Value, String> {
    let size = a.size.max(8);
    let mut req: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let budget = Duration::from_secs_f64(a.seconds.max(0.001));
    let t_warm = Instant::now();
    let mut warm = 0u64;
    // Warm-up: not measured (ARP, first-use costs, the engines' caches); bounded by the same time.
    while warm < a.warmup && t_warm.elapsed() < budget {
        req[..8].copy_from_slice(&warm.to_le_bytes());
        round_trip(c, &req).map_err(|e| format!("warm-up round trip {warm}: {e}"))?;
        warm += 1;
    }
    let cap = a.count.min(50_000_000) as usize;
    let mut samples: Vec<u64> = Vec::with_capacity(cap.min(1 << 20));
    let cpu = CpuMark::now();
    let t0 = Instant::now();
    let mark = a.mark_hops && size >= 16;
    if mark {
        req[8..16].copy_from_slice(&outboard_trace::MAGIC);
    }
    let tag_base = if mark { u64::from(std::process::id()) << 32 } else { 0 };
    while samples.len() < cap {
        req[..8].copy_from_slice(&(tag_base + warm + samples.len() as u64).to_le_bytes());
        let t = Instant::now();
        round_trip(c, &req).map_err(|e| format!("round trip {}: {e}", samples.len()))?;
        let end = Instant::now();
        samples.push(end.duration_since(t).as_nanos() as u64);
        if end.duration_since(t0) >= budget {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let mut v = json!({});
    cpu.since(&mut v);
    let _ = c.shutdown();
    // Wait for the echo's FIN (bounded: an error or reset ends it too).
    for _ in 0..1024 {
        match c.get(4096, &mut |_: &[u8]| Ok(())) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    if samples.is_empty() {
        return Err("no round trip measured".into());
    }
    let n = samples.len();
    let mean = samples.iter().sum::<u64>() as f64 / n as f64 / 1e3;
    samples.sort_unstable();
    v["size"] = json!(size);
    v["warmup"] = json!(warm);
    v["round_trips"] = json!(n);
    v["seconds"] = json!(secs);
    v["mean_us"] = json!(mean);
    v["min_us"] = json!(samples[0] as f64 / 1e3);
    v["p50_us"] = json!(percentile_us(&samples, 0.50));
    v["p90_us"] = json!(percentile_us(&samples, 0.90));
    v["p99_us"] = json!(percentile_us(&samples, 0.99));
    v["max_us"] = json!(samples[n - 1] as f64 / 1e3);
    Ok(v)
}

// ---------------------------------------------------------------- throughput roles

/// The pattern byte at stream offset `o`.
fn pattern(o: u64) -> u8 {
    (o >> 12) as u8
}

/// Generates `b` (the bytes at stream offsets `off..`) in place.
fn generate(touch: Touch, off: u64, b: &mut [u8]) {
    match touch {
        Touch::None => {}
        Touch::Stamp => {
            let mut k = (off + 4095) & !4095;
            let end = off + b.len() as u64;
            while k < end {
                b[(k - off) as usize] = pattern(k);
                k += 4096;
            }
        }
        Touch::All => {
            let mut i = 0usize;
            while i < b.len() {
                let o = off + i as u64;
                let seg = ((4096 - (o & 4095)) as usize).min(b.len() - i);
                b[i..i + seg].fill(pattern(o));
                i += seg;
            }
        }
    }
}

/// Checks `d` (the bytes at stream offsets `off..`) in place.
fn check(touch: Touch, off: u64, d: &[u8]) -> Result<(), String> {
    let bad = |o: u64, got: u8| {
        Err(format!(
            "byte {o} of the stream is {got}, expected {}",
            pattern(o)
        ))
    };
    match touch {
        Touch::None => Ok(()),
        Touch::Stamp => {
            let mut k = (off + 4095) & !4095;
            let end = off + d.len() as u64;
            while k < end {
                let got = d[(k - off) as usize];
                if got != pattern(k) {
                    return bad(k, got);
                }
                k += 4096;
            }
            Ok(())
        }
        Touch::All => {
            let mut i = 0usize;
            while i < d.len() {
                let o = off + i as u64;
                let seg = ((4096 - (o & 4095)) as usize).min(d.len() - i);
                let want = pattern(o);
                if let Some(j) = d[i..i + seg].iter().position(|&x| x != want) {
                    return bad(o + j as u64, d[i + j]);
                }
                i += seg;
            }
            Ok(())
        }
    }
}

/// Consumes at most `--size` bytes per read until end of stream; the
/// measured phase runs from the accept to the end of stream.
fn sink<C: Conn>(c: &mut C, a: &PeerArgs) -> Result<Value, String> {
    let size = a.size.max(1);
    let touch = a.touch;
    // Note the CPU about every 64 KiB read.
    let every = (65_536 / size as u64).max(1);
    let mut cpu = CpuMark::now();
    let t0 = Instant::now();
    let mut off = 0u64;
    let mut reads = 0u64;
    loop {
        let n = c
            .get(size, &mut |d: &[u8]| check(touch, off, d))
            .map_err(|e| format!("{e} (after {off} bytes)"))?;
        if n == 0 {
            break;
        }
        off += n as u64;
        reads += 1;
        if reads.is_multiple_of(every) {
            cpu.sample();
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let mut v = json!({"bytes": off, "reads": reads, "seconds": secs});
    cpu.since(&mut v);
    let _ = c.shutdown();
    Ok(v)
}

/// `--size`-byte writes generated in place until `--bytes` or `--seconds`,
/// then FIN; the measured phase ends at the FIN (the wait for the sink's
/// FIN that follows keeps this process, and so its board, alive until the
/// sink has every byte).
fn source<C: Conn>(c: &mut C, a: &PeerArgs) -> Result<Value, String> {
    let size = a.size.max(1);
    let touch = a.touch;
    let writes = (a.bytes / size as u64).max(1);
    let budget = Duration::from_secs_f64(a.seconds.max(0.001));
    // Look at the clock and note the CPU about every 64 KiB written.
    let every = (65_536 / size as u64).max(1);
    let mut cpu = CpuMark::now();
    let t0 = Instant::now();
    let mut off = 0u64;
    let mut done = 0u64;
    while done < writes {
        let mut o = off;
        c.put(size, &mut |b: &mut [u8]| {
            generate(touch, o, b);
            o += b.len() as u64;
        })
        .map_err(|e| format!("{e} (after {off} bytes)"))?;
        off += size as u64;
        done += 1;
        if done.is_multiple_of(every) {
            cpu.sample();
            if t0.elapsed() >= budget {
                break;
            }
        }
    }
    c.shutdown()?;
    let secs = t0.elapsed().as_secs_f64();
    let mut v = json!({"bytes": off, "writes": done, "seconds": secs});
    cpu.since(&mut v);
    // The sink's FIN (or a reset once it is gone) ends the wait.
    for _ in 0..1024 {
        match c.get(4096, &mut |_: &[u8]| Ok(())) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    Ok(v)
}

// ================================================================ the harness (parent side)

/// Nothing more to do: the user pressed Ctrl-C (or SIGTERM/SIGHUP came).
pub fn stopped() -> Result<(), String> {
    if sys::stop_requested() {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// A private `OUTBOARD_RUN_DIR` (control sockets, logs), removed on drop.
pub struct RunDir {
    pub path: PathBuf,
    /// Every process spawned here traces hops (`outboard_trace`) into
    /// `path/LOG_NAME.hops.PID`.
    pub trace_hops: bool,
}

impl RunDir {
    pub fn new(tag: &str) -> Result<RunDir, String> {
        let path =
            std::env::temp_dir().join(format!("outboard-bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
        Ok(RunDir { path, trace_hops: false })
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A child process that is stopped and reaped when dropped.
pub struct Proc {
    child: Child,
    what: String,
    log: PathBuf,
    lines: Option<mpsc::Receiver<String>>,
    grace: Duration,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Starts this executable with `args`, stderr (and stdout unless
    /// `capture`) to `run/NAME.log`; with `capture`, stdout lines come
    /// through `next_json`.
    pub fn spawn(
        run: &RunDir,
        log_name: &str,
        what: &str,
        args: &[String],
        capture: bool,
        grace: Duration,
    ) -> Result<Proc, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("find the outboard executable: {e}"))?;
        let log = run.path.join(format!("{log_name}.log"));
        let logf =
            std::fs::File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let logf2 = logf.try_clone().map_err(|e| format!("dup log: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .env("OUTBOARD_RUN_DIR", &run.path)
            .stdin(Stdio::null())
            .stderr(logf2);
        if run.trace_hops {
            cmd.env(outboard_trace::ENV, run.path.join(format!("{log_name}.hops")));
        }
        if capture {
            cmd.stdout(Stdio::piped());
        } else {
            cmd.stdout(logf);
        }
        let mut child = cmd.spawn().map_err(|e| format!("start {what}: {e}"))?;
        let lines = match child.stdout.take() {
            Some(out) => {
                let (tx, rx) = mpsc::channel();
                thread::spawn(move || {
                    for line in BufReader::new(out).lines() {
                        match line {
                            Ok(l) => {
                                if tx.send(l).is_err() {
                                    break;
                                }
                            }
                            Err(_) => break,
                        }
                    }
                });
                Some(rx)
            }
            None => None,
        };
        Ok(Proc {
            child,
            what: what.to_string(),
            log,
            lines,
            grace,
        })
    }

    pub fn log_text(&self) -> String {
        let mut t = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut t);
        }
        // The tail is what tells.
        let lines: Vec<&str> = t.lines().collect();
        let from = lines.len().saturating_sub(30);
        lines[from..].join("\n")
    }

    fn failure(&mut self, msg: &str) -> String {
        let log = self.log_text();
        let status = match self.child.try_wait() {
            Ok(Some(st)) => format!(" (it exited: {st})"),
            _ => String::new(),
        };
        if log.trim().is_empty() {
            format!("{}: {msg}{status}", self.what)
        } else {
            format!("{}: {msg}{status}; its log:\n{}", self.what, log.trim_end())
        }
    }

    /// The next JSON object the process prints, by `deadline`.
    pub fn next_json(&mut self, deadline: Instant) -> Result<Value, String> {
        loop {
            if sys::stop_requested() {
                return Err(format!("{}: interrupted", self.what));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(self.failure("no report before the deadline"));
            }
            let slice = (deadline - now).min(Duration::from_millis(100));
            let got = match &self.lines {
                Some(rx) => rx.recv_timeout(slice),
                None => return Err(format!("{}: its output is not captured", self.what)),
            };
            match got {
                Ok(line) => {
                    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(line.trim()) {
                        return Ok(v);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // Let it exit, for the status.
                    let _ = self.wait_exit(Duration::from_millis(500));
                    return Err(self.failure("ended without a report"));
                }
            }
        }
    }

    /// Its final report: an object with `"ok": true`, or the error it gave.
    pub fn report(&mut self, deadline: Instant) -> Result<Value, String> {
        let v = self.next_json(deadline)?;
        if v["ok"] == Value::Bool(true) {
            Ok(v)
        } else {
            let e = v["error"]
                .as_str()
                .unwrap_or("failed without a message")
                .to_string();
            Err(self.failure(&e))
        }
    }

    pub fn wait_exit(&mut self, max: Duration) -> Option<ExitStatus> {
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            if t0.elapsed() >= max {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, up to the grace period, SIGKILL; reaped.
    pub fn terminate(&mut self) {
        if !self.is_running() {
            return;
        }
        let _ = sys::kill(self.child.id() as i32, libc::SIGTERM);
        if self.wait_exit(self.grace).is_some() {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// The fabric's two engines: A (10.0.0.1) where servers listen, B
/// (10.0.0.2) where clients connect from. No services: only the bench's
/// applications use them.
pub struct Engines {
    pub fabric: String,
    pub a_name: String,
    pub b_name: String,
    // Stopped in drop, B then A.
    b: Proc,
    a: Proc,
    run_path: PathBuf,
}

pub const ENGINE_A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

impl Engines {
    /// Starts engines A and B; with `cores`, A's shard pinned to the first
    /// and B's to the second (`--cores`).
    pub fn start(run: &RunDir, tag: &str, cores: Option<[usize; 2]>) -> Result<Engines, String> {
        let pid = std::process::id();
        let fabric = format!("fabric:bench-{pid}");
        let a_name = format!("bench-{tag}-{pid}-a");
        let b_name = format!("bench-{tag}-{pid}-b");
        let args = |addr: &str, name: &str, core: Option<usize>| -> Vec<String> {
            let mut v: Vec<String> = [
                "engine",
                "--link",
                &fabric,
                "--addr",
                addr,
                "--name",
                name,
                "--services",
                "none",
                "--log-level",
                "warn",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            if let Some(c) = core {
                v.extend(["--cores".to_string(), c.to_string()]);
            }
            v
        };
        let grace = Duration::from_secs(5);
        let a = Proc::spawn(
            run,
            &a_name,
            &format!("engine {a_name}"),
            &args("10.0.0.1/24", &a_name, cores.map(|c| c[0])),
            false,
            grace,
        )?;
        let b = Proc::spawn(
            run,
            &b_name,
            &format!("engine {b_name}"),
            &args("10.0.0.2/24", &b_name, cores.map(|c| c[1])),
            false,
            grace,
        )?;
        let mut e = Engines {
            fabric,
            a_name,
            b_name,
            b,
            a,
            run_path: run.path.clone(),
        };
        e.wait_up()?;
        Ok(e)
    }

    fn wait_up(&mut self) -> Result<(), String> {
        let t0 = Instant::now();
        for which in [0, 1] {
            loop {
                stopped()?;
                let name = if which == 0 {
                    self.a_name.clone()
                } else {
                    self.b_name.clone()
                };
                if self.stat(&name).is_ok() {
                    break;
                }
                let p = if which == 0 { &mut self.a } else { &mut self.b };
                if !p.is_running() {
                    return Err(p.failure("exited at start"));
                }
                if t0.elapsed() > Duration::from_secs(10) {
                    return Err(p.failure("did not answer `outboard stat` within 10 s"));
                }
                thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// `outboard stat --json --name NAME` (bounded by stat's own 10 s timeout).
    pub fn stat(&self, name: &str) -> Result<Snapshot, String> {
        stat_in(&self.run_path, name)
    }

    /// Watches where each engine's shard (its busiest thread) runs, A then B.
    pub fn watch_cpus(&self) -> placement::CpuWatch {
        placement::CpuWatch::start(vec![self.a.pid(), self.b.pid()])
    }

    /// Both snapshots (A, B).
    pub fn stats(&self) -> Result<(Snapshot, Snapshot), String> {
        Ok((self.stat(&self.a_name)?, self.stat(&self.b_name)?))
    }

    /// Adds both engines' logs to an error.
    pub fn explain(&mut self, e: String) -> String {
        if sys::stop_requested() {
            return e;
        }
        let mut out = e;
        for p in [&mut self.a, &mut self.b] {
            let alive = p.is_running();
            let log = p.log_text();
            if !alive || !log.trim().is_empty() {
                out.push_str(&format!(
                    "\n{}{}: {}",
                    p.what,
                    if alive { "" } else { " (exited)" },
                    if log.trim().is_empty() {
                        "(empty log)".to_string()
                    } else {
                        log.trim_end().to_string()
                    }
                ));
            }
        }
        out
    }
}

/// A stack counter, if the engine has it.
pub fn counter(s: &Snapshot, key: &str) -> Option<u64> {
    s.stack.get(key).copied()
}

/// What `run_pair` runs: the peer arguments shared by both ends, and each end's own.
pub struct PairSpec {
    pub label: String,
    pub api: Api,
    pub mode: WaitMode,
    /// `--engine` of each end (outboard): (server, client).
    pub engines: Option<(String, String)>,
    pub server_role: Role,
    pub client_role: Role,
    /// The server's port (outboard; the kernel server picks one).
    pub port: u16,
    /// Extra arguments for each end.
    pub server_extra: Vec<String>,
    pub client_extra: Vec<String>,
    /// Both reports must arrive within this.
    pub timeout: Duration,
}

impl PairSpec {
    /// The log names of its (server, client) peers in the run directory.
    pub fn log_names(&self) -> (String, String) {
        let tag = format!("{}-{}-{}", self.api.name(), self.mode.name(), self.label.replace(' ', "_"));
        (format!("peer-{tag}-server"), format!("peer-{tag}-client"))
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Echo => "echo",
        Role::Ping => "ping",
        Role::Sink => "sink",
        Role::Source => "source",
    }
}

/// Starts the server peer, waits for it to listen, starts the client peer;
/// returns (server report, client report). Both are stopped on every path out.
pub fn run_pair(run: &RunDir, p: &PairSpec) -> Result<(Value, Value), String> {
    stopped()?;
    let deadline = Instant::now() + p.timeout;
    let base = |role: Role| -> Vec<String> {
        vec![
            "bench-peer".into(),
            "--role".into(),
            role_name(role).into(),
            "--api".into(),
            p.api.name().into(),
            "--mode".into(),
            p.mode.name().into(),
        ]
    };
    let (server_log, client_log) = p.log_names();
    let mut sargs = base(p.server_role);
    sargs.extend(["--port".into(), p.port.to_string()]);
    if let Some((s, _)) = &p.engines {
        sargs.extend(["--engine".into(), s.clone()]);
    }
    sargs.extend(p.server_extra.iter().cloned());
    let grace = Duration::from_secs(1);
    let what = |role: Role| {
        format!(
            "{} peer ({}, {}, {})",
            role_name(role),
            p.api.name(),
            p.mode.name(),
            p.label
        )
    };
    let mut server = Proc::spawn(
        run,
        &server_log,
        &what(p.server_role),
        &sargs,
        true,
        grace,
    )?;
    let ready = server.next_json(deadline.min(Instant::now() + Duration::from_secs(20)))?;
    if ready["ready"] != Value::Bool(true) {
        let e = ready["error"]
            .as_str()
            .unwrap_or("did not start listening")
            .to_string();
        return Err(server.failure(&e));
    }
    let port = ready["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| server.failure("no port in its ready line"))?;
    let host = match p.api {
        Api::Kernel => Ipv4Addr::LOCALHOST,
        Api::Outboard => ENGINE_A_ADDR,
    };
    let mut cargs = base(p.client_role);
    cargs.extend([
        "--connect".into(),
        SocketAddrV4::new(host, port).to_string(),
    ]);
    if let Some((_, c)) = &p.engines {
        cargs.extend(["--engine".into(), c.clone()]);
    }
    cargs.extend(p.client_extra.iter().cloned());
    let mut client = Proc::spawn(
        run,
        &client_log,
        &what(p.client_role),
        &cargs,
        true,
        grace,
    )?;
    // The client's report first (a failing client makes the server fail too,
    // and the client's message is the one that tells).
    let c = client.report(deadline)?;
    let s = server.report(deadline + Duration::from_secs(5))?;
    let _ = client.wait_exit(Duration::from_secs(5));
    let _ = server.wait_exit(Duration::from_secs(5));
    Ok((s, c))
}

// ---------------------------------------------------------------- machine

#[derive(Debug, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    pub kernel: String,
}

pub fn machine() -> Machine {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    Machine {
        nproc: thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        cpu_model,
        kernel,
    }
}

/// A number from a peer's report (0 if absent).
pub fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(0.0)
}

/// A `--plot FILE` a bench can write: not a directory, in a directory that exists.
pub fn check_plot_path(p: &Path) -> Result<(), String> {
    if p.is_dir() {
        return Err(format!("{}: is a directory; name the file to write", p.display()));
    }
    check_writable_parent(p)
}

/// Is `p` usable for writing a file (its directory exists)?
pub fn check_writable_parent(p: &Path) -> Result<(), String> {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() && !d.is_dir() => {
            Err(format!("{}: no such directory", d.display()))
        }
        _ => Ok(()),
    }
}

/// `outboard stat --json --name NAME` for an engine whose run directory is `run_path`.
pub fn stat_in(run_path: &std::path::Path, name: &str) -> Result<Snapshot, String> {
    let exe = std::env::current_exe().map_err(|e| format!("find the outboard executable: {e}"))?;
    let out = Command::new(exe)
        .args(["stat", "--json", "--name", name])
        .env("OUTBOARD_RUN_DIR", run_path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("outboard stat: {e}"))?;
    if !out.status.success() {
        return Err(format!("outboard stat --name {name}: {}", String::from_utf8_lossy(&out.stderr).trim_end()));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("outboard stat --name {name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_round_trip_across_odd_pieces() {
        for touch in [Touch::Stamp, Touch::All] {
            let mut stream = vec![0u8; 3 * 4096 + 100];
            let mut off = 0u64;
            for piece in [1usize, 63, 4000, 4096, 5000, 300] {
                let end = (off as usize + piece).min(stream.len());
                generate(touch, off, &mut stream[off as usize..end]);
                off = end as u64;
            }
            let mut off = 0u64;
            for piece in [7usize, 4096, 4097, 4000] {
                let end = (off as usize + piece).min(stream.len());
                check(touch, off, &stream[off as usize..end]).unwrap();
                off = end as u64;
            }
            stream[4096] ^= 1;
            assert!(check(touch, 0, &stream).is_err());
        }
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let s: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_us(&s, 0.5), 50.0);
        assert_eq!(percentile_us(&s, 0.99), 99.0);
        assert_eq!(percentile_us(&[], 0.5), 0.0);
        assert!(cpu_times().0 >= 0.0);
    }
}

