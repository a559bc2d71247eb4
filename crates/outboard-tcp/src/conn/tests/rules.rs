//! Rules of the TCP core that had no test of their own, one test per rule,
//! named after it (the map from rule to test is docs/TESTS.md): the RFC 9293
//! §3.3.2 transitions not covered in `states.rs` (close in SYN-RECEIVED, RST in
//! every synchronized state, abort), the 2·MSL default, configurable buffers,
//! per-connection congestion control, the counters readable from outside, and
//! the out-of-order queue cap under adversarial reordering.

use super::*;
use proptest::prelude::*;

const MSS: u32 = 1460;

/// Drives a fresh connection into `state` with plain options (SND.NXT and
/// RCV.NXT as the comments say), everything drained.
fn in_state(cfg: &Config, state: State) -> Harness {
    let mut h = Harness::established(cfg);
    match state {
        State::Established => {}
        // FIN sent (seq 1001), not acknowledged.
        State::FinWait1 => {
            h.c.close();
            h.recv_one();
        }
        // FIN acknowledged: RCV.NXT 5001.
        State::FinWait2 => {
            h.c.shutdown_write();
            h.recv_one();
            h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
        }
        // Peer FIN received (its ACK delayed, as Linux's): RCV.NXT 5002.
        State::CloseWait => {
            h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
            h.advance(Duration::from_millis(40));
            h.recv_one();
        }
        // FINs crossed, ours not yet acknowledged: RCV.NXT 5002.
        State::Closing => {
            h.c.close();
            h.recv_one();
            h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
            h.recv_one();
        }
        // Peer FIN received, our FIN sent (with the FIN's ACK): RCV.NXT 5002.
        State::LastAck => {
            h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
            h.c.close();
            h.recv_one();
        }
        // Both FINs acknowledged: RCV.NXT 5002.
        State::TimeWait => {
            h.c.close();
            h.recv_one();
            h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 2), b"");
            h.recv_one();
        }
        other => panic!("in_state does not build {other:?}"),
    }
    assert_eq!(h.c.state(), state);
    h.events();
    h
}

fn rcv_nxt_in(state: State) -> u32 {
    match state {
        State::Established | State::FinWait1 | State::FinWait2 => PEER_ISS + 1,
        _ => PEER_ISS + 2,
    }
}

// ---- RFC 9293 §3.3.2 transitions -------------------------------------------

/// RFC 9293 §3.10.4 SYN-RECEIVED: a close() before the handshake completes is
/// queued "for processing after entering ESTABLISHED state"; the FIN then goes
/// out and the connection moves to FIN-WAIT-1. (We always take the queueing
/// branch, even with no data: the FIN cannot overtake the SYN-ACK's ACK.)
#[test]
fn syn_received_close_to_fin_wait_1_sends_fin() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.c.close();
    assert_eq!(h.c.state(), State::SynReceived, "the FIN waits for the handshake");
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    assert_eq!(h.c.state(), State::FinWait1);
    let fin = h.recv_one();
    assert_eq!(fin.flags(), FIN | ACK);
    assert_eq!((fin.seq(), fin.ack()), (ISS + 1, PEER_ISS + 1));
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.c.state(), State::FinWait2);
}

/// RFC 9293 §3.10.7.4 second, SYN-RECEIVED: "If this connection was initiated
/// with an active OPEN (i.e., came from SYN-SENT state), then the connection
/// was refused"; the user hears about it and the connection is CLOSED.
#[test]
fn syn_received_after_simultaneous_open_rcv_rst_to_closed_refused() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.send(&seg(SYN, PEER_ISS, 0), b"");
    h.recv_one();
    assert_eq!(h.c.state(), State::SynReceived);
    h.send(&seg(RST, PEER_ISS + 1, 0), b"");
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.events(), vec![Event::Reset]);
    assert_eq!(h.c.send(b"x"), Err(Error::Reset));
    h.recv_nothing();
}

/// RFC 9293 §3.10.7.4 second, ESTABLISHED/FIN-WAIT-1/FIN-WAIT-2/CLOSE-WAIT:
/// an acceptable RST (exactly RCV.NXT, RFC 5961 §3.2) aborts the connection,
/// the user gets "connection reset", nothing is sent back.
#[test]
fn rfc9293_rst_at_rcv_nxt_resets_in_established_fin_wait_and_close_wait() {
    for state in [State::Established, State::FinWait1, State::FinWait2, State::CloseWait] {
        let mut h = in_state(&plain_cfg(), state);
        h.send(&seg(RST, rcv_nxt_in(state), 0), b"");
        assert_eq!(h.c.state(), State::Closed, "RST in {state:?}");
        assert_eq!(h.events(), vec![Event::Reset], "RST in {state:?}");
        if state == State::CloseWait {
            // The peer's stream already ended (reads give end-of-stream);
            // the outstanding SEND side hears "reset".
            assert_eq!(h.c.send(b"x"), Err(Error::Reset), "RST in {state:?}");
        } else {
            assert_eq!(h.c.recv(&mut [0; 4]), Err(Error::Reset), "RST in {state:?}");
        }
        h.recv_nothing();
        assert!(h.c.is_finished());
    }
}

/// RFC 9293 §3.10.7.4 second, CLOSING/LAST-ACK/TIME-WAIT: "If the RST bit is
/// set, then enter the CLOSED state, delete the TCB, and return" — no error,
/// the application already closed.
#[test]
fn rfc9293_rst_at_rcv_nxt_closes_closing_last_ack_and_time_wait() {
    for state in [State::Closing, State::LastAck, State::TimeWait] {
        let mut h = in_state(&plain_cfg(), state);
        h.send(&seg(RST, rcv_nxt_in(state), 0), b"");
        assert_eq!(h.c.state(), State::Closed, "RST in {state:?}");
        assert!(!h.events().contains(&Event::Reset), "RST in {state:?}");
        h.recv_nothing();
        assert!(h.c.is_finished());
        assert_eq!(h.c.poll_timeout(), None, "no timer outlives the TCB ({state:?})");
    }
}

/// RFC 5961 §3.2 in the closing states too: an in-window RST that is not
/// exactly RCV.NXT only earns a challenge ACK, the connection survives.
#[test]
fn rfc5961_in_window_rst_gets_challenge_ack_in_every_synchronized_state() {
    for state in [
        State::Established,
        State::FinWait1,
        State::FinWait2,
        State::CloseWait,
        State::Closing,
        State::LastAck,
        State::TimeWait,
    ] {
        let mut h = in_state(&plain_cfg(), state);
        h.send(&seg(RST, rcv_nxt_in(state) + 100, 0), b"");
        assert_eq!(h.c.state(), state, "blind RST in {state:?}");
        let ack = h.recv_one();
        assert_eq!((ack.flags(), ack.ack()), (ACK, rcv_nxt_in(state)), "challenge ACK in {state:?}");
    }
}

/// RFC 9293 §3.10.5 ABORT: in SYN-RECEIVED, ESTABLISHED, FIN-WAIT-1/2 and
/// CLOSE-WAIT "send a reset segment <SEQ=SND.NXT><CTL=RST>" and go to CLOSED.
#[test]
fn rfc9293_abort_sends_rst_at_snd_nxt_and_closes_in_every_synchronized_state() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.c.abort();
    assert_eq!(h.c.state(), State::Closed);
    let rst = h.recv_one();
    assert!(rst.flags().rst());
    assert_eq!(rst.seq(), ISS + 1, "SYN-RECEIVED");
    assert!(h.c.is_finished());

    for (state, snd_nxt) in [
        (State::Established, ISS + 1),
        (State::FinWait1, ISS + 2),
        (State::FinWait2, ISS + 2),
        (State::CloseWait, ISS + 1),
    ] {
        let mut h = in_state(&plain_cfg(), state);
        h.c.abort();
        assert_eq!(h.c.state(), State::Closed, "abort in {state:?}");
        let rst = h.recv_one();
        assert!(rst.flags().rst(), "abort in {state:?}");
        assert_eq!(rst.seq(), snd_nxt, "abort in {state:?}");
        assert_eq!(rst.len(), 0);
        assert!(h.c.is_finished());
        assert_eq!(h.c.poll_timeout(), None);
    }
}

/// RFC 9293 §3.10.5: in CLOSING, LAST-ACK and TIME-WAIT abort only deletes
/// the TCB ("respond with ok and delete"), no RST.
#[test]
fn rfc9293_abort_in_closing_last_ack_time_wait_sends_nothing() {
    for state in [State::Closing, State::LastAck, State::TimeWait] {
        let mut h = in_state(&plain_cfg(), state);
        h.c.abort();
        assert_eq!(h.c.state(), State::Closed, "abort in {state:?}");
        h.recv_nothing();
        assert!(h.c.is_finished());
    }
}

/// TIME-WAIT lasts 2·MSL, 60 s by default (RFC 9293 §3.4.2 with MSL = 30 s
/// as Linux; configurable through `Config::time_wait`).
#[test]
fn time_wait_default_is_2msl_of_60_seconds() {
    assert_eq!(Config::default().time_wait, Duration::from_secs(60));
    let mut h = in_state(&plain_cfg(), State::TimeWait);
    h.advance(Duration::from_millis(59_999));
    assert_eq!(h.c.state(), State::TimeWait);
    h.advance(Duration::from_millis(1));
    assert_eq!(h.c.state(), State::Closed);
}

/// RFC 9293 §3.10.7.4 eighth: the FIN in TIME-WAIT is acknowledged, and
/// anything new — data — is not accepted (the peer's stream ended).
#[test]
fn time_wait_rcv_data_beyond_fin_is_not_delivered() {
    let mut h = in_state(&plain_cfg(), State::TimeWait);
    h.send(&seg(ACK, PEER_ISS + 2, ISS + 2), b"ghost");
    assert_eq!(h.c.state(), State::TimeWait);
    assert_eq!(h.c.stats().recv_queue, 0);
    assert!(h.recv().iter().all(|o| !o.flags().rst()), "TIME-WAIT does not reset");
}

/// RFC 9293 §3.10.7.4 fifth then eighth: the ACK completing the handshake
/// moves SYN-RECEIVED to ESTABLISHED, and a FIN on the same segment then
/// moves it on to CLOSE-WAIT ("SYN-RECEIVED STATE, ESTABLISHED STATE: Enter
/// the CLOSE-WAIT state").
#[test]
fn syn_received_rcv_ack_with_fin_to_close_wait() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.send(&seg(ACK | FIN, PEER_ISS + 1, ISS + 1), b"bye");
    assert_eq!(h.c.state(), State::CloseWait);
    assert_eq!(h.events(), vec![Event::Connected, Event::Readable, Event::PeerClosed]);
    assert_eq!(h.recv_one().ack(), PEER_ISS + 1 + 3 + 1, "data and FIN acknowledged");
    let mut buf = [0u8; 8];
    assert_eq!(h.c.recv(&mut buf), Ok(3));
    assert_eq!(h.c.recv(&mut buf), Ok(0), "then end of stream");
}

/// RFC 9293 §3.10.7.3 fourth/sixth: data (and FIN) on the SYN-ACK are
/// processed once the connection is ESTABLISHED (the window our SYN offered
/// covers them).
#[test]
fn syn_sent_rcv_syn_ack_with_data_and_fin_delivers_both() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.send(&seg(SYN | ACK | FIN, PEER_ISS, ISS + 1), b"hello");
    assert_eq!(h.c.recv_available(), 5, "the SYN-ACK's data is accepted");
    assert_eq!(h.c.state(), State::CloseWait);
    assert_eq!(h.recv().last().map(Out::ack), Some(PEER_ISS + 1 + 5 + 1));
    let mut buf = [0u8; 8];
    assert_eq!(h.c.recv(&mut buf), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(h.c.recv(&mut buf), Ok(0));
}

/// RFC 9293 §3.10.7.4 second with RFC 5961 §3.2, SYN-RECEIVED: an RST inside
/// the window but not at RCV.NXT is not acted on; it earns a challenge ACK.
#[test]
fn rfc5961_in_window_rst_in_syn_received_gets_challenge_ack() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.send(&seg(RST, PEER_ISS + 1 + 1000, 0), b"");
    assert_eq!(h.c.state(), State::SynReceived);
    let a = h.recv_one();
    assert!(a.flags().ack() && !a.flags().rst());
    assert_eq!(a.ack(), PEER_ISS + 1);
}

// ---- RFC 7323 §5.5 and RFC 6298 §5.7 ----------------------------------------

/// RFC 7323 §5.5: after an idle time longer than 24 days TS.Recent is no
/// longer valid, so a segment whose TSval is "older" than it is accepted
/// rather than dropped by PAWS (the peer's clock may have wrapped).
#[test]
fn rfc7323_5_5_ts_recent_expires_after_24_days_idle() {
    let cfg = Config { timestamps: true, ..plain_cfg() };
    let opts = TcpOptions { mss: Some(1460), timestamps: Some((500, 10_001)), ..TcpOptions::default() };
    let mut h = Harness::established_with(&cfg, opts);
    let mut d = seg(ACK, PEER_ISS + 1, ISS + 1);
    d.options.timestamps = Some((1_000_000, 10_001));
    h.send(&d, b"abc");
    h.recv();
    assert_eq!(h.c.recv_available(), 3);
    h.advance(Duration::from_secs(25 * 24 * 3600));
    let mut late = seg(ACK, PEER_ISS + 4, ISS + 1);
    late.options.timestamps = Some((7, 10_001));
    h.send(&late, b"new");
    assert_eq!(h.c.recv_available(), 6, "TS.Recent expired: the segment is not a PAWS drop");
}

/// RFC 6298 §5.7: "If the timer expires awaiting the ACK of a SYN segment and
/// the TCP implementation is using an RTO less than 3 seconds, the RTO MUST be
/// re-initialized to 3 seconds when data transmission begins (i.e., after the
/// three-way handshake completes)."
#[test]
fn rfc6298_5_7_rto_is_3s_when_data_starts_after_a_syn_timeout() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    assert_eq!(h.fire_next_timer(), Duration::from_secs(1));
    assert_eq!(h.recv_one().flags(), SYN);
    h.send(&seg(SYN | ACK, PEER_ISS, ISS + 1), b"");
    assert_eq!(h.c.state(), State::Established);
    h.recv_one();
    h.c.send(b"data").unwrap();
    h.recv_one();
    assert_eq!(h.fire_next_timer(), Duration::from_secs(3), "first data RTO after a SYN timeout");
}

// ---- buffers, congestion control, counters ----------------------------------

/// TCP core requirement: configurable buffers. The send buffer bounds what
/// `send` takes; the receive buffer bounds the window we advertise.
#[test]
fn configurable_buffers_bound_send_queue_and_advertised_window() {
    let cfg = Config { send_buffer: 3000, recv_buffer: 2000, ..plain_cfg() };
    let mut h = Harness::connect(&cfg);
    let syn = h.recv_one();
    assert_eq!(syn.repr.window, 2000, "SYN advertises the receive buffer");
    h.send(&seg(SYN | ACK, PEER_ISS, ISS + 1), b"");
    assert_eq!(h.recv_one().repr.window, 2000);
    assert_eq!(h.c.send(&[9u8; 5000]), Ok(3000), "send takes at most the send buffer");
    assert_eq!(h.c.send(b"more"), Err(Error::WouldBlock));
    h.recv();
    // The peer fills our receive buffer; more than that is not accepted.
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), &[1u8; 2500]);
    assert_eq!(h.c.recv_available(), 2000);
    let last = h.recv().pop().expect("an ACK for the data");
    assert_eq!((last.ack(), last.repr.window), (PEER_ISS + 1 + 2000, 0));
}

/// TCP core requirement: NewReno and CUBIC are selectable per connection. On
/// the same loss, NewReno halves (RFC 5681 eq. 4) and CUBIC multiplies by
/// β = 0.7 (RFC 9438 §4.6).
#[test]
fn cc_is_selectable_per_connection_newreno_halves_cubic_keeps_0_7() {
    let mut ssthresh = Vec::new();
    for cc in [crate::cc::CcKind::NewReno, crate::cc::CcKind::Cubic] {
        let mut h = Harness::established(&Config { cc, ..plain_cfg() });
        h.c.send(&vec![7u8; 10 * MSS as usize]).unwrap();
        assert_eq!(h.recv().len(), 10);
        for _ in 0..3 {
            h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
        }
        assert_eq!(h.c.stats().fast_retransmits, 1, "{cc:?}");
        ssthresh.push(h.c.stats().ssthresh);
    }
    assert_eq!(ssthresh[0], 5 * MSS as usize, "NewReno: FlightSize / 2");
    assert_eq!(ssthresh[1], 7 * MSS as usize, "CUBIC: cwnd · 0.7");
}

/// TCP core requirement: retransmits, smoothed RTT, cwnd, ssthresh, SACKed
/// bytes and bytes in flight are readable from outside through `stats()`, and
/// move.
#[test]
fn stats_expose_retransmits_srtt_cwnd_ssthresh_sacked_bytes_and_bytes_in_flight() {
    let cfg = Config { sack: true, ..plain_cfg() };
    let mut h = Harness::established_with(
        &cfg,
        TcpOptions { mss: Some(1460), sack_permitted: true, ..TcpOptions::default() },
    );
    let before = h.c.stats();
    assert_eq!((before.retransmits, before.sacked_bytes, before.bytes_in_flight), (0, 0, 0));
    assert_eq!(before.cwnd, 10 * MSS as usize, "RFC 6928 initial window");
    assert!(before.ssthresh >= 1 << 20, "ssthresh starts 'arbitrarily high'");

    // A clean round trip of 40 ms gives an RTT sample (the handshake's took
    // no virtual time).
    h.c.send(b"ping").unwrap();
    h.recv_one();
    h.advance(Duration::from_millis(40));
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 5), b"");
    let s = h.c.stats();
    assert!(s.srtt_us > 0 && s.srtt_us <= 40_000, "srtt {} µs", s.srtt_us);
    assert_eq!(s.bytes_in_flight, 0);

    let una = ISS + 5;
    h.c.send(&vec![7u8; 10 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    assert_eq!(h.c.stats().bytes_in_flight, 10 * MSS as usize);

    // Segment 0 is lost and 1..3 are SACKed: sacked bytes and pipe change,
    // and RFC 6675 loss detection retransmits segment 0.
    for i in 1..=3u32 {
        let mut a = seg(ACK, PEER_ISS + 1, una);
        a.options.sack = sack(&[(una + MSS, una + (i + 1) * MSS)]);
        h.send(&a, b"");
        h.recv();
    }
    let s = h.c.stats();
    assert_eq!(s.sacked_bytes, 3 * MSS as usize);
    assert!(s.retransmits >= 1, "segment 0 retransmitted on SACK loss detection");
    assert!(s.ssthresh < before.ssthresh && s.ssthresh >= 2 * MSS as usize);
    assert!(s.bytes_in_flight < 10 * MSS as usize, "SACKed bytes leave the pipe");

    // Everything acknowledged: the flight empties.
    h.send(&seg(ACK, PEER_ISS + 1, una + 10 * MSS), b"");
    let s = h.c.stats();
    assert_eq!((s.bytes_in_flight, s.sacked_bytes), (0, 0));
    assert!(s.cwnd >= 2 * MSS as usize);
}

// ---- out-of-order queue cap --------------------------------------------------

const STREAM: usize = 16_000;

fn stream_byte(i: usize) -> u8 {
    (i * 7 % 251) as u8
}

fn stream(range: std::ops::Range<usize>) -> Vec<u8> {
    range.map(stream_byte).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// TCP core requirement: "the out-of-order queue stays under its cap under
    /// adversarial reordering". Arbitrary segments anywhere in the window but
    /// never at RCV.NXT keep the range count at `max_ooo_ranges` and deliver
    /// nothing; once the hole fills (the peer resending everything in order),
    /// every byte comes out exactly once and unaltered.
    #[test]
    fn ooo_queue_stays_under_cap_under_adversarial_reordering(
        segs in proptest::collection::vec((1usize..STREAM, 1usize..1500), 1..200),
        cap in 1usize..6,
    ) {
        let cfg = Config { recv_buffer: 16 * 1024, max_ooo_ranges: cap, ..plain_cfg() };
        let mut h = Harness::established(&cfg);
        for &(off, len) in &segs {
            let end = (off + len).min(STREAM);
            h.send(&seg(ACK, PEER_ISS + 1 + off as u32, ISS + 1), &stream(off..end));
            h.recv();
            let s = h.c.stats();
            prop_assert!(s.ooo_ranges <= cap, "{} ranges, cap {cap}", s.ooo_ranges);
            prop_assert_eq!(h.c.recv_available(), 0, "nothing readable while the first byte is missing");
        }
        let mut got = Vec::with_capacity(STREAM);
        let mut buf = [0u8; 4096];
        let mut off = 0;
        while off < STREAM {
            let end = (off + 1000).min(STREAM);
            h.send(&seg(ACK, PEER_ISS + 1 + off as u32, ISS + 1), &stream(off..end));
            h.recv();
            while let Ok(n) = h.c.recv(&mut buf) {
                prop_assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            prop_assert!(h.c.stats().ooo_ranges <= cap);
            off = end;
        }
        prop_assert_eq!(got.len(), STREAM);
        prop_assert!(got == stream(0..STREAM), "delivered bytes differ from the stream");
    }
}
