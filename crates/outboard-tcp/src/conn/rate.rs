//! Delivery-rate estimation (draft-cheng-iccrg-delivery-rate-estimation, in
//! the form of Linux's `tcp_rate.c`) and the other TCP_INFO counters Linux
//! keeps for loss recovery: delivered and delivered-CE segments, D-SACKed
//! duplicates, reordering events, out-of-order segments received, and
//! retransmission-timeout episodes.
//!
//! Rate: each transmission records the connection's delivered count and
//! times then (`Sent` in `rack`); when an ACK delivers a segment, the newest
//! such segment gives the sample: delivered since its send over the longer
//! of its send interval and its ACK interval (§3.3 of the draft). Samples
//! taken while the application left the path idle (app-limited) replace the
//! estimate only when they show a higher rate, as Linux's `tcp_rate_gen`.
//! The log is RACK's, which is kept for SACK connections: without SACK the
//! rate stays 0 (the counters are kept for every connection).

use super::recovery::seq_sub;
use super::Connection;
use crate::cc::CongestionControl;
use outboard_time::{Duration, Instant};

/// What a transmission remembers for the rate sample (Linux's `tcp_skb_cb.tx`).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(super) struct TxRate {
    /// `delivered` (bytes) when it was sent.
    pub delivered: u64,
    /// `delivered_at` when it was sent.
    pub delivered_at: Instant,
    /// `first_tx` when it was sent: the start of its send interval.
    pub first_tx: Instant,
    /// Sent while the connection was app-limited.
    pub app_limited: bool,
}

/// The connection's rate state and TCP_INFO counters.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Rate {
    /// Bytes delivered (cumulatively or by SACK), ever.
    pub delivered: u64,
    /// Segments delivered (Linux's `tp->delivered`), and those whose ACK carried ECE.
    pub delivered_segs: u64,
    pub delivered_ce: u64,
    /// When `delivered` last grew (Linux's `delivered_mstamp`).
    pub delivered_at: Option<Instant>,
    /// Send time of the newest segment delivered (Linux's `first_tx_mstamp`).
    pub first_tx: Option<Instant>,
    /// Non-zero: app-limited until `delivered` passes this (Linux's `tp->app_limited`).
    pub app_limited: u64,
    /// The sample being built for the current ACK.
    sample: Option<(TxRate, Instant)>,
    /// The latest estimate: bytes over an interval, and whether app-limited.
    pub rate_delivered: u64,
    pub rate_interval: Duration,
    pub rate_app_limited: bool,
    /// The lowest RTT of a segment delivered that was sent once, from the
    /// transmit log (microsecond precision, where timestamps give
    /// milliseconds): Linux's `tcp_min_rtt` for the sample filter and `tcpi_min_rtt`.
    pub min_rtt: Option<Duration>,
    /// D-SACKed segments (Linux's `tcpi_dsack_dups`).
    pub dsack_dups: u64,
    /// Reordering events seen (Linux's `tcpi_reord_seen`).
    pub reord_seen: u64,
    /// Segments received out of order (Linux's `tcpi_rcv_ooopack`).
    pub rcv_ooopack: u64,
    /// Retransmission-timeout episodes, and the time spent in finished ones
    /// (Linux's `tcpi_total_rto_recoveries`, `tcpi_total_rto_time`).
    pub rto_recoveries: u64,
    pub rto_time: Duration,
    pub rto_since: Option<Instant>,
}

impl Rate {
    /// Whether a rate sample waits for the next ACK.
    #[inline]
    pub(super) fn sample_pending(&self) -> bool {
        self.sample.is_some()
    }

    /// The estimate in bytes per second (Linux's `tcpi_delivery_rate`).
    pub(super) fn bytes_per_sec(&self) -> u64 {
        let us = self.rate_interval.as_micros() as u64;
        if us == 0 {
            return 0;
        }
        u64::try_from(u128::from(self.rate_delivered) * 1_000_000 / u128::from(us)).unwrap_or(u64::MAX)
    }
}

impl Connection {
    /// What a transmission at `now` records (Linux's `tcp_rate_skb_sent`):
    /// with nothing in flight, the intervals start now.
    pub(super) fn rate_on_send(&mut self, now: Instant, nothing_in_flight: bool) -> TxRate {
        let r = &mut self.rate;
        if nothing_in_flight || r.first_tx.is_none() {
            r.first_tx = Some(now);
            r.delivered_at = Some(now);
        }
        TxRate {
            delivered: r.delivered,
            delivered_at: r.delivered_at.unwrap_or(now),
            first_tx: r.first_tx.unwrap_or(now),
            app_limited: r.app_limited != 0,
        }
    }

    /// A logged transmission sent at `at`, ending at `end`, was delivered
    /// (Linux's `tcp_rate_skb_delivered`): the newest one sent gives the sample.
    pub(super) fn rate_on_delivered(&mut self, tx: TxRate, at: Instant) {
        let r = &mut self.rate;
        let newer = r.sample.is_none_or(|(_, s_at)| at >= s_at);
        if newer {
            r.sample = Some((tx, at));
            r.first_tx = Some(at);
        }
    }

    /// After an ACK: counts what it delivered and closes the rate sample
    /// (Linux's `tcp_rate_gen`). `bytes` were newly delivered, `ece` is the ACK's ECE.
    pub(super) fn rate_on_ack(&mut self, now: Instant, bytes: usize, ece: bool) {
        let mss = self.data_mss().max(1);
        let r = &mut self.rate;
        let min_rtt = r.min_rtt.unwrap_or(Duration::ZERO);
        if bytes > 0 {
            let segs = bytes.div_ceil(mss) as u64;
            r.delivered += bytes as u64;
            r.delivered_segs += segs;
            if ece {
                r.delivered_ce += segs;
            }
            r.delivered_at = Some(now);
        }
        if r.app_limited != 0 && r.delivered > r.app_limited {
            r.app_limited = 0;
        }
        let Some((tx, sent_at)) = r.sample.take() else { return };
        let delivered = r.delivered - tx.delivered;
        let snd = sent_at.saturating_duration_since(tx.first_tx);
        let ack = now.saturating_duration_since(tx.delivered_at);
        let interval = snd.max(ack);
        // An interval shorter than the minimum RTT is an artifact (ACK compression).
        if delivered == 0 || interval.is_zero() || interval < min_rtt {
            return;
        }
        let higher = u128::from(delivered) * r.rate_interval.as_nanos()
            >= u128::from(r.rate_delivered) * interval.as_nanos();
        if !tx.app_limited || higher {
            r.rate_delivered = delivered;
            r.rate_interval = interval;
            r.rate_app_limited = tx.app_limited;
        }
    }

    /// The application is about to queue data (Linux's
    /// `tcp_rate_check_app_limited`, from `tcp_sendmsg`): if less than a
    /// segment is waiting, the window has room and no loss is being repaired,
    /// the samples until what is in flight is delivered are app-limited.
    pub(super) fn rate_check_app_limited(&mut self) {
        let unsent = seq_sub(self.snd_buf_seq + self.send_buf.len(), self.snd_nxt);
        let in_flight = self.bytes_in_flight();
        if unsent < self.data_mss()
            && in_flight < self.cc.cwnd()
            && !self.rec.in_recovery
            && self.rec.rto_recover.is_none()
        {
            self.rate.app_limited = (self.rate.delivered + in_flight as u64).max(1);
        }
    }
}
