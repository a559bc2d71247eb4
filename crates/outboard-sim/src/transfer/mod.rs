//! The bulk-transfer scenario: two real stacks, one TCP connection, seeded
//! data checked byte by byte and by SHA-256 on arrival.
//!
//! Host a (10.0.0.1) connects to host b (10.0.0.2) port 5001. With
//! `Direction::One` a sends `bytes` to b. With `Direction::Both` each sends
//! `bytes` to the other at the same time *on the one connection* (full
//! duplex: data segments carry the reverse direction's ACKs). Each sender
//! calls `shutdown_write` after its last byte; a direction is complete when its
//! receiver has every byte, intact, followed by end of stream. The run stops
//! when every direction is complete, or fails at the virtual time limit, on a
//! reset or timeout, on a deadlock (nothing scheduled, transfer unfinished),
//! or at the first wrong byte.
//!
//! The two directions of the link are independent `FaultInjector`s with the
//! same knobs; `delay_ms` is one way, so the base RTT is twice it.

mod report;
mod stream;

pub use report::{ConnSummary, DirectionReport, HostReport, Progress, TransferReport};
pub use stream::{stream_seed, Sink, Source};

use crate::fault::FaultConfig;
use crate::network::{host_addr, Network, StackNetConfig, Step};
use outboard_stack::{ConnId, ListenerId, Stack};
use outboard_tcp::{CcKind, Event};
use outboard_time::{Duration, Instant};
use crate::pcap::PcapBuf;
use std::net::SocketAddrV4;
use std::sync::{Arc, Mutex};

/// Which way data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// a sends to b.
    #[default]
    One,
    /// a and b each send `bytes` to the other at once, on one connection.
    Both,
}

impl core::str::FromStr for Direction {
    type Err = String;
    fn from_str(s: &str) -> Result<Direction, String> {
        match s {
            "one" => Ok(Direction::One),
            "both" => Ok(Direction::Both),
            other => Err(format!("unknown direction {other:?} (expected one or both)")),
        }
    }
}

impl core::fmt::Display for Direction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Direction::One => "one",
            Direction::Both => "both",
        })
    }
}

/// Everything that defines a run. Same config (seed included) → same report.
#[derive(Debug, Clone)]
pub struct TransferConfig {
    /// Bytes sent in each direction.
    pub bytes: u64,
    /// Per-frame probabilities, each link direction.
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    /// One-way delay; RTT is twice this.
    pub delay_ms: f64,
    pub jitter_ms: f64,
    /// Largest extra delay of a reordered frame.
    pub reorder_delay_ms: f64,
    /// Link rate; 0 = unlimited.
    pub bandwidth_mbit: f64,
    /// Bytes the link's transmit queue holds before tail drop.
    pub queue_bytes: usize,
    pub seed: u64,
    pub cc: CcKind,
    pub direction: Direction,
    pub mss: u16,
    pub mtu: usize,
    pub send_buffer: usize,
    pub recv_buffer: usize,
    /// The run fails if not complete by this much virtual time.
    pub time_limit_s: f64,
    /// Called every `progress_interval_ms` of virtual time.
    pub progress: Option<fn(&Progress)>,
    pub progress_interval_ms: u64,
}

impl Default for TransferConfig {
    /// 1 MiB one way over a clean 100 Mbit/s link with 1 ms one-way delay.
    fn default() -> TransferConfig {
        TransferConfig {
            bytes: 1 << 20,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            delay_ms: 1.0,
            jitter_ms: 0.0,
            reorder_delay_ms: 1.0,
            bandwidth_mbit: 100.0,
            queue_bytes: 256 * 1024,
            seed: 1,
            cc: CcKind::NewReno,
            direction: Direction::One,
            mss: 1460,
            mtu: 1500,
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            time_limit_s: 600.0,
            progress: None,
            progress_interval_ms: 1000,
        }
    }
}

impl TransferConfig {
    /// The link knobs this config implies.
    pub fn fault_config(&self) -> FaultConfig {
        FaultConfig {
            loss: self.loss,
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_delay: ms(self.reorder_delay_ms),
            corrupt: self.corrupt,
            delay: ms(self.delay_ms),
            jitter: ms(self.jitter_ms),
            bandwidth_bps: (self.bandwidth_mbit.max(0.0) * 1e6) as u64,
            queue_bytes: self.queue_bytes,
            ..FaultConfig::default()
        }
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_nanos((v.max(0.0) * 1e6) as u64)
}

pub(crate) const PORT: u16 = 5001;

/// One host's application: its connection and its ends of the data.
struct Side {
    host: usize,
    conn: Option<ConnId>,
    source: Option<Source>,
    sink: Option<Sink>,
    /// The connection's counters, kept as sender (tx) and as receiver (rx)
    /// view of one direction; `all` regardless of role.
    tx: ConnSummary,
    rx: ConnSummary,
    all: ConnSummary,
    completed_at: Option<Instant>,
}

/// Runs the scenario. Uses `cfg.progress` as the progress hook, if set.
pub fn run_transfer(cfg: &TransferConfig) -> TransferReport {
    match cfg.progress {
        Some(hook) => run_transfer_with(cfg, &mut |p| hook(p)),
        None => run_transfer_with(cfg, &mut |_| {}),
    }
}

/// Runs the scenario with a capturing progress hook.
pub fn run_transfer_with(cfg: &TransferConfig, progress: &mut dyn FnMut(&Progress)) -> TransferReport {
    run(cfg, progress, None)
}

/// Runs the scenario and also returns a pcap image of every frame delivered
/// (after the links' faults), timestamped in virtual time.
pub fn run_transfer_pcap(cfg: &TransferConfig, progress: &mut dyn FnMut(&Progress)) -> (TransferReport, Vec<u8>) {
    let pcap = Arc::new(Mutex::new(PcapBuf::new(65535)));
    let report = run(cfg, progress, Some(pcap.clone()));
    let bytes = pcap.lock().map(|p| p.as_bytes().to_vec()).unwrap_or_default();
    (report, bytes)
}

fn run(cfg: &TransferConfig, progress: &mut dyn FnMut(&Progress), pcap: Option<Arc<Mutex<PcapBuf>>>) -> TransferReport {
    let tcp = outboard_tcp::Config { mss: cfg.mss, send_buffer: cfg.send_buffer, recv_buffer: cfg.recv_buffer, cc: cfg.cc, ..Default::default() };
    let mut net = Network::of_stacks(&StackNetConfig { hosts: 2, mtu: cfg.mtu, tcp, link: cfg.fault_config(), seed: cfg.seed });
    if let Some(pcap) = pcap {
        net.set_tap(Box::new(move |t, _, _, f| {
            if let Ok(mut p) = pcap.lock() {
                p.record(t, f);
            }
        }));
    }
    let both = cfg.direction == Direction::Both;
    let mut sides = [
        Side::new(0, Some(stream_seed(cfg.seed, 0)), both.then(|| stream_seed(cfg.seed, 1)), cfg.bytes),
        Side::new(1, both.then(|| stream_seed(cfg.seed, 1)), Some(stream_seed(cfg.seed, 0)), cfg.bytes),
    ];
    let limit = Instant::ZERO + Duration::from_nanos((cfg.time_limit_s.max(0.0) * 1e9) as u64);
    let interval = Duration::from_millis(cfg.progress_interval_ms.max(1));

    let setup = net.host_mut(1).tcp_listen(PORT, 16).map_err(|e| format!("listen failed: {e:?}")).and_then(|l| {
        let now = net.now();
        let remote = SocketAddrV4::new(host_addr(1), PORT);
        net.host_mut(0).tcp_connect(now, remote).map(|c| (l, c)).map_err(|e| format!("connect failed: {e:?}"))
    });
    let mut failure = match setup {
        Ok((listener, conn)) => {
            sides[0].conn = Some(conn);
            net.flush();
            let mut ticker = Ticker { every: interval, next: Instant::ZERO + interval, bytes: cfg.bytes, hook: progress };
            drive(&mut net, &mut sides, listener, limit, &mut ticker)
        }
        Err(e) => Some(e),
    };
    if failure.is_none() && !sides.iter().all(Side::done) {
        failure = Some("stopped before completion".into());
    }
    build_report(cfg, &net, &sides, failure)
}

impl Side {
    fn new(host: usize, source: Option<u64>, sink: Option<u64>, bytes: u64) -> Side {
        Side {
            host,
            conn: None,
            source: source.map(|s| Source::new(s, bytes)),
            sink: sink.map(|s| Sink::new(s, bytes)),
            tx: ConnSummary::default(),
            rx: ConnSummary::default(),
            all: ConnSummary::default(),
            completed_at: None,
        }
    }

    /// Nothing left to receive here.
    fn done(&self) -> bool {
        match &self.sink {
            Some(s) => s.complete(),
            None => true,
        }
    }

    /// The application's turn: accept, read and check, write. Err = the run fails.
    fn step(&mut self, stack: &mut Stack, listener: ListenerId, now: Instant, buf: &mut [u8]) -> Result<(), String> {
        if self.conn.is_none() {
            self.conn = stack.tcp_accept(listener);
        }
        let Some(id) = self.conn else { return Ok(()) };
        let Some(c) = stack.tcp(id) else { return Err(format!("host {}: connection vanished", self.host)) };
        while let Some(ev) = c.poll_event() {
            match ev {
                Event::Reset => return Err(format!("host {}: connection reset", self.host)),
                Event::TimedOut => return Err(format!("host {}: connection timed out", self.host)),
                _ => {}
            }
        }
        if let Some(sink) = &mut self.sink {
            while !sink.end_of_stream {
                match c.recv(buf) {
                    Ok(0) => sink.end_of_stream = true,
                    Ok(n) => sink.accept(&buf[..n]),
                    Err(outboard_tcp::Error::WouldBlock | outboard_tcp::Error::NotConnected) => break,
                    Err(e) => return Err(format!("host {}: recv failed: {e:?}", self.host)),
                }
                if let Some(off) = sink.first_bad {
                    return Err(format!("host {}: wrong byte received at offset {off}", self.host));
                }
            }
            if sink.complete() && self.completed_at.is_none() {
                self.completed_at = Some(now);
            }
        }
        if let Some(src) = &mut self.source {
            let mut err = None;
            src.pump(|d| match c.send(d) {
                Ok(n) => Some(n),
                Err(outboard_tcp::Error::WouldBlock | outboard_tcp::Error::NotConnected) => None,
                Err(e) => {
                    err = Some(e);
                    None
                }
            });
            if let Some(e) = err {
                return Err(format!("host {}: send failed: {e:?}", self.host));
            }
            if src.all_sent() && !src.finished {
                src.finished = true;
                c.shutdown_write();
            }
        }
        let stats = c.stats();
        self.all.update(&stats);
        if self.source.is_some() {
            self.tx.update(&stats);
        }
        if self.sink.is_some() {
            self.rx.update(&stats);
        }
        Ok(())
    }
}

/// The main loop; returns the failure reason, if any.
fn drive(
    net: &mut Network,
    sides: &mut [Side; 2],
    listener: ListenerId,
    limit: Instant,
    ticker: &mut Ticker<'_>,
) -> Option<String> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let now = net.now();
        for side in sides.iter_mut() {
            if let Err(e) = side.step(net.host_mut(side.host), listener, now, &mut buf) {
                return Some(format!("{e} at {now:?}"));
            }
        }
        net.flush();
        ticker.tick(now, sides);
        if sides.iter().all(Side::done) {
            return None;
        }
        match net.advance(limit) {
            Step::Advanced => {}
            Step::Idle => return Some(format!("deadlock: nothing scheduled at {:?} and the transfer is unfinished", net.now())),
            Step::Limit => return Some(format!("time limit of {limit:?} reached")),
            Step::Stalled => return Some(format!("stalled: time stopped at {:?}", net.now())),
        }
    }
}

/// Calls the progress hook once per interval of virtual time.
struct Ticker<'a> {
    every: Duration,
    next: Instant,
    bytes: u64,
    hook: &'a mut dyn FnMut(&Progress),
}

impl Ticker<'_> {
    fn tick(&mut self, now: Instant, sides: &[Side; 2]) {
        if now < self.next {
            return;
        }
        while self.next <= now {
            self.next += self.every;
        }
        let received = |to: usize| sides[to].sink.as_ref().map_or(0, |s| s.received);
        (self.hook)(&Progress {
            virtual_seconds: now.as_secs_f64(),
            bytes: self.bytes,
            received: [received(1), received(0)],
            retransmits: sides.iter().map(|s| s.all.retransmits).sum(),
            cwnd: [sides[0].tx.cwnd, sides[1].tx.cwnd],
        });
    }
}

fn build_report(cfg: &TransferConfig, net: &Network, sides: &[Side; 2], reason: Option<String>) -> TransferReport {
    let mut directions = Vec::new();
    for (dir, (from, to)) in [(0usize, 1usize), (1, 0)].into_iter().enumerate() {
        let (Some(src), Some(sink)) = (&sides[from].source, &sides[to].sink) else { continue };
        let end = sides[to].completed_at.unwrap_or(net.now());
        let (sent_sha, recv_sha) = (src.sha256_hex(), sink.sha256_hex());
        directions.push(DirectionReport {
            name: if dir == 0 { "a->b".into() } else { "b->a".into() },
            bytes_sent: src.sent,
            bytes_received: sink.received,
            end_of_stream: sink.end_of_stream,
            first_bad_offset: sink.first_bad,
            sha256_match: sent_sha == recv_sha && sink.received == cfg.bytes,
            sent_sha256: sent_sha,
            received_sha256: recv_sha,
            completed_at_s: sides[to].completed_at.map(Instant::as_secs_f64),
            goodput_mbit: mbit(sink.received, end),
            sender: sides[from].tx,
            receiver: sides[to].rx,
            link: *net.link(from, to).stats(),
        });
    }
    let end = sides.iter().filter_map(|s| s.completed_at).max().filter(|_| reason.is_none()).unwrap_or(net.now());
    let delivered: u64 = directions.iter().map(|d| d.bytes_received).sum();
    let sha256_match = directions.iter().all(|d| d.sha256_match);
    let first_bad_offset = directions.iter().filter_map(|d| d.first_bad_offset).min();
    let ok = reason.is_none() && sha256_match && first_bad_offset.is_none();
    let retransmits = sides.iter().map(|s| s.all.retransmits).sum();
    let hosts = (0..net.len()).map(|i| HostReport::new(net.host(i).stats(), net.host(i).memory_in_use())).collect();
    TransferReport {
        ok,
        reason: if ok { None } else { Some(reason.unwrap_or_else(|| "data mismatch".into())) },
        seed: cfg.seed,
        cc: match cfg.cc {
            CcKind::NewReno => "newreno".into(),
            CcKind::Cubic => "cubic".into(),
        },
        direction: cfg.direction.to_string(),
        bytes: cfg.bytes,
        bytes_delivered: delivered,
        sha256_match,
        first_bad_offset,
        virtual_seconds: end.as_secs_f64(),
        goodput_mbit: mbit(delivered, end),
        retransmits,
        faults: net.fault_totals(),
        directions,
        hosts,
        net: *net.stats(),
    }
}

fn mbit(bytes: u64, end: Instant) -> f64 {
    let s = end.as_secs_f64();
    if s > 0.0 {
        bytes as f64 * 8.0 / s / 1e6
    } else {
        0.0
    }
}
