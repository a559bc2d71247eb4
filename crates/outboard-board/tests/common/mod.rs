//! Helpers shared by the process and thread stress tests.
#![allow(dead_code)] // Each test binary uses a different part.
#![allow(clippy::disallowed_methods)] // Deadlines on the real clock.

use outboard_board::{Condition, WaitOutcome};
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Fork tests spin two processes each: run them one at a time on small machines.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// A forked child, killed and reaped on drop unless it was waited for.
pub struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

/// Runs `body` in a child process, which `_exit`s with its result (101 if
/// it panicked). `body` should not allocate: other threads of the test
/// harness may hold locks the child inherits.
pub fn fork(body: impl FnOnce() -> i32) -> Child {
    // SAFETY: the child only runs `body` and then `_exit`s, never returning
    // into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or(101);
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    Child { pid, reaped: false }
}

impl Child {
    /// The child's exit code, or None if it did not exit by `deadline`
    /// (then it is killed) or died of a signal.
    pub fn wait(mut self, deadline: Instant) -> Option<i32> {
        loop {
            let mut status = 0;
            // SAFETY: our own child; `status` is a valid out-pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if r == self.pid {
                self.reaped = true;
                return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: our own child, not reaped yet, so the pid is still ours.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// Lets other work run (two cores, and the peer may be a process).
pub fn yield_now() {
    // SAFETY: no arguments, no memory.
    unsafe { libc::sched_yield() };
}

/// Waits with zero spin (every wait that finds the word unchanged sleeps)
/// until `c` moves past `seen`, or fails at `deadline`.
pub fn wait_past(c: &Condition, seen: u32, deadline: Instant) -> Result<(), &'static str> {
    while c.current() == seen {
        let left = deadline.checked_duration_since(Instant::now()).ok_or("deadline: a wake-up was lost")?;
        match c.wait(seen, Duration::ZERO, left) {
            WaitOutcome::Signalled | WaitOutcome::TimedOut | WaitOutcome::Interrupted => {}
        }
    }
    Ok(())
}

/// One side of a ping-pong through two conditions: `mine` is the one this
/// side signals. The pinger serves first. Returns the futex wakes it made.
pub fn ping_pong(
    mine: &Condition,
    theirs: &Condition,
    pinger: bool,
    rounds: u32,
    deadline: Instant,
) -> Result<u32, &'static str> {
    let mut wakes = 0;
    for round in 0..rounds {
        // Each side signals exactly once a round, after seeing the other's.
        if pinger {
            wakes += u32::from(mine.signal());
        }
        wait_past(theirs, round, deadline)?;
        if theirs.current() != round.wrapping_add(1) {
            return Err("the other side signalled more than once a round");
        }
        if !pinger {
            wakes += u32::from(mine.signal());
        }
    }
    Ok(wakes)
}
