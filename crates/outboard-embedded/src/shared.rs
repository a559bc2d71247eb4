//! The engine shared by a thread of its own and the application's threads
//! (Onload's model, for the socket shim's in-process engine): a thread that
//! waits for news runs the engine's turns itself instead of spinning while
//! another thread runs them, and the commands a thread queued take effect
//! at its next wait (or within a lease). On a machine whose cores the engine shares with
//! the program (and its load), a request then crosses no thread: the
//! frame in, the stack, the board and the program's read are one thread's
//! work, and the reply's command goes out in the same thread's next turn.
//!
//! The protocol, in a few atomics beside the engine's mutex:
//! - **One thread runs the engine at a time** (`try_lock`: an application
//!   thread never blocks on it). A thread that finds it held sets
//!   `pending` first; the holder, after its turn, runs another if `pending`
//!   is set, so a command queued meanwhile is never left for later.
//! - **A command asks for a turn** (`want_turn` sets `pending`), which
//!   runs at the queuing thread's next wait, or in the turn of whichever
//!   thread runs the engine first. Not at once in the queuing thread: a
//!   server answering a batch of requests between two waits then sends the
//!   batch in one turn, with one kick of the link (on AF_XDP a system call,
//!   which on veth also carries the frames to the peer); a turn per
//!   command cost nginx a third of its request rate.
//! - **One driver.** A thread that waits announces itself (`enter`): the
//!   engine thread then parks (a futex, no lock held) instead of spinning
//!   beside it. The waiter runs turns until its news comes, then `leave`s.
//!   A second thread that waits meanwhile sleeps at once (the driver's
//!   turns post its events and wake it, as the engine thread's would): two
//!   threads spinning for one engine only take cores from the program.
//! - **A lease, not a hand-over per request.** A waiter that leaves with
//!   news will most likely wait again soon (a server between requests), so
//!   the engine thread stays parked while turns keep coming from the
//!   application: it looks every [`LEASE`], and takes over only once no
//!   application thread ran a turn for a whole lease. A waiter that leaves
//!   to sleep in the kernel hands back at once (a futex wake): from then on
//!   the engine thread watches the link and sleeps as the daemon's does.
//!   So frames that arrive while the program computes, and what it sent
//!   before, wait at most a lease for a turn; timers are not affected (the
//!   shortest is milliseconds). A driver that runs no turn for a whole
//!   lease (descheduled, or gone) does not hold the engine thread either.
//! - **The program's threads are the spinners.** After its last work the
//!   engine thread spins (as a daemon's shard does) only while no
//!   application thread ran a turn for [`DRIVEN_RECENTLY`]: a program whose
//!   threads drive it (they spin in their own waits) comes back within
//!   that, and the engine thread, taking over between its waits, goes
//!   straight to sleep after an idle turn instead of spinning beside it
//!   for cores the program and its load need (memcached with one worker
//!   and 16 connections on 2 vCPUs: its engine thread spent 1.0-1.7 s of
//!   CPU in 3 s, 0.4-0.6 s without that spin, and served 15-40 % more).
//!   An engine thread that has run alone for that long (the program's
//!   threads wait in the kernel, or on nothing of the engine's) spins as a
//!   daemon's shard does. So does one whose work came after the last
//!   driver handed back to sleep in the kernel: that work woke the
//!   program, whose answer follows within microseconds; caught by the
//!   spin, it needs no doorbell and no wake-up of this thread.
//! - **The engine thread's spin yields its core** every
//!   `YIELD_EVERY_IDLE_TURNS` idle turns, without the engine: the thread
//!   it just woke is most often queued on this very core (the scheduler
//!   puts a wakee beside its waker), and takes the engine itself when it
//!   waits again. Without the yield the two took turns at one core, each
//!   spinning while the other waited for it (sockperf at 1,000 requests/s:
//!   about 50 µs each way per request). And it yields at once after a
//!   turn that woke the program's threads when the program had handed the
//!   engine back to sleep (a paced server): the woken thread, most often
//!   queued on this core, runs without waiting for the next yield (a sched
//!   trace of sockperf at 1,000 requests/s on the 2-vCPU AMD VM: its wait
//!   for the core 13-14 µs, 9-10 with the yield).
//! - **Wake-ups after the engine is let go.** A turn publishes its events
//!   (the board's news word moves) but leaves the futex wakes and eventfd
//!   writes to whoever ran it, issued once the engine's lock is dropped
//!   (`Engine::defer_wakes`, `OwedWakes`). The woken thread is most often
//!   put on the waker's core and preempts it at once; woken in the middle
//!   of the engine thread's turn it read its request, answered, and found
//!   the engine held by the preempted thread, so the answer waited until
//!   its own spin ended (sockperf at 1,000 requests/s on the 2-vCPU AMD VM:
//!   the reply left after the server's 50-70 µs spin in most requests).
//! - **The engine thread sleeps holding the engine** (its sleep is the
//!   engine's own: the link, the boards' doorbells, the next deadline).
//!   Meanwhile a command rings the doorbell as with a daemon. A driver
//!   whose turns keep finding the engine taken by the sleeper yields its
//!   core now and then (the sleeper, woken, may be waiting for that very
//!   core), and soon wakes it (`wake_engine_thread`: the shard's `Waker`,
//!   an eventfd or a futex word as the link sleeps), and the engine
//!   thread stands aside. Without that, every turn the driver tried found
//!   the engine taken until a frame or a deadline woke the sleeper (on an
//!   idle engine up to 100 ms), and the driver spun its whole spin for
//!   nothing. Not at once: on a busy server a frame wakes the sleeper
//!   within microseconds anyway, for no system call of the driver's.

use outboard_api::{Error, Result, SharedDriver};
use outboard_board::futex;
use outboard_engine::clock;
use outboard_engine::engine::Engine;
use outboard_engine::host::OwedWakes;
use outboard_engine::shard::{Waker, MAX_SLEEP, SPIN};
use outboard_time::Instant;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

/// How long the engine thread stays parked after the last turn an
/// application thread ran (see the module's notes).
pub const LEASE: Duration = Duration::from_micros(200);

/// The engine thread does not spin after its work while an application
/// thread ran a turn within this (see the module's notes).
pub const DRIVEN_RECENTLY: Duration = Duration::from_millis(10);

/// The engine thread's spin after its work lets another thread have its
/// core every this many idle turns (see the module's notes).
const YIELD_EVERY_IDLE_TURNS: u32 = 8;

/// The engine, shared (module notes).
pub struct Shared {
    /// None once the engine thread has ended (the engine is dropped there:
    /// its boards see the attach socket hang up).
    engine: Mutex<Option<Engine>>,
    /// An application thread in a wait runs turns now (one at a time: the
    /// others sleep rather than spin beside it).
    driver: AtomicBool,
    /// Moves with every turn an application thread runs.
    driven: AtomicU32,
    /// Moves (and is woken) when a driver leaves to sleep.
    handback: AtomicU32,
    /// A turn is wanted: a command was queued, or a thread found the engine busy.
    pending: AtomicBool,
    /// The engine failed (its link, or a panic in a turn) or its thread
    /// ended: every turn from now on says so, and the engine thread stops.
    failed: AtomicBool,
    /// The engine thread sleeps holding the engine, or was woken from that
    /// sleep and has not run yet (it may be waiting for a core).
    engine_thread_sleeps: AtomicBool,
    /// Gets the engine thread out of a sleep it took holding the engine
    /// (None if the shard could not make one: a driver then waits for the
    /// sleeper's next frame or deadline, as before).
    waker: Option<Arc<Waker>>,
}

impl Shared {
    pub fn new(mut engine: Engine) -> Shared {
        let waker = engine.shard_mut().waker().ok();
        // Whoever runs a turn wakes the program's threads after letting the engine go.
        engine.defer_wakes();
        Shared {
            waker,
            engine_thread_sleeps: AtomicBool::new(false),
            engine: Mutex::new(Some(engine)),
            driver: AtomicBool::new(false),
            driven: AtomicU32::new(0),
            handback: AtomicU32::new(0),
            pending: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        }
    }

    /// The engine thread's loop (the shard's own, with the protocol above):
    /// until `stop`, or until `draining` and the shard is quiescent.
    pub fn run(&self, stop: &AtomicBool, draining: &AtomicBool) {
        let mut idle_since: Option<Instant> = None;
        let mut leased = false;
        // `driven` when a driver was last seen running no turn for a whole
        // lease (descheduled, or gone: a signal handler that jumped out of
        // its wait): the engine thread runs meanwhile, until its turns move on.
        let mut stalled_at: Option<u32> = None;
        // `driven` as last looked at here, and when it was seen to have moved.
        let mut last_driven: (u32, Option<Instant>) = (self.driven.load(Ordering::Relaxed), None);
        // The last driver handed back to sleep in the kernel, and no
        // application thread drove since: the program waits for our news.
        let mut app_asleep = false;
        // Idle turns spun after work (see `YIELD_EVERY_IDLE_TURNS`).
        let mut idle_spins = 0u32;
        let mut owed = OwedWakes::default();
        loop {
            if stop.load(Ordering::Relaxed) || self.failed.load(Ordering::SeqCst) {
                break;
            }
            let driving = self.driver.load(Ordering::SeqCst) && stalled_at != Some(self.driven.load(Ordering::SeqCst));
            if leased || driving {
                let (hb, seen) = (self.handback.load(Ordering::SeqCst), self.driven.load(Ordering::SeqCst));
                futex::wait(&self.handback, hb, Some(LEASE));
                // Handed back: take over now. Else stay aside while turns still come.
                let handed_back = self.handback.load(Ordering::SeqCst) != hb;
                let moved = self.driven.load(Ordering::SeqCst) != seen;
                leased = !handed_back && moved;
                stalled_at = (!handed_back && !moved).then_some(seen);
                app_asleep = handed_back;
                // A thread that hands back has just spun its turns for the
                // engine's spin and found nothing: no second spin here, the
                // engine sleeps after its next idle turn.
                idle_since = handed_back.then(|| clock::now() - SPIN);
                continue;
            }
            let mut g = self.lock();
            let Some(e) = g.as_mut() else { break };
            if draining.load(Ordering::Relaxed) && e.shard().quiescent() {
                break;
            }
            self.pending.store(false, Ordering::SeqCst);
            let Ok(work) = e.turn() else { break };
            e.take_owed_wakes(&mut owed);
            if work || self.pending.load(Ordering::SeqCst) || !owed.is_empty() {
                idle_since = None;
                drop(g);
                let woke = !owed.is_empty();
                owed.issue();
                if woke && app_asleep {
                    std::thread::yield_now();
                }
                continue;
            }
            let now = clock::now();
            let driven = self.driven.load(Ordering::Relaxed);
            if driven != last_driven.0 {
                last_driven = (driven, Some(now));
            }
            let app_drives = last_driven.1.is_some_and(|t| now.saturating_duration_since(t) < DRIVEN_RECENTLY);
            let since = *idle_since.get_or_insert(now);
            if (!app_drives || app_asleep) && now.saturating_duration_since(since) < SPIN {
                idle_spins = idle_spins.wrapping_add(1);
                if idle_spins.is_multiple_of(YIELD_EVERY_IDLE_TURNS) {
                    drop(g);
                    std::thread::yield_now();
                }
                continue;
            }
            // Said only around the sleep: not a store per turn to a line
            // the drivers read. Cleared once this thread runs again (it lets
            // the engine go at the end of this iteration).
            self.engine_thread_sleeps.store(true, Ordering::Relaxed);
            let slept = e.idle(MAX_SLEEP);
            self.engine_thread_sleeps.store(false, Ordering::Relaxed);
            if slept.is_err() {
                break;
            }
            idle_since = None;
        }
        // Failed or stopped: every turn from now on says the engine is gone.
        self.failed.store(true, Ordering::SeqCst);
        if let Some(mut e) = self.lock().take() {
            e.shutdown();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Engine>> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SharedDriver for Shared {
    fn try_turn(&self) -> Option<Result<bool>> {
        if self.failed.load(Ordering::Relaxed) {
            return Some(Err(Error::EngineGone));
        }
        // Said before trying: a holder that finished its turn after our
        // failed try sees it and runs another (SeqCst pairs the two).
        self.pending.store(true, Ordering::SeqCst);
        // Whether a turn ran here, and whether any found work.
        let (mut ran, mut work) = (false, false);
        loop {
            let mut g = match self.engine.try_lock() {
                Ok(g) => g,
                Err(TryLockError::WouldBlock) => return ran.then_some(Ok(work)),
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
            };
            self.pending.store(false, Ordering::SeqCst);
            let Some(e) = g.as_mut() else { return Some(Err(Error::EngineGone)) };
            // A panic in the engine must not unwind into the program's
            // thread (through the shim's C entry points it would abort the
            // program): the engine is gone then, as when its own thread dies.
            let mut owed = OwedWakes::default();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let r = e.turn();
                e.shard_mut().count_app_turn();
                e.take_owed_wakes(&mut owed);
                r
            }));
            drop(g);
            owed.issue();
            self.driven.fetch_add(1, Ordering::Relaxed);
            match r {
                Ok(Ok(w)) => (ran, work) = (true, work || w),
                Ok(Err(_)) | Err(_) => {
                    self.failed.store(true, Ordering::SeqCst);
                    return Some(Err(Error::EngineGone));
                }
            }
            if !self.pending.load(Ordering::SeqCst) {
                return Some(Ok(work));
            }
        }
    }

    fn want_turn(&self) {
        self.pending.store(true, Ordering::SeqCst);
    }

    fn turn_wanted(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    fn spin(&self) -> Duration {
        SPIN
    }

    fn enter(&self) -> bool {
        self.driver.compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed).is_ok()
    }

    fn engine_thread_sleeps(&self) -> bool {
        self.engine_thread_sleeps.load(Ordering::Relaxed)
    }

    fn wake_engine_thread(&self) {
        // Woken, it stands aside: the driver is seen at its loop's top.
        if let Some(w) = &self.waker {
            w.wake();
        }
    }

    fn leave(&self, sleep: bool) {
        self.driver.store(false, Ordering::SeqCst);
        if sleep {
            self.handback.fetch_add(1, Ordering::SeqCst);
            futex::wake(&self.handback, 1);
        }
    }
}
