//! Goodput under random loss must reach the Mathis et al. (1997) bound
//! MSS/RTT · 1.22/√p: 100 Mbit/s, 10 ms RTT, 1 % loss.

use outboard_sim::{run_transfer, TransferConfig};
use outboard_tcp::CcKind;

#[test]
fn mathis_goodput_bound_holds_at_one_percent_loss() {
    let (mss, rtt_s, p) = (1460.0f64, 0.010f64, 0.01f64);
    let bound_mbit = mss * 8.0 / rtt_s * 1.22 / p.sqrt() / 1e6;
    for cc in [CcKind::NewReno, CcKind::Cubic] {
        for seed in 1..=4 {
            let cfg = TransferConfig {
                bytes: 16 << 20,
                seed,
                cc,
                loss: p,
                delay_ms: rtt_s * 1e3 / 2.0,
                bandwidth_mbit: 100.0,
                // Enough window for 100 Mbit/s × 10 ms so the receiver window is not the limit.
                send_buffer: 1 << 20,
                recv_buffer: 1 << 20,
                queue_bytes: 512 * 1024,
                ..TransferConfig::default()
            };
            let r = run_transfer(&cfg);
            eprintln!("mathis {cc:?} seed {seed}: goodput {:.2} Mbit/s, bound {bound_mbit:.2} Mbit/s", r.goodput_mbit);
            assert!(r.ok, "{}", r.summary());
            assert!(r.goodput_mbit >= bound_mbit, "goodput {:.2} < Mathis bound {bound_mbit:.2}: {}", r.goodput_mbit, r.summary());
        }
    }
}
