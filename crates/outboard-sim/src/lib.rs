//! Outboard's deterministic simulator.
//!
//! N hosts, each running the real `outboard_stack::Stack`, exchange Ethernet
//! frames over seeded faulty links on a virtual clock. Nothing reads the wall
//! clock or an OS random source: one `u64` seed fixes every byte of a run, so
//! a failure reported with its seed replays exactly (`outboard sim transfer
//! --seed N ...`, or `run_transfer` with the same `TransferConfig`).
//!
//! Module map:
//! - `rng`: xoshiro256** seeded by splitmix64, and a cuttable byte stream for test data;
//! - `clock`: the virtual clock and the (time, seq)-ordered event queue;
//! - `fault`: `FaultInjector`, one link direction's loss / duplication /
//!   reordering / corruption / delay / jitter / bandwidth-queue model;
//! - `network`: hosts joined by per-pair faulty links, stepped event by event;
//! - `msg`: hosts running the message protocols (`outboard_msg::Endpoint` on the stack's UDP);
//! - `sharded`: a multi-shard host (N stacks behind the engine's steering function);
//! - `pcap`: an in-memory pcap encoder for a network tap (virtual timestamps);
//! - `transfer`: the bulk-transfer scenario behind `outboard sim` and the test matrix.
//!
//! Tests (`tests/`): `matrix` (7 fault cases × 50 seeds × 2 congestion
//! controllers, 64 MiB each way; about 0.4 CPU-seconds a run, 2.5–4 minutes on
//! two cores), `mathis`, `determinism`, `failure`, `nhost`, `udp`,
//! `slow_reader`, `outage`, `variants`, `random_faults` (proptest over fault
//! mixes), `messages` (the message services' seeds × faults matrix and failure cases), `shards` (a 4-shard host under the fault cases) and
//! `regressions` (failing seeds kept by name).

#![forbid(unsafe_code)]

pub mod clock;
pub mod msg;
pub mod network;
pub mod sharded;
pub mod transfer;

pub use clock::{EventQueue, VirtualClock};
pub use outboard_impair::{fault, rng};
pub use outboard_wire::pcap;
pub use fault::{FaultConfig, FaultInjector, FaultStats};
pub use network::{Endpoint, NetStats, Network, StackNetConfig, Step};
pub use sharded::ShardedHost;
pub use rng::{ByteStream, Rng, SplitMix64};
pub use transfer::{
    run_transfer, run_transfer_pcap, run_transfer_with, Direction, Progress, TransferConfig,
    TransferReport,
};
