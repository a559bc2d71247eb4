//! Arbitrary segments into a live connection (see `support/segment_driver.rs`,
//! shared with the `tcp_connection` fuzz target): whatever arrives, a
//! connection never panics, never spins, and its output stays well-formed.
//! And a transfer over a network the input controls (`support/transfer_driver.rs`):
//! every byte read is the byte sent, and once faults stop both streams complete.

mod support;

use proptest::prelude::*;
use support::segment_driver::run;
use support::transfer_driver::run_transfer;

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

#[test]
fn transfer_over_a_perfect_network_completes_both_ways() {
    // Config 0 (NewReno, all options), 4*0x4000 bytes one way and 0x2000 the other, no faults.
    let s = run_transfer(&[0, 0x00, 0x40, 0x00, 0x20]);
    assert!(!s.timed_out);
    assert!(s.settle_rounds < 200, "a clean 80 KiB exchange took {} rounds", s.settle_rounds);
    assert_eq!(s.streams[0].read, 0x10000);
    assert_eq!(s.streams[1].read, 0x2000);
}

#[test]
fn transfer_with_cubic_and_no_options_completes() {
    // Config: CUBIC, no SACK, no timestamps, no window scaling, 536-byte MSS.
    let s = run_transfer(&[1 | 2 | 4 | 8 | 32, 0xff, 0x3f, 0x34, 0x12]);
    assert!(!s.timed_out);
    assert_eq!(s.streams[0].read, 0x3fff * 4);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn transfer_under_arbitrary_faults_is_exact_and_completes(data in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let s = run_transfer(&data);
        if !s.timed_out {
            for st in &s.streams {
                prop_assert_eq!(st.read, st.total);
                prop_assert!(st.eof);
            }
        }
    }
}

/// Found by `transfer_under_arbitrary_faults_is_exact_and_completes` while the
/// connection was being written: both streams stalled on a perfect network
/// after drops, duplicates and held-back segments.
#[test]
fn regression_two_way_transfer_stalled_after_faults() {
    let s = run_transfer(&[
        20, 0, 13, 0, 6, 44, 48, 2, 88, 188, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 16, 2, 2, 20, 44, 2, 2, 42, 5,
        11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 30, 89, 144, 0, 20, 6, 0, 20, 48, 20, 0, 34, 0, 10, 127, 90, 48, 6, 0,
        148, 50, 10, 19, 193,
    ]);
    assert!(!s.timed_out);
    assert!(s.streams.iter().all(|st| st.eof && st.read == st.total), "{s:?}");
}
