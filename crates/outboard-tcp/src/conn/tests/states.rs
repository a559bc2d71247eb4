//! One test per transition of the RFC 9293 §3.3.2 state diagram (figure 5).

use super::*;

#[test]
fn closed_connect_to_syn_sent_sends_syn_with_mss() {
    let mut h = Harness::connect(&plain_cfg());
    assert_eq!(h.c.state(), State::SynSent);
    let syn = h.recv_one();
    assert_eq!(syn.flags(), SYN);
    assert_eq!(syn.seq(), ISS);
    assert_eq!(syn.repr.options.mss, Some(1460));
    assert_eq!(syn.repr.window, 65535);
    assert_eq!((syn.repr.src_port, syn.repr.dst_port), (LOCAL_PORT, REMOTE_PORT));
    h.recv_nothing();
    assert!(h.c.poll_timeout().is_some(), "SYN retransmission timer armed");
}

#[test]
fn syn_sent_rcv_syn_ack_to_established() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.send(&seg(SYN | ACK, PEER_ISS, ISS + 1), b"");
    assert_eq!(h.c.state(), State::Established);
    let ack = h.recv_one();
    assert_eq!(ack.flags(), ACK);
    assert_eq!((ack.seq(), ack.ack()), (ISS + 1, PEER_ISS + 1));
    assert_eq!(h.events(), vec![Event::Connected]);
    assert_eq!(h.c.poll_timeout(), None, "SYN acknowledged: no timer left");
}

#[test]
fn syn_sent_rcv_syn_to_syn_received() {
    // Simultaneous open: both sides send SYN.
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.send(&seg(SYN, PEER_ISS, 0), b"");
    assert_eq!(h.c.state(), State::SynReceived);
    let synack = h.recv_one();
    assert_eq!(synack.flags(), SYN | ACK);
    assert_eq!((synack.seq(), synack.ack()), (ISS, PEER_ISS + 1));
}

#[test]
fn syn_received_rcv_syn_ack_to_established_in_simultaneous_open() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.send(&seg(SYN, PEER_ISS, 0), b"");
    h.recv_one();
    // The peer's SYN-ACK repeats its SYN and acknowledges ours.
    h.send(&seg(SYN | ACK, PEER_ISS, ISS + 1), b"");
    assert_eq!(h.c.state(), State::Established);
    assert_eq!(h.events(), vec![Event::Connected]);
}

#[test]
fn listen_rcv_syn_to_syn_received_sends_syn_ack() {
    let mut syn = seg(SYN, PEER_ISS, 0);
    syn.options.mss = Some(1200);
    let mut h = Harness::accept(&plain_cfg(), &syn);
    assert_eq!(h.c.state(), State::SynReceived);
    let sa = h.recv_one();
    assert_eq!(sa.flags(), SYN | ACK);
    assert_eq!((sa.seq(), sa.ack()), (ISS, PEER_ISS + 1));
    assert_eq!(sa.repr.options.mss, Some(1460));
    assert_eq!(h.c.stats().send_mss, 1200);
}

#[test]
fn syn_received_rcv_ack_to_established() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"");
    assert_eq!(h.c.state(), State::Established);
    assert_eq!(h.events(), vec![Event::Connected]);
    h.recv_nothing();
}

#[test]
fn syn_received_rcv_ack_with_data_delivers_it() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"hello");
    assert_eq!(h.c.state(), State::Established);
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Ok(5));
    assert_eq!(&buf[..5], b"hello");
}

#[test]
fn syn_received_rcv_bad_ack_sends_rst() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 500), b"");
    let rst = h.recv_one();
    assert_eq!(rst.flags(), RST);
    assert_eq!(rst.seq(), ISS + 500);
    assert_eq!(h.c.state(), State::SynReceived);
}

#[test]
fn syn_received_retransmitted_syn_resends_syn_ack() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.send(&seg(SYN, PEER_ISS, 0), b"");
    let sa = h.recv_one();
    assert_eq!(sa.flags(), SYN | ACK);
    assert_eq!(h.c.state(), State::SynReceived);
}

#[test]
fn syn_received_rcv_rst_to_closed() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    h.recv_one();
    h.send(&seg(RST, PEER_ISS + 1, 0), b"");
    assert_eq!(h.c.state(), State::Closed);
    assert!(h.c.is_finished());
}

#[test]
fn syn_sent_rcv_rst_ack_to_closed_refused() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.send(&seg(RST | ACK, 0, ISS + 1), b"");
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.events(), vec![Event::Reset]);
    assert_eq!(h.c.send(b"x"), Err(Error::Reset));
    h.recv_nothing();
}

#[test]
fn syn_sent_rcv_rst_without_ack_is_ignored() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.send(&seg(RST, 0, 0), b"");
    assert_eq!(h.c.state(), State::SynSent);
}

#[test]
fn syn_sent_rcv_unacceptable_ack_sends_rst() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.send(&seg(SYN | ACK, PEER_ISS, ISS + 7), b"");
    let rst = h.recv_one();
    assert_eq!(rst.flags(), RST);
    assert_eq!(rst.seq(), ISS + 7);
    assert_eq!(h.c.state(), State::SynSent);
}

#[test]
fn syn_sent_close_to_closed() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    h.c.close();
    assert_eq!(h.c.state(), State::Closed);
    assert!(h.c.is_finished());
    h.recv_nothing();
}

#[test]
fn syn_sent_retransmits_syn_then_times_out() {
    let cfg = Config { max_syn_retransmits: 2, ..plain_cfg() };
    let mut h = Harness::connect(&cfg);
    h.recv_one();
    assert_eq!(h.fire_next_timer(), Duration::from_secs(1));
    assert_eq!(h.recv_one().flags(), SYN);
    assert_eq!(h.fire_next_timer(), Duration::from_secs(2), "RFC 6298 §5.5 backoff");
    assert_eq!(h.recv_one().flags(), SYN);
    h.fire_next_timer();
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.events(), vec![Event::TimedOut]);
    assert_eq!(h.c.recv(&mut [0; 4]), Err(Error::TimedOut));
}

/// A half-open connection (SYN-RECEIVED, the peer never ACKs) retransmits
/// its SYN-ACK 5 times (1, 2, 4, 8, 16 s) and is dropped 32 s after the last:
/// 63 s in all, Linux's `tcp_synack_retries` lifetime.
#[test]
fn syn_received_retransmits_syn_ack_five_times_and_lives_63_s_as_linux() {
    let mut h = Harness::accept(&plain_cfg(), &seg(SYN, PEER_ISS, 0));
    assert_eq!(h.recv_one().flags(), SYN | ACK);
    let mut lived = Duration::ZERO;
    for backoff in [1, 2, 4, 8, 16] {
        let d = h.fire_next_timer();
        assert_eq!(d, Duration::from_secs(backoff));
        lived += d;
        assert_eq!(h.recv_one().flags(), SYN | ACK, "retransmission after {backoff} s");
    }
    lived += h.fire_next_timer();
    assert_eq!(lived, Duration::from_secs(63));
    assert_eq!(h.c.state(), State::Closed);
    h.recv_nothing();
}

#[test]
fn established_close_to_fin_wait_1_sends_fin() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    assert_eq!(h.c.state(), State::FinWait1);
    let fin = h.recv_one();
    assert_eq!(fin.flags(), FIN | ACK);
    assert_eq!((fin.seq(), fin.ack()), (ISS + 1, PEER_ISS + 1));
}

#[test]
fn established_close_sends_queued_data_before_fin() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(b"bye").unwrap();
    h.c.close();
    let s = h.recv_one();
    assert_eq!(s.flags(), FIN | ACK | TcpFlags::PSH);
    assert_eq!(s.payload, b"bye");
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 5), b"");
    assert_eq!(h.c.state(), State::FinWait2);
}

#[test]
fn fin_wait_1_rcv_ack_of_fin_to_fin_wait_2() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.c.state(), State::FinWait2);
}

#[test]
fn fin_wait_2_rcv_fin_to_time_wait() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.c.state(), State::TimeWait);
    let ack = h.recv_one();
    assert_eq!((ack.flags(), ack.ack()), (ACK, PEER_ISS + 2));
    assert!(h.events().contains(&Event::Closed));
}

#[test]
fn fin_wait_1_rcv_fin_to_closing() {
    // Simultaneous close: the peer's FIN crosses ours.
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    h.recv_one();
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
    assert_eq!(h.c.state(), State::Closing);
    let ack = h.recv_one();
    assert_eq!(ack.ack(), PEER_ISS + 2);
}

#[test]
fn closing_rcv_ack_of_fin_to_time_wait() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    h.recv_one();
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 2, ISS + 2), b"");
    assert_eq!(h.c.state(), State::TimeWait);
}

#[test]
fn fin_wait_1_rcv_fin_ack_to_time_wait() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    h.recv_one();
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.c.state(), State::TimeWait);
    assert_eq!(h.recv_one().ack(), PEER_ISS + 2);
}

/// The peer's FIN in ESTABLISHED: CLOSE-WAIT, and its ACK is delayed, as
/// Linux's `tcp_fin` does (interactive mode: our own FIN may carry it).
/// Linux's loopback shows the same: the ACK of a FIN 41 ms after it.
#[test]
fn established_rcv_fin_to_close_wait() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
    assert_eq!(h.c.state(), State::CloseWait);
    assert_eq!(h.events(), vec![Event::PeerClosed]);
    assert_eq!(h.c.recv(&mut [0; 8]), Ok(0), "end of stream");
    h.advance(Duration::from_millis(39));
    h.recv_nothing();
    h.advance(Duration::from_millis(1));
    assert_eq!(h.recv_one().ack(), PEER_ISS + 2, "acknowledged after ato (40 ms)");
}

/// An application that closes at once answers the FIN with its own, which
/// carries the ACK: three segments close the connection, not four.
#[test]
fn close_wait_close_to_last_ack() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
    h.recv_nothing();
    h.c.close();
    assert_eq!(h.c.state(), State::LastAck);
    let fin = h.recv_one();
    assert_eq!((fin.flags(), fin.seq(), fin.ack()), (FIN | ACK, ISS + 1, PEER_ISS + 2));
    h.advance(Duration::from_millis(100));
    h.recv_nothing();
}

#[test]
fn last_ack_rcv_ack_of_fin_to_closed() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
    h.c.close();
    h.recv_one();
    h.events();
    h.send(&seg(ACK, PEER_ISS + 2, ISS + 2), b"");
    assert_eq!(h.c.state(), State::Closed);
    assert!(h.c.is_finished());
    assert_eq!(h.events(), vec![Event::Closed]);
}

#[test]
fn time_wait_expires_after_2msl() {
    let cfg = Config { time_wait: Duration::from_secs(30), ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.close();
    h.recv_one();
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 2), b"");
    h.recv_one();
    assert_eq!(h.c.state(), State::TimeWait);
    h.advance(Duration::from_secs(29));
    assert_eq!(h.c.state(), State::TimeWait);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.c.state(), State::Closed);
    assert!(h.c.is_finished());
}

#[test]
fn time_wait_rcv_retransmitted_fin_acks_and_restarts_2msl() {
    let cfg = Config { time_wait: Duration::from_secs(30), ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.close();
    h.recv_one();
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 2), b"");
    h.recv_one();
    h.advance(Duration::from_secs(20));
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.recv_one().ack(), PEER_ISS + 2);
    h.advance(Duration::from_secs(20));
    assert_eq!(h.c.state(), State::TimeWait, "2·MSL restarted by the FIN");
    h.advance(Duration::from_secs(10));
    assert_eq!(h.c.state(), State::Closed);
}

#[test]
fn half_close_fin_wait_2_still_receives_data() {
    let mut h = Harness::established(&plain_cfg());
    h.c.shutdown_write();
    assert_eq!(h.c.state(), State::FinWait1);
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.c.state(), State::FinWait2);
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"still here");
    let mut buf = [0u8; 32];
    assert_eq!(h.c.recv(&mut buf), Ok(10));
    assert_eq!(h.c.send(b"x"), Err(Error::Closed));
}

#[test]
fn half_close_close_wait_still_sends_data() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 1), b"");
    // The reply carries the FIN's ACK (no ACK of its own before it).
    assert_eq!(h.c.send(b"reply"), Ok(5));
    let d = h.recv_one();
    assert_eq!(d.payload, b"reply");
    assert_eq!(d.ack(), PEER_ISS + 2);
}

#[test]
fn abort_sends_rst_and_closes() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(b"unsent").unwrap();
    h.c.abort();
    assert_eq!(h.c.state(), State::Closed);
    let rst = h.recv_one();
    assert!(rst.flags().rst());
    assert_eq!(rst.len(), 0);
    assert!(h.c.is_finished());
}

#[test]
fn close_with_unread_data_sends_rst() {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"unread");
    h.recv();
    h.c.close();
    assert_eq!(h.c.state(), State::Closed);
    assert!(h.recv_one().flags().rst());
}

#[test]
fn data_after_close_is_answered_with_rst() {
    let mut h = Harness::established(&plain_cfg());
    h.c.close();
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"late data");
    assert!(h.recv_one().flags().rst());
    assert_eq!(h.c.state(), State::Closed);
}

#[test]
fn fin_wait_2_after_close_gives_up_after_timeout() {
    let cfg = Config { time_wait: Duration::from_secs(30), ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.close();
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.c.state(), State::FinWait2);
    h.advance(Duration::from_secs(31));
    assert_eq!(h.c.state(), State::Closed);
}
