//! Cancel races: the engine completes while the application cancels.
//! Exactly one wins, and the slot always ends free.
#![allow(clippy::disallowed_methods)] // Stress tests are bounded by the real clock.

use outboard_board::sync::{CancelOutcome, CompleteError};
use outboard_board::{Mapping, SyncState, SyncTable};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ITERATIONS: u32 = 20_000;
const LIMIT: Duration = Duration::from_secs(2);

fn table(count: u32) -> SyncTable {
    SyncTable::new(Arc::new(Mapping::anonymous_shared(4096).unwrap()), 0, count)
}

/// Spins until `word` reaches `want` (yielding now and then: two cores).
fn spin_until(word: &AtomicU32, want: u32) {
    let mut n = 0u32;
    while word.load(Ordering::Acquire) != want {
        n = n.wrapping_add(1);
        if n.is_multiple_of(1024) {
            std::thread::yield_now();
        }
        std::hint::spin_loop();
    }
}

/// A few spins of pseudo-random length, so either side may go first and
/// the two often overlap.
fn jitter(x: &mut u32) {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    for _ in 0..*x % 64 {
        std::hint::spin_loop();
    }
}

#[test]
fn complete_and_cancel_race_with_one_winner() {
    let t = table(8);
    // `go` = i + 1 starts iteration i; `ack` = i + 1 when the engine is done
    // with it; `go` = u32::MAX stops. Spinning (not a Barrier) makes the two
    // sides start within nanoseconds of each other.
    let go = Arc::new(AtomicU32::new(0));
    let ack = Arc::new(AtomicU32::new(0));
    // What the engine's completion found this iteration (before `ack`).
    let completed = Arc::new(AtomicBool::new(false));
    let engine = {
        let (t, go, ack, completed) = (t.clone(), go.clone(), ack.clone(), completed.clone());
        std::thread::spawn(move || {
            // (completed, cancelled-and-released) counts.
            let mut wins = (0u32, 0u32);
            let mut x = 0x1234_5678;
            for i in 0.. {
                let mut n = 0u32;
                let g = loop {
                    let g = go.load(Ordering::Acquire);
                    if g == i + 1 || g == u32::MAX {
                        break g;
                    }
                    n = n.wrapping_add(1);
                    if n.is_multiple_of(1024) {
                        std::thread::yield_now();
                    }
                    std::hint::spin_loop();
                };
                if g == u32::MAX {
                    return wins;
                }
                jitter(&mut x);
                let slot = i % t.count();
                let r = t.complete(slot, i64::from(i));
                completed.store(r.is_ok(), Ordering::Relaxed);
                match r {
                    Ok(()) => wins.0 += 1,
                    Err(CompleteError::Cancelled) => {
                        // The engine undoes its work, then frees the slot.
                        assert!(t.release_cancelled(slot), "iteration {i}");
                        wins.1 += 1;
                    }
                    Err(e) => panic!("iteration {i}: {e:?}"),
                }
                ack.store(i + 1, Ordering::Release);
            }
            unreachable!()
        })
    };
    let start = Instant::now();
    let mut wins = (0u32, 0u32);
    let mut x = 0x9abc_def1;
    for i in 0..ITERATIONS {
        if start.elapsed() > LIMIT {
            break;
        }
        let slot = i % t.count();
        assert!(t.arm(slot), "iteration {i}: slot not freed by the previous use");
        go.store(i + 1, Ordering::Release);
        jitter(&mut x);
        let cancel = t.cancel(slot);
        spin_until(&ack, i + 1);
        // Exactly one winner, seen the same way by both sides.
        match (cancel, completed.load(Ordering::Relaxed)) {
            (CancelOutcome::AlreadyDone(v), true) => {
                assert_eq!(v, i64::from(i), "the value of this iteration, taken once");
                wins.0 += 1;
            }
            (CancelOutcome::Cancelled, false) => wins.1 += 1,
            other => panic!("iteration {i}: cancel and completion disagree: {other:?}"),
        }
        assert_eq!(t.state(slot), Some(SyncState::Free), "iteration {i}");
        assert_eq!(t.take(slot), None, "nothing left to take");
    }
    go.store(u32::MAX, Ordering::Release);
    let engine_wins = engine.join().unwrap();
    assert_eq!(engine_wins, wins, "both sides agree on every outcome");
    eprintln!("completed first: {}, cancelled first: {}", wins.0, wins.1);
}

#[test]
fn two_takers_get_the_value_once() {
    let t = table(1);
    let start = Instant::now();
    for i in 0..ITERATIONS / 10 {
        if start.elapsed() > LIMIT {
            break;
        }
        assert!(t.arm(0));
        t.complete(0, i64::from(i)).unwrap();
        // One takes, the other cancels (which also takes): exactly one gets it.
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| t.take(0));
            let b = s.spawn(|| t.cancel(0));
            (a.join().unwrap(), b.join().unwrap())
        });
        match (a, b) {
            (Some(v), CancelOutcome::NotPending) | (None, CancelOutcome::AlreadyDone(v)) => {
                assert_eq!(v, i64::from(i))
            }
            other => panic!("iteration {i}: {other:?}"),
        }
        assert_eq!(t.state(0), Some(SyncState::Free));
    }
}
