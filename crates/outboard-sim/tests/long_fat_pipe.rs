//! Long fat pipes: 1 Gbit/s with 20 ms and 100 ms round trips, 16 MiB
//! socket buffers (more than either path's bandwidth-delay product), clean
//! and with 0.01 % loss on the data path.
//!
//! Clean, the sender must leave slow start without overflowing the
//! bottleneck queue (HyStart++, RFC 9406), never time out, and from 2 s on
//! run at 90 % of the link rate or more. With loss the transfer must
//! complete (RACK-TLP, PRR); its rate is printed, not asserted (at 100 ms
//! and 0.01 % the Mathis bound for Reno is far below the link rate).
//!
//! Each transfer is sized to run about `LFP_SECS` (default 3) seconds of
//! virtual time, so the measurement covers the time after the first 2 s.

mod common;

use common::env_u64;
use outboard_sim::{run_transfer_with, TransferConfig, TransferReport};
use outboard_tcp::CcKind;

const LINK_MBIT: f64 = 1000.0;

/// Runs one path; returns the report and the goodput (Mbit/s) from 2 s of
/// virtual time to the end.
fn run(rtt_ms: f64, loss: f64, cc: CcKind) -> (TransferReport, f64) {
    let secs = env_u64("LFP_SECS", 3) as f64;
    // The link carries 1500-byte frames with 1448 bytes of payload at best:
    // size the transfer for `secs` at that rate, less the ramp-up. With loss
    // the rate is far lower: 64 MiB is enough to show that it completes.
    let payload_rate = LINK_MBIT * 1e6 / 8.0 * 1448.0 / 1500.0;
    let bytes = if loss > 0.0 { 64 << 20 } else { (payload_rate * (secs - rtt_ms / 1e3 * 10.0).max(2.5)) as u64 };
    let cfg = TransferConfig {
        bytes,
        seed: 7,
        cc,
        loss,
        // Only data segments meet loss; ACKs come back clean.
        reverse_faults: false,
        delay_ms: rtt_ms / 2.0,
        bandwidth_mbit: LINK_MBIT,
        send_buffer: 16 << 20,
        recv_buffer: 16 << 20,
        // The bottleneck queue holds one bandwidth-delay product (the usual
        // rule of thumb), at least 4 MiB (32 ms at 1 Gbit/s).
        queue_bytes: ((LINK_MBIT * 1e6 / 8.0 * rtt_ms / 1e3) as usize).max(4 << 20),
        progress_interval_ms: 100,
        time_limit_s: 120.0,
        ..TransferConfig::default()
    };
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let r = run_transfer_with(&cfg, &mut |p| samples.push((p.virtual_seconds, p.received[0])));
    let (t2, b2) = samples.iter().copied().find(|&(t, _)| t >= 2.0 - 1e-9).unwrap_or((0.0, 0));
    let end = r.directions[0].completed_at_s.unwrap_or(r.virtual_seconds);
    let rate = if end > t2 + 0.1 { (bytes - b2) as f64 * 8.0 / (end - t2) / 1e6 } else { 0.0 };
    let s = &r.directions[0].sender;
    eprintln!(
        "lfp {cc:?} rtt {rtt_ms} ms loss {loss}: {} MB in {end:.2} s, after 2 s {rate:.0} Mbit/s \
         ({:.1} % of link), overall {:.0} Mbit/s, rto {}, fast rexmit {}, rexmit {}, max cwnd {} KB",
        bytes >> 20,
        rate / LINK_MBIT * 100.0,
        r.goodput_mbit,
        s.rto_events,
        s.fast_retransmits,
        s.retransmits,
        s.max_cwnd >> 10,
    );
    (r, rate)
}

fn clean(rtt_ms: f64, cc: CcKind) {
    let (r, rate) = run(rtt_ms, 0.0, cc);
    assert!(r.ok, "{}", r.summary());
    let s = &r.directions[0].sender;
    assert_eq!(s.rto_events, 0, "no RTO on a clean path: {}", r.summary());
    assert!(rate >= 0.9 * LINK_MBIT, "{cc:?} {rtt_ms} ms: {rate:.0} Mbit/s after 2 s < 90 % of {LINK_MBIT}");
}

#[test]
fn long_fat_pipe_20ms_clean_cubic() {
    clean(20.0, CcKind::Cubic);
}

#[test]
fn long_fat_pipe_100ms_clean_cubic() {
    clean(100.0, CcKind::Cubic);
}

#[test]
fn long_fat_pipe_20ms_clean_newreno() {
    clean(20.0, CcKind::NewReno);
}

#[test]
fn long_fat_pipe_100ms_clean_newreno() {
    clean(100.0, CcKind::NewReno);
}

#[test]
fn long_fat_pipe_lossy_completes() {
    for rtt_ms in [20.0, 100.0] {
        let (r, _) = run(rtt_ms, 1e-4, CcKind::Cubic);
        assert!(r.ok, "{}", r.summary());
    }
}
