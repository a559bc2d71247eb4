//! Arbitrary segments into a live connection: a client/server pair is brought
//! to ESTABLISHED through the public API, then the fuzzer's bytes choose
//! made-up and mangled segments, network behaviour, timer jumps and
//! application calls (`segment_driver`). When the first byte is odd, they
//! instead drive a two-way transfer over a faulty network whose delivered
//! bytes are checked exactly (`transfer_driver`). Both drivers are shared
//! with the proptests in `crates/outboard-tcp/tests/arbitrary_segments.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/outboard-tcp/tests/support/segment_driver.rs"]
#[allow(dead_code)]
mod segment_driver;
#[path = "../../crates/outboard-tcp/tests/support/transfer_driver.rs"]
#[allow(dead_code)]
mod transfer_driver;

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((mode, rest)) if mode & 1 == 1 => {
            let _ = transfer_driver::run_transfer(rest);
        }
        _ => {
            let _ = segment_driver::run(data.get(1..).unwrap_or(&[]));
        }
    }
});
