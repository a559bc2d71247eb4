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

/// Runs `op` for [`WARM`] (caches, branch predictors, and whatever its first
/// call sets up) and returns how many calls take about [`BATCH`]. Counting
/// over the whole warm-up, not timing doubling batches, keeps one slow call
/// (the first, or one the scheduler interrupted) from leaving the batch at a
/// single call, which would time the clock more than the operation.
fn calibrate(dst: &mut [u8], op: &mut impl FnMut(&mut [u8])) -> u64 {
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < WARM {
        op(dst);
        calls += 1;
    }
    (calls * BATCH.as_nanos() as u64 / WARM.as_nanos() as u64).max(1)
}

/// How long each operation runs untimed before its batches.
const WARM: Duration = Duration::from_millis(2);

/// How long one timed batch runs: far below a scheduler time slice, so that on
/// a shared, loaded machine most batches run undisturbed, and long enough that
/// reading the clock is noise.
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

const PAGE: usize = 4096;

/// Places `size`-byte `src` and `dst` in `buf` (at least `2 * size + 3 * PAGE`
/// bytes) at a fixed layout: both 64-byte aligned, `dst` half a page past
/// `src` modulo 4 KiB. Left to the allocator, the layout changed with the
/// command line (its allocations come first), and with it the results:
/// when `dst` sits a little before or after `src` modulo 4 KiB, loads are
/// held behind earlier stores to the "same" address (4K aliasing), within a
/// call or from the previous one, which made either `memcpy` or the fused
/// copy up to 1.5-2.5x slower at 1500 B depending on the run. Half a page
/// apart, no load within 2 KiB of a recent store aliases it.
fn place(buf: &mut [u8], size: usize) -> (&mut [u8], &mut [u8]) {
    let at = buf.as_ptr() as usize;
    let s0 = (PAGE - at % PAGE) % PAGE;
    let d0 = s0 + size.div_ceil(PAGE) * PAGE + PAGE / 2;
    let (a, b) = buf.split_at_mut(d0);
    (&mut a[s0..s0 + size], &mut b[..size])
}

pub fn run(budget_per_case: Duration) -> Report {
    let mut rows = Vec::new();
    for &size in &SIZES {
        let mut buf = vec![0u8; 2 * size + 3 * PAGE];
        let (src, dst) = place(&mut buf, size);
        // Deterministic, non-trivial contents so nothing is special-cased.
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
        }
        let src = &*src;
        let [memcpy, sum, fused] = rates(
            size,
            budget_per_case,
            dst,
            |dst| {
                dst.copy_from_slice(black_box(src));
                black_box(dst);
            },
            |_| {
                black_box(checksum::checksum(black_box(src)));
            },
            |dst| {
                black_box(checksum::copy_and_checksum(dst, black_box(src)));
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
