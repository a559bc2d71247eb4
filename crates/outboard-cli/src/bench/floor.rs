//! The machine's floor for a round trip between two cores: one cache line
//! passed back and forth between two threads pinned to two different CPUs,
//! nothing else. Any round trip between two applications on two cores
//! (ours, the kernel's) moves at least this much: a request's news must
//! reach the other core and the response's news come back. `bench latency`
//! prints it beside its rows, so a ratio goal can be judged against what
//! the machine allows (0.11 to 0.13 µs on the 2-vCPU development VM).
//!
//! Method: thread A writes `i` into the line and spins until thread B has
//! answered `i` in the same line; B spins for `i` and answers. Each thread
//! is pinned to one of the first two CPUs this process may use. A warm-up
//! of `WARMUP` round trips, then up to `ROUND_TRIPS` timed as batches of
//! `BATCH`; the reported figure is the median batch's mean (a preempted
//! batch, frequent on a shared VM, does not move it).
//!
//! Short and bounded, because two pinned spinning threads take both cores
//! of a small machine from whatever else runs there (other benchmarks, a
//! test suite): about 6 ms on an idle 2-vCPU VM (20 ms for the board
//! rings' round trip, `board_ring_round_trip`, measured the same way), and
//! never more than `LIMIT` each, warm-up included. The pinger looks at the clock every
//! `CLOCK_EVERY` polls of an answer, not at each (a clock read costs a
//! sixth of the round trip it measures). A busy machine, where the two
//! threads rarely run at once, gives up at `LIMIT` with fewer than
//! `MIN_BATCHES` batches: None, not a figure that measures the scheduler.
//! None too when fewer than two CPUs are allowed or a pin fails.

// A benchmark is the imperative shell: it reads the wall clock to measure.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUND_TRIPS: u64 = 50_000;
const WARMUP: u64 = 1_000;
const BATCH: u64 = 1_000;
const MIN_BATCHES: usize = 5;
const LIMIT: Duration = Duration::from_millis(100);
const CLOCK_EVERY: u32 = 1024;

/// The line both threads write, alone in its 64 bytes.
#[repr(align(64))]
struct Line(AtomicU64);

/// The median round trip of one cache line between two pinned cores, in
/// µs, and the two CPUs used; None where it cannot be measured. Both
/// threads are new ones, so the caller's affinity is left as it was.
pub fn cache_line_round_trip() -> Option<(f64, [usize; 2])> {
    cache_line_round_trip_within(LIMIT)
}

/// As [`cache_line_round_trip`], giving up after `limit` instead of `LIMIT`.
pub fn cache_line_round_trip_within(limit: Duration) -> Option<(f64, [usize; 2])> {
    let line = Arc::new(Line(AtomicU64::new(0)));
    let l2 = line.clone();
    let echo = move || {
        let v = l2.0.load(Ordering::Acquire);
        // Odd: a ping not yet answered (the answer, the next even number,
        // stays in the line until the next ping).
        if v & 1 == 1 {
            l2.0.store(v + 1, Ordering::Release);
            return true;
        }
        false
    };
    let mut v = 0u64;
    let ping = move |send: bool| {
        if send {
            v += 1;
            line.0.store(v, Ordering::Release);
            v += 1;
            return true;
        }
        line.0.load(Ordering::Acquire) == v
    };
    pinned_round_trip(limit, echo, ping)
}

/// The median round trip of a 64-byte command through two board rings
/// (`outboard_board::ring`, one each way) between the same two pinned
/// cores, in µs: what an application and an engine on two cores pay, at
/// the least, to hand a request over and get an answer back. Beside the
/// cache line's round trip it shows what the rings' own protocol costs
/// (their index and record lines). None where it cannot be measured.
pub fn board_ring_round_trip() -> Option<(f64, [usize; 2])> {
    use outboard_board::proto::Command;
    use outboard_board::ring::{ring_bytes, Consumer, Producer};
    const CAPACITY: u32 = 256;
    let bytes = ring_bytes::<Command>(CAPACITY);
    let map = Arc::new(outboard_board::shm::Mapping::anonymous_shared(2 * bytes).ok()?);
    let (mut asks, mut answers) = (Producer::<Command>::new(map.clone(), 0, CAPACITY), Consumer::<Command>::new(map.clone(), bytes, CAPACITY));
    let (mut takes, mut gives) = (Consumer::<Command>::new(map.clone(), 0, CAPACITY), Producer::<Command>::new(map, bytes, CAPACITY));
    let echo = move || {
        // A ring error (none is possible here: no one else writes them)
        // leaves the ping unanswered; the pinger then gives up at its limit.
        let Ok(Some(c)) = takes.get() else { return false };
        let _ = gives.put(c);
        true
    };
    let mut i = 0u64;
    let ping = move |send: bool| {
        if send {
            i += 1;
            return asks.put(Command { op: 1, a: i, ..Command::default() }).unwrap_or(false);
        }
        matches!(answers.get(), Ok(Some(_)))
    };
    pinned_round_trip(LIMIT, echo, ping)
}

/// Runs `echo` (one poll: answer a ping if one is there, true if it did) on one pinned
/// thread and `ping` (`ping(true)` sends the next ping, false when it
/// cannot; `ping(false)` polls once for its answer) on another, and returns
/// the median batch's mean round trip in µs and the two CPUs.
fn pinned_round_trip(
    limit: Duration,
    mut echo: impl FnMut() -> bool + Send + 'static,
    mut ping: impl FnMut(bool) -> bool + Send + 'static,
) -> Option<(f64, [usize; 2])> {
    let cpus = outboard_engine::cpu::allowed();
    let (a, b) = (*cpus.first()?, *cpus.get(1)?);
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let echo = std::thread::spawn(move || -> bool {
        if outboard_engine::cpu::pin_current_thread(b).is_err() {
            s2.store(true, Ordering::Relaxed);
            return false;
        }
        while !s2.load(Ordering::Relaxed) {
            if !echo() {
                std::hint::spin_loop();
            }
        }
        true
    });
    let s3 = stop.clone();
    let pinger = std::thread::spawn(move || -> Vec<f64> {
        let mut batches = Vec::new();
        if outboard_engine::cpu::pin_current_thread(a).is_err() {
            return batches;
        }
        let deadline = Instant::now() + limit;
        let mut round_trips = |n: u64| -> bool {
            for _ in 0..n {
                if !ping(true) {
                    return false;
                }
                let mut polls = 0u32;
                while !ping(false) {
                    polls = polls.wrapping_add(1);
                    if s3.load(Ordering::Relaxed) || (polls.is_multiple_of(CLOCK_EVERY) && Instant::now() >= deadline) {
                        return false;
                    }
                    std::hint::spin_loop();
                }
            }
            true
        };
        let mut ok = round_trips(WARMUP);
        while ok && (batches.len() as u64) < ROUND_TRIPS / BATCH && Instant::now() < deadline {
            let t = Instant::now();
            ok = round_trips(BATCH);
            if ok {
                batches.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
            }
        }
        batches
    });
    let mut batches = pinger.join().unwrap_or_default();
    stop.store(true, Ordering::Relaxed);
    let echoed = echo.join().unwrap_or(false);
    if !echoed || batches.len() < MIN_BATCHES {
        return None;
    }
    batches.sort_by(f64::total_cmp);
    Some((batches[batches.len() / 2], [a, b]))
}

/// What one futex wake-up costs the thread it wakes, in µs of that thread's
/// own CPU (`CLOCK_THREAD_CPUTIME_ID`), from a waker on its own CPU and
/// from one on another CPU (the sleeper's CPU kept busy by a spinning
/// thread meanwhile, as an engine keeps it). A blocking application beside
/// its own engine is woken the first way, one beside the other side's
/// engine the second (`bench::placement`); on the 2-vCPU development VM the
/// second costs about twelve times the first (about 18 µs against 1.5),
/// which is most of the application's CPU in `bench throughput`'s
/// crosswise placement.
#[derive(Debug, Clone, Copy, serde::Serialize, PartialEq)]
pub struct WakeCost {
    pub same_cpu_us: f64,
    pub other_cpu_us: f64,
    /// The sleeper's CPU, then the other one.
    pub cpus: [usize; 2],
}

/// Wake-ups measured per case, one every `WAKE_PERIOD`.
const WAKES: u32 = 1_000;
const WAKE_PERIOD: Duration = Duration::from_micros(50);
/// Each case gives up after this (a busy machine): None, not a figure.
const WAKE_LIMIT: Duration = Duration::from_millis(400);

/// [`WakeCost`] on the first two CPUs this process may use; None with fewer,
/// when a pin fails, or when a case saw fewer than a tenth of its wake-ups
/// within `WAKE_LIMIT`. About 0.1 s, two threads spinning meanwhile.
pub fn wake_cost() -> Option<WakeCost> {
    let cpus = outboard_engine::cpu::allowed();
    let (a, b) = (*cpus.first()?, *cpus.get(1)?);
    let same_cpu_us = woken_cpu_per_wake(a, a, None)?;
    let other_cpu_us = woken_cpu_per_wake(a, b, Some(a))?;
    Some(WakeCost { same_cpu_us, other_cpu_us, cpus: [a, b] })
}

/// A sleeper pinned to `sleeper` woken every `WAKE_PERIOD` by a spinning
/// waker pinned to `waker`, with a thread spinning on `busy` if given; the
/// sleeper's CPU per wake-up, in µs.
fn woken_cpu_per_wake(sleeper: usize, waker: usize, busy: Option<usize>) -> Option<f64> {
    use std::sync::atomic::AtomicU32;
    use outboard_board::futex;
    struct Shared {
        word: AtomicU32,
        sleeping: AtomicU32,
        stop: AtomicBool,
    }
    let sh = Arc::new(Shared { word: AtomicU32::new(0), sleeping: AtomicU32::new(0), stop: AtomicBool::new(false) });
    let spinner = busy.map(|cpu| {
        let sh = sh.clone();
        std::thread::spawn(move || {
            if outboard_engine::cpu::pin_current_thread(cpu).is_ok() {
                while !sh.stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            }
        })
    });
    let w = sh.clone();
    let waker = std::thread::spawn(move || {
        if outboard_engine::cpu::pin_current_thread(waker).is_err() {
            return;
        }
        let mut next = Instant::now();
        while !w.stop.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                next += WAKE_PERIOD;
                w.word.fetch_add(1, Ordering::SeqCst);
                if w.sleeping.load(Ordering::SeqCst) != 0 {
                    futex::wake(&w.word, 1);
                }
            }
            std::hint::spin_loop();
        }
    });
    let s = sh.clone();
    let measured = std::thread::spawn(move || -> Option<f64> {
        outboard_engine::cpu::pin_current_thread(sleeper).ok()?;
        let until = Instant::now() + WAKE_LIMIT;
        let sleep = || {
            let seen = s.word.load(Ordering::SeqCst);
            s.sleeping.fetch_add(1, Ordering::SeqCst);
            futex::wait(&s.word, seen, Some(Duration::from_millis(10)));
            s.sleeping.fetch_sub(1, Ordering::SeqCst);
        };
        // A few unmeasured, for the threads to settle on their CPUs.
        for _ in 0..20 {
            sleep();
        }
        let cpu0 = outboard_engine::clock::thread_cpu_time().as_nanos();
        let mut n = 0u32;
        while n < WAKES && Instant::now() < until {
            sleep();
            n += 1;
        }
        let used_ns = outboard_engine::clock::thread_cpu_time().as_nanos().saturating_sub(cpu0);
        (n >= WAKES / 10).then(|| used_ns as f64 / 1e3 / f64::from(n))
    });
    let r = measured.join().ok().flatten();
    sh.stop.store(true, Ordering::Relaxed);
    // The waker and the spinner only spin: both see `stop`.
    let _ = waker.join();
    if let Some(t) = spinner {
        let _ = t.join();
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With time enough for two threads to run at once even on a machine
    /// busy with the rest of the test suite (`bench latency` allows 100 ms
    /// and prints no floor when that was not enough).
    #[test]
    fn the_floor_is_measured_on_two_cpus_and_is_a_plausible_time() {
        let cpus = outboard_engine::cpu::allowed();
        match cache_line_round_trip_within(Duration::from_secs(5)) {
            Some((us, pair)) => {
                assert!(us > 0.0 && us < 1000.0, "a cache line's round trip of {us} us");
                assert_eq!(pair, [cpus[0], cpus[1]]);
            }
            None => assert!(cpus.len() < 2, "two CPUs ({cpus:?}) but no figure"),
        }
    }

    /// Both wake-up costs are measured on two CPUs and are plausible times
    /// (how they compare is the machine's: the VM's are 1.5 and 18 µs).
    #[test]
    fn a_wake_up_costs_the_woken_thread_a_plausible_time_from_either_cpu() {
        let cpus = outboard_engine::cpu::allowed();
        match wake_cost() {
            Some(w) => {
                for us in [w.same_cpu_us, w.other_cpu_us] {
                    assert!(us > 0.0 && us < 10_000.0, "{w:?}");
                }
                assert_eq!(w.cpus, [cpus[0], cpus[1]]);
            }
            None => assert!(cpus.len() < 2, "two CPUs ({cpus:?}) but no figure (a machine too busy for 100 wake-ups in 0.4 s?)"),
        }
    }
}
