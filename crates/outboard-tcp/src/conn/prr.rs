//! RFC 6937 Proportional Rate Reduction for fast recovery, in the
//! PRR-SSRB form Linux uses (`tcp_init_cwnd_reduction`, `tcp_cwnd_reduction`,
//! `tcp_end_cwnd_reduction`), with SACK and without.
//!
//! Without SACK (RFC 6937 §3, Linux's Reno emulation of `sacked_out`):
//! DeliveredData is one MSS per duplicate ACK, and on a partial ACK the
//! segments acknowledged less one per earlier duplicate ACK (at least one);
//! the pipe is the FlightSize less a segment per duplicate ACK counted.
//!
//! The congestion controller sets ssthresh (and cwnd = ssthresh) when
//! recovery begins; while it lasts, PRR alone decides how many bytes each ACK
//! lets out, so the pipe falls smoothly from RecoverFS to ssthresh instead of
//! stopping dead for half an RTT (RFC 6675's cwnd - pipe) and then bursting.
//! At the end of recovery cwnd = ssthresh (`on_recovery_end`).
//!
//! Counted in bytes; a positive quota lets one whole segment out, so the
//! sums match Linux's packet counts: `prr_out` never runs more than one
//! segment ahead of the proportional target, and the next ACK takes it back.

use super::recovery::seq_sub;
use super::Connection;
use crate::cc::CongestionControl;

/// RFC 6937 §3 variables for one recovery episode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Prr {
    /// RecoverFS: the FlightSize when recovery began (bytes, > 0).
    pub(super) recover_fs: usize,
    /// prr_delivered: bytes delivered to the receiver since recovery began.
    pub(super) delivered: usize,
    /// prr_out: bytes sent (new or retransmitted) since recovery began.
    pub(super) out: usize,
    /// sndcnt of the latest ACK, less what has gone out since (bytes).
    pub(super) quota: usize,
    /// Without SACK: segments the duplicate ACKs say have left the network
    /// (Linux's `sacked_out` for Reno).
    pub(super) reno_sacked: usize,
}

impl Connection {
    /// RFC 6937 §3 "at the beginning of recovery": prr_delivered = prr_out = 0,
    /// RecoverFS = snd.nxt - snd.una.
    pub(super) fn prr_start(&mut self, flight_size: usize) {
        self.rec.prr = Prr { recover_fs: flight_size.max(1), ..Prr::default() };
    }

    /// RFC 6937 §3 "on every ACK during recovery", with `delivered` the
    /// DeliveredData of this ACK (change in SND.UNA plus change in SACKed
    /// bytes) and `una_advanced` whether the cumulative ACK moved.
    //= https://www.rfc-editor.org/rfc/rfc6937#section-3.1
    //# if (pipe > ssthresh) {
    //#    // Proportional Rate Reduction
    //#    sndcnt = CEIL(prr_delivered * ssthresh / RecoverFS) - prr_out
    //# } else {
    //#    // Two versions of the Reduction Bound
    //#    if (conservative) {    // PRR-CRB
    //#      limit = prr_delivered - prr_out
    //#    } else {               // PRR-SSRB
    //#      limit = MAX(prr_delivered - prr_out, DeliveredData) + MSS
    //#    }
    //#    // Attempt to catch up, as permitted by limit
    //#    sndcnt = MIN(ssthresh - pipe, limit)
    //# }
    /// As Linux, SSRB's extra MSS is granted only on an ACK that advanced
    /// SND.UNA, and the first ACK of recovery always lets the fast
    /// retransmission out.
    pub(super) fn prr_on_ack(&mut self, delivered: usize, una_advanced: bool) {
        if delivered == 0 {
            return;
        }
        let mss = self.data_mss();
        let ssthresh = self.cc.ssthresh();
        let pipe = self.bytes_in_flight();
        let p = &mut self.rec.prr;
        p.delivered += delivered;
        let sndcnt = if pipe > ssthresh {
            let target = (p.delivered as u128 * ssthresh as u128).div_ceil(p.recover_fs as u128);
            usize::try_from(target).unwrap_or(usize::MAX).saturating_sub(p.out)
        } else {
            let limit = p.delivered.saturating_sub(p.out).max(delivered) + if una_advanced { mss } else { 0 };
            (ssthresh - pipe).min(limit)
        };
        p.quota = if p.out == 0 { sndcnt.max(mss) } else { sndcnt };
    }

    /// RFC 6937 §3 DeliveredData without SACK, for an ACK in recovery:
    /// `acked` bytes cumulatively acknowledged (a partial ACK), else a
    /// duplicate ACK (`dup`). Linux's `tcp_add_reno_sack` and `tcp_remove_reno_sacks`.
    pub(super) fn prr_reno_delivered(&mut self, acked: usize, dup: bool) -> usize {
        let mss = self.data_mss();
        let flight_segs = seq_sub(self.snd_nxt, self.snd_una).div_ceil(mss);
        let p = &mut self.rec.prr;
        if acked > 0 {
            let segs = acked.div_ceil(mss);
            let delivered = segs.saturating_sub(p.reno_sacked).max(1);
            p.reno_sacked = p.reno_sacked.saturating_sub(segs - 1);
            delivered * mss
        } else if dup {
            // Never more "SACKed" segments than are outstanding.
            p.reno_sacked = (p.reno_sacked + 1).min(flight_segs.saturating_sub(1));
            mss
        } else {
            0
        }
    }

    /// A data segment of `len` bytes (sequence space) went out in recovery.
    pub(super) fn prr_on_send(&mut self, len: usize) {
        let p = &mut self.rec.prr;
        p.out += len;
        p.quota = p.quota.saturating_sub(len);
    }

    /// What PRR lets out now: whole segments while the quota is positive.
    pub(super) fn prr_allowance(&self) -> usize {
        let mss = self.data_mss();
        self.rec.prr.quota.div_ceil(mss) * mss
    }
}
