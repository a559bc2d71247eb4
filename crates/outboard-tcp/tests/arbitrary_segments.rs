//! Arbitrary segments into a live connection (see `support/segment_driver.rs`,
//! shared with the `tcp_connection` fuzz target): whatever arrives, a
//! connection never panics, never spins, and its output stays well-formed.

mod support;

use proptest::prelude::*;
use support::segment_driver::run;

#[test]
fn empty_program_establishes_and_settles() {
    let s = run(&[]);
    assert_eq!(s.client_state, Some(outboard_tcp::State::Established));
    assert_eq!(s.server_state, Some(outboard_tcp::State::Established));
}

#[test]
fn every_feature_combination_establishes() {
    for cfg_byte in 0..128u8 {
        run(&[cfg_byte]);
    }
}

#[test]
fn relay_heavy_program_with_app_traffic() {
    // Both sides send and relay back and forth, with time advancing in between.
    let mut prog = vec![0u8];
    for i in 0..200u8 {
        let side = i & 1;
        prog.extend_from_slice(&[(6 << 1) | side, 0x00, 0x10]); // send 4096 bytes
        prog.extend_from_slice(&[(5 << 1) | side, 15, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3]);
        prog.extend_from_slice(&[(5 << 1) | (side ^ 1), 15, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3]);
        prog.extend_from_slice(&[(7 << 1) | side, 0x00, 0x20]); // read up to 8192
        prog.extend_from_slice(&[(4 << 1) | side, 50, 0]); // +50 ms
    }
    let summary = run(&prog);
    assert!(summary.bytes_read > 100_000, "the relay program must move data: {summary:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_segments_never_break_a_connection(data in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let s = run(&data);
        prop_assert!(s.steps <= data.len());
    }
}
