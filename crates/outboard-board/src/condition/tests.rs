#![allow(clippy::disallowed_methods)] // Tests of real sleeps measure the real clock.

use super::*;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

fn cond() -> Condition {
    let map = Arc::new(Mapping::anonymous_shared(4096).unwrap());
    Condition::new(map, 192)
}

const LONG: Duration = Duration::from_secs(3);

#[test]
fn signal_with_no_sleeper_stays_out_of_the_kernel() {
    let c = cond();
    assert_eq!(c.current(), 0);
    assert!(!c.signal());
    assert_eq!(c.current(), 1);
    assert_eq!(c.waiters(), 0);
}

#[test]
fn a_moved_word_returns_at_once() {
    let c = cond();
    c.signal();
    let t = Instant::now();
    assert_eq!(c.wait(0, Duration::ZERO, LONG), WaitOutcome::Signalled);
    assert_eq!(c.wait(0, Duration::from_millis(1), LONG), WaitOutcome::Signalled);
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn wait_times_out() {
    let c = cond();
    for (spin, timeout) in [(0, 30), (5, 30), (50, 30), (0, 0)] {
        let t = Instant::now();
        let r = c.wait(0, Duration::from_millis(spin), Duration::from_millis(timeout));
        assert_eq!(r, WaitOutcome::TimedOut);
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(timeout), "{took:?}");
        assert!(took < Duration::from_millis(timeout + 1000), "{took:?}");
    }
    assert_eq!(c.waiters(), 0, "every sleeper un-announced itself");
}

#[test]
fn a_sleeper_is_announced_and_woken() {
    let c = cond();
    let c2 = c.clone();
    let t = std::thread::spawn(move || c2.wait(0, Duration::ZERO, Duration::MAX));
    let deadline = Instant::now() + LONG;
    while c.waiters() == 0 {
        assert!(Instant::now() < deadline, "the waiter never announced itself");
        std::thread::yield_now();
    }
    assert!(c.signal(), "someone sleeps: the kernel is called");
    assert_eq!(t.join().unwrap(), WaitOutcome::Signalled);
    assert_eq!(c.waiters(), 0);
}

extern "C" fn nothing(_: libc::c_int) {}

#[test]
fn a_signal_handler_interrupts_the_sleep() {
    // SAFETY: installs a handler that does nothing, for SIGUSR1 only (no
    // other test uses it); `sa` is fully initialised.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    let c = cond();
    let c2 = c.clone();
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let t = std::thread::spawn(move || {
        let r = c2.wait(0, Duration::ZERO, LONG);
        done2.store(true, Ordering::SeqCst);
        r
    });
    let thread = std::os::unix::thread::JoinHandleExt::as_pthread_t(&t);
    // Keep poking until the wait returns: a signal that lands before the
    // futex call is simply handled, the next one interrupts the sleep.
    while !done.load(Ordering::SeqCst) {
        // SAFETY: the thread has not been joined, so its id is valid.
        unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(t.join().unwrap(), WaitOutcome::Interrupted);
    assert_eq!(c.waiters(), 0);
}

#[test]
#[should_panic(expected = "out of bounds")]
fn a_condition_outside_the_mapping_is_refused() {
    let map = Arc::new(Mapping::anonymous_shared(4096).unwrap());
    Condition::new(map, 4092);
}
