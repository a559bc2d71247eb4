//! Seeded impairment, pure logic over (time, frame): the simulator's links,
//! the engine's shared-memory fabric and the lab's relay all use this one
//! injector, so an impairment seen in one reproduces in the others from its
//! seed.

#![forbid(unsafe_code)]

pub mod fault;
pub mod rng;

pub use fault::{FaultConfig, FaultInjector, FaultStats};
pub use rng::{ByteStream, Rng, SplitMix64};
