//! Goodput under random loss must reach the Mathis et al. (1997) bound
//! MSS/RTT · 1.22/√p at 100 Mbit/s, 10 ms RTT, 1 % loss.
//!
//! As in the model, only data segments are lost (the ACK path is clean), and
//! the bound is on long-run goodput: the mean over eight seeds of 32 MiB
//! each, per congestion controller. Each run is printed beside the bound.

use outboard_sim::{run_transfer, TransferConfig};
use outboard_tcp::CcKind;

#[test]
fn mathis_goodput_bound_holds_at_one_percent_loss() {
    let (mss, rtt_s, p) = (1460.0f64, 0.010f64, 0.01f64);
    let bound_mbit = mss * 8.0 / rtt_s * 1.22 / p.sqrt() / 1e6;
    for cc in [CcKind::NewReno, CcKind::Cubic] {
        let mut goodputs = Vec::new();
        for seed in 1..=8 {
            let cfg = TransferConfig {
                bytes: 32 << 20,
                seed,
                cc,
                loss: p,
                reverse_faults: false,
                delay_ms: rtt_s * 1e3 / 2.0,
                bandwidth_mbit: 100.0,
                // More than 100 Mbit/s × 10 ms, so neither window is the limit.
                send_buffer: 1 << 20,
                recv_buffer: 1 << 20,
                queue_bytes: 512 * 1024,
                ..TransferConfig::default()
            };
            let r = run_transfer(&cfg);
            eprintln!(
                "mathis {cc:?} seed {seed}: goodput {:.2} Mbit/s, bound {bound_mbit:.2} Mbit/s",
                r.goodput_mbit
            );
            assert!(r.ok, "{}", r.summary());
            goodputs.push(r.goodput_mbit);
        }
        let mean = goodputs.iter().sum::<f64>() / goodputs.len() as f64;
        eprintln!("mathis {cc:?}: mean goodput {mean:.2} Mbit/s, bound {bound_mbit:.2} Mbit/s");
        assert!(mean >= bound_mbit, "{cc:?}: mean goodput {mean:.2} Mbit/s < Mathis bound {bound_mbit:.2} Mbit/s ({goodputs:.2?})");
    }
}
