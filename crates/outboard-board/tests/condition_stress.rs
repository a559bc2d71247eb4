//! Futex sleep and wake between threads: no lost wake-up.
#![allow(clippy::disallowed_methods)] // Stress tests are bounded by the real clock.

mod common;

use common::{ping_pong, wait_past};
use outboard_board::{Condition, Mapping};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn conditions_ping_pong_between_threads_without_spinning() {
    const ROUNDS: u32 = 20_000;
    let map = Arc::new(Mapping::anonymous_shared(4096).unwrap());
    let (ping, pong) = (Condition::new(map.clone(), 0), Condition::new(map.clone(), 64));
    // A lost wake-up shows as a stall: fail at the deadline instead of hanging.
    let deadline = Instant::now() + Duration::from_secs(5);
    let t = {
        let (ping, pong) = (ping.clone(), pong.clone());
        std::thread::spawn(move || ping_pong(&pong, &ping, false, ROUNDS, deadline))
    };
    let mine = ping_pong(&ping, &pong, true, ROUNDS, deadline).unwrap();
    let theirs = t.join().unwrap().unwrap();
    eprintln!("futex wakes: {mine} + {theirs} of {} signals", 2 * ROUNDS);
    assert_eq!((ping.current(), pong.current()), (ROUNDS, ROUNDS));
    assert!(mine + theirs > 0, "nobody ever slept: the futex path went untested");
    assert_eq!((ping.waiters(), pong.waiters()), (0, 0));
}

#[test]
fn many_sleepers_all_wake_on_one_signal() {
    let map = Arc::new(Mapping::anonymous_shared(4096).unwrap());
    let c = Condition::new(map, 0);
    let deadline = Instant::now() + Duration::from_secs(3);
    let sleepers: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || wait_past(&c, 0, deadline))
        })
        .collect();
    while c.waiters() < 4 {
        assert!(Instant::now() < deadline, "sleepers never announced themselves");
        std::thread::yield_now();
    }
    assert!(c.signal());
    for s in sleepers {
        assert_eq!(s.join().unwrap(), Ok(()));
    }
}
