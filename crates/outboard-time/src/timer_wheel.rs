//! A hierarchical timing wheel (Varghese & Lauck) keyed by caller tokens.
//!
//! Time is cut into ticks (1 ms by default). Level `L` has 64 slots of
//! `64^L` ticks each, so four levels cover `64^4` ticks (about 4.6 hours at
//! 1 ms); later deadlines wait in an overflow list and move into the wheel
//! when the wheel's current tick reaches their 64^4-tick block. A timer sits
//! at the level of the highest 6-bit group in which its tick differs from
//! the current tick; as time reaches its slot it cascades to a finer level,
//! until level 0, where a slot is one exact tick.
//!
//! Guarantees: insert, re-arm and cancel are O(1) (a hash lookup and a
//! swap-remove; cancelling the earliest overflow timer rescans the overflow
//! list). `advance(now, fire)` fires every pending timer whose deadline is
//! `<= now` exactly once and never one whose deadline is later, to the
//! nanosecond: within the current tick it compares deadlines. Order: timers
//! fire in tick order, but within one tick in no particular order.
//!
//! The wheel reads no clock: `now` comes from the caller and must not go
//! backwards (an earlier `now` fires nothing).

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::{Duration, Instant};

/// Slots per level (a power of two: slot indices are 6-bit groups of ticks).
pub const SLOTS: usize = 64;
const SLOT_BITS: u32 = 6;
/// Levels in the wheel.
pub const LEVELS: usize = 4;
/// Ticks the wheel covers before a deadline goes to the overflow list.
pub const RANGE_TICKS: u64 = 1 << (SLOT_BITS as usize * LEVELS);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Index into `slots` (`level * SLOTS + slot`).
    Slot(usize),
    Overflow,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    deadline: Instant,
    place: Place,
    /// Position inside the slot's (or overflow's) token list.
    pos: usize,
}

/// Deterministic hasher for `u64` tokens: no random seed, so runs replay.
#[derive(Default)]
struct TokenHasher(u64);

impl Hasher for TokenHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing mixes low-entropy tokens (counters) into the
        // high bits hashbrown uses for its control bytes.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type TokenMap = HashMap<u64, Entry, BuildHasherDefault<TokenHasher>>;

/// A hierarchical timer wheel; see the module docs for the guarantees.
pub struct TimerWheel {
    tick_ns: u64,
    /// The wheel's current tick: every pending timer's tick is `>= cur`.
    cur: u64,
    /// The latest `now` passed to `advance`.
    last_now: Instant,
    slots: Vec<Vec<u64>>,
    /// Bit `i` of `occupied[L]` is set when slot `i` of level `L` is non-empty.
    occupied: [u64; LEVELS],
    overflow: Vec<u64>,
    /// Earliest deadline in `overflow`, kept exact.
    overflow_min: Option<Instant>,
    entries: TokenMap,
    /// A spare list swapped with a slot while it is drained, to keep both
    /// allocations alive.
    spare: Vec<u64>,
    /// `next_deadline`'s answer since the last change (`insert`, `cancel`,
    /// `advance`): a shard asks every turn, and mostly nothing changed.
    next: Cell<Option<Option<Instant>>>,
}

impl Default for TimerWheel {
    fn default() -> Self {
        TimerWheel::new(Duration::from_millis(1))
    }
}

impl std::fmt::Debug for TimerWheel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerWheel")
            .field("tick_ns", &self.tick_ns)
            .field("timers", &self.entries.len())
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

impl TimerWheel {
    /// A wheel with the given tick (rounded to at least 1 ns), starting at
    /// time zero.
    pub fn new(tick: Duration) -> TimerWheel {
        let tick_ns = u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX).max(1);
        TimerWheel {
            tick_ns,
            cur: 0,
            last_now: Instant::ZERO,
            slots: vec![Vec::new(); LEVELS * SLOTS],
            occupied: [0; LEVELS],
            overflow: Vec::new(),
            overflow_min: None,
            entries: TokenMap::default(),
            spare: Vec::new(),
            next: Cell::new(None),
        }
    }

    /// A wheel whose clock starts at `now` rather than zero.
    pub fn starting_at(tick: Duration, now: Instant) -> TimerWheel {
        let mut w = TimerWheel::new(tick);
        w.cur = now.as_nanos() / w.tick_ns;
        w.last_now = now;
        w
    }

    pub fn tick(&self) -> Duration {
        Duration::from_nanos(self.tick_ns)
    }

    /// Pending timers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The deadline of `token`, if armed.
    pub fn deadline(&self, token: u64) -> Option<Instant> {
        self.entries.get(&token).map(|e| e.deadline)
    }

    /// Arms `token` to fire at `deadline`, replacing (and returning) its
    /// previous deadline if it was armed. A deadline at or before the last
    /// `now` fires on the next `advance`.
    pub fn insert(&mut self, token: u64, deadline: Instant) -> Option<Instant> {
        self.next.set(None);
        let previous = self.cancel(token);
        self.place(token, deadline);
        previous
    }

    /// Disarms `token`, returning its deadline if it was armed.
    pub fn cancel(&mut self, token: u64) -> Option<Instant> {
        let entry = self.entries.remove(&token)?;
        self.next.set(None);
        let list = match entry.place {
            Place::Slot(i) => &mut self.slots[i],
            Place::Overflow => &mut self.overflow,
        };
        list.swap_remove(entry.pos);
        if let Some(&moved) = list.get(entry.pos) {
            if let Some(e) = self.entries.get_mut(&moved) {
                e.pos = entry.pos;
            }
        }
        match entry.place {
            Place::Slot(i) => {
                if self.slots[i].is_empty() {
                    self.occupied[i / SLOTS] &= !(1u64 << (i % SLOTS));
                }
            }
            Place::Overflow => {
                if self.overflow_min == Some(entry.deadline) {
                    self.overflow_min = self
                        .overflow
                        .iter()
                        .filter_map(|t| self.entries.get(t))
                        .map(|e| e.deadline)
                        .min();
                }
            }
        }
        Some(entry.deadline)
    }

    /// A time no later than the earliest pending deadline (`None` when
    /// empty). It is exact when the earliest timer is in the current
    /// 64-tick block (level 0) or in the overflow list; otherwise it
    /// is the start of the coarse slot holding that timer, and advancing to
    /// it cascades the slot so the next answer is finer. After
    /// `advance(now)` the answer is always later than `now`, unless a timer
    /// was since armed in the past: a shard can sleep until it.
    pub fn next_deadline(&self) -> Option<Instant> {
        if let Some(known) = self.next.get() {
            return known;
        }
        let best = self.find_next_deadline();
        self.next.set(Some(best));
        best
    }

    fn find_next_deadline(&self) -> Option<Instant> {
        let mut best: Option<Instant> = self.overflow_min;
        let mut consider = |t: Instant| best = Some(best.map_or(t, |b| b.min(t)));
        for level in 0..LEVELS {
            let Some((slot, start)) = self.first_slot(level) else {
                continue;
            };
            if level == 0 {
                let min = self.slots[slot]
                    .iter()
                    .filter_map(|t| self.entries.get(t))
                    .map(|e| e.deadline)
                    .min();
                if let Some(m) = min {
                    consider(m);
                }
            } else {
                consider(Instant::from_nanos(start.saturating_mul(self.tick_ns)));
            }
        }
        best
    }

    /// Fires (calls `fire(token)` and disarms) every timer with deadline
    /// `<= now`; returns how many fired. `fire` cannot touch the wheel:
    /// collect tokens to re-arm and insert them afterwards.
    pub fn advance(&mut self, now: Instant, fire: &mut impl FnMut(u64)) -> usize {
        if now < self.last_now {
            return 0;
        }
        self.last_now = now;
        self.next.set(None);
        let target = now.as_nanos() / self.tick_ns;
        let mut fired = 0;
        while let Some((step, start)) = self.earliest_step() {
            if start > target {
                break;
            }
            self.cur = start;
            match step {
                Step::Overflow => self.pull_overflow(),
                Step::Slot(level, slot) if level > 0 => self.cascade(slot),
                Step::Slot(_, slot) => {
                    fired += self.fire_slot(slot, now, fire);
                    if start == target {
                        // What remains in this tick has deadline > now.
                        break;
                    }
                }
            }
        }
        self.cur = target.max(self.cur);
        fired
    }

    /// The first non-empty slot of `level` at or after the current tick, as
    /// (index into `slots`, first tick it covers, clamped to `cur`).
    fn first_slot(&self, level: usize) -> Option<(usize, u64)> {
        let shift = SLOT_BITS * level as u32;
        let cur_idx = ((self.cur >> shift) as usize) % SLOTS;
        let bits = self.occupied[level] & (!0u64 << cur_idx);
        if bits == 0 {
            return None;
        }
        let idx = bits.trailing_zeros() as usize;
        let block = shift + SLOT_BITS;
        let base = if block >= 64 {
            0
        } else {
            self.cur >> block << block
        };
        let start = (base + ((idx as u64) << shift)).max(self.cur);
        Some((level * SLOTS + idx, start))
    }

    /// The next thing to process: the slot (or overflow block) with the
    /// earliest start; on ties the coarser one, so cascading comes before
    /// firing.
    fn earliest_step(&self) -> Option<(Step, u64)> {
        let mut best = self.overflow_min.map(|d| {
            let block = d.as_nanos() / self.tick_ns / RANGE_TICKS * RANGE_TICKS;
            (Step::Overflow, block.max(self.cur))
        });
        for level in (0..LEVELS).rev() {
            if let Some((slot, start)) = self.first_slot(level) {
                let earlier = match best {
                    Some((_, b)) => start < b,
                    None => true,
                };
                if earlier {
                    best = Some((Step::Slot(level, slot), start));
                }
            }
        }
        best
    }

    fn tick_of(&self, deadline: Instant) -> u64 {
        (deadline.as_nanos() / self.tick_ns).max(self.cur)
    }

    /// Puts a (not present) token into the wheel relative to `cur`.
    fn place(&mut self, token: u64, deadline: Instant) {
        let tick = self.tick_of(deadline);
        // The highest 6-bit group where tick and cur differ picks the level.
        let masked = (tick ^ self.cur) | (SLOTS as u64 - 1);
        let level = ((63 - masked.leading_zeros()) / SLOT_BITS) as usize;
        let (place, list) = if level < LEVELS {
            let slot = level * SLOTS + ((tick >> (SLOT_BITS * level as u32)) as usize % SLOTS);
            self.occupied[level] |= 1u64 << (slot % SLOTS);
            (Place::Slot(slot), &mut self.slots[slot])
        } else {
            self.overflow_min = Some(self.overflow_min.map_or(deadline, |m| m.min(deadline)));
            (Place::Overflow, &mut self.overflow)
        };
        list.push(token);
        let pos = list.len() - 1;
        self.entries.insert(
            token,
            Entry {
                deadline,
                place,
                pos,
            },
        );
    }

    /// Takes a slot's tokens out, leaving it empty, and removes their entries.
    fn take_slot(&mut self, slot: usize) -> Vec<u64> {
        let mut batch = std::mem::take(&mut self.spare);
        std::mem::swap(&mut batch, &mut self.slots[slot]);
        self.occupied[slot / SLOTS] &= !(1u64 << (slot % SLOTS));
        batch
    }

    fn give_back(&mut self, mut batch: Vec<u64>) {
        batch.clear();
        self.spare = batch;
    }

    /// Moves a coarse slot's timers to finer levels now that `cur` has
    /// reached the slot.
    fn cascade(&mut self, slot: usize) {
        let batch = self.take_slot(slot);
        for &token in &batch {
            if let Some(e) = self.entries.remove(&token) {
                self.place(token, e.deadline);
            }
        }
        self.give_back(batch);
    }

    fn fire_slot(&mut self, slot: usize, now: Instant, fire: &mut impl FnMut(u64)) -> usize {
        let batch = self.take_slot(slot);
        let mut fired = 0;
        for &token in &batch {
            let Some(e) = self.entries.remove(&token) else {
                continue;
            };
            if e.deadline <= now {
                fire(token);
                fired += 1;
            } else {
                self.place(token, e.deadline);
            }
        }
        self.give_back(batch);
        fired
    }

    /// `cur` reached the overflow's earliest block: move every overflow
    /// timer that now fits into the wheel.
    fn pull_overflow(&mut self) {
        let list = std::mem::take(&mut self.overflow);
        self.overflow_min = None;
        for token in list {
            if let Some(e) = self.entries.remove(&token) {
                self.place(token, e.deadline);
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Overflow,
    Slot(usize, usize),
}

#[cfg(test)]
mod tests;
