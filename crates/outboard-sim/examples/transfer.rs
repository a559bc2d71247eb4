//! One transfer from the command line, for timing and for replaying a seed:
//! `cargo run --release -p outboard-sim --example transfer -- [MiB] [seed] [loss] [both] [cubic]`
//! Prints the JSON report and the wall-clock time (kept out of the report).
//! Environment: DELAY_MS (one-way delay), BUF (socket buffers), BW_MBIT, QUEUE (bytes),
//! REVERSE_CLEAN (no faults on b->a).

// Measuring the simulator's own speed is the one place a wall clock belongs.
#![allow(clippy::disallowed_methods)]

use outboard_sim::{run_transfer, Direction, TransferConfig};
use outboard_tcp::CcKind;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let cfg = TransferConfig {
        bytes: arg(0).and_then(|v| v.parse::<u64>().ok()).unwrap_or(64) << 20,
        seed: arg(1).and_then(|v| v.parse().ok()).unwrap_or(1),
        loss: arg(2).and_then(|v| v.parse().ok()).unwrap_or(0.0),
        direction: if arg(3) == Some("both") {
            Direction::Both
        } else {
            Direction::One
        },
        cc: if arg(4) == Some("cubic") {
            CcKind::Cubic
        } else {
            CcKind::NewReno
        },
        ..TransferConfig::default()
    };
    let mut cfg = cfg;
    if let Ok(v) = std::env::var("DELAY_MS") {
        cfg.delay_ms = v.parse().unwrap_or(cfg.delay_ms);
    }
    cfg.reverse_faults = std::env::var("REVERSE_CLEAN").is_err();
    if let Ok(v) = std::env::var("BW_MBIT") {
        cfg.bandwidth_mbit = v.parse().unwrap_or(cfg.bandwidth_mbit);
    }
    if let Ok(v) = std::env::var("QUEUE") {
        cfg.queue_bytes = v.parse().unwrap_or(cfg.queue_bytes);
    }
    if let Ok(v) = std::env::var("BUF") {
        let b: usize = v.parse().unwrap_or(cfg.send_buffer);
        cfg.send_buffer = b;
        cfg.recv_buffer = b;
    }
    let wall = std::time::Instant::now();
    let report = run_transfer(&cfg);
    let elapsed = wall.elapsed();
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    eprintln!("{}", report.summary());
    eprintln!(
        "wall clock: {:.3} s ({} frames)",
        elapsed.as_secs_f64(),
        report.net.frames_received
    );
}
