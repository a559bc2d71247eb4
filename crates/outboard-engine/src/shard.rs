//! A shard: one stack, one link, run to completion.
//!
//! Each turn: receive a burst from the link → the stack demultiplexes and
//! runs the protocols → expire timers → the shard's apps (built-in
//! services, board sessions, client fetches: every `app::ShardApp`) poll
//! and get the connections the stack says have events → transmit a burst,
//! building each frame in the link's own slot → flush. `turn` takes the time as an argument and
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
//! Many shards: a shard owns its stack, link, apps and buffers outright and
//! shares nothing; its `index` is the one its boards' rings and endpoints
//! are numbered by, and its stack's `tcp_connect` picks source ports that
//! steer back to it (`outboard_stack::steer`, from the shard index and count
//! in its `StackConfig`).

use crate::app::{Apps, ShardApp};
use crate::capture::PcapWriter;
use crate::control::ControlInbox;
use crate::link::{Link, LinkError, TxStatus};
use crate::stat::{ConnRow, LinkSnapshot, ShardCounters, ShardRow, Snapshot};
use crate::steering::{Owner, Proto, ShardPort};
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
    /// Which shard of its engine this is (0-based).
    pub index: u32,
    pub stack: Stack,
    link: Box<dyn Link>,
    /// What runs on the shard, and the one table from connection to owner.
    pub apps: Apps,
    pcap: Option<PcapWriter>,
    counters: ShardCounters,
    started: Instant,
    cpu_at_start: Duration,
    /// The CPU clock of the thread that runs this shard (`reset_cpu_clock`).
    cpu_clock: libc::clockid_t,
    name: String,
    /// The other shards of a multi-shard engine (steering and forwarding).
    mesh: Option<ShardPort>,
    /// The bound ports last published to the steering table, and when.
    published: (u64, Vec<u16>, Vec<u16>),
    /// Network-device mode: the host kernel's TAP interface.
    kernel: Option<crate::kernel::KernelPort>,
    /// Live upgrade: the new engine confirmed; this shard stops for good
    /// and leaves everything it shared (link, sockets) alone.
    handed_over: bool,
    /// Made by `waker`: another thread of this process gets the shard out of its sleep.
    waker: Option<std::sync::Arc<Waker>>,
}

/// Gets a shard out of its sleep from another thread of the process, and
/// keeps it from starting one meanwhile: the in-process engine's
/// application threads (`outboard-embedded`) use it when one of them runs
/// the engine's turns and keeps finding the engine taken by the engine
/// thread, which sleeps holding it. Its turns would otherwise all find the
/// engine taken until a frame or a deadline woke the sleeper; woken, the
/// engine thread stands aside instead.
///
/// It wakes the sleeper the way it sleeps: an eventfd on links that sleep
/// on file descriptors, a futex word on links that sleep on futexes (one
/// system call either way, none while the shard is awake).
pub struct Waker {
    /// How the shard sleeps now: `AWAKE`, `ON_FD` or `ON_FUTEX`.
    sleeping: std::sync::atomic::AtomicU8,
    word: std::sync::atomic::AtomicU32,
    fd: std::os::fd::OwnedFd,
    /// Set by `wake`; the shard takes it when it would sleep, or after it slept.
    wanted: AtomicBool,
}

const AWAKE: u8 = 0;
const ON_FD: u8 = 1;
const ON_FUTEX: u8 = 2;

impl Waker {
    fn new() -> std::io::Result<Waker> {
        let fd = outboard_board::wake::new_eventfd()?;
        Ok(Waker { sleeping: AWAKE.into(), word: 0.into(), fd, wanted: AtomicBool::new(false) })
    }

    /// The shard, if it sleeps, wakes now; if it is about to, it does not sleep.
    pub fn wake(&self) {
        // SeqCst, before looking at `sleeping`: the shard sets `sleeping`
        // and then looks at `wanted`, so one of us sees the other.
        self.wanted.store(true, Ordering::SeqCst);
        match self.sleeping.load(Ordering::SeqCst) {
            AWAKE => {}
            ON_FUTEX => {
                self.word.fetch_add(1, Ordering::SeqCst);
                outboard_board::futex::wake(&self.word, 1);
            }
            _ => outboard_board::wake::ring_eventfd(std::os::fd::AsRawFd::as_raw_fd(&self.fd)),
        }
    }
}

impl Shard {
    pub fn new(
        name: &str,
        index: u32,
        stack: Stack,
        link: Box<dyn Link>,
        pcap: Option<PcapWriter>,
        memory_cap: usize,
        now: Instant,
    ) -> Shard {
        Shard {
            index,
            stack,
            link,
            apps: Apps::new(memory_cap),
            pcap,
            counters: ShardCounters::default(),
            started: now,
            cpu_at_start: crate::clock::thread_cpu_time(),
            cpu_clock: crate::clock::thread_cpu_clock(),
            name: name.to_string(),
            mesh: None,
            published: (u64::MAX, Vec::new(), Vec::new()),
            kernel: None,
            handed_over: false,
            waker: None,
        }
    }

    /// The shard's waker (made at the first call; see [`Waker`]).
    pub fn waker(&mut self) -> std::io::Result<std::sync::Arc<Waker>> {
        if self.waker.is_none() {
            self.waker = Some(std::sync::Arc::new(Waker::new()?));
        }
        Ok(self.waker.clone().expect("made above"))
    }

    /// Whether this shard handed its link and sockets to an engine that upgraded this one.
    pub fn handed_over(&self) -> bool {
        self.handed_over
    }

    /// Shares the link with the host kernel through `port` (network-device mode).
    pub fn set_kernel_port(&mut self, port: crate::kernel::KernelPort) {
        self.kernel = Some(port);
    }

    /// Joins the shard to its engine's other shards: frames the link hands
    /// it for another shard go there, and its bound ports are published to
    /// the steering table.
    pub fn join_mesh(&mut self, port: ShardPort) {
        self.mesh = Some(port);
        self.publish_ports();
    }

    /// Publishes the ports this shard's stack has bound, if they changed.
    pub(crate) fn publish_ports(&mut self) {
        let Some(mesh) = &self.mesh else { return };
        let generation = self.stack.ports_generation();
        if generation == self.published.0 {
            return;
        }
        let (tcp, udp) = self.stack.bound_ports();
        let table = &mesh.steer.ports;
        table.update(Proto::Tcp, mesh.index, &self.published.1, &tcp);
        table.update(Proto::Udp, mesh.index, &self.published.2, &udp);
        self.published = (generation, tcp, udp);
    }

    /// Every CPU the calling thread used since it started this shard
    /// (called once in the shard's own thread, when it starts running).
    pub fn reset_cpu_clock(&mut self) {
        self.cpu_at_start = crate::clock::thread_cpu_time();
        self.cpu_clock = crate::clock::thread_cpu_clock();
    }

    pub fn link(&self) -> &dyn Link {
        &*self.link
    }

    /// Adds something to run on this shard.
    pub fn add_app(&mut self, app: Box<dyn ShardApp>) {
        self.apps.add(app);
    }

    /// Runs `f` on this shard's first app of type `A` (with its context: the
    /// stack, the time, its owner-table entries).
    pub fn with_app<A: ShardApp, R>(&mut self, now: Instant, f: impl FnOnce(&mut A, &mut crate::app::AppCx<'_>) -> R) -> Option<R> {
        self.apps.with(&mut self.stack, now, f)
    }

    /// One run-to-completion turn at `now`. True if it did any work.
    pub fn turn(&mut self, now: Instant) -> Result<bool, LinkError> {
        let mut work = false;
        self.counters.turns += 1;
        {
            let stack = &mut self.stack;
            let pcap = &mut self.pcap;
            let mesh = &mut self.mesh;
            let kernel = &mut self.kernel;
            let n = self.link.receive(RX_BURST, &mut |f, meta| {
                outboard_trace::frame(outboard_trace::Hop::FrameIn, f);
                if let Some(p) = pcap.as_mut() {
                    p.record(now, f);
                }
                if let Some(k) = kernel.as_mut() {
                    // Network-device mode (one shard): the kernel gets what the engine does not own.
                    match k.claim(stack, f) {
                        outboard_stack::FrameClaim::Stack => stack.receive_frame_offloaded(now, f, meta),
                        outboard_stack::FrameClaim::Kernel => k.to_kernel(f, false),
                        outboard_stack::FrameClaim::Both => {
                            k.to_kernel(f, true);
                            stack.receive_frame_offloaded(now, f, meta);
                        }
                    }
                    return;
                }
                match mesh {
                    None => stack.receive_frame_offloaded(now, f, meta),
                    Some(m) => steer_received(m, stack, now, f, meta),
                }
            })?;
            work |= n > 0;
            if let Some(k) = kernel.as_mut() {
                work |= k.from_kernel(RX_BURST)? > 0;
            }
            if let Some(m) = mesh.as_mut() {
                let index = m.index;
                let mut neighbour = Vec::new();
                work |= m.receive(RX_BURST, &mut |f, meta| {
                    // Shard 0 gives every neighbour frame (ARP, IPv6
                    // neighbour discovery) to the others to learn from, as
                    // it does with those from its own link.
                    if index == 0 && is_neighbour_frame(f) {
                        neighbour.push(f.to_vec());
                    }
                    stack.receive_frame_offloaded(now, f, meta);
                }) > 0;
                for f in neighbour {
                    copy_neighbour_frame(m, &f);
                }
            }
        }
        if self.stack.poll_timeout().is_some_and(|t| t <= now) {
            self.stack.handle_timeout(now);
            work = true;
        }
        work |= self.applications(now);
        self.publish_ports();
        work |= self.transmit(now)?;
        if work {
            self.counters.busy_turns += 1;
        }
        Ok(work)
    }

    /// The shard's apps: poll each, hand out ready connections, flush.
    fn applications(&mut self, now: Instant) -> bool {
        self.apps.turn(&mut self.stack, now)
    }

    fn transmit(&mut self, now: Instant) -> Result<bool, LinkError> {
        let mut work = false;
        // What the host kernel sent through its TAP leaves first, as it is.
        if let Some(k) = self.kernel.as_mut() {
            while let Some(f) = k.next_for_wire() {
                let n = f.len();
                let pcap = &mut self.pcap;
                let status = self.link.transmit(&mut |buf| {
                    if buf.len() < n {
                        return None;
                    }
                    buf[..n].copy_from_slice(&f);
                    if let Some(p) = pcap.as_mut() {
                        p.record(now, &buf[..n]);
                    }
                    Some((n, Default::default()))
                })?;
                match status {
                    TxStatus::Queued => {
                        k.counters.from_kernel += 1;
                        work = true;
                    }
                    TxStatus::Full => {
                        k.unsent(f);
                        break;
                    }
                    // The frame did not fit a slot (larger than the link's MTU): dropped.
                    TxStatus::Idle => k.counters.from_kernel_dropped += 1,
                }
            }
        }
        let stack = &mut self.stack;
        let pcap = &mut self.pcap;
        for _ in 0..TX_BURST {
            // With offloads the stack builds TSO segments in the link's slot
            // and says how the kernel must cut and checksum them.
            let status = self.link.transmit(&mut |buf| {
                let (n, meta) = stack.poll_transmit_meta(now, buf)?;
                // The hop trace: the frame is built and about to be the link's
                // (a shared-memory link's peer may see it before our flush returns).
                outboard_trace::frame(outboard_trace::Hop::FrameOut, &buf[..n]);
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
        match (self.stack.poll_timeout(), self.apps.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Nothing of an application's is left to deliver: no board attached,
    /// and no connection whose data or FIN still waits to be sent or
    /// acknowledged (TIME-WAIT, FIN-WAIT-2 and half-open handshakes do not
    /// count: their peers already have every byte). An engine inside a
    /// program that exits runs until this holds (`outboard run --inline`),
    /// as the kernel keeps sending after a process's last `close`.
    pub fn quiescent(&self) -> bool {
        use outboard_tcp::State;
        if self.apps.get::<crate::host::Host>().is_some_and(|h| !h.rows().is_empty()) {
            return false;
        }
        !self.stack.tcp_connections().iter().any(|(_, _, state, _)| {
            matches!(state, State::SynSent | State::Established | State::FinWait1 | State::CloseWait | State::Closing | State::LastAck)
        })
    }

    /// Counts a turn that an application's thread ran (an engine shared
    /// with the program's threads, `outboard_embedded::shared`).
    pub fn count_app_turn(&mut self) {
        self.counters.app_turns += 1;
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
            if self.handed_over {
                // Everything is the new engine's: no word to applications or peers.
                return Ok(());
            }
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
        self.apps.shutdown(&mut self.stack, crate::clock::now());
        if let Some(p) = self.pcap.as_mut() {
            p.flush();
        }
        Ok(())
    }

    /// Answers waiting control requests (`outboard stat`).
    pub fn serve_control(&mut self, inbox: Option<&mut ControlInbox>, now: Instant) {
        if let Some(inbox) = inbox {
            while let Some(req) = inbox.try_next() {
                if let Some(side) = req.upgrade {
                    self.offer_upgrade(side);
                    if self.handed_over {
                        return;
                    }
                    continue;
                }
                let answer = self.answer(&req.line, now);
                let _ = req.reply.send(answer);
            }
        }
    }

    /// Live upgrade (`upgrade` module): stops here, between two turns,
    /// offers the record and the descriptors, and waits for the outcome —
    /// stopping for good if the new engine confirmed, resuming if not.
    fn offer_upgrade(&mut self, side: crate::upgrade::ShardSide) {
        use crate::log::{self, Level};
        // Every shard has stopped reading its link: then what the others
        // forwarded here before they stopped goes into this stack, not lost.
        let offer = if !side.gate.arrive_and_wait(std::time::Duration::from_secs(5)) {
            Err("the engine's shards did not all stop within 5 s".to_string())
        } else {
            if let Some(m) = self.mesh.as_mut() {
                let now = crate::clock::now();
                let stack = &mut self.stack;
                for _ in 0..64 {
                    if m.receive(RX_BURST, &mut |f, meta| stack.receive_frame_offloaded(now, f, meta)) == 0 {
                        break;
                    }
                }
            }
            self.upgrade_record()
        };
        if let Err(e) = &offer {
            log::event(Level::Warn, "upgrade_refused", &[("reason", e)]);
            let _ = side.offer.send(offer);
            return;
        }
        let quiesced = crate::clock::now();
        // The new engine appends to the same capture: ours goes out first.
        if let Some(p) = self.pcap.as_mut() {
            p.flush();
        }
        if side.offer.send(offer).is_err() {
            return;
        }
        let outcome = side.outcome.recv_timeout(crate::upgrade::CONFIRM_WAIT + std::time::Duration::from_secs(5));
        if outcome == Ok(true) {
            log::event(Level::Info, "upgrade_handed_over", &[("shard", &self.index)]);
            self.handed_over = true;
        } else {
            let paused = crate::clock::now().saturating_duration_since(quiesced);
            log::event(
                Level::Warn,
                "upgrade_rolled_back",
                &[("reason", &"the new engine did not confirm"), ("paused_ms", &format!("{:.1}", paused.as_nanos() as f64 / 1e6))],
            );
        }
    }

    /// What this shard hands over (the record as JSON, and the link's
    /// descriptors), or why it cannot.
    fn upgrade_record(&mut self) -> Result<(String, Vec<std::os::fd::RawFd>), String> {
        use crate::upgrade::{Holder, LentPlaces, Record, TcpRecord};
        use outboard_tcp::State;
        let args = crate::upgrade::command_line()
            .ok_or("this engine was not started by `outboard engine`: it has no command line to hand over")?
            .to_vec();
        // Network-device mode: the kernel's TAP goes too (its descriptors after the link's).
        let kernel = self.kernel.as_mut().map(|k| k.hand_over()).transpose()?;
        let shards = self.mesh.as_ref().map_or(1, |m| m.steer.shards);
        let boards = match self.apps.get::<crate::host::Host>() {
            Some(h) => h.export(&self.stack)?,
            None => crate::host::takeover::BoardsExport {
                record: Default::default(),
                fds: Vec::new(),
                streams: Default::default(),
            },
        };
        let services = self.apps.get::<crate::services::Services>();
        let mut tcp = Vec::new();
        for (id, tuple, state, _) in self.stack.tcp_connections() {
            if state == State::Closed {
                continue; // finished: freed at the next turn
            }
            let Some((conn, held)) = self.stack.tcp_export(id) else {
                return Err(format!(
                    "busy: connection {} - {} is in its handshake or waiting to be accepted ({state:?}); try again",
                    tuple.local, tuple.remote
                ));
            };
            let (send, recv) = conn.lent_places();
            let lent = (send.is_some() || recv.is_some()).then_some(LentPlaces { send, recv });
            let handed_board = |b: u64| boards.record.sessions.iter().any(|s| s.id == b);
            if conn.in_lent_storage() && !lent.iter().flat_map(|l| [l.send, l.recv]).flatten().all(|(b, _)| handed_board(b)) {
                // Its bytes are in the region of a board that is gone (its
                // application detached): no memfd to hand on.
                return Err(format!(
                    "busy: connection {} - {} has its buffers in the region of a board that has gone; try again once it has closed",
                    tuple.local, tuple.remote
                ));
            }
            let holder = if !held {
                Holder::Released
            } else if let Some(&(session, ep)) = boards.streams.get(&id) {
                Holder::Board { session, ep }
            } else {
                match services.and_then(|s| s.export(id)) {
                    Some(r) => Holder::Service(r),
                    None => {
                        return Err(format!(
                            "connection {} - {} belongs to {}: only the built-in services' and applications' connections can be handed over yet",
                            tuple.local,
                            tuple.remote,
                            self.apps.owner_label(id)
                        ))
                    }
                }
            };
            tcp.push(TcpRecord { conn, holder, lent });
        }
        let link = self.link.hand_over()?;
        let (tcp_ports, udp_ports) = self.stack.bound_ports();
        let mut fds: Vec<std::os::fd::RawFd> = link.fds.iter().map(|(_, fd)| *fd).collect();
        let mut fd_names: Vec<String> = link.fds.iter().map(|(name, _)| name.to_string()).collect();
        for (name, fd) in kernel.iter().flat_map(|k| &k.fds) {
            fd_names.push(format!("kernel tap {}", name.trim_start_matches("link ")));
            fds.push(*fd);
        }
        for (name, fd) in &boards.fds {
            fd_names.push(name.clone());
            fds.push(*fd);
        }
        let record: Record<&outboard_tcp::Connection> = Record {
            version: crate::upgrade::RECORD_VERSION,
            shard: self.index,
            shards: shards as u32,
            pid: std::process::id(),
            args,
            quiesced_ns: crate::clock::now().as_nanos(),
            secret: self.stack.config().secret,
            link,
            tcp_ports,
            udp_ports,
            fds: fd_names,
            arp: self.stack.arp_export(),
            tcp,
            boards: boards.record,
        };
        let json = serde_json::to_string(&record).map_err(|e| format!("writing the upgrade record: {e}"))?;
        Ok((json, fds))
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
        if self.apps.prepare_sleep(self.link.wakes_on_futex()) {
            self.after_sleep();
            return Ok(());
        }
        // Other shards ring ours only while we say we sleep; look once more after saying it.
        let bell_word = self.mesh.as_ref().map(|m| {
            let word = m.bell().word.load(std::sync::atomic::Ordering::SeqCst);
            m.bell().sleeping.store(true, std::sync::atomic::Ordering::SeqCst);
            word
        });
        if self.mesh.as_mut().is_some_and(|m| m.pending()) {
            self.wake_from_mesh();
            self.after_sleep();
            return Ok(());
        }
        // The same for our waker: say how we sleep, then look for a wake meanwhile.
        let on_futex = self.link.wakes_on_futex();
        let waker_word = self.waker.as_ref().map(|w| {
            let word = w.word.load(Ordering::SeqCst);
            w.sleeping.store(if on_futex { ON_FUTEX } else { ON_FD }, Ordering::SeqCst);
            word
        });
        if self.waker.as_ref().is_some_and(|w| w.wanted.load(Ordering::SeqCst)) {
            self.wake_from_waker(false);
            self.wake_from_mesh();
            self.after_sleep();
            return Ok(());
        }
        let mut wake = self.apps.wake_sources();
        wake.fds.extend(inbox.map(|i| i.doorbell_fd()));
        wake.fds.extend(self.kernel.as_ref().map(|k| k.fd()));
        if let (Some(m), Some(word)) = (self.mesh.as_ref(), bell_word) {
            wake.fds.push(m.bell().fd());
            wake.futexes.push((&m.bell().word, word));
        }
        if let (Some(w), Some(word)) = (self.waker.as_ref(), waker_word) {
            match on_futex {
                true => wake.futexes.push((&w.word, word)),
                false => wake.fds.push(std::os::fd::AsRawFd::as_raw_fd(&w.fd)),
            }
        }
        let slept = self.link.wait(timeout, &wake.fds, &wake.futexes);
        drop(wake);
        self.wake_from_waker(!on_futex);
        slept?;
        self.wake_from_mesh();
        self.after_sleep();
        self.counters.sleeps += 1;
        Ok(())
    }

    /// The apps' end of a sleep; a wake-up they took that may have been
    /// another shard's (the attach doorbell is one for all) is passed on to
    /// every shard that sleeps, which looks at its rings and sleeps again.
    fn after_sleep(&mut self) {
        if self.apps.after_sleep() {
            if let Some(m) = &self.mesh {
                m.wake_others();
            }
        }
    }

    /// The waker's end of a sleep (or a sleep not taken); `drain`: its
    /// eventfd was slept on and may have been rung. Emptied after every
    /// such sleep, not only when `wanted` was set: a wake that saw us
    /// asleep may write the eventfd after we took `wanted`.
    fn wake_from_waker(&mut self, drain: bool) {
        if let Some(w) = &self.waker {
            w.sleeping.store(AWAKE, Ordering::SeqCst);
            w.wanted.store(false, Ordering::SeqCst);
            if drain {
                outboard_board::wake::drain_eventfd(std::os::fd::AsRawFd::as_raw_fd(&w.fd));
            }
        }
    }

    fn wake_from_mesh(&mut self) {
        if let Some(m) = &self.mesh {
            m.bell().sleeping.store(false, std::sync::atomic::Ordering::SeqCst);
            m.bell().drain();
        }
    }

    fn answer(&mut self, line: &str, now: Instant) -> String {
        match line {
            "stat" | "stat json" | "" => {
                serde_json::to_string(&self.snapshot(now)).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
            }
            h if h.starts_with("handler ") => match self.apps.get::<crate::messages::MessageApp>() {
                Some(m) => crate::messages::handlers::control(&mut m.lock(), now, &h["handler ".len()..]),
                None => r#"{"error":"this engine runs no message service: start it with --messages to load handlers"}"#.to_string(),
            },
            other => format!("{{\"error\":\"unknown request {:?}: try stat\"}}", other),
        }
    }

    pub fn snapshot(&mut self, now: Instant) -> Snapshot {
        if let Some(p) = self.pcap.as_mut() {
            p.flush();
            self.counters.pcap_frames = p.frames;
        }
        self.counters.wall_s = now.saturating_duration_since(self.started).as_secs_f64();
        self.counters.cpu_s = crate::clock::cpu_time(self.cpu_clock)
            .saturating_sub(self.cpu_at_start)
            .as_secs_f64();
        self.counters.accept_paused_turns = self.apps.admission.paused_turns;
        if let Some(k) = &self.kernel {
            self.counters.kernel = Some(k.counters);
        }
        if let Some(m) = &self.mesh {
            self.counters.forwarded_out = m.counters.out;
            self.counters.forwarded_in = m.counters.inbound;
            self.counters.forward_drops = m.counters.drops;
            self.counters.arp_copies = m.counters.arp_copies;
        }
        let cfg = self.stack.config();
        let apps = &self.apps;
        let owner = |id| apps.owner_label(id);
        let connections: Vec<ConnRow> = self
            .stack
            .tcp_connections()
            .into_iter()
            .map(|(id, t, state, s)| ConnRow {
                local: t.local.to_string(),
                remote: t.remote.to_string(),
                state: format!("{state:?}"),
                owner: owner(id),
                shard: self.index,
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
                ecn: s.ecn,
            })
            .collect();
        let link_counters = self.link.counters();
        let mut snap = Snapshot {
            name: self.name.clone(),
            pid: std::process::id(),
            addr: format!("{}/{}", cfg.addr, cfg.prefix_len),
            gateway: cfg.gateway.map(|g| g.to_string()),
            ipv6: crate::stat::Ipv6Snapshot::of(&self.stack),
            link: LinkSnapshot::new(&self.link.info(), &link_counters),
            shard: self.counters.clone(),
            shards: vec![ShardRow {
                shard: self.index,
                counters: self.counters.clone(),
                connections: connections.len(),
                memory_in_use: self.stack.memory_in_use(),
                rx_frames: link_counters.rx_frames,
                tx_frames: link_counters.tx_frames,
            }],
            stack: self.stack.stats().iter().map(|(k, v)| (k.to_string(), v)).collect(),
            memory_in_use: self.stack.memory_in_use(),
            memory_cap: self.apps.admission.memory_cap,
            arp_entries: self.stack.arp_entries(),
            connections,
            services: Vec::new(),
            boards: Vec::new(),
            host: Default::default(),
            board_memory: 0,
            messages: None,
            tcp_handlers: Vec::new(),
        };
        self.apps.report(&mut snap);
        snap
    }
}

/// ARP, or IPv6 neighbour discovery: what steering gives shard 0 to answer
/// and every shard to learn from (`Owner::Arp`). Not only ARP: a neighbour
/// advertisement that came in on another shard's queue, answering that
/// shard's solicitation, reached shard 0 over the mesh and went no further,
/// so the soliciting shard never learnt the address and its segments to
/// that neighbour waited (a connection hashed there never completed).
fn is_neighbour_frame(frame: &[u8]) -> bool {
    matches!(outboard_stack::steer::frame_owner(frame, 2, |_, _| 0), outboard_stack::steer::FrameOwner::Arp)
}

/// Shard 0 copies a neighbour frame (ARP, IPv6 neighbour discovery) to
/// every other shard (they learn, never answer).
fn copy_neighbour_frame(m: &mut ShardPort, frame: &[u8]) {
    let others: Vec<usize> = m.others().collect();
    for s in others {
        if m.forward(s, frame, outboard_stack::RxMeta::default()) {
            m.counters.arp_copies += 1;
        }
    }
}

/// A frame from this shard's link: processed here if this shard owns it,
/// else sent to its owner (ARP: shard 0 answers, the others learn from copies).
fn steer_received(m: &mut ShardPort, stack: &mut Stack, now: Instant, f: &[u8], meta: outboard_stack::RxMeta) {
    match m.steer.owner(f) {
        Owner::Shard(s) if s == m.index => stack.receive_frame_offloaded(now, f, meta),
        Owner::Shard(s) => {
            if m.forward(s, f, meta) {
                m.counters.out += 1;
            }
        }
        Owner::Arp if m.index == 0 => {
            stack.receive_frame_offloaded(now, f, meta);
            copy_neighbour_frame(m, f);
        }
        Owner::Arp => {
            if m.forward(0, f, meta) {
                m.counters.out += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_neighbour_frame;

    /// An Ethernet frame carrying an IPv6 packet with `next` and `l4`.
    fn ipv6_frame(next: u8, l4: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        f.extend_from_slice(&[next, 255]);
        f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(l4);
        f
    }

    /// What shard 0 copies to the others from the mesh: ARP and every
    /// neighbour-discovery message (router and neighbour solicitations and
    /// advertisements, redirects), nothing else.
    #[test]
    fn neighbour_frames_are_arp_and_ipv6_neighbour_discovery() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(is_neighbour_frame(&arp));
        for nd in 133u8..=137 {
            assert!(is_neighbour_frame(&ipv6_frame(58, &[nd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])), "ICMPv6 type {nd}");
        }
        assert!(!is_neighbour_frame(&ipv6_frame(58, &[128, 0, 0, 0, 0, 1, 0, 1])), "echo request");
        let tcp = [0x1f, 0x90, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0];
        assert!(!is_neighbour_frame(&ipv6_frame(6, &tcp)), "TCP");
        let mut ipv4 = vec![0u8; 34];
        ipv4[12..14].copy_from_slice(&[0x08, 0x00]);
        assert!(!is_neighbour_frame(&ipv4), "IPv4");
    }
}
