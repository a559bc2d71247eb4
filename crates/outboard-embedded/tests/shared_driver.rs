#![allow(clippy::disallowed_methods)] // wall-clock bounds in a test
//! The engine shared by its own thread and the application's threads
//! (`EmbeddedEngine::start_shared`, the socket shim's in-process engine),
//! on a shared-memory fabric, no root.

#[allow(dead_code)] // shared with the other tests
mod common;

use outboard_embedded::EmbeddedEngine;
use std::time::{Duration, Instant};

/// An application thread that drives (`SharedDriver::enter`) while the
/// engine thread sleeps holding the engine sees that (`engine_thread_sleeps`)
/// and, waking it (`wake_engine_thread`, as the shim's spin does after a
/// few tries), gets the engine's turns at once: the sleeper stands aside.
/// Without the wake, every turn of the driver found the engine taken until
/// a frame or a deadline woke the sleeper: on an idle engine up to its
/// longest sleep (100 ms). A server's worker whose wait came after the
/// engine thread had taken over then spun its whole spin for nothing.
#[test]
fn a_driver_gets_the_turns_of_an_engine_thread_asleep() {
    let fabric = format!("fabric:sd-{}", std::process::id());
    let e = EmbeddedEngine::start_shared(common::settings(&fabric, "sd-a", 1), || {}).expect("engine starts");
    let d = e.driver().expect("a shared engine has a driver");
    let mut waits = Vec::new();
    for _ in 0..8 {
        // Hand the engine back (as a waiter that sleeps in the kernel):
        // the engine thread takes over, finds nothing to do and sleeps.
        assert!(d.enter(), "no other thread drives");
        d.leave(true);
        std::thread::sleep(Duration::from_millis(10));
        let t0 = Instant::now();
        assert!(d.enter(), "no other thread drives");
        assert!(d.try_turn().is_none(), "the engine thread sleeps holding the engine");
        assert!(d.engine_thread_sleeps(), "and says so");
        d.wake_engine_thread();
        let turned = loop {
            match d.try_turn() {
                Some(r) => break r.is_ok(),
                None if t0.elapsed() > Duration::from_secs(5) => break false,
                None => std::hint::spin_loop(),
            }
        };
        waits.push(t0.elapsed());
        assert!(!d.engine_thread_sleeps(), "the engine thread let the engine go");
        d.leave(false);
        assert!(turned, "the driver never got a turn");
    }
    waits.sort();
    // The engine thread's sleep is 100 ms here (no deadline sooner), 10 ms
    // of it gone: a driver left to wait for it waits about 90 ms each time.
    assert!(waits[waits.len() - 2] < Duration::from_millis(30), "waits for the engine's first turn: {waits:?}");
    e.stop();
}
