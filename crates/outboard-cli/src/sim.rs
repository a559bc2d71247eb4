//! `outboard sim transfer` and `outboard demo`: the simulator from the command line;
//! and the report of `outboard sim messages` (sim_messages.rs runs it).

use crate::args::{self, parse_size};
use clap::Args;
use outboard_msg::Stats;
use outboard_sim::{run_transfer_pcap, run_transfer_with, Direction, Progress, TransferConfig, TransferReport};
use outboard_sim::FaultStats;
use outboard_tcp::CcKind;
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// The simulated link's faults, shared by `sim transfer` and `sim messages`.
#[derive(Args, Debug, Clone)]
pub struct FaultFlags {
    /// Probability a frame is lost (0.01 or 1%), on each link direction (0% to 25%,
    /// with --corrupt: at most 25% together).
    #[arg(long, default_value = "0", value_parser = args::loss())]
    pub loss: f64,
    /// Probability a frame is delivered twice.
    #[arg(long, default_value = "0", value_parser = args::probability())]
    pub duplicate: f64,
    /// Probability a frame is held back and delivered out of order.
    #[arg(long, default_value = "0", value_parser = args::probability())]
    pub reorder: f64,
    /// Probability one bit of a frame is flipped (caught by checksums; 0% to 25%).
    #[arg(long, default_value = "0", value_parser = args::loss())]
    pub corrupt: f64,
    /// One-way propagation delay in milliseconds (RTT is twice this; 0 to 1000).
    #[arg(long, default_value = "1", value_parser = args::delay_ms())]
    pub delay_ms: f64,
    /// Random extra delay per frame, up to this many milliseconds (0 to 1000).
    #[arg(long, default_value = "0", value_parser = args::delay_ms())]
    pub jitter_ms: f64,
    /// Link rate in Mbit/s (0 = unlimited, else 0.1 to 100000).
    #[arg(long, default_value = "100", value_parser = args::rate_mbit())]
    pub bandwidth_mbit: f64,
}

impl FaultFlags {
    /// Refuses loss and corruption that together pass 25 %.
    pub fn check(&self) -> Result<(), String> {
        args::check_loss(self.loss, self.corrupt)
    }
}

/// Every knob of a simulated transfer.
#[derive(Args, Debug, Clone)]
pub struct TransferArgs {
    /// Bytes to send in each direction (e.g. 4096, 64MiB, 1GiB).
    #[arg(long, default_value = "16MiB", value_parser = parse_size)]
    pub bytes: u64,
    #[command(flatten)]
    pub faults: FaultFlags,
    /// Seed for every random choice of the run: the same seed replays the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Congestion controller: newreno or cubic.
    #[arg(long, default_value = "newreno")]
    pub cc: CcKind,
    /// one: host a sends to host b; both: each sends --bytes to the other at once.
    #[arg(long, default_value = "one")]
    pub direction: Direction,
    /// Fail the run if it has not completed after this many virtual seconds (0.001 to a year).
    #[arg(long, default_value = "600", value_parser = args::run_seconds())]
    pub time_limit_s: f64,
    /// Socket send buffer of each connection (e.g. 256KiB; 4 KiB to 1 GiB).
    #[arg(long, default_value = "256KiB", value_parser = args::tcp_buffer())]
    pub send_buffer: u64,
    /// Socket receive buffer of each connection (4 KiB to 1 GiB).
    #[arg(long, default_value = "256KiB", value_parser = args::tcp_buffer())]
    pub recv_buffer: u64,
    /// Bytes the link's queue holds before it tail-drops (with --bandwidth-mbit; 16 KiB to 1 GiB).
    #[arg(long, default_value = "256KiB", value_parser = args::queue_bytes())]
    pub queue_bytes: u64,
    /// Apply loss/duplication/reordering/corruption only from a to b, leaving the
    /// ACK path clean (the Mathis et al. model); delay and bandwidth still apply both ways.
    #[arg(long)]
    pub clean_reverse_path: bool,
    /// Run the connection over IPv6 (both simulated hosts dual-stack).
    #[arg(long)]
    pub ipv6: bool,
    /// Write every delivered frame to this pcap file (virtual timestamps).
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

impl TransferArgs {
    fn config(&self) -> TransferConfig {
        TransferConfig {
            bytes: self.bytes,
            loss: self.faults.loss,
            duplicate: self.faults.duplicate,
            reorder: self.faults.reorder,
            corrupt: self.faults.corrupt,
            delay_ms: self.faults.delay_ms,
            jitter_ms: self.faults.jitter_ms,
            bandwidth_mbit: self.faults.bandwidth_mbit,
            seed: self.seed,
            cc: self.cc,
            direction: self.direction,
            time_limit_s: self.time_limit_s,
            send_buffer: usize::try_from(self.send_buffer).unwrap_or(usize::MAX),
            recv_buffer: usize::try_from(self.recv_buffer).unwrap_or(usize::MAX),
            queue_bytes: usize::try_from(self.queue_bytes).unwrap_or(usize::MAX),
            reverse_faults: !self.clean_reverse_path,
            ipv6: self.ipv6,
            progress_interval_ms: 250,
            ..TransferConfig::default()
        }
    }
}

/// The demo: a both-ways transfer across a network that loses, duplicates,
/// reorders and corrupts frames, with progress and a summary.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Bytes to send in each direction.
    #[arg(long, default_value = "32MiB", value_parser = parse_size)]
    pub bytes: u64,
    /// Seed for the simulated network's faults.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Congestion controller: newreno or cubic.
    #[arg(long, default_value = "cubic")]
    pub cc: CcKind,
}

pub fn demo(a: &DemoArgs) -> ExitCode {
    let t = TransferArgs {
        bytes: a.bytes,
        faults: FaultFlags {
            loss: 0.01,
            duplicate: 0.005,
            reorder: 0.02,
            corrupt: 0.001,
            delay_ms: 5.0,
            jitter_ms: 1.0,
            bandwidth_mbit: 200.0,
        },
        seed: a.seed,
        cc: a.cc,
        direction: Direction::Both,
        time_limit_s: 600.0,
        send_buffer: 256 << 10,
        recv_buffer: 256 << 10,
        queue_bytes: 256 << 10,
        clean_reverse_path: false,
        ipv6: false,
        pcap: None,
        json: false,
    };
    println!("Outboard demo: two simulated hosts, each running the real Outboard IPv4/TCP stack,");
    println!(
        "send {} to each other at once over a {} Mbit/s link with {} ms one-way delay that loses 1 %,",
        human_bytes(t.bytes),
        t.faults.bandwidth_mbit,
        t.faults.delay_ms
    );
    println!("duplicates 0.5 %, reorders 2 % and corrupts 0.1 % of frames (seed {}, {:?}).", t.seed, t.cc);
    println!("Time is virtual: the run is exactly reproducible from its seed.\n");
    transfer(&t)
}

pub fn transfer(a: &TransferArgs) -> ExitCode {
    if let Err(e) = a.faults.check() {
        eprintln!("outboard: {e}");
        return ExitCode::from(2);
    }
    let cfg = a.config();
    let show_progress = !a.json;
    // On a terminal one line is rewritten in place; in a log, a line every two virtual seconds.
    let tty = std::io::stderr().is_terminal();
    let mut last_line = 0usize;
    let mut next_logged = 0.0f64;
    let mut progress = |p: &Progress| {
        if !show_progress {
            return;
        }
        let line = progress_line(p);
        let mut err = std::io::stderr().lock();
        if tty {
            let _ = write!(err, "\r{line:<last_line$}");
            let _ = err.flush();
            last_line = line.len();
        } else if p.virtual_seconds >= next_logged {
            let _ = writeln!(err, "{line}");
            next_logged = p.virtual_seconds + 2.0;
        }
    };
    let report = match &a.pcap {
        Some(path) => {
            let (report, pcap) = run_transfer_pcap(&cfg, &mut progress);
            if let Err(e) = std::fs::write(path, pcap) {
                eprintln!("\noutboard: cannot write pcap {}: {e}", path.display());
                return ExitCode::from(1);
            }
            report
        }
        None => run_transfer_with(&cfg, &mut progress),
    };
    if show_progress && last_line > 0 {
        eprintln!();
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("report serialises"));
    } else {
        print_summary(&report);
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "outboard: transfer FAILED (seed {}, first wrong byte offset {}): {}",
            report.seed,
            report.first_bad_offset.map_or("none".to_string(), |o| o.to_string()),
            report.reason.as_deref().unwrap_or("see report")
        );
        ExitCode::from(1)
    }
}

fn progress_line(p: &Progress) -> String {
    let pct = |r: u64| if p.bytes == 0 { 100.0 } else { r as f64 * 100.0 / p.bytes as f64 };
    format!(
        "t={:7.3}s  a->b {:5.1}%  b->a {:5.1}%  retransmits {:6}  cwnd {} / {} KiB",
        p.virtual_seconds,
        pct(p.received[0]),
        pct(p.received[1]),
        p.retransmits,
        p.cwnd[0] / 1024,
        p.cwnd[1] / 1024
    )
}

fn print_summary(r: &TransferReport) {
    println!("result           {}", if r.ok { "OK: every byte arrived, in order, SHA-256 identical" } else { "FAILED" });
    println!("seed             {}   (cc {}, direction {})", r.seed, r.cc, r.direction);
    println!("bytes            {} each way, {} delivered in all", human_bytes(r.bytes), human_bytes(r.bytes_delivered));
    println!("virtual time     {:.3} s", r.virtual_seconds);
    println!("goodput          {:.1} Mbit/s", r.goodput_mbit);
    println!("retransmits      {}", r.retransmits);
    for d in &r.directions {
        println!(
            "  {:<5} sha256 {}  goodput {:7.1} Mbit/s  retransmits {:5} (fast {}, RTO {})  srtt {:.2} ms  max cwnd {} KiB",
            d.name,
            if d.sha256_match { "match" } else { "DIFFERS" },
            d.goodput_mbit,
            d.sender.retransmits,
            d.sender.fast_retransmits,
            d.sender.rto_events,
            d.sender.srtt_us as f64 / 1000.0,
            d.sender.max_cwnd / 1024
        );
    }
    let f = &r.faults;
    println!(
        "faults           {} frames offered: {} lost, {} duplicated, {} reordered, {} corrupted, {} queue drops",
        f.frames_seen, f.dropped, f.duplicated, f.reordered, f.corrupted, f.queue_drops
    );
}

fn human_bytes(n: u64) -> String {
    crate::bench::checksum::human_size(n as usize)
}

// --- `sim messages`: the report (the runs are in sim_messages.rs) ---

#[derive(Serialize, Debug)]
pub struct MessagesReport {
    pub ok: bool,
    /// Why the run failed, when it did.
    pub reason: Option<String>,
    pub service: &'static str,
    pub seed: u64,
    pub count: u64,
    pub size: u64,
    pub outstanding: Option<usize>,
    /// Payload bytes that arrived (requests and responses for rpc).
    pub bytes: u64,
    /// From the end of the warm-up to the last delivery (or the failure).
    pub virtual_seconds: f64,
    pub throughput_mbit: f64,
    /// Messages delivered, or calls answered, per virtual second.
    pub per_second: f64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// Messages delivered (datagrams: distinct ones), calls answered.
    pub delivered: u64,
    /// `count - delivered`: datagrams lost, or what a failed run had not delivered.
    pub lost: u64,
    /// Extra copies of datagrams (the network duplicated a whole one).
    pub duplicates: u64,
    /// Message frames, requests and replies sent again, both endpoints.
    pub retransmissions: u64,
    /// Host a's endpoint, then host b's.
    pub endpoints: Vec<Counters>,
    /// Every link's counters, the warm-up's few frames (never faulted) included.
    pub faults: FaultStats,
}

/// The key counters of one endpoint: `role`, every `drop_*` together, the
/// stack's refusals, then these fields of `Endpoint::stats()`.
macro_rules! counters {
    ($($field:ident),* $(,)?) => {
        #[derive(Serialize, Debug)]
        pub struct Counters {
            pub role: &'static str,
            pub drops: u64,
            /// UDP payloads the host's stack refused (its queue was full).
            pub send_refused: u64,
            $(pub $field: u64,)*
        }

        impl Counters {
            pub fn of(role: &'static str, s: &Stats, send_refused: u64) -> Counters {
                let drops = s.drop_malformed + s.drop_unsupported + s.drop_no_mailbox + s.drop_stale_session
                    + s.drop_too_big + s.drop_reassembly_memory + s.drop_reassembly_timeout + s.drop_mailbox_full
                    + s.drop_duplicate + s.drop_beyond_credit + s.drop_stale_flow + s.drop_flow_table_full + s.drop_stray;
                Counters { role, drops, send_refused, $($field: s.$field,)* }
            }

            /// The counters by name, `send_refused` included.
            fn named(&self) -> Vec<(&'static str, u64)> {
                vec![("send_refused", self.send_refused), $((stringify!($field), self.$field),)*]
            }
        }
    };
}

counters!(
    frames_in, frames_out, drop_duplicate, drop_malformed, drop_stray, drop_reassembly_timeout,
    messages_sent, messages_acked, message_frames_retransmitted, acks_sent, probes_sent, datagrams_sent,
    calls_completed, requests_retransmitted, requests_executed, duplicate_requests, replies_resent,
);

impl Counters {
    pub fn retransmissions(&self) -> u64 {
        self.message_frames_retransmitted + self.requests_retransmitted + self.replies_resent
    }
}

pub fn print_messages(r: &MessagesReport) {
    let verdict = match (r.ok, r.service) {
        (false, _) => "FAILED",
        (true, "reliable") => "OK: every message delivered once, in order, byte-exact",
        (true, "rpc") => "OK: every response correct, every call run exactly once",
        _ => "OK: every datagram delivered was whole and intact",
    };
    let size = args::show_size(r.size);
    println!("result           {verdict}");
    match r.outstanding {
        Some(k) => println!("service          rpc, {} calls of {size}, {k} outstanding, seed {}", r.count, r.seed),
        None => println!("service          {}, {} messages of {size}, seed {}", r.service, r.count, r.seed),
    }
    let unit = if r.service == "rpc" { "calls" } else { "messages" };
    println!("delivered        {} of {} ({} lost, {} duplicated)", r.delivered, r.count, r.lost, r.duplicates);
    println!("bytes            {}", human(r.bytes));
    println!("virtual time     {:.3} s", r.virtual_seconds);
    println!("rate             {:.0} {unit}/s, {:.2} Mbit/s", r.per_second, r.throughput_mbit);
    if let (Some(p50), Some(p99)) = (r.latency_p50_ms, r.latency_p99_ms) {
        println!("call latency     p50 {p50:.3} ms, p99 {p99:.3} ms");
    }
    println!("retransmissions  {}", r.retransmissions);
    for e in &r.endpoints {
        // The counters this run moved, by name (the JSON has them all).
        let moved: Vec<String> =
            e.named().into_iter().filter(|&(k, v)| v > 0 && !k.starts_with("frames_")).map(|(k, v)| format!("{k} {v}")).collect();
        let moved = if moved.is_empty() { String::new() } else { format!(": {}", moved.join(", ")) };
        println!("  {:<8} frames in {}, out {}, drops {}{moved}", e.role, e.frames_in, e.frames_out, e.drops);
    }
    let f = &r.faults;
    println!(
        "faults           {} frames offered: {} lost, {} duplicated, {} reordered, {} corrupted, {} queue drops",
        f.frames_seen, f.dropped, f.duplicated, f.reordered, f.corrupted, f.queue_drops
    );
}

/// `64000` as `62.5 KiB`.
fn human(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1048576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1048576.0),
    }
}
