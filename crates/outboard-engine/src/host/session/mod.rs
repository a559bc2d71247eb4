//! One attached application on one shard: its board, its endpoints, and
//! the commands it sends. Everything read from the board is copied out and
//! decoded or checked against the engine's own records before it is used; a
//! command that breaks the rules is a violation, and the application is
//! disconnected.
//!
//! The parts, by concern:
//! - this file: the session's state, the command loop, teardown;
//! - `commands`: acting on decoded commands (`BoardCommand`);
//! - `endpoints`: the endpoint table, stream regions, sync results;
//! - `publish`: status records, TCP_INFO words, stream events;
//! - `datagrams`: accepts into listeners, datagram delivery;
//! - `events`: the event queue (overflow, hints) and wake-ups.

mod commands;
mod datagrams;
mod endpoints;
mod events;
mod mailboxes;
mod publish;
mod record;

#[cfg(test)]
pub(super) use events::BATCH_WAIT;
pub use mailboxes::MailboxCounters;
pub use record::{params_from, EndpointRecord, SessionRecord};

use crate::host::SessionCx;
use outboard_board::arena::{FreeList, OwnerTable, Side};
use outboard_board::command::{Bounds, CommandViolation};
use outboard_board::layout::{app_counter, header, shard_control, CLASS_DGRAM_RX, CLASS_DGRAM_TX, ENGINE_GONE};
use outboard_board::{BoardLayout, BufRef, Command, Condition, Consumer, Event, MailboxProducer, Mapping, Producer, SyncTable};
use outboard_stack::{ConnId, ListenerId, UdpId};
use outboard_time::Instant;
use outboard_tcp::conn::ConnInfo;
use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Commands taken from one board per turn, so one application cannot starve the rest.
pub const COMMANDS_PER_TURN: usize = 256;
/// Datagrams delivered to one socket per turn.
const DATAGRAMS_PER_TURN: usize = 64;

/// Why an application was disconnected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// A command record that decodes to no command.
    Command(CommandViolation),
    /// A ring index that cannot be (the application scribbled on it).
    Corrupt(&'static str),
    /// A command about an endpoint that is not open, or not of the kind it needs.
    BadEndpoint(&'static str),
    /// A sync slot completed that nobody armed.
    BadSync,
    BadBuffer,
    BadLength(&'static str),
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Command(c) => write!(f, "{c}"),
            Violation::Corrupt(w) => write!(f, "corrupt {w}"),
            Violation::BadEndpoint(w) => write!(f, "bad endpoint in {w}"),
            Violation::BadSync => write!(f, "bad sync slot"),
            Violation::BadBuffer => write!(f, "a buffer the application does not hold"),
            Violation::BadLength(w) => write!(f, "impossible length in {w}"),
        }
    }
}

impl From<CommandViolation> for Violation {
    fn from(c: CommandViolation) -> Violation {
        Violation::Command(c)
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
    /// The application asked for TCP_INFO (`op::INFO`): only then are its
    /// words computed and published (about 1,300 instructions per update
    /// that most applications never read).
    info_wanted: bool,
    /// The TCP_INFO words in the status record now (written only when they change).
    published_info: Option<(u8, ConnInfo)>,
}

pub(super) enum EpKind {
    /// `shadow`: the endpoint belongs to another shard (which opened it and
    /// writes its status record); this shard listens on its port too and
    /// gives it the connections accepted here.
    Listener { lid: ListenerId, shadow: bool },
    Stream(StreamEp),
    Datagram { udp: UdpId, mailbox: MailboxProducer },
    /// A message mailbox (shard 0, with the message service).
    Mailbox(Box<mailboxes::MailboxEp>),
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SessionCounters {
    pub commands: u64,
    pub events: u64,
    pub signals: u64,
    /// Events posted without a wake-up of their own (bytes not pushed yet).
    pub batched: u64,
    pub accepts: u64,
    pub accepts_deferred: u64,
    pub datagrams_in: u64,
    pub datagrams_dropped: u64,
    pub datagrams_out: u64,
    /// Datagrams the application asked to send that the stack could not
    /// (no route, a family the engine does not run, too long).
    pub datagrams_unsent: u64,
    /// Bytes moved from an accepted connection's early heap ring into its board region.
    pub migrated_bytes: u64,
    /// Stream bytes delivered: consumed by the application (rx), acknowledged by the peer (tx).
    pub rx_delivered: u64,
    pub tx_delivered: u64,
    /// SET_OPTION commands with an unknown option or a value out of range (ignored).
    pub bad_options: u64,
    /// Shadow listeners this shard could not open (the port taken here by another board).
    pub shadows_refused: u64,
}

pub struct Session {
    pub id: u64,
    pub pid: u32,
    /// The application's user, and its board's inherit key (the engine's copy).
    pub uid: u32,
    pub key: u64,
    /// The key of the application this one was forked from (`CHILD_OF`).
    pub parent_key: Option<u64>,
    /// A `CHILD_OF` this turn, not yet counted in its parent's `children`
    /// (the host counts it: the parent is another session).
    pub new_parent: Option<u64>,
    /// Children that said `CHILD_OF` with this board's key, alive or not.
    /// Once they are as many as its `FORKS`, no child of its is still on
    /// its way to join its listeners.
    pub children: u64,
    /// The application's `FORKS` counter as last seen, and when it last changed.
    forks_seen: (u64, Option<Instant>),
    /// The shard this session runs on: its rings, and the endpoint ids it opens.
    pub shard: u32,
    bounds: Bounds,
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
    /// An event that wakes the application was posted this turn.
    posted: bool,
    /// Batched posts (`events`): one came this turn, and since when the
    /// oldest not yet woken for waits.
    batched_new: bool,
    batched_since: Option<Instant>,
    /// The application's wake eventfd (written while it has threads in poll/epoll on it).
    wake: Option<Arc<std::os::fd::OwnedFd>>,
    /// Its wake groups (`op::WAKE_GROUP`).
    groups: events::WakeGroups,
    /// The board's memfd (handed on by a live upgrade).
    memory: Option<Arc<std::os::fd::OwnedFd>>,
    /// The application said DETACH: its hang-up that follows is not a death.
    pub detached: bool,
    pub counters: SessionCounters,
    pub mailbox_counters: MailboxCounters,
    /// Requests delivered to its mailboxes and not answered yet.
    tokens: mailboxes::Tokens,
    /// A handler module being staged (`op::HANDLER_STAGE`), and whether it passed the limit.
    staged: Vec<u8>,
    staged_over: bool,
}

impl Session {
    /// The session of application `n` on shard `shard` of the engine.
    pub fn new(id: u64, shard: u32, n: crate::host::attach::NewSession) -> Session {
        let l = n.layout;
        let map = n.map;
        let p = l.params;
        let rings = l.shards[shard as usize];
        // Received-datagram buffers are split between the shards (each
        // delivers into its own); stream regions are shared (`n.regions`).
        let shards = l.params.shards.max(1);
        let rx_bufs = (0..l.arena.classes[CLASS_DGRAM_RX as usize].count)
            .filter(|i| i % shards == shard)
            .map(|index| BufRef { class: CLASS_DGRAM_RX, index });
        let owners = OwnerTable::new(&l.arena, |b| if b.class == CLASS_DGRAM_TX { Side::App } else { Side::Engine });
        Session {
            id,
            pid: n.pid,
            uid: n.uid,
            key: n.key,
            parent_key: None,
            new_parent: None,
            children: 0,
            forks_seen: (0, None),
            shard,
            bounds: Bounds { endpoints: p.endpoints, syncs: p.syncs },
            cmds: Consumer::new(map.clone(), rings.command_ring, p.command_capacity),
            events: Producer::new(map.clone(), rings.event_ring, p.event_capacity),
            cond: Condition::new(map.clone(), header::EVENT_CONDITION),
            syncs: SyncTable::new(map.clone(), l.syncs, p.syncs),
            eps: (0..p.endpoints).map(|_| None).collect(),
            polled: Vec::new(),
            generations: vec![0; p.endpoints as usize],
            // This shard's share of the ids (`BoardLayout::shard_of`).
            free_eps: (0..p.endpoints).rev().filter(|e| l.shard_of(*e) == shard).collect(),
            regions: n.regions.clone(),
            dgram_rx: FreeList::new(rx_bufs),
            owners,
            overflow: VecDeque::new(),
            hints: vec![0; p.endpoints as usize],
            hinted: Vec::new(),
            posted: false,
            batched_new: false,
            batched_since: None,
            wake: n.wake.map(Arc::new),
            groups: events::WakeGroups::new(n.wake_groups, p.endpoints),
            memory: n.memory,
            detached: false,
            counters: SessionCounters::default(),
            mailbox_counters: MailboxCounters::default(),
            staged: Vec::new(),
            staged_over: false,
            tokens: mailboxes::Tokens::default(),
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
        // A shadow listener is counted by the shard it belongs to.
        self.eps.iter().filter(|e| e.is_some() && !matches!(e, Some(EpKind::Listener { shadow: true, .. }))).count()
    }

    /// Whether `poll_endpoints` has anything to look at: datagram sockets
    /// or mailboxes (those only with a message service).
    pub fn polls_endpoints(&self, messages: bool) -> bool {
        !self.polled.is_empty() || messages
    }

    /// Whether commands wait (checked before the shard sleeps). Garbage counts as work: the next turn finds it.
    pub fn has_commands(&self) -> bool {
        self.cmds.available().map_or(true, |n| n > 0)
    }

    /// `how`: 0 awake, else `SLEEP_EVENTFD` / `SLEEP_FUTEX` (how applications must wake us).
    pub fn set_engine_sleeping(&self, how: u32) {
        let at = self.layout.shard_control(self.shard, shard_control::ENGINE_SLEEPING);
        self.map.atomic_u32(at).store(how, Ordering::SeqCst);
    }

    /// The board's engine doorbell word (futex wake-ups).
    pub fn engine_doorbell(&self) -> &std::sync::atomic::AtomicU32 {
        self.map.atomic_u32(self.layout.shard_control(self.shard, shard_control::ENGINE_DOORBELL))
    }

    /// The application's own counters from the board header (`app_counter::*`):
    /// for display only, never trusted.
    pub fn app_counters(&self) -> [u64; header::APP_COUNTERS_LEN] {
        std::array::from_fn(|k| self.map.atomic_u64(header::APP_COUNTERS + 8 * k).load(Ordering::Relaxed))
    }

    /// The application died or broke the rules: reset its streams, close its
    /// sockets, tell it (if alive) that the engine is gone for it.
    pub fn teardown(&mut self, sc: &mut SessionCx<'_>) {
        // An application that forked may have a child about to join its
        // listeners (`INHERIT` with our key; a daemon's parent exits right
        // after `fork`): they linger a little. Not once every fork's child
        // has attached (`CHILD_OF`): then none is on its way, and the port
        // is free at once, as Linux frees it when a server that forked its
        // workers stops (a restart binds it again at once).
        let child_may_come = self.app_counters()[app_counter::FORKS] > self.children;
        let linger_until = child_may_come.then(|| sc.now + crate::host::listeners::LINGER);
        let (stack, claims, listeners, hand) = (&mut *sc.stack, &mut *sc.claims, &mut *sc.listeners, &mut *sc.handover);
        let adopter = child_may_come || hand.has_child(self.key);
        let mut owned = |c: ConnId, ep: Option<u32>| claims.push((c, ep));
        for ep in 0..self.eps.len() as u32 {
            match self.eps[ep as usize].as_ref() {
                // A child it forked may take the stream over: it waits, then
                // closes (a clean detach) or resets (a death) if nobody does.
                Some(EpKind::Stream(_)) if adopter => {
                    let abort = !self.detached;
                    self.orphan(ep, sc.now + crate::host::handover::LINGER, abort, hand, &mut owned);
                }
                Some(EpKind::Stream(_)) => {
                    // A clean detach closes (FIN after what is queued); a death resets.
                    if let Some(conn) = self.drop_stream(stack, ep, !self.detached) {
                        owned(conn, None);
                    }
                }
                Some(EpKind::Listener { .. }) => self.close_listener(stack, listeners, ep, linger_until),
                Some(EpKind::Datagram { udp, .. }) => {
                    stack.udp_close(*udp);
                    self.close_ep(ep);
                }
                // Unbound below, with everything else of this board's.
                Some(EpKind::Mailbox(_)) => self.close_ep(ep),
                None => {}
            }
        }
        if let Some(svc) = sc.messages.as_deref_mut() {
            svc.unload_handlers_of(sc.now, self.id);
            svc.forget(self.id);
        }
        self.map.atomic_u32(header::ENGINE_STATE).store(ENGINE_GONE, Ordering::SeqCst);
        self.cond.signal();
        self.ring_wake_all();
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}
