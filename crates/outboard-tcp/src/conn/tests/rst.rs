//! RST generation and acceptance (RFC 9293 §3.10.7, RFC 5961), SYN and ACK
//! validation, and the segment acceptability test (§3.10.7.4).

use super::*;

#[test]
fn rfc9293_rst_exact_seq_in_established_resets() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(RST, PEER_ISS + 1, 0), b"");
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.events(), vec![Event::Reset]);
    assert_eq!(h.c.recv(&mut [0; 4]), Err(Error::Reset));
    assert_eq!(h.c.send(b"x"), Err(Error::Reset));
    h.recv_nothing();
}

#[test]
fn rfc5961_in_window_rst_gets_challenge_ack() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(RST, PEER_ISS + 100, 0), b"");
    assert_eq!(h.c.state(), State::Established);
    let ack = h.recv_one();
    assert_eq!(ack.flags(), ACK);
    assert_eq!((ack.seq(), ack.ack()), (ISS + 1, PEER_ISS + 1));
    assert_eq!(h.c.stats().challenge_acks, 1);
}

#[test]
fn rfc5961_out_of_window_rst_is_dropped_silently() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(RST, PEER_ISS + 200_000, 0), b"");
    h.send(&seg(RST, PEER_ISS - 10, 0), b"");
    assert_eq!(h.c.state(), State::Established);
    h.recv_nothing();
}

#[test]
fn rfc9293_rst_in_last_ack_closes_without_error() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
    h.c.close();
    h.recv();
    h.events();
    h.send(&seg(RST, PEER_ISS + 2, 0), b"");
    assert_eq!(h.c.state(), State::Closed);
    assert!(h.events().is_empty());
}

#[test]
fn rfc5961_syn_in_established_gets_challenge_ack() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(SYN, PEER_ISS + 1, 0), b"");
    assert_eq!(h.c.state(), State::Established);
    let ack = h.recv_one();
    assert_eq!((ack.flags(), ack.ack()), (ACK, PEER_ISS + 1));
    assert_eq!(h.c.stats().challenge_acks, 1);
}

#[test]
fn rfc5961_challenge_acks_are_rate_limited() {
    let mut h = Harness::established(&plain_cfg());
    let mut acks = 0;
    for i in 0..25 {
        h.send(&seg(RST, PEER_ISS + 10 + i, 0), b"");
        acks += h.recv().len();
    }
    assert_eq!(acks, super::super::ack::CHALLENGE_ACK_LIMIT as usize);
    h.advance(Duration::from_secs(1));
    h.send(&seg(RST, PEER_ISS + 10, 0), b"");
    assert_eq!(h.recv().len(), 1, "budget refills after a second");
    assert_eq!(h.c.state(), State::Established);
}

#[test]
fn rfc5961_ack_above_snd_nxt_is_dropped_and_acked() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 100), b"data");
    let ack = h.recv_one();
    assert_eq!((ack.seq(), ack.ack()), (ISS + 1, PEER_ISS + 1));
    assert_eq!(h.c.recv_available(), 0, "the segment was dropped");
}

#[test]
fn rfc5961_ack_older_than_max_window_is_dropped_with_challenge_ack() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 1, (ISS + 1).wrapping_sub(70_000)), b"data");
    assert_eq!(h.recv_one().ack(), PEER_ISS + 1);
    assert_eq!(h.c.recv_available(), 0);
    assert_eq!(h.c.stats().challenge_acks, 1);
}

#[test]
fn rfc5961_old_ack_within_max_window_is_accepted() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1 - 100), b"data");
    assert_eq!(h.c.recv_available(), 4);
}

#[test]
fn rfc9293_segment_beyond_window_is_acked_not_accepted() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 1 + 100_000, ISS + 1), b"far");
    assert_eq!(h.recv_one().ack(), PEER_ISS + 1);
    assert_eq!(h.c.recv_available(), 0);
}

#[test]
fn rfc9293_old_duplicate_segment_is_acked_and_counted() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"abc");
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"abc");
    assert_eq!(h.recv_one().ack(), PEER_ISS + 4);
    assert_eq!(h.c.stats().dup_segments_in, 1);
    assert_eq!(h.c.recv_available(), 3);
}

#[test]
fn rfc9293_partially_old_segment_delivers_only_new_bytes() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"abc");
    h.send(&seg(ACK, PEER_ISS + 2, ISS + 1), b"bcdef");
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Ok(6));
    assert_eq!(&buf[..6], b"abcdef");
}

#[test]
fn rfc9293_zero_window_still_processes_ack_at_rcv_nxt() {
    let cfg = Config { recv_buffer: 1000, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.send(b"hello").unwrap();
    assert_eq!(h.recv_one().payload, b"hello");
    // Fill our receive buffer: the window closes.
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), &[7u8; 1000]);
    let a = h.recv_one();
    assert_eq!(a.repr.window, 0);
    // A segment at RCV.NXT with data cannot be taken, but its ACK is.
    h.send(&seg(ACK, PEER_ISS + 1001, ISS + 6), b"more");
    assert_eq!(h.c.stats().bytes_in_flight, 0);
    assert_eq!(h.c.stats().send_queue, 0);
    let a = h.recv_one();
    assert_eq!((a.ack(), a.repr.window), (PEER_ISS + 1001, 0));
    assert_eq!(h.c.recv_available(), 1000);
}

#[test]
fn rfc9293_segment_without_ack_is_dropped() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(TcpFlags::PSH, PEER_ISS + 1, 0), b"noack");
    assert_eq!(h.c.recv_available(), 0);
    h.recv_nothing();
}

fn ts_cfg() -> Config {
    Config { timestamps: true, ..plain_cfg() }
}

/// RFC 7323 §4.2 as Linux's `tcp_send_active_reset` does: the RST of an abort
/// (or of a close with unread data) on a connection that negotiated
/// timestamps carries the TS option, echoing TS.Recent.
#[test]
fn rfc7323_4_2_active_rst_carries_timestamps_when_negotiated() {
    let opts = TcpOptions { mss: Some(1460), timestamps: Some((500, 10_001)), ..TcpOptions::default() };
    let mut h = Harness::established_with(&ts_cfg(), opts);
    h.now += Duration::from_millis(250);
    h.c.abort();
    let r = h.recv_one();
    assert_eq!(r.flags(), RST | ACK);
    // TSval is our clock when the RST goes (ms + 1), TSecr is TS.Recent.
    assert_eq!(r.repr.options.timestamps, Some((10_251, 500)));

    let mut h = Harness::established_with(&ts_cfg(), opts);
    h.send(&seg_ts(PEER_ISS + 1, ISS + 1, 600), b"unread");
    h.recv();
    h.c.close();
    let r = h.recv_one();
    assert_eq!((r.flags(), r.seq(), r.ack()), (RST | ACK, ISS + 1, PEER_ISS + 7));
    assert_eq!(r.repr.options.timestamps.map(|t| t.1), Some(600));

    let mut h = Harness::established(&plain_cfg());
    h.c.abort();
    assert_eq!(h.recv_one().repr.options.timestamps, None, "none when not negotiated");
}

fn seg_ts(seq: u32, ack: u32, tsval: u32) -> TcpRepr {
    let mut s = seg(ACK, seq, ack);
    s.options.timestamps = Some((tsval, 10_001));
    s
}

/// RFC 9293 §3.10.7.3 / §3.10.7.1: a SYN-ACK arriving after `close()` or
/// `abort()` in SYN-SENT finds a CLOSED connection and is answered
/// `<SEQ=SEG.ACK><CTL=RST>`, no ACK flag (Linux: the socket is unhashed and
/// `tcp_v4_send_reset` answers); a segment without ACK gets
/// `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`; a RST gets nothing.
#[test]
fn rfc9293_3_10_7_1_syn_ack_after_close_in_syn_sent_gets_rst_seq_seg_ack() {
    for abort in [false, true] {
        let mut h = Harness::connect(&plain_cfg());
        h.recv_one();
        if abort {
            h.c.abort();
        } else {
            h.c.close();
        }
        h.recv_nothing();
        h.send(&seg(SYN | ACK, PEER_ISS, ISS + 1), b"");
        let r = h.recv_one();
        assert_eq!((r.flags(), r.seq(), r.len()), (RST, ISS + 1, 0), "abort: {abort}");
        assert!(h.c.is_finished());
        h.send(&seg(SYN, PEER_ISS, 0), b"");
        let r = h.recv_one();
        assert_eq!((r.flags(), r.seq(), r.ack()), (RST | ACK, 0, PEER_ISS + 1));
        h.send(&seg(RST | ACK, PEER_ISS, ISS + 1), b"");
        h.recv_nothing();
    }
}

/// RFC 9293 §3.10.4 / RFC 1122 §4.2.2.13: new data after `close()` is
/// answered with a RST built from the segment, `<SEQ=SEG.ACK><CTL=RST>`
/// (RFC 9293 §3.10.7.1), as Linux's `tcp_rcv_state_process` (`tcp_reset`,
/// then `tcp_v4_send_reset`) does.
#[test]
fn rfc9293_3_10_7_1_data_after_close_gets_rst_seq_seg_ack_as_linux() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    assert!(h.recv_one().flags().fin());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"late data");
    let r = h.recv_one();
    assert_eq!((r.flags(), r.seq(), r.len()), (RST, ISS + 1, 0));
    assert_eq!(h.c.state(), State::Closed);
    // With timestamps negotiated too: this RST answers a segment, built as
    // Linux's `tcp_v4_send_reset` builds it, with no options at all.
    let opts = TcpOptions { mss: Some(1460), timestamps: Some((500, 10_001)), ..TcpOptions::default() };
    let mut h = Harness::established_with(&ts_cfg(), opts);
    h.c.close();
    assert!(h.recv_one().flags().fin());
    h.send(&seg_ts(PEER_ISS + 1, ISS + 1, 600), b"late data");
    let r = h.recv_one();
    assert_eq!((r.flags(), r.seq(), r.repr.options), (RST, ISS + 1, TcpOptions::default()));
}
