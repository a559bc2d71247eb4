//! The board: the memory one application shares with the engine
//! (DESIGN.md item 6; the Nectar CAB's host interface, CLAN's tripwires).
//!
//! # Map
//!
//! - [`shm`]: a shared mapping (memfd, or anonymous shared for tests) with
//!   bounds-checked, volatile access to plain-data records and atomics at
//!   offsets. The crate's `unsafe` is here, in [`futex`] and [`wake`] (syscall
//!   wrappers) and in [`attach`] (SCM_RIGHTS), each block with its `SAFETY`.
//! - [`layout`]: where everything sits in a board, computed from
//!   [`layout::BoardParams`]; the engine computes it once and never reads it
//!   back from the board.
//! - [`ring`]: single-producer single-consumer rings of fixed-size records
//!   with two-phase operations (`begin_put`/`end_put`, `begin_get`/`end_get`).
//!   The doorbells are two of them: the application's command ring to the
//!   engine, the engine's event ring back.
//! - [`mailbox`]: rings of [`mailbox::Descriptor`]s into the arena, with
//!   `begin_put`/`end_put`/`begin_get`/`end_get`, `enqueue` (move a message to
//!   another mailbox without copying) and `adjust` (trim in place).
//! - [`arena`]: the buffers, in size classes; free lists and the owner table
//!   (who holds each buffer) are private to each side, never in the board.
//! - [`condition`]: a sequence word; `wait` polls it, then sleeps on a futex
//!   in the board; `signal` wakes only when someone sleeps.
//! - [`sync`]: one-word results written once and read once, cancellable.
//! - [`proto`]: the command and event records; [`command`]: commands as
//!   typed values (`decode`, total, for the engine; `encode` for applications).
//! - [`addr`]: family-neutral socket addresses (`NetAddr`) as every record carries them.
//! - [`attach`]: the attach handshake (with the layout version check), and
//!   where a daemon engine's board socket is (`RUN_DIR/NAME.board`).
//! - [`wake`]: ringing an eventfd (the engine's doorbell, an application's
//!   wake descriptor).
//!
//! # Trust
//!
//! The engine treats every byte of a board as hostile: records are copied
//! out (volatile reads) before they are checked, indices read from the board
//! are checked against the engine's own copy of the layout, and nothing in a
//! board is ever followed as a pointer. Bytes of payload are plain data: the
//! other side may change them at any time, which can only garble its own data.

pub mod access;
pub mod addr;
pub mod arena;
pub mod attach;
pub mod command;
pub mod condition;
pub mod futex;
pub mod layout;
pub mod mailbox;
pub mod proto;
pub mod ring;
pub mod shm;
pub mod sync;
pub mod wake;

pub use addr::NetAddr;
pub use arena::{ArenaLayout, BufRef, ClassSpec, FreeList, OwnerTable, Side};
pub use condition::{Condition, WaitOutcome};
pub use layout::{BoardLayout, BoardParams, EndpointStatus};
pub use mailbox::{Descriptor, MailboxConsumer, MailboxProducer};
pub use command::{BoardCommand, CommandViolation};
pub use proto::{Command, Event};
pub use ring::{Consumer, Producer, RingError};
pub use shm::{Mapping, Pod};
pub use sync::{SyncState, SyncTable};
