//! Option negotiation on the SYNs (MSS, RFC 7323 window scale and timestamps,
//! RFC 2018 SACK-permitted), per-segment timestamps, and the SACK blocks we send.

use super::{Connection, DEFAULT_MSS};
use crate::cc::{CongestionControl, Controller};
use outboard_time::Instant;
use outboard_wire::{SackBlocks, SeqNumber, TcpOptions, TcpRepr};

/// RFC 7323 §2.3: the largest shift either side may use.
pub(super) const MAX_WSCALE: u8 = 14;
/// Bytes the timestamps option takes in every segment (10, padded to 12).
pub(super) const TS_OPTION_LEN: usize = 12;
/// RFC 7323 §5.5: TS.Recent older than 24 days is invalid.
const PAWS_IDLE_MS: u64 = 24 * 24 * 60 * 60 * 1000;

/// Linux's default largest receive buffer (`tcp_rmem[2]`, 6 MiB).
pub(super) const LINUX_RMEM_MAX: usize = 6 * 1024 * 1024;

/// The shift our SYN / SYN-ACK offers (0 with window scaling off). Chosen,
/// as Linux's `tcp_select_initial_window` does, for the largest window the
/// connection may ever grow to, not for the buffer it starts with: the shift
/// cannot change after the handshake. `Config` has one receive-buffer size
/// and no autotuning maximum, so that largest window is
/// max(`recv_buffer`, Linux's default `tcp_rmem[2]` of 6 MiB): default
/// settings offer 7, as Linux does; a 1 GiB buffer offers 14.
pub(super) fn offered_wscale(cfg: &crate::Config) -> u8 {
    if cfg.window_scaling && cfg.rcv_clamp > 0 {
        // Linux's tcp_connect_init / tcp_openreq_init_rwin: a receive buffer
        // the application set (SOCK_RCVBUF_LOCK) clamps the window, and the
        // shift is chosen for that clamp.
        wscale_for(cfg.rcv_clamp)
    } else if cfg.window_scaling {
        wscale_for(cfg.recv_buffer.max(LINUX_RMEM_MAX))
    } else {
        0
    }
}

/// The smallest shift that lets a window of `buffer` bytes be advertised.
pub(super) fn wscale_for(buffer: usize) -> u8 {
    let mut shift = 0;
    while shift < MAX_WSCALE && (buffer >> shift) > usize::from(u16::MAX) {
        shift += 1;
    }
    shift
}

/// Our timestamp clock: milliseconds of `now` (RFC 7323 §5.4 allows 1 ms to 1 s
/// per tick). Offset by one so that TSval is never zero at the epoch, which
/// some peers take as "no echo".
pub(super) fn ts_clock(now: Instant) -> u32 {
    (now.as_millis() as u32).wrapping_add(1)
}

impl Connection {
    /// Records the peer's SYN (in SYN-SENT on SYN or SYN-ACK, or at accept):
    /// IRS, MSS, and the options both sides offered.
    pub(super) fn on_peer_syn(&mut self, now: Instant, syn: &TcpRepr) {
        self.irs = syn.seq;
        self.rcv_nxt = syn.seq + 1;
        // The right edge is what our SYN (or the SYN-ACK about to go) offers:
        // RFC 9293 §3.10.7.3 lets text and FIN ride on the peer's SYN-ACK.
        self.rcv_adv = self.rcv_nxt + self.rcv_room().min(usize::from(u16::MAX));
        self.last_ack_sent = self.rcv_nxt;
        // RFC 9293 §3.10.7.3: SND.WL1/WL2 start from the SYN so its window is taken.
        self.snd_wl1 = syn.seq;
        // RFC 7323 §2.2: the window in a SYN is never scaled.
        self.snd_wnd = usize::from(syn.window);
        self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
        let o = &syn.options;
        // RFC 7323 §2.2: scaling only when both SYNs carry the option.
        match (self.cfg.window_scaling, o.window_scale) {
            (true, Some(shift)) => {
                self.wscale_ok = true;
                self.snd_wscale = shift.min(MAX_WSCALE);
            }
            _ => {
                self.wscale_ok = false;
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
            }
        }
        self.sack_ok = self.cfg.sack && o.sack_permitted;
        self.ecn_on_peer_syn(syn);
        if let (true, Some((tsval, _))) = (self.cfg.timestamps, o.timestamps) {
            self.ts_ok = true;
            self.ts_recent = tsval;
            self.ts_recent_at = now;
        } else {
            self.ts_ok = false;
        }
        // RFC 9293 §3.7.1: 536 when the peer sends no MSS option.
        let peer_mss = o.mss.map_or(DEFAULT_MSS, usize::from);
        self.set_send_mss(peer_mss.min(usize::from(self.cfg.mss)).max(64));
        // Nothing was sent yet: start the controller with the real MSS so the
        // initial window (RFC 6928) is sized in full segments.
        self.cc = Controller::new(self.cfg.cc, self.data_mss());
    }

    /// Sets the sender MSS and tells the congestion controller the payload size
    /// of a full segment.
    pub(super) fn set_send_mss(&mut self, mss: usize) {
        self.send_mss = mss.max(64);
        self.cc.set_mss(self.data_mss());
    }

    /// Payload bytes in a full-sized segment: the MSS less the options every
    /// segment carries (RFC 9293 §3.7.1, RFC 7323 §3.2).
    pub(super) fn data_mss(&self) -> usize {
        let opt = if self.ts_ok { TS_OPTION_LEN } else { 0 };
        self.send_mss.saturating_sub(opt).max(32)
    }

    /// Options for our SYN or SYN-ACK. On a SYN-ACK only what the peer offered is echoed.
    pub(super) fn syn_options(&self, now: Instant) -> TcpOptions {
        let synack = self.state == super::State::SynReceived;
        let mut o = TcpOptions { mss: Some(self.cfg.mss), ..TcpOptions::default() };
        if self.cfg.window_scaling && (!synack || self.wscale_ok) {
            o.window_scale = Some(self.rcv_wscale);
        }
        if self.cfg.sack && (!synack || self.sack_ok) {
            o.sack_permitted = true;
        }
        if self.cfg.timestamps && (!synack || self.ts_ok) {
            let ecr = if synack { self.ts_recent } else { 0 };
            o.timestamps = Some((ts_clock(now), ecr));
        }
        o
    }

    /// Options for a segment in a synchronized state: timestamps and SACK blocks.
    pub(super) fn segment_options(&self, now: Instant) -> TcpOptions {
        let mut o = TcpOptions::default();
        if self.ts_ok {
            o.timestamps = Some((ts_clock(now), self.ts_recent));
        }
        if self.sack_ok && (self.dsack.is_some() || !self.assembler.is_empty()) {
            // RFC 2883 §4: a D-SACK block (a duplicate segment's range) goes first.
            if let Some((l, r)) = self.dsack {
                o.sack.push(l, r);
            }
            for (l, r) in self.sack_blocks().iter() {
                o.sack.push(l, r);
            }
            // 40 option bytes: 2 + 8n for SACK; with timestamps (12) at most 3 blocks.
            o.sack.truncate(if self.ts_ok { 3 } else { 4 });
        }
        o
    }

    /// RFC 2018 §4: the first block holds the most recently received segment,
    /// then other recent blocks, then the rest lowest first.
    pub(super) fn sack_blocks(&self) -> SackBlocks {
        let mut blocks = SackBlocks::new();
        let to_seq = |(s, e): (usize, usize)| (self.rcv_nxt + s, self.rcv_nxt + e);
        // Bit i: range i is already reported (no allocation on this path).
        let mut used = 0u64;
        for seq in self.sack_recent.iter().flatten() {
            let found = self.assembler.ranges().map(to_seq).enumerate().find(|&(_, (l, r))| seq.in_range(l, r));
            if let Some((i, (l, r))) = found {
                if i < 64 && used & (1 << i) == 0 {
                    used |= 1 << i;
                    blocks.push(l, r);
                }
            }
        }
        for (i, (l, r)) in self.assembler.ranges().map(to_seq).enumerate() {
            if blocks.len() == SackBlocks::MAX {
                break;
            }
            if i >= 64 || used & (1 << i) == 0 {
                blocks.push(l, r);
            }
        }
        blocks
    }

    /// RFC 2883 §4: a duplicate segment arrived; its range `[left, right)`
    /// (here always below RCV.NXT) goes first in the SACK option of our next
    /// segment, so that the sender can tell a spurious retransmission.
    pub(super) fn note_dsack(&mut self, left: SeqNumber, right: SeqNumber) {
        if self.sack_ok && left < right {
            self.dsack = Some((left, right));
            self.ack_now = true;
        }
    }

    /// Remembers an out-of-order arrival for SACK block ordering.
    pub(super) fn note_sack_arrival(&mut self, seq: SeqNumber) {
        self.sack_recent.rotate_right(1);
        self.sack_recent[0] = Some(seq);
    }

    /// RFC 7323 §5.3 PAWS: true if the segment must be dropped as old. Only
    /// answers: nothing is remembered from a segment before it is known to be
    /// acceptable (`update_ts_recent` does that, as Linux's `tcp_paws_check`
    /// only answers and `tcp_replace_ts_recent` stores).
    #[inline(always)]
    pub(super) fn paws_rejects(&self, now: Instant, repr: &TcpRepr) -> bool {
        if !self.ts_ok || repr.flags.rst() {
            return false;
        }
        let Some((tsval, _)) = repr.options.timestamps else { return false };
        !self.ts_newer_or_stale(now, tsval)
    }

    /// `tsval` is not older than TS.Recent, or TS.Recent is stale (§5.5:
    /// after 24 days idle it is no longer trusted).
    #[inline(always)]
    fn ts_newer_or_stale(&self, now: Instant, tsval: u32) -> bool {
        (tsval.wrapping_sub(self.ts_recent) as i32) >= 0
            || now.saturating_duration_since(self.ts_recent_at).as_millis() as u64 > PAWS_IDLE_MS
    }

    /// RFC 7323 §4.3: TS.Recent takes SEG.TSval when the segment covers
    /// Last.ACK.sent. Called only for an acceptable segment whose ACK was
    /// validated (RFC 9293 §3.10.7.4 order; Linux's `tcp_replace_ts_recent`
    /// in `tcp_ack`): a segment dropped for its sequence number, its ACK, or
    /// answered with a challenge ACK never sets it.
    #[inline]
    pub(super) fn update_ts_recent(&mut self, now: Instant, repr: &TcpRepr) {
        if !self.ts_ok {
            return;
        }
        if let Some((tsval, _)) = repr.options.timestamps {
            if repr.seq <= self.last_ack_sent && self.ts_newer_or_stale(now, tsval) {
                self.ts_recent = tsval;
                self.ts_recent_at = now;
            }
        }
    }
}
