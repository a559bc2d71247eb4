//! Rings in lent storage: `attach_storage` (mid-connection, with queued and
//! parked bytes), `send_in_place` and `recv_consume` against their copying
//! twins, and stream positions fixed at `k % capacity`.

use super::*;

fn lent(n: usize) -> Box<dyn crate::ring::RingStorage> {
    Box::new(vec![0u8; n])
}

/// Writes `data` into the send ring's free space and queues it in place.
fn send_in_place(c: &mut Connection, data: &[u8]) -> Result<usize, Error> {
    let (a, b) = c.send_space_mut();
    let first = data.len().min(a.len());
    a[..first].copy_from_slice(&data[..first]);
    let second = (data.len() - first).min(b.len());
    b[..second].copy_from_slice(&data[first..first + second]);
    c.send_in_place(data.len())
}

fn read_in_place(c: &mut Connection) -> Vec<u8> {
    let (a, b) = c.recv_slices();
    let mut v = a.to_vec();
    v.extend_from_slice(b);
    assert_eq!(c.recv_consume(v.len()), v.len());
    v
}

#[test]
fn send_in_place_sends_what_the_application_wrote_into_the_ring() {
    let mut h = Harness::established(&plain_cfg());
    assert_eq!(h.c.attach_storage(lent(64 * 1024), lent(64 * 1024)), 0);
    assert_eq!(send_in_place(&mut h.c, b"hello"), Ok(5));
    assert_eq!(h.c.send_queued(), 5);
    let out = h.recv_one();
    assert_eq!((out.seq(), &out.payload[..]), (ISS + 1, &b"hello"[..]));
    assert_eq!(h.c.send_queued(), 5, "sent but unacknowledged bytes stay queued");
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 6), b"");
    assert_eq!((h.c.send_queued(), h.c.ring_heads().0), (0, 5));
    assert_eq!(&h.c.send_buf.storage_bytes()[..5], b"hello");
}

#[test]
fn send_in_place_is_clamped_and_asks_for_writable_like_send() {
    let cfg = Config { send_buffer: 100, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.attach_storage(lent(100), lent(64 * 1024));
    assert_eq!(h.c.send_space_mut().0.len() + h.c.send_space_mut().1.len(), 100);
    assert_eq!(h.c.send_in_place(150), Ok(100));
    assert_eq!(h.c.send_capacity(), 0);
    assert_eq!(h.c.send_in_place(1), Err(Error::WouldBlock));
    assert_eq!(h.c.send_in_place(0), Ok(0));
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 51), b"");
    assert_eq!(h.events(), vec![Event::Writable]);
    assert_eq!(h.c.send_capacity(), 50);
}

#[test]
fn send_in_place_holds_small_writes_under_nagle_like_send() {
    let mut h = Harness::established(&plain_cfg());
    h.c.attach_storage(lent(64 * 1024), lent(64 * 1024));
    send_in_place(&mut h.c, b"a").unwrap();
    assert_eq!(h.recv_one().payload, b"a");
    send_in_place(&mut h.c, b"b").unwrap();
    h.recv_nothing();
    send_in_place(&mut h.c, b"c").unwrap();
    h.recv_nothing();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    assert_eq!(h.recv_one().payload, b"bc");
}

#[test]
fn send_in_place_has_the_errors_of_send_in_every_state() {
    let check = |c: &mut Connection, what: &str| {
        let before = c.send_queued();
        let r = c.send_in_place(1);
        if r.is_ok() {
            assert_eq!(c.send_queued(), before + 1);
        }
        assert_eq!(r, c.send(b"x"), "{what}");
    };
    let mut h = Harness::connect(&plain_cfg());
    check(&mut h.c, "SYN-SENT");
    let mut h = Harness::established(&plain_cfg());
    check(&mut h.c, "ESTABLISHED");
    h.c.shutdown_write();
    check(&mut h.c, "FIN-WAIT-1");
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(RST | ACK, PEER_ISS + 1, ISS + 1), b"");
    check(&mut h.c, "reset");
    let mut h = Harness::connect(&plain_cfg());
    h.c.close();
    check(&mut h.c, "closed");
}

#[test]
fn recv_consume_opens_the_window_as_recv_does() {
    let cfg = Config { recv_buffer: 4096, ..plain_cfg() };
    let mut copying = Harness::established(&cfg);
    let mut in_place = Harness::established(&cfg);
    in_place.c.attach_storage(lent(64 * 1024), lent(4096));
    let data: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
    for h in [&mut copying, &mut in_place] {
        h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), &data);
        assert_eq!(h.recv_one().repr.window, 0);
    }
    // A small read does not open the window (receiver SWS avoidance) ...
    let mut buf = [0u8; 100];
    assert_eq!(copying.c.recv(&mut buf), Ok(100));
    assert_eq!(in_place.c.recv_consume(100), 100);
    copying.recv_nothing();
    in_place.recv_nothing();
    // ... reading the rest does, to the same window.
    let mut rest = vec![0u8; 8192];
    assert_eq!(copying.c.recv(&mut rest), Ok(3996));
    assert_eq!(&read_in_place(&mut in_place.c)[..], &data[100..]);
    let (a, b) = (copying.recv_one(), in_place.recv_one());
    assert_eq!((a.repr.window, a.ack()), (4096, PEER_ISS + 4097));
    assert_eq!((b.repr.window, b.ack()), (a.repr.window, a.ack()));
    assert_eq!(in_place.c.recv_consume(10), 0, "nothing left");
}

#[test]
fn attach_mid_connection_moves_queued_and_parked_bytes_to_index_zero() {
    let cfg = Config { sack: true, ..plain_cfg() };
    let mut h =
        Harness::established_with(&cfg, TcpOptions { mss: Some(1460), sack_permitted: true, ..Default::default() });
    h.c.send(b"0123456789").unwrap();
    h.recv();
    // The peer acknowledges 4 bytes and sends "abc", then "xyz" after a 2-byte hole.
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 5), b"abc");
    h.send(&seg(ACK, PEER_ISS + 6, ISS + 5), b"xyz");
    h.recv();
    assert_eq!(h.c.recv(&mut [0u8; 1]), Ok(1));
    let moved = h.c.attach_storage(lent(64 * 1024), lent(64 * 1024));
    assert_eq!(moved, 6 + 2 + 3, "unacknowledged, unread and parked bytes");
    assert_eq!(h.c.ring_heads(), (0, 0));
    assert_eq!(&h.c.send_buf.storage_bytes()[..6], b"456789");
    assert_eq!(&h.c.recv_buf.storage_bytes()[..7], b"bc\0\0xyz");
    assert_eq!(h.c.buffer_bytes(), (0, 0), "board memory is not the connection's heap");
    // Both streams carry on: the hole fills, the rest is acknowledged.
    h.send(&seg(ACK, PEER_ISS + 4, ISS + 11), b"de");
    assert_eq!(read_in_place(&mut h.c), b"bcdexyz");
    assert_eq!(h.recv_one().ack(), PEER_ISS + 9);
    assert_eq!(h.c.send_queued(), 0);
    assert_eq!(h.c.ring_heads(), (6, 7));
}

#[test]
fn attach_to_larger_storage_lets_the_window_grow() {
    let cfg = Config { recv_buffer: 4096, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.attach_storage(lent(64 * 1024), lent(16 * 1024));
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"x");
    assert_eq!(h.recv_one().repr.window, 16 * 1024 - 1);
}

/// Both streams pass several times around small rings: byte `k` of each,
/// counted from the attach, is always at index `k % capacity`.
#[test]
fn stream_positions_stay_at_k_mod_capacity_across_wraps() {
    const CAP: usize = 3000;
    let cfg = Config { recv_buffer: CAP, send_buffer: CAP, nodelay: true, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    h.c.attach_storage(lent(CAP), lent(CAP));
    let stream = |k: usize| (k * 7 + k / 251) as u8;
    let (mut rx, mut tx, mut acked) = (0usize, 0usize, 0usize);
    while rx < 20_000 || acked < 20_000 {
        // The peer sends 1000 bytes; we read them in place where they must be.
        let chunk: Vec<u8> = (rx..rx + 1000).map(stream).collect();
        h.send(&seg(ACK, PEER_ISS + 1 + rx as u32, ISS + 1 + acked as u32), &chunk);
        let (a, b) = h.c.recv_slices();
        assert_eq!(a.len() + b.len(), 1000);
        for k in rx..rx + 1000 {
            assert_eq!(h.c.recv_buf.storage_bytes()[k % CAP], stream(k), "receive byte {k}");
        }
        rx += h.c.recv_consume(1000);
        // We write 700 bytes in place, at the index the contract names.
        let at = (acked + h.c.send_queued()) % CAP;
        assert_eq!(at, tx % CAP);
        let data: Vec<u8> = (tx..tx + 700).map(stream).collect();
        tx += send_in_place(&mut h.c, &data).unwrap();
        for k in acked..tx {
            assert_eq!(h.c.send_buf.storage_bytes()[k % CAP], stream(k), "send byte {k}");
        }
        for o in h.recv() {
            let k = (o.seq() - ISS - 1) as usize;
            assert!(o.payload.iter().enumerate().all(|(i, &b)| b == stream(k + i)));
        }
        acked = tx;
        h.send(&seg(ACK, PEER_ISS + 1 + rx as u32, ISS + 1 + acked as u32), b"");
        assert_eq!(h.c.ring_heads(), (acked % CAP, rx % CAP));
    }
}

#[test]
fn aborting_with_unsent_bytes_drops_them_and_gives_the_storage_back() {
    let mut h = Harness::established(&plain_cfg());
    h.c.attach_storage(lent(64 * 1024), lent(64 * 1024));
    h.c.send(&[5; 100]).unwrap();
    h.c.abort();
    assert_eq!(h.c.state(), State::Closed);
    // RFC 9293 §3.10.7.4: the queues are flushed; the board regions go back.
    assert_eq!(h.c.send_queued(), 0);
    assert!(!h.c.send_buf.is_external() && !h.c.recv_buf.is_external());
}

/// Live upgrade: a connection whose rings are in a board's region is
/// recorded with the rings' positions and the storages' lengths, not their
/// bytes; read back, it is unusable until it gets the same memory again
/// (`rebind_storage`), and then goes on where it stopped: unacknowledged
/// bytes retransmitted from the region, received bytes read in place.
#[test]
fn a_record_of_lent_rings_carries_positions_not_bytes_and_rebinds_to_the_same_memory() {
    let mut h = Harness::established(&plain_cfg());
    h.c.attach_storage(lent(64 * 1024), lent(64 * 1024));
    assert!(h.c.in_lent_storage());
    assert_eq!(send_in_place(&mut h.c, b"hello world"), Ok(11));
    assert_eq!(h.recv_one().payload, b"hello world");
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"abcdef");
    h.recv();
    let (a, _) = h.c.recv_slices();
    assert_eq!(&a[..2], b"ab");
    assert_eq!(h.c.recv_consume(2), 2);

    let json = serde_json::to_string(&h.c).unwrap();
    assert!(json.contains("{\"lent\":65536}"), "the storages' lengths are recorded");
    assert!(json.len() < 64 * 1024, "no ring bytes in the record: {} bytes", json.len());
    let mut back: Connection = serde_json::from_str(&json).unwrap();
    let e = back.check_restored().unwrap_err();
    assert!(e.contains("not bound again"), "{e}");

    // The region as the new engine maps it: the same bytes, not copied by the record.
    let region = |b: &[u8]| -> Box<dyn crate::ring::RingStorage> { Box::new(b.to_vec()) };
    let (send_region, recv_region) = (h.c.send_buf.storage_bytes().to_vec(), h.c.recv_buf.storage_bytes().to_vec());
    assert!(back.rebind_storage(region(&send_region[..100]), region(&recv_region)).unwrap_err().contains("100 bytes"));
    let mut back: Connection = serde_json::from_str(&json).unwrap();
    back.rebind_storage(region(&send_region), region(&recv_region)).unwrap();
    back.check_restored().unwrap();
    assert!(back.rebind_storage(lent(64 * 1024), lent(64 * 1024)).is_err(), "bound once");
    h.c = back;

    assert_eq!(read_in_place(&mut h.c), b"cdef");
    // The peer never got "hello world" acknowledged: the retransmission comes from the region.
    h.recv();
    let retransmitted = (0..5).any(|_| {
        h.fire_next_timer();
        h.recv().iter().any(|o| o.seq() == ISS + 1 && o.payload == b"hello world")
    });
    assert!(retransmitted, "the unacknowledged bytes are sent again from the rebound region");
    h.send(&seg(ACK, PEER_ISS + 7, ISS + 12), b"");
    assert_eq!(send_in_place(&mut h.c, b"!"), Ok(1));
    let out = h.recv_one();
    assert_eq!((out.seq(), &out.payload[..]), (ISS + 12, &b"!"[..]));
}

#[test]
fn a_connection_in_owned_rings_cannot_be_rebound() {
    let h = Harness::established(&plain_cfg());
    assert!(!h.c.in_lent_storage());
    let mut back: Connection = serde_json::from_str(&serde_json::to_string(&h.c).unwrap()).unwrap();
    assert!(back.rebind_storage(lent(64 * 1024), lent(64 * 1024)).unwrap_err().contains("not in lent storage"));
}
