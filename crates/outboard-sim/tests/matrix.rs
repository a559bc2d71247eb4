//! The fault matrix: 64 MiB each way (full duplex on one connection) must
//! arrive byte-exact and SHA-256-equal under each fault, for 50 seeds and both
//! congestion controllers: 7 cases × 50 seeds × 2 = 700 runs.
//!
//! Links: 100 Mbit/s, 1 ms one way, 256 KiB queue, MSS 1460.
//! `OUTBOARD_SIM_SEEDS` and `OUTBOARD_SIM_MIB` shrink the matrix for quick local runs.

mod common;

use common::{assert_all_ok, env_u64, run_matrix};
use outboard_sim::{Direction, TransferConfig};

fn case(name: &str, faults: impl Fn(&mut TransferConfig) + Sync) {
    let seeds = env_u64("OUTBOARD_SIM_SEEDS", 50);
    let bytes = env_u64("OUTBOARD_SIM_MIB", 64) << 20;
    let reports = run_matrix(1..seeds + 1, |seed, cc| {
        let mut cfg = TransferConfig {
            bytes,
            seed,
            cc,
            direction: Direction::Both,
            bandwidth_mbit: 100.0,
            delay_ms: 1.0,
            ..TransferConfig::default()
        };
        faults(&mut cfg);
        cfg
    });
    assert_all_ok(name, &reports);
    for r in &reports {
        match name {
            "clean" => {
                assert_eq!(
                    r.faults.dropped
                        + r.faults.duplicated
                        + r.faults.corrupted
                        + r.faults.reordered
                        + r.faults.queue_drops,
                    0
                );
                // Nothing was lost, so nothing may be resent (no spurious RTO or fast retransmit).
                assert_eq!(r.retransmits, 0, "{}", r.summary());
            }
            "corrupt 0.1%" => {
                // Every flipped bit outside the source MAC must have been caught by a check.
                let caught: u64 = r
                    .hosts
                    .iter()
                    .map(|h| h.drops_checksum + h.drops_malformed + h.drops_not_for_us)
                    .sum();
                assert!(
                    caught * 2 >= r.faults.corrupted,
                    "{} corrupted, only {caught} caught: {}",
                    r.faults.corrupted,
                    r.summary()
                );
            }
            _ => assert!(r.faults.frames_seen > 0),
        }
    }
}

#[test]
fn matrix_clean_link_delivers_byte_exact() {
    case("clean", |_| {});
}

#[test]
fn matrix_one_percent_loss_delivers_byte_exact() {
    case("loss 1%", |c| c.loss = 0.01);
}

#[test]
fn matrix_five_percent_loss_delivers_byte_exact() {
    case("loss 5%", |c| c.loss = 0.05);
}

#[test]
fn matrix_ten_percent_reordering_with_jitter_delivers_byte_exact() {
    case("reorder 10% + jitter", |c| {
        c.reorder = 0.10;
        c.reorder_delay_ms = 1.0;
        c.jitter_ms = 0.2;
    });
}

#[test]
fn matrix_one_percent_duplication_delivers_byte_exact() {
    case("duplicate 1%", |c| c.duplicate = 0.01);
}

#[test]
fn matrix_corruption_is_caught_and_repaired() {
    case("corrupt 0.1%", |c| c.corrupt = 0.001);
}

#[test]
fn matrix_all_faults_at_once_deliver_byte_exact() {
    case("all faults", |c| {
        c.loss = 0.01;
        c.duplicate = 0.01;
        c.reorder = 0.10;
        c.reorder_delay_ms = 1.0;
        c.jitter_ms = 0.2;
        c.corrupt = 0.001;
    });
}
