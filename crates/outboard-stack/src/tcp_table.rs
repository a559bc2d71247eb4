//! The TCP connection table: connections by 4-tuple, who owns each one,
//! which have output pending (the ready queue) and when each next needs
//! `handle_timeout` (the timer index). Listener behaviour (SYN queue, SYN
//! cookies, accept queue) is in `listener`; segment demultiplexing in `tcp_input`.

use crate::listener::{Families, Listener};
use crate::{ConnId, ListenerId, StackError};
use crate::fastopen::CookieCache;
use outboard_tcp::fastopen::FastOpenKey;
use outboard_tcp::isn::IsnGenerator;
use outboard_tcp::syncookie::SynCookies;
use outboard_tcp::{Config, Connection, FourTuple};
use outboard_time::{Duration, Instant, TimerWheel};
use std::borrow::Cow;
use crate::flowhash::FlowMap;
use std::collections::VecDeque;
use std::mem::size_of;
use std::net::{IpAddr, SocketAddr};

/// Table bookkeeping per connection besides what the connection reports
/// (`Connection::memory_in_use`, which includes its own struct): the rest of
/// its `conns` slot, its `by_tuple` slot, a timer-index key and a ready-queue
/// slot. Hash-map slack (capacity beyond `len`) is not charged.
pub(crate) const ENTRY_OVERHEAD: usize = size_of::<(ConnId, Entry)>() - size_of::<Connection>()
    + size_of::<(FourTuple, ConnId)>()
    + size_of::<(Instant, ConnId)>()
    + size_of::<ConnId>();

/// Who holds a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// In a listener's SYN queue: the handshake is not complete.
    Embryonic(ListenerId),
    /// Established, waiting in a listener's accept queue.
    Queued(ListenerId),
    /// Handed to the application (accepted or connected).
    App,
    /// The application let go: freed once `is_finished`.
    Released,
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub conn: Connection,
    pub owner: Owner,
    /// In the ready queue (may have output).
    ready: bool,
    /// The deadline this connection has in the timer index: never later
    /// than its own next deadline, and earlier when that moved later or
    /// went away since (see [`Schedule::settle`]).
    deadline: Option<Instant>,
    /// In the application's event queue.
    app_notified: bool,
}

#[derive(Debug)]
pub(crate) struct TcpTable {
    pub conns: FlowMap<ConnId, Entry>,
    pub by_tuple: FlowMap<FourTuple, ConnId>,
    pub listeners: FlowMap<ListenerId, Listener>,
    /// The listeners of each port (more than one only when their families do not overlap).
    pub listener_by_port: FlowMap<u16, Vec<ListenerId>>,
    /// Which connections to serve next, and when.
    pub(crate) sched: Schedule,
    next_conn: u32,
    next_listener: u32,
    port_cursor: u16,
    /// Embryonic connections per listener before SYN cookies take over.
    pub syn_queue_cap: usize,
    /// The template for IPv4 connections.
    pub cfg: Config,
    /// The template for IPv6 connections: `cfg` with an MSS 20 bytes smaller
    /// (the IPv6 header is 40 bytes, not 20; RFC 8200 §8.3).
    pub cfg6: Config,
    pub isn: IsnGenerator,
    pub cookies: SynCookies,
    /// RFC 7413 server cookies (`fastopen`).
    pub tfo_key: FastOpenKey,
    /// RFC 7413 client cookies per destination (`fastopen`).
    pub tfo_cache: CookieCache,
}

/// The table's agenda: connections that may send, deadlines, and
/// connections with news for the application. Apart from the connections
/// themselves, so that a caller holding one entry of `conns` can settle it
/// without looking it up again.
#[derive(Debug)]
pub(crate) struct Schedule {
    /// Connections that may have something to send, served round-robin.
    ready: VecDeque<ConnId>,
    /// Each connection's next deadline, in a hierarchical timer wheel
    /// (token = connection id), filed lazily: see [`Schedule::settle`].
    timers: TimerWheel,
    /// Application-owned connections with events to collect (`Stack::tcp_poll_ready`).
    app_events: VecDeque<ConnId>,
}

impl Schedule {
    /// [`Schedule::settle`] after a change to the connection (a segment in,
    /// a read): it joins the ready queue only if it may have something to
    /// send (`Connection::nothing_to_send` tells, without a poll, when it
    /// has not), or stays there if it is already in it.
    pub(crate) fn settle_changed(&mut self, id: ConnId, e: &mut Entry, now: Instant) -> bool {
        let ready = e.ready || !e.conn.nothing_to_send(now);
        self.settle(id, e, ready)
    }

    /// [`TcpTable::settle`] (and with `ready`, [`TcpTable::mark_ready`]
    /// first) for the entry of `id`, which the caller holds. True when the
    /// connection is finished and nobody holds it: the caller frees it.
    pub(crate) fn settle(&mut self, id: ConnId, e: &mut Entry, ready: bool) -> bool {
        if ready && !e.ready {
            e.ready = true;
            self.ready.push_back(id);
        }
        // Filed lazily, as Linux leaves a connection's timers: a deadline
        // that moved later or went away keeps its earlier place in the
        // wheel, fires there once, and `Stack::handle_timeout` (finding nothing due)
        // files the real one. Only a deadline earlier than the filed one
        // moves the entry. A request/response exchange moves its deadline
        // on every segment (the RTO with the request out, the delayed ACK
        // with the response in): two wheel moves per round trip before,
        // about one per delayed-ACK time now.
        if let Some(new) = e.conn.poll_timeout() {
            if e.deadline.is_none_or(|filed| new < filed) {
                self.timers.insert(u64::from(id.0), new);
                e.deadline = Some(new);
            }
        }
        if e.owner == Owner::App && !e.app_notified && e.conn.has_events() {
            e.app_notified = true;
            self.app_events.push_back(id);
        }
        e.conn.is_finished() && matches!(e.owner, Owner::Embryonic(_) | Owner::Released)
    }
}

impl TcpTable {
    pub(crate) fn new(
        cfg: Config,
        secret: [u8; 16],
        ephemeral_start: u16,
        syn_queue_cap: usize,
        now: Instant,
    ) -> TcpTable {
        TcpTable {
            conns: FlowMap::default(),
            by_tuple: FlowMap::default(),
            listeners: FlowMap::default(),
            listener_by_port: FlowMap::default(),
            sched: Schedule {
                ready: VecDeque::new(),
                timers: TimerWheel::starting_at(Duration::from_millis(1), now),
                app_events: VecDeque::new(),
            },
            next_conn: 0,
            next_listener: 0,
            port_cursor: ephemeral_start,
            syn_queue_cap,
            cfg6: Config { mss: cfg.mss.saturating_sub(20).max(64), ..cfg.clone() },
            cfg,
            isn: IsnGenerator::new(secret),
            cookies: SynCookies::new(secret),
            tfo_key: FastOpenKey::new(secret),
            tfo_cache: CookieCache::default(),
        }
    }

    /// The connection template for a tuple's family.
    pub(crate) fn cfg_for(&self, tuple: &FourTuple) -> &Config {
        if tuple.local.is_ipv4() {
            &self.cfg
        } else {
            &self.cfg6
        }
    }

    /// The configuration a listener's connection starts from: its family's,
    /// with the MSS lowered to the listener's TCP_MAXSEG (Linux's
    /// `tcp_mss_clamp` on the SYN-ACK and the child's `mss_clamp`) and the
    /// window clamped by its SO_RCVBUF (`tcp_openreq_init_rwin`).
    pub(crate) fn listener_cfg(&self, lid: ListenerId, tuple: &FourTuple) -> Cow<'_, Config> {
        let cfg = self.cfg_for(tuple);
        match self.listeners.get(&lid).map_or((0, 0), |l| (l.user_mss, l.rcv_clamp)) {
            (0, 0) => Cow::Borrowed(cfg),
            (m, rcv_clamp) => Cow::Owned(Config {
                mss: if m == 0 { cfg.mss } else { cfg.mss.min(m).max(64) },
                rcv_clamp,
                ..cfg.clone()
            }),
        }
    }

    /// The TOS byte a listener's connection starts with: IP_TOS for IPv4,
    /// IPV6_TCLASS for IPv6, as set on the listener.
    pub(crate) fn listener_tos(&self, lid: ListenerId, tuple: &FourTuple) -> u8 {
        let l = self.listeners.get(&lid);
        if tuple.local.is_ipv4() {
            l.map_or(0, |l| l.tos)
        } else {
            l.map_or(0, |l| l.tclass)
        }
    }

    /// A listener on `port` for `families`. Listeners of families that do
    /// not overlap share a port (Linux's AF_INET `0.0.0.0` beside an
    /// IPV6_V6ONLY `::`); overlapping ones are EADDRINUSE.
    pub(crate) fn listen(&mut self, port: u16, backlog: usize, families: Families) -> Result<ListenerId, StackError> {
        let taken = self.listener_by_port.get(&port).is_some_and(|ls| {
            ls.iter().any(|l| self.listeners.get(l).is_some_and(|x| x.families.overlaps(&families)))
        });
        if taken {
            return Err(StackError::AddrInUse);
        }
        self.next_listener = self.next_listener.wrapping_add(1);
        let id = ListenerId(self.next_listener);
        let mut l = Listener::new(backlog);
        l.families = families;
        self.listeners.insert(id, l);
        self.listener_by_port.entry(port).or_default().push(id);
        Ok(id)
    }

    /// The listener on the tuple's local port that takes its family and address.
    pub(crate) fn listener_for(&self, tuple: &FourTuple) -> Option<ListenerId> {
        let ls = self.listener_by_port.get(&tuple.local.port())?;
        ls.iter().copied().find(|l| self.listeners.get(l).is_some_and(|x| x.families.takes(tuple)))
    }

    /// Adds a connection and queues its first output (SYN or SYN-ACK).
    pub(crate) fn insert(&mut self, conn: Connection, owner: Owner) -> ConnId {
        let id = loop {
            self.next_conn = self.next_conn.wrapping_add(1);
            let id = ConnId(self.next_conn);
            if !self.conns.contains_key(&id) {
                break id;
            }
        };
        self.by_tuple.insert(conn.tuple(), id);
        self.conns.insert(
            id,
            Entry {
                conn,
                owner,
                ready: false,
                deadline: None,
                app_notified: false,
            },
        );
        self.mark_ready(id);
        id
    }

    /// Picks a local port for a connection to `remote`: the 4-tuple must be
    /// unused and the port no listener's. Scans the range from a moving cursor.
    pub(crate) fn ephemeral_port(
        &mut self,
        local_ip: IpAddr,
        remote: SocketAddr,
        range: (u16, u16),
        (shard, nshards): (u16, u16),
    ) -> Option<u16> {
        let (lo, hi) = (range.0.min(range.1), range.0.max(range.1));
        if lo == 0 {
            return None;
        }
        let (by_tuple, listener_by_port) = (&self.by_tuple, &self.listener_by_port);
        let port = crate::steer::pick_source_port_from(
            local_ip,
            (remote.ip(), remote.port()),
            shard,
            nshards,
            lo..=hi,
            self.port_cursor,
            |port| {
                let tuple = FourTuple::new(SocketAddr::new(local_ip, port), remote);
                !by_tuple.contains_key(&tuple) && !listener_by_port.contains_key(&port)
            },
        )?;
        // The next search starts after it.
        self.port_cursor = if port == hi { lo } else { port + 1 };
        Some(port)
    }

    /// The connection may have output or a new deadline: serve it in `poll_transmit`.
    pub(crate) fn mark_ready(&mut self, id: ConnId) {
        if let Some(e) = self.conns.get_mut(&id) {
            if !e.ready {
                e.ready = true;
                self.sched.ready.push_back(id);
            }
        }
    }

    /// Marks ready every connection whose remote address satisfies `via`.
    pub(crate) fn mark_ready_via(&mut self, via: impl Fn(IpAddr) -> bool) {
        let ids: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, e)| via(e.conn.tuple().remote.ip()))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.mark_ready(id);
        }
    }

    /// The connection whose turn it is to send, if any: the caller takes
    /// its entry with [`TcpTable::ready_entry`], one lookup in all, and drops
    /// the id with [`TcpTable::drop_ready_front`] when that finds none.
    pub(crate) fn ready_front(&self) -> Option<ConnId> {
        self.sched.ready.front().copied()
    }

    /// The entry of `id` if it is (still) ready to send.
    pub(crate) fn ready_entry(&mut self, id: ConnId) -> Option<&mut Entry> {
        self.conns.get_mut(&id).filter(|e| e.ready)
    }

    /// Drops the front id: its connection is gone or no longer ready.
    pub(crate) fn drop_ready_front(&mut self) {
        self.sched.ready.pop_front();
    }

    /// After a connection produced a segment: give the others a turn.
    pub(crate) fn rotate_ready(&mut self) {
        if let Some(id) = self.sched.ready.pop_front() {
            self.sched.ready.push_back(id);
        }
    }

    /// The connection at the front had nothing more to send.
    /// Returns the owner if that freed it.
    pub(crate) fn done_ready(&mut self, id: ConnId) -> Option<Owner> {
        if self.sched.ready.front() == Some(&id) {
            self.sched.ready.pop_front();
        }
        if let Some(e) = self.conns.get_mut(&id) {
            e.ready = false;
        }
        self.settle(id)
    }

    /// Re-indexes the connection's deadline and frees it if it is finished and
    /// nobody holds it. Call after anything that may change a connection.
    /// Returns the owner if the connection was freed.
    pub(crate) fn settle(&mut self, id: ConnId) -> Option<Owner> {
        self.settle_marking(id, false)
    }

    /// [`TcpTable::mark_ready`] then [`TcpTable::settle`], with one lookup:
    /// what every segment a connection takes ends with.
    pub(crate) fn ready_and_settle(&mut self, id: ConnId) -> Option<Owner> {
        self.settle_marking(id, true)
    }

    fn settle_marking(&mut self, id: ConnId, ready: bool) -> Option<Owner> {
        let e = self.conns.get_mut(&id)?;
        let free = self.sched.settle(id, e, ready);
        free.then(|| self.remove(id)).flatten()
    }

    /// Frees a connection (one finished that nobody holds, when
    /// [`Schedule::settle`] says so). Returns its owner.
    pub(crate) fn remove(&mut self, id: ConnId) -> Option<Owner> {
        let e = self.conns.remove(&id)?;
        if e.deadline.is_some() {
            self.sched.timers.cancel(u64::from(id.0));
        }
        let tuple = e.conn.tuple();
        if self.by_tuple.get(&tuple) == Some(&id) {
            self.by_tuple.remove(&tuple);
        }
        match e.owner {
            Owner::Embryonic(l) => {
                if let Some(l) = self.listeners.get_mut(&l) {
                    l.syn_queue_len = l.syn_queue_len.saturating_sub(1);
                }
            }
            Owner::Queued(l) => {
                if let Some(l) = self.listeners.get_mut(&l) {
                    l.accept_queue.retain(|c| *c != id);
                }
            }
            Owner::App | Owner::Released => {}
        }
        Some(e.owner)
    }

    /// Next application-owned connection that has events, oldest first.
    pub(crate) fn poll_app_event(&mut self) -> Option<ConnId> {
        while let Some(id) = self.sched.app_events.pop_front() {
            if let Some(e) = self.conns.get_mut(&id) {
                e.app_notified = false;
                return Some(id);
            }
        }
        None
    }

    /// Frees a connection now, whatever its state (TIME-WAIT reuse).
    pub(crate) fn evict(&mut self, id: ConnId) {
        self.remove(id);
    }

    /// Connections whose filed deadline is at or before `now` (some of
    /// them with nothing due: see [`Schedule::settle`]). Their timers are
    /// disarmed: `settle` re-arms each one's next deadline.
    pub(crate) fn expired(&mut self, now: Instant) -> Vec<ConnId> {
        let mut fired = Vec::new();
        self.sched.timers.advance(now, &mut |token| fired.push(ConnId(token as u32)));
        for id in &fired {
            if let Some(e) = self.conns.get_mut(id) {
                e.deadline = None;
            }
        }
        fired
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        // No later than the earliest deadline (the wheel may answer a coarse
        // slot's start; handling the timeout then cascades it finer).
        let mut t = self.sched.timers.next_deadline();
        // Connections the application touched since their last settle may
        // have a deadline the index does not know yet.
        for id in &self.sched.ready {
            if let Some(d) = self.conns.get(id).and_then(|e| e.conn.poll_timeout()) {
                t = Some(t.map_or(d, |t| t.min(d)));
            }
        }
        t
    }

    /// Bytes the connections really hold: ring storage only where allocated
    /// (none for a SYN-RECEIVED connection or one in TIME-WAIT), so a full
    /// SYN queue costs a few KiB, not the configured buffers.
    pub(crate) fn memory(&self) -> usize {
        self.conns.values().map(|e| e.conn.memory_in_use() + ENTRY_OVERHEAD).sum::<usize>()
            + self.listeners.values().map(Listener::memory).sum::<usize>()
    }
}
