//! A receiver that reads slower than the network delivers: the receive
//! buffer fills, the window closes, and the sender must wait on persist
//! probes and window updates (RFC 9293 §3.8.6.1) — also when those are lost.

use outboard_sim::{run_transfer, TransferConfig};
use outboard_tcp::CcKind;

fn slow(seed: u64, loss: f64, cc: CcKind) -> TransferConfig {
    TransferConfig {
        bytes: 2 << 20,
        seed,
        cc,
        loss,
        reader_mbit: 8.0,
        recv_buffer: 32 * 1024,
        ..TransferConfig::default()
    }
}

#[test]
fn slow_reader_paces_the_transfer_to_its_read_rate() {
    let r = run_transfer(&slow(1, 0.0, CcKind::NewReno));
    assert!(r.ok, "{}", r.summary());
    // 2 MiB at 8 Mbit/s is 2.10 s; the reader, not the 100 Mbit/s link, sets the pace.
    assert!(
        (2.09..2.3).contains(&r.virtual_seconds),
        "took {} s",
        r.virtual_seconds
    );
    assert_eq!(
        r.retransmits,
        0,
        "a full receive window is not a loss: {}",
        r.summary()
    );
}

#[test]
fn closed_windows_reopen_under_loss() {
    for seed in 1..=6 {
        for cc in [CcKind::NewReno, CcKind::Cubic] {
            let r = run_transfer(&slow(seed, 0.02, cc));
            assert!(r.ok, "{}", r.summary());
            assert!(
                r.virtual_seconds < 10.0,
                "stuck on a closed window? {}",
                r.summary()
            );
        }
    }
}
