//! The scenario's main loop: the two applications, the network steps, the
//! progress ticks, and the report at the end.

use super::stream_seed;
use super::{
    ConnSummary, Direction, DirectionReport, HostReport, Progress, Sink, Source, TransferConfig,
    TransferReport,
};
use crate::fault::FaultConfig;
use crate::network::{host_addr, Network, StackNetConfig, Step};
use crate::pcap::PcapBuf;
use outboard_stack::{ConnId, ListenerId, Stack};
use outboard_tcp::{CcKind, Event, State};
use outboard_time::{Duration, Instant};
use std::net::SocketAddrV4;
use std::sync::{Arc, Mutex};

/// The port b listens on.
const PORT: u16 = 5001;

/// One host's application: its connection and its ends of the data.
struct Side {
    host: usize,
    conn: Option<ConnId>,
    source: Option<Source>,
    sink: Option<Sink>,
    /// This end's connection counters and peaks.
    stats: ConnSummary,
    completed_at: Option<Instant>,
    /// Reader rate limit in bits per second (0 = none).
    reader_bps: u64,
    /// When the rate-limited reader may read again.
    wake: Option<Instant>,
}

/// A rate-limited reader waits until it may read at least this much.
const READ_QUANTUM: u64 = 4096;

pub(super) fn run(
    cfg: &TransferConfig,
    progress: &mut dyn FnMut(&Progress),
    pcap: Option<Arc<Mutex<PcapBuf>>>,
) -> TransferReport {
    let tcp = outboard_tcp::Config {
        mss: cfg.mss,
        send_buffer: cfg.send_buffer,
        recv_buffer: cfg.recv_buffer,
        cc: cfg.cc,
        mtu_probing: cfg.mtu_probing,
        ..Default::default()
    };
    let mut net = Network::of_stacks(&StackNetConfig {
        hosts: 2,
        mtu: cfg.mtu,
        tcp,
        link: cfg.fault_config(),
        seed: cfg.seed,
        ipv6: cfg.ipv6,
    });
    if !cfg.reverse_faults {
        let f = cfg.fault_config();
        net.link_mut(1, 0).set_config(FaultConfig {
            delay: f.delay,
            bandwidth_bps: f.bandwidth_bps,
            queue_bytes: f.queue_bytes,
            outages: f.outages,
            ..FaultConfig::default()
        });
    }
    if let Some(pcap) = pcap {
        net.set_tap(Box::new(move |t, _, _, f| {
            if let Ok(mut p) = pcap.lock() {
                p.record(t, f);
            }
        }));
    }
    let both = cfg.direction == Direction::Both;
    let mut sides = [
        Side::new(
            0,
            Some(stream_seed(cfg.seed, 0)),
            both.then(|| stream_seed(cfg.seed, 1)),
            cfg.bytes,
        ),
        Side::new(
            1,
            both.then(|| stream_seed(cfg.seed, 1)),
            Some(stream_seed(cfg.seed, 0)),
            cfg.bytes,
        ),
    ];
    for side in &mut sides {
        side.reader_bps = (cfg.reader_mbit.max(0.0) * 1e6) as u64;
    }
    let limit = Instant::ZERO + Duration::from_nanos((cfg.time_limit_s.max(0.0) * 1e9) as u64);
    let interval = Duration::from_millis(cfg.progress_interval_ms.max(1));

    let setup = net
        .host_mut(1)
        .tcp_listen(PORT, 16)
        .map_err(|e| format!("listen failed: {e:?}"))
        .and_then(|l| {
            let now = net.now();
            let remote: std::net::SocketAddr = if cfg.ipv6 {
                std::net::SocketAddrV6::new(crate::network::host_addr6(1), PORT, 0, 0).into()
            } else {
                SocketAddrV4::new(host_addr(1), PORT).into()
            };
            net.host_mut(0)
                .tcp_connect(now, remote)
                .map(|c| (l, c))
                .map_err(|e| format!("connect failed: {e:?}"))
        });
    let mut failure = match setup {
        Ok((listener, conn)) => {
            sides[0].conn = Some(conn);
            net.flush();
            let mut ticker = Ticker {
                every: interval,
                next: Instant::ZERO + interval,
                bytes: cfg.bytes,
                hook: progress,
            };
            drive(&mut net, &mut sides, listener, limit, &mut ticker)
        }
        Err(e) => Some(e),
    };
    if failure.is_none() && !sides.iter().all(Side::done) {
        failure = Some("stopped before completion".into());
    }
    let end = net.now();
    let closed_at = match failure {
        None => match close(&mut net, &mut sides) {
            Ok(t) => Some(t),
            Err(e) => {
                failure = Some(e);
                None
            }
        },
        Some(_) => None,
    };
    build_report(cfg, &net, &sides, failure, end, closed_at)
}

impl Side {
    fn new(host: usize, source: Option<u64>, sink: Option<u64>, bytes: u64) -> Side {
        Side {
            host,
            conn: None,
            source: source.map(|s| Source::new(s, bytes)),
            sink: sink.map(|s| Sink::new(s, bytes)),
            stats: ConnSummary::default(),
            completed_at: None,
            reader_bps: 0,
            wake: None,
        }
    }

    /// Bytes the reader may still take at `now` (None = no limit).
    fn read_budget(bps: u64, now: Instant, sink: &Sink) -> Option<u64> {
        if bps == 0 || sink.received >= sink.total() {
            return None;
        }
        let allowed = (u128::from(now.as_nanos()) * u128::from(bps) / 8_000_000_000) as u64;
        Some(allowed.saturating_sub(sink.received))
    }

    /// When the budget will have grown by a quantum (or to the end of the data).
    fn next_read_time(bps: u64, sink: &Sink) -> Instant {
        let want = sink.received + READ_QUANTUM.min(sink.total() - sink.received);
        let ns = (u128::from(want) * 8_000_000_000).div_ceil(u128::from(bps.max(1)));
        Instant::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// Nothing left to receive here.
    fn done(&self) -> bool {
        match &self.sink {
            Some(s) => s.complete(),
            None => true,
        }
    }

    /// The application's turn: accept, read and check, write. Err = the run fails.
    fn step(
        &mut self,
        stack: &mut Stack,
        listener: ListenerId,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<(), String> {
        if self.conn.is_none() {
            self.conn = stack.tcp_accept(listener);
        }
        let Some(id) = self.conn else { return Ok(()) };
        let Some(c) = stack.tcp(id) else {
            return Err(format!("host {}: connection vanished", self.host));
        };
        while let Some(ev) = c.poll_event() {
            match ev {
                Event::Reset => return Err(format!("host {}: connection reset", self.host)),
                Event::TimedOut => return Err(format!("host {}: connection timed out", self.host)),
                _ => {}
            }
        }
        self.wake = None;
        if let Some(sink) = &mut self.sink {
            while !sink.end_of_stream {
                let room = match Side::read_budget(self.reader_bps, now, sink) {
                    None => buf.len(),
                    Some(b) => b.min(buf.len() as u64) as usize,
                };
                if room == 0 {
                    self.wake = Some(Side::next_read_time(self.reader_bps, sink));
                    break;
                }
                match c.recv(&mut buf[..room]) {
                    Ok(0) => sink.end_of_stream = true,
                    Ok(n) => sink.accept(&buf[..n]),
                    Err(outboard_tcp::Error::WouldBlock | outboard_tcp::Error::NotConnected) => {
                        break
                    }
                    Err(e) => return Err(format!("host {}: recv failed: {e:?}", self.host)),
                }
                if let Some(off) = sink.first_bad {
                    return Err(format!(
                        "host {}: wrong byte received at offset {off}",
                        self.host
                    ));
                }
                if sink.end_of_stream && sink.received < sink.total() {
                    return Err(format!(
                        "host {}: end of stream after {} of {} bytes",
                        self.host,
                        sink.received,
                        sink.total()
                    ));
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
        self.stats.update(&c.stats());
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
        // A waiting reader is an event too: step to it if nothing comes first.
        let wake = sides
            .iter()
            .filter_map(|s| s.wake)
            .min()
            .filter(|&w| w <= limit);
        match net.advance(wake.unwrap_or(limit)) {
            Step::Advanced => {}
            Step::Limit if wake.is_some() => {}
            Step::Idle if wake.is_some_and(|w| net.idle_until(w)) => {}
            Step::Idle => {
                return Some(format!(
                    "deadlock: nothing scheduled at {:?} and the transfer is unfinished",
                    net.now()
                ))
            }
            Step::Limit => return Some(format!("time limit of {limit:?} reached")),
            Step::Stalled => return Some(format!("stalled: time stopped at {:?}", net.now())),
        }
    }
}

/// Virtual time allowed for the close handshake after the data is through.
const CLOSE_GRACE: Duration = Duration::from_secs(120);

/// Both applications close; the run then waits until both ends are in
/// TIME-WAIT or CLOSED (RFC 9293 §3.6), i.e. both FINs were acknowledged.
/// Returns when that happened, or why it did not.
fn close(net: &mut Network, sides: &mut [Side; 2]) -> Result<Instant, String> {
    for side in sides.iter() {
        if let Some(c) = side.conn.and_then(|id| net.host_mut(side.host).tcp(id)) {
            c.close();
        }
    }
    net.flush();
    let limit = net.now() + CLOSE_GRACE;
    loop {
        let mut states = Vec::new();
        for side in sides.iter_mut() {
            let Some(c) = side.conn.and_then(|id| net.host_mut(side.host).tcp(id)) else {
                continue;
            };
            while let Some(ev) = c.poll_event() {
                if matches!(ev, Event::Reset | Event::TimedOut) {
                    return Err(format!(
                        "host {} got {ev:?} while closing at {:?}",
                        side.host,
                        net.now()
                    ));
                }
            }
            side.stats.update(&c.stats());
            states.push(c.state());
        }
        net.flush();
        if states
            .iter()
            .all(|s| matches!(s, State::TimeWait | State::Closed))
        {
            return Ok(net.now());
        }
        match net.advance(limit) {
            Step::Advanced => {}
            why => {
                return Err(format!(
                    "close did not finish ({why:?}) at {:?}: states {states:?}",
                    net.now()
                ))
            }
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
            retransmits: sides.iter().map(|s| s.stats.retransmits).sum(),
            cwnd: [sides[0].stats.cwnd, sides[1].stats.cwnd],
        });
    }
}

fn build_report(
    cfg: &TransferConfig,
    net: &Network,
    sides: &[Side; 2],
    reason: Option<String>,
    stop: Instant,
    closed_at: Option<Instant>,
) -> TransferReport {
    let mut directions = Vec::new();
    for (dir, (from, to)) in [(0usize, 1usize), (1, 0)].into_iter().enumerate() {
        let (Some(src), Some(sink)) = (&sides[from].source, &sides[to].sink) else {
            continue;
        };
        let end = sides[to].completed_at.unwrap_or(stop);
        let (sent_sha, recv_sha) = (src.sha256_hex(), sink.sha256_hex());
        directions.push(DirectionReport {
            name: if dir == 0 {
                "a->b".into()
            } else {
                "b->a".into()
            },
            bytes_sent: src.sent,
            bytes_received: sink.received,
            end_of_stream: sink.end_of_stream,
            first_bad_offset: sink.first_bad,
            sha256_match: sent_sha == recv_sha && sink.received == cfg.bytes,
            sent_sha256: sent_sha,
            received_sha256: recv_sha,
            completed_at_s: sides[to].completed_at.map(Instant::as_secs_f64),
            goodput_mbit: mbit(sink.received, end),
            sender: sides[from].stats,
            receiver: sides[to].stats,
            link: *net.link(from, to).stats(),
        });
    }
    let end = sides
        .iter()
        .filter_map(|s| s.completed_at)
        .max()
        .filter(|_| reason.is_none())
        .unwrap_or(stop);
    let delivered: u64 = directions.iter().map(|d| d.bytes_received).sum();
    let sha256_match = directions.iter().all(|d| d.sha256_match);
    let first_bad_offset = directions.iter().filter_map(|d| d.first_bad_offset).min();
    let ok = reason.is_none() && sha256_match && first_bad_offset.is_none();
    let retransmits = sides.iter().map(|s| s.stats.retransmits).sum();
    let hosts = (0..net.len())
        .map(|i| HostReport::new(net.host(i)))
        .collect();
    TransferReport {
        ok,
        reason: if ok {
            None
        } else {
            Some(reason.unwrap_or_else(|| "data mismatch".into()))
        },
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
        closed_at_s: closed_at.map(Instant::as_secs_f64),
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
