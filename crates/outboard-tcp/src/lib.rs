//! Outboard's TCP, sans-IO.
//!
//! Nothing here reads a clock, a socket or a random source: every input
//! carries `now`, every output is pulled (`poll_transmit`, `poll_timeout`,
//! `poll_event`). See `conn` for the call order.
//!
//! Module map:
//! - `conn`: the RFC 9293 connection state machine (one `Connection` per 4-tuple);
//! - `rtt`: RFC 6298 RTO estimation; `cc`: NewReno (RFC 5681/6582) and CUBIC (RFC 9438);
//! - `sack`: the sender's SACK scoreboard (RFC 2018, RFC 6675);
//! - `assembler`: the receiver's out-of-order range tracking;
//! - `ring`: byte ring buffers for the send and receive queues, in their own
//!   memory or in storage lent to them (`RingStorage`, a board's shared memory);
//! - `isn`: RFC 6528 initial sequence numbers; `syncookie`: SYN cookies;
//!   `fastopen`: RFC 7413 server cookies;
//! - `reset`: the RST for a segment that matches no connection.
//!
//! The per-shard connection table, listeners, SYN queue and accept queues live
//! in `outboard-stack`, which uses these pieces.

#![forbid(unsafe_code)]

pub mod assembler;
pub mod cc;
pub mod config;
pub mod conn;
pub mod fastopen;
pub mod isn;
pub mod reset;
pub mod ring;
pub mod rtt;
pub mod sack;
mod siphash;
pub mod syncookie;

pub use cc::CcKind;
pub use config::Config;
pub use conn::{ConnStats, Connection, EcnMode, Error, Event, FastOpenReport, FourTuple, IcmpError, MtuProbing, Prefilled, State, Transmit};
pub use ring::RingStorage;
