//! `outboard bench …`: programs that measure ours beside the alternative in one run.

pub mod checksum;
pub mod link;
