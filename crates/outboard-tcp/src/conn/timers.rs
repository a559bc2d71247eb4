//! The connection's timers: one small table indexed by an enum (quinn's
//! `connection/timer.rs` pattern), so `poll_timeout` is a minimum over seven slots.

use super::{Connection, Error, State};
use outboard_time::Instant;

/// Every timer a connection can arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) enum Timer {
    /// RFC 6298 retransmission timer (also retransmits SYN and SYN-ACK).
    Retransmit = 0,
    /// RFC 9293 §3.8.6.3 delayed ACK.
    DelayedAck = 1,
    /// RFC 9293 §3.8.6.1 zero-window probes, and the sender SWS override timeout.
    Persist = 2,
    /// RFC 1122 §4.2.3.6 keepalive.
    Keepalive = 3,
    /// RFC 9293 §3.10.8: 2·MSL in TIME-WAIT.
    TimeWait = 4,
    /// RFC 8985 §6.3 RACK reorder timer.
    RackReorder = 5,
    /// RFC 8985 §7.2 tail loss probe timeout (PTO).
    LossProbe = 6,
}

impl Timer {
    pub(crate) const ALL: [Timer; 7] = [
        Timer::Retransmit,
        Timer::DelayedAck,
        Timer::Persist,
        Timer::Keepalive,
        Timer::TimeWait,
        Timer::RackReorder,
        Timer::LossProbe,
    ];
}

/// Deadlines, one slot per `Timer`, and the earliest of them.
///
/// The earliest is kept as the slots change (`poll_timeout` asks for it
/// after every segment; a minimum over seven optional slots was 50
/// instructions there): arming can only lower it, and only stopping the
/// timer that holds it makes a new minimum to find. It is not part of the
/// record: a table restored from an older engine's record recomputes it.
#[derive(Debug, Clone, Copy, Default)]
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(from = "TimerSlots", into = "TimerSlots")]
pub(crate) struct TimerTable {
    slots: [Option<Instant>; 7],
    /// The earliest armed deadline, or None.
    earliest: Option<Instant>,
}

/// What a [`TimerTable`] is in a connection's record: its slots.
#[derive(serde::Serialize, serde::Deserialize)]
struct TimerSlots {
    slots: [Option<Instant>; 7],
}

impl From<TimerSlots> for TimerTable {
    fn from(t: TimerSlots) -> TimerTable {
        let mut table = TimerTable { slots: t.slots, earliest: None };
        table.recompute();
        table
    }
}

impl From<TimerTable> for TimerSlots {
    fn from(t: TimerTable) -> TimerSlots {
        TimerSlots { slots: t.slots }
    }
}

impl TimerTable {
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        let old = self.slots[timer as usize].replace(at);
        if old.is_some() && old == self.earliest && old < Some(at) {
            // The earliest moved later: another slot may be earlier now.
            self.recompute();
        } else if self.earliest.is_none_or(|e| at < e) {
            self.earliest = Some(at);
        }
    }
    /// Arms the timer only if it is not running already; `at` is computed
    /// only then (an RTO, on every segment sent, is worth not recomputing).
    pub(crate) fn set_if_idle(&mut self, timer: Timer, at: impl FnOnce() -> Instant) {
        if self.slots[timer as usize].is_none() {
            self.set(timer, at());
        }
    }
    pub(crate) fn stop(&mut self, timer: Timer) {
        let old = self.slots[timer as usize].take();
        if old.is_some() && old == self.earliest {
            self.recompute();
        }
    }
    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.slots[timer as usize]
    }
    pub(crate) fn stop_all(&mut self) {
        self.slots = [None; 7];
        self.earliest = None;
    }
    /// The earliest deadline of all armed timers.
    pub(crate) fn next(&self) -> Option<Instant> {
        debug_assert_eq!(self.earliest, self.slots.iter().flatten().copied().min());
        self.earliest
    }
    fn recompute(&mut self) {
        self.earliest = self.slots.iter().flatten().copied().min();
    }
    /// The timer is armed with a deadline at or before `now`.
    pub(crate) fn is_due(&self, timer: Timer, now: Instant) -> bool {
        self.get(timer).is_some_and(|at| at <= now)
    }
}

impl Connection {
    pub(super) fn on_timeout(&mut self, now: Instant) {
        for t in Timer::ALL {
            if !self.timers.is_due(t, now) {
                continue;
            }
            self.timers.stop(t);
            match t {
                Timer::Retransmit => self.on_rto(now),
                Timer::DelayedAck => self.delack_timed_out(),
                Timer::Persist => self.on_persist(now),
                Timer::Keepalive => self.on_keepalive(now),
                Timer::RackReorder => self.on_rack_timer(now),
                Timer::LossProbe => self.on_loss_probe(now),
                Timer::TimeWait => {
                    if matches!(self.state, State::TimeWait | State::FinWait2) {
                        self.enter_closed();
                    }
                }
            }
            if self.state == State::Closed {
                break;
            }
        }
    }

    /// RFC 9293 §3.8.6.1: probe a zero window with backoff; with an open window
    /// this is the SWS override timeout (§3.8.6.2.1).
    fn on_persist(&mut self, now: Instant) {
        if self.snd_wnd == 0 {
            self.probe_pending = true;
            self.persist_backoff = self.persist_backoff.saturating_add(1);
            self.timers.set(Timer::Persist, now + self.persist_interval());
        } else {
            self.persist_override = true;
        }
    }

    /// (Re)arms the keepalive timer from the last segment received.
    pub(super) fn arm_keepalive(&mut self, _now: Instant) {
        let Some((idle, interval, _)) = self.cfg.keepalive else { return };
        if !matches!(self.state, State::Established | State::CloseWait | State::FinWait1 | State::FinWait2) {
            return;
        }
        let at = self.last_rx + idle + interval.saturating_mul(self.keepalive_sent);
        self.timers.set(Timer::Keepalive, at);
    }

    /// RFC 1122 §4.2.3.6: after `idle` without a segment, probe every `interval`;
    /// `probes` unanswered probes time the connection out.
    fn on_keepalive(&mut self, now: Instant) {
        let Some((_, interval, probes)) = self.cfg.keepalive else { return };
        if self.snd_max != self.snd_una {
            // With data outstanding the retransmission timer watches the peer.
            self.timers.set(Timer::Keepalive, now + interval);
            return;
        }
        if self.keepalive_sent >= probes {
            // Linux's `tcp_keepalive_timer` tells the peer too, should it
            // still be there: `tcp_send_active_reset` (RST+ACK, TS option).
            self.pending_rst = Some(self.make_rst());
            self.fail(Error::TimedOut);
            return;
        }
        self.keepalive_pending = true;
        self.keepalive_sent += 1;
        self.arm_keepalive(now);
        if self.timers.get(Timer::Keepalive).is_some_and(|at| at <= now) {
            self.timers.set(Timer::Keepalive, now + interval);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_earliest_armed_deadline() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Keepalive, Instant::from_millis(50));
        t.set(Timer::DelayedAck, Instant::from_millis(10));
        assert_eq!(t.next(), Some(Instant::from_millis(10)));
        t.stop(Timer::DelayedAck);
        assert_eq!(t.next(), Some(Instant::from_millis(50)));
        t.set_if_idle(Timer::Keepalive, || Instant::from_millis(5));
        assert_eq!(t.get(Timer::Keepalive), Some(Instant::from_millis(50)));
        assert!(t.is_due(Timer::Keepalive, Instant::from_millis(50)));
        assert!(!t.is_due(Timer::Keepalive, Instant::from_millis(49)));
        assert!(!t.is_due(Timer::DelayedAck, Instant::from_millis(50)));
    }

    /// One step of a timer table's life: arm (always or if idle), stop, stop all.
    fn step() -> impl proptest::strategy::Strategy<Value = (u8, usize, u64)> {
        (0u8..4, 0usize..7, 0u64..20)
    }

    proptest::proptest! {
        /// The kept earliest deadline is the minimum over the slots after
        /// any sequence of changes, ties and re-arms later or earlier included.
        #[test]
        fn the_earliest_deadline_follows_every_change(steps in proptest::collection::vec(step(), 0..60)) {
            let mut t = TimerTable::default();
            for (op, slot, ms) in steps {
                let timer = Timer::ALL[slot];
                let at = Instant::from_millis(ms);
                match op {
                    0 => t.set(timer, at),
                    1 => t.set_if_idle(timer, || at),
                    2 => t.stop(timer),
                    _ if ms == 0 => t.stop_all(),
                    _ => t.set(timer, at),
                }
                let min = Timer::ALL.iter().filter_map(|&k| t.get(k)).min();
                proptest::prop_assert_eq!(t.next(), min);
            }
        }
    }

    /// A connection's record holds the slots only (as before the earliest
    /// was kept); a table read back finds its earliest deadline again.
    #[test]
    fn a_restored_table_knows_its_earliest_deadline() {
        let mut t = TimerTable::default();
        t.set(Timer::Retransmit, Instant::from_millis(300));
        t.set(Timer::DelayedAck, Instant::from_millis(40));
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.starts_with("{\"slots\":[") && !json.contains("earliest"), "{json}");
        let back: TimerTable = serde_json::from_str(&json).unwrap();
        assert_eq!(back.next(), Some(Instant::from_millis(40)));
        assert_eq!(back.get(Timer::Retransmit), Some(Instant::from_millis(300)));
    }
}
