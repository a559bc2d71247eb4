//! Run-time socket options (`conn/sockopt.rs`) through the whole connection:
//! TCP_MAXSEG before the SYN, TCP_CORK and its ceiling, TCP_USER_TIMEOUT.
use super::*;

#[test]
fn a_user_mss_goes_in_the_syn_and_caps_every_data_segment() {
    let mut h = Harness::connect(&plain_cfg());
    h.c.set_user_mss(1000);
    let syn = h.recv_one();
    assert_eq!(syn.repr.options.mss, Some(1000));
    let mut sa = seg(SYN | ACK, PEER_ISS, ISS + 1);
    sa.options = TcpOptions { mss: Some(1460), ..TcpOptions::default() };
    h.send(&sa, b"");
    h.recv_one();
    assert_eq!(h.c.info().snd_mss, 1000);
    h.c.set_nodelay(true);
    h.c.send(&[7u8; 5000]).unwrap();
    let out = h.recv();
    assert!(!out.is_empty());
    assert!(out.iter().all(|o| o.len() <= 1000), "{:?}", out.iter().map(Out::len).collect::<Vec<_>>());
}

#[test]
fn cork_holds_a_partial_segment_until_uncorked() {
    let mut h = Harness::established(&plain_cfg());
    h.c.set_cork(h.now, true);
    h.c.send(b"abc").unwrap();
    h.recv_nothing();
    h.advance(Duration::from_millis(100));
    h.recv_nothing();
    h.c.set_cork(h.now, false);
    let o = h.recv_one();
    assert_eq!(o.payload, b"abc");
}

#[test]
fn cork_sends_full_segments_and_holds_only_the_tail() {
    let mut h = Harness::established(&plain_cfg());
    h.c.set_cork(h.now, true);
    h.c.send(&[1u8; 1460 + 10]).unwrap();
    let o = h.recv_one();
    assert_eq!(o.len(), 1460, "the full segment goes, the 10 bytes wait");
}

#[test]
fn a_corked_partial_segment_goes_after_200_ms() {
    let mut h = Harness::established(&plain_cfg());
    h.c.set_cork(h.now, true);
    h.c.send(b"x").unwrap();
    h.recv_nothing();
    let waited = h.fire_next_timer();
    assert_eq!(waited, Duration::from_millis(200));
    assert_eq!(h.recv_one().payload, b"x");
}

#[test]
fn the_user_timeout_fails_a_connection_whose_data_goes_unacknowledged() {
    let mut h = Harness::established(&plain_cfg());
    h.c.set_user_timeout(h.now, Some(Duration::from_millis(1500)));
    let t0 = h.now;
    h.c.send(b"hello").unwrap();
    assert_eq!(h.recv_one().len(), 5);
    // Retransmissions at 1 s, then the user timeout at 1.5 s (before the second RTO).
    h.advance(Duration::from_millis(1499));
    assert_eq!(h.c.state(), State::Established);
    h.advance(Duration::from_millis(1));
    assert_eq!(h.c.state(), State::Closed, "timed out at {:?}", h.now - t0);
    assert!(h.events().contains(&Event::TimedOut));
    assert_eq!(h.c.recv(&mut [0u8; 8]), Err(Error::TimedOut));
}

#[test]
fn an_acknowledgement_restarts_the_user_timeout() {
    let mut h = Harness::established(&plain_cfg());
    h.c.set_user_timeout(h.now, Some(Duration::from_millis(1500)));
    h.c.set_nodelay(true);
    h.c.send(b"one").unwrap();
    h.recv_one();
    h.advance(Duration::from_millis(900));
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 4), b"");
    h.c.send(b"two").unwrap();
    h.recv();
    h.advance(Duration::from_millis(1400));
    assert_eq!(h.c.state(), State::Established, "1.4 s after the last progress");
    h.advance(Duration::from_millis(200));
    assert_eq!(h.c.state(), State::Closed);
}
