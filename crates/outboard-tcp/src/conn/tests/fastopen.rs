//! RFC 7413 TCP Fast Open: the client's SYN with a cookie request or a cookie
//! and data, the server's acceptance of data in the SYN, and the fallbacks.

use super::*;
use outboard_wire::FastOpenCookie;

fn cookie() -> FastOpenCookie {
    FastOpenCookie::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap()
}

/// A client that connects with Fast Open and `cached` as the destination's cookie.
fn tfo_client(cached: Option<FastOpenCookie>) -> Harness {
    let mut h = Harness::connect(&plain_cfg());
    h.c.set_fast_open(cached);
    h
}

fn synack(ack: u32, cookie: Option<FastOpenCookie>) -> TcpRepr {
    let mut sa = seg(SYN | ACK, PEER_ISS, ack);
    sa.options.mss = Some(1460);
    sa.options.fast_open = cookie;
    sa
}

#[test]
fn rfc7413_4_1_1_client_without_cookie_sends_request_at_once() {
    let mut h = tfo_client(None);
    let syn = h.recv_one();
    assert_eq!(syn.flags(), SYN);
    assert_eq!(syn.repr.options.fast_open, Some(FastOpenCookie::request()));
    assert_eq!(syn.len(), 0, "no cookie: no data in the SYN");
    h.send(&synack(ISS + 1, Some(cookie())), b"");
    assert_eq!(h.c.state(), State::Established);
    let r = h.c.take_fast_open_report().expect("a report");
    assert_eq!(r.cookie, Some(cookie()));
    assert!(!r.data_acked && !r.data_not_acked && !r.syn_loss);
    assert!(!h.c.info().syn_data);
    assert_eq!(h.c.take_fast_open_report(), None, "reported once");
}

#[test]
fn rfc7413_4_2_1_client_with_cookie_sends_data_in_syn() {
    let mut h = tfo_client(Some(cookie()));
    h.recv_nothing(); // the SYN waits for data
    assert_eq!(h.c.send(b"GET / HTTP/1.0\r\n\r\n"), Ok(18));
    let syn = h.recv_one();
    assert_eq!(syn.flags(), SYN);
    assert_eq!(syn.seq(), ISS);
    assert_eq!(syn.repr.options.fast_open, Some(cookie()));
    assert_eq!(syn.payload, b"GET / HTTP/1.0\r\n\r\n");
    h.send(&synack(ISS + 1 + 18, None), b"");
    assert_eq!(h.c.state(), State::Established);
    let out = h.recv();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].flags(), out[0].seq(), out[0].len()), (ACK, ISS + 1 + 18, 0), "nothing resent");
    let r = h.c.take_fast_open_report().unwrap();
    assert!(r.data_acked && !r.data_not_acked);
    assert!(h.c.info().syn_data, "TCPI_OPT_SYN_DATA");
    assert_eq!(h.c.stats().retransmits, 0);
}

#[test]
fn rfc7413_4_2_2_data_the_synack_does_not_ack_is_sent_after_the_handshake() {
    let mut h = tfo_client(Some(cookie()));
    h.c.send(b"hello").unwrap();
    let syn = h.recv_one();
    assert_eq!(syn.payload, b"hello");
    // A server that rejected the cookie acknowledges only the SYN.
    h.send(&synack(ISS + 1, Some(FastOpenCookie::new(&[9; 8]).unwrap())), b"");
    assert_eq!(h.c.state(), State::Established);
    let out = h.recv();
    let data: Vec<_> = out.iter().filter(|o| o.len() > 0).collect();
    assert_eq!(data.len(), 1, "{out:?}");
    assert_eq!((data[0].seq(), data[0].payload.as_slice()), (ISS + 1, &b"hello"[..]));
    let r = h.c.take_fast_open_report().unwrap();
    assert!(r.data_not_acked && !r.data_acked && !r.syn_loss);
    assert_eq!(r.cookie, FastOpenCookie::new(&[9; 8]), "the new cookie is learned");
    assert!(!h.c.info().syn_data);
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 6), b"");
    assert_eq!(h.c.stats().send_queue, 0);
}

#[test]
fn rfc7413_4_1_3_a_syn_with_data_that_times_out_is_retried_without_data() {
    let mut h = tfo_client(Some(cookie()));
    h.c.send(b"hello").unwrap();
    assert_eq!(h.recv_one().len(), 5);
    h.fire_next_timer();
    let again = h.recv_one();
    assert_eq!(again.flags(), SYN);
    assert_eq!((again.len(), again.repr.options.fast_open), (0, None), "a plain SYN");
    h.send(&synack(ISS + 1, None), b"");
    assert_eq!(h.c.state(), State::Established);
    let out = h.recv();
    assert!(out.iter().any(|o| o.seq() == ISS + 1 && o.payload == b"hello"), "{out:?}");
    let r = h.c.take_fast_open_report().unwrap();
    assert!(r.syn_loss, "the stack marks the destination");
}

#[test]
fn rfc7413_4_1_2_shutdown_before_any_data_releases_the_deferred_syn() {
    let mut h = tfo_client(Some(cookie()));
    h.recv_nothing();
    h.c.shutdown_write();
    let syn = h.recv_one();
    assert_eq!((syn.flags(), syn.len()), (SYN, 0));
}

fn tfo_syn() -> TcpRepr {
    let mut s = seg(SYN, PEER_ISS, 0);
    s.options.mss = Some(1460);
    s.options.fast_open = Some(cookie());
    s
}

#[test]
fn rfc7413_4_2_2_server_delivers_syn_data_at_once_and_acks_it() {
    let now = Instant::from_millis(10_000);
    let c = Connection::accept_fast_open(&plain_cfg(), tuple(), &tfo_syn(), b"ping", SeqNumber(ISS), now, true, None);
    let mut h = Harness { c, now };
    assert!(h.c.is_passive_fast_open());
    assert!(h.events().contains(&Event::Readable), "readable before the handshake completes");
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Ok(4));
    assert_eq!(&buf[..4], b"ping");
    let sa = h.recv_one();
    assert_eq!(sa.flags(), SYN | ACK);
    assert_eq!(sa.ack(), PEER_ISS + 1 + 4, "the SYN-ACK acknowledges the data");
    assert_eq!(sa.repr.options.fast_open, None);
    h.send(&seg(ACK, PEER_ISS + 5, ISS + 1), b"");
    assert_eq!(h.c.state(), State::Established);
}

#[test]
fn rfc7413_4_2_1_server_drops_data_with_an_invalid_cookie_and_sends_a_fresh_one() {
    let now = Instant::from_millis(10_000);
    let fresh = FastOpenCookie::new(&[7; 8]).unwrap();
    let c = Connection::accept_fast_open(&plain_cfg(), tuple(), &tfo_syn(), b"ping", SeqNumber(ISS), now, false, Some(fresh));
    let mut h = Harness { c, now };
    assert!(!h.c.is_passive_fast_open());
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Err(Error::WouldBlock));
    let sa = h.recv_one();
    assert_eq!(sa.ack(), PEER_ISS + 1, "only the SYN is acknowledged");
    assert_eq!(sa.repr.options.fast_open, Some(fresh));
    // The client sends the data again after the handshake.
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"ping");
    assert_eq!(h.c.recv(&mut buf), Ok(4));
}
