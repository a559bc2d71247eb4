//! The bulk-transfer scenario: two real stacks, one TCP connection, seeded
//! data checked byte by byte and by SHA-256 on arrival.
//!
//! Host a (10.0.0.1) connects to host b (10.0.0.2) port 5001. With
//! `Direction::One` a sends `bytes` to b. With `Direction::Both` each sends
//! `bytes` to the other at the same time *on the one connection* (full
//! duplex: data segments carry the reverse direction's ACKs). Each sender
//! calls `shutdown_write` after its last byte; a direction is complete when its
//! receiver has every byte, intact, followed by end of stream. When every
//! direction is complete both applications `close`, and the run waits (up to
//! 120 virtual seconds) for both ends to reach TIME-WAIT or CLOSED. The run
//! fails at the virtual time limit, on a reset or timeout, on a deadlock
//! (nothing scheduled, transfer unfinished), at the first wrong byte, or when
//! the close does not finish. `virtual_seconds` and goodput count up to the
//! last end of stream, not the close.
//!
//! The two directions of the link are independent `FaultInjector`s with the
//! same knobs; `delay_ms` is one way, so the base RTT is twice it.

mod report;
mod run;
mod stream;

pub use report::{ConnState, ConnSummary, DirectionReport, HostReport, Progress, TransferReport};
pub use stream::{stream_seed, Sink, Source};

use crate::fault::FaultConfig;
use crate::pcap::PcapBuf;
use outboard_tcp::CcKind;
use outboard_time::Duration;
use std::sync::{Arc, Mutex};

/// Which way data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// a sends to b.
    #[default]
    One,
    /// a and b each send `bytes` to the other at once, on one connection.
    Both,
}

impl core::str::FromStr for Direction {
    type Err = String;
    fn from_str(s: &str) -> Result<Direction, String> {
        match s {
            "one" => Ok(Direction::One),
            "both" => Ok(Direction::Both),
            other => Err(format!(
                "unknown direction {other:?} (expected one or both)"
            )),
        }
    }
}

impl core::fmt::Display for Direction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Direction::One => "one",
            Direction::Both => "both",
        })
    }
}

/// Everything that defines a run. Same config (seed included) → same report.
#[derive(Debug, Clone)]
pub struct TransferConfig {
    /// Bytes sent in each direction.
    pub bytes: u64,
    /// Per-frame probabilities, each link direction.
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    /// Checksum-preserving payload corruption (see `FaultConfig`): the stack
    /// cannot detect it, the transfer's own checks must.
    pub undetectable_corrupt: f64,
    /// One-way delay; RTT is twice this.
    pub delay_ms: f64,
    pub jitter_ms: f64,
    /// Largest extra delay of a reordered frame.
    pub reorder_delay_ms: f64,
    /// Both link directions go down at this virtual time for `outage_s` seconds (0 = never).
    pub outage_at_s: f64,
    pub outage_s: f64,
    /// Link rate; 0 = unlimited.
    pub bandwidth_mbit: f64,
    /// Bytes the link's transmit queue holds before tail drop.
    pub queue_bytes: usize,
    pub seed: u64,
    pub cc: CcKind,
    pub direction: Direction,
    pub mss: u16,
    pub mtu: usize,
    pub send_buffer: usize,
    pub recv_buffer: usize,
    /// The receiving application reads at most this fast (Mbit/s, 0 = as fast
    /// as data arrives): a slow reader fills the receive buffer and makes the
    /// sender meet zero windows, persist probes and window updates.
    pub reader_mbit: f64,
    /// The run fails if not complete by this much virtual time.
    pub time_limit_s: f64,
    /// Apply the fault knobs to the b->a link as well as a->b (default true).
    /// False keeps b->a clean except for delay and bandwidth: with
    /// `Direction::One` only data segments then meet faults, as in the Mathis model.
    pub reverse_faults: bool,
    /// Called every `progress_interval_ms` of virtual time.
    pub progress: Option<fn(&Progress)>,
    pub progress_interval_ms: u64,
    /// Run the connection over IPv6 (both hosts dual-stack).
    pub ipv6: bool,
    /// RFC 4821 black-hole detection (the engine's default: on).
    pub mtu_probing: outboard_tcp::MtuProbing,
}

impl Default for TransferConfig {
    /// 1 MiB one way over a clean 100 Mbit/s link with 1 ms one-way delay.
    fn default() -> TransferConfig {
        TransferConfig {
            bytes: 1 << 20,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            undetectable_corrupt: 0.0,
            delay_ms: 1.0,
            jitter_ms: 0.0,
            reorder_delay_ms: 1.0,
            outage_at_s: 0.0,
            outage_s: 0.0,
            bandwidth_mbit: 100.0,
            queue_bytes: 256 * 1024,
            seed: 1,
            cc: CcKind::NewReno,
            direction: Direction::One,
            mss: 1460,
            mtu: 1500,
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            reader_mbit: 0.0,
            time_limit_s: 600.0,
            reverse_faults: true,
            progress: None,
            progress_interval_ms: 1000,
            ipv6: false,
            mtu_probing: outboard_tcp::MtuProbing::BlackHole,
        }
    }
}

impl TransferConfig {
    /// The link knobs this config implies.
    pub fn fault_config(&self) -> FaultConfig {
        FaultConfig {
            loss: self.loss,
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_delay: ms(self.reorder_delay_ms),
            corrupt: self.corrupt,
            undetectable_corrupt: self.undetectable_corrupt,
            delay: ms(self.delay_ms),
            jitter: ms(self.jitter_ms),
            bandwidth_bps: (self.bandwidth_mbit.max(0.0) * 1e6) as u64,
            queue_bytes: self.queue_bytes,
            outages: if self.outage_s > 0.0 {
                let start = outboard_time::Instant::ZERO + ms(self.outage_at_s * 1e3);
                vec![(start, start + ms(self.outage_s * 1e3))]
            } else {
                Vec::new()
            },
            ..FaultConfig::default()
        }
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_nanos((v.max(0.0) * 1e6) as u64)
}

/// Runs the scenario. Uses `cfg.progress` as the progress hook, if set.
pub fn run_transfer(cfg: &TransferConfig) -> TransferReport {
    match cfg.progress {
        Some(hook) => run_transfer_with(cfg, &mut |p| hook(p)),
        None => run_transfer_with(cfg, &mut |_| {}),
    }
}

/// Runs the scenario with a capturing progress hook.
pub fn run_transfer_with(
    cfg: &TransferConfig,
    progress: &mut dyn FnMut(&Progress),
) -> TransferReport {
    run::run(cfg, progress, None)
}

/// Runs the scenario and also returns a pcap image of every frame delivered
/// (after the links' faults), timestamped in virtual time.
pub fn run_transfer_pcap(
    cfg: &TransferConfig,
    progress: &mut dyn FnMut(&Progress),
) -> (TransferReport, Vec<u8>) {
    let pcap = Arc::new(Mutex::new(PcapBuf::new(65535)));
    let report = run::run(cfg, progress, Some(pcap.clone()));
    let bytes = pcap
        .lock()
        .map(|p| p.as_bytes().to_vec())
        .unwrap_or_default();
    (report, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direction_parses_and_prints_the_cli_words() {
        assert_eq!("one".parse::<Direction>(), Ok(Direction::One));
        assert_eq!("both".parse::<Direction>(), Ok(Direction::Both));
        assert!("sideways".parse::<Direction>().is_err());
        assert_eq!(Direction::Both.to_string(), "both");
    }

    #[test]
    fn fault_config_converts_units() {
        let cfg = TransferConfig {
            delay_ms: 5.0,
            jitter_ms: 0.25,
            bandwidth_mbit: 100.0,
            loss: 0.01,
            ..TransferConfig::default()
        };
        let f = cfg.fault_config();
        assert_eq!(f.delay, Duration::from_millis(5));
        assert_eq!(f.jitter, Duration::from_micros(250));
        assert_eq!(f.bandwidth_bps, 100_000_000);
        assert_eq!(f.loss, 0.01);
        // Nonsense stays harmless.
        let f = TransferConfig {
            delay_ms: -1.0,
            bandwidth_mbit: -5.0,
            ..TransferConfig::default()
        }
        .fault_config();
        assert_eq!(f.delay, Duration::ZERO);
        assert_eq!(f.bandwidth_bps, 0);
    }
}
