//! Arbitrary segments into a live connection: a client/server pair is brought
//! to ESTABLISHED through the public API, then the fuzzer's bytes choose
//! made-up and mangled segments, network behaviour, timer jumps and
//! application calls. The driver is shared with the proptest
//! `crates/outboard-tcp/tests/arbitrary_segments.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/outboard-tcp/tests/support/segment_driver.rs"]
#[allow(dead_code)]
mod segment_driver;

fuzz_target!(|data: &[u8]| {
    let _ = segment_driver::run(data);
});
