//! Virtual time and the event queue.
//!
//! The clock only moves forward, and only when the simulator says so. Events
//! are ordered by (time, sequence number): two events due at the same instant
//! come out in the order they were scheduled, so a run never depends on how a
//! heap breaks ties.

use outboard_time::{Duration, Instant};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A monotonic virtual clock.
#[derive(Debug, Clone, Default)]
pub struct VirtualClock {
    now: Instant,
}

impl VirtualClock {
    pub fn new(start: Instant) -> VirtualClock {
        VirtualClock { now: start }
    }
    pub fn now(&self) -> Instant {
        self.now
    }
    /// Moves to `t`; a `t` in the past leaves the clock where it is (time never runs backwards).
    pub fn advance_to(&mut self, t: Instant) {
        if t > self.now {
            self.now = t;
        }
    }
    pub fn advance_by(&mut self, d: Duration) {
        self.now += d;
    }
}

struct Entry<E> {
    at: Instant,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed, so the max-heap pops the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Min-queue of events keyed by (time, insertion order).
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<E> core::fmt::Debug for EventQueue<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EventQueue")
            .field("len", &self.heap.len())
            .field("next", &self.peek_time())
            .finish()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> EventQueue<E> {
        EventQueue::default()
    }
    pub fn push(&mut self, at: Instant, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { at, seq, event });
    }
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.at)
    }
    /// The earliest event if it is due at or before `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, E)> {
        if self.peek_time()? <= now {
            self.heap.pop().map(|e| (e.at, e.event))
        } else {
            None
        }
    }
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(Instant::from_millis(5), "late");
        q.push(Instant::from_millis(1), "first-at-1");
        q.push(Instant::from_millis(1), "second-at-1");
        q.push(Instant::from_millis(3), "mid");
        q.push(Instant::from_millis(1), "third-at-1");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(
            order,
            ["first-at-1", "second-at-1", "third-at-1", "mid", "late"]
        );
    }

    #[test]
    fn pop_due_leaves_future_events() {
        let mut q = EventQueue::new();
        q.push(Instant::from_millis(2), 2);
        q.push(Instant::from_millis(9), 9);
        assert_eq!(q.pop_due(Instant::from_millis(1)), None);
        assert_eq!(
            q.pop_due(Instant::from_millis(2)),
            Some((Instant::from_millis(2), 2))
        );
        assert_eq!(q.pop_due(Instant::from_millis(5)), None);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn clock_never_runs_backwards() {
        let mut c = VirtualClock::new(Instant::from_millis(10));
        c.advance_to(Instant::from_millis(4));
        assert_eq!(c.now(), Instant::from_millis(10));
        c.advance_to(Instant::from_millis(12));
        c.advance_by(Duration::from_millis(1));
        assert_eq!(c.now(), Instant::from_millis(13));
    }
}
