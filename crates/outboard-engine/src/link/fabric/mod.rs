//! The fabric: an in-memory Ethernet switch between engine processes of one
//! user on one machine, through shared memory, needing no privileges (the
//! Nectar HUB rebuilt), with the simulator's seeded fault knobs.
//!
//! # How
//!
//! - **One file per fabric**: `$OUTBOARD_FABRIC_DIR` if set, else `/dev/shm`,
//!   named `outboard-fabric-NAME`, mapped MAP_SHARED by every port. Layout in
//!   [`layout`]: a header (magic, version, geometry), 8 port records (owner
//!   pid, doorbell, sleeping flag, group word, drop counter), 64 ring control blocks
//!   (head and tail on separate cache lines) and 64 rings of 256 slots of
//!   2048 bytes (32 MiB, sparse on tmpfs: only slots used cost memory).
//! - **Creation** is race-free: the first opener creates the file with
//!   `O_CREAT|O_EXCL`, mode 0600, sizes it, writes the geometry and publishes
//!   the magic word last (Release). Later openers wait up to a second for the
//!   size and the magic (Acquire), then check owner uid, mode, size, version
//!   and geometry; a mismatch is [`LinkError::FabricTaken`] saying which file
//!   to remove.
//! - **Lifetime**: every open link holds a shared `flock` on the file. On
//!   close a link frees its port (CAS of its pid back to 0); if then every
//!   port is free and a non-blocking exclusive `flock` succeeds (no other
//!   link has the file open), it unlinks the file. An opener that took its
//!   shared lock on a file already unlinked (`st_nlink == 0`) starts over,
//!   so two processes never end up on two different files of one name. A
//!   crashed process leaves the file and its port's pid behind.
//! - **Ports**: claimed by CAS of our pid into a free owner word; a port whose
//!   owner pid is dead (`kill(pid, 0)` gives ESRCH) is reclaimed by CAS from
//!   that pid. The claimer discards frames left in the rings into the port
//!   (tail := head); frames the dead owner left in its outbound rings are
//!   still delivered (they are just late frames). All ports held by live
//!   pids: `FabricTaken("fabric NAME has all 8 ports in use")`. A recycled
//!   pid makes a dead port look alive: remove the file when no engine runs.
//! - **Addresses and switching**: port P has MAC `02:0f:ab:00:00:0P`
//!   (locally administered), ports 0 to 7. A frame goes to the port its
//!   destination MAC names (steered within a group, below); broadcast and
//!   multicast go to every other claimed port that is a group's base or in
//!   no group; unknown unicast (and frames to ourselves, our group included)
//!   is dropped and counted in [`FabricStats::unknown_unicast`] and
//!   `tx_errors`.
//! - **Groups: one NIC with N RSS queues** ([`FabricLink::open_group`]), for
//!   an engine of N shards, one link each. *Claiming*: N consecutive ports,
//!   each free or held by a dead pid, taken one by one by CAS of our pid
//!   from the lowest; a busy port makes the claimer release what it took
//!   and search on past it (the whole search is retried a few times if a
//!   CAS lost a race). None found, nothing is left claimed:
//!   `FabricTaken("fabric NAME has no N consecutive free ports (8 ports, M
//!   in use)")`. *Record*: each port record has a group word
//!   ([`layout::P_GROUP`]), `(base << 8) | N`, 0 for a port in no group
//!   (a group of one at itself). A member after the base gets its word
//!   right after its CAS (and the emptying of its inbound rings); the base
//!   gets its word last, once all N are claimed. Close (and the failed
//!   claim's release) clears the word before the CAS of the owner back to
//!   0; a claimer of a free or dead port overwrites it. A sender trusts a
//!   word only when it is well formed, names a range that holds the port,
//!   and the base and the port have the same owner pid (one process claims
//!   a whole group), so a word a dead group left behind is ignored as soon
//!   as either port changes hands. *Addresses*: every member answers to the
//!   base's MAC ([`Link::mac`]); [`FabricLink::port`] is still its own
//!   port, [`FabricLink::group`] gives `(base, N)`, and member i is queue i.
//!   *Switching*, at the sender: a unicast frame for the base's MAC whose
//!   payload is IPv4 TCP or UDP and not a fragment (MF clear, offset 0)
//!   goes to port `base + outboard_stack::steer::shard_for(tuple, N)`, the
//!   tuple as the receiver sees it (source = the frame's IPv4 source and
//!   source port, i.e. the sender): the same function the stack uses to
//!   pick source ports, so a flow's frames reach the shard that owns it.
//!   Anything else (ARP, ICMP, fragments, VLAN tags, frames too short for
//!   the headers they announce) goes to the base, queue 0. The chosen
//!   member must carry the same group word and owner as the base, else the
//!   frame goes to the base. Broadcast reaches a group once, at its base,
//!   and never our own group. A frame to a non-base member's own MAC is
//!   delivered there, as addressed. *A sender that reads the record before
//!   the base's word is written* (while the group is being claimed, or
//!   before it reads it at all) sees a port in no group: it delivers to
//!   the addressed port, the base, which is correct, only not steered; and
//!   a broadcast may reach a member in the instant between its CAS and its
//!   word. Version-1 engines, which knew no group word, cannot open the
//!   file (the layout version is 2): they would neither steer nor clear
//!   the word.
//! - **Transport**: one single-producer single-consumer ring per (source,
//!   destination) pair with free-running u32 head/tail (Acquire/Release).
//!   A slot holds `len`, `deliver_at` (CLOCK_MONOTONIC ns, 0 = now) and the
//!   frame. `transmit` lends a private staging buffer (the destination is
//!   known only after the frame is built), then copies it into the ring(s).
//! - **Full rings**: before lending the buffer, `transmit` returns
//!   [`TxStatus::Full`] when every claimed destination's ring from us is
//!   full; the destinations are the ports outside our own group, a peer
//!   group's members each counted (with one single-port peer, the usual
//!   case, that is exact backpressure; with a peer group, Full comes only
//!   when all its queues' rings from us are full, and a frame steered to a
//!   full queue is dropped as below; a full
//!   ring of a dead owner does not count, so a crashed peer cannot wedge the
//!   sender: its frames are dropped). When
//!   only the ring of the frame's particular destination is full, the frame
//!   is dropped like at a switch's full output queue: counted in
//!   [`FabricStats::ring_full_drops`] here and in the destination's shared
//!   drop counter, which it reports as `rx_kernel_drops`. TCP recovers.
//! - **Faults**: with `opts.fabric_faults` the sender runs an
//!   [`outboard_impair::FaultInjector`] on each frame at send time (on the
//!   frame, before switching: loss, duplication, corruption, bandwidth,
//!   delay, jitter, reordering); each surviving copy is written with its
//!   deliver-at time. The receiver moves ready slots into a bounded reorder
//!   buffer (a heap on deliver-at then arrival sequence, at most
//!   [`MAX_REORDER`] frames; when full it leaves frames in the rings) and
//!   hands out frames whose time has come, so delay and reordering work
//!   across processes (CLOCK_MONOTONIC is the same in every process).
//!   Without faults a due frame with nothing due before it goes straight
//!   from the ring to the callback (through one private copy). In a group
//!   each member runs its own injector on what it sends: queue 0 with the
//!   given seed, queue i with the seed plus i times a fixed odd constant.
//! - **Doorbell**: each port has a futex word and a sleeping flag. `wait`
//!   reads the word, sets `sleeping`, re-checks (rings, reorder buffer, space
//!   in a ring we found full), then `FUTEX_WAIT`s (shared futex, not the
//!   private flag: the word lives in memory shared between processes) on the
//!   value read before the re-check, until the timeout or the next deliver-at
//!   time. A sender publishes head, then (SeqCst fence) reads `sleeping`;
//!   if set it bumps the word and `FUTEX_WAKE`s: either the sleeper's re-check
//!   sees the frame or the sender sees the flag, so no wake-up is lost. A
//!   receiver that frees slots in a ring that was full rings the sender's
//!   doorbell the same way.
//! - **`also` fds** cannot be waited on together with a futex, so when `also`
//!   is non-empty `wait` polls them (non-blocking) before each sleep and
//!   sleeps in slices of at most 10 ms: an fd event is seen within 10 ms.
//!   With no `also` fds, one futex wait covers the whole timeout.
//! - **Untrusted memory**: another process may be buggy. Frames are copied
//!   to private memory before anything looks at them; a slot length outside
//!   14..=1514 is dropped and counted (`rx_oversize` when too long,
//!   `rx_kernel_drops` when too short, and [`FabricStats::rx_bad_slots`]);
//!   ring indices more than a ring apart are resynchronised (tail := head)
//!   and counted in [`FabricStats::rx_bad_rings`]; a deliver-at time more
//!   than 10 s ahead is cut to 10 s. The file is mode 0600 and
//!   must belong to our uid, so only our own processes can write it. Not
//!   defended: a process of ours that truncates the file (SIGBUS on access).
//!
//! # Not done, and why
//!
//! - MTU is 1500 at most: slots are 2 KiB to keep 64 rings at 32 MiB.
//!   Jumbo frames would need bigger slots or multi-slot frames.
//! - No MAC learning or flooding of unknown unicast: MACs are fixed per
//!   port, so an unknown destination is a bug worth counting.
//! - Faults are applied once per frame at the sender, before switching, so a
//!   broadcast frame is lost or delayed for all receivers alike.
//! - Group steering is fixed: the Microsoft RSS key, the default 128-entry
//!   indirection table, ports hashed for UDP too, no VLAN parsing. It is
//!   what `outboard_stack::steer::shard_for` computes, which is what an
//!   engine assumes of its NIC.

mod shm;

/// The file layout (offsets of header, port records, rings and slots), for
/// tools and tests that inspect or poke a fabric file directly.
pub mod layout {
    pub use super::shm::{
        port_offset, ring_offset, slot_offset, DATA, FILE_SIZE, H_DATA, H_MAGIC, H_PORTS,
        H_SIZE, H_SLOTS, H_SLOT_SIZE, H_VERSION, MAGIC, MAX_FRAME, PORTS, P_DOORBELL, P_DROPS,
        P_GROUP, P_OWNER, P_SLEEPING, R_HEAD, R_TAIL, SLOTS, SLOT_HEADER, SLOT_SIZE, VERSION,
    };
}

use std::sync::atomic::AtomicU32;
use super::*;
use crate::clock;
use outboard_impair::{FaultInjector, FaultStats};
use outboard_stack::steer::{shard_for, FlowTuple};
use shm::*;
use shm::MAX_FRAME;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::net::Ipv4Addr;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

/// Frames the receiver's reorder buffer holds at most (about 3 MiB).
pub const MAX_REORDER: usize = 2048;
/// How long an opener waits for a creator to finish initialising the file.
const INIT_WAIT: Duration = Duration::from_secs(1);
/// Longest sleep in one futex wait while `also` fds must be polled.
const ALSO_POLL: Duration = Duration::from_millis(10);
/// Longest a received frame is held for its deliver-at time: a later time
/// (from a buggy peer) is cut to this, so it cannot clog the reorder buffer.
const MAX_HOLD: Duration = Duration::from_secs(10);
/// Bytes of the next slot from the last sender that an idle `receive`
/// prefetches: the slot header and a small frame (a request, a response,
/// an ACK); a bigger frame's later lines follow by the hardware's own
/// prefetching as it is copied out.
const HOT_PREFETCH: usize = 256;
/// Recycled frame buffers kept at most.
const FREE_BUFFERS: usize = 256;
/// First five bytes of every port's MAC.
const MAC_PREFIX: [u8; 5] = [0x02, 0x0f, 0xab, 0x00, 0x00];

/// The MAC address of fabric port `port`.
pub fn port_mac(port: usize) -> [u8; 6] {
    let [a, b, c, d, e] = MAC_PREFIX;
    [a, b, c, d, e, port as u8]
}

/// Fabric-specific counters (monotonic since open), beyond [`LinkCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FabricStats {
    /// Frames sent to a MAC no claimed port has (or to ourselves): dropped.
    pub unknown_unicast: u64,
    /// Frame copies dropped because the destination's ring from us was full.
    pub ring_full_drops: u64,
    /// Slots received with a length outside 14..=1514: dropped.
    pub rx_bad_slots: u64,
    /// Rings found with head and tail more than a ring apart: resynchronised.
    pub rx_bad_rings: u64,
    /// Doorbells rung (FUTEX_WAKE calls made for a sleeping port).
    pub wakes_sent: u64,
    /// Frames that went through the reorder buffer (not due when read).
    pub reorder_buffered: u64,
}

/// A frame waiting in the reorder buffer; the heap's top is the earliest.
struct Pending {
    at: u64,
    seq: u64,
    frame: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Pending) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Pending) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    /// Reversed: BinaryHeap is a max-heap, we want the earliest on top.
    fn cmp(&self, o: &Pending) -> CmpOrdering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// One port of a fabric.
pub struct FabricLink {
    name: String,
    path: PathBuf,
    /// Holds our shared flock; closed after the mapping is gone.
    file: File,
    map: Mapping,
    port: usize,
    /// Our group: its first port (whose MAC we use) and its size; a port
    /// opened alone is a group of one at itself.
    base: usize,
    count: usize,
    pid: u32,
    mtu: usize,
    staging: Vec<u8>,
    scratch: Vec<u8>,
    faults: Option<FaultInjector>,
    fault_out: Vec<(outboard_time::Instant, Vec<u8>)>,
    heap: BinaryHeap<Pending>,
    free: Vec<Vec<u8>>,
    seq: u64,
    /// First source port `receive` looks at (rotates for fairness).
    rr: usize,
    /// The last `transmit` returned Full: `wait` also wakes for ring space.
    blocked_full: bool,
    /// Frames we may send before looking at the destinations' rings again
    /// (`transmit`): the most room one had at the last look, less our puts since.
    room_hint: u32,
    /// The shared drop counter of our port when we claimed it.
    drops_base: u64,
    /// `tails[d]`: the tail of our ring to port `d` when `put` last read it.
    /// Tails only move forward, so it is a bound on the room: `put` reads
    /// the shared tail (a cache line the receiver writes) only when this
    /// one says the ring may be full.
    tails: [u32; PORTS],
    /// The port we last received a frame from: while idle, `receive`
    /// prefetches the next slot of its ring to us (see `HOT_PREFETCH`).
    hot: Option<usize>,
    counters: LinkCounters,
    stats: FabricStats,
}

impl FabricLink {
    /// Opens a port of fabric `name` in `$OUTBOARD_FABRIC_DIR`, else `/dev/shm`.
    pub fn open(name: &str, opts: &LinkOptions) -> Result<FabricLink, LinkError> {
        let dir = std::env::var_os("OUTBOARD_FABRIC_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/dev/shm"));
        FabricLink::open_in(&dir, name, opts)
    }

    /// Opens a port of fabric `name` whose file lives in `dir`.
    pub fn open_in(dir: &Path, name: &str, opts: &LinkOptions) -> Result<FabricLink, LinkError> {
        let mut links = FabricLink::open_group_in(dir, name, opts, 1)?;
        Ok(links.remove(0))
    }

    /// Opens `count` consecutive ports of fabric `name` (in
    /// `$OUTBOARD_FABRIC_DIR`, else `/dev/shm`) as one NIC with `count` RSS
    /// queues: element `i` of the result is queue `i`, port `base + i`; all
    /// of them use the MAC of port `base`. See the module doc, "Groups".
    pub fn open_group(name: &str, opts: &LinkOptions, count: usize) -> Result<Vec<FabricLink>, LinkError> {
        let dir = std::env::var_os("OUTBOARD_FABRIC_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/dev/shm"));
        FabricLink::open_group_in(&dir, name, opts, count)
    }

    /// [`FabricLink::open_group`] with the fabric's file in `dir`.
    pub fn open_group_in(
        dir: &Path,
        name: &str,
        opts: &LinkOptions,
        count: usize,
    ) -> Result<Vec<FabricLink>, LinkError> {
        let name_ok = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !name_ok {
            return Err(LinkError::BadSpec(format!(
                "{name:?} is not a fabric name (1 to 64 of A-Z a-z 0-9 - _ .)"
            )));
        }
        if !(1..=PORTS).contains(&count) {
            return Err(LinkError::BadSpec(format!(
                "a fabric group has 1 to {PORTS} ports (asked for {count})"
            )));
        }
        let mtu = opts.mtu.unwrap_or(1500);
        if mtu > MAX_FRAME - 14 {
            return Err(LinkError::BadSpec(format!(
                "the fabric carries MTU 1500 at most (asked for {mtu})"
            )));
        }
        if mtu < 68 {
            return Err(LinkError::BadSpec(format!("MTU {mtu} is below IPv4's minimum of 68")));
        }
        let path = dir.join(format!("outboard-fabric-{name}"));
        let (file, map) = attach(&path, name)?;
        let pid = std::process::id();
        let base = claim_group(&map, pid, name, count)?;
        // Each member holds its own mapping and a duplicate of the locked
        // descriptor (one open file description: the shared flock lasts
        // until the last member closes it).
        let mut parts = Vec::with_capacity(count);
        for _ in 1..count {
            let dup = file
                .try_clone()
                .map_err(|e| LinkError::io("dup fabric file", e))
                .and_then(|f| Mapping::map(&f, FILE_SIZE).map(|m| (f, m)));
            match dup {
                Ok(part) => parts.push(part),
                Err(e) => {
                    release_ports(&map, pid, base, count);
                    return Err(e);
                }
            }
        }
        parts.insert(0, (file, map));
        let links = parts
            .into_iter()
            .enumerate()
            .map(|(i, (file, map))| {
                let port = base + i;
                let drops_base = map.u64_at(port_offset(port) + P_DROPS).load(Ordering::Relaxed);
                // Queue 0 keeps the seed as given (a group of one is a plain
                // port); the other queues get their own fault sequences.
                let faults = opts.fabric_faults.clone().map(|(cfg, seed)| {
                    FaultInjector::new(cfg, seed.wrapping_add((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
                });
                FabricLink {
                    name: name.to_string(),
                    path: path.clone(),
                    file,
                    map,
                    port,
                    base,
                    count,
                    pid,
                    mtu,
                    staging: vec![0; mtu + 14],
                    scratch: vec![0; MAX_FRAME],
                    faults,
                    fault_out: Vec::new(),
                    heap: BinaryHeap::new(),
                    free: Vec::new(),
                    seq: 0,
                    rr: 0,
                    blocked_full: false,
                    room_hint: 0,
                    drops_base,
                    tails: [0; PORTS],
                    hot: None,
                    counters: LinkCounters::default(),
                    stats: FabricStats::default(),
                }
            })
            .collect();
        Ok(links)
    }

    /// Our port number (0 to 7).
    pub fn port(&self) -> usize {
        self.port
    }

    /// Our group as (base port, number of ports); `(port, 1)` for a port
    /// opened alone. We are queue `port - base` of it.
    pub fn group(&self) -> (usize, usize) {
        (self.base, self.count)
    }

    /// The fabric's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fabric_stats(&self) -> FabricStats {
        self.stats
    }

    /// What the fault injector did to frames we sent (None without faults).
    pub fn fault_stats(&self) -> Option<FaultStats> {
        self.faults.as_ref().map(|f| *f.stats())
    }

    /// Frames waiting in the reorder buffer.
    pub fn reorder_len(&self) -> usize {
        self.heap.len()
    }

    fn owner(&self, port: usize) -> u32 {
        self.map.u32_at(port_offset(port) + P_OWNER).load(Ordering::Acquire)
    }

    /// Whether `port` belongs to our own group (ourselves included).
    fn in_our_group(&self, port: usize) -> bool {
        (self.base..self.base + self.count).contains(&port)
    }

    /// The group `port` belongs to as `(base, count)` when its group word is
    /// trustworthy: well formed, naming a range that holds `port`, and the
    /// base owned by the same live-or-dead pid as `port` (a word left by a
    /// dead owner fails this once either port has a new owner).
    fn group_of(&self, port: usize) -> Option<(usize, usize)> {
        let word = self.map.u32_at(port_offset(port) + P_GROUP).load(Ordering::Acquire);
        let (base, count) = ((word >> 8) as usize, (word & 0xff) as usize);
        let well_formed = count > 1 && base + count <= PORTS && (base..base + count).contains(&port);
        if !well_formed {
            return None;
        }
        let owner = self.owner(port);
        (owner != 0 && (base == port || self.owner(base) == owner)).then_some((base, count))
    }

    /// The port a unicast frame to port `p`'s MAC goes to: `p` itself, or,
    /// when `p` is the base of a group, the member the RSS hash of the
    /// frame's flow picks (if that member is claimed by the group's owner
    /// and carries the same group word; otherwise `p`).
    fn steer(&self, p: usize, frame: &[u8]) -> usize {
        let Some((base, count)) = self.group_of(p) else { return p };
        if base != p {
            return p; // a non-base member addressed directly: delivered as addressed
        }
        let Some(tuple) = flow_of(frame) else { return p };
        let q = p + usize::from(shard_for(&tuple, count as u16));
        if q == p {
            return p;
        }
        let word = self.map.u32_at(port_offset(p) + P_GROUP).load(Ordering::Acquire);
        let member_word = self.map.u32_at(port_offset(q) + P_GROUP).load(Ordering::Acquire);
        let owner = self.owner(p);
        if member_word == word && owner != 0 && self.owner(q) == owner {
            q
        } else {
            p
        }
    }

    /// Free slots in the ring from `src` to `dst`.
    fn ring_room(&self, src: usize, dst: usize) -> u32 {
        let ring = ring_offset(src, dst);
        let head = self.map.u32_at(ring + R_HEAD).load(Ordering::Relaxed);
        let tail = self.map.u32_at(ring + R_TAIL).load(Ordering::Acquire);
        SLOTS.saturating_sub(head.wrapping_sub(tail))
    }

    /// True when at least one port outside our group is claimed and every
    /// such port's ring from us is full (members of another group count one
    /// by one: any queue with room makes this false). A full ring whose owner
    /// died does not count (its frames are dropped instead), so a crashed
    /// peer cannot wedge us. Our own group's members are never destinations.
    fn all_destinations_full(&self) -> bool {
        self.destinations_room() == Some(0)
    }

    /// The most room (free slots) any destination's ring from us has, a
    /// dead owner's counting as all free; None when no port outside our
    /// group is claimed.
    fn destinations_room(&self) -> Option<u32> {
        let mut most = None;
        for p in (0..PORTS).filter(|&p| !self.in_our_group(p)) {
            let owner = self.owner(p);
            if owner != 0 {
                let room = match self.ring_room(self.port, p) {
                    // A full ring whose owner died: its frames are dropped, never waited for.
                    0 if !pid_alive(owner) => SLOTS,
                    r => r,
                };
                most = Some(most.map_or(room, |m: u32| m.max(room)));
                if room == SLOTS {
                    break;
                }
            }
        }
        most
    }

    /// Rings `port`'s doorbell if it sleeps (after our ring update, which the
    /// SeqCst fence orders before the read of its sleeping flag).
    fn notify(&mut self, port: usize) {
        fence(Ordering::SeqCst);
        let p = port_offset(port);
        if self.map.u32_at(p + P_SLEEPING).load(Ordering::SeqCst) != 0 {
            let bell = self.map.u32_at(p + P_DOORBELL);
            bell.fetch_add(1, Ordering::SeqCst);
            futex_wake(bell);
            self.stats.wakes_sent += 1;
        }
    }

    /// Switches one frame copy that should arrive at `at_ns`.
    fn forward(&mut self, frame: &[u8], at_ns: u64) {
        let Some(dst) = frame.get(..6) else { return };
        if dst[0] & 1 != 0 {
            // One copy per NIC: to every claimed port outside our group that
            // is not a non-base member of some group.
            for p in 0..PORTS {
                if self.in_our_group(p) || self.owner(p) == 0 {
                    continue;
                }
                if self.group_of(p).is_some_and(|(base, _)| base != p) {
                    continue;
                }
                self.put(p, frame, at_ns);
            }
            return;
        }
        let p = dst[5] as usize;
        if dst[..5] == MAC_PREFIX && p < PORTS && !self.in_our_group(p) && self.owner(p) != 0 {
            let q = self.steer(p, frame);
            self.put(q, frame, at_ns);
        } else {
            self.stats.unknown_unicast += 1;
            self.counters.tx_errors += 1;
        }
    }

    /// Writes one frame into our ring to `dst`, or drops it if the ring is full.
    fn put(&mut self, dst: usize, frame: &[u8], at_ns: u64) {
        self.room_hint = self.room_hint.saturating_sub(1);
        let ring = ring_offset(self.port, dst);
        let head = self.map.u32_at(ring + R_HEAD).load(Ordering::Relaxed);
        if head.wrapping_sub(self.tails[dst]) >= SLOTS {
            self.tails[dst] = self.map.u32_at(ring + R_TAIL).load(Ordering::Acquire);
        }
        if head.wrapping_sub(self.tails[dst]) >= SLOTS {
            self.stats.ring_full_drops += 1;
            self.map.u64_at(port_offset(dst) + P_DROPS).fetch_add(1, Ordering::Relaxed);
            return;
        }
        let slot = slot_offset(self.port, dst, head);
        self.map.u32_at(slot).store(frame.len() as u32, Ordering::Relaxed);
        self.map.u64_at(slot + 8).store(at_ns, Ordering::Relaxed);
        self.map.write(slot + SLOT_HEADER, frame);
        self.map.u32_at(ring + R_HEAD).store(head.wrapping_add(1), Ordering::Release);
        self.notify(dst);
    }

    /// Prefetches the slot the next frame from the port we last heard from
    /// will be written to (its header and first `HOT_PREFETCH` bytes), so
    /// that when its head moves the frame is already on its way to this
    /// core: one cache miss per frame on the critical path instead of two
    /// in series (the head's line, then the slot's). A hint only: the
    /// frame is still read after the head's Acquire load, as always.
    fn prefetch_hot(&self) {
        if let Some(src) = self.hot {
            let tail = self.map.u32_at(ring_offset(src, self.port) + R_TAIL).load(Ordering::Relaxed);
            self.map.prefetch(slot_offset(src, self.port, tail), HOT_PREFETCH);
        }
    }

    /// Whether any ring to us holds a frame.
    fn any_ring_ready(&self) -> bool {
        (0..PORTS).filter(|&s| s != self.port).any(|src| {
            let ring = ring_offset(src, self.port);
            self.map.u32_at(ring + R_HEAD).load(Ordering::Acquire) != self.map.u32_at(ring + R_TAIL).load(Ordering::Relaxed)
        })
    }

    /// Hands out frames from the reorder buffer whose time has come.
    fn pop_due(&mut self, now: u64, max: usize, rx: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max && self.heap.peek().is_some_and(|p| p.at <= now) {
            let Some(p) = self.heap.pop() else { break };
            self.counters.rx_frames += 1;
            self.counters.rx_bytes += p.frame.len() as u64;
            rx(&p.frame);
            n += 1;
            if self.free.len() < FREE_BUFFERS {
                self.free.push(p.frame);
            }
        }
        n
    }

    /// Reads up to `budget` deliverable frames from the ring `src` → us.
    fn drain_ring(&mut self, src: usize, now: u64, budget: usize, rx: &mut dyn FnMut(&[u8])) -> usize {
        let ring = ring_offset(src, self.port);
        let head = self.map.u32_at(ring + R_HEAD).load(Ordering::Acquire);
        let tail = self.map.u32_at(ring + R_TAIL).load(Ordering::Relaxed);
        let avail = head.wrapping_sub(tail);
        if avail == 0 {
            return 0;
        }
        if avail > SLOTS {
            // Indices a peer cannot have produced: skip everything in between.
            self.stats.rx_bad_rings += 1;
            self.counters.rx_kernel_drops += 1;
            self.map.u32_at(ring + R_TAIL).store(head, Ordering::Release);
            return 0;
        }
        let was_full = avail == SLOTS;
        let hold_limit = now.saturating_add(MAX_HOLD.as_nanos() as u64);
        let mut t = tail;
        let mut n = 0;
        while t != head && n < budget {
            let slot = slot_offset(src, self.port, t);
            let len = self.map.u32_at(slot).load(Ordering::Relaxed) as usize;
            let at = self.map.u64_at(slot + 8).load(Ordering::Relaxed).min(hold_limit);
            if !(14..=MAX_FRAME).contains(&len) {
                self.stats.rx_bad_slots += 1;
                if len > MAX_FRAME {
                    self.counters.rx_oversize += 1;
                } else {
                    self.counters.rx_kernel_drops += 1;
                }
                t = t.wrapping_add(1);
                continue;
            }
            let nothing_due_before = self.heap.peek().is_none_or(|p| p.at > now);
            if at <= now && nothing_due_before {
                self.map.read(slot + SLOT_HEADER, &mut self.scratch[..len]);
                t = t.wrapping_add(1);
                self.counters.rx_frames += 1;
                self.counters.rx_bytes += len as u64;
                rx(&self.scratch[..len]);
                n += 1;
            } else {
                if self.heap.len() >= MAX_REORDER {
                    break;
                }
                let mut frame = self.free.pop().unwrap_or_default();
                frame.resize(len, 0);
                self.map.read(slot + SLOT_HEADER, &mut frame);
                t = t.wrapping_add(1);
                self.heap.push(Pending { at, seq: self.seq, frame });
                self.seq += 1;
                self.stats.reorder_buffered += 1;
            }
        }
        if t != tail {
            self.hot = Some(src);
            self.map.u32_at(ring + R_TAIL).store(t, Ordering::Release);
            if was_full {
                self.notify(src);
            }
        }
        n
    }

    /// Whether `receive` or `transmit` could make progress now.
    fn ready(&self, now: u64) -> bool {
        if self.heap.peek().is_some_and(|p| p.at <= now) {
            return true;
        }
        if self.heap.len() < MAX_REORDER && self.any_ring_ready() {
            return true;
        }
        self.blocked_full && !self.all_destinations_full()
    }
}

impl Link for FabricLink {
    fn info(&self) -> LinkInfo {
        LinkInfo {
            kind: "fabric".into(),
            name: self.name.clone(),
            mode: if self.count > 1 {
                format!(
                    "port {} of {}, queue {} of group {}+{}, shm {}",
                    self.port,
                    PORTS,
                    self.port - self.base,
                    self.base,
                    self.count,
                    self.path.display()
                )
            } else {
                format!("port {} of {}, shm {}", self.port, PORTS, self.path.display())
            },
            mtu: self.mtu,
            mac: self.mac(),
            offloads: Vec::new(),
        }
    }

    /// The group's MAC (the base port's): one NIC, one address.
    fn mac(&self) -> [u8; 6] {
        port_mac(self.base)
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn receive(
        &mut self,
        max: usize,
        rx: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, LinkError> {
        if max == 0 {
            return Ok(0);
        }
        let rx = &mut |f: &[u8]| rx(f, RxMeta::default());
        // An idle poll reads no clock: only held frames or a ring with
        // frames in it need the time (their due times).
        if self.heap.is_empty() && !self.any_ring_ready() {
            self.rr = (self.rr + 1) % PORTS;
            self.prefetch_hot();
            return Ok(0);
        }
        let now = clock::now().as_nanos();
        let mut n = self.pop_due(now, max, rx);
        for k in 0..PORTS {
            let src = (self.rr + k) % PORTS;
            if src == self.port || n >= max {
                continue;
            }
            n += self.drain_ring(src, now, max - n, rx);
        }
        self.rr = (self.rr + 1) % PORTS;
        n += self.pop_due(now, max - n, rx);
        Ok(n)
    }

    fn transmit(&mut self, fill: &mut MetaFill<'_>) -> Result<TxStatus, LinkError> {
        // The destinations' rings are looked at only when the room seen at
        // the last look may be used up (each of our puts takes one slot of
        // it; the destinations only ever free slots): not on every call.
        if self.room_hint == 0 {
            match self.destinations_room() {
                Some(0) => {
                    self.counters.tx_full += 1;
                    self.blocked_full = true;
                    return Ok(TxStatus::Full);
                }
                Some(room) => self.room_hint = room,
                None => {}
            }
        }
        self.blocked_full = false;
        let mut staging = std::mem::take(&mut self.staging);
        let cap = staging.len();
        let filled = without_offloads(fill(&mut staging));
        let result = match filled {
            None => Ok(TxStatus::Idle),
            Some(len) if !(14..=cap).contains(&len) => {
                self.counters.tx_errors += 1;
                Err(LinkError::Io {
                    call: "fabric transmit",
                    err: std::io::Error::new(
                        ErrorKind::InvalidInput,
                        format!("frame length {len} outside 14..={cap}"),
                    ),
                })
            }
            Some(len) => {
                self.counters.tx_frames += 1;
                self.counters.tx_bytes += len as u64;
                if let Some(inj) = self.faults.as_mut() {
                    let mut out = std::mem::take(&mut self.fault_out);
                    inj.send(clock::now(), staging[..len].to_vec(), &mut |at, f| out.push((at, f)));
                    for (at, f) in out.drain(..) {
                        // Never 0 (which means "now") for a scheduled copy.
                        self.forward(&f, at.as_nanos().max(1));
                    }
                    self.fault_out = out;
                } else {
                    self.forward(&staging[..len], 0);
                }
                Ok(TxStatus::Queued)
            }
        };
        self.staging = staging;
        result
    }

    /// Frames are published to the rings (and sleepers woken) as they are
    /// transmitted; nothing is left to do.
    fn flush(&mut self) -> Result<(), LinkError> {
        Ok(())
    }

    fn wakes_on_futex(&self) -> bool {
        true
    }

    fn wait(
        &mut self,
        timeout: Duration,
        also: &[RawFd],
        futexes: &[(&AtomicU32, u32)],
    ) -> Result<(), LinkError> {
        let start = clock::now();
        let deadline = start + timeout;
        let me = port_offset(self.port);
        loop {
            let bell = self.map.u32_at(me + P_DOORBELL);
            let seq = bell.load(Ordering::SeqCst);
            self.map.u32_at(me + P_SLEEPING).store(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let now = clock::now();
            let done = self.ready(now.as_nanos())
                || (!also.is_empty() && any_readable(also))
                || now >= deadline;
            if done {
                self.map.u32_at(me + P_SLEEPING).store(0, Ordering::SeqCst);
                return Ok(());
            }
            let mut sleep = deadline - now;
            if let Some(p) = self.heap.peek() {
                sleep = sleep.min(Duration::from_nanos(p.at.saturating_sub(now.as_nanos())));
            }
            if !also.is_empty() {
                sleep = sleep.min(ALSO_POLL);
            }
            // The port's doorbell and the boards' doorbells in one sleep.
            let woken = if futexes.is_empty() {
                futex_wait(self.map.u32_at(me + P_DOORBELL), seq, sleep)
            } else {
                let mut words: Vec<(&AtomicU32, u32)> = Vec::with_capacity(futexes.len() + 1);
                words.push((self.map.u32_at(me + P_DOORBELL), seq));
                words.extend(futexes.iter().take(shm::FUTEX_WAITV_MAX - 1).copied());
                shm::futex_waitv(&words, sleep)
            };
            self.map.u32_at(me + P_SLEEPING).store(0, Ordering::SeqCst);
            if woken {
                return Ok(());
            }
            // Timed out: a frame fell due, an fd slice ended or the deadline
            // passed; the top of the loop sorts out which.
        }
    }

    fn counters(&self) -> LinkCounters {
        let shared = self.map.u64_at(port_offset(self.port) + P_DROPS).load(Ordering::Relaxed);
        let mut c = self.counters;
        c.rx_kernel_drops += shared.wrapping_sub(self.drops_base);
        c
    }
}

impl Drop for FabricLink {
    fn drop(&mut self) {
        release_ports(&self.map, self.pid, self.port, 1);
        let all_free = |map: &Mapping| {
            (0..PORTS).all(|p| map.u32_at(port_offset(p) + P_OWNER).load(Ordering::Acquire) == 0)
        };
        if !all_free(&self.map) {
            return;
        }
        // Last one out: unlink only if no other link holds the file (their
        // shared locks block our exclusive one) and the name still is our file.
        if flock(&self.file, libc::LOCK_EX | libc::LOCK_NB).is_ok() && all_free(&self.map) {
            if let (Ok(ours), Ok(named)) = (self.file.metadata(), std::fs::metadata(&self.path)) {
                if ours.dev() == named.dev() && ours.ino() == named.ino() {
                    let _ = std::fs::remove_file(&self.path);
                }
            }
        }
    }
}

fn taken(path: &Path, name: &str, what: &str) -> LinkError {
    LinkError::FabricTaken(format!(
        "{}: {what}; if no engine is using fabric {name}, remove the stale file (rm {})",
        path.display(),
        path.display()
    ))
}

/// Creates or opens the fabric file, holding a shared flock on it, and maps it.
fn attach(path: &Path, name: &str) -> Result<(File, Mapping), LinkError> {
    for _ in 0..100 {
        match OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path) {
            Ok(file) => return create(path, file),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(LinkError::io("create fabric file", e)),
        }
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            // Unlinked by its last user between our two opens: start over.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(LinkError::io("open fabric file", e)),
        };
        lock_shared(&file, path, name)?;
        let meta = file.metadata().map_err(|e| LinkError::io("fstat fabric file", e))?;
        if meta.nlink() == 0 {
            continue; // its last user unlinked it before we got the lock
        }
        let map = validate(&file, path, name)?;
        return Ok((file, map));
    }
    Err(taken(path, name, "the file keeps disappearing while we open it"))
}

/// Takes the shared lock, retrying while a closing link briefly holds it exclusively.
fn lock_shared(file: &File, path: &Path, name: &str) -> Result<(), LinkError> {
    let start = clock::now();
    loop {
        match flock(file, libc::LOCK_SH | libc::LOCK_NB) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {
                if clock::now() - start > INIT_WAIT {
                    return Err(taken(path, name, "another process holds an exclusive lock on it"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(LinkError::io("flock fabric file", e)),
        }
    }
}

/// Initialises a file we just created exclusively, publishing the magic last.
fn create(path: &Path, file: File) -> Result<(File, Mapping), LinkError> {
    let init = || -> Result<Mapping, LinkError> {
        flock(&file, libc::LOCK_SH).map_err(|e| LinkError::io("flock fabric file", e))?;
        file.set_len(FILE_SIZE as u64).map_err(|e| LinkError::io("ftruncate fabric file", e))?;
        let map = Mapping::map(&file, FILE_SIZE)?;
        map.u32_at(H_VERSION).store(VERSION, Ordering::Relaxed);
        map.u32_at(H_PORTS).store(PORTS as u32, Ordering::Relaxed);
        map.u32_at(H_SLOTS).store(SLOTS, Ordering::Relaxed);
        map.u32_at(H_SLOT_SIZE).store(SLOT_SIZE as u32, Ordering::Relaxed);
        map.u64_at(H_DATA).store(DATA as u64, Ordering::Relaxed);
        map.u64_at(H_SIZE).store(FILE_SIZE as u64, Ordering::Relaxed);
        map.u64_at(H_MAGIC).store(MAGIC, Ordering::Release);
        Ok(map)
    };
    match init() {
        Ok(map) => Ok((file, map)),
        Err(e) => {
            let _ = std::fs::remove_file(path);
            Err(e)
        }
    }
}

/// Checks an existing file (owner, mode, size, magic, version, geometry) and maps it.
fn validate(file: &File, path: &Path, name: &str) -> Result<Mapping, LinkError> {
    let start = clock::now();
    loop {
        let meta = file.metadata().map_err(|e| LinkError::io("fstat fabric file", e))?;
        if !meta.file_type().is_file() {
            return Err(taken(path, name, "not a regular file"));
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        if meta.uid() != euid {
            return Err(taken(
                path,
                name,
                &format!("owned by uid {}, not by us (uid {euid})", meta.uid()),
            ));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(taken(path, name, &format!("mode {:o} lets other users in", meta.mode() & 0o777)));
        }
        if meta.len() == FILE_SIZE as u64 {
            break;
        }
        if meta.len() != 0 || clock::now() - start > INIT_WAIT {
            return Err(taken(
                path,
                name,
                &format!("size {} is not a fabric of this version ({FILE_SIZE})", meta.len()),
            ));
        }
        std::thread::sleep(Duration::from_millis(1)); // its creator is sizing it
    }
    let map = Mapping::map(file, FILE_SIZE)?;
    loop {
        let magic = map.u64_at(H_MAGIC).load(Ordering::Acquire);
        if magic == MAGIC {
            break;
        }
        if magic != 0 {
            return Err(taken(path, name, "not an outboard fabric (bad magic)"));
        }
        if clock::now() - start > INIT_WAIT {
            return Err(taken(path, name, "never initialised (its creator died?)"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let version = map.u32_at(H_VERSION).load(Ordering::Relaxed);
    if version != VERSION {
        return Err(taken(path, name, &format!("layout version {version}, we speak {VERSION}")));
    }
    let geometry = (
        map.u32_at(H_PORTS).load(Ordering::Relaxed) as usize,
        map.u32_at(H_SLOTS).load(Ordering::Relaxed),
        map.u32_at(H_SLOT_SIZE).load(Ordering::Relaxed) as usize,
        map.u64_at(H_DATA).load(Ordering::Relaxed),
        map.u64_at(H_SIZE).load(Ordering::Relaxed),
    );
    if geometry != (PORTS, SLOTS, SLOT_SIZE, DATA as u64, FILE_SIZE as u64) {
        return Err(taken(
            path,
            name,
            &format!("geometry (ports, slots, slot size, data, size) = {geometry:?} differs from ours"),
        ));
    }
    Ok(map)
}

/// The group word of a port of the group `(base, count)`; 0 for a group of one.
fn group_word(base: usize, count: usize) -> u32 {
    if count > 1 {
        ((base as u32) << 8) | count as u32
    } else {
        0
    }
}

/// Claims `count` consecutive ports, each free or owned by a dead pid, by
/// CAS of our pid, one by one from the lowest; returns the base. On a busy
/// port the ports claimed so far are released and the search goes on past
/// it; if a CAS lost a race with another claimer, the whole search is
/// retried (a few times). Each claimed port gets its rings in emptied and,
/// for members after the base, the group word right away (so broadcasts
/// stop reaching them); the base's word is written last, once every member
/// is in place: only then do senders steer to the members.
fn claim_group(map: &Mapping, pid: u32, name: &str, count: usize) -> Result<usize, LinkError> {
    for _ in 0..4 {
        let mut raced = false;
        let mut base = 0;
        while base + count <= PORTS {
            let mut got = 0;
            while got < count {
                let port = base + got;
                let owner = map.u32_at(port_offset(port) + P_OWNER);
                let cur = owner.load(Ordering::Acquire);
                if cur != 0 && pid_alive(cur) {
                    break;
                }
                if owner.compare_exchange(cur, pid, Ordering::AcqRel, Ordering::Acquire).is_err() {
                    raced = true;
                    break;
                }
                let word = if got == 0 { 0 } else { group_word(base, count) };
                prepare_port(map, port, word);
                got += 1;
            }
            if got == count {
                if count > 1 {
                    map.u32_at(port_offset(base) + P_GROUP).store(group_word(base, count), Ordering::Release);
                }
                return Ok(base);
            }
            release_ports(map, pid, base, got);
            base += got + 1;
        }
        if !raced {
            break;
        }
    }
    if count == 1 {
        return Err(LinkError::FabricTaken(format!("fabric {name} has all {PORTS} ports in use")));
    }
    let in_use = (0..PORTS)
        .filter(|&p| {
            let owner = map.u32_at(port_offset(p) + P_OWNER).load(Ordering::Acquire);
            owner != 0 && pid_alive(owner)
        })
        .count();
    Err(LinkError::FabricTaken(format!(
        "fabric {name} has no {count} consecutive free ports ({PORTS} ports, {in_use} in use)"
    )))
}

/// Readies a port we just claimed: frames left in the rings into it are for
/// its previous owner (tail := head), it is not asleep, and its group word
/// is `word` (replacing whatever a dead owner left).
fn prepare_port(map: &Mapping, port: usize, word: u32) {
    let p = port_offset(port);
    map.u32_at(p + P_GROUP).store(word, Ordering::Release);
    for src in 0..PORTS {
        let ring = ring_offset(src, port);
        let head = map.u32_at(ring + R_HEAD).load(Ordering::Acquire);
        map.u32_at(ring + R_TAIL).store(head, Ordering::Release);
    }
    map.u32_at(p + P_SLEEPING).store(0, Ordering::SeqCst);
}

/// Frees ports `from .. from + count` that `pid` still owns: group word
/// cleared first (so no sender steers to a port about to be free), then the
/// owner CAS back to 0.
fn release_ports(map: &Mapping, pid: u32, from: usize, count: usize) {
    for port in from..from + count {
        let p = port_offset(port);
        let owner = map.u32_at(p + P_OWNER);
        if owner.load(Ordering::Acquire) == pid {
            map.u32_at(p + P_GROUP).store(0, Ordering::Release);
            let _ = owner.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}

/// The flow of an IPv4 TCP or UDP frame that is not a fragment, as the
/// receiver sees it (source = the frame's sender); None for anything else,
/// including frames too short for the headers they announce.
fn flow_of(frame: &[u8]) -> Option<FlowTuple> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = frame.get(14..)?;
    let first = *ip.first()?;
    let ihl = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || ihl < 20 || ip.len() < ihl {
        return None;
    }
    // MF set or a non-zero offset: a fragment (only the first has ports).
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return None;
    }
    if ip[9] != 6 && ip[9] != 17 {
        return None;
    }
    let l4 = ip.get(ihl..ihl + 4)?;
    Some(FlowTuple {
        src_ip: Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        dst_ip: Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
        src_port: u16::from_be_bytes([l4[0], l4[1]]),
        dst_port: u16::from_be_bytes([l4[2], l4[3]]),
    })
}
