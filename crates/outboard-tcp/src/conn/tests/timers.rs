//! Persist timer and zero-window probes, keepalive, ICMP errors, and timer hygiene.

use super::*;

fn zero_window(h: &mut Harness) {
    let mut a = seg(ACK, PEER_ISS + 1, ISS + 1);
    a.window = 0;
    h.send(&a, b"");
}

#[test]
fn persist_probes_zero_window_with_exponential_backoff() {
    let mut h = Harness::established(&plain_cfg());
    zero_window(&mut h);
    h.c.send(b"waiting").unwrap();
    h.recv_nothing();
    assert_eq!(h.fire_next_timer(), Duration::from_millis(200));
    let p = h.recv_one();
    assert_eq!((p.seq(), p.payload.as_slice()), (ISS + 1, &b"w"[..]), "one byte beyond the window");
    zero_window(&mut h);
    assert_eq!(h.fire_next_timer(), Duration::from_millis(400));
    assert_eq!(h.recv_one().len(), 1);
    zero_window(&mut h);
    assert_eq!(h.fire_next_timer(), Duration::from_millis(800));
    assert_eq!(h.c.state(), State::Established, "probes answered: no timeout");
}

#[test]
fn persist_stops_and_data_flows_when_the_window_opens() {
    let mut h = Harness::established(&plain_cfg());
    zero_window(&mut h);
    h.c.send(b"waiting").unwrap();
    h.recv_nothing();
    h.fire_next_timer();
    h.recv_one();
    // The probe byte was accepted and the window opened.
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    let d = h.recv_one();
    assert_eq!((d.seq(), d.payload.as_slice()), (ISS + 2, &b"aiting"[..]));
    assert!(h.c.timers.get(Timer::Persist).is_none());
}

#[test]
fn persist_probe_not_counted_as_dup_ack_trigger() {
    let mut h = Harness::established(&plain_cfg());
    zero_window(&mut h);
    h.c.send(b"waiting").unwrap();
    h.recv_nothing();
    for _ in 0..5 {
        h.fire_next_timer();
        h.recv();
        zero_window(&mut h);
    }
    assert_eq!(h.c.stats().fast_retransmits, 0);
}

#[test]
fn keepalive_probes_after_idle_then_times_out() {
    let cfg = Config { keepalive: Some((Duration::from_secs(10), Duration::from_secs(1), 3)), ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.advance(Duration::from_millis(9_999));
    h.recv_nothing();
    for i in 0..3 {
        h.advance(Duration::from_millis(if i == 0 { 1 } else { 1_000 }));
        let k = h.recv_one();
        assert_eq!((k.seq(), k.len(), k.ack()), (ISS, 0, PEER_ISS + 1), "SEG.SEQ = SND.NXT - 1");
    }
    h.advance(Duration::from_secs(1));
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.events(), vec![Event::TimedOut]);
}

#[test]
fn keepalive_answered_keeps_the_connection() {
    let cfg = Config { keepalive: Some((Duration::from_secs(10), Duration::from_secs(1), 2)), ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    for _ in 0..5 {
        h.advance(Duration::from_secs(10));
        assert_eq!(h.recv_one().seq(), ISS);
        h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    }
    assert_eq!(h.c.state(), State::Established);
}

#[test]
fn keepalive_off_by_default_arms_no_timer() {
    let h = Harness::established(&plain_cfg());
    assert_eq!(h.c.poll_timeout(), None);
}

#[test]
fn icmp_fragmentation_needed_lowers_mss_and_resends() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(&[5u8; 3000]).unwrap();
    h.recv();
    h.c.handle_icmp(h.now, IcmpError::FragmentationNeeded { mtu: 1000 });
    assert_eq!(h.c.stats().send_mss, 960);
    let r = h.recv();
    assert_eq!((r[0].seq(), r[0].len()), (ISS + 1, 960));
}

#[test]
fn icmp_fragmentation_needed_never_raises_mss_or_goes_absurdly_low() {
    let mut h = Harness::established(&plain_cfg());
    h.c.handle_icmp(h.now, IcmpError::FragmentationNeeded { mtu: 9000 });
    assert_eq!(h.c.stats().send_mss, 1460);
    h.c.handle_icmp(h.now, IcmpError::FragmentationNeeded { mtu: 50 });
    assert_eq!(h.c.stats().send_mss, 1460);
}

#[test]
fn icmp_hard_unreachable_in_syn_sent_refuses() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.c.handle_icmp(h.now, IcmpError::Unreachable { code: 3 });
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.events(), vec![Event::Reset]);
}

#[test]
fn icmp_soft_error_reported_only_with_timeout() {
    let cfg = Config { max_retransmits: 1, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.send(b"x").unwrap();
    h.recv();
    h.c.handle_icmp(h.now, IcmpError::Unreachable { code: 1 });
    assert_eq!(h.c.state(), State::Established, "host unreachable is soft");
    assert!(h.events().is_empty());
    h.fire_next_timer();
    h.recv();
    h.fire_next_timer();
    assert_eq!(h.events(), vec![Event::TimedOut]);
    assert_eq!(h.c.soft_error(), Some(IcmpError::Unreachable { code: 1 }));
}

#[test]
fn no_timer_left_when_idle_and_everything_acked() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(b"abc").unwrap();
    h.recv();
    assert!(h.c.poll_timeout().is_some());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 4), b"");
    assert_eq!(h.c.poll_timeout(), None);
}

#[test]
fn from_cookie_is_established_and_takes_the_acks_data() {
    let cfg = plain_cfg();
    let now = Instant::from_millis(1);
    let ack = seg(ACK, PEER_ISS + 1, ISS + 1);
    let mut c = Connection::from_cookie(&cfg, tuple(), SeqNumber(ISS), SeqNumber(PEER_ISS), 1200, &ack, now);
    assert_eq!(c.state(), State::Established);
    c.handle_segment(now, &ack, b"GET /");
    assert_eq!(c.recv_available(), 5);
    assert_eq!(c.stats().send_mss, 1200);
    assert_eq!(c.poll_event(), Some(Event::Connected));
}

/// RFC 9293 §3.10.7.1: a segment for a CLOSED connection is answered with
/// `<SEQ=SEG.ACK><CTL=RST>` (as Linux answers once the socket is gone); a
/// RST is not answered.
#[test]
fn segments_for_a_closed_connection_are_answered_with_rst() {
    let mut h = Harness::established(&plain_cfg());
    h.c.abort();
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"data");
    let r = h.recv_one();
    assert_eq!((r.flags(), r.seq()), (RST, ISS + 1));
    h.send(&seg(RST, PEER_ISS + 1, 0), b"");
    h.recv_nothing();
    assert!(h.c.is_finished());
}

#[test]
fn persist_zero_window_with_data_in_flight_does_not_time_out_while_peer_answers() {
    let cfg = Config { max_retransmits: 3, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.send(&[1u8; 3000]).unwrap();
    h.recv();
    // The peer takes the first 1000 bytes and closes its window.
    let mut a = seg(ACK, PEER_ISS + 1, ISS + 1001);
    a.window = 0;
    h.send(&a, b"");
    for _ in 0..20 {
        h.fire_next_timer();
        h.recv();
        h.send(&a, b"");
    }
    assert_eq!(h.c.state(), State::Established);
    // The window opens: sending resumes at SND.UNA (slow start after the RTOs).
    let mut open = seg(ACK, PEER_ISS + 1, ISS + 1001);
    open.window = 10_000;
    h.send(&open, b"");
    let r = h.recv();
    assert_eq!((r[0].seq(), r[0].len()), (ISS + 1001, 1460));
}

#[test]
fn keepalive_can_be_switched_on_at_run_time() {
    let mut h = Harness::established(&plain_cfg());
    h.c.set_keepalive(h.now, Some((Duration::from_secs(5), Duration::from_secs(1), 1)));
    h.advance(Duration::from_secs(5));
    assert_eq!(h.recv_one().seq(), ISS);
    h.c.set_keepalive(h.now, None);
    assert_eq!(h.c.poll_timeout(), None);
}

/// RFC 5961 / RFC 9293 §3.10.7.4: a segment dropped for its ACK, or answered
/// with a challenge ACK (in-window RST or SYN), proves nothing about the peer:
/// it leaves the keepalive schedule alone (Linux refreshes `rcv_tstamp` only
/// in `tcp_ack`, after the ACK is validated).
#[test]
fn rfc5961_dropped_segments_do_not_postpone_keepalive() {
    let cfg = Config { keepalive: Some((Duration::from_secs(100), Duration::from_secs(10), 3)), ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    let due = h.c.poll_timeout().unwrap();
    h.advance(Duration::from_secs(50));
    h.send(&seg(RST, PEER_ISS + 100, 0), b"");
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 100), b"x");
    h.send(&seg(SYN, PEER_ISS + 1, 0), b"");
    h.recv();
    assert_eq!(h.c.poll_timeout(), Some(due));
}

/// RFC 1122 §4.2.3.9 / RFC 5461 as Linux's `tcp_v4_err` applies them: in
/// SYN-SENT every destination unreachable (but fragmentation needed) and
/// time exceeded quoting our SYN ends the connect at once (`sk_err` from
/// `icmp_err_convert`, `tcp_done`), soft codes too; `soft_error` says which
/// (ENETUNREACH, EHOSTUNREACH... rather than ECONNREFUSED).
#[test]
fn rfc5461_icmp_error_in_syn_sent_fails_the_connect_at_once_as_linux() {
    for err in [
        IcmpError::Unreachable { code: 0 },
        IcmpError::Unreachable { code: 1 },
        IcmpError::Unreachable { code: 3 },
        IcmpError::Unreachable { code: 13 },
        IcmpError::TimeExceeded,
    ] {
        let mut h = Harness::connect(&plain_cfg());
        h.recv_one();
        h.c.handle_icmp_quoting(h.now, SeqNumber(ISS), err);
        assert_eq!(h.c.state(), State::Closed, "{err:?}");
        assert_eq!(h.events(), vec![Event::Reset], "{err:?}");
        assert_eq!(h.c.soft_error(), Some(err));
        h.recv_nothing();
    }
}

/// RFC 5927 §4.1 as Linux's `tcp_v4_err` (`between(seq, snd_una, snd_nxt)`):
/// an ICMP error quoting a sequence number we have no unacknowledged data
/// at is ignored — a blind attacker must not kill a connection attempt.
#[test]
fn rfc5927_icmp_error_quoting_a_foreign_sequence_number_is_ignored() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    assert!(!h.c.handle_icmp_quoting(h.now, SeqNumber(ISS + 5000), IcmpError::Unreachable { code: 3 }));
    assert_eq!(h.c.state(), State::SynSent);
    assert_eq!(h.c.soft_error(), None);
    let mut h = Harness::established(&plain_cfg());
    h.c.send(b"abc").unwrap();
    h.recv();
    assert!(!h.c.handle_icmp_quoting(h.now, SeqNumber(ISS + 900), IcmpError::Unreachable { code: 1 }));
    assert!(!h.c.handle_icmp_quoting(h.now, SeqNumber(ISS + 5), IcmpError::Unreachable { code: 1 }), "past SND.NXT");
    assert_eq!(h.c.soft_error(), None);
    assert!(h.c.handle_icmp_quoting(h.now, SeqNumber(ISS + 1), IcmpError::Unreachable { code: 1 }));
    assert_eq!(h.c.soft_error(), Some(IcmpError::Unreachable { code: 1 }));
    assert_eq!(h.c.state(), State::Established, "soft once synchronized");
}

/// Linux's `tcp_req_err`: a half-open (SYN-RECEIVED) connection whose
/// SYN-ACK drew net/host unreachable or time exceeded is dropped quietly
/// (nobody accepted it yet); other codes leave it alone.
#[test]
fn rfc5461_icmp_net_or_host_unreachable_drops_a_syn_received_connection_as_linux() {
    for (err, dropped) in [
        (IcmpError::Unreachable { code: 0 }, true),
        (IcmpError::Unreachable { code: 1 }, true),
        (IcmpError::TimeExceeded, true),
        (IcmpError::Unreachable { code: 3 }, false),
    ] {
        let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
        h.recv_one();
        h.c.handle_icmp_quoting(h.now, SeqNumber(ISS), err);
        let want = if dropped { State::Closed } else { State::SynReceived };
        assert_eq!(h.c.state(), want, "{err:?}");
        assert!(h.events().is_empty(), "{err:?}");
        assert_eq!(h.c.is_finished(), dropped);
    }
}

/// RFC 5927 §4.1 for a listener's half-open connection, as Linux's
/// `tcp_req_err` (`seq != snt_isn` is ignored, counted OutOfWindowIcmps): it
/// has sent only its SYN-ACK, so only an error quoting exactly our ISS is
/// believed.
#[test]
fn rfc5927_icmp_error_about_a_half_open_connection_must_quote_its_iss() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    for seq in [ISS + 1, ISS.wrapping_sub(1), ISS + 70_000] {
        assert!(!h.c.handle_icmp_quoting(h.now, SeqNumber(seq), IcmpError::Unreachable { code: 1 }), "{seq}");
        assert_eq!(h.c.state(), State::SynReceived, "{seq}");
    }
    assert!(h.c.handle_icmp_quoting(h.now, SeqNumber(ISS), IcmpError::Unreachable { code: 1 }));
    assert!(h.c.is_finished());
}

/// RFC 5927 §4.1 / RFC 1122 §4.2.3.9: a connection in TIME-WAIT has nothing
/// in flight an ICMP error could be about; Linux's `tcp_v4_err` drops it for a
/// TIME-WAIT socket. It is ignored (the caller counts it) and changes nothing.
#[test]
fn rfc5927_icmp_error_about_a_time_wait_connection_is_ignored() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    h.recv_one();
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 2), b"");
    h.recv();
    assert_eq!(h.c.state(), State::TimeWait);
    for err in [IcmpError::Unreachable { code: 1 }, IcmpError::FragmentationNeeded { mtu: 600 }] {
        assert!(!h.c.handle_icmp_quoting(h.now, SeqNumber(ISS + 2), err), "{err:?}");
    }
    assert_eq!((h.c.soft_error(), h.c.stats().send_mss), (None, 1460));
    assert_eq!(h.c.state(), State::TimeWait);
}

/// RFC 1122 §4.2.3.6 leaves what a keepalive timeout sends to the
/// implementation; Linux's `tcp_keepalive_timer` sends an active reset
/// (`tcp_send_active_reset`: RST+ACK at an acceptable sequence number, the
/// TS option when timestamps were negotiated, RFC 7323 §4.2) before it
/// reports ETIMEDOUT.
#[test]
fn rfc1122_4_2_3_6_keepalive_timeout_sends_an_active_rst_as_linux() {
    let cfg = Config { keepalive: Some((Duration::from_secs(10), Duration::from_secs(1), 2)), timestamps: true, ..plain_cfg() };
    let opts = TcpOptions { mss: Some(1460), timestamps: Some((500, 10_001)), ..TcpOptions::default() };
    let mut h = Harness::established_with(&cfg, opts);
    h.advance(Duration::from_secs(10));
    assert_eq!(h.recv_one().seq(), ISS);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.recv_one().seq(), ISS);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.events(), vec![Event::TimedOut]);
    let r = h.recv_one();
    assert_eq!((r.flags(), r.seq(), r.ack()), (RST | ACK, ISS + 1, PEER_ISS + 1));
    assert_eq!(r.repr.options.timestamps.map(|t| t.1), Some(500));
    assert!(h.c.is_finished());
}
