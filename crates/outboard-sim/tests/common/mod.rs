//! Shared helpers of the simulator's integration tests.
#![allow(dead_code)]

use outboard_sim::{run_transfer, TransferConfig, TransferReport};
use outboard_tcp::CcKind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A numeric knob from the environment, for quick local runs (the defaults are what CI runs).
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `make(seed, cc)` for every seed in `seeds` and both controllers,
/// spread over all cores, and returns the reports in (cc, seed) order.
pub fn run_matrix(
    seeds: std::ops::Range<u64>,
    make: impl Fn(u64, CcKind) -> TransferConfig + Sync,
) -> Vec<TransferReport> {
    let jobs: Vec<(u64, CcKind)> = [CcKind::NewReno, CcKind::Cubic]
        .into_iter()
        .flat_map(|cc| seeds.clone().map(move |s| (s, cc)))
        .collect();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(vec![None; jobs.len()]);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(seed, cc)) = jobs.get(i) else {
                    break;
                };
                let report = run_transfer(&make(seed, cc));
                results.lock().unwrap()[i] = Some(report);
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// Asserts every report is a byte-exact, hash-checked success; lists every failing seed.
pub fn assert_all_ok(case: &str, reports: &[TransferReport]) {
    let failed: Vec<String> = reports
        .iter()
        .filter(|r| !r.ok || !r.sha256_match)
        .map(|r| r.summary())
        .collect();
    let t: f64 =
        reports.iter().map(|r| r.virtual_seconds).sum::<f64>() / reports.len().max(1) as f64;
    let rtx: u64 = reports.iter().map(|r| r.retransmits).sum();
    eprintln!(
        "{case}: {} runs, {} failed, mean virtual time {t:.2}s, retransmits {rtx}",
        reports.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{case}: {} of {} runs failed:\n{}",
        failed.len(),
        reports.len(),
        failed.join("\n")
    );
    for r in reports {
        assert_eq!(
            r.bytes_delivered,
            r.bytes * r.directions.len() as u64,
            "{}",
            r.summary()
        );
        assert!(r.first_bad_offset.is_none());
        assert!(
            r.closed_at_s.is_some(),
            "both ends must finish the close handshake: {}",
            r.summary()
        );
    }
}
