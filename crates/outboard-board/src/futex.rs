//! Futex wait and wake on a word in shared memory (not `FUTEX_PRIVATE`: the
//! waiter and the waker are different processes).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FutexWait {
    /// Woken (or spuriously returned): re-check the condition.
    Woken,
    /// The word did not hold `expected`.
    Changed,
    TimedOut,
    /// A signal interrupted the wait.
    Interrupted,
}

/// Sleeps while `*word == expected`, at most `timeout` (None: forever).
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> FutexWait {
    let ts = timeout.map(|d| libc::timespec {
        // Saturate: a timeout of centuries is "forever" in practice.
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned u32 for the whole call; FUTEX_WAIT
    // only reads it. The timeout is relative (FUTEX_WAIT's rule) and lives
    // on our stack for the call. No PRIVATE flag: the word is shared.
    let r = unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, ts_ptr, std::ptr::null::<u32>(), 0u32)
    };
    if r == 0 {
        return FutexWait::Woken;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => FutexWait::Changed,
        Some(libc::ETIMEDOUT) => FutexWait::TimedOut,
        Some(libc::EINTR) => FutexWait::Interrupted,
        // Nothing else can happen for a valid word; callers re-check anyway.
        _ => FutexWait::Woken,
    }
}

/// Wakes up to `n` sleepers on `word`; returns how many woke.
pub fn wake(word: &AtomicU32, n: u32) -> u32 {
    let n = n.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not access it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    u32::try_from(r).unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // Tests of real sleeps measure the real clock.
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_word_that_differs_returns_changed_at_once() {
        let w = AtomicU32::new(5);
        assert_eq!(wait(&w, 4, None), FutexWait::Changed);
    }

    #[test]
    fn wait_times_out() {
        let w = AtomicU32::new(0);
        let t = Instant::now();
        assert_eq!(wait(&w, 0, Some(Duration::from_millis(20))), FutexWait::TimedOut);
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(wait(&w, 0, Some(Duration::ZERO)), FutexWait::TimedOut);
    }

    #[test]
    fn wake_with_no_sleeper_wakes_nobody() {
        let w = AtomicU32::new(0);
        assert_eq!(wake(&w, u32::MAX), 0);
    }

    #[test]
    fn a_sleeper_is_woken() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = w.clone();
        let t = std::thread::spawn(move || loop {
            // Loop: a wake may come before the sleep (then Changed) or be spurious.
            if w2.load(Ordering::SeqCst) != 0 {
                return;
            }
            let r = wait(&w2, 0, Some(Duration::from_secs(3)));
            assert_ne!(r, FutexWait::TimedOut);
        });
        std::thread::sleep(Duration::from_millis(10));
        w.store(1, Ordering::SeqCst);
        wake(&w, 1);
        t.join().unwrap();
    }
}
