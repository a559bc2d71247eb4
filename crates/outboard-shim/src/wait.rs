//! How the shim sleeps.
//!
//! - A blocking call on one engine socket sleeps on the board's futex (the
//!   news word the engine bumps when it posts events), after a short spin.
//!   Without a timeout the futex sleep is restarted by the kernel after a
//!   signal handler with SA_RESTART and returns EINTR after one without —
//!   Linux's rules for socket calls. With SO_RCVTIMEO/SO_SNDTIMEO set,
//!   signals always give EINTR, as on Linux.
//! - poll/select/epoll over engine sockets (mixed with kernel descriptors or
//!   not) sleep in the kernel, on the program's own descriptors plus the
//!   process's wake eventfd, which the engine writes while any thread is
//!   announced in the board's pollers word (CLAN's tripwire). A thread
//!   announces itself, re-reads the news word, sleeps, and on waking leaves;
//!   the last one out empties the eventfd (under a small lock, so no thread
//!   can announce itself between the count reaching zero and the emptying —
//!   no wake-up is lost, and a stale one costs one extra look).
//! - A watcher thread sleeps in poll() on the attach socket: when the engine
//!   dies it hangs up, and the watcher marks the board gone and wakes everyone.
//!
//! Idle, all of them sleep in the kernel: an idle program under the shim uses no CPU.

use crate::state::{self, Reentry};
use outboard_api::{Board, News};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long a waiting call spins on the news word before sleeping.
pub fn spin() -> Duration {
    static SPIN_US: AtomicU32 = AtomicU32::new(u32::MAX);
    let mut v = SPIN_US.load(Ordering::Relaxed);
    if v == u32::MAX {
        v = std::env::var("OUTBOARD_SPIN_US").ok().and_then(|s| s.parse().ok()).unwrap_or(20).min(1_000_000);
        SPIN_US.store(v, Ordering::Relaxed);
    }
    Duration::from_micros(u64::from(v))
}

/// The engine's attach socket hung up.
pub static ENGINE_GONE: AtomicBool = AtomicBool::new(false);
/// The process's wake eventfd (given to the engine at attach), or -1.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// Serialises announcing/leaving with emptying the eventfd.
static POLLERS: Mutex<()> = Mutex::new(());

thread_local! {
    static FORK_POLLERS: std::cell::RefCell<Option<std::sync::MutexGuard<'static, ()>>> = const { std::cell::RefCell::new(None) };
}

fn pollers() -> std::sync::MutexGuard<'static, ()> {
    POLLERS.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn before_fork() {
    let g = pollers();
    FORK_POLLERS.with(|f| *f.borrow_mut() = Some(g));
}
pub fn after_fork() {
    FORK_POLLERS.with(|f| f.borrow_mut().take());
}
pub fn after_fork_child() {
    FORK_POLLERS.with(|f| f.borrow_mut().take());
    // The parent's eventfd is not the child's business (a new board brings a new one).
    let fd = WAKE_FD.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        state::set_mark(fd, state::MARK_KERNEL);
        // SAFETY: closes our inherited copy.
        unsafe { crate::real::close(fd) };
    }
    ENGINE_GONE.store(false, Ordering::Relaxed);
}

/// Makes the process's wake eventfd (for the attach request), marked internal.
pub fn make_wake_fd() -> Option<RawFd> {
    // SAFETY: plain eventfd creation.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    state::set_mark(fd, state::MARK_INTERNAL);
    WAKE_FD.store(fd, Ordering::SeqCst);
    Some(fd)
}

pub fn wake_fd() -> RawFd {
    WAKE_FD.load(Ordering::Relaxed)
}

fn ring(efd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd.
    unsafe { crate::real::write(efd, (&one as *const u64).cast(), 8) };
}

/// Starts the watcher thread for a newly attached board.
pub fn start_watcher(board: &Board) {
    let fd = board.attach_socket_fd();
    let news = board.news();
    let _ = std::thread::Builder::new().name("outboard-watch".into()).spawn(move || {
        let _r = Reentry::enter();
        let mut p = libc::pollfd { fd, events: libc::POLLRDHUP, revents: 0 };
        loop {
            // SAFETY: one live pollfd.
            let r = unsafe { crate::real::ppoll(&mut p, 1, std::ptr::null(), std::ptr::null()) };
            if r > 0 {
                if p.revents & libc::POLLNVAL != 0 {
                    return; // closed by us (fork child, exit): nothing to watch
                }
                break;
            }
            if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return;
            }
        }
        ENGINE_GONE.store(true, Ordering::SeqCst);
        crate::log::warn("the engine is gone: engine sockets fail from now on");
        news.signal();
        let efd = wake_fd();
        if efd >= 0 {
            ring(efd);
        }
    });
}

/// Announces this thread as sleeping on the wake eventfd; false (and not
/// announced) if the news word already left `seen`.
pub fn poll_enter(news: &News, seen: u32) -> bool {
    let _g = pollers();
    news.poller_enter();
    if news.current() != seen || ENGINE_GONE.load(Ordering::Relaxed) {
        leave(news);
        return false;
    }
    state::count(state::Count::PollWaits);
    true
}

/// This thread woke from a sleep `poll_enter` announced.
pub fn poll_exit(news: &News) {
    let _g = pollers();
    leave(news);
}

fn leave(news: &News) {
    if news.poller_exit() == 0 {
        let efd = wake_fd();
        if efd >= 0 {
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
            unsafe { crate::real::read(efd, (&mut v as *mut u64).cast(), 8) };
        }
    }
}

/// Outcome of one sleep of a blocking call.
pub enum Slept {
    News,
    TimedOut,
    Interrupted,
}

/// How often spinning paid off lately (0..=8): a spin that saw news raises
/// it by 2 (it saved a sleep and a wake-up), one that did not lowers it by
/// 1; below 2 waits skip the spin (but every 16th spins anyway, to notice
/// when spinning would help again). So spinning goes on while it pays at
/// least a third of the time; on a busy machine a spin that rarely pays only
/// takes the core from the engine.
static SPIN_SCORE: AtomicU32 = AtomicU32::new(4);
static WAITS: AtomicU32 = AtomicU32::new(0);

fn spin_now() -> Duration {
    let n = WAITS.fetch_add(1, Ordering::Relaxed);
    if SPIN_SCORE.load(Ordering::Relaxed) >= 2 || n % 16 == 0 {
        spin()
    } else {
        Duration::ZERO
    }
}

fn spin_paid(paid: bool) {
    let s = SPIN_SCORE.load(Ordering::Relaxed);
    SPIN_SCORE.store(if paid { (s + 2).min(8) } else { s.saturating_sub(1) }, Ordering::Relaxed);
}

/// Sleeps until the news word leaves `seen` (spinning first), at most `timeout`.
pub fn sleep(news: &News, seen: u32, timeout: Option<Duration>) -> Slept {
    use outboard_board::WaitOutcome;
    if ENGINE_GONE.load(Ordering::Relaxed) {
        return Slept::News;
    }
    let spin = spin_now();
    let start = std::time::Instant::now();
    let r = news.wait(seen, spin, timeout);
    let slept = start.elapsed() >= spin;
    if slept {
        state::count(state::Count::BlockingSleeps);
    }
    if !spin.is_zero() {
        spin_paid(!slept);
    }
    match r {
        WaitOutcome::Signalled => Slept::News,
        WaitOutcome::TimedOut => Slept::TimedOut,
        WaitOutcome::Interrupted => {
            state::count(state::Count::Eintr);
            Slept::Interrupted
        }
    }
}

/// Spins up to the spin time for the news word to leave `seen`; true if it did.
pub fn spin_for_news(news: &News, seen: u32) -> bool {
    let spin = spin_now();
    if spin.is_zero() {
        return false;
    }
    let start = std::time::Instant::now();
    let mut n = 0u32;
    while news.current() == seen {
        n = n.wrapping_add(1);
        if n % 64 == 0 && start.elapsed() >= spin {
            spin_paid(false);
            return false;
        }
        std::hint::spin_loop();
    }
    spin_paid(true);
    true
}
