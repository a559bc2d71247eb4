//! MSS, RFC 7323 (window scale, timestamps, PAWS, RTTM) and RFC 2018 SACK.

use super::*;

fn full_cfg() -> Config {
    Config { window_scaling: true, sack: true, timestamps: true, recv_buffer: 256 * 1024, ..plain_cfg() }
}

fn synack_opts(wscale: Option<u8>, sack: bool, ts: Option<(u32, u32)>) -> TcpOptions {
    TcpOptions { mss: Some(1460), window_scale: wscale, sack_permitted: sack, timestamps: ts, ..TcpOptions::default() }
}

#[test]
fn rfc7323_syn_offers_all_enabled_options() {
    let mut h = Harness::connect(&full_cfg());
    let syn = h.recv_one();
    let o = syn.repr.options;
    assert_eq!(o.mss, Some(1460));
    assert_eq!(o.window_scale, Some(7), "sized for 6 MiB, Linux's tcp_rmem[2]");
    assert!(o.sack_permitted);
    assert_eq!(o.timestamps, Some((10_001, 0)));
    assert_eq!(syn.repr.window, 65535, "RFC 7323 §2.2: SYN window unscaled");
}

#[test]
fn rfc7323_window_scale_negotiated_when_both_syns_carry_it() {
    let mut h = Harness::connect(&full_cfg());
    h.recv_one();
    let mut sa = seg(SYN | ACK, PEER_ISS, ISS + 1);
    sa.options = synack_opts(Some(7), false, None);
    sa.window = 1000;
    h.send(&sa, b"");
    assert_eq!(h.c.snd_wnd, 1000, "the SYN-ACK's window is not scaled");
    let ack = h.recv_one();
    assert_eq!(ack.repr.window, 2048, "256 KiB >> 7");
    assert_eq!((h.c.stats().snd_wscale, h.c.stats().rcv_wscale), (7, 7));
    let mut a = seg(ACK, PEER_ISS + 1, ISS + 1);
    a.window = 100;
    h.send(&a, b"");
    assert_eq!(h.c.snd_wnd, 100 << 7);
}

#[test]
fn rfc7323_window_scale_off_when_peer_omits_it() {
    let h = Harness::established_with(&full_cfg(), synack_opts(None, false, None));
    assert_eq!((h.c.stats().snd_wscale, h.c.stats().rcv_wscale), (0, 0));
    let mut h = h;
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), &[0; 1000]);
    assert_eq!(h.recv_one().repr.window, 65535, "unscaled window is capped at 65535");
}

#[test]
fn rfc7323_window_scale_shift_clamped_to_14() {
    let h = Harness::established_with(&full_cfg(), synack_opts(Some(20), false, None));
    assert_eq!(h.c.stats().snd_wscale, 14);
}

#[test]
fn rfc7323_syn_ack_echoes_only_options_the_syn_offered() {
    let mut syn = seg(SYN, PEER_ISS, 0);
    syn.options.mss = Some(1000);
    let mut h = Harness::accept(&full_cfg(), &syn);
    let sa = h.recv_one();
    assert_eq!(sa.repr.options.mss, Some(1460));
    assert_eq!(sa.repr.options.window_scale, None);
    assert!(!sa.repr.options.sack_permitted);
    assert_eq!(sa.repr.options.timestamps, None);
}

#[test]
fn rfc7323_syn_ack_echoes_peer_tsval() {
    let mut syn = seg(SYN, PEER_ISS, 0);
    syn.options = synack_opts(Some(2), true, Some((777, 0)));
    let mut h = Harness::accept(&full_cfg(), &syn);
    let sa = h.recv_one();
    assert_eq!(sa.repr.options.timestamps, Some((10_001, 777)));
    assert_eq!(sa.repr.options.window_scale, Some(7));
    assert!(sa.repr.options.sack_permitted);
}

#[test]
fn mss_option_sets_send_mss() {
    let h = Harness::established_with(&plain_cfg(), TcpOptions { mss: Some(1000), ..TcpOptions::default() });
    assert_eq!(h.c.stats().send_mss, 1000);
}

#[test]
fn mss_defaults_to_536_without_option() {
    let mut h = Harness::established_with(&plain_cfg(), TcpOptions::default());
    assert_eq!(h.c.stats().send_mss, 536);
    h.c.send(&[1u8; 2000]).unwrap();
    let segs = h.recv();
    assert!(segs.iter().all(|s| s.len() <= 536));
    assert_eq!(segs[0].len(), 536);
}

fn ts_established() -> Harness {
    Harness::established_with(&full_cfg(), synack_opts(Some(3), true, Some((500, 10_001))))
}

fn ts_seg(flags: TcpFlags, seq: u32, ack: u32, tsval: u32) -> TcpRepr {
    let mut s = seg(flags, seq, ack);
    s.options.timestamps = Some((tsval, 10_001));
    s
}

#[test]
fn rfc7323_timestamps_echo_ts_recent() {
    let mut h = ts_established();
    h.c.send(b"x").unwrap();
    let d = h.recv_one();
    assert_eq!(d.repr.options.timestamps, Some((10_001, 500)));
}

#[test]
fn rfc7323_timestamps_option_reduces_payload_per_segment() {
    let mut h = ts_established();
    h.c.send(&[0u8; 3000]).unwrap();
    let segs = h.recv();
    assert_eq!(segs[0].len(), 1460 - 12);
}

#[test]
fn rfc7323_ts_recent_only_from_segment_covering_last_ack_sent() {
    let mut h = ts_established();
    h.send(&ts_seg(ACK, PEER_ISS + 1, ISS + 1, 600), b"abc");
    assert_eq!(h.recv_one().repr.options.timestamps.map(|t| t.1), Some(600));
    // Out of order: SEG.SEQ > Last.ACK.sent, TS.Recent stays.
    h.send(&ts_seg(ACK, PEER_ISS + 104, ISS + 1, 700), b"zzz");
    assert_eq!(h.recv_one().repr.options.timestamps.map(|t| t.1), Some(600));
}

#[test]
fn rfc7323_paws_drops_segment_with_old_timestamp_and_acks() {
    let mut h = ts_established();
    h.send(&ts_seg(ACK, PEER_ISS + 1, ISS + 1, 600), b"abc");
    h.recv();
    h.send(&ts_seg(ACK, PEER_ISS + 4, ISS + 1, 599), b"old");
    let a = h.recv_one();
    assert_eq!(a.ack(), PEER_ISS + 4);
    assert_eq!(h.c.recv_available(), 3, "the old segment's data was dropped");
    h.send(&ts_seg(ACK, PEER_ISS + 4, ISS + 1, 601), b"new");
    assert_eq!(h.c.recv_available(), 6);
}

#[test]
fn rfc7323_paws_does_not_apply_to_rst() {
    let mut h = ts_established();
    h.send(&ts_seg(ACK, PEER_ISS + 1, ISS + 1, 600), b"abc");
    h.send(&ts_seg(RST, PEER_ISS + 4, 0, 1), b"");
    assert_eq!(h.c.state(), State::Closed);
}

#[test]
fn rfc7323_rttm_sample_from_tsecr_even_after_retransmission() {
    let mut h = ts_established();
    h.c.send(b"x").unwrap();
    h.recv_one();
    h.fire_next_timer();
    let r = h.recv_one();
    let (tsval, _) = r.repr.options.timestamps.unwrap();
    assert_eq!(tsval, 10_201, "retransmitted one RTO (200 ms: the SYN gave a tiny RTT sample) later");
    h.advance(Duration::from_millis(30));
    let mut a = seg(ACK, PEER_ISS + 1, ISS + 2);
    a.options.timestamps = Some((600, tsval));
    h.send(&a, b"");
    // RFC 6298 §2.3 with the SYN's 0 ms sample first: 7/8·0 + 1/8·30 ms.
    assert_eq!(h.c.stats().srtt_us, 3_750);
}

#[test]
fn rfc2018_sack_permitted_requires_both_syns() {
    let h = Harness::established_with(&full_cfg(), synack_opts(None, false, None));
    assert!(!h.c.sack_ok);
    let h = Harness::established_with(&full_cfg(), synack_opts(None, true, None));
    assert!(h.c.sack_ok);
}

fn sack_established(ts: bool) -> Harness {
    let tso = if ts { Some((500, 10_001)) } else { None };
    Harness::established_with(&full_cfg(), synack_opts(None, true, tso))
}

#[test]
fn rfc2018_receiver_first_block_is_most_recent_arrival() {
    let mut h = sack_established(false);
    let base = PEER_ISS + 1;
    h.send(&seg(ACK, base + 100, ISS + 1), &[1; 100]);
    let a = h.recv_one();
    assert_eq!(a.ack(), base);
    assert_eq!(a.repr.options.sack, sack(&[(base + 100, base + 200)]));
    h.send(&seg(ACK, base + 300, ISS + 1), &[1; 100]);
    assert_eq!(h.recv_one().repr.options.sack, sack(&[(base + 300, base + 400), (base + 100, base + 200)]));
    h.send(&seg(ACK, base + 150, ISS + 1), &[1; 100]);
    assert_eq!(h.recv_one().repr.options.sack, sack(&[(base + 100, base + 250), (base + 300, base + 400)]));
}

#[test]
fn rfc2018_blocks_vanish_when_the_hole_fills() {
    let mut h = sack_established(false);
    let base = PEER_ISS + 1;
    h.send(&seg(ACK, base + 100, ISS + 1), &[1; 100]);
    h.recv();
    h.send(&seg(ACK, base, ISS + 1), &[1; 100]);
    let a = h.recv_one();
    assert_eq!(a.ack(), base + 200, "gap filled: immediate ACK of everything");
    assert!(a.repr.options.sack.is_empty());
}

#[test]
fn rfc2018_up_to_four_blocks_without_timestamps_three_with() {
    for (ts, n) in [(false, 4), (true, 3)] {
        let mut h = sack_established(ts);
        let base = PEER_ISS + 1;
        for i in 0..6u32 {
            let mut s = seg(ACK, base + 100 + 200 * i, ISS + 1);
            if ts {
                s.options.timestamps = Some((600, 10_001));
            }
            h.send(&s, &[1; 100]);
        }
        let last = h.recv().pop().unwrap();
        assert_eq!(last.repr.options.sack.len(), n);
        assert_eq!(last.repr.options.sack.as_slice()[0], (SeqNumber(base + 1100), SeqNumber(base + 1200)));
    }
}

/// RFC 7323 §4.3 with the RFC 9293 §3.10.7.4 processing order (Linux's
/// `tcp_replace_ts_recent` runs in `tcp_ack` only after the ACK is
/// validated): a segment dropped for its ACK — acknowledging data never sent
/// (RFC 5961 §5.2) or older than the largest window — must not set TS.Recent.
/// Otherwise one blind segment with a huge TSval makes PAWS discard all the
/// peer's later data and the connection stalls.
#[test]
fn rfc7323_4_3_ts_recent_only_from_acceptable_segments_not_from_bad_acks() {
    let mut h = ts_established();
    h.send(&ts_seg(ACK, PEER_ISS + 1, ISS + 100, 0x7fff_0000), b"evil");
    let a = h.recv_one();
    assert_eq!(a.repr.options.timestamps.map(|t| t.1), Some(500), "TS.Recent unchanged");
    h.send(&ts_seg(ACK, PEER_ISS + 1, (ISS + 1).wrapping_sub(70_000), 0x7fff_0001), b"evil");
    h.recv();
    assert_eq!(h.c.recv_available(), 0, "both were dropped");
    h.send(&ts_seg(ACK, PEER_ISS + 1, ISS + 1, 600), b"abc");
    assert_eq!(h.c.recv_available(), 3, "the peer's next valid segment is taken");
    let a = h.recv_one();
    assert_eq!((a.ack(), a.repr.options.timestamps.map(|t| t.1)), (PEER_ISS + 4, Some(600)));
}

/// RFC 7323 §5.5 with §4.3: once TS.Recent is 24 days old PAWS lets a
/// segment through, but only an acceptable segment may then set TS.Recent
/// (Linux's `tcp_paws_check` only answers; `tcp_replace_ts_recent` stores). An
/// out-of-window segment with a huge TSval must not poison it.
#[test]
fn rfc7323_5_5_after_paws_idle_expiry_an_unacceptable_segment_does_not_set_ts_recent() {
    let mut h = ts_established();
    h.now += Duration::from_secs(25 * 24 * 3600);
    h.send(&ts_seg(ACK, PEER_ISS + 1 + 200_000, ISS + 1, 0x7fff_0000), b"far");
    h.recv();
    h.send(&ts_seg(ACK, PEER_ISS + 1, ISS + 1, 600), b"abc");
    assert_eq!(h.c.recv_available(), 3);
    assert_eq!(h.recv_one().repr.options.timestamps.map(|t| t.1), Some(600));
}

/// RFC 7323 §2.3 as Linux's `tcp_select_initial_window` applies it: the shift
/// offered is the smallest that lets the largest window the connection may
/// grow to fit in 16 bits — max(the receive buffer, Linux's default
/// `tcp_rmem[2]` of 6 MiB) — so default settings offer 7, as Linux does, and
/// a 1 GiB buffer the maximum of 14.
#[test]
fn rfc7323_2_3_window_scale_from_the_largest_receive_buffer_as_linux() {
    let mut h = Harness::connect(&Config::default());
    assert_eq!(h.recv_one().repr.options.window_scale, Some(7));
    let mut h = Harness::connect(&Config { recv_buffer: 1 << 30, ..Config::default() });
    assert_eq!(h.recv_one().repr.options.window_scale, Some(14));
    let mut h = Harness::accept(&Config::default(), &{
        let mut syn = seg(SYN, PEER_ISS, 0);
        syn.options = synack_opts(Some(2), false, None);
        syn
    });
    assert_eq!(h.recv_one().repr.options.window_scale, Some(7), "the SYN-ACK offers the same");
}

/// RFC 9293 §3.10.7.4 processing order with RFC 7323 §4.3 / §5.3 and RFC
/// 5961: a segment dropped anywhere on the way — PAWS, sequence number out
/// of window, in-window RST or SYN (challenge ACK), ACK of data never sent or
/// older than the largest window — changes none of what the peer's valid
/// segments set: TS.Recent and its age, the send window and its WL1/WL2,
/// MAX.SND.WND, rcv_mss, RCV.NXT, nor the time of the last valid segment
/// (keepalive). Each one carries a newer TSval, a big window and a
/// full-sized payload that would change all of them if taken.
#[test]
fn rfc9293_3_10_7_4_a_dropped_segment_changes_no_connection_state() {
    let mut h = ts_established();
    let snapshot = |c: &Connection| {
        (c.ts_recent, c.ts_recent_at, c.snd_wnd, c.max_snd_wnd, c.snd_wl1, c.snd_wl2, c.rcv_mss, c.rcv_nxt, c.last_rx, c.recv_available(), c.state)
    };
    let before = snapshot(&h.c);
    let rcv = PEER_ISS + 1;
    let bad = [
        ("ACK of data never sent", ts_seg(ACK, rcv, ISS + 100, 900)),
        ("ACK older than MAX.SND.WND", ts_seg(ACK, rcv, (ISS + 1).wrapping_sub(600_000), 900)),
        ("PAWS: TSval older than TS.Recent", ts_seg(ACK, rcv, ISS + 1, 400)),
        ("sequence number beyond the window", ts_seg(ACK, rcv + 10_000_000, ISS + 1, 900)),
        ("in-window SYN", ts_seg(SYN | ACK, rcv, ISS + 1, 900)),
        ("in-window RST not at RCV.NXT", ts_seg(RST | ACK, rcv + 1, ISS + 1, 900)),
    ];
    for (what, mut s) in bad {
        h.now += Duration::from_secs(1);
        s.window = 60_000;
        let payload = if s.flags.rst() { &[][..] } else { &[7u8; 1400][..] };
        h.send(&s, payload);
        h.recv();
        assert_eq!(snapshot(&h.c), before, "{what}");
    }
    // The peer's next valid segment is taken and acknowledged with its TSval.
    h.send(&ts_seg(ACK, rcv, ISS + 1, 600), b"abc");
    assert_eq!(h.c.recv_available(), 3);
    let a = h.recv_one();
    assert_eq!((a.ack(), a.repr.options.timestamps.map(|t| t.1)), (rcv + 3, Some(600)));
}
