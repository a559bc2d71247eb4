//! One attached application: its board, its endpoints, and the commands it
//! sends. Everything read from the board is copied out and checked against
//! the engine's own records before it is used; a command that breaks the
//! rules is a violation, and the application is disconnected.

use super::region::BoardRegion;
use outboard_board::arena::{FreeList, OwnerTable, Side};
use outboard_board::layout::{flags, header, status, tcp_info, CLASS_DGRAM_RX, CLASS_DGRAM_TX, CLASS_STREAM, ENGINE_GONE};
use outboard_board::mailbox::Descriptor;
use outboard_board::proto::{ev, kind, op, opt};
use outboard_board::sync::CompleteError;
use outboard_board::{BoardLayout, BufRef, Command, Condition, Consumer, Event, MailboxProducer, Mapping, Producer, SyncTable};
use outboard_stack::{ConnId, ListenerId, Stack, StackError, UdpId};
use outboard_tcp::conn::ConnInfo;
use outboard_tcp::{Event as TcpEvent, State};
use outboard_time::Instant;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Commands taken from one board per turn, so one application cannot starve the rest.
pub const COMMANDS_PER_TURN: usize = 256;
/// Datagrams delivered to one socket per turn.
const DATAGRAMS_PER_TURN: usize = 64;

/// Why an application was disconnected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    Corrupt(&'static str),
    BadEndpoint(&'static str),
    BadSync,
    BadBuffer,
    BadLength(&'static str),
    UnknownOp,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Corrupt(w) => write!(f, "corrupt {w}"),
            Violation::BadEndpoint(w) => write!(f, "bad endpoint in {w}"),
            Violation::BadSync => write!(f, "bad sync slot"),
            Violation::BadBuffer => write!(f, "a buffer the application does not hold"),
            Violation::BadLength(w) => write!(f, "impossible length in {w}"),
            Violation::UnknownOp => write!(f, "unknown command"),
        }
    }
}

pub(super) struct StreamEp {
    pub conn: ConnId,
    tx_pushed: u64,
    rx_consumed: u64,
    rx_published: u64,
    acked_published: u64,
    flags: u32,
    error: u32,
    /// What the status record says now (ours; never read back from the board).
    published_flags: u32,
    published_error: u32,
    connect_sync: Option<u32>,
    /// The TCP_INFO words in the status record now (written only when they change).
    published_info: Option<(u8, ConnInfo)>,
}

pub(super) enum EpKind {
    Listener { lid: ListenerId },
    Stream(StreamEp),
    Datagram { udp: UdpId, mailbox: MailboxProducer },
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SessionCounters {
    pub commands: u64,
    pub events: u64,
    pub signals: u64,
    pub accepts: u64,
    pub accepts_deferred: u64,
    pub datagrams_in: u64,
    pub datagrams_dropped: u64,
    pub datagrams_out: u64,
    /// Bytes moved from an accepted connection's early heap ring into its board region.
    pub migrated_bytes: u64,
    /// Stream bytes delivered: consumed by the application (rx), acknowledged by the peer (tx).
    pub rx_delivered: u64,
    pub tx_delivered: u64,
    /// SET_OPTION commands with an unknown option or a value out of range (ignored).
    pub bad_options: u64,
}

pub struct Session {
    pub id: u64,
    pub pid: u32,
    pub map: Arc<Mapping>,
    layout: BoardLayout,
    sock: UnixStream,
    pub dead: Arc<AtomicBool>,
    cmds: Consumer<Command>,
    events: Producer<Event>,
    cond: Condition,
    syncs: SyncTable,
    pub(super) eps: Vec<Option<EpKind>>,
    /// Listener and datagram endpoints: what `poll_endpoints` visits each turn
    /// (not every endpoint slot).
    polled: Vec<u32>,
    generations: Vec<u32>,
    free_eps: Vec<u32>,
    regions: Arc<Mutex<FreeList>>,
    dgram_rx: FreeList,
    owners: OwnerTable,
    overflow: VecDeque<Event>,
    /// Hint bits waiting per endpoint while the event ring is full, and which endpoints have some.
    hints: Vec<u32>,
    hinted: Vec<u32>,
    posted: bool,
    /// The application's wake eventfd (written while it has threads in poll/epoll on it).
    wake: Option<std::os::fd::OwnedFd>,
    /// The application said DETACH: its hang-up that follows is not a death.
    pub detached: bool,
    pub counters: SessionCounters,
}

fn state_number(s: State) -> u32 {
    match s {
        State::Closed => 0,
        State::SynSent => 1,
        State::SynReceived => 2,
        State::Established => 3,
        State::FinWait1 => 4,
        State::FinWait2 => 5,
        State::CloseWait => 6,
        State::Closing => 7,
        State::LastAck => 8,
        State::TimeWait => 9,
    }
}

/// `State` numbered as Linux's `tcp_states.h` (TCP_INFO's `tcpi_state`).
fn linux_state(s: State) -> u8 {
    match s {
        State::Established => tcp_info::TCP_ESTABLISHED,
        State::SynSent => tcp_info::TCP_SYN_SENT,
        State::SynReceived => tcp_info::TCP_SYN_RECV,
        State::FinWait1 => tcp_info::TCP_FIN_WAIT1,
        State::FinWait2 => tcp_info::TCP_FIN_WAIT2,
        State::TimeWait => tcp_info::TCP_TIME_WAIT,
        State::Closed => tcp_info::TCP_CLOSE,
        State::CloseWait => tcp_info::TCP_CLOSE_WAIT,
        State::LastAck => tcp_info::TCP_LAST_ACK,
        State::Closing => tcp_info::TCP_CLOSING,
    }
}

/// Keep-alive settings from a SET_OPTION KEEPALIVE command: `Ok(None)` turns
/// them off; `Err` for a value out of range (the command is then ignored).
pub(super) fn keepalive_option(c: &Command) -> Result<Option<(Duration, Duration, u32)>, ()> {
    match c.b {
        0 => Ok(None),
        1 => {
            let ms = |v: u64| if (1..=opt::KEEPALIVE_MAX_MS).contains(&v) { Ok(Duration::from_millis(v)) } else { Err(()) };
            let probes = if (1..=opt::KEEPALIVE_MAX_PROBES).contains(&c.e) { c.e as u32 } else { return Err(()) };
            Ok(Some((ms(c.c)?, ms(c.d)?, probes)))
        }
        _ => Err(()),
    }
}

fn sat_u8(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

fn low_u32(v: u64) -> u32 {
    // Linux's segs_in/segs_out are u32 that wrap; so do ours.
    v as u32
}

/// The status record's word holds an IPv4 address and port; the stack makes
/// IPv4 tuples only, so an IPv6 address (none today) reads as 0, unknown.
fn addr_word(a: impl Into<std::net::SocketAddr>) -> u64 {
    match a.into() {
        std::net::SocketAddr::V4(a) => (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port()),
        std::net::SocketAddr::V6(_) => 0,
    }
}

fn stack_errno(e: StackError) -> i64 {
    -i64::from(match e {
        StackError::AddrInUse => libc::EADDRINUSE,
        StackError::NoEphemeralPorts => libc::EADDRNOTAVAIL,
        _ => libc::EINVAL,
    })
}

impl Session {
    pub fn new(id: u64, n: super::attach::NewSession) -> Session {
        let l = n.layout;
        let map = n.map;
        let p = l.params;
        let stream_bufs = (0..l.arena.classes[CLASS_STREAM as usize].count).map(|index| BufRef { class: CLASS_STREAM, index });
        let rx_bufs = (0..l.arena.classes[CLASS_DGRAM_RX as usize].count).map(|index| BufRef { class: CLASS_DGRAM_RX, index });
        let owners = OwnerTable::new(&l.arena, |b| if b.class == CLASS_DGRAM_TX { Side::App } else { Side::Engine });
        Session {
            id,
            pid: n.pid,
            cmds: Consumer::new(map.clone(), l.command_ring, p.command_capacity),
            events: Producer::new(map.clone(), l.event_ring, p.event_capacity),
            cond: Condition::new(map.clone(), header::EVENT_CONDITION),
            syncs: SyncTable::new(map.clone(), l.syncs, p.syncs),
            eps: (0..p.endpoints).map(|_| None).collect(),
            polled: Vec::new(),
            generations: vec![0; p.endpoints as usize],
            free_eps: (0..p.endpoints).rev().collect(),
            regions: Arc::new(Mutex::new(FreeList::new(stream_bufs))),
            dgram_rx: FreeList::new(rx_bufs),
            owners,
            overflow: VecDeque::new(),
            hints: vec![0; p.endpoints as usize],
            hinted: Vec::new(),
            posted: false,
            wake: n.wake,
            detached: false,
            counters: SessionCounters::default(),
            layout: l,
            sock: n.sock,
            dead: n.dead,
            map,
        }
    }

    pub fn board_bytes(&self) -> usize {
        self.layout.total
    }
    pub fn endpoints_open(&self) -> usize {
        self.eps.iter().filter(|e| e.is_some()).count()
    }

    /// Whether commands wait (checked before the shard sleeps). Garbage counts as work: the next turn finds it.
    pub fn has_commands(&self) -> bool {
        self.cmds.available().map_or(true, |n| n > 0)
    }

    /// `how`: 0 awake, else `SLEEP_EVENTFD` / `SLEEP_FUTEX` (how applications must wake us).
    pub fn set_engine_sleeping(&self, how: u32) {
        self.map.atomic_u32(header::ENGINE_SLEEPING).store(how, Ordering::SeqCst);
    }

    /// The board's engine doorbell word (futex wake-ups).
    pub fn engine_doorbell(&self) -> &std::sync::atomic::AtomicU32 {
        self.map.atomic_u32(header::ENGINE_DOORBELL)
    }

    // ---- events ----

    /// Posts an event. When the ring is full (the application is slow, or
    /// asleep in a debugger) events wait here: those that carry a value (a
    /// new endpoint, a sync slot, a buffer) in order, in a queue bounded by
    /// what the board can produce; the rest, mere hints about an endpoint,
    /// are merged per endpoint. A slow application thus costs bounded
    /// memory and is never disconnected for being slow.
    fn post(&mut self, endpoint: u32, kind: u32, value: u64) {
        let e = Event { endpoint, kind, value };
        self.counters.events += 1;
        self.posted = true;
        let carries_value = kind & (ev::ACCEPT | ev::SYNC | ev::BUF_RETURN) != 0;
        if self.overflow.is_empty() && self.hinted.is_empty() {
            if let Ok(true) = self.events.begin_put(e) {
                return;
            }
        }
        match self.hints.get_mut(endpoint as usize) {
            Some(bits) if !carries_value => {
                if *bits == 0 {
                    self.hinted.push(endpoint);
                }
                *bits |= kind;
            }
            _ => self.overflow.push_back(e),
        }
    }

    /// Publishes posted events and wakes the application if it sleeps.
    /// Err when the event ring's head is garbage, or more value-carrying
    /// events wait than a well-behaved board can cause.
    pub fn flush(&mut self) -> Result<(), Violation> {
        let mut full = false;
        while let Some(e) = self.overflow.front().copied() {
            match self.events.begin_put(e) {
                Ok(true) => {
                    self.overflow.pop_front();
                }
                Ok(false) => {
                    full = true;
                    break;
                }
                Err(_) => return Err(Violation::Corrupt("event ring head")),
            }
        }
        while !full {
            let Some(&ep) = self.hinted.last() else { break };
            let kind = self.hints[ep as usize];
            match self.events.begin_put(Event { endpoint: ep, kind, value: 0 }) {
                Ok(true) => {
                    self.hints[ep as usize] = 0;
                    self.hinted.pop();
                }
                Ok(false) => full = true,
                Err(_) => return Err(Violation::Corrupt("event ring head")),
            }
        }
        let p = &self.layout.params;
        let bound = p.endpoints as usize + p.syncs as usize + 2 * p.dgram_buffers as usize + 1024;
        if self.overflow.len() > bound {
            return Err(Violation::Corrupt("more events than the board can cause"));
        }
        self.events.end_put();
        if self.posted {
            self.posted = false;
            if self.cond.signal() {
                self.counters.signals += 1;
            }
            self.ring_wake();
        }
        Ok(())
    }

    /// Writes the application's wake eventfd if any of its threads sleeps
    /// in poll/epoll on it (after the condition's bump: SeqCst pairs with the
    /// application announcing itself and then re-reading the word).
    fn ring_wake(&self) {
        if let Some(fd) = &self.wake {
            if self.map.atomic_u32(header::APP_POLLERS).load(Ordering::SeqCst) != 0 {
                super::ring_eventfd(std::os::fd::AsRawFd::as_raw_fd(fd));
            }
        }
    }

    // ---- endpoints ----

    fn open_ep(&mut self, kind_code: u32) -> Option<u32> {
        let ep = self.free_eps.pop()?;
        let g = self.generations[ep as usize].wrapping_add(1);
        self.generations[ep as usize] = g;
        let base = self.layout.endpoint_status(ep);
        // A fresh status record; the application learns the id only after this.
        self.map.write(base, outboard_board::EndpointStatus { generation: g, kind: kind_code, ..Default::default() });
        Some(ep)
    }

    fn close_ep(&mut self, ep: u32) {
        self.polled.retain(|&p| p != ep);
        if self.eps[ep as usize].take().is_some() {
            let base = self.layout.endpoint_status(ep);
            self.map.atomic_u32(base + status::KIND).store(kind::FREE, Ordering::Release);
            self.free_eps.push(ep);
            self.post(ep, ev::CLOSED, 0);
        }
    }

    fn sync_result(&mut self, slot: u32, value: i64) -> Result<bool, Violation> {
        match self.syncs.complete(slot, value) {
            Ok(()) => {
                self.post(u32::MAX, ev::SYNC, u64::from(slot));
                Ok(true)
            }
            Err(CompleteError::Cancelled) => {
                self.syncs.release_cancelled(slot);
                Ok(false)
            }
            Err(CompleteError::NotPending) => Err(Violation::BadSync),
        }
    }

    /// Gives a stream connection its two board regions. None when the board has none left.
    fn attach_regions(&mut self, stack: &mut Stack, conn: ConnId) -> Option<(u64, u64, usize)> {
        let (tx, rx) = {
            let mut f = self.regions.lock().ok()?;
            if f.len() < 2 {
                return None;
            }
            (f.alloc()?, f.alloc()?)
        };
        let a = &self.layout.arena;
        let (txo, rxo, size) = (a.offset_of(tx), a.offset_of(rx), a.size_of(tx));
        let txr = BoardRegion::new(self.map.clone(), tx, txo, size, self.regions.clone());
        let rxr = BoardRegion::new(self.map.clone(), rx, rxo, size, self.regions.clone());
        let c = stack.tcp(conn)?;
        let moved = c.attach_storage(Box::new(txr), Box::new(rxr));
        self.counters.migrated_bytes += moved as u64;
        Some((txo as u64, rxo as u64, size))
    }

    fn new_stream(&mut self, stack: &mut Stack, conn: ConnId, sync: Option<u32>) -> Option<u32> {
        if self.free_eps.is_empty() {
            return None;
        }
        let (txo, rxo, size) = self.attach_regions(stack, conn)?;
        let ep = self.open_ep(kind::STREAM)?;
        let mut st = self.map.read::<outboard_board::EndpointStatus>(self.layout.endpoint_status(ep));
        st.rx_offset = rxo;
        st.rx_size = size as u64;
        st.tx_offset = txo;
        st.tx_size = size as u64;
        if let Some(c) = stack.tcp(conn) {
            let t = c.tuple();
            st.local = addr_word(t.local);
            st.remote = addr_word(t.remote);
        }
        self.map.write(self.layout.endpoint_status(ep), st);
        self.eps[ep as usize] = Some(EpKind::Stream(StreamEp {
            conn,
            tx_pushed: 0,
            rx_consumed: 0,
            rx_published: 0,
            acked_published: 0,
            flags: 0,
            error: 0,
            published_flags: 0,
            published_error: 0,
            connect_sync: sync,
            published_info: None,
        }));
        Some(ep)
    }

    /// Brings a stream's status record up to date with its connection and
    /// posts what changed (and completes a pending connect's sync).
    pub(super) fn update_stream(&mut self, stack: &mut Stack, ep: u32) -> Result<(), Violation> {
        let Some(EpKind::Stream(s)) = self.eps[ep as usize].as_mut() else { return Ok(()) };
        let mut bits = 0;
        let mut sync_done: Option<(u32, i64)> = None;
        let Some(c) = stack.tcp(s.conn) else {
            // The stack freed it (e.g. after a reset): report once.
            if s.error == 0 && s.flags & flags::PEER_CLOSED == 0 {
                s.error = libc::ECONNRESET as u32;
                bits |= ev::ERROR;
            }
            let (e, f) = (s.error, s.flags);
            if let Some(slot) = s.connect_sync.take() {
                sync_done = Some((slot, -i64::from(e.max(1))));
            }
            let info = s.published_info.map_or(ConnInfo::default(), |(_, i)| i);
            if s.published_info.map(|(st, _)| st) != Some(tcp_info::TCP_CLOSE) {
                s.published_info = Some((tcp_info::TCP_CLOSE, info));
                Self::write_info(&self.map, self.layout.endpoint_status(ep), tcp_info::TCP_CLOSE, &info);
            }
            self.write_flags(ep, f, e);
            if bits != 0 {
                self.post(ep, bits, 0);
            }
            if let Some((slot, v)) = sync_done {
                self.sync_result(slot, v)?;
            }
            return Ok(());
        };
        while let Some(e) = c.poll_event() {
            match e {
                TcpEvent::Connected => {
                    s.flags |= flags::CONNECTED;
                    if let Some(slot) = s.connect_sync.take() {
                        sync_done = Some((slot, i64::from(ep)));
                    }
                }
                TcpEvent::PeerClosed => s.flags |= flags::PEER_CLOSED,
                TcpEvent::Reset => {
                    s.error = if c.state() == State::Closed && s.flags & flags::CONNECTED == 0 {
                        libc::ECONNREFUSED as u32
                    } else {
                        libc::ECONNRESET as u32
                    }
                }
                TcpEvent::TimedOut => s.error = libc::ETIMEDOUT as u32,
                TcpEvent::Readable | TcpEvent::Writable | TcpEvent::Closed => {}
            }
        }
        if s.error != 0 {
            if let Some(slot) = s.connect_sync.take() {
                sync_done = Some((slot, -i64::from(s.error)));
            }
        }
        let rx_total = s.rx_consumed + c.recv_available() as u64;
        let acked = s.tx_pushed - (c.send_queued() as u64).min(s.tx_pushed);
        if c.send_queued() > 0 {
            c.request_writable();
        }
        let state = state_number(c.state());
        let info = (linux_state(c.state()), c.info());
        let base = self.layout.endpoint_status(ep);
        self.map.atomic_u32(base + status::STATE).store(state, Ordering::Relaxed);
        if s.published_info != Some(info) {
            s.published_info = Some(info);
            Self::write_info(&self.map, base, info.0, &info.1);
        }
        if rx_total != s.rx_published {
            s.rx_published = rx_total;
            self.map.atomic_u64(base + status::RX_TOTAL).store(rx_total, Ordering::Release);
            bits |= ev::READABLE;
        }
        if acked != s.acked_published {
            if s.error == 0 {
                self.counters.tx_delivered += acked.saturating_sub(s.acked_published);
            }
            s.acked_published = acked;
            self.map.atomic_u64(base + status::TX_ACKED).store(acked, Ordering::Release);
            bits |= ev::WRITABLE;
        }
        let old_flags = s.published_flags;
        let (f, e) = (s.flags, s.error);
        if f & flags::PEER_CLOSED != 0 && old_flags & flags::PEER_CLOSED == 0 {
            bits |= ev::PEER_CLOSED | ev::READABLE;
        }
        if e != 0 && s.published_error == 0 {
            bits |= ev::ERROR | ev::READABLE | ev::WRITABLE;
        }
        if f & flags::CONNECTED != 0 && old_flags & flags::CONNECTED == 0 {
            bits |= ev::WRITABLE;
        }
        let changed = (f, e) != (s.published_flags, s.published_error);
        s.published_flags = f;
        s.published_error = e;
        if changed {
            self.write_flags(ep, f, e);
        }
        if bits != 0 {
            self.post(ep, bits, 0);
        }
        if let Some((slot, v)) = sync_done {
            if !self.sync_result(slot, v)? {
                // The application gave up on this connect: undo it.
                self.drop_stream(stack, ep, true);
            }
        }
        Ok(())
    }

    /// The TCP_INFO words of a status record (Release: a reader that sees
    /// one word sees the record's earlier bytes; the words are independent).
    fn write_info(m: &Mapping, base: usize, state: u8, i: &ConnInfo) {
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        let opts = bit(i.timestamps, tcp_info::OPT_TIMESTAMPS) | bit(i.sack, tcp_info::OPT_SACK) | bit(i.wscale, tcp_info::OPT_WSCALE);
        let mut b = [0u8; 8];
        b[tcp_info::STATE] = state;
        b[tcp_info::CA_STATE] = i.ca_state as u8;
        b[tcp_info::RETRANSMITS] = sat_u8(i.rto_count);
        b[tcp_info::BACKOFF] = sat_u8(i.backoff);
        b[tcp_info::OPTIONS] = opts;
        b[tcp_info::SND_WSCALE] = i.snd_wscale;
        b[tcp_info::RCV_WSCALE] = i.rcv_wscale;
        for (off, v) in [
            (status::RTO_US, i.rto_us),
            (status::SND_MSS, i.snd_mss),
            (status::RCV_MSS, i.rcv_mss),
            (status::UNACKED, i.unacked_segs),
            (status::RTT_US, i.srtt_us),
            (status::RTTVAR_US, i.rttvar_us),
            (status::SND_SSTHRESH, i.ssthresh_segs),
            (status::SND_CWND, i.cwnd_segs),
            (status::TOTAL_RETRANS, low_u32(i.retransmits)),
            (status::SEGS_OUT, low_u32(i.segments_out)),
            (status::SEGS_IN, low_u32(i.segments_in)),
        ] {
            m.atomic_u32(base + off).store(v, Ordering::Release);
        }
        m.atomic_u64(base + status::RETRANS_BYTES).store(i.retransmitted_bytes, Ordering::Release);
        m.atomic_u64(base + status::INFO_BYTES).store(tcp_info::pack(b), Ordering::Release);
    }

    /// The application's own counters from the board header (`app_counter::*`):
    /// for display only, never trusted.
    pub fn app_counters(&self) -> [u64; header::APP_COUNTERS_LEN] {
        std::array::from_fn(|k| self.map.atomic_u64(header::APP_COUNTERS + 8 * k).load(Ordering::Relaxed))
    }

    fn write_flags(&self, ep: u32, f: u32, e: u32) {
        let base = self.layout.endpoint_status(ep);
        // Error before flags: an application that sees a flag change reads a settled error.
        self.map.atomic_u32(base + status::ERROR).store(e, Ordering::Release);
        self.map.atomic_u32(base + status::FLAGS).store(f, Ordering::Release);
    }

    /// Closes (or aborts) a stream and frees its endpoint; the connection
    /// lingers in the stack (FIN, TIME-WAIT) holding its regions until done.
    fn drop_stream(&mut self, stack: &mut Stack, ep: u32, abort: bool) -> Option<ConnId> {
        let Some(EpKind::Stream(s)) = self.eps[ep as usize].as_ref() else { return None };
        let conn = s.conn;
        if let Some(c) = stack.tcp(conn) {
            if abort {
                c.abort();
            } else {
                c.close();
            }
        }
        stack.tcp_release(conn);
        self.close_ep(ep);
        Some(conn)
    }

    // ---- commands ----

    /// Runs up to `COMMANDS_PER_TURN` commands. `owned` learns which
    /// connections this session now owns or gave up.
    pub fn run_commands(
        &mut self,
        stack: &mut Stack,
        now: Instant,
        owned: &mut dyn FnMut(ConnId, Option<u32>),
    ) -> Result<bool, Violation> {
        let mut work = false;
        for _ in 0..COMMANDS_PER_TURN {
            let cmd = match self.cmds.begin_get() {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(_) => return Err(Violation::Corrupt("command ring tail")),
            };
            self.cmds.end_get();
            self.counters.commands += 1;
            work = true;
            self.command(stack, now, cmd, owned)?;
        }
        Ok(work)
    }

    fn ep_index(&self, ep: u32, what: &'static str) -> Result<usize, Violation> {
        if (ep as usize) < self.eps.len() && self.eps[ep as usize].is_some() {
            Ok(ep as usize)
        } else {
            Err(Violation::BadEndpoint(what))
        }
    }

    fn check_sync(&self, slot: u32) -> Result<(), Violation> {
        if slot < self.syncs.count() {
            Ok(())
        } else {
            Err(Violation::BadSync)
        }
    }

    fn command(
        &mut self,
        stack: &mut Stack,
        now: Instant,
        c: Command,
        owned: &mut dyn FnMut(ConnId, Option<u32>),
    ) -> Result<(), Violation> {
        match c.op {
            op::LISTEN => {
                self.check_sync(c.sync)?;
                let port = u16::try_from(c.a).ok().filter(|p| *p != 0);
                let backlog = c.b.clamp(1, 4096) as usize;
                let result = match port {
                    None => -i64::from(libc::EINVAL),
                    Some(port) => match self.free_eps.is_empty() {
                        true => -i64::from(libc::EMFILE),
                        false => match stack.tcp_listen(port, backlog) {
                            Ok(lid) => {
                                let ep = self.open_ep(kind::LISTENER).expect("checked non-empty");
                                let base = self.layout.endpoint_status(ep);
                                let listen = tcp_info::pack([tcp_info::TCP_LISTEN, 0, 0, 0, 0, 0, 0, 0]);
                                self.map.atomic_u64(base + status::INFO_BYTES).store(listen, Ordering::Release);
                                self.map.atomic_u64(base + status::LOCAL).store(
                                    addr_word(SocketAddrV4::new(stack.config().addr, port)),
                                    Ordering::Relaxed,
                                );
                                self.eps[ep as usize] = Some(EpKind::Listener { lid });
                                self.polled.push(ep);
                                i64::from(ep)
                            }
                            Err(e) => stack_errno(e),
                        },
                    },
                };
                if !self.sync_result(c.sync, result)? && result >= 0 {
                    self.close_listener(stack, result as u32);
                }
            }
            op::CONNECT => {
                self.check_sync(c.sync)?;
                let ip = Ipv4Addr::from(u32::try_from(c.a).map_err(|_| Violation::BadLength("connect address"))?);
                let port = u16::try_from(c.b).map_err(|_| Violation::BadLength("connect port"))?;
                let result = if port == 0 {
                    Err(-i64::from(libc::EINVAL))
                } else {
                    match stack.tcp_connect(now, SocketAddrV4::new(ip, port)) {
                        Ok(conn) => match self.new_stream(stack, conn, Some(c.sync)) {
                            Some(ep) => {
                                owned(conn, Some(ep));
                                Ok(ep)
                            }
                            None => {
                                if let Some(k) = stack.tcp(conn) {
                                    k.abort();
                                }
                                stack.tcp_release(conn);
                                Err(-i64::from(libc::ENOBUFS))
                            }
                        },
                        Err(e) => Err(stack_errno(e)),
                    }
                };
                match result {
                    // The sync completes when the handshake does (update_stream).
                    Ok(ep) => self.update_stream(stack, ep)?,
                    Err(v) => {
                        self.sync_result(c.sync, v)?;
                    }
                }
            }
            op::PUSH => {
                let i = self.ep_index(c.endpoint, "push")?;
                let Some(EpKind::Stream(s)) = self.eps[i].as_mut() else { return Err(Violation::BadEndpoint("push")) };
                if c.a < s.tx_pushed {
                    return Err(Violation::BadLength("push went backwards"));
                }
                let n = c.a - s.tx_pushed;
                if n > 0 {
                    let Some(conn) = stack.tcp(s.conn) else { return Ok(()) };
                    let room = conn.send_capacity() as u64;
                    if room == 0 {
                        // Reset or shut down meanwhile: the application learns it from the status.
                        return Ok(());
                    }
                    if n > room {
                        return Err(Violation::BadLength("push beyond the transmit region"));
                    }
                    let took = conn.send_in_place(n as usize).unwrap_or(0) as u64;
                    s.tx_pushed += took;
                    conn.request_writable();
                }
            }
            op::CONSUMED => {
                let i = self.ep_index(c.endpoint, "consumed")?;
                let Some(EpKind::Stream(s)) = self.eps[i].as_mut() else {
                    return Err(Violation::BadEndpoint("consumed"));
                };
                if c.a < s.rx_consumed || c.a > s.rx_published {
                    return Err(Violation::BadLength("consumed more than was delivered"));
                }
                let n = (c.a - s.rx_consumed) as usize;
                if n > 0 {
                    s.rx_consumed = c.a;
                    self.counters.rx_delivered += n as u64;
                    if let Some(conn) = stack.tcp(s.conn) {
                        conn.recv_consume(n);
                    }
                }
            }
            op::SHUTDOWN => {
                let i = self.ep_index(c.endpoint, "shutdown")?;
                if let Some(EpKind::Stream(s)) = self.eps[i].as_ref() {
                    if let Some(conn) = stack.tcp(s.conn) {
                        conn.shutdown_write();
                    }
                }
            }
            op::SET_OPTION => {
                let i = self.ep_index(c.endpoint, "set option")?;
                // Options apply to the stream as it is now (an accepted one
                // inherits nothing from its listener: the application sets them).
                let keepalive = match c.a {
                    opt::NODELAY => None,
                    opt::KEEPALIVE => match keepalive_option(&c) {
                        Ok(k) => Some(k),
                        Err(()) => {
                            self.counters.bad_options += 1;
                            return Ok(());
                        }
                    },
                    _ => {
                        self.counters.bad_options += 1;
                        return Ok(());
                    }
                };
                if let Some(EpKind::Stream(s)) = self.eps[i].as_ref() {
                    if let Some(conn) = stack.tcp(s.conn) {
                        match keepalive {
                            Some(k) => conn.set_keepalive(now, k),
                            None => conn.set_nodelay(c.b != 0),
                        }
                    }
                }
            }
            op::CLOSE | op::ABORT => {
                let i = self.ep_index(c.endpoint, "close")?;
                match self.eps[i].as_ref() {
                    Some(EpKind::Stream(_)) => {
                        if let Some(conn) = self.drop_stream(stack, c.endpoint, c.op == op::ABORT) {
                            owned(conn, None);
                        }
                    }
                    Some(EpKind::Listener { .. }) => self.close_listener(stack, c.endpoint),
                    Some(EpKind::Datagram { udp, .. }) => {
                        stack.udp_close(*udp);
                        self.close_ep(c.endpoint);
                    }
                    None => {}
                }
            }
            op::UDP_BIND => {
                self.check_sync(c.sync)?;
                let port = u16::try_from(c.a).map_err(|_| Violation::BadLength("bind port"))?;
                let result = if self.free_eps.is_empty() {
                    -i64::from(libc::EMFILE)
                } else {
                    match stack.udp_bind(port) {
                        Ok(udp) => {
                            let ep = self.open_ep(kind::DATAGRAM).expect("checked non-empty");
                            let local = stack.udp_local_port(udp).unwrap_or(port);
                            let base = self.layout.endpoint_status(ep);
                            self.map.atomic_u64(base + status::LOCAL).store(
                                addr_word(SocketAddrV4::new(stack.config().addr, local)),
                                Ordering::Relaxed,
                            );
                            let mailbox = MailboxProducer::new(
                                self.map.clone(),
                                self.layout.endpoint_mailbox(ep),
                                self.layout.params.mailbox_capacity,
                                Arc::new(self.layout.arena.clone()),
                            );
                            // The new socket's mailbox starts empty, whoever used the slot before.
                            outboard_board::ring::reset(&self.map, self.layout.endpoint_mailbox(ep));
                            self.eps[ep as usize] = Some(EpKind::Datagram { udp, mailbox });
                            self.polled.push(ep);
                            i64::from(ep)
                        }
                        Err(e) => stack_errno(e),
                    }
                };
                if !self.sync_result(c.sync, result)? && result >= 0 {
                    if let Some(EpKind::Datagram { udp, .. }) = self.eps[result as usize].as_ref() {
                        stack.udp_close(*udp);
                    }
                    self.close_ep(result as u32);
                }
            }
            op::UDP_SEND => {
                let i = self.ep_index(c.endpoint, "udp send")?;
                let Some(EpKind::Datagram { udp, .. }) = self.eps[i].as_ref() else {
                    return Err(Violation::BadEndpoint("udp send"));
                };
                let udp = *udp;
                let buf = self.layout.arena.locate(c.a, c.b).ok_or(Violation::BadBuffer)?;
                if self.owners.owner(buf) != Some(Side::App) {
                    return Err(Violation::BadBuffer);
                }
                let ip = Ipv4Addr::from(u32::try_from(c.c).map_err(|_| Violation::BadLength("udp address"))?);
                let port = u16::try_from(c.d).map_err(|_| Violation::BadLength("udp port"))?;
                // SAFETY: `locate` checked [a, a + b) lies inside one arena buffer,
                // which lies inside the mapping; the engine holds no other slice of
                // it. The application may change the bytes meanwhile: payload only.
                let data = unsafe { self.map.bytes(c.a as usize, c.b as usize) };
                if stack.udp_send_to(now, udp, SocketAddrV4::new(ip, port), data).is_ok() {
                    self.counters.datagrams_out += 1;
                }
                // The bytes are in a frame now: the buffer goes straight back.
                self.post(c.endpoint, ev::BUF_RETURN, c.a);
            }
            op::UDP_RELEASE => {
                let buf = self.layout.arena.locate(c.a, 0).ok_or(Violation::BadBuffer)?;
                if buf.class != CLASS_DGRAM_RX {
                    return Err(Violation::BadBuffer);
                }
                self.owners.transfer(buf, Side::App, Side::Engine).map_err(|_| Violation::BadBuffer)?;
                self.dgram_rx.free(buf);
            }
            op::DETACH => self.detached = true,
            _ => return Err(Violation::UnknownOp),
        }
        Ok(())
    }


    fn close_listener(&mut self, stack: &mut Stack, ep: u32) {
        if let Some(EpKind::Listener { lid }) = self.eps[ep as usize].as_ref() {
            stack.tcp_unlisten(*lid);
        }
        self.close_ep(ep);
    }

    /// Accepts waiting connections on this session's listeners into new
    /// streams (while endpoints and regions last) and delivers datagrams.
    pub fn poll_endpoints(
        &mut self,
        stack: &mut Stack,
        may_accept: &mut dyn FnMut(&Stack) -> bool,
        owned: &mut dyn FnMut(ConnId, Option<u32>),
    ) -> Result<bool, Violation> {
        let mut work = false;
        for i in 0..self.polled.len() {
            let Some(&ep) = self.polled.get(i) else { break };
            match self.eps[ep as usize].as_ref() {
                Some(EpKind::Listener { lid }) => {
                    let lid = *lid;
                    while stack.tcp_accept_pending(lid) {
                        let room = !self.free_eps.is_empty() && self.regions.lock().is_ok_and(|f| f.len() >= 2);
                        if !room || !may_accept(stack) {
                            self.counters.accepts_deferred += 1;
                            break;
                        }
                        let Some(conn) = stack.tcp_accept(lid) else { break };
                        work = true;
                        match self.new_stream(stack, conn, None) {
                            Some(new) => {
                                self.counters.accepts += 1;
                                owned(conn, Some(new));
                                self.post(ep, ev::ACCEPT | ev::READABLE, u64::from(new));
                                self.update_stream(stack, new)?;
                            }
                            None => {
                                if let Some(c) = stack.tcp(conn) {
                                    c.abort();
                                }
                                stack.tcp_release(conn);
                            }
                        }
                    }
                }
                Some(EpKind::Datagram { .. }) => work |= self.deliver_datagrams(stack, ep),
                _ => {}
            }
        }
        Ok(work)
    }

    fn deliver_datagrams(&mut self, stack: &mut Stack, ep: u32) -> bool {
        let Some(EpKind::Datagram { udp, mailbox }) = self.eps[ep as usize].as_mut() else { return false };
        let udp = *udp;
        let mut got = 0;
        for _ in 0..DATAGRAMS_PER_TURN {
            if mailbox.free().map_or(true, |f| f == 0) {
                break;
            }
            let Some(buf) = self.dgram_rx.alloc() else { break };
            let (off, size) = (self.layout.arena.offset_of(buf), self.layout.arena.size_of(buf));
            // SAFETY: the buffer is the engine's (from its free list), inside
            // the mapping; no other engine slice of it exists.
            let dst = unsafe { self.map.bytes_mut(off, size) };
            match stack.udp_recv_from(udp, dst) {
                Ok((n, src)) => {
                    let d = Descriptor { offset: off as u32, len: n as u32, tag: u32::from(src.port()), aux: u32::from(*src.ip()) };
                    if mailbox.put(d).unwrap_or(false) {
                        let _ = self.owners.transfer(buf, Side::Engine, Side::App);
                        got += 1;
                    } else {
                        self.dgram_rx.free(buf);
                        self.counters.datagrams_dropped += 1;
                    }
                }
                Err(StackError::Refused) => {
                    self.dgram_rx.free(buf);
                    let base = self.layout.endpoint_status(ep);
                    self.map.atomic_u32(base + status::ERROR).store(libc::ECONNREFUSED as u32, Ordering::Release);
                    self.post(ep, ev::ERROR | ev::READABLE, 0);
                    break;
                }
                Err(_) => {
                    self.dgram_rx.free(buf);
                    break;
                }
            }
        }
        if got > 0 {
            self.counters.datagrams_in += got;
            self.post(ep, ev::READABLE, 0);
        }
        got > 0
    }

    /// The application died or broke the rules: reset its streams, close its
    /// sockets, tell it (if alive) that the engine is gone for it.
    pub fn teardown(&mut self, stack: &mut Stack, owned: &mut dyn FnMut(ConnId, Option<u32>)) {
        for ep in 0..self.eps.len() as u32 {
            match self.eps[ep as usize].as_ref() {
                Some(EpKind::Stream(_)) => {
                    // A clean detach closes (FIN after what is queued); a death resets.
                    if let Some(conn) = self.drop_stream(stack, ep, !self.detached) {
                        owned(conn, None);
                    }
                }
                Some(EpKind::Listener { .. }) => self.close_listener(stack, ep),
                Some(EpKind::Datagram { udp, .. }) => {
                    stack.udp_close(*udp);
                    self.close_ep(ep);
                }
                None => {}
            }
        }
        self.map.atomic_u32(header::ENGINE_STATE).store(ENGINE_GONE, Ordering::SeqCst);
        self.cond.signal();
        self.ring_wake();
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ka(b: u64, c: u64, d: u64, e: u64) -> Command {
        Command { op: op::SET_OPTION, a: opt::KEEPALIVE, b, c, d, e, ..Default::default() }
    }

    #[test]
    fn keepalive_values_are_checked_before_use() {
        assert_eq!(keepalive_option(&ka(0, 0, 0, 0)), Ok(None));
        assert_eq!(
            keepalive_option(&ka(1, 7_200_000, 75_000, 9)),
            Ok(Some((Duration::from_secs(7200), Duration::from_secs(75), 9)))
        );
        assert_eq!(
            keepalive_option(&ka(1, 1 << 31, 1, 127)),
            Ok(Some((Duration::from_millis(1 << 31), Duration::from_millis(1), 127)))
        );
        for bad in [
            ka(2, 1000, 1000, 3),
            ka(1, 0, 1000, 3),
            ka(1, 1000, 0, 3),
            ka(1, (1 << 31) + 1, 1000, 3),
            ka(1, 1000, u64::MAX, 3),
            ka(1, 1000, 1000, 0),
            ka(1, 1000, 1000, 128),
            ka(u64::MAX, 1000, 1000, 3),
        ] {
            assert_eq!(keepalive_option(&bad), Err(()), "{bad:?}");
        }
    }

    #[test]
    fn states_are_numbered_as_linux_numbers_them() {
        assert_eq!(linux_state(State::Established), 1);
        assert_eq!(linux_state(State::SynSent), 2);
        assert_eq!(linux_state(State::SynReceived), 3);
        assert_eq!(linux_state(State::FinWait1), 4);
        assert_eq!(linux_state(State::FinWait2), 5);
        assert_eq!(linux_state(State::TimeWait), 6);
        assert_eq!(linux_state(State::Closed), 7);
        assert_eq!(linux_state(State::CloseWait), 8);
        assert_eq!(linux_state(State::LastAck), 9);
        assert_eq!(linux_state(State::Closing), 11);
    }
}
