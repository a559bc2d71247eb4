//! Seeded fault injection for one direction of one link.
//!
//! A `FaultInjector` takes each frame a sender puts on the link and decides,
//! from its own seeded RNG, what the link does to it, in this order:
//!
//! 0. **outage** — during a configured time window the link is down and
//!    every frame offered vanishes (a cable pull, a switch reboot);
//! 1. **loss** — the frame vanishes;
//! 2. **duplication** — a second copy follows it (each copy goes through the
//!    rest of the pipeline on its own, so it takes its own queue space);
//! 3. **corruption** — one random bit of one random byte of the *whole frame*
//!    is flipped. The receiver must catch it: the IPv4/TCP/UDP checksums do for
//!    the payload; a flip in the Ethernet header is caught only by an address
//!    mismatch (destination MAC, EtherType) or, for the source MAC, not at all
//!    (harmless), since simulated frames carry no FCS. ARP has no checksum
//!    at all: a flipped sender address in an ARP reply poisons the
//!    receiver's cache until the entry expires, as it would on a link
//!    without FCS.
//!
//!    A separate knob, `undetectable_corrupt`, models the Internet checksum's
//!    blind spot: it sets a bit in one 16-bit word of the payload and clears
//!    the same bit in another, which leaves the ones'-complement sum (RFC 1071)
//!    unchanged, so the stack accepts wrong data. It exists to prove that the
//!    end-to-end checks above the stack (byte compare, SHA-256) catch what
//!    checksums cannot;
//! 4. **bandwidth** — serialisation at `bandwidth_bps` through a FIFO queue
//!    bounded at `queue_bytes`; a frame that does not fit is tail-dropped.
//!    Each frame costs its length plus `wire_overhead` bytes (preamble, FCS,
//!    inter-frame gap) of link time;
//! 5. **delay** — a fixed propagation delay plus uniform jitter in
//!    `[0, jitter]` (jitter may reorder frames, as netem's does);
//! 6. **reordering** — a frame picked with probability `reorder` is held back
//!    a further uniform `(0, reorder_delay]`, so later frames overtake it.
//!
//! Every decision is counted in `FaultStats`. The injector is pure logic over
//! (time, frame) — no clock, no I/O — so the simulator, the engine's in-memory
//! fabric and a lab relay can all use it.

use crate::rng::Rng;
use outboard_time::{Duration, Instant};
use serde::Serialize;
use std::collections::VecDeque;

/// First frame offset `undetectable_corrupt` touches: past Ethernet (14),
/// IPv4 (20) and the largest TCP header (60), so only payload changes. Even,
/// so words line up with the checksum's 16-bit words.
pub const UNDETECTABLE_FROM: usize = 96;

/// The knobs of one link direction. Probabilities are per frame, in [0, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    /// Largest extra delay of a reordered frame.
    pub reorder_delay: Duration,
    pub corrupt: f64,
    /// Checksum-preserving two-bit corruption past the first `UNDETECTABLE_FROM` bytes.
    pub undetectable_corrupt: f64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Largest extra random delay per frame.
    pub jitter: Duration,
    /// Link rate in bits per second; 0 means infinitely fast (no queue).
    pub bandwidth_bps: u64,
    /// Bytes the transmit queue holds (including the frame being serialised).
    pub queue_bytes: usize,
    /// Bytes of link time per frame beyond the frame itself (Ethernet: 8 preamble + 4 FCS + 12 gap).
    pub wire_overhead: usize,
    /// Windows [start, end) during which the link is down.
    pub outages: Vec<(Instant, Instant)>,
}

impl Default for FaultConfig {
    /// A perfect link: no faults, no delay, infinite bandwidth.
    fn default() -> FaultConfig {
        FaultConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(1),
            corrupt: 0.0,
            undetectable_corrupt: 0.0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            bandwidth_bps: 0,
            queue_bytes: 256 * 1024,
            wire_overhead: 24,
            outages: Vec::new(),
        }
    }
}

/// What the injector did, frame by frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FaultStats {
    /// Frames offered to the link.
    pub frames_seen: u64,
    pub bytes_seen: u64,
    /// Frames scheduled for delivery (duplicates included).
    pub frames_delivered: u64,
    /// Frames lost to the `loss` knob.
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// Frames given a checksum-preserving corruption.
    pub corrupted_undetectable: u64,
    /// Frames tail-dropped because the bandwidth queue was full.
    pub queue_drops: u64,
    /// Frames offered while the link was down.
    pub outage_drops: u64,
}

impl FaultStats {
    /// Field-wise sum, for totals over several links.
    pub fn add(&mut self, o: &FaultStats) {
        self.frames_seen += o.frames_seen;
        self.bytes_seen += o.bytes_seen;
        self.frames_delivered += o.frames_delivered;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.corrupted += o.corrupted;
        self.corrupted_undetectable += o.corrupted_undetectable;
        self.queue_drops += o.queue_drops;
        self.outage_drops += o.outage_drops;
    }
}

/// One direction of a faulty link.
#[derive(Debug, Clone)]
pub struct FaultInjector {
    cfg: FaultConfig,
    rng: Rng,
    stats: FaultStats,
    /// When the serialiser finishes the last queued frame.
    busy_until: Instant,
    /// (finish time, bytes) of frames still in the queue, oldest first.
    queued: VecDeque<(Instant, usize)>,
    queued_bytes: usize,
}

impl FaultInjector {
    pub fn new(cfg: FaultConfig, seed: u64) -> FaultInjector {
        FaultInjector {
            cfg,
            rng: Rng::new(seed),
            stats: FaultStats::default(),
            busy_until: Instant::ZERO,
            queued: VecDeque::new(),
            queued_bytes: 0,
        }
    }

    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }

    /// Changes the knobs from now on (the queue and counters carry over).
    pub fn set_config(&mut self, cfg: FaultConfig) {
        self.cfg = cfg;
    }

    pub fn stats(&self) -> &FaultStats {
        &self.stats
    }

    /// Bytes waiting in (or being serialised by) the bandwidth queue at the last call.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Offers `frame`, sent at `now`, to the link. `deliver(at, frame)` is called
    /// zero, one or two times with the arrival time of each surviving copy.
    pub fn send(
        &mut self,
        now: Instant,
        frame: Vec<u8>,
        deliver: &mut dyn FnMut(Instant, Vec<u8>),
    ) {
        self.stats.frames_seen += 1;
        self.stats.bytes_seen += frame.len() as u64;
        if self
            .cfg
            .outages
            .iter()
            .any(|&(start, end)| start <= now && now < end)
        {
            self.stats.outage_drops += 1;
            return;
        }
        if self.rng.chance(self.cfg.loss) {
            self.stats.dropped += 1;
            return;
        }
        if self.rng.chance(self.cfg.duplicate) {
            self.stats.duplicated += 1;
            let copy = frame.clone();
            self.one_copy(now, frame, deliver);
            self.one_copy(now, copy, deliver);
        } else {
            self.one_copy(now, frame, deliver);
        }
    }

    fn one_copy(
        &mut self,
        now: Instant,
        mut frame: Vec<u8>,
        deliver: &mut dyn FnMut(Instant, Vec<u8>),
    ) {
        if !frame.is_empty() && self.rng.chance(self.cfg.corrupt) {
            self.stats.corrupted += 1;
            let byte = self.rng.below(frame.len() as u64) as usize;
            let bit = self.rng.below(8) as u32;
            frame[byte] ^= 1u8 << bit;
        }
        if frame.len() >= UNDETECTABLE_FROM + 4
            && self.rng.chance(self.cfg.undetectable_corrupt)
            && self.swap_bit(&mut frame)
        {
            self.stats.corrupted_undetectable += 1;
        }
        let Some(departs) = self.serialise(now, frame.len()) else {
            self.stats.queue_drops += 1;
            return;
        };
        let mut arrives = departs + self.cfg.delay;
        if !self.cfg.jitter.is_zero() {
            arrives += Duration::from_nanos(self.rng.range_inclusive(0, nanos(self.cfg.jitter)));
        }
        if self.rng.chance(self.cfg.reorder) {
            self.stats.reordered += 1;
            arrives += Duration::from_nanos(
                self.rng
                    .range_inclusive(1, nanos(self.cfg.reorder_delay).max(1)),
            );
        }
        self.stats.frames_delivered += 1;
        deliver(arrives, frame);
    }

    /// Sets bit `b` of one 16-bit word and clears it in another (both at even
    /// frame offsets, so both are words of the IPv4 checksum's sum): the
    /// ones'-complement sum stays the same. False when the two words picked
    /// have no bit set in one and clear in the other.
    fn swap_bit(&mut self, frame: &mut [u8]) -> bool {
        let words = (frame.len() - UNDETECTABLE_FROM) / 2;
        let i = UNDETECTABLE_FROM + 2 * self.rng.below(words as u64) as usize;
        let j = UNDETECTABLE_FROM + 2 * self.rng.below(words as u64) as usize;
        let wi = u16::from_be_bytes([frame[i], frame[i + 1]]);
        let wj = u16::from_be_bytes([frame[j], frame[j + 1]]);
        let candidates = !wi & wj;
        if i == j || candidates == 0 {
            return false;
        }
        let bit = 1u16 << candidates.trailing_zeros();
        frame[i..i + 2].copy_from_slice(&(wi | bit).to_be_bytes());
        frame[j..j + 2].copy_from_slice(&(wj & !bit).to_be_bytes());
        true
    }

    /// Puts `len` bytes through the bandwidth queue: the time the last bit
    /// leaves, or None when the queue is full (tail drop).
    fn serialise(&mut self, now: Instant, len: usize) -> Option<Instant> {
        if self.cfg.bandwidth_bps == 0 {
            return Some(now);
        }
        while let Some(&(finish, bytes)) = self.queued.front() {
            if finish > now {
                break;
            }
            self.queued.pop_front();
            self.queued_bytes -= bytes;
        }
        if self.queued_bytes + len > self.cfg.queue_bytes {
            return None;
        }
        let wire_bits = (len + self.cfg.wire_overhead) as u128 * 8;
        let ns = wire_bits * 1_000_000_000 / self.cfg.bandwidth_bps as u128;
        let start = self.busy_until.max(now);
        let finish = start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX));
        self.busy_until = finish;
        self.queued.push_back((finish, len));
        self.queued_bytes += len;
        Some(finish)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
