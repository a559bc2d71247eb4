//! TCP_INFO counters as Linux keeps them, and the delivery-rate estimate of
//! draft-cheng-iccrg-delivery-rate-estimation (Linux's `tcp_rate.c`). The
//! path has a 50 ms RTT.
use super::*;

const MSS: u32 = 1460;
const RTT: Duration = Duration::from_millis(50);

fn seg_start(i: u32) -> u32 {
    ISS + 1 + i * MSS
}

fn ack_with_sack(ack: u32, blocks: &[(u32, u32)]) -> TcpRepr {
    let mut a = seg(ACK, PEER_ISS + 1, ack);
    a.options.sack = sack(blocks);
    a
}

fn established() -> Harness {
    let cfg = Config { sack: true, ..plain_cfg() };
    let mut h = Harness::connect(&cfg);
    assert_eq!(h.recv_one().flags(), SYN);
    h.now += RTT;
    let mut sa = seg(SYN | ACK, PEER_ISS, ISS + 1);
    sa.options = TcpOptions { mss: Some(1460), sack_permitted: true, ..TcpOptions::default() };
    h.send(&sa, b"");
    h.recv_one();
    h.events();
    h
}

#[test]
fn delivery_rate_draft_cheng_3_is_delivered_over_the_ack_interval() {
    let mut h = established();
    h.c.send(&vec![1u8; 10 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 10);
    assert_eq!(h.c.info().delivery_rate, 0, "no sample yet");
    // The ten segments are acknowledged one by one, 5 ms apart, one RTT on.
    h.advance(RTT);
    for i in 1..=10 {
        h.send(&seg(ACK, PEER_ISS + 1, seg_start(i)), b"");
        h.recv();
        h.now += Duration::from_millis(5);
    }
    let i = h.c.info();
    assert_eq!(i.delivered, 10);
    // The last sample: 10 segments delivered since the first was sent (all
    // sent at once, so the send interval is 0), over the ACK interval of
    // RTT + 45 ms: 14600 B / 95 ms.
    let want = 14_600u64 * 1000 / 95;
    assert!(i.delivery_rate.abs_diff(want) <= want / 100, "{} vs {want}", i.delivery_rate);
    // The application queued everything at once while idle: app-limited.
    assert!(i.delivery_rate_app_limited);
    assert_eq!(i.bytes_sent, 14_600);
}

#[test]
fn delivery_rate_app_limited_ends_once_the_marked_flight_is_delivered() {
    let mut h = established();
    h.c.send(&vec![1u8; 2 * MSS as usize]).unwrap();
    h.recv();
    h.advance(RTT);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(2)), b"");
    h.recv();
    assert!(h.c.info().delivery_rate_app_limited);
    // A bulk sender: data queued while the window is full is not app-limited.
    h.c.send(&vec![1u8; 40 * MSS as usize]).unwrap();
    assert!(h.recv().len() >= 2);
    for _ in 0..4 {
        h.advance(RTT);
        let nxt = h.c.snd_nxt;
        h.send(&seg(ACK, PEER_ISS + 1, nxt.0), b"");
        h.recv();
    }
    let i = h.c.info();
    assert!(!i.delivery_rate_app_limited, "{i:?}");
    assert!(i.delivery_rate > 0);
}

#[test]
fn linux_tcpi_reord_seen_dsack_dups_and_rcv_ooopack_count_events() {
    let mut h = established();
    h.c.send(&vec![1u8; 6 * MSS as usize]).unwrap();
    assert_eq!(h.recv().len(), 6);
    h.advance(Duration::from_millis(10));
    // Segment 1 arrives before 0 (reordering, not loss), then 0 fills the hole.
    h.send(&ack_with_sack(seg_start(0), &[(seg_start(1), seg_start(2))]), b"");
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(2)), b"");
    // A D-SACK for segment 0 (an unneeded copy arrived).
    h.send(&ack_with_sack(seg_start(2), &[(seg_start(0), seg_start(1))]), b"");
    h.recv();
    let i = h.c.info();
    assert_eq!(i.reord_events, 1, "{i:?}");
    assert!(i.reord_seen);
    assert_eq!(i.dsack_dups, 1, "{i:?}");
    // The receive side: two out-of-order segments from the peer.
    h.send(&seg(ACK, PEER_ISS + 1 + 100, seg_start(2)), &[2u8; 100]);
    h.send(&seg(ACK, PEER_ISS + 1 + 300, seg_start(2)), &[2u8; 100]);
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(2)), &[2u8; 100]);
    assert_eq!(h.c.info().rcv_ooopack, 2);
}

#[test]
fn linux_tcpi_delivered_ce_counts_segments_acknowledged_with_ece() {
    let cfg = Config { ecn: EcnMode::On, ..plain_cfg() };
    let mut h = Harness::connect(&cfg);
    h.recv_one();
    let mut sa = seg(SYN | ACK | TcpFlags::ECE, PEER_ISS, ISS + 1);
    sa.options.mss = Some(1460);
    h.send(&sa, b"");
    h.recv();
    assert!(h.c.info().ecn);
    h.c.send(&vec![1u8; 3 * MSS as usize]).unwrap();
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(1)), b"");
    h.send(&seg(ACK | TcpFlags::ECE, PEER_ISS + 1, seg_start(3)), b"");
    let i = h.c.info();
    assert_eq!((i.delivered, i.delivered_ce), (3, 2), "{i:?}");
}

#[test]
fn linux_tcpi_windows_and_rto_totals() {
    let mut h = established();
    let i = h.c.info();
    assert_eq!(i.snd_wnd, 65535);
    assert_eq!(i.rcv_wnd, 64 * 1024 - 1, "the window we advertised (unscaled field)");
    h.c.send(&vec![1u8; MSS as usize]).unwrap();
    h.recv();
    h.fire_next_timer();
    h.recv();
    h.fire_next_timer();
    h.recv();
    let i = h.c.info();
    assert_eq!((i.total_rto, i.total_rto_recoveries), (2, 1), "{i:?}");
    h.advance(Duration::from_millis(30));
    h.send(&seg(ACK, PEER_ISS + 1, seg_start(1)), b"");
    let i = h.c.info();
    assert!(i.total_rto_time_ms >= 30, "{i:?}");
    assert_eq!(i.total_rto_recoveries, 1);
}
