//! How long an ACK may be delayed, as Linux computes it (RFC 9293 §3.8.6.3
//! and RFC 1122 §4.2.3.2 set only the ceiling: under 0.5 s; ours is
//! `Config::delayed_ack`, 200 ms, Linux's `TCP_DELACK_MAX`).
//!
//! Linux does not wait the ceiling. It keeps an estimate of the gap between
//! in-order data segments, `ato` (`tcp_event_data_recv`):
//! - it starts at `ATO_MIN` (40 ms, `TCP_ATO_MIN`) with the first data;
//! - data within 20 ms of the last pulls it toward 40 ms (`ato/2 + 20 ms`);
//! - data after a gap shorter than `ato` moves it to `ato/2 + gap`, at most
//!   the RTO;
//! - data after a gap longer than the RTO puts the connection back in
//!   quick-ACK mode: the sender is restarting from an idle (or collapsed)
//!   window, and delayed ACKs would slow its new slow start.
//!
//! The timer (`tcp_send_delayed_ack`) is `ato`, and an `ato` above 40 ms is
//! further held to the smoothed RTT (but not under 40 ms) and the ceiling.
//! On a LAN a lone segment is so acknowledged after 40 ms, not 200: the
//! difference matters wherever the peer waits for that ACK (a lone
//! retransmission, the last segment of a write under Nagle's rule).
//!
//! A delayed ACK that times out doubles `ato` (at most the RTO): the data
//! comes further apart than the estimate said.
//!
//! Interactive ("pingpong") mode, as Linux keeps it (`icsk_ack.pingpong`):
//! - a data segment sent within `ato` of the last data received is a
//!   reply (`tcp_event_data_sent`); one reply (`tcp_pingpong_thresh`, 1)
//!   makes the connection interactive;
//! - an interactive connection takes no quick-ACKs: the ACK of a request
//!   waits for the response to carry it, so a request/response exchange
//!   costs two segments a round trip, not three, from its second round trip
//!   on (and after an idle longer than the RTO, which restores quick-ACKs);
//! - the peer's FIN in ESTABLISHED makes it interactive too (`tcp_fin`):
//!   its ACK waits for our own FIN, which an application closing at once
//!   sends with it, so the close takes three segments, not four;
//! - a delayed ACK that times out while interactive (the reply did not
//!   come within `ato`) leaves the mode and puts `ato` back to its minimum;
//! - so does what puts Linux back in quick-ACK mode
//!   (`tcp_enter_quickack_mode`): data that was old or outside the window,
//!   and a CE mark.
//!
//! A read that empties the receive buffer sends a pending delayed ACK of
//! a short segment (Linux's `ICSK_ACK_PUSHED`, from `tcp_measure_rcv_mss`,
//! acted on in `tcp_cleanup_rbuf`): outside interactive mode after one
//! segment shorter than the receiver's MSS estimate, in it after two with no
//! ACK between (`ICSK_ACK_PUSHED2`). A sender under Nagle's rule that waits
//! for that ACK before its next small segment (a request written in two
//! pieces) so waits one read, not the 40 ms timer.
//!
//! `TCP_QUICKACK` (`set_quickack`) is Linux's `__tcp_sock_set_quickack`:
//! 0 makes the connection interactive; any other value leaves the mode,
//! and sends a delayed ACK that is pending if nothing is left unread (or
//! more than a segment's worth waits for it); an even non-zero value then
//! makes it interactive again if an ACK was pending. The option is not
//! sticky, as on Linux: the next reply within `ato` makes the connection
//! interactive again. Reading it (`quickack`) tells whether the connection
//! is not interactive. Set before the connection is established it lasts
//! only until then (Linux leaves the mode at the handshake; accepted
//! connections do not inherit it), so a connection starts out of the mode.

use super::recovery::seq_sub;
use super::{Connection, State, Timer, QUICKACK_SEGMENTS};
use outboard_time::{Duration, Instant};

/// Linux's `TCP_ATO_MIN` and `TCP_DELACK_MIN` (HZ/25).
pub(super) const ATO_MIN: Duration = Duration::from_millis(40);

/// Replies that make a connection interactive (Linux's
/// `tcp_pingpong_thresh`, whose default is 1).
const PINGPONG_THRESH: u8 = 1;

/// The receiver's estimate of the gap between data segments.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct DelAck {
    /// Linux's `icsk_ack.ato`, in nanoseconds (plain integer arithmetic, on
    /// every segment); zero before the first data segment.
    ato_ns: u64,
    /// When in-order data last arrived (Linux's `icsk_ack.lrcvtime`).
    last_data: Instant,
    /// Replies sent within `ato` of the data they answer (Linux's
    /// `icsk_ack.pingpong`, saturating); interactive from `PINGPONG_THRESH`.
    #[serde(default)]
    pingpong: u8,
    /// Segments shorter than the MSS estimate since the last ACK went
    /// (Linux's `ICSK_ACK_PUSHED`, `_PUSHED2`), at most 2.
    #[serde(default)]
    pushed: u8,
}

impl Connection {
    /// In-order data of `len` bytes arrived (Linux's `tcp_event_data_recv`),
    /// after the MSS estimate took it in.
    pub(super) fn delack_on_data(&mut self, now: Instant, len: usize) {
        let min = ATO_MIN.as_nanos() as u64;
        let d = &mut self.delack;
        if len < self.rcv_mss {
            d.pushed = (d.pushed + 1).min(2);
        }
        if d.ato_ns == 0 {
            d.ato_ns = min;
        } else {
            let gap = now.saturating_duration_since(d.last_data).as_nanos() as u64;
            if gap <= min / 2 {
                // The common case, and the cheap one: no RTO to compute.
                d.ato_ns = d.ato_ns / 2 + min / 2;
            } else {
                let rto = self.rtt.rto().as_nanos() as u64;
                if gap < d.ato_ns {
                    d.ato_ns = (d.ato_ns / 2 + gap).min(rto);
                } else if gap > rto {
                    self.quickacks = self.quickacks.max(QUICKACK_SEGMENTS);
                }
            }
        }
        d.last_data = now;
    }

    /// In-order data that filled no gap was placed: ACK at once (while
    /// quick-ACKs last and the connection is not interactive, or with two
    /// full segments unacknowledged), else arm the delayed ACK if it is not
    /// armed already.
    #[inline]
    pub(super) fn ack_or_delay(&mut self, now: Instant) {
        if self.quickacks > 0 && !self.in_pingpong() {
            self.quickacks -= 1;
            self.ack_now = true;
        } else if self.unacked_rx_bytes >= 2 * self.rcv_mss {
            // RFC 9293 §3.8.6.3: at least every second full-sized segment.
            self.ack_now = true;
        } else if self.timers.get(Timer::DelayedAck).is_none() {
            // Armed once; later data waits for the same ACK.
            let wait = self.delack_timeout();
            self.timers.set(Timer::DelayedAck, now + wait);
        }
    }

    /// Interactive: replies follow requests within `ato`.
    #[inline]
    pub(super) fn in_pingpong(&self) -> bool {
        self.delack.pingpong >= PINGPONG_THRESH
    }

    /// A segment with data goes out (Linux's `tcp_event_data_sent`): within
    /// `ato` of the last data received, it is a reply.
    #[inline]
    pub(super) fn delack_on_data_sent(&mut self, now: Instant) {
        let d = &mut self.delack;
        if d.ato_ns > 0 && (now.saturating_duration_since(d.last_data).as_nanos() as u64) < d.ato_ns {
            d.pingpong = d.pingpong.saturating_add(1);
        }
    }

    /// The delayed ACK timed out (Linux's `tcp_delack_timer_handler`): the
    /// ACK goes now; `ato` doubles, or, if the reply it waited for did not
    /// come, the connection is interactive no longer.
    pub(super) fn delack_timed_out(&mut self) {
        if self.in_pingpong() {
            self.delack_leave_pingpong();
        } else {
            let rto = self.rtt.rto().as_nanos() as u64;
            self.delack.ato_ns = (self.delack.ato_ns << 1).min(rto);
        }
        self.ack_now = true;
    }

    /// What Linux's `tcp_enter_quickack_mode` does to interactive mode:
    /// leaves it, `ato` back at its minimum.
    pub(super) fn delack_leave_pingpong(&mut self) {
        if self.delack.pingpong > 0 {
            self.delack.pingpong = 0;
            self.delack.ato_ns = ATO_MIN.as_nanos() as u64;
        }
    }

    /// The peer's FIN came in ESTABLISHED (Linux's `tcp_fin`): interactive
    /// from now on, and its ACK is delayed (our own FIN, if the application
    /// closes within `ato`, carries it) unless one is due at once anyway.
    pub(super) fn delack_on_fin(&mut self, now: Instant) {
        self.delack.pingpong = self.delack.pingpong.max(PINGPONG_THRESH);
        if !self.ack_now && self.timers.get(Timer::DelayedAck).is_none() {
            let wait = self.delack_timeout();
            self.timers.set(Timer::DelayedAck, now + wait);
        }
    }

    /// An ACK went: no short segment waits for one.
    #[inline]
    pub(super) fn delack_on_ack_sent(&mut self) {
        self.delack.pushed = 0;
    }

    /// After a read (Linux's `tcp_cleanup_rbuf`): whether the pending
    /// delayed ACK goes now. It does if it waits for more than a segment's
    /// worth (the FIN counts one), or if the read emptied the buffer and
    /// short segments wait for it (`ICSK_ACK_PUSHED` outside interactive
    /// mode, `ICSK_ACK_PUSHED2` in it).
    #[inline]
    pub(super) fn delack_due_at_read(&self) -> bool {
        let pushed_due = match self.delack.pushed {
            0 => false,
            1 => !self.in_pingpong(),
            _ => true,
        };
        self.timers.get(Timer::DelayedAck).is_some()
            && (seq_sub(self.rcv_nxt, self.last_ack_sent) > self.rcv_mss || (self.recv_buf.is_empty() && pushed_due))
    }

    /// TCP_QUICKACK set to `val` (Linux's `__tcp_sock_set_quickack`).
    pub fn set_quickack(&mut self, val: u32) {
        if val == 0 {
            self.delack.pingpong = self.delack.pingpong.max(PINGPONG_THRESH);
            return;
        }
        // Leaving the mode keeps `ato` (Linux's `inet_csk_exit_pingpong_mode`).
        self.delack.pingpong = 0;
        if matches!(self.state, State::Established | State::CloseWait) && self.timers.get(Timer::DelayedAck).is_some() {
            // `tcp_cleanup_rbuf` with ICSK_ACK_PUSHED outside the mode.
            self.delack.pushed = self.delack.pushed.max(1);
            if self.delack_due_at_read() {
                self.ack_now = true;
            }
            if val & 1 == 0 {
                self.delack.pingpong = PINGPONG_THRESH;
            }
        }
    }

    /// TCP_QUICKACK as Linux reads it back: not interactive.
    pub fn quickack(&self) -> bool {
        !self.in_pingpong()
    }

    /// How long the ACK for data that just arrived may wait
    /// (Linux's `tcp_send_delayed_ack`).
    pub(super) fn delack_timeout(&self) -> Duration {
        let mut ato = match self.delack.ato_ns {
            0 => ATO_MIN,
            ns => Duration::from_nanos(ns),
        };
        if ato > ATO_MIN {
            if let Some(srtt) = self.rtt.srtt() {
                ato = ato.min(srtt.max(ATO_MIN));
            }
        }
        ato.min(self.cfg.delayed_ack)
    }
}
