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
}
