//! Cancel races: the engine completes while the application cancels.
//! Exactly one wins, and the slot always ends free.

use outboard_board::sync::{CancelOutcome, CompleteError};
use outboard_board::{Mapping, SyncState, SyncTable};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const ITERATIONS: u32 = 20_000;
const LIMIT: Duration = Duration::from_secs(3);

fn table(count: u32) -> SyncTable {
    SyncTable::new(Arc::new(Mapping::anonymous_shared(4096).unwrap()), 0, count)
}

#[test]
fn complete_and_cancel_race_with_one_winner() {
    let t = table(8);
    let go = Arc::new(Barrier::new(2));
    let done = Arc::new(Barrier::new(2));
    let stop = Arc::new(AtomicBool::new(false));
    let engine = {
        let (t, go, done, stop) = (t.clone(), go.clone(), done.clone(), stop.clone());
        std::thread::spawn(move || {
            // (completed, cancelled-and-released) counts.
            let mut wins = (0u32, 0u32);
            for i in 0.. {
                go.wait();
                if stop.load(Ordering::SeqCst) {
                    return wins;
                }
                let slot = i % t.count();
                match t.complete(slot, i64::from(i)) {
                    Ok(()) => wins.0 += 1,
                    Err(CompleteError::Cancelled) => {
                        // The engine undoes its work, then frees the slot.
                        assert!(t.release_cancelled(slot), "iteration {i}");
                        wins.1 += 1;
                    }
                    Err(e) => panic!("iteration {i}: {e:?}"),
                }
                done.wait();
            }
            unreachable!()
        })
    };
    let start = Instant::now();
    let mut wins = (0u32, 0u32);
    for i in 0..ITERATIONS {
        if start.elapsed() > LIMIT {
            break;
        }
        let slot = i % t.count();
        assert!(t.arm(slot), "iteration {i}: slot not freed by the previous use");
        go.wait();
        match t.cancel(slot) {
            CancelOutcome::AlreadyDone(v) => {
                assert_eq!(v, i64::from(i), "the value of this iteration, taken once");
                wins.0 += 1;
            }
            CancelOutcome::Cancelled => wins.1 += 1,
            CancelOutcome::NotPending => panic!("iteration {i}: armed slot not pending"),
        }
        done.wait();
        assert_eq!(t.state(slot), Some(SyncState::Free), "iteration {i}");
        assert_eq!(t.take(slot), None, "nothing left to take");
    }
    stop.store(true, Ordering::SeqCst);
    go.wait();
    let engine_wins = engine.join().unwrap();
    assert_eq!(engine_wins, wins, "both sides agree on every outcome");
    eprintln!("completed first: {}, cancelled first: {}", wins.0, wins.1);
}

#[test]
fn two_takers_get_the_value_once() {
    let t = table(1);
    let start = Instant::now();
    for i in 0..ITERATIONS / 4 {
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
