//! Packet formats for Outboard.
//!
//! Each format has a zero-copy view `XxxPacket<T: AsRef<[u8]>>` with byte
//! ranges in a `field` module, `new_checked` (after which no accessor panics),
//! and a plain `XxxRepr` with `parse`/`emit`/`buffer_len`. Parsing is total:
//! any byte string yields a value or a typed [`Error`], never a panic.
//! No I/O and no allocation on the hot path.

#![forbid(unsafe_code)]

pub mod seq;
pub mod tcp;

pub use seq::SeqNumber;
pub use tcp::{SackBlocks, TcpFlags, TcpOptions, TcpRepr};
