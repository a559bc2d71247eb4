//! Streams handed from a process to the children it forked.
//!
//! A server that accepts in the parent and forks a child per connection
//! (`socketserver.ForkingTCPServer`, inetd-style servers) leaves the
//! connection to the child: on Linux both hold the socket, the parent
//! closes its copy, the child goes on. Here a stream lives in one board, so
//! it moves:
//!
//! - The parent's shim sends `RELEASE` instead of `CLOSE` for a stream that
//!   existed when it forked. If the parent has a child attached (a session
//!   that said `CHILD_OF` with its key) or forked a moment ago (its `FORKS`
//!   counter changed within [`LINGER`]), the connection becomes an
//!   **orphan**: its endpoint id is freed, the connection stays open with
//!   its bytes where they are (the parent's board regions, which the engine
//!   keeps mapped). Otherwise `RELEASE` is `CLOSE`.
//! - The child's shim sends `ADOPT` (the parent's key, the endpoint) at its
//!   first call on the stream. The host gives it the orphan: a new endpoint
//!   in the child's board, both rings moved into the child's regions
//!   (`Connection::attach_storage` copies the queued bytes), the status
//!   record's `TX_BASE` saying how many bytes were already queued to send.
//!   An `ADOPT` that arrives before the parent's `RELEASE` waits for it
//!   (up to [`ADOPT_WAIT`]); if the parent keeps the stream open, EBUSY.
//! - An orphan nobody adopts is closed (gracefully, as the parent asked)
//!   once [`LINGER`] has passed and the parent has no child left; an
//!   orphan left by a parent that died is reset, as its death would have.

use outboard_stack::ConnId;
use outboard_time::{Duration, Instant};

/// How long a released stream waits for a child that has not attached yet.
pub const LINGER: Duration = Duration::from_secs(2);
/// How long an ADOPT waits for the parent to release the stream.
pub const ADOPT_WAIT: Duration = Duration::from_secs(1);

/// A connection released by its board, waiting for a child.
#[derive(Debug, Clone, Copy)]
pub struct Orphan {
    /// The releasing board's inherit key and the endpoint it had there.
    pub key: u64,
    pub ep: u32,
    pub conn: ConnId,
    pub until: Instant,
    /// Reset (the parent died) rather than close (it released) when nobody adopts.
    pub abort: bool,
}

/// An ADOPT waiting for its stream.
#[derive(Debug, Clone, Copy)]
pub struct Adopt {
    pub session: u64,
    pub sync: u32,
    pub key: u64,
    pub ep: u32,
    pub until: Instant,
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct HandoverCounters {
    /// Streams released to an orphan, adopted by a child, closed or reset unadopted.
    pub released: u64,
    pub adopted: u64,
    pub expired: u64,
    /// ADOPTs refused (no such stream, or the parent kept it).
    pub refused: u64,
}

impl HandoverCounters {
    /// Adds another shard's counters.
    pub fn add(&mut self, o: &HandoverCounters) {
        self.released += o.released;
        self.adopted += o.adopted;
        self.expired += o.expired;
        self.refused += o.refused;
    }
}

/// The host's orphans and waiting adoptions.
#[derive(Debug, Default)]
pub struct Handover {
    pub orphans: Vec<Orphan>,
    pub adopts: Vec<Adopt>,
    /// Keys of boards that have a child attached (recomputed every turn).
    pub parents: Vec<u64>,
    pub counters: HandoverCounters,
}

impl Handover {
    /// Whether the board with `key` has a child attached now.
    pub fn has_child(&self, key: u64) -> bool {
        self.parents.contains(&key)
    }

    /// Takes the orphan (key, ep), if there is one.
    pub fn take_orphan(&mut self, key: u64, ep: u32) -> Option<Orphan> {
        let i = self.orphans.iter().position(|o| o.key == key && o.ep == ep)?;
        Some(self.orphans.swap_remove(i))
    }

    /// Orphans whose time is up and whose parent has no child left.
    pub fn expired(&mut self, now: Instant) -> Vec<Orphan> {
        let parents = std::mem::take(&mut self.parents);
        let (gone, keep): (Vec<Orphan>, Vec<Orphan>) =
            self.orphans.drain(..).partition(|o| o.until <= now && !parents.contains(&o.key));
        self.orphans = keep;
        self.parents = parents;
        self.counters.expired += gone.len() as u64;
        gone
    }
}
