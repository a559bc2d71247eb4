//! Arbitrary frames into a live per-shard stack: raw bytes, and frames of
//! every kind built around valid headers (checksums correct, so they reach
//! ARP, reassembly, ICMP, UDP, listeners, SYN cookies and connections),
//! aimed at the stack's own live TCP state, mixed with timer jumps and
//! application calls. The driver is shared with the proptest
//! `crates/outboard-stack/tests/props.rs`; it asserts that nothing panics,
//! `poll_transmit` ends with frames within the MTU, and memory stays bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/outboard-stack/tests/support/frame_driver.rs"]
#[allow(dead_code)]
mod frame_driver;

fuzz_target!(|data: &[u8]| {
    let _ = frame_driver::run(data);
});
