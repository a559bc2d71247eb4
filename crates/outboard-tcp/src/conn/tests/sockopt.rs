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

/// SO_RCVBUF set before connect (Linux's `tcp_connect_init` with a locked
/// receive buffer): the SYN's window scale is chosen for the clamp, and the
/// window offered never exceeds the clamp less the bytes not yet read.
#[test]
fn rfc7323_2_2_a_receive_clamp_before_the_syn_chooses_the_scale_and_bounds_the_window() {
    let cfg = Config { window_scaling: true, recv_buffer: 256 * 1024, ..plain_cfg() };
    let mut h = Harness::connect(&cfg);
    h.c.set_rcv_clamp(16 * 1024);
    let syn = h.recv_one();
    assert_eq!(syn.repr.options.window_scale, Some(0), "16 KiB needs no shift");
    assert_eq!(syn.repr.window, 16 * 1024);
    let mut sa = seg(SYN | ACK, PEER_ISS, ISS + 1);
    sa.options = TcpOptions { mss: Some(1000), window_scale: Some(7), ..TcpOptions::default() };
    h.send(&sa, b"");
    let ack = h.recv_one();
    assert_eq!(ack.repr.window, 16 * 1024);
    // 10,000 bytes arrive unread: the window's right edge stays where it was.
    for i in 0..10u32 {
        h.send(&seg(ACK, PEER_ISS + 1 + i * 1000, ISS + 1), &[i as u8; 1000]);
    }
    let acks = h.recv();
    let last = acks.last().expect("an ACK");
    assert_eq!(last.ack(), PEER_ISS + 1 + 10_000);
    assert!(usize::from(last.repr.window) <= 16 * 1024 - 10_000, "window {}", last.repr.window);
    // Without a clamp the default shift (Linux's 7) and the region's window.
    let mut d = Harness::connect(&cfg);
    let syn = d.recv_one();
    assert_eq!(syn.repr.options.window_scale, Some(7));
    assert_eq!(syn.repr.window, u16::MAX);
    // A clamp of 1 MiB: shift 5 (2^20 >> 4 is one over 65535), as Linux's ilog2(space) - 15.
    let mut m = Harness::connect(&Config { recv_buffer: 4 << 20, ..cfg });
    m.c.set_rcv_clamp(1 << 20);
    assert_eq!(m.recv_one().repr.options.window_scale, Some(5));
}
