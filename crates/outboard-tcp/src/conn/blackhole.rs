//! RFC 4821 §7.x black-hole detection, as Linux's `tcp_mtu_probing = 1`: a
//! path that drops large segments and sends no ICMP (so path MTU discovery
//! never hears of it) still works, because repeated retransmission timeouts
//! make the connection fall back to a small segment size.
//!
//! Linux (`tcp_write_timeout` → `tcp_mtu_probing`): on a retransmission
//! timeout, once the retransmissions have lasted as long as `tcp_retries1`
//! (3) backed-off minimum RTOs would (`retransmits_timed_out`: (2⁴ − 1) ×
//! 200 ms = 3 s since the first retransmitted segment was sent), the first
//! such timeout enables MTU probing with `search_low` at `tcp_base_mss`
//! (1024 payload bytes), which caps the segment size; every later such
//! timeout halves it, `min(tcp_base_mss, low / 2)`, but not below
//! `tcp_mtu_probe_floor` (48). The payload size never grows past what the
//! peer's MSS and path MTU discovery allow.
//!
//! Then, as Linux's `tcp_mtu_probe`, the size is searched upward with
//! single probe segments: while the connection is in the open state with a
//! congestion window of at least 11 segments, one new-data segment of
//! (low + high) / 2 payload bytes goes out (never cut by TSO); its
//! acknowledgment raises the segment size to it (`low`), its loss (the
//! probe is the first segment to resend, by fast retransmit or timeout)
//! lowers `high` below it; the search stops when they are within 8 bytes
//! (`tcp_probe_threshold`). Not built: Linux's re-probing of a converged
//! search every `tcp_probe_interval` (600 s).
//!
//! One departure from Linux, so that random loss is not taken for a black
//! hole: once an acknowledgment has moved SND.UNA by a whole segment of the
//! lowered size, that size is known to cross the path (RFC 4821 §7.5: a
//! delivered packet proves its size), and later timeouts do not halve it
//! again. Linux halves on every such timeout, so at 25 % random loss its
//! segments (and ours, before) shrink toward 48 bytes and a 256 KiB
//! transfer takes minutes; a real black hole acknowledges nothing of the
//! size it swallows, so it is still found and halved past.

use super::Connection;
use crate::cc::CongestionControl;
use outboard_time::{Duration, Instant};
use outboard_wire::SeqNumber;

/// Who may lower the segment size on black-hole timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum MtuProbing {
    /// Never (Linux's `tcp_mtu_probing = 0`).
    Off,
    /// When repeated timeouts suggest a black hole (Linux's default, 1).
    #[default]
    BlackHole,
}

impl core::str::FromStr for MtuProbing {
    type Err = String;
    /// `off` or `on` (or Linux's `tcp_mtu_probing` numbers 0 and 1).
    fn from_str(s: &str) -> Result<MtuProbing, String> {
        match s {
            "off" | "0" => Ok(MtuProbing::Off),
            "on" | "1" => Ok(MtuProbing::BlackHole),
            "2" => Err("2 (always probe) is not supported: use off or on".into()),
            _ => Err(format!("{s:?}: use off or on")),
        }
    }
}

/// Linux's `tcp_retries1`: retransmissions "before black-hole detection and
/// route re-validation".
const RETRIES1: u32 = 3;
/// Linux's `TCP_RTO_MIN`, the base of `tcp_model_timeout`.
const RTO_BASE: Duration = Duration::from_millis(200);

/// A connection's black-hole state.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct BlackHole {
    /// When the head segment of the current timeout episode was sent (Linux's
    /// `retrans_stamp`); None while no retransmission timeout is in progress.
    pub episode_start: Option<Instant>,
    /// Linux's `icsk_mtup.search_low` as a payload size, once enabled.
    pub low_mss: Option<usize>,
    /// Times the segment size was lowered for a black hole.
    pub events: u64,
    /// Linux's `search_high` as a payload size: the size before the first lowering.
    pub high_mss: usize,
    /// The outstanding probe: its first sequence number and payload size.
    pub probe: Option<(SeqNumber, usize)>,
    /// `next_from_nxt` chose a probe: `emit` sends it whole (no TSO).
    pub sending_probe: bool,
    /// Probes that raised the segment size, and probes lost.
    pub probes_ok: u64,
    pub probes_lost: u64,
    /// An acknowledgment moved SND.UNA by a whole segment of `low_mss`
    /// since it was set: that size crosses the path, so it is not halved.
    #[serde(default)]
    pub low_proven: bool,
}

/// Linux's `tcp_probe_threshold`: the search stops when high − low is below it.
const PROBE_THRESHOLD: usize = 8;
/// Linux's `tcp_mtu_probe`: probe only with a congestion window of at least this many segments.
const PROBE_MIN_CWND_SEGS: usize = 11;

impl Connection {
    /// Called by `on_rto` before backing off, with the RTO that just expired.
    pub(super) fn blackhole_on_rto(&mut self, now: Instant, expired_rto: Duration) {
        if self.cfg.mtu_probing == MtuProbing::Off {
            return;
        }
        let start = *self.blackhole.episode_start.get_or_insert(now - expired_rto);
        // `retransmits_timed_out(sk, tcp_retries1, 0)`: at least one earlier
        // timeout, and (2 << 3) − 1 minimum RTOs since the head was sent.
        let threshold = RTO_BASE.saturating_mul((2u32 << RETRIES1) - 1);
        if self.rto_count <= 1 || now.saturating_duration_since(start) < threshold {
            return;
        }
        let base = usize::from(self.cfg.base_mss);
        let floor = usize::from(self.cfg.mtu_probe_floor);
        let low = match self.blackhole.low_mss {
            None => {
                self.blackhole.high_mss = self.data_mss();
                base
            }
            // Delivered at this size: the timeouts are loss, not a black hole.
            Some(_) if self.blackhole.low_proven => return,
            Some(low) => (low / 2).min(base).max(floor),
        };
        self.blackhole.low_proven = false;
        self.blackhole.low_mss = Some(low);
        let opt = self.send_mss - self.data_mss().min(self.send_mss);
        if low + opt < self.send_mss {
            self.blackhole.events += 1;
            self.set_send_mss(low + opt);
        }
    }

    /// Progress: the timeout episode is over. An acknowledged probe raises
    /// the segment size to it (Linux's `tcp_mtup_probe_success`).
    pub(super) fn blackhole_on_progress(&mut self, acked: usize) {
        self.blackhole.episode_start = None;
        if self.blackhole.low_mss.is_some_and(|low| acked >= low) {
            self.blackhole.low_proven = true;
        }
        if let Some((start, size)) = self.blackhole.probe {
            if self.snd_una >= start + size {
                self.blackhole.probe = None;
                self.blackhole.probes_ok += 1;
                self.blackhole.low_mss = Some(size);
                self.blackhole.low_proven = true;
                let opt = self.send_mss - self.data_mss().min(self.send_mss);
                if size > self.data_mss() {
                    self.set_send_mss(size + opt);
                }
            }
        }
    }

    /// Loss recovery or a timeout begins: a probe that is the first segment
    /// to resend was lost (Linux's `tcp_mtup_probe_failed`).
    pub(super) fn blackhole_on_loss(&mut self) {
        if let Some((start, size)) = self.blackhole.probe {
            if self.snd_una == start {
                self.blackhole.probe = None;
                self.blackhole.probes_lost += 1;
                self.blackhole.high_mss = size - 1;
            }
        }
    }

    /// The probe size to send now from SND.NXT, if Linux's `tcp_mtu_probe`
    /// would: searching, nothing being recovered, no probe outstanding, a
    /// congestion window of 11 segments with room for the probe, and enough
    /// unsent data and peer window for it.
    pub(super) fn blackhole_probe_size(&self, unsent: usize, wnd_avail: usize) -> Option<usize> {
        let low = self.blackhole.low_mss?;
        let b = &self.blackhole;
        let mss = self.data_mss();
        let size = (low + b.high_mss) / 2;
        let idle_recovery = !self.rec.in_recovery && self.rec.rto_recover.is_none() && self.rto_count == 0;
        let cwnd = self.cc.cwnd();
        (b.probe.is_none()
            && !b.sending_probe
            && idle_recovery
            && b.high_mss >= low + PROBE_THRESHOLD
            && size > mss
            && self.snd_nxt == self.snd_max
            && cwnd >= PROBE_MIN_CWND_SEGS * mss
            && self.cwnd_allowance() >= size + mss
            && unsent >= size
            && wnd_avail >= size)
            .then_some(size)
    }
}
