//! Explicit Congestion Notification (RFC 3168 §6.1), as Linux runs it.
//!
//! Negotiation (§6.1.1): an ECN-setup SYN carries ECE and CWR, an ECN-setup
//! SYN-ACK carries ECE only. `Config::ecn` picks who asks, with Linux's
//! `tcp_ecn` values: `Passive` (Linux's default 2) answers an ECN-setup SYN
//! but does not send one, `On` (1) also asks when connecting, `Off` (0)
//! neither. A connection rebuilt from a SYN cookie does not use ECN (the
//! cookie cannot remember it; Linux keeps it only in a timestamp cookie).
//!
//! Once negotiated:
//! - new data segments leave with ECT(0) in the IP header (`Transmit::ect`);
//!   pure ACKs, window probes, SYNs and retransmissions do not (§6.1.4,
//!   §6.1.5), as Linux's `tcp_ecn_send`;
//! - the receiver, told by the stack that a segment arrived marked CE
//!   (`Connection::note_ce`), sets ECE on every ACK until a segment with CWR
//!   arrives (§6.1.3);
//! - the sender answers ECE with one congestion-window reduction per window
//!   of data, the same reduction as a fast retransmit's but without
//!   retransmitting (§6.1.2; Linux's CWR state), and sets CWR on the next
//!   new data segment it sends.

use super::Connection;
use crate::cc::CongestionControl;
use outboard_time::Instant;
use outboard_wire::{SeqNumber, TcpFlags, TcpRepr};

/// Who asks for ECN (Linux's `net.ipv4.tcp_ecn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[derive(serde::Serialize, serde::Deserialize)]
pub enum EcnMode {
    /// Never.
    Off,
    /// Answer an ECN-setup SYN, do not send one (Linux's default).
    #[default]
    Passive,
    /// Ask when connecting, and answer.
    On,
}

impl core::str::FromStr for EcnMode {
    type Err = String;
    /// `off`, `passive` or `on` (or Linux's `tcp_ecn` numbers 0, 2, 1).
    fn from_str(s: &str) -> Result<EcnMode, String> {
        match s {
            "off" | "0" => Ok(EcnMode::Off),
            "passive" | "2" => Ok(EcnMode::Passive),
            "on" | "1" => Ok(EcnMode::On),
            _ => Err(format!("{s:?}: use off, passive or on")),
        }
    }
}

/// A connection's ECN state.
#[derive(Debug, Clone, Copy, Default)]
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Ecn {
    /// Negotiated.
    pub ok: bool,
    /// We sent an ECN-setup SYN (active open with `EcnMode::On`).
    pub asked: bool,
    /// The stack saw CE on the segment about to be handed over.
    pub ce_next: bool,
    /// Receiver: echo ECE until the peer's CWR.
    pub echo: bool,
    /// Sender: the next new data segment carries CWR.
    pub cwr_pending: bool,
    /// Sender: reduced for ECE until SND.UNA passes this (one reduction per window).
    pub cwr_until: Option<SeqNumber>,
    /// A CE mark was ever received (Linux's TCPI_OPT_ECN_SEEN).
    pub seen: bool,
    /// Congestion-window reductions made for ECE.
    pub reductions: u64,
}

impl Connection {
    /// The IP header of the segment the stack hands over next carried CE
    /// (congestion experienced, RFC 3168 §5). Call it before `handle_segment`.
    pub fn note_ce(&mut self) {
        self.ecn.ce_next = true;
    }

    /// The SYN flags for an active open: ECE and CWR when we ask (§6.1.1).
    pub(super) fn ecn_syn_flags(&mut self) -> TcpFlags {
        if self.active_open && self.cfg.ecn == EcnMode::On {
            self.ecn.asked = true;
            TcpFlags::ECE | TcpFlags::CWR
        } else if !self.active_open && self.ecn.ok {
            // An ECN-setup SYN-ACK: ECE, not CWR.
            TcpFlags::ECE
        } else {
            TcpFlags::NONE
        }
    }

    /// Negotiation from the peer's SYN (passive) or SYN-ACK (active).
    pub(super) fn ecn_on_peer_syn(&mut self, syn: &TcpRepr) {
        let f = syn.flags;
        let (ece, cwr) = (f.contains(TcpFlags::ECE), f.contains(TcpFlags::CWR));
        self.ecn.ok = if self.active_open && !f.ack() {
            // A simultaneous open: ECN only if both asked.
            self.ecn.asked && ece && cwr
        } else if self.active_open {
            self.ecn.asked && ece && !cwr
        } else {
            self.cfg.ecn != EcnMode::Off && ece && cwr
        };
    }

    /// Receiver side of an accepted segment: CE starts the echo, CWR stops it (§6.1.3).
    #[inline]
    pub(super) fn ecn_on_segment(&mut self, repr: &TcpRepr) {
        let ce = std::mem::take(&mut self.ecn.ce_next);
        if !self.ecn.ok {
            return;
        }
        if repr.flags.contains(TcpFlags::CWR) {
            self.ecn.echo = false;
        }
        if ce {
            self.ecn.seen = true;
            self.ecn.echo = true;
            // Tell the sender at once (Linux's tcp_ecn_check_ce enters quick-ACK).
            self.ack_now = true;
            self.delack_leave_pingpong();
        }
    }

    /// Forgets a CE note for a segment that was dropped before processing.
    pub(super) fn ecn_drop_note(&mut self) {
        self.ecn.ce_next = false;
    }

    /// Sender side of an acceptable ACK: ECE reduces the window once per window of data (§6.1.2).
    #[inline]
    pub(super) fn ecn_on_ack(&mut self, now: Instant, repr: &TcpRepr) {
        if !self.ecn.ok || repr.flags.syn() {
            return;
        }
        if self.ecn.cwr_until.is_some_and(|end| self.snd_una >= end) {
            self.ecn.cwr_until = None;
        }
        if !repr.flags.contains(TcpFlags::ECE) || self.ecn.cwr_until.is_some() {
            return;
        }
        // Loss recovery already reduced the window for this flight.
        if !self.rec.in_recovery {
            let in_flight = self.bytes_in_flight();
            self.cc.on_congestion_event(now, in_flight);
            self.ecn.reductions += 1;
        }
        self.ecn.cwr_until = Some(self.snd_max);
        self.ecn.cwr_pending = true;
    }

    /// ECN flags and ECT for a non-SYN segment: ECE while echoing; CWR and
    /// ECT on new data only.
    pub(super) fn ecn_segment_flags(&mut self, new_data: bool) -> (TcpFlags, bool) {
        if !self.ecn.ok {
            return (TcpFlags::NONE, false);
        }
        let mut f = if self.ecn.echo { TcpFlags::ECE } else { TcpFlags::NONE };
        if new_data && std::mem::take(&mut self.ecn.cwr_pending) {
            f |= TcpFlags::CWR;
        }
        (f, new_data)
    }

    /// (negotiated, a CE mark was received, reductions for ECE).
    pub fn ecn_state(&self) -> (bool, bool, u64) {
        (self.ecn.ok, self.ecn.seen, self.ecn.reductions)
    }
}
