//! How the shim sleeps.
//!
//! - A blocking call on one engine socket sleeps on the board's futex (the
//!   news word the engine bumps when it posts events), after a short spin.
//!   Without a timeout the futex sleep is restarted by the kernel after a
//!   signal handler with SA_RESTART and returns EINTR after one without —
//!   Linux's rules for socket calls. With SO_RCVTIMEO/SO_SNDTIMEO set,
//!   signals always give EINTR, as on Linux.
//! - poll/select/epoll over engine sockets (mixed with kernel descriptors or
//!   not) sleep in the kernel, on the program's own descriptors plus this
//!   thread's wake-up eventfd. One waker thread per process sleeps on the
//!   board's futex while any thread waits this way and writes the eventfds of
//!   the waiters whose news word has moved (the waiter registers the value it
//!   saw before it looked at its sockets: no wake-up can be lost).
//! - A watcher thread sleeps in poll() on the attach socket: when the engine
//!   dies it hangs up, and the watcher marks the board gone and wakes everyone.
//!
//! Idle, all three sleep in the kernel: an idle program under the shim uses no CPU.

use crate::state::{self, Reentry};
use outboard_api::{Board, News};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
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

struct Waiters {
    list: Vec<(RawFd, u32)>,
    news: Option<News>,
    waker_running: bool,
}

static WAITERS: Mutex<Waiters> = Mutex::new(Waiters { list: Vec::new(), news: None, waker_running: false });
static WAITERS_CV: Condvar = Condvar::new();
/// The engine's attach socket hung up.
pub static ENGINE_GONE: AtomicBool = AtomicBool::new(false);

fn waiters() -> std::sync::MutexGuard<'static, Waiters> {
    WAITERS.lock().unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    static FORK_WAITERS: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Waiters>>> = const { std::cell::RefCell::new(None) };
    static EVENTFD: std::cell::Cell<RawFd> = const { std::cell::Cell::new(-1) };
}

pub fn before_fork() {
    let g = waiters();
    FORK_WAITERS.with(|f| *f.borrow_mut() = Some(g));
}
pub fn after_fork() {
    FORK_WAITERS.with(|f| f.borrow_mut().take());
}
pub fn after_fork_child() {
    FORK_WAITERS.with(|f| {
        if let Some(mut g) = f.borrow_mut().take() {
            // The threads are gone in the child: start from nothing.
            g.list.clear();
            if let Some(n) = g.news.take() {
                std::mem::forget(n);
            }
            g.waker_running = false;
        }
    });
    ENGINE_GONE.store(false, Ordering::Relaxed);
}

/// Starts the watcher and waker threads for a newly attached board.
pub fn start_watcher(board: &Board) {
    let fd = board.attach_socket_fd();
    let news = board.news();
    {
        let mut w = waiters();
        w.news = Some(news.clone());
        if !w.waker_running {
            w.waker_running = true;
            let _ = std::thread::Builder::new().name("outboard-waker".into()).spawn(waker);
        }
    }
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
        wake_all();
    });
}

fn waker() {
    let _r = Reentry::enter();
    loop {
        let (news, seen) = {
            let mut w = waiters();
            while w.list.is_empty() || w.news.is_none() {
                w = WAITERS_CV.wait(w).unwrap_or_else(|e| e.into_inner());
            }
            let news = w.news.clone().expect("checked");
            let now = news.current();
            w.list.retain(|&(efd, seen)| {
                if seen != now {
                    ring(efd);
                    false
                } else {
                    true
                }
            });
            if w.list.is_empty() {
                continue;
            }
            (news, now)
        };
        news.wait(seen, Duration::ZERO, Some(Duration::from_secs(1)));
    }
}

fn ring(efd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd.
    unsafe { crate::real::write(efd, (&one as *const u64).cast(), 8) };
}

fn wake_all() {
    let mut w = waiters();
    for &(efd, _) in &w.list {
        ring(efd);
    }
    w.list.clear();
}

/// This thread's wake-up eventfd (made on first use, marked internal).
pub fn thread_eventfd() -> RawFd {
    EVENTFD.with(|c| {
        if c.get() >= 0 {
            return c.get();
        }
        // SAFETY: plain eventfd creation.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd >= 0 {
            state::set_mark(fd, state::MARK_INTERNAL);
            c.set(fd);
        }
        fd
    })
}

/// Registers this thread's eventfd to be rung when the news word leaves `seen`.
pub fn register(efd: RawFd, seen: u32) {
    let mut w = waiters();
    w.list.push((efd, seen));
    WAITERS_CV.notify_one();
}

/// Takes the registration back (if the waker has not already) and empties the eventfd.
pub fn unregister(efd: RawFd) {
    {
        let mut w = waiters();
        w.list.retain(|&(f, _)| f != efd);
    }
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
    unsafe { crate::real::read(efd, (&mut v as *mut u64).cast(), 8) };
}

/// Outcome of one sleep of a blocking call.
pub enum Slept {
    News,
    TimedOut,
    Interrupted,
}

/// Sleeps until the news word leaves `seen` (spinning first), at most `timeout`.
pub fn sleep(news: &News, seen: u32, timeout: Option<Duration>) -> Slept {
    use outboard_board::WaitOutcome;
    if ENGINE_GONE.load(Ordering::Relaxed) {
        return Slept::News;
    }
    let spin = spin();
    if news.current() == seen {
        state::count(state::Count::BlockingSleeps);
    }
    match news.wait(seen, spin, timeout) {
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
    let spin = spin();
    if spin.is_zero() {
        return false;
    }
    let start = std::time::Instant::now();
    let mut n = 0u32;
    while news.current() == seen {
        n = n.wrapping_add(1);
        if n % 64 == 0 && start.elapsed() >= spin {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}
