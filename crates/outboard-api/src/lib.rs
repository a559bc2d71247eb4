//! Outboard's native API: an application's side of a board.
//!
//! An application attaches to an engine ([`Board::attach`] for a daemon
//! `outboard engine --name N`; the crate `outboard-embedded` for the engine
//! as threads in this process, `EmbeddedEngine`, or run by the application's
//! own thread whenever it waits, `InlineEngine`) and gets a [`Board`]:
//! shared memory with the engine. This crate links only the board's contract
//! (`outboard-board`), never the engine: an engine in this process attaches
//! boards through [`Board::attach_socket`] and [`Board::attach_inline`]
//! (with an [`InlineDriver`]).
//! Through it: [`Listener`]s, [`Stream`]s and [`Datagram`] sockets; copying
//! `send`/`recv` and zero-copy `begin_put`/`end_put`/`begin_get`/`end_get`
//! (the bytes are read and written in place in the board; the engine copies
//! them once to or from the wire); three wait [`Mode`]s; and one
//! [`EventQueue`] over many endpoints.
//!
//! A board is used from one thread (it is `!Send`); attach one board per
//! thread that talks to the engine.
//!
//! Every call returns [`Error::EngineGone`] once the engine has died (within
//! a second of its death, whether the call was blocked or made later).

mod board;
mod datagram;
mod driver;
mod error;
mod events;
mod handler;
mod info;
mod listener;
mod mailbox;
mod qp;
mod stream;

pub use board::{AttachOptions, Board, ConnectOptions, CopyCounters, Edges, Mode, News, PendingConnect, WaitCounters};
pub use datagram::Datagram;
pub use driver::{InlineDriver, SharedDriver};
pub use error::{Error, Result};
pub use events::{EventQueue, Interest, Readiness, Ready};
pub use handler::HandlerOptions;
pub use info::*;
pub use listener::Listener;
pub use mailbox::{Mailbox, MailboxAddr, MailboxOptions, Message, MessageKind, Region, Tag};
pub use qp::{Completion, CompletionQueue, QueuePair, WorkOp};
pub use outboard_board::command::{ListenFamily, ListenFlags};
pub use stream::Stream;

/// The endpoint id of a listener, stream or datagram socket (its slot in the board).
pub type EndpointId = u32;
