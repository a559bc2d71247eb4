//! The TCP option rules of the protocol core, one test per option, named after
//! it (the map from rule to test is docs/TESTS.md): MSS, window scale,
//! SACK-permitted, SACK blocks, timestamps (RFC 9293 §3.2, RFC 7323 §2.2/§3.2,
//! RFC 2018 §2/§3), NOP/EOL, and unknown options skipped by their length.

use crate::tcp::options::kind;
use crate::{SackBlocks, SeqNumber, TcpOptions};
use proptest::prelude::*;

fn emit(o: &TcpOptions) -> Vec<u8> {
    let mut b = vec![0u8; o.buffer_len()];
    let n = o.emit(&mut b).expect("buffer sized by buffer_len");
    assert_eq!(n, b.len());
    assert_eq!(n % 4, 0, "options end on a 32-bit boundary");
    b
}

fn blocks(n: u32) -> SackBlocks {
    let mut s = SackBlocks::new();
    for i in 0..n {
        s.push(SeqNumber(1000 + 3000 * i), SeqNumber(2000 + 3000 * i));
    }
    s
}

#[test]
fn rfc9293_3_2_mss_option_is_kind_2_length_4_and_round_trips() {
    let o = TcpOptions { mss: Some(1460), ..TcpOptions::default() };
    assert_eq!(emit(&o), [2, 4, 0x05, 0xb4]);
    assert_eq!(TcpOptions::parse(&[2, 4, 0x05, 0xb4]).mss, Some(1460));
    assert_eq!(TcpOptions::parse(&[2, 3, 5]).mss, None, "MSS must be 4 bytes: ignored otherwise");
}

#[test]
fn rfc7323_2_2_window_scale_option_is_kind_3_length_3_and_round_trips() {
    let o = TcpOptions { window_scale: Some(7), ..TcpOptions::default() };
    assert_eq!(emit(&o), [1, 3, 3, 7]);
    assert_eq!(TcpOptions::parse(&[3, 3, 14, 0]).window_scale, Some(14));
    // The shift above 14 is parsed as sent; the connection clamps it (§2.3).
    assert_eq!(TcpOptions::parse(&[3, 3, 200, 0]).window_scale, Some(200));
    assert_eq!(TcpOptions::parse(&[3, 4, 7, 0]).window_scale, None);
}

#[test]
fn rfc2018_2_sack_permitted_option_is_kind_4_length_2_and_round_trips() {
    let o = TcpOptions { sack_permitted: true, ..TcpOptions::default() };
    assert_eq!(emit(&o), [1, 1, 4, 2]);
    assert!(TcpOptions::parse(&[4, 2, 0, 0]).sack_permitted);
    assert!(!TcpOptions::parse(&[1, 1, 1, 0]).sack_permitted);
    assert!(!TcpOptions::parse(&[4, 3, 0]).sack_permitted);
}

#[test]
fn rfc2018_3_sack_option_carries_one_to_four_blocks_of_8_bytes() {
    for n in 1..=4 {
        let o = TcpOptions { sack: blocks(n), ..TcpOptions::default() };
        let b = emit(&o);
        assert_eq!(&b[..4], &[1, 1, 5, 2 + 8 * n as u8]);
        let back = TcpOptions::parse(&b);
        assert_eq!(back.sack, o.sack, "{n} blocks");
    }
    // 2 + 8n bytes with n >= 1; anything else is malformed, and ignored.
    assert_eq!(TcpOptions::parse(&[5, 2]).sack.len(), 0);
    assert_eq!(TcpOptions::parse(&[5, 6, 0, 0, 0, 0]).sack.len(), 0);
}

#[test]
fn rfc7323_3_2_timestamps_option_is_kind_8_length_10_and_round_trips() {
    let o = TcpOptions { timestamps: Some((0x0102_0304, 0xa0b0_c0d0)), ..TcpOptions::default() };
    assert_eq!(emit(&o), [1, 1, 8, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0]);
    let back = TcpOptions::parse(&[8, 10, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(back.timestamps, Some((9, u32::MAX)));
    assert_eq!(TcpOptions::parse(&[8, 6, 0, 0, 0, 0]).timestamps, None, "a wrong length is ignored");
}

#[test]
fn every_option_together_round_trips() {
    let o = TcpOptions {
        mss: Some(9000),
        window_scale: Some(14),
        sack_permitted: true,
        timestamps: Some((1, 2)),
        sack: SackBlocks::new(),
        fast_open: None,
    };
    assert_eq!(TcpOptions::parse(&emit(&o)), o);
}

#[test]
fn rfc9293_3_2_eol_ends_the_list_and_bytes_after_it_are_ignored() {
    // After EOL comes garbage that would be a malformed MSS.
    let o = TcpOptions::parse(&[2, 4, 1, 0, kind::END, 2, 9, 9]);
    assert_eq!(o, TcpOptions { mss: Some(256), ..TcpOptions::default() });
    assert_eq!(TcpOptions::parse(&[kind::END]), TcpOptions::default());
}

#[test]
fn rfc9293_3_2_nop_padding_is_skipped_anywhere() {
    let o = TcpOptions::parse(&[1, 1, 1, 2, 4, 2, 0, 1, 1, 3, 3, 5, 1]);
    assert_eq!((o.mss, o.window_scale), (Some(512), Some(5)));
    assert_eq!(TcpOptions::parse(&[1; 40]), TcpOptions::default());
}

#[test]
fn unknown_option_with_length_past_the_header_ends_parsing() {
    // As Linux: what came before stands; nothing after is read.
    let o = TcpOptions::parse(&[2, 4, 1, 0, 30, 8, 0, 0]);
    assert_eq!(o, TcpOptions { mss: Some(256), ..TcpOptions::default() });
    assert_eq!(TcpOptions::parse(&[30]), TcpOptions::default(), "no length byte");
    assert_eq!(TcpOptions::parse(&[30, 1, 2, 4, 1, 0]), TcpOptions::default(), "length below 2");
}

proptest! {
    /// RFC 9293 §3.2: an option we do not know is skipped by its length, so
    /// the options around it still parse — whatever its kind, length and body.
    #[test]
    fn unknown_options_of_any_kind_and_length_are_skipped_by_length(
        k in 9u8..=255,
        body in proptest::collection::vec(any::<u8>(), 0..24),
    ) {
        prop_assume!(k != kind::SACK && k != kind::TIMESTAMPS);
        let mut b = vec![2, 4, 0x05, 0xb4, k, 2 + body.len() as u8];
        b.extend_from_slice(&body);
        b.extend_from_slice(&[3, 3, 9]);
        let o = TcpOptions::parse(&b);
        prop_assert_eq!(o.mss, Some(1460));
        prop_assert_eq!(o.window_scale, Some(9));
    }
}
