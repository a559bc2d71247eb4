//! Steering between the shards of one engine: which shard owns a received
//! frame, and the lock-free rings that carry a frame to its owner when the
//! link (the NIC's RSS, the kernel's fanout, a TAP queue) handed it to
//! another shard.
//!
//! # Who owns what
//!
//! A connection belongs to one shard for its whole life (DESIGN.md item 5).
//! The owner of a received frame is decided by [`Steer::owner`], the same
//! function on every shard, from the frame alone and one read-mostly table
//! (the function itself is `outboard_stack::steer::frame_owner`, so the
//! simulator's multi-shard hosts steer exactly as the engine does):
//!
//! - **IPv4 TCP and UDP** (not a fragment): the shards that have the
//!   destination port bound (a listener or a UDP socket) are looked up in
//!   the [`PortTable`]. No shard, or the shard the Toeplitz RSS hash of the
//!   4-tuple names (`outboard_stack::steer::shard_for`, the NIC's default
//!   indirection table): that shard. So connections to a port every shard
//!   listens on (the built-in services) spread by hash, and `connect()`'s
//!   source ports, chosen by the stack to hash home, come back home. A port
//!   bound on some shards only (a board's datagram socket, which lives on one shard):
//!   the lowest of them, for every frame to that port, so the listener and
//!   the connections it accepts stay together.
//! - **ICMP errors**: the owner of the quoted packet's flow (the quote is
//!   what we sent, so its tuple is reversed), so an error reaches the
//!   connection it concerns.
//! - **ARP**: shard 0 answers; every other shard gets a copy to learn from
//!   (its stack answers no request: `StackConfig::arp_replies` is off), so a
//!   neighbour resolved by any shard is known to all without a shared cache.
//! - **Everything else** (fragments, ICMP echo and unknown protocols): shard
//!   0, which reassembles fragments. A UDP datagram that arrives in
//!   fragments is delivered by shard 0, so a fragmented datagram to a socket
//!   on another shard is dropped there (counted as the stack's port
//!   unreachable); TCP never fragments (the engine sets DF and clamps MSS).
//!
//! The port table is written only when a shard binds or unbinds a port
//! (a word per port and protocol, one bit per shard), and read per frame
//! with a relaxed load: no lock and no shared write on the per-packet path.
//! Its one weakness: a port bound on a new shard while connections to it
//! live elsewhere moves the owner of frames to that port; the engine binds
//! ports on all shards at once (services) or on shard 0 only (boards), so
//! this does not happen.
//!
//! # Forwarding
//!
//! Each shard has one inbound ring per other shard (`std::sync::mpsc`'s
//! bounded channel, a lock-free array queue, one producer each) of frame
//! buffers; a full ring drops the frame and counts it
//! (`forward_drops`), as a full NIC queue would. Buffers go back to their
//! sender through a second ring and are reused, so forwarding allocates only
//! while the pool grows. A forwarded frame is never steered again. The
//! receiving shard's doorbell (a socket pair it sleeps on, and a futex word
//! for links that sleep on futexes) is rung only while it says it sleeps:
//! the producer publishes the frame, then (SeqCst) reads the flag; the
//! consumer sets the flag, then (SeqCst) looks at its rings once more
//! before it sleeps.

use outboard_stack::steer::{frame_owner, FrameOwner};
use outboard_stack::RxMeta;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

/// Most shards an engine runs (one bit each in a port word).
pub const MAX_SHARDS: usize = 64;
/// Frames waiting in one shard-to-shard ring.
pub const FORWARD_RING: usize = 1024;

/// The protocols whose ports the table holds (the stack's steering enum).
pub use outboard_stack::steer::Transport as Proto;

/// Which shards have each port bound, per protocol: one bit per shard.
pub struct PortTable {
    tcp: Box<[AtomicU64]>,
    udp: Box<[AtomicU64]>,
}

impl Default for PortTable {
    fn default() -> Self {
        let words = || (0..65536).map(|_| AtomicU64::new(0)).collect::<Vec<_>>().into_boxed_slice();
        PortTable { tcp: words(), udp: words() }
    }
}

impl PortTable {
    fn words(&self, p: Proto) -> &[AtomicU64] {
        match p {
            Proto::Tcp => &self.tcp,
            Proto::Udp => &self.udp,
        }
    }

    /// The shards that have `port` bound.
    pub fn shards(&self, p: Proto, port: u16) -> u64 {
        self.words(p)[usize::from(port)].load(Ordering::Relaxed)
    }

    /// Says that `shard` has exactly `ports` bound now (of `before`, the
    /// set it said last time): sets and clears its bit where they differ.
    pub fn update(&self, p: Proto, shard: usize, before: &[u16], now: &[u16]) {
        let bit = 1u64 << shard;
        for port in before.iter().filter(|q| !now.contains(q)) {
            self.words(p)[usize::from(*port)].fetch_and(!bit, Ordering::Relaxed);
        }
        for port in now.iter().filter(|q| !before.contains(q)) {
            self.words(p)[usize::from(*port)].fetch_or(bit, Ordering::Relaxed);
        }
    }
}

/// Where a received frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Shard(usize),
    /// ARP: shard 0 answers; the others learn from a copy.
    Arp,
}

/// The steering function of an engine with `shards` shards.
#[derive(Clone)]
pub struct Steer {
    pub shards: usize,
    pub ports: Arc<PortTable>,
}

impl Steer {
    pub fn new(shards: usize) -> Steer {
        Steer { shards: shards.clamp(1, MAX_SHARDS), ports: Arc::new(PortTable::default()) }
    }

    /// The shard that owns `frame` (an Ethernet frame as received):
    /// `outboard_stack::steer::frame_owner` with this engine's port table.
    pub fn owner(&self, frame: &[u8]) -> Owner {
        match frame_owner(frame, self.shards as u16, |t, port| self.ports.shards(t, port)) {
            FrameOwner::Shard(s) => Owner::Shard(usize::from(s)),
            FrameOwner::Arp => Owner::Arp,
        }
    }
}

/// A frame on its way to another shard (the buffer returns to `from`).
pub struct Forwarded {
    pub from: usize,
    pub frame: Vec<u8>,
    pub meta: RxMeta,
}

/// How a shard is woken: a flag it raises while asleep, a socket pair
/// (fd-based links) and a futex word (links that sleep on futexes).
pub struct Doorbell {
    pub sleeping: AtomicBool,
    pub word: AtomicU32,
    bell_tx: UnixStream,
    bell_rx: UnixStream,
}

impl Doorbell {
    fn new() -> std::io::Result<Doorbell> {
        let (bell_tx, bell_rx) = UnixStream::pair()?;
        bell_tx.set_nonblocking(true)?;
        bell_rx.set_nonblocking(true)?;
        Ok(Doorbell { sleeping: AtomicBool::new(false), word: AtomicU32::new(0), bell_tx, bell_rx })
    }

    /// Wakes the shard if it sleeps.
    pub fn ring(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            self.word.fetch_add(1, Ordering::SeqCst);
            outboard_board::futex::wake(&self.word, 1);
            let _ = (&self.bell_tx).write(&[1]);
        }
    }

    pub fn fd(&self) -> RawFd {
        self.bell_rx.as_raw_fd()
    }

    /// Empties the socket pair (after a wake-up).
    pub fn drain(&self) {
        let mut b = [0u8; 64];
        while matches!((&self.bell_rx).read(&mut b), Ok(n) if n > 0) {}
    }
}

/// Per-shard forwarding counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct ForwardCounters {
    /// Frames this shard received from the link for another shard and sent there.
    pub out: u64,
    /// Frames other shards sent here.
    pub inbound: u64,
    /// Frames for another shard dropped because its ring from us was full.
    pub drops: u64,
    /// ARP frames copied to the other shards.
    pub arp_copies: u64,
}

/// One shard's end of the mesh: rings to every other shard, its own
/// inbound rings, and every shard's doorbell.
pub struct ShardPort {
    pub index: usize,
    pub steer: Steer,
    to: Vec<Option<SyncSender<Forwarded>>>,
    from: Vec<Receiver<Forwarded>>,
    /// Buffers coming back from the shards we forwarded to.
    returns: Receiver<Vec<u8>>,
    return_to: Vec<Option<SyncSender<Vec<u8>>>>,
    pool: Vec<Vec<u8>>,
    /// Frames taken out of the rings by `pending`.
    backlog: Vec<Forwarded>,
    bells: Arc<Vec<Doorbell>>,
    pub counters: ForwardCounters,
}

/// Buffers a shard keeps for forwarding at most.
const POOL: usize = 256;

/// Builds the mesh of `steer.shards` shards: one [`ShardPort`] each.
pub fn mesh(steer: &Steer) -> std::io::Result<Vec<ShardPort>> {
    let n = steer.shards;
    let bells = Arc::new((0..n).map(|_| Doorbell::new()).collect::<std::io::Result<Vec<_>>>()?);
    // tx[a][b]: a's sender into b's ring from a.
    let mut tx: Vec<Vec<Option<SyncSender<Forwarded>>>> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut rx: Vec<Vec<Receiver<Forwarded>>> = (0..n).map(|_| Vec::new()).collect();
    let mut ret_tx: Vec<Vec<Option<SyncSender<Vec<u8>>>>> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut ret_rx = Vec::new();
    for b in 0..n {
        for (a, row) in tx.iter_mut().enumerate() {
            if a != b {
                let (s, r) = sync_channel(FORWARD_RING);
                row[b] = Some(s);
                rx[b].push(r);
            }
        }
        // Buffers back to shard b from anyone: one ring, one sender per shard.
        let (s, r) = sync_channel(FORWARD_RING * n);
        for (a, row) in ret_tx.iter_mut().enumerate() {
            if a != b {
                row[b] = Some(s.clone());
            }
        }
        ret_rx.push(r);
    }
    Ok(tx
        .into_iter()
        .zip(rx)
        .zip(ret_tx)
        .zip(ret_rx)
        .enumerate()
        .map(|(index, (((to, from), return_to), returns))| ShardPort {
            index,
            steer: steer.clone(),
            to,
            from,
            returns,
            return_to,
            pool: Vec::new(),
            backlog: Vec::new(),
            bells: bells.clone(),
            counters: ForwardCounters::default(),
        })
        .collect())
}

impl ShardPort {
    /// Sends a copy of `frame` to shard `to`. False if its ring was full (counted).
    pub fn forward(&mut self, to: usize, frame: &[u8], meta: RxMeta) -> bool {
        let Some(Some(tx)) = self.to.get(to) else { return false };
        while let Ok(b) = self.returns.try_recv() {
            if self.pool.len() < POOL {
                self.pool.push(b);
            }
        }
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        match tx.try_send(Forwarded { from: self.index, frame: buf, meta }) {
            Ok(()) => {
                self.bells[to].ring();
                true
            }
            Err(TrySendError::Full(f) | TrySendError::Disconnected(f)) => {
                self.counters.drops += 1;
                self.pool.push(f.frame);
                false
            }
        }
    }

    /// Hands every frame waiting for this shard to `rx` (at most `max`), and
    /// the buffers back to their senders. Returns how many.
    pub fn receive(&mut self, max: usize, rx: &mut dyn FnMut(&[u8], RxMeta)) -> usize {
        let mut n = 0;
        for f in std::mem::take(&mut self.backlog) {
            rx(&f.frame, f.meta);
            n += 1;
            if let Some(Some(back)) = self.return_to.get(f.from) {
                let _ = back.try_send(f.frame);
            }
        }
        for ring in &self.from {
            while n < max {
                let Ok(f) = ring.try_recv() else { break };
                rx(&f.frame, f.meta);
                n += 1;
                if let Some(Some(back)) = self.return_to.get(f.from) {
                    let _ = back.try_send(f.frame);
                }
            }
        }
        self.counters.inbound += n as u64;
        n
    }

    /// Whether frames wait for this shard (checked after raising the
    /// sleeping flag; what it takes out waits in the backlog).
    pub fn pending(&mut self) -> bool {
        for ring in &self.from {
            if let Ok(f) = ring.try_recv() {
                self.backlog.push(f);
            }
        }
        !self.backlog.is_empty()
    }

    /// This shard's doorbell.
    /// Rings every other shard's doorbell (each only if it sleeps).
    pub fn wake_others(&self) {
        for (i, b) in self.bells.iter().enumerate() {
            if i != self.index {
                b.ring();
            }
        }
    }

    pub fn bell(&self) -> &Doorbell {
        &self.bells[self.index]
    }

    pub fn others(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.steer.shards).filter(move |s| *s != self.index)
    }
}
