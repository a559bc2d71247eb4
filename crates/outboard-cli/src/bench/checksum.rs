//! `outboard bench checksum`: the Internet checksum alone and fused with the
//! data path's copy, against a plain memcpy of the same buffers in the same run
//! (Gigabit Nectar: checksum and data movement are the two per-byte costs).
//! The three take turns in short batches on the same warm buffers, and each
//! reports its fastest batch (see [`rates`]).

// A benchmark is the imperative shell: it reads the wall clock to measure, nothing below it does.
#![allow(clippy::disallowed_methods)]

use outboard_wire::checksum;
use serde::Serialize;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Buffer sizes measured: a small packet, a full Ethernet payload, a TSO-sized segment, a large write.
pub const SIZES: [usize; 4] = [64, 1500, 64 * 1024, 1024 * 1024];

#[derive(Debug, Serialize)]
pub struct Row {
    pub size: usize,
    pub memcpy_gbps: f64,
    pub checksum_gbps: f64,
    pub copy_checksum_gbps: f64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
}

/// One batch of `calls` calls of `op`, in nanoseconds per call.
#[inline(always)]
fn per_call(calls: u64, dst: &mut [u8], op: &mut impl FnMut(&mut [u8])) -> f64 {
    let t = Instant::now();
    for _ in 0..calls {
        op(dst);
    }
    t.elapsed().as_nanos() as f64 / calls as f64
}

/// The number of calls of `op` that takes about [`BATCH`].
fn calibrate(dst: &mut [u8], op: &mut impl FnMut(&mut [u8])) -> u64 {
    let mut calls = 1u64;
    while calls < 1 << 24 && per_call(calls, dst, op) * (calls as f64) < BATCH.as_nanos() as f64 {
        calls *= 2;
    }
    calls
}

/// How long one timed batch runs: far below a scheduler time slice, so that on
/// a shared, loaded machine most batches run undisturbed.
const BATCH: Duration = Duration::from_micros(20);

/// Times the three operations on the same buffers, taking turns batch by batch
/// for `3 * budget` in all, so that all three see the same machine (clock,
/// neighbours, caches: `src` and `dst` stay warm for each). Returns each one's
/// bytes per second in its fastest batch: the least disturbed, on a machine
/// whose other load only ever adds time.
fn rates(
    size: usize,
    budget: Duration,
    dst: &mut [u8],
    mut a: impl FnMut(&mut [u8]),
    mut b: impl FnMut(&mut [u8]),
    mut c: impl FnMut(&mut [u8]),
) -> [f64; 3] {
    // Calibrating also warms caches and branch predictors.
    let calls = [calibrate(dst, &mut a), calibrate(dst, &mut b), calibrate(dst, &mut c)];
    let mut best = [f64::INFINITY; 3];
    let start = Instant::now();
    while start.elapsed() < budget * 3 {
        best[0] = best[0].min(per_call(calls[0], dst, &mut a));
        best[1] = best[1].min(per_call(calls[1], dst, &mut b));
        best[2] = best[2].min(per_call(calls[2], dst, &mut c));
    }
    best.map(|ns| size as f64 / ns * 1e9)
}

pub fn run(budget_per_case: Duration) -> Report {
    let mut rows = Vec::new();
    for &size in &SIZES {
        // Deterministic, non-trivial contents so nothing is special-cased.
        let src: Vec<u8> = (0..size).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3]).collect();
        let mut dst = vec![0u8; size];
        let [memcpy, sum, fused] = rates(
            size,
            budget_per_case,
            &mut dst,
            |dst| {
                dst.copy_from_slice(black_box(&src));
                black_box(dst);
            },
            |_| {
                black_box(checksum::checksum(black_box(&src)));
            },
            |dst| {
                black_box(checksum::copy_and_checksum(dst, black_box(&src)));
                black_box(dst);
            },
        );
        rows.push(Row {
            size,
            memcpy_gbps: memcpy * 8.0 / 1e9,
            checksum_gbps: sum * 8.0 / 1e9,
            copy_checksum_gbps: fused * 8.0 / 1e9,
        });
    }
    Report { rows }
}

pub fn print_table(r: &Report) {
    println!("{:>9}  {:>12}  {:>13}  {:>18}  {:>16}", "size", "memcpy Gb/s", "checksum Gb/s", "copy+checksum Gb/s", "fused / memcpy");
    for row in &r.rows {
        println!(
            "{:>9}  {:>12.1}  {:>13.1}  {:>18.1}  {:>15.2}x",
            human_size(row.size),
            row.memcpy_gbps,
            row.checksum_gbps,
            row.copy_checksum_gbps,
            row.copy_checksum_gbps / row.memcpy_gbps
        );
    }
}

pub fn human_size(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}
