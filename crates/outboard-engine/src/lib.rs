//! Outboard's engine runtime: the pure, I/O-free building blocks of a shard.
//!
//! # What is built
//!
//! - [`timer_wheel`]: a hierarchical timing wheel keyed by caller-chosen
//!   `u64` tokens (O(1) insert and cancel, overflow list for far deadlines).
//! - [`pool`]: buffer pools in fixed size classes with free-list reuse, a hard
//!   memory cap across classes, counters, and a watermark-derived
//!   [`pool::Pressure`] a shard uses to shed load.
//! - [`steer`]: the Toeplitz RSS hash (Microsoft key, checked against the
//!   published verification vectors), `shard_for`, and `pick_source_port`
//!   so that `connect()` picks a source port whose flow hashes to the
//!   caller's shard (DESIGN.md item 5).
//!
//! None of these reads a clock, does I/O or draws randomness: time arrives as
//! [`outboard_time::Instant`], memory pressure and steering are functions of
//! their inputs.
//!
//! # The plan: the shard loop these serve (NOT BUILT YET — what comes next)
//!
//! One shard per core, run to completion, nothing shared on the fast path:
//!
//! 1. **Receive** a burst of frames from the link; **demultiplex** each by
//!    its 4-tuple in the shard's flow table (flows arrive here because NIC
//!    RSS, or a software steering stage using [`steer::shard_for`], sent
//!    them here); run **protocol** processing; **deliver** payload to the
//!    owning application's mailbox, copying once into a [`pool`] buffer.
//! 2. **Drain** the application command rings (doorbells): connect (with a
//!    source port from [`steer::pick_source_port`]), send, close; run the
//!    protocol; **transmit** the resulting burst.
//! 3. **Expire timers**: `advance(now)` on the [`timer_wheel::TimerWheel`]
//!    and hand each fired token to its connection.
//! 4. **Idle**: if the iteration did no work, spin briefly, then sleep on
//!    the link and the doorbells until the wheel's `next_deadline()`.
//!
//! Under [`pool::Pressure::Low`] the shard stops accepting new connections
//! and shrinks advertised windows; under `Critical` it drops new inbound
//! data before it costs memory.

// Unsafe code is allowed only in `link` (rings, shared memory, syscalls).
#![deny(unsafe_code)]

pub mod capture;
pub mod client;
#[allow(unsafe_code)]
pub mod clock;
pub mod control;
pub mod engine;
#[allow(unsafe_code)]
pub mod link;
pub mod log;
pub mod pool;
pub mod services;
pub mod shard;
#[allow(unsafe_code)]
pub mod signals;
pub mod stat;
pub mod steer;
pub mod timer_wheel;

pub use pool::{Buffer, BufferPool, PoolConfig, PoolError, PoolStats, Pressure};
pub use steer::{pick_source_port, shard_for, FlowTuple, Steering, MICROSOFT_RSS_KEY};
pub use timer_wheel::TimerWheel;
