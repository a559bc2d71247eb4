//! `outboard bench messages`: the native message protocols between two
//! engine processes on the shared-memory fabric, beside the kernel's UDP and
//! TCP on loopback, in one run (no root needed).
//!
//! Method (decided here):
//!
//! - **The kernel first**, with no engine running, as threads of this
//!   process on 127.0.0.1, 64-byte requests (an 8-byte sequence number, then
//!   bytes derived from it; every response is checked equal to its request):
//!   - *UDP request-response*: a server thread echoes each datagram
//!     (`recv_from`, `send_to`, one at a time). Latency: a client thread with
//!     one call outstanding on a connected `UdpSocket`, re-sending after
//!     200 ms without an answer (a user-space retry loop; a call's time
//!     includes its re-sends); blocking sockets for the row, and again with
//!     both ends spinning on non-blocking sockets, for a note. Rate: the
//!     same client keeps 32 calls in flight on its one socket (pipelined;
//!     the server stays one serial thread), as our rate case keeps 32 in
//!     flight on one client engine.
//!   - *TCP request-response*: one persistent connection, TCP_NODELAY both
//!     ends, the server thread writes back what it reads. Latency: one
//!     request outstanding; rate: 32 requests written ahead of the responses
//!     (the stream may coalesce them; UDP cannot).
//!   - *TCP bulk*: 64 KiB writes into one connection, the server thread reads
//!     and discards; at least the bytes our reliable case sends and at least
//!     0.5 s (bounded by `--seconds`).
//! - **Ours**: `outboard engine --messages` on `fabric:bmsg-PID` at 10.0.0.1
//!   (the server: mailboxes `echo` and `sink`), and for each case a client
//!   engine process `outboard msg` at 10.0.0.2 (this executable, spawned):
//!   a warm-up of unmeasured calls, then `--calls COUNT --outstanding 1`
//!   (latency: round trips timed per call with the engine's clock), then
//!   `--calls 5xCOUNT --outstanding 32` (rate: calls over the job's elapsed
//!   time, one client engine core and one server engine core), then
//!   `--send COUNTx8KiB` to `sink` in 64 KiB reliable messages (bytes/s;
//!   both ends SHA-256 every byte, and the sink's digest is checked).
//!   `--seconds` is each client's `--timeout-s`: a case it cuts short is
//!   reported from the calls done, with a note.
//! - **Pinning**: with two CPUs or more, the server engine and the kernel's
//!   server threads run on the first CPU this process may use, the client
//!   engine and the kernel's client threads on the second (the engines
//!   inherit the affinity of the thread that spawns them). Unpinned, the
//!   scheduler may put both engines on one CPU, where each spins its 50 µs
//!   before the other can run.
//! - Rows: `rpc` (kernel = UDP request-response), `rpc-vs-tcp` (kernel = TCP
//!   request-response; ours as in `rpc`), `reliable` (rates only, bytes/s;
//!   kernel = TCP bulk). Ratios are ours/kernel: lower is better for
//!   latency, higher for rate.
//!
//! Engines are stopped (SIGTERM, grace, SIGKILL, reaped) on every path out,
//! Ctrl-C included. Exit codes: 0 done; 1 a case failed; 2 bad arguments.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use super::peer::{self, machine, Proc, RunDir};
use clap::Args;
use outboard_engine::stat::Snapshot;
use outboard_lab::sys;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Bytes per request and per response.
pub(super) const SIZE: usize = 64;
/// Calls in flight in the rate cases.
pub(super) const RATE_OUTSTANDING: usize = 32;
/// The rate cases make this many times `--count` calls.
const RATE_FACTOR: u64 = 5;
/// The reliable case sends `--count` times this many bytes.
const RELIABLE_PER_COUNT: u64 = 8 << 10;
/// Reliable messages and the kernel's bulk writes.
const BULK_WRITE: usize = 64 << 10;
/// The kernel UDP client re-sends a call unanswered for this long.
const UDP_RETRY: Duration = Duration::from_millis(200);
/// Unmeasured calls before each latency case (at most).
pub(super) const WARMUP: u64 = 1_000;

#[derive(Args, Debug)]
pub struct MessagesArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Calls in each latency case; the rate cases make 5x as many, the reliable case sends 8 KiB
    /// per count (10 to 200000).
    #[arg(long, default_value_t = 100_000, value_parser = crate::args::count_in(10u64, 200_000, u64::MAX))]
    pub count: u64,
    /// Upper bound on each case's measured phase, in seconds (0.001 to 3600).
    #[arg(long, default_value = "5", value_parser = crate::args::bench_seconds())]
    pub seconds: f64,
    /// Also the rpc row over the lab's veth pair (root: builds a lab of its
    /// own): ours engine to engine on af_packet, the kernel's UDP between the
    /// two namespaces.
    #[arg(long)]
    pub veth: bool,
}

/// Where a case's two ends run: links, addresses and namespaces.
#[derive(Debug, Clone)]
pub(super) struct Side {
    /// Ours: the server engine's and client engine's `--link`, `--addr`.
    server_link: String,
    server_cidr: String,
    client_link: String,
    client_cidr: String,
    /// The client engine's extra flags (`--allow-kernel-address` on Linux's interface).
    client_extra: Vec<String>,
    /// Network namespaces (None: this process's).
    server_ns: Option<String>,
    client_ns: Option<String>,
}

impl Side {
    pub(super) fn fabric(fabric: &str) -> Side {
        Side {
            server_link: fabric.into(),
            server_cidr: format!("{SERVER_ADDR}/24"),
            client_link: fabric.into(),
            client_cidr: "10.0.0.2/24".into(),
            client_extra: Vec::new(),
            server_ns: None,
            client_ns: None,
        }
    }
    fn server_ip(&self) -> &str {
        self.server_cidr.split('/').next().unwrap_or_default()
    }
    /// The `--to` of calls to the server engine's `echo`.
    fn echo(&self) -> String {
        format!("{}:7373/echo", self.server_ip())
    }
}

/// Where the kernel's UDP case runs: the server's and client's addresses and namespaces.
#[derive(Debug, Clone)]
pub(super) struct KernelNet {
    server: Ipv4Addr,
    client: Ipv4Addr,
    server_ns: Option<String>,
    client_ns: Option<String>,
}

impl KernelNet {
    pub(super) fn loopback() -> KernelNet {
        KernelNet { server: Ipv4Addr::LOCALHOST, client: Ipv4Addr::LOCALHOST, server_ns: None, client_ns: None }
    }
}

/// Runs `f` in the calling thread after moving it into `ns` (when given).
fn in_ns<T>(ns: &Option<String>, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    if let Some(ns) = ns {
        super::link::enter_netns(ns)?;
    }
    f()
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub service: String,
    pub link: String,
    /// What the kernel side of the row is.
    pub kernel: String,
    pub outboard_p50_us: Option<f64>,
    pub outboard_p99_us: Option<f64>,
    pub kernel_p50_us: Option<f64>,
    pub kernel_p99_us: Option<f64>,
    pub outboard_rate: Option<f64>,
    pub kernel_rate: Option<f64>,
    /// "calls/s" or "bytes/s".
    pub rate_unit: String,
    /// outboard / kernel (latency: lower is better; rate: higher is better).
    pub ratio_p50: Option<f64>,
    pub ratio_p99: Option<f64>,
    pub ratio_rate: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct MessagesReport {
    pub rows: Vec<Row>,
    pub machine: String,
    pub notes: Vec<String>,
}

/// `outboard bench messages`.
pub fn main(a: &MessagesArgs) -> ExitCode {
    let _ = sys::install_stop_handler();
    match run(a) {
        Ok(r) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&r).expect("report serialises")
                );
            } else {
                print_table(a, &r);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("outboard bench messages: {e}");
            ExitCode::from(1)
        }
    }
}

// ================================================================ measurements

/// Round trips: nearest rank on the sorted samples, as the engine's job computes them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Latency {
    pub(super) calls: u64,
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    /// Calls that had to be re-sent (UDP only).
    pub(super) resent: u64,
}

/// Calls (or bytes) a second, and the CPU each side used for them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rate {
    pub(super) done: u64,
    pub(super) seconds: f64,
    pub(super) per_s: f64,
    client_cpu_s: f64,
    server_cpu_s: f64,
    pub(super) resent: u64,
}

fn percentile_us(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize] as f64 / 1e3
}

fn latency_of(mut ns: Vec<u64>, resent: u64) -> Latency {
    ns.sort_unstable();
    Latency {
        calls: ns.len() as u64,
        p50_us: percentile_us(&ns, 0.5),
        p99_us: percentile_us(&ns, 0.99),
        resent,
    }
}

/// This thread's CPU seconds (user and system).
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The first two CPUs this process may run on: (server's, client's).
fn two_cpus() -> Option<(usize, usize)> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; sched_getaffinity only writes it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid and writable, of the size given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return None;
    }
    // SAFETY: CPU_ISSET reads the set within its size.
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    Some((cpus.next()?, cpus.next()?))
}

/// Pins the calling thread to `cpu` (best effort).
pub(super) fn pin_thread(cpu: Option<usize>) {
    let Some(cpu) = cpu else { return };
    // SAFETY: as in `two_cpus`; CPU_SET writes within the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Runs `f` on a thread of its own, pinned to `cpu` when given, so that the
/// calling thread's affinity stays as it is. A process spawned there
/// inherits the pinning: that is how the engines are pinned (`engine --cores`
/// cannot be given on the command line: clap panics on it).
pub(super) fn on_cpu<T: Send>(cpu: Option<usize>, f: impl FnOnce() -> T + Send) -> T {
    thread::scope(|s| {
        s.spawn(|| {
            pin_thread(cpu);
            f()
        })
        .join()
        .expect("a kernel client thread panicked")
    })
}

/// CPU seconds of this process's reaped children (user and system).
fn children_cpu_s() -> f64 {
    // SAFETY: an all-zero rusage is valid; getrusage only writes it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Request `seq`: its number, then bytes derived from it.
fn fill_request(buf: &mut [u8; SIZE], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in buf[8..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_mul(31).wrapping_add(i as u8);
    }
}

/// The sequence number of a response, if it is a request's bytes.
fn check_response(r: &[u8]) -> Option<u64> {
    let seq = u64::from_be_bytes(r.get(..8)?.try_into().ok()?);
    let mut want = [0u8; SIZE];
    fill_request(&mut want, seq);
    (r == want).then_some(seq)
}

fn io_err(what: &str) -> impl Fn(io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A kernel server thread, stopped and joined on drop; `join` gives its CPU seconds.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<Result<f64, String>>>,
}

impl Server {
    fn join(mut self) -> Result<f64, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("a kernel server thread panicked".into()),
            None => Ok(0.0),
        }
    }
}

impl Drop for Server {
    /// On an error path: told to stop, not waited for (a TCP server may
    /// still be in `accept`); it ends with the process.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A UDP echo server on 127.0.0.1: one datagram at a time.
/// `spin`: a non-blocking socket polled on `EAGAIN` instead of a blocking one.
fn udp_server(cpu: Option<usize>, spin: bool, net: &KernelNet) -> Result<Server, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let (ns, ip) = (net.server_ns.clone(), net.server);
    // The socket is made in the server's thread, in the server's namespace.
    let thread = thread::spawn(move || {
        let made = in_ns(&ns, || {
            let sock = UdpSocket::bind((ip, 0)).map_err(io_err("UDP bind"))?;
            sock.set_read_timeout(Some(Duration::from_millis(50))).map_err(io_err("UDP timeout"))?;
            sock.set_nonblocking(spin).map_err(io_err("UDP non-blocking"))?;
            let addr = sock.local_addr().map_err(io_err("UDP address"))?;
            Ok((sock, addr))
        });
        let sock = match made {
            Ok((sock, addr)) => {
                let _ = tx.send(Ok(addr));
                sock
            }
            Err(e) => {
                let _ = tx.send(Err(e.clone()));
                return Err(e);
            }
        };
        pin_thread(cpu);
        let mut buf = [0u8; 2048];
        while !s.load(Ordering::Relaxed) {
            match sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    // A send the kernel refuses is a loss: the client re-sends.
                    let _ = sock.send_to(&buf[..n], from);
                }
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("UDP server: {e}")),
            }
        }
        Ok(thread_cpu_s())
    });
    let addr = rx.recv().map_err(|_| "the UDP server thread ended".to_string())??;
    Ok(Server {
        addr,
        stop,
        thread: Some(thread),
    })
}

/// A TCP server on 127.0.0.1 for one connection: `echo` writes back what it
/// reads; otherwise it reads and discards. Ends at the client's FIN.
fn tcp_server(echo: bool, cpu: Option<usize>) -> Result<Server, String> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(io_err("TCP listen"))?;
    let addr = l.local_addr().map_err(io_err("TCP address"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let thread = thread::spawn(move || {
        pin_thread(cpu);
        let (mut c, _) = l.accept().map_err(io_err("TCP accept"))?;
        c.set_nodelay(true).map_err(io_err("TCP_NODELAY"))?;
        let cpu0 = thread_cpu_s();
        let mut buf = vec![0u8; 256 << 10];
        loop {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if echo {
                        c.write_all(&buf[..n]).map_err(io_err("TCP server write"))?;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("TCP server read: {e}")),
            }
        }
        Ok(thread_cpu_s() - cpu0)
    });
    // It ends at the client's FIN; `stop` is not looked at.
    Ok(Server {
        addr,
        stop,
        thread: Some(thread),
    })
}

/// Where the kernel's server and client threads run (None: where the scheduler puts them).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pins {
    pub(super) server: Option<usize>,
    pub(super) client: Option<usize>,
}

/// The phases of a latency case: up to `warmup` unmeasured calls within
/// `budget` (the rest are skipped when it runs out), then measured calls
/// until `budget` has passed since the first of them (at least one).
struct Phase {
    warmup: u64,
    budget: Duration,
    warm_start: Instant,
    start: Option<Instant>,
}

enum Step {
    Go,
    Skip,
    Stop,
}

impl Phase {
    fn new(warmup: u64, budget: Duration) -> Phase {
        Phase {
            warmup,
            budget,
            warm_start: Instant::now(),
            start: None,
        }
    }

    /// What to do with call `seq`, `measured` calls having been measured.
    fn next(&mut self, seq: u64, measured: usize) -> Step {
        if sys::stop_requested() {
            return Step::Stop;
        }
        if seq < self.warmup {
            return if self.warm_start.elapsed() < self.budget {
                Step::Go
            } else {
                Step::Skip
            };
        }
        let start = *self.start.get_or_insert_with(Instant::now);
        if measured > 0 && start.elapsed() >= self.budget {
            Step::Stop
        } else {
            Step::Go
        }
    }
}

/// One call outstanding: `warmup` unmeasured, then up to `count` measured,
/// within `budget`. `spin`: both ends poll non-blocking sockets.
pub(super) fn udp_latency(
    count: u64,
    warmup: u64,
    budget: Duration,
    pins: Pins,
    spin: bool,
    net: &KernelNet,
) -> Result<Latency, String> {
    let server = udp_server(pins.server, spin, net)?;
    let sock = in_ns(&net.client_ns, || UdpSocket::bind((net.client, 0)).map_err(io_err("UDP bind")))?;
    sock.connect(server.addr).map_err(io_err("UDP connect"))?;
    sock.set_read_timeout(Some(UDP_RETRY))
        .map_err(io_err("UDP timeout"))?;
    sock.set_nonblocking(spin)
        .map_err(io_err("UDP non-blocking"))?;
    let mut req = [0u8; SIZE];
    let mut buf = [0u8; 2048];
    let mut ns = Vec::with_capacity(count as usize);
    let mut resent = 0;
    let mut clock = Phase::new(warmup, budget);
    for seq in 0..warmup + count {
        match clock.next(seq, ns.len()) {
            Step::Go => {}
            Step::Skip => continue,
            Step::Stop => break,
        }
        fill_request(&mut req, seq);
        let t0 = Instant::now();
        sock.send(&req).map_err(io_err("UDP send"))?;
        let mut sent = t0;
        loop {
            match sock.recv(&mut buf) {
                Ok(n) => match check_response(&buf[..n]) {
                    Some(s) if s == seq => break,
                    // The answer to an earlier re-send.
                    Some(s) if s < seq => {}
                    _ => {
                        return Err(format!(
                            "UDP: call {seq}: a {n}-byte response that is not the request"
                        ))
                    }
                },
                Err(e) if is_timeout(&e) => {
                    if sent.elapsed() >= UDP_RETRY {
                        peer::stopped()?;
                        resent += 1;
                        sock.send(&req).map_err(io_err("UDP send"))?;
                        sent = Instant::now();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => peer::stopped()?,
                Err(e) => return Err(format!("UDP recv: {e}")),
            }
        }
        if seq >= warmup {
            ns.push(t0.elapsed().as_nanos() as u64);
        }
    }
    server.join()?;
    Ok(latency_of(ns, resent))
}

/// `outstanding` calls in flight on one socket; up to `count` within `budget`.
pub(super) fn udp_rate(count: u64, outstanding: usize, budget: Duration, pins: Pins, net: &KernelNet) -> Result<Rate, String> {
    let server = udp_server(pins.server, false, net)?;
    let sock = in_ns(&net.client_ns, || UdpSocket::bind((net.client, 0)).map_err(io_err("UDP bind")))?;
    sock.connect(server.addr).map_err(io_err("UDP connect"))?;
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(io_err("UDP timeout"))?;
    let mut req = [0u8; SIZE];
    let mut buf = [0u8; 2048];
    // Call -> when it was last sent.
    let mut in_flight: HashMap<u64, Instant> = HashMap::with_capacity(outstanding * 2);
    let (mut issued, mut done, mut resent) = (0u64, 0u64, 0u64);
    let cpu0 = thread_cpu_s();
    let start = Instant::now();
    let mut last_scan = start;
    let mut end = start;
    while done < count {
        if end.duration_since(start) >= budget {
            break;
        }
        while in_flight.len() < outstanding && issued < count {
            fill_request(&mut req, issued);
            sock.send(&req).map_err(io_err("UDP send"))?;
            in_flight.insert(issued, Instant::now());
            issued += 1;
        }
        match sock.recv(&mut buf) {
            Ok(n) => {
                let Some(seq) = check_response(&buf[..n]) else {
                    return Err(format!("UDP: a {n}-byte response that is no request"));
                };
                // A duplicate (answer to a re-send) finds nothing.
                if in_flight.remove(&seq).is_some() {
                    done += 1;
                }
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => peer::stopped()?,
            Err(e) => return Err(format!("UDP recv: {e}")),
        }
        end = Instant::now();
        if end.duration_since(last_scan) >= Duration::from_millis(50) {
            last_scan = end;
            for (&seq, sent) in in_flight.iter_mut() {
                if end.duration_since(*sent) >= UDP_RETRY {
                    fill_request(&mut req, seq);
                    sock.send(&req).map_err(io_err("UDP send"))?;
                    *sent = end;
                    resent += 1;
                }
            }
        }
    }
    let client_cpu_s = thread_cpu_s() - cpu0;
    let seconds = end.duration_since(start).as_secs_f64();
    let server_cpu_s = server.join()?;
    Ok(Rate {
        done,
        seconds,
        per_s: per_s(done as f64, seconds),
        client_cpu_s,
        server_cpu_s,
        resent,
    })
}

fn per_s(x: f64, s: f64) -> f64 {
    if s > 0.0 {
        x / s
    } else {
        0.0
    }
}

fn tcp_client(server: &Server) -> Result<TcpStream, String> {
    let c = TcpStream::connect(server.addr).map_err(io_err("TCP connect"))?;
    c.set_nodelay(true).map_err(io_err("TCP_NODELAY"))?;
    // No call can hang: a stalled read fails the case.
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(io_err("TCP timeout"))?;
    Ok(c)
}

fn tcp_read_response(c: &mut TcpStream, seq: u64) -> Result<(), String> {
    let mut buf = [0u8; SIZE];
    c.read_exact(&mut buf).map_err(io_err("TCP read"))?;
    match check_response(&buf) {
        Some(s) if s == seq => Ok(()),
        _ => Err(format!("TCP: response {seq} is not its request")),
    }
}

fn tcp_latency(count: u64, warmup: u64, budget: Duration, pins: Pins) -> Result<Latency, String> {
    let server = tcp_server(true, pins.server)?;
    let mut c = tcp_client(&server)?;
    let mut req = [0u8; SIZE];
    let mut ns = Vec::with_capacity(count as usize);
    let mut clock = Phase::new(warmup, budget);
    for seq in 0..warmup + count {
        match clock.next(seq, ns.len()) {
            Step::Go => {}
            Step::Skip => continue,
            Step::Stop => break,
        }
        fill_request(&mut req, seq);
        let t0 = Instant::now();
        c.write_all(&req).map_err(io_err("TCP write"))?;
        tcp_read_response(&mut c, seq)?;
        if seq >= warmup {
            ns.push(t0.elapsed().as_nanos() as u64);
        }
    }
    drop(c);
    server.join()?;
    Ok(latency_of(ns, 0))
}

fn tcp_rate(count: u64, outstanding: usize, budget: Duration, pins: Pins) -> Result<Rate, String> {
    let server = tcp_server(true, pins.server)?;
    let mut c = tcp_client(&server)?;
    let mut req = [0u8; SIZE];
    let (mut issued, mut done) = (0u64, 0u64);
    let cpu0 = thread_cpu_s();
    let start = Instant::now();
    let mut end = start;
    while done < count && end.duration_since(start) < budget {
        peer::stopped()?;
        while issued - done < outstanding as u64 && issued < count {
            fill_request(&mut req, issued);
            c.write_all(&req).map_err(io_err("TCP write"))?;
            issued += 1;
        }
        tcp_read_response(&mut c, done)?;
        done += 1;
        end = Instant::now();
    }
    // Responses still in flight are read (unmeasured) so the server ends cleanly.
    for seq in done..issued {
        tcp_read_response(&mut c, seq)?;
    }
    let client_cpu_s = thread_cpu_s() - cpu0;
    drop(c);
    let server_cpu_s = server.join()?;
    let seconds = end.duration_since(start).as_secs_f64();
    Ok(Rate {
        done,
        seconds,
        per_s: per_s(done as f64, seconds),
        client_cpu_s,
        server_cpu_s,
        resent: 0,
    })
}

/// 64 KiB writes: at least `bytes` and at least `min` seconds, at most `budget`;
/// the rate is the bytes the server read by its end of stream.
fn tcp_bulk(bytes: u64, min: Duration, budget: Duration, pins: Pins) -> Result<Rate, String> {
    let server = tcp_server(false, pins.server)?;
    let mut c = tcp_client(&server)?;
    let chunk = vec![0x5au8; BULK_WRITE];
    let mut sent = 0u64;
    let cpu0 = thread_cpu_s();
    let start = Instant::now();
    loop {
        let t = start.elapsed();
        if (sent >= bytes && t >= min) || t >= budget {
            break;
        }
        peer::stopped()?;
        c.write_all(&chunk).map_err(io_err("TCP write"))?;
        sent += chunk.len() as u64;
    }
    c.shutdown(std::net::Shutdown::Write)
        .map_err(io_err("TCP shutdown"))?;
    let client_cpu_s = thread_cpu_s() - cpu0;
    let server_cpu_s = server.join()?;
    // The server has read everything once it joined.
    let seconds = start.elapsed().as_secs_f64();
    Ok(Rate {
        done: sent,
        seconds,
        per_s: per_s(sent as f64, seconds),
        client_cpu_s,
        server_cpu_s,
        resent: 0,
    })
}

// ================================================================ ours

pub(super) const SERVER_ADDR: &str = "10.0.0.1";

/// `outboard stat --json --name NAME` in the run directory.
pub(super) fn stat(run: &RunDir, name: &str) -> Result<Snapshot, String> {
    super::peer::stat_in(&run.path, name)
}

/// The server engine (`--messages`, mailboxes `echo` and `sink`), up.
fn start_server(
    run: &RunDir,
    side: &Side,
    name: &str,
    cpu: Option<usize>,
) -> Result<Proc, String> {
    start_engine(run, &side.server_link, name, &side.server_cidr, &side.server_ns, cpu)
}

/// A message engine daemon at `addr` on `link` (in namespace `ns`), up (answering `stat`).
fn start_engine(
    run: &RunDir,
    link: &str,
    name: &str,
    addr: &str,
    ns: &Option<String>,
    cpu: Option<usize>,
) -> Result<Proc, String> {
    start_engine_with(run, link, name, addr, ns, cpu, &[])
}

/// As `start_engine`, with `extra` flags after the usual ones.
pub(super) fn start_engine_with(
    run: &RunDir,
    link: &str,
    name: &str,
    addr: &str,
    ns: &Option<String>,
    cpu: Option<usize>,
    extra: &[String],
) -> Result<Proc, String> {
    let mut args: Vec<String> = [
        "engine",
        "--link",
        link,
        "--addr",
        addr,
        "--messages",
        "--services",
        "none",
        "--name",
        name,
        "--log-level",
        "warn",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().cloned());
    // A child made in a thread that entered `ns` runs in it.
    let mut p = on_cpu(cpu, || {
        in_ns(ns, || {
            Proc::spawn(
                run,
                &format!("engine-{name}"),
                &format!("engine {name}"),
                &args,
                false,
                Duration::from_secs(5),
            )
        })
    })?;
    let t0 = Instant::now();
    loop {
        peer::stopped()?;
        if stat(run, name).is_ok() {
            return Ok(p);
        }
        if !p.is_running() {
            return Err(format!(
                "engine {name} exited at start; its log:\n{}",
                p.log_text()
            ));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "engine {name} did not answer `outboard stat` within 10 s; its log:\n{}",
                p.log_text()
            ));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// One `outboard msg` client engine: its report, its CPU seconds, and
/// whether `--seconds` cut it short.
pub(super) struct MsgRun {
    pub(super) report: Value,
    pub(super) cpu_s: f64,
    pub(super) cut_short: bool,
}

pub(super) fn msg(
    run: &RunDir,
    side: &Side,
    cpu: Option<usize>,
    tag: &str,
    job: &[String],
    seconds: f64,
) -> Result<MsgRun, String> {
    let mut args: Vec<String> = [
        "msg",
        "--link",
        &side.client_link,
        "--addr",
        &side.client_cidr,
        "--log-level",
        "warn",
        "--json",
    ]
    .map(String::from)
    .to_vec();
    args.extend(side.client_extra.iter().cloned());
    args.extend(["--timeout-s".into(), format!("{seconds}")]);
    args.extend(job.iter().cloned());
    let what = format!("outboard msg ({tag})");
    let cpu0 = children_cpu_s();
    let mut p = on_cpu(cpu, || {
        in_ns(&side.client_ns, || {
            Proc::spawn(
                run,
                &format!("msg-{tag}"),
                &what,
                &args,
                true,
                Duration::from_secs(5),
            )
        })
    })?;
    let v = p.next_json(Instant::now() + Duration::from_secs_f64(seconds + 30.0))?;
    // Reaped, so its CPU is in RUSAGE_CHILDREN.
    if p.wait_exit(Duration::from_secs(10)).is_none() {
        p.terminate();
    }
    let cpu_s = children_cpu_s() - cpu0;
    let failed = |why: &str| format!("{what}: {why}; its report: {v}; its log:\n{}", p.log_text());
    if let Some(e) = v["error"].as_str() {
        return Err(failed(e));
    }
    if v["ok"] == Value::Bool(true) {
        return Ok(MsgRun {
            report: v,
            cpu_s,
            cut_short: false,
        });
    }
    // Stopped by --timeout-s: what was done counts, if anything was.
    if v["state"] == "running" && v["done"].as_u64().unwrap_or(0) > 0 {
        return Ok(MsgRun {
            report: v,
            cpu_s,
            cut_short: true,
        });
    }
    Err(failed("it did not finish"))
}

/// Our three cases, and the server engine's counters before and after each.
struct Ours {
    lat: MsgRun,
    rate: MsgRun,
    bulk: MsgRun,
    snaps: [Option<Snapshot>; 4],
}

pub(super) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub(super) fn num(v: &Value, key: &str) -> f64 {
    peer::num(v, key)
}

// ================================================================ the run

pub(super) fn ratio(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(x), Some(y)) if y > 0.0 && x.is_finite() => Some(x / y),
        _ => None,
    }
}

fn run(a: &MessagesArgs) -> Result<MessagesReport, String> {
    let budget = Duration::from_secs_f64(a.seconds);
    let rate_calls = a.count * RATE_FACTOR;
    let bulk_bytes = a.count * RELIABLE_PER_COUNT;
    let warmup = WARMUP.min(a.count);
    let mut notes = Vec::new();

    let cpus = two_cpus();
    // The kernel's server thread on the server engine's CPU, its client thread on the client's.
    let kp = Pins {
        server: cpus.map(|c| c.0),
        client: cpus.map(|c| c.1),
    };
    // The kernel first, with no engine running.
    let k_udp = on_cpu(kp.client, || {
        udp_latency(a.count, warmup, budget, kp, false, &KernelNet::loopback())
    })
    .map_err(|e| format!("kernel UDP latency: {e}"))?;
    let k_udp_spin = on_cpu(kp.client, || udp_latency(a.count, warmup, budget, kp, true, &KernelNet::loopback()))
        .map_err(|e| format!("kernel UDP latency, spinning: {e}"))?;
    let k_udp_rate = on_cpu(kp.client, || {
        udp_rate(rate_calls, RATE_OUTSTANDING, budget, kp, &KernelNet::loopback())
    })
    .map_err(|e| format!("kernel UDP rate: {e}"))?;
    let k_tcp = on_cpu(kp.client, || tcp_latency(a.count, warmup, budget, kp))
        .map_err(|e| format!("kernel TCP latency: {e}"))?;
    let k_tcp_rate = on_cpu(kp.client, || {
        tcp_rate(rate_calls, RATE_OUTSTANDING, budget, kp)
    })
    .map_err(|e| format!("kernel TCP rate: {e}"))?;
    let k_bulk = on_cpu(kp.client, || {
        tcp_bulk(
            bulk_bytes,
            Duration::from_millis(500).min(budget),
            budget,
            kp,
        )
    })
    .map_err(|e| format!("kernel TCP bulk: {e}"))?;
    peer::stopped()?;

    // Ours: a server engine, a client engine per case.
    let run = RunDir::new("messages")?;
    let pid = std::process::id();
    let fabric = format!("fabric:bmsg-{pid}");
    let server_name = format!("bench-msg-{pid}-a");
    let (s_cpu, c_cpu) = (cpus.map(|c| c.0), cpus.map(|c| c.1));
    let side = Side::fabric(&fabric);
    let mut server = start_server(&run, &side, &server_name, s_cpu)?;
    let explain = |e: String, server: &mut Proc| -> String {
        let log = server.log_text();
        if log.trim().is_empty() {
            e
        } else {
            format!("{e}\nserver engine's log:\n{}", log.trim_end())
        }
    };
    let echo = format!("{SERVER_ADDR}:7373/echo");
    let sink = format!("{SERVER_ADDR}:7373/sink");
    let size = SIZE.to_string();
    let calls = |n: u64, outstanding: usize| -> Vec<String> {
        strings(&[
            "--to",
            &echo,
            "--calls",
            &n.to_string(),
            "--size",
            &size,
            "--outstanding",
            &outstanding.to_string(),
        ])
    };
    let secs = a.seconds;
    let ours = || -> Result<Ours, String> {
        msg(
            &run,
            &side,
            c_cpu,
            "warmup",
            &calls(warmup, 1),
            secs.max(5.0),
        )?;
        let s0 = stat(&run, &server_name).ok();
        let lat = msg(&run, &side, c_cpu, "latency", &calls(a.count, 1), secs)?;
        let s1 = stat(&run, &server_name).ok();
        let rate = msg(
            &run,
            &side,
            c_cpu,
            "rate",
            &calls(rate_calls, RATE_OUTSTANDING),
            secs,
        )?;
        let s2 = stat(&run, &server_name).ok();
        let job = strings(&[
            "--to",
            &sink,
            "--send",
            &bulk_bytes.to_string(),
            "--size",
            &BULK_WRITE.to_string(),
        ]);
        let bulk = msg(&run, &side, c_cpu, "reliable", &job, secs)?;
        let s3 = stat(&run, &server_name).ok();
        Ok(Ours {
            lat,
            rate,
            bulk,
            snaps: [s0, s1, s2, s3],
        })
    };
    let Ours {
        lat,
        rate,
        bulk,
        snaps,
    } = ours().map_err(|e| explain(e, &mut server))?;
    // Applications on boards: a client engine daemon beside the server's.
    let client_name = format!("bench-msg-{pid}-b");
    let boards = (|| -> Result<(Latency, Rate), String> {
        let mut client = start_engine(&run, &fabric, &client_name, "10.0.0.2/24", &None, c_cpu)?;
        let r = board_rpc(&run.path, &server_name, &client_name, a.count, warmup, rate_calls, budget, kp);
        client.terminate();
        r
    })()
    .map_err(|e| explain(format!("board rpc: {e}"), &mut server))?;
    server.terminate();
    drop(server);

    // ---- rows
    let o_p50 = Some(num(&lat.report, "p50_us"));
    let o_p99 = Some(num(&lat.report, "p99_us"));
    let o_rate = Some(num(&rate.report, "rate"));
    let kernel_rpc = |l: &Latency, r: &Rate, service: &str, kernel: &str| {
        let (k50, k99, kr) = (Some(l.p50_us), Some(l.p99_us), Some(r.per_s));
        Row {
            service: service.into(),
            link: "fabric".into(),
            kernel: kernel.into(),
            outboard_p50_us: o_p50,
            outboard_p99_us: o_p99,
            kernel_p50_us: k50,
            kernel_p99_us: k99,
            outboard_rate: o_rate,
            kernel_rate: kr,
            rate_unit: "calls/s".into(),
            ratio_p50: ratio(o_p50, k50),
            ratio_p99: ratio(o_p99, k99),
            ratio_rate: ratio(o_rate, kr),
        }
    };
    // Bytes the sink acknowledged a second: a run cut short counts the whole messages acknowledged.
    let o_bulk = if bulk.cut_short {
        per_s(
            num(&bulk.report, "done") * BULK_WRITE as f64,
            num(&bulk.report, "elapsed_s"),
        )
    } else {
        num(&bulk.report, "rate")
    };
    let mut rows = vec![
        kernel_rpc(
            &k_udp,
            &k_udp_rate,
            "rpc",
            "UDP request-response on 127.0.0.1",
        ),
        kernel_rpc(
            &k_tcp,
            &k_tcp_rate,
            "rpc-vs-tcp",
            "TCP request-response on 127.0.0.1, one connection, TCP_NODELAY",
        ),
        Row {
            service: "rpc-board".into(),
            link: "fabric".into(),
            kernel: "UDP request-response on 127.0.0.1".into(),
            outboard_p50_us: Some(boards.0.p50_us),
            outboard_p99_us: Some(boards.0.p99_us),
            kernel_p50_us: Some(k_udp.p50_us),
            kernel_p99_us: Some(k_udp.p99_us),
            outboard_rate: Some(boards.1.per_s),
            kernel_rate: Some(k_udp_rate.per_s),
            rate_unit: "calls/s".into(),
            ratio_p50: ratio(Some(boards.0.p50_us), Some(k_udp.p50_us)),
            ratio_p99: ratio(Some(boards.0.p99_us), Some(k_udp.p99_us)),
            ratio_rate: ratio(Some(boards.1.per_s), Some(k_udp_rate.per_s)),
        },
        Row {
            service: "reliable".into(),
            link: "fabric".into(),
            kernel: "TCP bulk on 127.0.0.1, 64 KiB writes".into(),
            outboard_p50_us: None,
            outboard_p99_us: None,
            kernel_p50_us: None,
            kernel_p99_us: None,
            outboard_rate: Some(o_bulk),
            kernel_rate: Some(k_bulk.per_s),
            rate_unit: "bytes/s".into(),
            ratio_p50: None,
            ratio_p99: None,
            ratio_rate: ratio(Some(o_bulk), Some(k_bulk.per_s)),
        },
    ];

    // ---- notes: method, then what was measured beside the rows
    notes.push(format!(
        "ours: `outboard engine --messages` (server, 10.0.0.1) and one `outboard msg` client engine per case (10.0.0.2) on {fabric}, {SIZE}-byte calls to mailbox `echo`; latency: {} calls, 1 outstanding (after {warmup} unmeasured), round trips timed per call by the client engine's clock; rate: {} calls, {RATE_OUTSTANDING} outstanding, over the client job's elapsed time (one client engine core, one server engine core)",
        num(&lat.report, "done"),
        num(&rate.report, "done"),
    ));
    notes.push(format!(
        "kernel rpc (UDP): a server thread echoes one datagram at a time; the client re-sends a call unanswered for {} ms; latency: {} calls, 1 outstanding ({} re-sent); rate: pipelined, {RATE_OUTSTANDING} calls in flight on one client socket against the one serial server thread, {} calls in {:.3} s ({} re-sent)",
        UDP_RETRY.as_millis(),
        k_udp.calls,
        k_udp.resent,
        k_udp_rate.done,
        k_udp_rate.seconds,
        k_udp_rate.resent,
    ));
    notes.push(format!(
        "kernel UDP request-response with both threads spinning on EAGAIN (non-blocking sockets; our engines spin {} us after their last work before they sleep): p50 {:.1} us, p99 {:.1} us over {} calls (for comparison only: the rpc row's kernel side is blocking sockets)",
        outboard_engine::shard::SPIN.as_micros(),
        k_udp_spin.p50_us,
        k_udp_spin.p99_us,
        k_udp_spin.calls,
    ));
    notes.push(match cpus {
        Some((s, c)) => format!("pinned: the server engine and the kernel's server threads on CPU {s}, the client engine and the kernel's client threads on CPU {c}"),
        None => "not pinned: this process may run on one CPU only".to_string(),
    });
    notes.push(format!(
        "kernel rpc-vs-tcp: one persistent connection, TCP_NODELAY, the server thread writes back what it reads; latency: {} calls, 1 outstanding; rate: {RATE_OUTSTANDING} requests written ahead, {} calls in {:.3} s (the byte stream may carry several requests per segment and per read)",
        k_tcp.calls, k_tcp_rate.done, k_tcp_rate.seconds,
    ));
    notes.push(format!(
        "reliable: ours sent {} bytes in {} reliable messages of {} KiB to mailbox `sink` in {:.3} s (rate = bytes / elapsed; the client generates a seeded stream and both ends SHA-256 every byte; the sink's digest was checked); kernel: {} bytes in 64 KiB writes on one TCP connection in {:.3} s, read and discarded, nothing hashed",
        num(&bulk.report, "bytes"),
        num(&bulk.report, "done"),
        BULK_WRITE >> 10,
        num(&bulk.report, "elapsed_s"),
        k_bulk.done,
        k_bulk.seconds,
    ));
    notes.push(format!(
        "rpc-board: application to application through two engines: a server thread of this process attached to the server engine's board answers calls to its mailbox in place (`Mailbox::reply_in_place`), a client thread attached to a second engine (10.0.0.2) calls it ({SIZE} bytes; boards in their default blocking mode, 20 us spin); latency: {} calls, 1 outstanding, timed per call by the client's clock; rate: {} calls, {RATE_OUTSTANDING} outstanding (`call_start`/`wait_call`), in {:.3} s",
        boards.0.calls, boards.1.done, boards.1.seconds,
    ));
    // CPU over the rate cases.
    let server_cpu = |from: usize, to: usize| match (&snaps[from], &snaps[to]) {
        (Some(x), Some(y)) => Some((
            y.shard.cpu_s - x.shard.cpu_s,
            y.shard.sleeps.saturating_sub(x.shard.sleeps),
        )),
        _ => None,
    };
    let rate_s = num(&rate.report, "elapsed_s");
    notes.push(format!(
        "CPU, rpc rate cases: ours{} client engine process {:.3} s (its whole life, start-up included), server engine shard {} over {:.3} s; kernel UDP client thread {:.3} s, server thread {:.3} s over {:.3} s",
        if rate.cut_short { " (cut short by --seconds)" } else { "" },
        rate.cpu_s,
        server_cpu(1, 2).map_or("unknown".to_string(), |(c, _)| format!("{c:.3} s")),
        rate_s,
        k_udp_rate.client_cpu_s,
        k_udp_rate.server_cpu_s,
        k_udp_rate.seconds,
    ));
    if let Some((c, _)) = server_cpu(1, 2) {
        notes.push(format!(
            "calls per CPU-second of the server, rpc rate cases: ours (server engine shard) {:.0}, kernel (UDP server thread) {:.0}",
            per_s(num(&rate.report, "done"), c),
            per_s(k_udp_rate.done as f64, k_udp_rate.server_cpu_s),
        ));
    }
    if let Some((c, sleeps)) = server_cpu(0, 1) {
        let n = num(&lat.report, "done").max(1.0);
        notes.push(format!(
            "server engine over the latency case: {c:.3} s CPU over {:.3} s, {sleeps} sleeps on its link ({:.2} per call); the client engine used {:.3} s CPU",
            num(&lat.report, "elapsed_s"),
            sleeps as f64 / n,
            lat.cpu_s,
        ));
    }
    for (what, r) in [("latency", &lat), ("rate", &rate), ("reliable", &bulk)] {
        if r.cut_short {
            notes.push(format!(
                "ours, {what}: cut short by --seconds {}: reported from what was done",
                a.seconds
            ));
        }
    }
    let rpc = &rows[0];
    if let Some(r) = rpc.ratio_p50 {
        notes.push(format!(
            "goal RPC p50 <= 0.5x the kernel's UDP request-response: {r:.2}x, {}",
            if r <= 0.5 { "met" } else { "NOT met" }
        ));
    }
    if let Some(r) = rpc.ratio_rate {
        notes.push(format!(
            "goal small-RPC rate per engine core >= 3x one core of kernel UDP: {r:.2}x, {}",
            if r >= 3.0 { "met" } else { "NOT met" }
        ));
    }
    if a.veth {
        let (row, note) = veth_rpc(a, warmup, rate_calls, budget, kp)?;
        rows.insert(rows.iter().position(|r| r.service == "reliable").unwrap_or(rows.len()), row);
        notes.push(note);
    }
    let m = machine();
    Ok(MessagesReport {
        rows,
        machine: format!("{} x {}, Linux {}", m.nproc, m.cpu_model, m.kernel),
        notes,
    })
}

// ================================================================ the table

fn show(x: Option<f64>, prec: usize) -> String {
    x.map_or("-".into(), |v| format!("{v:.prec$}"))
}

fn show_rate(x: Option<f64>, unit: &str) -> String {
    match x {
        None => "-".into(),
        Some(v) if unit == "bytes/s" => format!("{:.1} MB/s", v / 1e6),
        Some(v) => format!("{:.0}/s", v),
    }
}

pub fn print_table(a: &MessagesArgs, r: &MessagesReport) {
    println!(
        "outboard bench messages --count {} --seconds {}: {SIZE}-byte RPC and reliable messages, two engines on the fabric vs the kernel on loopback",
        a.count, a.seconds
    );
    println!("machine: {}", r.machine);
    println!();
    println!(
        "  {:<11} {:<7} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>12} {:>12} {:>7}",
        "service",
        "link",
        "ours p50",
        "kern p50",
        "o/k",
        "ours p99",
        "kern p99",
        "o/k",
        "ours rate",
        "kern rate",
        "o/k"
    );
    for w in &r.rows {
        println!(
            "  {:<11} {:<7} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>12} {:>12} {:>7}",
            w.service,
            w.link,
            show(w.outboard_p50_us, 1),
            show(w.kernel_p50_us, 1),
            show(w.ratio_p50, 2),
            show(w.outboard_p99_us, 1),
            show(w.kernel_p99_us, 1),
            show(w.ratio_p99, 2),
            show_rate(w.outboard_rate, &w.rate_unit),
            show_rate(w.kernel_rate, &w.rate_unit),
            show(w.ratio_rate, 2),
        );
    }
    println!();
    println!(
        "latencies in us; o/k = ours / kernel (latency: lower is better; rate: higher is better)"
    );
    for w in &r.rows {
        println!("  {}: kernel = {}", w.service, w.kernel);
    }
    for n in &r.notes {
        println!("- {n}");
    }
}

/// Application-to-application calls through two engines: a server thread
/// on `server`'s board echoing calls in place, a client thread on
/// `client`'s board making `count` timed calls (1 outstanding) and then
/// `rate_calls` with `RATE_OUTSTANDING` in flight. Each thread on its side's CPU.
#[allow(clippy::too_many_arguments)]
fn board_rpc(
    dir: &std::path::Path,
    server: &str,
    client: &str,
    count: u64,
    warmup: u64,
    rate_calls: u64,
    budget: Duration,
    pins: Pins,
) -> Result<(Latency, Rate), String> {
    use outboard_api::{AttachOptions, Board, MessageKind};
    const STOP: &[u8] = b"stop";
    let opts = AttachOptions { run_dir: Some(dir.to_path_buf()), ..Default::default() };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let server_opts = opts.clone();
    let server = server.to_string();
    // Not scoped: if the client fails, the server thread waits on until its engine stops.
    let srv = thread::spawn(move || -> Result<u64, String> {
            let server = server.as_str();
            pin_thread(pins.server);
            let attached = Board::attach_with(server, &server_opts).and_then(|b| Ok((b.bind_mailbox(None, Some("bench-echo"))?, b)));
            let (mut mb, _board) = match attached {
                Ok(v) => v,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("server board: {e}")));
                    return Err(e.to_string());
                }
            };
            let _ = ready_tx.send(Ok(()));
            let mut served = 0;
            loop {
                let m = mb.begin_get().map_err(|e| format!("server receive: {e}"))?;
                if m.kind != MessageKind::Request {
                    mb.end_get().map_err(|e| e.to_string())?;
                    continue;
                }
                let (n, stop) = (m.data.len(), m.data == STOP);
                // The echo is the request itself, already in the buffer: reply in place.
                mb.reply_in_place(n).map_err(|e| format!("server reply: {e}"))?;
                served += 1;
                if stop {
                    return Ok(served);
                }
            }
        });
    ready_rx.recv().map_err(|_| "the server thread ended".to_string())??;
    thread::scope(|s| {
        let cli = s.spawn(move || -> Result<(Latency, Rate), String> {
            pin_thread(pins.client);
            let board = Board::attach_with(client, &opts).map_err(|e| format!("client board: {e}"))?;
            let mut mb = board.bind_mailbox(None, None).map_err(|e| e.to_string())?;
            let to = board.lookup(SocketAddr::from((SERVER_ADDR.parse::<Ipv4Addr>().expect("an address"), 7373)), "bench-echo").map_err(|e| format!("lookup: {e}"))?;
            let req = |i: u64| -> Vec<u8> { (0..SIZE as u64).map(|k| (i.wrapping_mul(31) + k) as u8).collect() };
            let check = |i: u64, got: &[u8]| if got == req(i) { Ok(()) } else { Err(format!("call {i}: a wrong response")) };
            for i in 0..warmup {
                check(i, &mb.call(to, &req(i)).map_err(|e| format!("warm-up call: {e}"))?)?;
            }
            let t0 = Instant::now();
            let mut ns = Vec::with_capacity(count as usize);
            for i in 0..count {
                if t0.elapsed() > budget {
                    break;
                }
                let t = Instant::now();
                let r = mb.call(to, &req(i)).map_err(|e| format!("call: {e}"))?;
                ns.push(t.elapsed().as_nanos() as u64);
                check(i, &r)?;
            }
            let lat = latency_of(ns, 0);
            let cpu0 = outboard_engine::clock::thread_cpu_time();
            let t0 = Instant::now();
            let mut pending = std::collections::VecDeque::new();
            let mut done = 0;
            let mut i = 0;
            while done < rate_calls && t0.elapsed() <= budget {
                while pending.len() < RATE_OUTSTANDING && i < rate_calls {
                    pending.push_back((i, mb.call_start(to, &req(i), None).map_err(|e| format!("call: {e}"))?));
                    i += 1;
                }
                let Some((k, tag)) = pending.pop_front() else { break };
                check(k, &mb.wait_call(tag, None).map_err(|e| format!("call: {e}"))?)?;
                done += 1;
            }
            let seconds = t0.elapsed().as_secs_f64();
            for (k, tag) in pending {
                check(k, &mb.wait_call(tag, None).map_err(|e| format!("call: {e}"))?)?;
            }
            let client_cpu_s = (outboard_engine::clock::thread_cpu_time() - cpu0).as_secs_f64();
            mb.call(to, STOP).map_err(|e| format!("stop call: {e}"))?;
            Ok((lat, Rate { done, seconds, per_s: done as f64 / seconds.max(1e-9), client_cpu_s, server_cpu_s: 0.0, resent: 0 }))
        });
        let got = cli.join().map_err(|_| "the client thread panicked".to_string())?;
        // On an error the server waits for a call that will not come: it ends with its engine.
        got.as_ref().map_err(Clone::clone)?;
        srv.join().map_err(|_| "the server thread panicked".to_string())??;
        got
    })
}

/// The rpc row over veth (`--veth`): a lab of its own (root); ours is a
/// server engine on af_packet on the engine's side and an `outboard msg`
/// client engine on af_packet beside Linux's address on the other side;
/// then, the engine stopped, the kernel's UDP request-response between the
/// two namespaces over the same pair (a server address added to the
/// engine's interface). Each case as on the fabric.
fn veth_rpc(a: &MessagesArgs, warmup: u64, rate_calls: u64, budget: Duration, kp: Pins) -> Result<(Row, String), String> {
    use outboard_lab::{Lab, LabConfig};
    let name = super::lab_name("bm");
    let lab = Lab::up(&LabConfig::new(&name)).map_err(|e| format!("--veth: lab {name}: {e} (the veth rows need root)"))?;
    let r = (|| -> Result<(Row, String), String> {
        let (eng_ns, lnx_ns) = (lab.engine_ns().to_string(), lab.linux_ns().to_string());
        let (eng, prefix, lnx) = (lab.engine_addr(), lab.engine_prefix(), lab.linux_addr());
        let other = |last: u8| {
            let o = eng.octets();
            Ipv4Addr::new(o[0], o[1], o[2], last)
        };
        let side = Side {
            server_link: format!("af_packet:{}", lab.engine_iface()),
            server_cidr: format!("{eng}/{prefix}"),
            client_link: format!("af_packet:{}", lab.linux_iface()),
            client_cidr: format!("{}/{prefix}", other(250)),
            client_extra: vec!["--allow-kernel-address".into()],
            server_ns: Some(eng_ns.clone()),
            client_ns: Some(lnx_ns.clone()),
        };
        let run = RunDir::new("messages-veth")?;
        let server_name = format!("bench-msgv-{}", std::process::id());
        let mut server = start_server(&run, &side, &server_name, kp.server)?;
        let echo = side.echo();
        let calls = |n: u64, outstanding: usize| strings(&["--to", &echo, "--calls", &n.to_string(), "--size", &SIZE.to_string(), "--outstanding", &outstanding.to_string()]);
        let ours = (|| {
            msg(&run, &side, kp.client, "veth-warmup", &calls(warmup, 1), a.seconds.max(5.0))?;
            let lat = msg(&run, &side, kp.client, "veth-latency", &calls(a.count, 1), a.seconds)?;
            let rate = msg(&run, &side, kp.client, "veth-rate", &calls(rate_calls, RATE_OUTSTANDING), a.seconds)?;
            Ok::<_, String>((lat, rate))
        })();
        server.terminate();
        let log = server.log_text();
        let (lat, rate) = ours.map_err(|e| format!("{e}\nserver engine's log:\n{}", log.trim_end()))?;
        drop(server);
        // The kernel on the same pair, the engine gone.
        let kaddr = other(251);
        let _addr = super::lab_engine::KernelAddr::add(&eng_ns, lab.engine_iface(), &format!("{kaddr}/{prefix}"))?;
        let net = KernelNet { server: kaddr, client: lnx, server_ns: Some(eng_ns.clone()), client_ns: Some(lnx_ns.clone()) };
        let k_lat = on_cpu(kp.client, || udp_latency(a.count, warmup, budget, kp, false, &net)).map_err(|e| format!("kernel UDP latency over veth: {e}"))?;
        let k_rate = on_cpu(kp.client, || udp_rate(rate_calls, RATE_OUTSTANDING, budget, kp, &net)).map_err(|e| format!("kernel UDP rate over veth: {e}"))?;
        let (o50, o99, orate) = (Some(num(&lat.report, "p50_us")), Some(num(&lat.report, "p99_us")), Some(num(&rate.report, "rate")));
        let row = Row {
            service: "rpc".into(),
            link: "veth".into(),
            kernel: "UDP request-response between the lab's namespaces over the same veth pair".into(),
            outboard_p50_us: o50,
            outboard_p99_us: o99,
            kernel_p50_us: Some(k_lat.p50_us),
            kernel_p99_us: Some(k_lat.p99_us),
            outboard_rate: orate,
            kernel_rate: Some(k_rate.per_s),
            rate_unit: "calls/s".into(),
            ratio_p50: ratio(o50, Some(k_lat.p50_us)),
            ratio_p99: ratio(o99, Some(k_lat.p99_us)),
            ratio_rate: ratio(orate, Some(k_rate.per_s)),
        };
        let note = format!(
            "rpc over veth (lab {name}): ours is a server engine on af_packet at {eng} (namespace {eng_ns}) and `outboard msg` client engines on af_packet at {} beside Linux's address (namespace {lnx_ns}), {SIZE}-byte calls to `echo`: {} calls with 1 outstanding, {} with {RATE_OUTSTANDING}; the kernel's UDP server thread at {kaddr} on the engine's interface (the engine stopped), its client at {lnx}: {} calls, 1 outstanding ({} re-sent), rate {} calls in {:.3} s",
            other(250),
            num(&lat.report, "done"),
            num(&rate.report, "done"),
            k_lat.calls,
            k_lat.resent,
            k_rate.done,
            k_rate.seconds,
        );
        Ok((row, note))
    })();
    let down = lab.teardown();
    let r = r?;
    down.map_err(|e| format!("--veth: lab {name} teardown: {e}"))?;
    Ok(r)
}
