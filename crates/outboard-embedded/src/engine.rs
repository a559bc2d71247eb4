//! The engine in this process: the same `Engine` the daemon runs, started
//! with in-process attachment only (no sockets in the file system); boards
//! attach through a socket pair served by its attach thread. Either the
//! engine has threads of its own (`EmbeddedEngine`) or its boards run it in
//! the application's thread (`InlineEngine`).

use crate::shared::Shared;
use outboard_api::{AttachOptions, Board, Error, InlineDriver, Result, SharedDriver};
use outboard_engine::engine::{BoardAttach, Engine, EngineError, EngineSettings, Prepared};
use outboard_engine::host::LocalAttacher;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct Running {
    stop: Arc<AtomicBool>,
    /// Set by `linger`: the engine stops by itself once shard 0 is quiescent.
    draining: Arc<AtomicBool>,
    /// Says when the engine thread has ended (for `linger`'s deadline).
    ended: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The engine as threads inside this process (same engine code as the
/// daemon); applications in this process attach to it with `attach`.
pub struct EmbeddedEngine {
    attacher: LocalAttacher,
    running: Arc<Running>,
    /// Set by `start_shared`.
    shared: Option<Arc<Shared>>,
}

impl EmbeddedEngine {
    /// Starts the engine (link, stack, shard thread). `settings.control`
    /// decides whether `outboard stat --name` can see it.
    pub fn start(settings: EngineSettings) -> Result<EmbeddedEngine> {
        EmbeddedEngine::start_with(settings, || {})
    }

    /// As `start`; `thread_init` runs first in the engine thread (the
    /// socket shim marks it as its own there, so the engine's system calls
    /// bypass its interposers).
    pub fn start_with(settings: EngineSettings, thread_init: impl FnOnce() + Send + 'static) -> Result<EmbeddedEngine> {
        EmbeddedEngine::spawn(settings, thread_init, false, None)
    }

    /// As `start_with`, the engine shared between its thread and the
    /// application's threads that wait or queue commands (`crate::shared`,
    /// Onload's model): boards attached here run turns themselves
    /// ([`outboard_api::SharedDriver`], see [`EmbeddedEngine::driver`]).
    /// An engine of several shards runs as `start_with` does.
    pub fn start_shared(settings: EngineSettings, thread_init: impl FnOnce() + Send + 'static) -> Result<EmbeddedEngine> {
        let shared = settings.shards <= 1;
        EmbeddedEngine::spawn(settings, thread_init, shared, None)
    }

    /// Opens what the engine needs privileges for, starting nothing
    /// ([`outboard_engine::engine::Prepared`]): call it before the process
    /// drops them, and start the engine later with `start_prepared`, in this
    /// process or in a child forked meanwhile.
    pub fn prepare(settings: &EngineSettings) -> Result<Prepared> {
        let mut settings = settings.clone();
        settings.boards = BoardAttach::Embedded;
        Engine::prepare(&settings).map_err(start_error)
    }

    /// As `start_with` (`shared`: as `start_shared`), on what `prepare` opened with the same settings.
    pub fn start_prepared(
        settings: EngineSettings,
        prepared: Prepared,
        thread_init: impl FnOnce() + Send + 'static,
        shared: bool,
    ) -> Result<EmbeddedEngine> {
        let share = shared && settings.shards <= 1;
        EmbeddedEngine::spawn(settings, thread_init, share, Some(prepared))
    }

    fn spawn(
        mut settings: EngineSettings,
        thread_init: impl FnOnce() + Send + 'static,
        share: bool,
        prepared: Option<Prepared>,
    ) -> Result<EmbeddedEngine> {
        settings.boards = BoardAttach::Embedded;
        let stop = Arc::new(AtomicBool::new(false));
        let draining = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let (ended_tx, ended_rx) = std::sync::mpsc::channel::<()>();
        let (stop2, draining2) = (stop.clone(), draining.clone());
        // The application's signals are for its own threads: the engine
        // thread starts with every signal blocked (it inherits the mask).
        let old_mask = block_signals();
        let thread = std::thread::Builder::new()
            .name(format!("outboard-shard-{}", settings.name))
            .spawn(move || {
                let _ended = ended_tx;
                thread_init();
                let started = match prepared {
                    Some(p) => Engine::start_prepared(&settings, p),
                    None => Engine::start(&settings),
                };
                let mut engine = match started {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = tx.send(Err(error_text(&e)));
                        return;
                    }
                };
                let Some(attacher) = engine.local_attacher() else {
                    let _ = tx.send(Err("engine started without boards".to_string()));
                    return;
                };
                if !share {
                    if tx.send(Ok((attacher, None))).is_ok() {
                        let _ = engine.run(&stop2, |shard| draining2.load(Ordering::Relaxed) && shard.quiescent());
                    }
                    return;
                }
                let shared = Arc::new(Shared::new(engine));
                if tx.send(Ok((attacher, Some(shared.clone())))).is_ok() {
                    shared.run(&stop2, &draining2);
                }
            });
        restore_signals(&old_mask);
        let thread = thread.map_err(|e| Error::Attach(format!("cannot start the engine thread: {e}")))?;
        let (attacher, shared) = match rx.recv() {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(Error::Attach(e));
            }
            Err(_) => {
                let _ = thread.join();
                return Err(Error::Attach("the engine thread died while starting".into()));
            }
        };
        let running = Running { stop, draining, ended: std::sync::Mutex::new(ended_rx), thread: Some(thread) };
        Ok(EmbeddedEngine { attacher, running: Arc::new(running), shared })
    }

    /// The engine's turns for the application's threads to run, when it
    /// was started with `start_shared`.
    pub fn driver(&self) -> Option<Arc<dyn SharedDriver>> {
        self.shared.clone().map(|s| s as Arc<dyn SharedDriver>)
    }

    /// A board on this engine. The engine keeps running while any board
    /// attached here lives, even after this handle is dropped.
    pub fn attach(&self, opts: &AttachOptions) -> Result<Board> {
        let sock = self.attacher.attach().map_err(|e| Error::Attach(format!("socket pair: {e}")))?;
        let keep = Some(self.running.clone() as Arc<dyn std::any::Any>);
        match self.driver() {
            Some(d) => Board::attach_shared(sock, opts, keep, d),
            None => Board::attach_socket(sock, opts, keep),
        }
    }
    /// From now on the engine stops by itself once quiescent (see `linger`,
    /// which also does this): call it before detaching the last boards, so
    /// the engine cannot process the detach and go to sleep unaware.
    pub fn drain_when_quiescent(&self) {
        self.running.draining.store(true, Ordering::Relaxed);
    }

    /// Lets the engine finish what applications left it, then stop: it runs
    /// until no board is attached and no connection has data or a FIN still
    /// to send or to be acknowledged (`Shard::quiescent`), at most `limit`.
    /// Boards should be detached first (dropped, or `Board::detach`): their
    /// streams are then closed gracefully. True when the engine finished
    /// within `limit` (false: it is stopped anyway).
    pub fn linger(&self, limit: Duration) -> bool {
        self.drain_when_quiescent();
        let finished = match self.running.ended.lock() {
            Ok(rx) => !matches!(rx.recv_timeout(limit), Err(std::sync::mpsc::RecvTimeoutError::Timeout)),
            Err(_) => false,
        };
        self.running.stop.store(true, Ordering::Relaxed);
        finished
    }

    /// Stops the engine threads now (attached boards then get `EngineGone`).
    pub fn stop(self) {
        self.running.stop.store(true, Ordering::Relaxed);
    }
}

/// An engine's start error with its hint, as the daemon prints it.
fn error_text(e: &EngineError) -> String {
    match e.hint() {
        "" => e.to_string(),
        hint => format!("{e} ({hint})"),
    }
}

fn start_error(e: EngineError) -> Error {
    Error::Attach(error_text(&e))
}

/// Blocks every signal in the calling thread; returns the mask it had.
fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by sigfillset/pthread_sigmask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        old
    }
}

fn restore_signals(old: &libc::sigset_t) {
    // SAFETY: a mask pthread_sigmask returned.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

/// The engine in the application's own thread (Onload-style): no engine
/// thread at all; every call of a board attached here that waits, and every
/// command, runs the engine's turns in the calling thread. In `Polling`
/// mode a wait never leaves user space; in `Blocking` mode an idle wait
/// sleeps as the engine's loop would (on the link and the board doorbells).
/// Same engine code as the daemon and `EmbeddedEngine`; single-threaded:
/// the engine and its boards stay on the thread that started it.
pub struct InlineEngine {
    engine: Rc<RefCell<Inline>>,
    attacher: LocalAttacher,
}

/// The engine as its boards drive it.
struct Inline(Engine);

impl InlineDriver for Inline {
    fn turn(&mut self) -> Result<bool> {
        self.0.turn().map_err(|_| Error::EngineGone)
    }
    fn idle(&mut self, longest: Duration) -> Result<()> {
        self.0.idle(longest).map_err(|_| Error::EngineGone)
    }
}

impl InlineEngine {
    pub fn start(mut settings: EngineSettings) -> Result<InlineEngine> {
        settings.boards = BoardAttach::Embedded;
        let engine = Engine::start(&settings).map_err(start_error)?;
        let attacher = engine.local_attacher().ok_or_else(|| Error::Attach("engine started without boards".into()))?;
        Ok(InlineEngine { engine: Rc::new(RefCell::new(Inline(engine))), attacher })
    }
    /// A board driven by this engine.
    pub fn attach(&self, opts: &AttachOptions) -> Result<Board> {
        let sock = self.attacher.attach().map_err(|e| Error::Attach(format!("socket pair: {e}")))?;
        Board::attach_inline(sock, opts, self.engine.clone())
    }
    /// Runs one engine turn now (for applications that have nothing to wait on). True if it did work.
    pub fn poll(&self) -> Result<bool> {
        self.engine.borrow_mut().turn()
    }
}

impl Drop for InlineEngine {
    fn drop(&mut self) {
        // Boards still attached keep the engine (and run it); only the last user stops it.
        if Rc::strong_count(&self.engine) == 1 {
            if let Ok(mut e) = self.engine.try_borrow_mut() {
                e.0.shutdown();
            }
        }
    }
}
