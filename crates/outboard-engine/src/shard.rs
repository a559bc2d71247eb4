//! A shard: one stack, one link, run to completion.
//!
//! Each turn: receive a burst from the link → the stack demultiplexes and
//! runs the protocols → the services and clients (the shard's
//! applications until boards arrive) get the connections the stack says
//! have events → expire timers → transmit a burst, building each frame in
//! the link's own slot → flush. `turn` takes the time as an argument and
//! does only the link's I/O; `run` is the loop that reads the clock and
//! sleeps.
//!
//! Offloads: frames go through the links' `receive`/`transmit` with their
//! metas and the stack's `receive_frame_offloaded`/`poll_transmit_meta`; the
//! stack was built with the link's `offloads()` (engine), so a link without
//! offloads sees only plain frames.
//!
//! Idle: after `SPIN` of turns with nothing to do, the shard sleeps in the
//! link's `wait` (poll on the ring's fd, or a futex on the fabric) until the
//! stack's next deadline, a frame, or a control request — at most
//! `MAX_SLEEP`, so a stop flag is seen within that. An idle engine thus
//! costs a wake-up per `MAX_SLEEP` plus its TCP timers.
//!
//! Seams for many shards (one today): the shard owns its stack, link,
//! services and buffers outright and shares nothing; the stack's
//! `tcp_connect` picks source ports that steer to the shard index and count
//! in its `StackConfig` (`outboard_stack::steer`).

use crate::capture::PcapWriter;
use crate::client::Fetch;
use crate::control::ControlInbox;
use crate::host::Host;
use crate::link::{Link, LinkError, TxStatus};
use crate::services::Services;
use crate::stat::{ConnRow, LinkSnapshot, ShardCounters, Snapshot};
use outboard_stack::Stack;
use outboard_time::{Duration, Instant};
use std::sync::atomic::{AtomicBool, Ordering};

/// Frames taken from the link per turn.
pub const RX_BURST: usize = 64;
/// Frames handed to the link per turn.
pub const TX_BURST: usize = 256;
/// Busy-poll this long after the last work before sleeping.
pub const SPIN: Duration = Duration::from_micros(50);
/// Longest sleep, so a stop request is seen promptly.
pub const MAX_SLEEP: Duration = Duration::from_millis(100);

pub struct Shard {
    pub stack: Stack,
    link: Box<dyn Link>,
    pub services: Services,
    pub fetches: Vec<Fetch>,
    /// Applications attached through boards.
    pub host: Host,
    pcap: Option<PcapWriter>,
    counters: ShardCounters,
    memory_cap: usize,
    started: Instant,
    cpu_at_start: Duration,
    name: String,
}

impl Shard {
    pub fn new(
        name: &str,
        stack: Stack,
        link: Box<dyn Link>,
        services: Services,
        pcap: Option<PcapWriter>,
        memory_cap: usize,
        now: Instant,
    ) -> Shard {
        Shard {
            stack,
            link,
            services,
            fetches: Vec::new(),
            host: Host::default(),
            pcap,
            counters: ShardCounters::default(),
            memory_cap,
            started: now,
            cpu_at_start: crate::clock::thread_cpu_time(),
            name: name.to_string(),
        }
    }

    pub fn link(&self) -> &dyn Link {
        &*self.link
    }

    /// One run-to-completion turn at `now`. True if it did any work.
    pub fn turn(&mut self, now: Instant) -> Result<bool, LinkError> {
        let mut work = false;
        self.counters.turns += 1;
        {
            let stack = &mut self.stack;
            let pcap = &mut self.pcap;
            let n = self.link.receive(RX_BURST, &mut |f, meta| {
                if let Some(p) = pcap.as_mut() {
                    p.record(now, f);
                }
                stack.receive_frame_offloaded(now, f, meta);
            })?;
            work |= n > 0;
        }
        if self.stack.poll_timeout().is_some_and(|t| t <= now) {
            self.stack.handle_timeout(now);
            work = true;
        }
        work |= self.applications(now);
        work |= self.transmit(now)?;
        if work {
            self.counters.busy_turns += 1;
        }
        Ok(work)
    }

    /// The shard's applications: services and client fetches.
    fn applications(&mut self, now: Instant) -> bool {
        // The memory scan is O(connections): only when someone waits to be accepted.
        let (cap, paused) = (self.memory_cap, &mut self.counters.accept_paused_turns);
        let mut may_accept = |stack: &Stack| {
            let ok = stack.memory_in_use() < cap;
            if !ok {
                *paused += 1;
            }
            ok
        };
        let mut work = self.services.poll(&mut self.stack, now, &mut may_accept);
        work |= self.host.poll(&mut self.stack, now, &mut may_accept);
        while let Some(id) = self.stack.tcp_poll_ready() {
            work = true;
            if !self.services.handle_ready(&mut self.stack, id) && !self.host.handle_ready(&mut self.stack, id) {
                if let Some(f) = self.fetches.iter_mut().find(|f| f.conn() == Some(id)) {
                    f.poll(&mut self.stack, now);
                }
            }
        }
        // Clients refill their send buffers as ACKs free room.
        for f in self.fetches.iter_mut().filter(|f| !f.is_finished()) {
            f.poll(&mut self.stack, now);
        }
        self.host.flush();
        work
    }

    fn transmit(&mut self, now: Instant) -> Result<bool, LinkError> {
        let mut work = false;
        let stack = &mut self.stack;
        let pcap = &mut self.pcap;
        for _ in 0..TX_BURST {
            // With offloads the stack builds TSO segments in the link's slot
            // and says how the kernel must cut and checksum them.
            let status = self.link.transmit(&mut |buf| {
                let (n, meta) = stack.poll_transmit_meta(now, buf)?;
                if let Some(p) = pcap.as_mut() {
                    match meta.csum {
                        // A partial checksum (pseudo-header sum only) is
                        // finished by the kernel after us: capture a copy
                        // with it finished, as the bytes will be on the wire.
                        Some((start, off)) => {
                            let mut copy = buf[..n].to_vec();
                            crate::link::vnet::finish_csum(&mut copy, start as usize, off as usize);
                            p.record(now, &copy);
                        }
                        None => p.record(now, &buf[..n]),
                    }
                }
                Some((n, meta))
            })?;
            match status {
                TxStatus::Queued => work = true,
                TxStatus::Idle => break,
                TxStatus::Full => {
                    work = true;
                    break;
                }
            }
        }
        self.link.flush()?;
        Ok(work)
    }

    /// The next time the shard must run even if nothing arrives.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.stack.poll_timeout()
    }

    /// Loops until `stop` is set or `done` says so, answering control
    /// requests between turns and sleeping when idle.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        mut inbox: Option<&mut ControlInbox>,
        mut done: impl FnMut(&Shard) -> bool,
    ) -> Result<(), LinkError> {
        let mut idle_since: Option<Instant> = None;
        loop {
            if stop.load(Ordering::Relaxed) || done(self) {
                break;
            }
            let now = crate::clock::now();
            let work = self.turn(now)?;
            self.serve_control(inbox.as_deref_mut(), now);
            if work {
                idle_since = None;
                continue;
            }
            let since = *idle_since.get_or_insert(now);
            if now.saturating_duration_since(since) < SPIN {
                continue;
            }
            self.sleep(inbox.as_deref(), now, MAX_SLEEP)?;
            idle_since = None;
        }
        self.host.shutdown(&mut self.stack);
        if let Some(p) = self.pcap.as_mut() {
            p.flush();
        }
        Ok(())
    }

    /// Answers waiting control requests (`outboard stat`).
    pub fn serve_control(&mut self, inbox: Option<&mut ControlInbox>, now: Instant) {
        if let Some(inbox) = inbox {
            while let Some(req) = inbox.try_next() {
                let answer = self.answer(&req.line, now);
                let _ = req.reply.send(answer);
            }
        }
    }

    /// Sleeps until the next deadline, a frame, a control request or an
    /// application's command — at most `longest`.
    pub fn sleep(&mut self, inbox: Option<&ControlInbox>, now: Instant, longest: Duration) -> Result<(), LinkError> {
        let mut timeout = longest;
        if let Some(d) = self.next_deadline() {
            timeout = timeout.min(d.saturating_duration_since(now));
        }
        if timeout.is_zero() {
            return Ok(());
        }
        // Applications ring the doorbell only while the boards say we sleep.
        if self.host.prepare_sleep(self.link.wakes_on_futex()) {
            self.host.after_sleep();
            return Ok(());
        }
        let fds: Vec<_> = inbox.map(|i| i.doorbell_fd()).into_iter().chain(self.host.doorbell_fd()).collect();
        let futexes = self.host.sleep_futexes();
        self.link.wait(timeout, &fds, &futexes)?;
        drop(futexes);
        self.host.after_sleep();
        self.counters.sleeps += 1;
        Ok(())
    }

    fn answer(&mut self, line: &str, now: Instant) -> String {
        match line {
            "stat" | "stat json" | "" => {
                serde_json::to_string(&self.snapshot(now)).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
            }
            other => format!("{{\"error\":\"unknown request {:?}: try stat\"}}", other),
        }
    }

    pub fn snapshot(&mut self, now: Instant) -> Snapshot {
        if let Some(p) = self.pcap.as_mut() {
            p.flush();
            self.counters.pcap_frames = p.frames;
        }
        self.counters.wall_s = now.saturating_duration_since(self.started).as_secs_f64();
        self.counters.cpu_s = crate::clock::thread_cpu_time()
            .saturating_sub(self.cpu_at_start)
            .as_secs_f64();
        let cfg = self.stack.config();
        let owner = |id| {
            if let Some(s) = self.services.owner_of(id) {
                s.to_string()
            } else if let Some(session) = self.host.owner_of(id) {
                format!("board:{session}")
            } else if self.fetches.iter().any(|f| f.conn() == Some(id) && !f.is_finished()) {
                "fetch".to_string()
            } else {
                String::new()
            }
        };
        let connections = self
            .stack
            .tcp_connections()
            .into_iter()
            .map(|(id, t, state, s)| ConnRow {
                local: t.local.to_string(),
                remote: t.remote.to_string(),
                state: format!("{state:?}"),
                owner: owner(id),
                send_queue: s.send_queue,
                recv_queue: s.recv_queue,
                cwnd: s.cwnd,
                srtt_us: s.srtt_us,
                retransmits: s.retransmits,
                challenge_acks: s.challenge_acks,
                dropped_segments: s.dropped_segments,
                bytes_in: s.bytes_in,
                bytes_out: s.bytes_out,
                memory: s.memory,
            })
            .collect();
        Snapshot {
            name: self.name.clone(),
            pid: std::process::id(),
            addr: format!("{}/{}", cfg.addr, cfg.prefix_len),
            gateway: cfg.gateway.map(|g| g.to_string()),
            link: LinkSnapshot::new(&self.link.info(), &self.link.counters()),
            shard: self.counters.clone(),
            stack: self.stack.stats().iter().map(|(k, v)| (k.to_string(), v)).collect(),
            memory_in_use: self.stack.memory_in_use(),
            memory_cap: self.memory_cap,
            arp_entries: self.stack.arp_entries(),
            connections,
            services: self.services.counters().to_vec(),
            boards: self.host.rows(),
            host: self.host.totals(),
            board_memory: self.host.board_bytes(),
        }
    }
}
