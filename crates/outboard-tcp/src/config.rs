//! Per-connection settings. Every knob has a documented default.
use crate::cc::CcKind;
use outboard_time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    /// Our MSS (advertised in the SYN); the sender MSS is min(this, peer's).
    pub mss: u16,
    pub send_buffer: usize,
    pub recv_buffer: usize,
    pub cc: CcKind,
    /// Disable Nagle (TCP_NODELAY).
    pub nodelay: bool,
    /// Delayed-ACK cap (RFC 9293 §3.8.6.3; 200 ms default).
    pub delayed_ack: Duration,
    /// TIME-WAIT length, 2·MSL.
    pub time_wait: Duration,
    pub window_scaling: bool,
    pub sack: bool,
    pub timestamps: bool,
    pub initial_rto: Duration,
    pub min_rto: Duration,
    pub max_rto: Duration,
    /// Retransmissions of one segment before the connection is aborted.
    pub max_retransmits: u32,
    /// SYN retransmissions before connect fails.
    pub max_syn_retransmits: u32,
    /// Keepalive: None = off; else (idle, interval, probes).
    pub keepalive: Option<(Duration, Duration, u32)>,
    /// Cap on distinct out-of-order ranges held by the receiver.
    pub max_ooo_ranges: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mss: 1460,
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
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
            keepalive: None,
            max_ooo_ranges: 32,
        }
    }
}
