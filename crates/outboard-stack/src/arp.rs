//! The ARP cache (RFC 826), also the IPv6 neighbour cache (RFC 4861 §5.1:
//! the same bookkeeping keyed by IPv6 address, with solicitations for requests): resolved entries with a lifetime, incomplete
//! entries holding the frames that wait for them, request retry and give-up,
//! and a hard cap on entries. Pure bookkeeping: the stack builds and parses
//! the ARP packets and asks this module what to send.

use crate::stats::StackStats;
use outboard_time::{Duration, Instant};
use crate::flowhash::FlowMap;
use std::collections::VecDeque;
use std::hash::Hash;
use std::net::Ipv4Addr;

/// Time between requests for one unresolved address.
pub(crate) const REQUEST_INTERVAL: Duration = Duration::from_secs(1);
/// Requests sent before the next hop is declared unreachable.
pub(crate) const MAX_REQUESTS: u32 = 3;
/// After a failed resolution, frames to that address are dropped at once for this long
/// instead of queueing behind a host that is not there.
pub(crate) const FAILED_HOLD: Duration = Duration::from_secs(1);
/// Bytes charged per entry besides queued frames, for `memory_in_use`.
pub(crate) const ENTRY_OVERHEAD: usize = 64;

#[derive(Debug)]
enum Entry {
    Resolved {
        mac: [u8; 6],
        expires: Instant,
        /// A refresh request is out (the entry expired while in use).
        refreshing: bool,
    },
    Incomplete {
        /// Whole Ethernet frames whose destination MAC is filled in on resolution.
        pending: VecDeque<Vec<u8>>,
        requests_sent: u32,
        next_request: Instant,
    },
    Failed {
        until: Instant,
    },
}

/// What `queue` did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueOutcome {
    Queued,
    /// The per-address queue was full; the frame was dropped.
    PendingFull,
    /// The address recently failed to resolve; the frame was dropped.
    Unreachable,
}

/// What `handle_timeout` reports.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expired {
    /// Addresses given up on.
    pub failures: u64,
    /// Pending frames dropped with them.
    pub frames_dropped: u64,
}

#[derive(Debug)]
pub(crate) struct ArpCache<A = Ipv4Addr> {
    entries: FlowMap<A, Entry>,
    /// Requests to emit, in order (an address may appear once).
    requests: VecDeque<A>,
    cap: usize,
    ttl: Duration,
    pending_cap: usize,
    /// Entries that hold or wait for frames (Incomplete), for a cheap poll_timeout.
    incomplete: usize,
    pending_bytes: usize,
    /// Resolved entries expired this long ago are purged, not refreshed.
    grace: Duration,
    next_purge: Instant,
    /// The last address `lookup` found resolved, its MAC and expiry: a flow
    /// sends every frame to the same next hop, and this answers them without
    /// the table. Cleared by everything that changes the table.
    hot: Option<(A, [u8; 6], Instant)>,
}

impl<A: Copy + Eq + Hash + Ord + std::fmt::Display> ArpCache<A> {
    pub(crate) fn new(cap: usize, ttl: Duration, pending_cap: usize, now: Instant) -> ArpCache<A> {
        ArpCache {
            entries: FlowMap::default(),
            requests: VecDeque::new(),
            cap: cap.max(1),
            ttl,
            pending_cap,
            incomplete: 0,
            pending_bytes: 0,
            grace: REQUEST_INTERVAL * MAX_REQUESTS,
            next_purge: now + ttl,
            hot: None,
        }
    }

    /// The MAC for `ip` if known. An entry past its lifetime is still used for a
    /// short grace period while a refresh request goes out, so an active flow
    /// does not stall every `ttl`.
    pub(crate) fn lookup(&mut self, now: Instant, ip: A) -> Option<[u8; 6]> {
        if let Some((hot, mac, expires)) = self.hot {
            if hot == ip && now < expires {
                return Some(mac);
            }
        }
        match self.entries.get_mut(&ip)? {
            Entry::Resolved {
                mac,
                expires,
                refreshing,
            } => {
                if now < *expires {
                    self.hot = Some((ip, *mac, *expires));
                    return Some(*mac);
                }
                if now < *expires + self.grace {
                    if !*refreshing {
                        *refreshing = true;
                        self.requests.push_back(ip);
                    }
                    return Some(*mac);
                }
                None
            }
            _ => None,
        }
    }

    /// Holds `frame` until `ip` resolves, starting resolution if needed.
    pub(crate) fn queue(
        &mut self,
        now: Instant,
        ip: A,
        frame: Vec<u8>,
        stats: &mut StackStats,
    ) -> QueueOutcome {
        self.hot = None;
        let existing = self.entries.get(&ip);
        match existing {
            Some(Entry::Failed { until }) if now < *until => return QueueOutcome::Unreachable,
            Some(Entry::Incomplete { .. }) => {}
            _ => {
                // Absent, failed long enough ago, or resolved but stale: (re)start resolution.
                if existing.is_none() {
                    self.make_room(now, stats);
                }
                self.entries.insert(
                    ip,
                    Entry::Incomplete {
                        pending: VecDeque::new(),
                        requests_sent: 1,
                        next_request: now + REQUEST_INTERVAL,
                    },
                );
                self.incomplete += 1;
                self.requests.push_back(ip);
            }
        }
        let Some(Entry::Incomplete { pending, .. }) = self.entries.get_mut(&ip) else {
            unreachable!("entry for {ip} was made incomplete just above")
        };
        if pending.len() >= self.pending_cap {
            return QueueOutcome::PendingFull;
        }
        self.pending_bytes += frame.len();
        pending.push_back(frame);
        QueueOutcome::Queued
    }

    /// Records `ip` at `mac`. RFC 826 "merge": an existing entry is always
    /// updated; a new one is made only when `create` (we were the target of the
    /// packet, so we'll likely talk back). Returns frames that were waiting.
    pub(crate) fn learn(
        &mut self,
        now: Instant,
        ip: A,
        mac: [u8; 6],
        create: bool,
        stats: &mut StackStats,
    ) -> VecDeque<Vec<u8>> {
        self.hot = None;
        let mut flushed = VecDeque::new();
        match self.entries.get_mut(&ip) {
            Some(Entry::Incomplete { pending, .. }) => {
                flushed = std::mem::take(pending);
                self.incomplete -= 1;
                self.pending_bytes -= flushed.iter().map(Vec::len).sum::<usize>();
            }
            Some(_) => {}
            None if create => self.make_room(now, stats),
            None => return flushed,
        }
        self.entries.insert(
            ip,
            Entry::Resolved {
                mac,
                expires: now + self.ttl,
                refreshing: false,
            },
        );
        for frame in flushed.iter_mut() {
            // Invariant: frames are queued with a full Ethernet header by the stack.
            frame[..6].copy_from_slice(&mac);
        }
        flushed
    }

    /// Whether `poll_request` has an address (checked before every frame).
    #[inline]
    pub(crate) fn has_requests(&self) -> bool {
        !self.requests.is_empty()
    }

    /// Next address to send an ARP request for.
    pub(crate) fn poll_request(&mut self) -> Option<A> {
        self.requests.pop_front()
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let mut t = if self.entries.is_empty() {
            None
        } else {
            Some(self.next_purge)
        };
        if self.incomplete > 0 {
            for e in self.entries.values() {
                if let Entry::Incomplete { next_request, .. } = e {
                    t = Some(t.map_or(*next_request, |t: Instant| t.min(*next_request)));
                }
            }
        }
        t
    }

    /// Retries requests, gives up on silent addresses, purges dead entries.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Expired {
        self.hot = None;
        let mut out = Expired::default();
        if self.incomplete > 0 {
            for (ip, e) in self.entries.iter_mut() {
                let Entry::Incomplete {
                    pending,
                    requests_sent,
                    next_request,
                } = e
                else {
                    continue;
                };
                if now < *next_request {
                    continue;
                }
                if *requests_sent < MAX_REQUESTS {
                    *requests_sent += 1;
                    *next_request = now + REQUEST_INTERVAL;
                    if !self.requests.contains(ip) {
                        self.requests.push_back(*ip);
                    }
                } else {
                    // RFC 1122 §2.3.2.2: give up and drop what was waiting.
                    out.failures += 1;
                    out.frames_dropped += pending.len() as u64;
                    self.pending_bytes -= pending.iter().map(Vec::len).sum::<usize>();
                    self.incomplete -= 1;
                    *e = Entry::Failed {
                        until: now + FAILED_HOLD,
                    };
                }
            }
        }
        if now >= self.next_purge {
            self.next_purge = now + self.ttl;
            let grace = self.grace;
            self.entries.retain(|_, e| match e {
                Entry::Resolved { expires, .. } => now < *expires + grace,
                Entry::Failed { until } => now < *until,
                Entry::Incomplete { .. } => true,
            });
        }
        out
    }

    /// Makes room for one new entry: expired entries go first, then the
    /// resolved entry closest to expiry, then the oldest incomplete one
    /// (its frames are dropped).
    fn make_room(&mut self, now: Instant, stats: &mut StackStats) {
        self.hot = None;
        if self.entries.len() < self.cap {
            return;
        }
        let grace = self.grace;
        self.entries.retain(|_, e| match e {
            Entry::Resolved { expires, .. } => now < *expires + grace,
            Entry::Failed { until } => now < *until,
            Entry::Incomplete { .. } => true,
        });
        if self.entries.len() < self.cap {
            return;
        }
        let victim = self
            .entries
            .iter()
            .min_by_key(|(ip, e)| match e {
                Entry::Failed { .. } => (0, Instant::ZERO, **ip),
                Entry::Resolved { expires, .. } => (1, *expires, **ip),
                Entry::Incomplete { next_request, .. } => (2, *next_request, **ip),
            })
            .map(|(ip, _)| *ip);
        if let Some(ip) = victim {
            if let Some(Entry::Incomplete { pending, .. }) = self.entries.remove(&ip) {
                stats.drops_arp_unresolved += pending.len() as u64;
                self.incomplete -= 1;
                self.pending_bytes -= pending.iter().map(Vec::len).sum::<usize>();
            }
            stats.arp_evictions += 1;
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Live upgrade: every resolved address and its MAC.
    pub(crate) fn resolved(&self) -> Vec<(A, [u8; 6])> {
        self.entries
            .iter()
            .filter_map(|(ip, e)| match e {
                Entry::Resolved { mac, .. } => Some((*ip, *mac)),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn memory(&self) -> usize {
        self.entries.len() * ENTRY_OVERHEAD + self.pending_bytes
    }
}

#[cfg(test)]
mod tests;
