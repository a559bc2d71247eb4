//! TSO (`Config::tso_max_bytes`): new data leaves in segments of several
//! MSS-sized pieces that the link cuts; the peer's window, cwnd and Nagle
//! still bound them; retransmissions stay at one MSS; cwnd, flight size and
//! SACK accounting are in bytes whatever the segment sizes.

use super::*;

const MSS: usize = 1460;

fn tso_cfg() -> Config {
    Config { tso_max_bytes: 65536, send_buffer: 256 * 1024, ..plain_cfg() }
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Queues all of `bytes`.
fn queue(h: &mut Harness, bytes: &[u8]) {
    assert_eq!(h.c.send(bytes).unwrap(), bytes.len());
}

#[test]
fn tso_off_keeps_every_segment_within_one_mss() {
    let mut h = Harness::established(&Config { send_buffer: 256 * 1024, ..plain_cfg() });
    queue(&mut h, &data(20_000));
    let out = h.recv();
    assert_eq!(out.len(), 10, "initial window of ten segments: {out:#?}");
    assert!(out.iter().all(|o| o.len() == MSS && o.gso == 0));
    assert_eq!(h.c.stats().tso_segments_out, 0);
}

#[test]
fn tso_sends_the_initial_window_as_one_segment() {
    let mut h = Harness::established(&tso_cfg());
    let d = data(64 * 1024);
    queue(&mut h, &d);
    let o = h.recv_one();
    // RFC 6928 IW10: cwnd = 14600 bytes, i.e. ten pieces in one segment.
    assert_eq!((o.seq(), o.len(), o.gso), (ISS + 1, 10 * MSS, MSS));
    assert_eq!(o.payload, d[..10 * MSS]);
    assert!(o.flags().contains(TcpFlags::PSH), "the last segment of a cwnd-limited burst");
    let s = h.c.stats();
    assert_eq!((s.tso_segments_out, s.bytes_in_flight, s.bytes_out), (1, 10 * MSS, 10 * MSS as u64));
}

#[test]
fn tso_segment_is_bounded_by_the_peer_window_in_whole_pieces() {
    let mut h = Harness::established(&tso_cfg());
    let mut w = seg(ACK, PEER_ISS + 1, ISS + 1);
    w.window = 4000;
    h.send(&w, b"");
    h.recv();
    queue(&mut h, &data(30_000));
    let o = h.recv_one();
    // 4000 bytes of window: two whole pieces; the 1080 left would be a runt
    // under SWS avoidance (max window 65535), so it waits.
    assert_eq!((o.len(), o.gso), (2 * MSS, MSS));
    let mut a = seg(ACK, PEER_ISS + 1, ISS + 1 + 2 * MSS as u32);
    a.window = 60_000;
    h.send(&a, b"");
    let o = h.recv_one();
    // The window, not cwnd, limited the first segment: cwnd did not grow
    // (RFC 7661), and its ten pieces go now.
    assert_eq!((o.seq(), o.len(), o.gso), (ISS + 1 + 2 * MSS as u32, 10 * MSS, MSS));
}

#[test]
fn tso_segment_takes_the_tail_when_nagle_allows() {
    let mut h = Harness::established(&tso_cfg());
    let d = data(5_000);
    queue(&mut h, &d);
    let o = h.recv_one();
    // Idle connection: the whole queue goes, its last piece short.
    assert_eq!((o.len(), o.gso), (5_000, MSS));
    assert!(o.flags().contains(TcpFlags::PSH));
    assert_eq!(o.payload, d);
}

#[test]
fn tso_segment_leaves_the_tail_to_nagle_when_data_is_in_flight() {
    let mut h = Harness::established(&tso_cfg());
    let d = data(6_500);
    queue(&mut h, &d[..3_000]);
    assert_eq!(h.recv_one().len(), 3_000);
    queue(&mut h, &d[3_000..]);
    let o = h.recv_one();
    // Not idle: whole pieces only; the 580-byte tail waits for the ACK.
    assert_eq!((o.seq(), o.len(), o.gso), (ISS + 1 + 3_000, 2 * MSS, MSS));
    h.recv_nothing();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1 + 3_000 + 2 * MSS as u32), b"");
    let o = h.recv_one();
    assert_eq!((o.len(), o.gso), (580, 0));
    assert_eq!(o.payload, d[3_000 + 2 * MSS..]);
}

#[test]
fn tso_with_nodelay_sends_the_tail_at_once() {
    let mut h = Harness::established(&Config { nodelay: true, ..tso_cfg() });
    queue(&mut h, &data(3_000));
    h.recv_one();
    queue(&mut h, &data(3_500));
    let o = h.recv_one();
    assert_eq!((o.len(), o.gso), (3_500, MSS));
}

#[test]
fn tso_segment_carries_fin_at_the_end() {
    let mut h = Harness::established(&tso_cfg());
    queue(&mut h, &data(4_000));
    h.c.shutdown_write();
    let o = h.recv_one();
    assert_eq!((o.len(), o.gso), (4_000, MSS));
    assert!(o.flags().contains(FIN));
}

#[test]
fn tso_retransmission_after_rto_goes_one_mss_at_a_time() {
    let mut h = Harness::established(&tso_cfg());
    let d = data(10 * MSS);
    queue(&mut h, &d);
    assert_eq!(h.recv_one().len(), 10 * MSS);
    h.fire_next_timer();
    let o = h.recv_one();
    assert_eq!((o.seq(), o.len(), o.gso), (ISS + 1, MSS, 0), "RTO resends one MSS");
    assert_eq!(o.payload, d[..MSS]);
    // Go-back-N continues with one-MSS segments as cwnd opens again.
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1 + MSS as u32), b"");
    let out = h.recv();
    assert_eq!(out.len(), 2, "{out:#?}");
    for (i, o) in out.iter().enumerate() {
        assert_eq!((o.seq(), o.len(), o.gso), (ISS + 1 + ((i + 1) * MSS) as u32, MSS, 0));
    }
    assert_eq!(h.c.stats().retransmitted_bytes, 3 * MSS as u64);
}

#[test]
fn tso_fast_retransmit_with_sack_resends_one_mss() {
    let cfg = Config { sack: true, ..tso_cfg() };
    let mut h = Harness::established_with(
        &cfg,
        TcpOptions { mss: Some(1460), sack_permitted: true, ..TcpOptions::default() },
    );
    let d = data(10 * MSS);
    queue(&mut h, &d);
    assert_eq!(h.recv_one().len(), 10 * MSS);
    // The first piece was lost; the peer SACKs the next four, one dup ACK each.
    let base = ISS + 1;
    for k in 2..=4u32 {
        let mut a = seg(ACK, PEER_ISS + 1, base);
        a.options.sack = sack(&[(base + MSS as u32, base + k * MSS as u32)]);
        h.send(&a, b"");
    }
    let out = h.recv();
    let rexmit: Vec<_> = out.iter().filter(|o| o.seq() == base).collect();
    assert_eq!(rexmit.len(), 1, "one retransmission of the lost piece: {out:#?}");
    assert_eq!((rexmit[0].len(), rexmit[0].gso), (MSS, 0));
    assert_eq!(rexmit[0].payload, d[..MSS]);
    let s = h.c.stats();
    assert_eq!(s.sacked_bytes, 3 * MSS, "SACK accounting is in bytes");
    assert!(out.iter().all(|o| o.seq() == base || o.len() <= MSS || o.gso == MSS));
}

#[test]
fn tso_cwnd_and_flight_are_counted_in_bytes() {
    let mut h = Harness::established(&tso_cfg());
    queue(&mut h, &data(64 * 1024));
    assert_eq!(h.recv_one().len(), 10 * MSS);
    let cwnd0 = h.c.stats().cwnd;
    assert_eq!(cwnd0, 10 * MSS);
    // The peer (GRO, delayed ACK) acknowledges half the segment at once.
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1 + 5 * MSS as u32), b"");
    let s = h.c.stats();
    assert_eq!(s.cwnd, cwnd0 + 2 * MSS, "slow start: + min(acked, 2 MSS)");
    let o = h.recv_one();
    // Room: cwnd 12 MSS less 5 MSS still in flight = 7 pieces.
    assert_eq!((o.len(), o.gso), (7 * MSS, MSS));
    assert_eq!(h.c.stats().bytes_in_flight, 12 * MSS);
}

#[test]
fn tso_pieces_shrink_with_timestamps_and_sack_blocks() {
    let cfg = Config { timestamps: true, sack: true, ..tso_cfg() };
    let mut h = Harness::established_with(
        &cfg,
        TcpOptions {
            mss: Some(1460),
            sack_permitted: true,
            timestamps: Some((1, 0)),
            ..TcpOptions::default()
        },
    );
    // Timestamps take 12 bytes of every piece: 1448 bytes of data each.
    queue(&mut h, &data(64 * 1024));
    let o = h.recv_one();
    assert_eq!(o.gso, 1448);
    assert_eq!(o.len() % 1448, 0);
    assert!(o.len() > 1448);
}

#[test]
fn tso_cap_is_whole_pieces_within_an_ipv4_datagram() {
    let mut h = Harness::established(&tso_cfg());
    h.c.set_tso_max(100_000);
    let cap = h.c.tso_cap(MSS);
    assert_eq!(cap % MSS, 0);
    assert!(20 + 60 + cap <= 65535 && cap + MSS > 65535 - 80, "{cap}");
    h.c.set_tso_max(MSS + 10);
    assert_eq!(h.c.tso_cap(MSS), MSS);
    h.c.set_tso_max(0);
    assert_eq!(h.c.tso_cap(MSS), MSS);
    h.c.set_tso_max(5 * MSS + 1);
    assert_eq!(h.c.tso_cap(MSS), 5 * MSS);
}
