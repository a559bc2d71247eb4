//! Samples the sender's cwnd every millisecond of a Mathis-style run (diagnostics).
use outboard_sim::{run_transfer_with, TransferConfig};
use outboard_tcp::CcKind;

fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let cfg = TransferConfig {
        bytes: 16 << 20,
        seed,
        cc: CcKind::NewReno,
        loss: 0.01,
        delay_ms: 5.0,
        send_buffer: 1 << 20,
        recv_buffer: 1 << 20,
        reverse_faults: false,
        progress_interval_ms: 1,
        ..TransferConfig::default()
    };
    let (mut n, mut sum) = (0u64, 0u64);
    let mut hist = [0u64; 40];
    let r = run_transfer_with(&cfg, &mut |p| {
        n += 1;
        sum += p.cwnd[0] as u64;
        hist[(p.cwnd[0] / 1448).min(39)] += 1;
    });
    println!("{}", r.summary());
    println!(
        "mean cwnd {:.2} segments over {n} samples",
        sum as f64 / n as f64 / 1448.0
    );
    println!("{hist:?}");
}
