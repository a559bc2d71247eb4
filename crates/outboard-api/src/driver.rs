//! Boards on an engine in this process: attaching over a socket its attach
//! thread serves, and boards that run the engine's turns themselves. The API
//! names no engine: an engine crate (`outboard-embedded`) implements
//! [`InlineDriver`] and hands over the socket.

use crate::{AttachOptions, Board, Result};
use std::cell::RefCell;
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// An engine that a board runs in the calling thread (Onload-style): every
/// wait of a board attached with [`Board::attach_inline`] and every command
/// it queues runs the engine's turns here instead of waking an engine thread.
pub trait InlineDriver {
    /// Runs one turn of the engine; true if it did work. An error means the
    /// engine is gone (the board then returns `Error::EngineGone`).
    fn turn(&mut self) -> Result<bool>;
    /// Nothing to do for a while: sleeps as the engine's own loop would (on
    /// its link and its boards' doorbells), at most `longest`.
    fn idle(&mut self, longest: Duration) -> Result<()>;
}

/// An engine that has a thread of its own and that the application's
/// threads may also run while they wait (the socket shim's in-process
/// engine). One thread runs it at a time: the
/// others go on without waiting for it.
pub trait SharedDriver: Send + Sync {
    /// Runs one turn in the calling thread if no other thread runs the
    /// engine now (`None`: one does, and runs another turn when it is done,
    /// so what the caller queued is not left behind); `Some(Ok(work))`.
    fn try_turn(&self) -> Option<Result<bool>>;
    /// A command was queued: a turn is wanted. It runs at the queuing
    /// thread's next wait (`turn_wanted`, then `try_turn`), in the turn of
    /// whichever thread runs the engine meanwhile, or in the engine thread's.
    /// Not at once: a server that answers a batch of requests between two
    /// waits sends the batch in one turn (one kick of the link, which on
    /// AF_XDP is a system call).
    fn want_turn(&self);
    /// Whether a turn is wanted (see `want_turn`).
    fn turn_wanted(&self) -> bool;
    /// How long a waiting thread runs turns before it sleeps: the engine
    /// thread's own spin, which it stands in for.
    fn spin(&self) -> Duration;
    /// The calling thread waits and would run the engine's turns while it
    /// does (`try_turn`). True: it drives (the engine thread stands aside
    /// meanwhile) and calls `leave` when it stops. False: another thread
    /// drives already, and this one should sleep at once rather than spin
    /// beside it (the driver's turns wake it as the engine's would).
    fn enter(&self) -> bool;
    /// Whether the engine thread sleeps holding the engine, or was woken
    /// from that sleep and has not let it go yet (it may be waiting for a
    /// core): a driver whose turns keep finding the engine taken then
    /// yields its core rather than spin.
    fn engine_thread_sleeps(&self) -> bool;
    /// Gets the engine thread out of the sleep it takes holding the engine
    /// (if it sleeps, or is about to), so that it lets the driver have it.
    fn wake_engine_thread(&self);
    /// The calling thread stopped waiting: with news (`sleep` false: it
    /// will likely wait again soon, and the engine thread keeps standing
    /// aside a little longer) or to sleep in the kernel (`sleep` true: the
    /// engine thread takes over at once).
    fn leave(&self, sleep: bool);
}

impl Board {
    /// Attaches over `sock`, a connected socket served by an engine's attach
    /// thread (an engine in this process hands one out per board).
    /// `keep_alive` is held as long as the board lives (e.g. what keeps the
    /// engine's threads running).
    pub fn attach_socket(sock: UnixStream, opts: &AttachOptions, keep_alive: Option<Arc<dyn std::any::Any>>) -> Result<Board> {
        Board::handshake(sock, opts, keep_alive)
    }

    /// Attaches over `sock` as [`Board::attach_socket`] does; the board then
    /// drives `driver` in the calling thread whenever it waits or queues a
    /// command (see [`InlineDriver`]). The board and the driver stay on this thread.
    pub fn attach_inline(sock: UnixStream, opts: &AttachOptions, driver: Rc<RefCell<dyn InlineDriver>>) -> Result<Board> {
        let b = Board::handshake(sock, opts, None)?;
        b.inner.borrow_mut().driver = Some(driver);
        Ok(b)
    }

    /// Attaches as [`Board::attach_socket`] does, to an engine whose
    /// threads and the application's share it (see [`SharedDriver`]): each
    /// command asks for a turn (`SharedDriver::want_turn`).
    pub fn attach_shared(
        sock: UnixStream,
        opts: &AttachOptions,
        keep_alive: Option<Arc<dyn std::any::Any>>,
        driver: Arc<dyn SharedDriver>,
    ) -> Result<Board> {
        let b = Board::handshake(sock, opts, keep_alive)?;
        b.inner.borrow_mut().shared = Some(driver);
        Ok(b)
    }
}
