//! The link goes down mid-transfer and comes back: the sender must back off
//! its retransmission timer (RFC 6298 §5.5), keep the connection, and finish
//! once the link returns.

use outboard_sim::{run_transfer, Direction, TransferConfig};
use outboard_tcp::CcKind;

#[test]
fn transfer_survives_a_ten_second_outage() {
    for cc in [CcKind::NewReno, CcKind::Cubic] {
        let cfg = TransferConfig {
            bytes: 8 << 20,
            cc,
            direction: Direction::Both,
            outage_at_s: 0.3,
            outage_s: 10.0,
            loss: 0.01,
            ..TransferConfig::default()
        };
        let r = run_transfer(&cfg);
        eprintln!(
            "outage {cc:?}: finished at {:.2} s, {} frames lost to the outage",
            r.virtual_seconds, r.faults.outage_drops
        );
        assert!(r.ok, "{}", r.summary());
        assert!(r.faults.outage_drops > 0);
        assert!(
            r.virtual_seconds > 10.3,
            "finished at {} s, during the outage?",
            r.virtual_seconds
        );
        // Exponential backoff: a handful of timeouts, not one per min-RTO.
        let rtos: u64 = r.directions.iter().map(|d| d.sender.rto_events).sum();
        eprintln!("outage {cc:?}: {rtos} RTO events");
        assert!(
            (2..=30).contains(&rtos),
            "{rtos} RTOs for one 10 s outage: {}",
            r.summary()
        );
        // The first retransmission after the link returns comes within one backed-off RTO.
        assert!(
            r.virtual_seconds < 10.3 + 25.0,
            "took {} s to recover",
            r.virtual_seconds
        );
    }
}
