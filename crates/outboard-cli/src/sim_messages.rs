//! `outboard sim messages`: one message service between two simulated hosts
//! under seeded faults, checked like `outboard-sim`'s tests check it.
//!
//! Host a (10.0.0.1, mailbox 1) is the sender or client; host b (10.0.0.2,
//! mailbox 10, named `svc`) the receiver or server. Before the service starts,
//! a looks b's mailbox up by name on a clean link, which also warms both ARP
//! caches (the stack holds only a few datagrams while it resolves); then the
//! faults start and the clock for the report with them. What is checked:
//!
//! - reliable: every message delivered once, in order, byte-exact, and acknowledged;
//! - rpc: every call answered with the function of its request, and run by
//!   the server exactly once (it counts runs per call id);
//! - datagram: every datagram delivered is one that was sent, whole and intact;
//!   how many were lost is reported, not failed (datagrams may be lost).
//!
//! Message `i` holds `i` in its first 8 bytes, then bytes drawn from the seed.
//! The endpoints' message and call timeouts are the run's time limit, so only
//! the limit ends a slow run.

use crate::args;
use crate::sim::{print_messages, Counters, FaultFlags, MessagesReport};
use clap::{Args, ValueEnum};
use outboard_msg::{CallId, Config, DeliveryKind, Event, MailboxAddr, SendError};
use outboard_sim::msg::{drive, look_up, msg_addr, of_msg_hosts, MsgHost};
use outboard_sim::network::{Network, StackNetConfig};
use outboard_sim::pcap::PcapBuf;
use outboard_sim::{FaultConfig, Rng};
use outboard_time::{Duration, Instant};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

const CLIENT_MAILBOX: u32 = 1;
const SERVER_MAILBOX: u32 = 10;
const SERVER_NAME: &str = "svc";
/// Link bytes a frame costs beyond its message bytes: our header (64), UDP (8),
/// IPv4 (20), Ethernet (14) and the wire's preamble, FCS and gap (24).
const FRAME_OVERHEAD: u64 = 64 + 8 + 20 + 14 + 24;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    Reliable,
    Rpc,
    Datagram,
}

impl Service {
    pub fn name(self) -> &'static str {
        match self {
            Service::Reliable => "reliable",
            Service::Rpc => "rpc",
            Service::Datagram => "datagram",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct MessagesArgs {
    /// The service: reliable (messages), rpc (calls) or datagram.
    #[arg(long, value_enum, default_value_t = Service::Rpc)]
    pub service: Service,
    /// Messages to send, or calls to make (1 to 1000000).
    #[arg(long, default_value = "1000", value_parser = args::message_count())]
    pub count: u64,
    /// Bytes of each message or request (e.g. 64, 1KiB; 8 B to 1 MiB).
    #[arg(long, default_value = "64", value_parser = args::message_size())]
    pub size: u64,
    /// Calls in flight at once (rpc; 1 to 4096).
    #[arg(long, default_value = "16", value_parser = args::outstanding_calls())]
    pub outstanding: usize,
    #[command(flatten)]
    pub faults: FaultFlags,
    /// Bytes the link's queue holds before it tail-drops (with --bandwidth-mbit; 16 KiB to 1 GiB).
    #[arg(long, default_value = "256KiB", value_parser = args::queue_bytes())]
    pub queue_bytes: u64,
    /// Seed for every random choice of the run: the same seed replays the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fail the run if it has not finished after this many virtual seconds (0.001 to a year).
    #[arg(long, default_value = "600", value_parser = args::run_seconds())]
    pub time_limit_s: f64,
    /// Write every delivered frame to this pcap file (virtual timestamps).
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

impl MessagesArgs {
    fn link(&self) -> FaultConfig {
        FaultConfig {
            loss: self.faults.loss,
            duplicate: self.faults.duplicate,
            reorder: self.faults.reorder,
            corrupt: self.faults.corrupt,
            ..self.clean_link()
        }
    }

    /// The link without its faults: delay, bandwidth and queue only.
    fn clean_link(&self) -> FaultConfig {
        FaultConfig {
            delay: ms(self.faults.delay_ms),
            jitter: ms(self.faults.jitter_ms),
            bandwidth_bps: (self.faults.bandwidth_mbit * 1e6) as u64,
            queue_bytes: usize::try_from(self.queue_bytes).unwrap_or(usize::MAX),
            ..FaultConfig::default()
        }
    }

    fn limit(&self) -> Duration {
        Duration::from_secs_f64(self.time_limit_s)
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_nanos((v * 1e6) as u64)
}

pub fn messages(a: &MessagesArgs) -> ExitCode {
    if let Err(e) = a.faults.check() {
        eprintln!("outboard: {e}");
        return ExitCode::from(2);
    }
    let pcap = a.pcap.as_ref().map(|_| Arc::new(Mutex::new(PcapBuf::new(65535))));
    let report = run(a, pcap.clone());
    if let (Some(path), Some(pcap)) = (&a.pcap, pcap) {
        let bytes = pcap.lock().map(|p| p.as_bytes().to_vec()).unwrap_or_default();
        if let Err(e) = std::fs::write(path, bytes) {
            eprintln!("outboard: cannot write pcap {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("report serialises"));
    } else {
        print_messages(&report);
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "outboard: {} run FAILED (seed {}): {}",
            report.service,
            report.seed,
            report.reason.as_deref().unwrap_or("see report")
        );
        ExitCode::from(1)
    }
}

/// What a service moved, beyond the endpoints' counters.
#[derive(Default)]
struct Moved {
    delivered: u64,
    duplicates: u64,
    /// Payload bytes that arrived (requests and responses for rpc).
    bytes: u64,
    /// Virtual nanoseconds each call took (rpc).
    latencies: Vec<u64>,
}

fn run(a: &MessagesArgs, pcap: Option<Arc<Mutex<PcapBuf>>>) -> MessagesReport {
    let limit = a.limit();
    let msg = Config { message_timeout: limit, call_timeout: limit, ..Config::default() };
    let cfg = StackNetConfig { hosts: 2, mtu: 1500, tcp: Default::default(), link: a.clean_link(), seed: a.seed, ipv6: false };
    let mut net = of_msg_hosts(&cfg, &msg);
    if let Some(pcap) = pcap {
        net.set_tap(Box::new(move |t, _, _, f| {
            if let Ok(mut p) = pcap.lock() {
                p.record(t, f);
            }
        }));
    }
    let mut moved = Moved::default();
    let mut start = net.now();
    let result = warm_up(&mut net).and_then(|to| {
        net.link_mut(0, 1).set_config(a.link());
        net.link_mut(1, 0).set_config(a.link());
        start = net.now();
        match a.service {
            Service::Reliable => reliable(&mut net, a, to, &mut moved),
            Service::Rpc => rpc(&mut net, a, to, &mut moved),
            Service::Datagram => datagram(&mut net, a, to, &mut moved),
        }
    });
    let seconds = net.now().saturating_duration_since(start).as_secs_f64();
    let mut latencies = std::mem::take(&mut moved.latencies);
    latencies.sort_unstable();
    let roles = match a.service {
        Service::Rpc => ["client", "server"],
        _ => ["sender", "receiver"],
    };
    let endpoints: Vec<Counters> = (0..2).map(|i| Counters::of(roles[i], &net.host(i).ep.stats(), net.host(i).send_refused)).collect();
    let per_s = |n: u64| if seconds > 0.0 { n as f64 / seconds } else { 0.0 };
    MessagesReport {
        ok: result.is_ok(),
        reason: result.err(),
        service: a.service.name(),
        seed: a.seed,
        count: a.count,
        size: a.size,
        outstanding: (a.service == Service::Rpc).then_some(a.outstanding),
        bytes: moved.bytes,
        virtual_seconds: seconds,
        throughput_mbit: per_s(moved.bytes) * 8.0 / 1e6,
        per_second: per_s(moved.delivered),
        latency_p50_ms: percentile_ms(&latencies, 0.50),
        latency_p99_ms: percentile_ms(&latencies, 0.99),
        delivered: moved.delivered,
        lost: a.count.saturating_sub(moved.delivered),
        duplicates: moved.duplicates,
        retransmissions: endpoints.iter().map(Counters::retransmissions).sum(),
        endpoints,
        faults: net.fault_totals(),
    }
}

fn percentile_ms(sorted: &[u64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let i = ((q * sorted.len() as f64).ceil() as usize).saturating_sub(1).min(last);
    Some(sorted[i] as f64 / 1e6)
}

/// Binds both mailboxes and looks the server's up by name on the clean link.
fn warm_up(net: &mut Network<MsgHost>) -> Result<MailboxAddr, String> {
    net.host_mut(0).ep.bind(Some(CLIENT_MAILBOX), None).map_err(|e| e.to_string())?;
    net.host_mut(1).ep.bind(Some(SERVER_MAILBOX), Some(SERVER_NAME)).map_err(|e| e.to_string())?;
    look_up(net, 0, 1, SERVER_NAME)
        .map_err(|e| format!("warm-up on a clean link: {e}"))?
        .map_err(|e| format!("looking up {SERVER_NAME:?}: {e}"))
}

fn body(seed: u64, i: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    v[..8].copy_from_slice(&i.to_be_bytes());
    Rng::derive(seed, 1000 + i).fill_bytes(&mut v[8..]);
    v
}

/// The server's answer: the request reversed and scrambled, the same length
/// (so a request of the largest size has a response that fits too).
fn response_to(request: &[u8]) -> Vec<u8> {
    request.iter().rev().map(|b| b ^ 0x5a).collect()
}

fn reliable(net: &mut Network<MsgHost>, a: &MessagesArgs, to: MailboxAddr, moved: &mut Moved) -> Result<(), String> {
    let (n, size, seed) = (a.count, a.size as usize, a.seed);
    let from = MailboxAddr::new(msg_addr(0), CLIENT_MAILBOX);
    let (mut sent, mut acked) = (0u64, 0u64);
    // The next message, kept while the send queue is full (not drawn again).
    let mut next: Option<Vec<u8>> = None;
    drive(net, a.limit(), |net, now| {
        while sent < n {
            let data = next.take().unwrap_or_else(|| body(seed, sent, size));
            match net.host_mut(0).ep.send_message(now, CLIENT_MAILBOX, to, &data) {
                Ok(_) => sent += 1,
                Err(SendError::QueueFull) => {
                    next = Some(data);
                    break;
                }
                Err(e) => return Err(format!("send {sent}: {e}")),
            }
        }
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            match e {
                Event::MessageAcked { .. } => acked += 1,
                Event::MessageFailed { message, error } => return Err(format!("{message:?} failed: {error}")),
                _ => {}
            }
        }
        while net.host_mut(1).ep.poll_event().is_some() {}
        while let Some(d) = net.host_mut(1).ep.recv(now, SERVER_MAILBOX) {
            let i = moved.delivered;
            if d.kind != DeliveryKind::Message || d.from != from {
                return Err(format!("message {i}: a {:?} from {}", d.kind, d.from));
            }
            if i >= n || d.data != body(seed, i, size) {
                let got = d.data.get(..8).map_or(u64::MAX, |b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
                return Err(format!("message {i}: wrong bytes (index field {got}, {} bytes)", d.data.len()));
            }
            moved.delivered += 1;
            moved.bytes += size as u64;
        }
        Ok(moved.delivered == n && acked == n)
    })
    .map_err(|e| format!("{e} ({} of {n} received in order, {acked} acknowledged)", moved.delivered))
}

fn rpc(net: &mut Network<MsgHost>, a: &MessagesArgs, to: MailboxAddr, moved: &mut Moved) -> Result<(), String> {
    let (n, size, seed) = (a.count, a.size as usize, a.seed);
    let mut started = 0u64;
    let mut calls: HashMap<CallId, (u64, Instant)> = HashMap::new();
    let mut runs: HashMap<u64, u32> = HashMap::new();
    drive(net, a.limit(), |net, now| {
        while let Some(e) = net.host_mut(0).ep.poll_event() {
            let Event::CallDone { call, result } = e else { continue };
            let (i, t0) = calls.remove(&call).ok_or(format!("{call:?} finished twice or never started"))?;
            let resp = result.map_err(|e| format!("call {i}: {e}"))?;
            if resp != response_to(&body(seed, i, size)) {
                return Err(format!("call {i}: wrong response ({} bytes)", resp.len()));
            }
            moved.delivered += 1;
            moved.bytes += 2 * size as u64;
            moved.latencies.push(now.saturating_duration_since(t0).as_nanos() as u64);
        }
        while started < n && net.host(0).ep.outstanding_calls() < a.outstanding {
            let req = body(seed, started, size);
            let call = net.host_mut(0).ep.call(now, CLIENT_MAILBOX, to, &req, None).map_err(|e| format!("call {started}: {e}"))?;
            calls.insert(call, (started, now));
            started += 1;
        }
        let srv = &mut net.host_mut(1).ep;
        while srv.poll_event().is_some() {}
        while let Some(d) = srv.recv(now, SERVER_MAILBOX) {
            let DeliveryKind::Request(token) = d.kind else { return Err(format!("a {:?} in the server's mailbox", d.kind)) };
            *runs.entry(token.call_id()).or_default() += 1;
            srv.reply(now, &token, &response_to(&d.data)).map_err(|e| format!("reply: {e}"))?;
        }
        Ok(moved.delivered == n)
    })
    .map_err(|e| format!("{e} ({} of {n} calls answered, {} in flight)", moved.delivered, calls.len()))?;
    if let Some((id, k)) = runs.iter().find(|(_, &k)| k != 1) {
        return Err(format!("call id {id} ran {k} times"));
    }
    let executed = net.host(1).ep.stats().requests_executed;
    if runs.len() as u64 != n || executed != n {
        return Err(format!("{} distinct calls ran (the server counted {executed}); {n} were made", runs.len()));
    }
    Ok(())
}

fn datagram(net: &mut Network<MsgHost>, a: &MessagesArgs, to: MailboxAddr, moved: &mut Moved) -> Result<(), String> {
    let (n, size, seed) = (a.count, a.size as usize, a.seed);
    let from = MailboxAddr::new(msg_addr(0), CLIENT_MAILBOX);
    // Datagrams have no congestion control: paced at half the link's rate
    // (10 Gbit/s when unlimited), in bursts of at most half its queue.
    let frames = (size as u64).div_ceil(net.host(0).ep.config().frame_payload() as u64).max(1);
    let cost = size as u64 + frames * FRAME_OVERHEAD;
    let rate = if a.faults.bandwidth_mbit > 0.0 { a.faults.bandwidth_mbit * 1e6 / 16.0 } else { 1.25e9 / 2.0 };
    let burst = (a.queue_bytes / 2).max(cost) as f64;
    let (mut budget, mut last) = (burst, net.now());
    let mut sent = 0u64;
    let mut seen = vec![0u8; n as usize];
    drive(net, a.limit(), |net, now| {
        // All sent in an earlier call and nothing on the wire: nothing more can arrive.
        let finished = sent == n && net.in_flight() == 0;
        budget = (budget + now.saturating_duration_since(last).as_secs_f64() * rate).min(burst);
        last = now;
        while sent < n && budget >= cost as f64 {
            net.host_mut(0).ep.send_datagram(now, CLIENT_MAILBOX, to, &body(seed, sent, size)).map_err(|e| e.to_string())?;
            sent += 1;
            budget -= cost as f64;
        }
        while let Some(d) = net.host_mut(1).ep.recv(now, SERVER_MAILBOX) {
            let i = d.data.get(..8).map_or(u64::MAX, |b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
            if d.kind != DeliveryKind::Datagram || d.from != from || i >= n || d.data != body(seed, i, size) {
                return Err(format!("a datagram claiming index {i} ({} bytes, {:?}) is not one that was sent", d.data.len(), d.kind));
            }
            let k = &mut seen[i as usize];
            if *k == 0 {
                moved.delivered += 1;
                moved.bytes += size as u64;
            } else {
                moved.duplicates += 1;
            }
            *k = k.saturating_add(1);
        }
        for h in 0..2 {
            while net.host_mut(h).ep.poll_event().is_some() {}
        }
        Ok(finished)
    })
    .map_err(|e| format!("{e} ({sent} of {n} sent, {} delivered)", moved.delivered))
}
