//! Per-connection settings. Every knob has a documented default.
//!
//! Fixed policies that are not knobs (documented where they live in `conn`):
//! quick-ACK for the first 16 data segments, at most 10 RFC 5961 challenge
//! ACKs per second, out-of-window pure ACKs answered at most every 500 ms,
//! RFC 6928 initial window of ten segments (in `cc`).
use crate::cc::CcKind;
use outboard_time::Duration;

#[derive(Debug, Clone)]
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Config {
    /// Our MSS (advertised in the SYN); the sender MSS is min(this, peer's),
    /// 536 when the peer sends none (RFC 9293 §3.7.1). Values below 64 act as 64.
    pub mss: u16,
    /// Send queue bytes: unacknowledged plus not yet sent (256 KiB).
    pub send_buffer: usize,
    /// Receive buffer bytes; bounds the advertised window (256 KiB). With
    /// window scaling our shift is the smallest that covers max(this, 6 MiB)
    /// (Linux's default `tcp_rmem[2]`), at most 14: 7 by default, as Linux.
    pub recv_buffer: usize,
    /// SO_RCVBUF as the application set it, halved (Linux's window clamp for
    /// a locked receive buffer: the doubled value at its default 50 %
    /// payload ratio); 0: none. The advertised window never exceeds it less
    /// the bytes waiting to be read, and the SYN's window scale is chosen
    /// for it.
    #[serde(default)]
    pub rcv_clamp: usize,
    /// Congestion controller (NewReno).
    pub cc: CcKind,
    /// Disable Nagle (TCP_NODELAY).
    pub nodelay: bool,
    /// The longest an ACK is delayed (RFC 9293 §3.8.6.3; 200 ms default,
    /// Linux's `TCP_DELACK_MAX`). Below it the delay is Linux's estimate
    /// from the gap between data segments: 40 ms on a LAN (`conn::delack`).
    pub delayed_ack: Duration,
    /// TIME-WAIT length, 2·MSL (60 s). Also bounds FIN-WAIT-2 after `close()`.
    pub time_wait: Duration,
    /// Offer RFC 7323 window scaling (on).
    pub window_scaling: bool,
    /// Offer RFC 2018 SACK (on).
    pub sack: bool,
    /// Offer RFC 7323 timestamps (on): RTTM and PAWS.
    pub timestamps: bool,
    /// RTO before the first RTT sample (RFC 6298 §2.1: 1 s).
    pub initial_rto: Duration,
    /// RTO floor (200 ms, as Linux; RFC 6298 §2.4 says 1 s).
    pub min_rto: Duration,
    /// RTO ceiling after backoff (60 s, RFC 6298 §2.5).
    pub max_rto: Duration,
    /// Consecutive retransmission timeouts without progress before the
    /// connection gives up with TimedOut (15); not counted while a live peer
    /// holds a zero window.
    pub max_retransmits: u32,
    /// SYN retransmissions before an active open fails (6, Linux's
    /// `tcp_syn_retries`: 1+2+4+8+16+32+64 = 127 s).
    pub max_syn_retransmits: u32,
    /// SYN-ACK retransmissions before a half-open (SYN-RECEIVED) connection
    /// is dropped (5, Linux's `tcp_synack_retries`: it lives 1+2+4+8+16+32 = 63 s).
    pub max_synack_retransmits: u32,
    /// Keepalive (RFC 1122 §4.2.3.6): None = off (default); else (idle before
    /// the first probe, interval between probes, unanswered probes before TimedOut).
    pub keepalive: Option<(Duration, Duration, u32)>,
    /// Cap on distinct out-of-order ranges held by the receiver (32); data
    /// that would need more is dropped and resent by the peer.
    pub max_ooo_ranges: usize,
    /// Largest segment payload the link takes for new data (TSO/GSO: the link
    /// cuts it into send-MSS pieces); 0 = off, every segment at most one MSS
    /// (the default). A TSO segment is a whole number of MSS-sized pieces
    /// (plus the tail when Nagle lets it go), never more than the peer's
    /// window and cwnd allow; retransmissions stay at one MSS. The stack sets
    /// it per connection from its link (`Connection::set_tso_max`).
    pub tso_max_bytes: usize,
    /// RFC 3168 ECN: who asks (`Passive`, Linux's default `tcp_ecn = 2`:
    /// answer an ECN-setup SYN, never send one; `On` also asks; `Off`).
    pub ecn: crate::conn::EcnMode,
    /// RFC 4821 black-hole detection (Linux's `tcp_mtu_probing`; on when a
    /// black hole is detected, Linux's default 1): repeated timeouts lower
    /// the segment size to `base_mss`, then halve it toward `mtu_probe_floor`.
    pub mtu_probing: crate::conn::MtuProbing,
    /// Payload bytes per segment after the first black-hole timeout (1024, Linux's `tcp_base_mss`).
    pub base_mss: u16,
    /// Lowest payload size black-hole halving reaches (48, Linux's
    /// `tcp_mtu_probe_floor`; the MSS floor of 64 applies as well).
    pub mtu_probe_floor: u16,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mss: 1460,
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            rcv_clamp: 0,
            cc: CcKind::NewReno,
            nodelay: false,
            delayed_ack: Duration::from_millis(200),
            time_wait: Duration::from_secs(60),
            window_scaling: true,
            sack: true,
            timestamps: true,
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_retransmits: 15,
            max_syn_retransmits: 6,
            max_synack_retransmits: 5,
            keepalive: None,
            max_ooo_ranges: 32,
            tso_max_bytes: 0,
            ecn: crate::conn::EcnMode::Passive,
            mtu_probing: crate::conn::MtuProbing::BlackHole,
            base_mss: 1024,
            mtu_probe_floor: 48,
        }
    }
}
