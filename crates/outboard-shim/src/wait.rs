//! How the shim sleeps.
//!
//! - A blocking call on one engine socket sleeps on the board's futex (the
//!   news word the engine bumps when it posts events), after a short spin —
//!   if it is the only one blocked, or the leader among those blocked; the
//!   others sleep each on a word of its own and are woken only for their
//!   own endpoints' events (see `Waiters`).
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
use outboard_api::{Board, News, SharedDriver};
use outboard_board::layout::WAKE_SLOTS;
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

/// The in-process engine's turns (`outboard run --inline`): a waiting
/// thread runs them while it spins ([`outboard_api::SharedDriver`]).
static DRIVER: std::sync::OnceLock<std::sync::Arc<dyn SharedDriver>> = std::sync::OnceLock::new();
/// Cleared in a forked child: the engine and its thread stayed in the parent.
static DRIVING: AtomicBool = AtomicBool::new(false);

/// Set once, by the in-process engine's library when it starts the engine.
pub fn set_driver(d: std::sync::Arc<dyn SharedDriver>) {
    if DRIVER.set(d).is_ok() {
        DRIVING.store(true, Ordering::SeqCst);
    }
}

fn driver() -> Option<&'static std::sync::Arc<dyn SharedDriver>> {
    if DRIVING.load(Ordering::Relaxed) {
        DRIVER.get()
    } else {
        None
    }
}

/// Runs the turn this process's commands asked for (an in-process engine,
/// `SharedDriver::want_turn`), unless another thread runs the engine now
/// (it runs that turn): called where a thread is about to look for news
/// and wait, so what it sent goes out before it waits for the answer.
pub fn run_wanted_turn() {
    if let Some(d) = driver() {
        if d.turn_wanted() {
            let _r = Reentry::enter();
            let _ = d.try_turn();
        }
    }
}

/// The engine's attach socket hung up.
pub static ENGINE_GONE: AtomicBool = AtomicBool::new(false);
/// The process's wake eventfd (given to the engine at attach), or -1.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// Its wake groups' eventfds (group g at g − 1), or -1 each.
static GROUP_FDS: [AtomicI32; WAKE_SLOTS - 1] = [const { AtomicI32::new(-1) }; WAKE_SLOTS - 1];
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
    DRIVING.store(false, Ordering::SeqCst);
    // The parent's eventfds are not the child's business (a new board brings new ones).
    for slot in std::iter::once(&WAKE_FD).chain(&GROUP_FDS) {
        let fd = slot.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            state::set_mark(fd, state::MARK_KERNEL);
            // SAFETY: closes our inherited copy.
            unsafe { crate::real::close(fd) };
        }
    }
    ENGINE_GONE.store(false, Ordering::Relaxed);
}

/// The eventfd kept in `slot`, made (marked internal) if there is none yet:
/// each is made once for the process's life, so epoll sets keep it
/// registered across re-attaches.
fn process_eventfd(slot: &AtomicI32) -> Option<RawFd> {
    let fd = slot.load(Ordering::SeqCst);
    if fd >= 0 {
        return Some(fd);
    }
    // SAFETY: plain eventfd creation.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    state::set_mark(fd, state::MARK_INTERNAL);
    slot.store(fd, Ordering::SeqCst);
    Some(fd)
}

/// The process's wake eventfd (for the attach request).
pub fn make_wake_fd() -> Option<RawFd> {
    process_eventfd(&WAKE_FD)
}

pub fn wake_fd() -> RawFd {
    WAKE_FD.load(Ordering::Relaxed)
}

/// The wake groups' eventfds (for the attach request): up to the first
/// that could not be made.
pub fn group_fds() -> Vec<RawFd> {
    GROUP_FDS.iter().map_while(process_eventfd).collect()
}

/// The eventfd a thread sleeping in wake slot `slot` waits on (0: the
/// shared one), or -1.
pub fn slot_fd(slot: usize) -> RawFd {
    match slot {
        0 => wake_fd(),
        g => GROUP_FDS.get(g - 1).map_or(-1, |f| f.load(Ordering::Relaxed)),
    }
}

pub fn ring(efd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd.
    unsafe { crate::real::write(efd, (&one as *const u64).cast(), 8) };
}

/// Starts the watcher thread for a newly attached board.
/// Set when this process detaches its board on purpose (at exit, with an
/// in-process engine): the hang-up that follows is not an engine's death.
pub static DETACHING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How often a process whose engine died tries to attach to a new one.
const REATTACH_EVERY: Duration = Duration::from_millis(250);

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
        if DETACHING.load(Ordering::SeqCst) {
            return; // this process let go of its board on purpose (exit)
        }
        ENGINE_GONE.store(true, Ordering::SeqCst);
        crate::log::warn("the engine is gone: engine sockets fail until an engine of the same name is back");
        news.signal();
        let efd = wake_fd();
        if efd >= 0 {
            ring(efd);
        }
        // Wait for an engine of the same name (a restart): a few attempts a
        // second, each a connect() that fails at once while there is none.
        loop {
            std::thread::sleep(REATTACH_EVERY);
            if state::lock().reattach() {
                return; // the new board has a watcher of its own
            }
        }
    });
}

/// Announces this thread as sleeping on wake slot `slot`'s eventfd; false
/// (and not announced) if the news word already left `seen`. A dead engine
/// is no reason not to sleep: the look before this one reported its sockets
/// failed (once), and the program's own descriptors may still wake it.
fn poll_enter(news: &News, seen: u32, slot: usize) -> bool {
    let _g = pollers();
    news.poller_enter_slot(slot);
    if news.current() != seen {
        leave(news, slot);
        return false;
    }
    state::count(state::Count::PollWaits);
    true
}

/// This thread woke from a sleep `poll_enter` announced in `slot`.
pub fn poll_exit(news: &News, slot: usize) {
    woke();
    let _g = pollers();
    leave(news, slot);
}

fn leave(news: &News, slot: usize) {
    if news.poller_exit_slot(slot) == 0 {
        let efd = slot_fd(slot);
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
    if SPIN_SCORE.load(Ordering::Relaxed) >= 2 || n.is_multiple_of(16) {
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
    run_wanted_turn();
    // With an in-process engine the spin runs its turns, then sleeps without spinning again.
    let spin = match driver() {
        Some(_) if spin_for_news(news, seen, timeout) => return Slept::News,
        Some(_) => Duration::ZERO,
        None => spin_now(),
    };
    let start = std::time::Instant::now();
    let r = news.wait(seen, spin, timeout);
    woke();
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

/// What a poll-type wait does when its look found nothing ready and it
/// may sleep: spin for news, then announce the thread in wake slot `slot`
/// (0: the shared eventfd; g: wake group g's, see `EpollSet::group`).
/// `None`: news arrived, look again. `Some(true)`: sleep in the kernel with
/// the slot's eventfd too, and `poll_exit` after; `Some(false)`: there is
/// no eventfd, sleep on the program's descriptors alone.
pub fn before_kernel_sleep(news: &News, seen: u32, slot: usize, limit: Option<Duration>) -> Option<bool> {
    if spin_for_news(news, seen, limit) {
        return None;
    }
    if slot_fd(slot) < 0 {
        return Some(false);
    }
    poll_enter(news, seen, slot).then_some(true)
}

/// Spins up to the spin time for the news word to leave `seen`; true if it
/// did. With an in-process engine each time round is a turn of the engine
/// in this thread (when no other thread runs one): the news this thread
/// waits for is then made here, with no hand-over between threads.
///
/// Driving, the spin is [`drive_spin`]'s, never below the engine thread's
/// own spin after its last work (`SharedDriver::spin`): the waiting
/// thread stands in for that spin. It is cut to `limit`, the time the
/// wait has left.
/// A driver whose turns found the engine taken this many times in a row,
/// by an engine thread that sleeps holding it or was just woken from that
/// sleep, yields its core. That holder is most likely not running: woken
/// (by a doorbell, a frame, or this driver's wake below) it waits for this
/// very core, where the scheduler put it beside the thread it serves. Spinning
/// on, the driver keeps it off until its spin ends (sockperf at 1,000
/// requests/s: the server spun about 50 µs per request that way, the engine
/// thread runnable beside it). A turn that runs (the engine thread's, or
/// another application thread's) is not waited out so: it ends soon, and a
/// yield gives the core to whatever else is runnable there (memcached with
/// two workers lost about 5 % of its requests to it, the load generator
/// taking the cores its workers gave up).
const YIELD_AFTER_TAKEN: u32 = 8;

/// And after this many, the driver wakes the sleeper (a system call, and
/// the engine thread's wake-up): until then a frame or a doorbell may wake
/// it anyway, as on a busy server it does within microseconds.
const WAKE_AFTER_TAKEN: u32 = 32;

fn spin_for_news(news: &News, seen: u32, limit: Option<Duration>) -> bool {
    woke();
    let drive = driver();
    let spin = match drive {
        Some(d) => drive_spin(spin().max(d.spin())),
        None => spin_now(),
    };
    let spin = limit.map_or(spin, |l| spin.min(l));
    if spin.is_zero() {
        return false;
    }
    // Another thread drives: sleep rather than spin beside it. And that
    // thread's spin goes back to the floor: this one, woken for its own
    // news, needs a core the driver would keep spinning.
    if drive.is_some_and(|d| !d.enter()) {
        DRIVE_SPIN_US.store(0, Ordering::Relaxed);
        return false;
    }
    let start = std::time::Instant::now();
    // The engine's own system calls bypass the interposers.
    let _r = drive.map(|_| Reentry::enter());
    // A turn takes far longer than a look at the word: the clock every 4th.
    let every: u32 = if drive.is_some() { 4 } else { 64 };
    let mut n = 0u32;
    // Turns in a row that found the engine taken.
    let mut taken = 0u32;
    let got = loop {
        if news.current() != seen {
            break true;
        }
        match drive {
            Some(d) => match d.try_turn() {
                Some(Err(_)) => break false,
                Some(Ok(_)) => taken = 0,
                None if d.engine_thread_sleeps() => {
                    taken += 1;
                    if taken == WAKE_AFTER_TAKEN {
                        d.wake_engine_thread();
                    }
                    if taken.is_multiple_of(YIELD_AFTER_TAKEN) {
                        std::thread::yield_now();
                    }
                }
                // A turn of another thread's, running: it ends soon.
                None => {}
            },
            None => std::hint::spin_loop(),
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(every) && start.elapsed() >= spin {
            break false;
        }
    };
    match drive {
        Some(d) => {
            d.leave(!got);
            if !got {
                GAVE_UP.set(Some((std::time::Instant::now(), spin)));
            }
        }
        None => spin_paid(got),
    }
    got
}

// ---------------------------------------------------------------- the driving spin

/// The driving spin, adaptive, for the process (its threads drive one
/// engine, and see the same traffic): how long a waiting thread runs the
/// in-process engine's turns before it sleeps in the kernel, in µs; 0 until
/// first set.
///
/// A thread that sleeps after a spin of S and is woken within S would have
/// caught its news by spinning twice as long: the spin doubles, up to
/// [`DRIVE_SPIN_MAX`]. One woken later halves it, down to the floor (the
/// engine's own spin). A sleep costs the engine thread's wake-up, the
/// eventfd's and this thread's, on a machine whose cores the engine shares
/// with the program and its load; a busy server (memcached, one worker, 16
/// connections on 2 vCPUs: gaps of 50 µs to a few hundred between batches)
/// then stops sleeping between requests, and an idle one spins only the
/// floor before each sleep. A second thread that waits while one drives
/// puts the spin back to the floor: the long spin is for a program with one
/// thread waiting at a time (memcached with two workers and one client
/// thread served a third fewer requests with it, its woken worker queued
/// behind the spinning one for a core).
static DRIVE_SPIN_US: AtomicU32 = AtomicU32::new(0);

/// The longest driving spin.
pub const DRIVE_SPIN_MAX: Duration = Duration::from_millis(1);

thread_local! {
    /// When this thread gave up a driving spin (and how long it was), until it wakes.
    static GAVE_UP: std::cell::Cell<Option<(std::time::Instant, Duration)>> = const { std::cell::Cell::new(None) };
}

fn drive_spin(floor: Duration) -> Duration {
    Duration::from_micros(u64::from(DRIVE_SPIN_US.load(Ordering::Relaxed))).clamp(floor, DRIVE_SPIN_MAX.max(floor))
}

/// This thread is back from the sleep after a driving spin it gave up (a
/// no-op otherwise): the spin adapts to how long it slept.
fn woke() {
    if let Some((at, spin)) = GAVE_UP.take() {
        let us = next_drive_spin(spin, at.elapsed()).as_micros() as u32;
        DRIVE_SPIN_US.store(us, Ordering::Relaxed);
    }
}

/// The driving spin after one of `spin` that was followed by a sleep of `slept`.
fn next_drive_spin(spin: Duration, slept: Duration) -> Duration {
    let next = if slept <= spin { spin * 2 } else { spin / 2 };
    next.min(DRIVE_SPIN_MAX)
}

// ---------------------------------------------------------------- blocked threads

/// A thread blocked in a call on one engine socket. One blocked thread,
/// the leader, sleeps on the board's futex (which the engine wakes for
/// every event); the others, followers, sleep each on a word of their own,
/// and whoever looks at the board next (the leader, woken, or any thread
/// in any call) wakes just the followers whose endpoints had events. So an
/// event costs one or two wake-ups, not one per blocked thread — a program
/// with a thread per connection does not wake them all for every packet.
pub struct Waiter {
    word: AtomicU32,
}

impl Waiter {
    fn wake(&self) {
        self.word.fetch_add(1, Ordering::SeqCst);
        outboard_board::futex::wake(&self.word, 1);
    }
}

/// A blocked call's registration (see [`Waiters`]).
pub struct Registration {
    token: u64,
    endpoint: Option<u32>,
    waiter: std::sync::Arc<Waiter>,
}

/// How a blocked call sleeps this time.
pub enum Role {
    /// On the board's futex.
    Leader,
    /// On its own word, while it still holds this value.
    Follower(u32),
}

/// The blocked calls of the process (kept under the shim's lock).
#[derive(Default)]
pub struct Waiters {
    leader: Option<u64>,
    /// By the endpoint each waits for; `None`: any event may concern it
    /// (datagram sockets, whose send room is board-wide; a connect in progress).
    by_endpoint: outboard_wire::flowhash::FlowMap<Option<u32>, Vec<(u64, std::sync::Arc<Waiter>)>>,
    next: u64,
    /// The news word when the followers waiting for any event were last woken.
    any_woken_at: Option<u32>,
}

impl Waiters {
    pub fn register(&mut self, endpoint: Option<u32>) -> Registration {
        self.next += 1;
        let waiter = std::sync::Arc::new(Waiter { word: AtomicU32::new(0) });
        self.by_endpoint.entry(endpoint).or_default().push((self.next, waiter.clone()));
        Registration { token: self.next, endpoint, waiter }
    }

    /// The call is done waiting. While nobody leads (the leader left, and
    /// the follower it woke to lead next has not slept yet), each call that
    /// leaves wakes another: the one woken may itself be about to leave, and
    /// the followers must never be left with nobody on the board's futex.
    pub fn unregister(&mut self, reg: &Registration) {
        if let Some(v) = self.by_endpoint.get_mut(&reg.endpoint) {
            v.retain(|(t, _)| *t != reg.token);
            if v.is_empty() {
                self.by_endpoint.remove(&reg.endpoint);
            }
        }
        if self.leader == Some(reg.token) {
            self.leader = None;
        }
        if self.leader.is_none() {
            // It leads from its next wait (or, leaving too, passes this on).
            if let Some((_, w)) = self.by_endpoint.values().flatten().next() {
                w.wake();
            }
        }
    }

    /// How `reg` sleeps now: it leads if nobody does.
    pub fn role(&mut self, reg: &Registration) -> Role {
        match self.leader {
            None => {
                self.leader = Some(reg.token);
                Role::Leader
            }
            Some(t) if t == reg.token => Role::Leader,
            Some(_) => Role::Follower(reg.waiter.word.load(Ordering::SeqCst)),
        }
    }

    /// Wakes the followers waiting for the endpoints in `changed`, and those
    /// waiting for any event if the news word moved (`news`, read before
    /// the events were moved in) since they were last woken — a sync
    /// completing (a connect) moves it without an endpoint's event. Every
    /// one of them when the engine is gone.
    pub fn wake_for(&mut self, changed: &[u32], news: u32) {
        if self.by_endpoint.is_empty() {
            return;
        }
        if ENGINE_GONE.load(Ordering::Relaxed) {
            self.by_endpoint.values().flatten().for_each(|(_, w)| w.wake());
            return;
        }
        for ep in changed {
            if let Some(v) = self.by_endpoint.get(&Some(*ep)) {
                v.iter().for_each(|(_, w)| w.wake());
            }
        }
        if self.any_woken_at != Some(news) {
            if let Some(v) = self.by_endpoint.get(&None) {
                self.any_woken_at = Some(news);
                v.iter().for_each(|(_, w)| w.wake());
            }
        }
    }
}

/// A follower's sleep: until its word leaves `seen` (a leader or another
/// call woke it), at most `timeout`; the same signal rules as [`sleep`].
pub fn follow(reg: &Registration, seen: u32, timeout: Option<Duration>) -> Slept {
    use outboard_board::futex::{wait, FutexWait};
    run_wanted_turn();
    state::count(state::Count::BlockingSleeps);
    match wait(&reg.waiter.word, seen, timeout) {
        FutexWait::Woken | FutexWait::Changed => Slept::News,
        FutexWait::TimedOut => Slept::TimedOut,
        FutexWait::Interrupted => {
            state::count(state::Count::Eintr);
            Slept::Interrupted
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn the_driving_spin_doubles_after_a_short_sleep_and_halves_after_a_long_one() {
        assert_eq!(next_drive_spin(50 * US, 30 * US), 100 * US, "news 30 us after giving up: spin longer");
        assert_eq!(next_drive_spin(50 * US, 50 * US), 100 * US);
        assert_eq!(next_drive_spin(400 * US, 401 * US), 200 * US, "news after the spin's length: spin less");
        assert_eq!(next_drive_spin(800 * US, 10 * US), DRIVE_SPIN_MAX, "never past the most");
        assert_eq!(next_drive_spin(DRIVE_SPIN_MAX, Duration::ZERO), DRIVE_SPIN_MAX);
    }

    #[test]
    fn the_driving_spin_stays_between_the_engines_spin_and_the_most_and_adapts_once_per_sleep() {
        let floor = 50 * US;
        DRIVE_SPIN_US.store(0, Ordering::Relaxed);
        assert_eq!(drive_spin(floor), floor, "unset: the engine's own spin");
        DRIVE_SPIN_US.store(10, Ordering::Relaxed);
        assert_eq!(drive_spin(floor), floor, "halved below it: the engine's own spin");
        DRIVE_SPIN_US.store(300, Ordering::Relaxed);
        assert_eq!(drive_spin(floor), 300 * US);
        DRIVE_SPIN_US.store(5_000, Ordering::Relaxed);
        assert_eq!(drive_spin(floor), DRIVE_SPIN_MAX);
        assert_eq!(drive_spin(2 * DRIVE_SPIN_MAX), 2 * DRIVE_SPIN_MAX, "a floor above the most wins");

        // A sleep after a spin given up adapts it, once (one test: the spin is the process's).
        DRIVE_SPIN_US.store(0, Ordering::Relaxed);
        GAVE_UP.set(Some((std::time::Instant::now(), 200 * US)));
        woke();
        assert_eq!(DRIVE_SPIN_US.load(Ordering::Relaxed), 400, "woken at once after a 200 us spin");
        woke();
        assert_eq!(DRIVE_SPIN_US.load(Ordering::Relaxed), 400, "a second wake-up without a spin changes nothing");
        DRIVE_SPIN_US.store(0, Ordering::Relaxed);
    }
}
