//! `outboard bench …`: programs that measure ours beside the alternative in one run.

pub mod apps;
pub mod checksum;
pub mod latency;
pub mod link;
pub mod peer;
pub mod plot;
pub mod throughput;
