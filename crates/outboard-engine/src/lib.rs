//! Outboard's engine: a stack on a link, run to completion by a shard.
//!
//! # Map
//!
//! - [`shard`]: the loop. Each turn: receive a burst from the link → the
//!   stack demultiplexes and runs the protocols → expired timers (the stack
//!   indexes them in the hierarchical [`timer_wheel`]) → the shard's apps →
//!   transmit a burst, building each frame in the link's own slot → flush.
//!   Idle: spin briefly, then sleep on the link (and the control doorbell
//!   and the apps' wake sources) until the next deadline.
//! - [`app`]: the seam. Everything that runs on a shard — built-in
//!   [`services`], board sessions ([`host`]), [`client`] fetches, and the
//!   kinds to come — is a `ShardApp`, driven the same way, with one table
//!   from connection to owner.
//! - [`messages`]: the native message protocols (`outboard_msg`) on a UDP
//!   port of shard 0, with the built-in `echo` and `sink` mailboxes and the
//!   `outboard msg` client.
//! - [`link`]: the `Link` trait and its kinds: `af_xdp`, `af_packet`, `tap`,
//!   `fabric` (shared memory between engine processes, seeded faults).
//! - [`engine`]: settings → a started engine (link, stack, services, control
//!   socket, capture), with errors that map to exit codes and hints.
//! - [`control`] + [`stat`]: the Unix control socket and the snapshot
//!   `outboard stat` renders; [`capture`]: `--pcap`; [`log`]: logfmt events.
//! - [`steering`]: which shard owns a frame, and the rings between shards
//!   of a multi-shard engine; [`cpu`]: pinning shards to cores.
//! - [`upgrade`]: live upgrade, a new engine binary taking over the link,
//!   sockets and settings of a running one through its control socket.
//! - [`clock`], [`signals`]: the only places that read the clock or install
//!   signal handlers; protocol code gets time passed in.

// Unsafe code is allowed only in `link` (rings, shared memory, syscalls).
#![deny(unsafe_code)]

pub mod app;
pub mod capture;
pub mod client;
#[allow(unsafe_code)]
pub mod clock;
pub mod control;
#[allow(unsafe_code)]
pub mod cpu;
pub mod engine;
pub mod kernel;
#[allow(unsafe_code)]
pub mod host;
#[allow(unsafe_code)]
pub mod link;
pub mod log;
pub mod messages;
pub mod services;
pub mod shard;
#[allow(unsafe_code)]
pub mod signals;
pub mod stat;
pub mod steering;
pub mod tcp_handlers;
#[allow(unsafe_code)]
pub mod upgrade;

/// The hierarchical timer wheel lives in `outboard-time` so the stack can index its timers with it.
pub use outboard_time::timer_wheel;
pub use outboard_time::TimerWheel;
