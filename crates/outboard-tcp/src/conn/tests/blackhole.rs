//! RFC 4821 §7.x black-hole detection, as Linux's `tcp_mtu_probing = 1`
//! (`tcp_write_timeout` → `tcp_mtu_probing`).
use super::*;

/// Fires retransmission timeouts until one resends, returning (time since
/// `start`, payload length of the retransmission) for each.
fn timeouts(h: &mut Harness, start: Instant, n: usize) -> Vec<(Duration, usize)> {
    (0..n)
        .map(|_| {
            h.fire_next_timer();
            let r = h.recv();
            assert!(!r.is_empty(), "a timeout resends");
            assert_eq!(r[0].seq(), ISS + 1, "go-back-N from SND.UNA");
            (h.now - start, r[0].len())
        })
        .collect()
}

#[test]
fn rfc4821_7_linux_black_hole_falls_back_to_base_mss_after_three_seconds_of_timeouts() {
    let mut h = Harness::established(&plain_cfg());
    let start = h.now;
    h.c.send(&[7u8; 4000]).unwrap();
    assert!(h.recv().iter().all(|s| s.len() <= 1460));
    let t = timeouts(&mut h, start, 8);
    // Linux's `retransmits_timed_out(sk, tcp_retries1 = 3)`: the head was sent
    // (2⁴ − 1) × 200 ms = 3 s ago, after at least one earlier timeout.
    let first_small = t.iter().position(|&(_, len)| len < 1460).expect("the MSS is lowered");
    assert!(first_small >= 1);
    for &(at, len) in &t[..first_small] {
        assert!(at < Duration::from_secs(3), "full-sized until 3 s: {t:?}");
        assert_eq!(len, 1460);
    }
    assert!(t[first_small].0 >= Duration::from_secs(3), "{t:?}");
    // tcp_base_mss first, then halving on each further timeout of the episode,
    // not below tcp_mtu_probe_floor (48; our MSS floor is 64 with options).
    let sizes: Vec<usize> = t[first_small..].iter().map(|&(_, l)| l).collect();
    let want = [1024, 512, 256, 128, 64, 48, 48, 48];
    assert_eq!(sizes, want[..sizes.len()], "{t:?}");
    assert_eq!(h.c.stats().send_mss, *sizes.last().unwrap());
    let mut lowered = sizes.clone();
    lowered.dedup();
    assert_eq!(h.c.stats().blackhole_events as usize, lowered.len());
    assert_eq!(h.c.info().snd_mss as usize, *sizes.last().unwrap());
}

#[test]
fn rfc4821_7_linux_black_hole_base_mss_is_payload_bytes_with_timestamps() {
    let cfg = Config { timestamps: true, ..plain_cfg() };
    let mut h = Harness::established_with(&cfg, TcpOptions { mss: Some(1460), timestamps: Some((1, 1)), ..TcpOptions::default() });
    let start = h.now;
    h.c.send(&[7u8; 4000]).unwrap();
    assert_eq!(h.recv()[0].len(), 1448);
    let t = timeouts(&mut h, start, 6);
    let small: Vec<usize> = t.iter().map(|&(_, l)| l).filter(|&l| l < 1448).collect();
    // Linux's `tcp_mtu_to_mss` counts the timestamp option out: 1024 bytes of data.
    assert_eq!(small[0], 1024, "{t:?}");
    assert_eq!(h.c.info().snd_mss, small[small.len() - 1] as u32);
}

#[test]
fn rfc4821_7_5_a_size_once_delivered_is_not_halved_by_later_timeouts() {
    let mut h = Harness::established(&plain_cfg());
    let start = h.now;
    h.c.send(&[7u8; 4000]).unwrap();
    h.recv();
    let t = timeouts(&mut h, start, 4);
    // Linux on a LAN: timeouts at 0.2, 0.6, 1.4 and 3.0 s; the fourth is at 1024.
    assert_eq!(t.iter().map(|&(_, l)| l).collect::<Vec<_>>(), [1460, 1460, 1460, 1024], "{t:?}");
    // The 1024-byte segment gets through: the episode is over, and 1024
    // bytes are known to cross the path (RFC 4821 §7.5).
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1 + 1024), b"");
    h.recv();
    // A new episode: its first timeout lowers nothing (Linux's
    // `retransmits_timed_out` wants an earlier one), and nothing goes back up.
    h.fire_next_timer();
    assert_eq!(h.recv()[0].len(), 1024);
    assert_eq!(h.c.stats().blackhole_events, 1);
    // Its second timeout, 3 s or more after the head was sent, would halve
    // on Linux; a delivered size is loss, not a black hole: it stays.
    let d = h.fire_next_timer();
    assert!(d >= Duration::from_secs(3));
    assert_eq!(h.recv()[0].len(), 1024);
    assert_eq!(h.c.stats().blackhole_events, 1);
}

#[test]
fn rfc4821_7_linux_mtu_probing_off_keeps_full_segments() {
    let cfg = Config { mtu_probing: MtuProbing::Off, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    let start = h.now;
    h.c.send(&[7u8; 4000]).unwrap();
    h.recv();
    let t = timeouts(&mut h, start, 7);
    assert!(t.last().unwrap().0 > Duration::from_secs(6));
    assert!(t.iter().all(|&(_, l)| l == 1460), "{t:?}");
    assert_eq!(h.c.stats().blackhole_events, 0);
}

#[test]
fn rfc4821_7_linux_black_hole_never_raises_a_smaller_peer_mss() {
    let mut h = Harness::established_with(&plain_cfg(), TcpOptions { mss: Some(536), ..TcpOptions::default() });
    let start = h.now;
    h.c.send(&[7u8; 4000]).unwrap();
    h.recv();
    let t = timeouts(&mut h, start, 7);
    let sizes: Vec<usize> = t.iter().map(|&(_, l)| l).collect();
    // 536 stays until search_low halves below it (Linux's `tcp_sync_mss` takes the minimum).
    assert!(sizes.iter().all(|&l| l <= 536), "{t:?}");
    assert!(sizes.contains(&512), "{t:?}");
}

#[test]
fn linux_tcp_mtu_probing_setting_parses_as_the_sysctl() {
    assert_eq!("0".parse::<MtuProbing>(), Ok(MtuProbing::Off));
    assert_eq!("on".parse::<MtuProbing>(), Ok(MtuProbing::BlackHole));
    assert!("2".parse::<MtuProbing>().is_err());
    assert!("x".parse::<MtuProbing>().is_err());
    assert_eq!(Config::default().mtu_probing, MtuProbing::BlackHole);
}

/// Acknowledges everything sent, one round trip at a time, `rounds` times;
/// returns the payload sizes of the new segments each round sent.
fn ack_rounds(h: &mut Harness, rounds: usize, drop_len: Option<usize>) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut lost: Option<u32> = None;
    for _ in 0..rounds {
        h.advance(Duration::from_millis(10));
        let nxt = h.c.snd_nxt.0;
        let ack = lost.unwrap_or(nxt);
        h.send(&seg(ACK, PEER_ISS + 1, ack), b"");
        let sent = h.recv();
        if let Some(d) = drop_len {
            if lost.is_none() {
                lost = sent.iter().find(|s| s.len() == d).map(|s| s.seq());
            }
        }
        out.push(sent.iter().map(|s| s.len()).collect());
    }
    out
}

#[test]
fn rfc4821_7_3_linux_probes_back_up_with_single_larger_segments() {
    let cfg = Config { send_buffer: 1 << 20, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    let start = h.now;
    h.c.send(&vec![7u8; 900_000]).unwrap();
    h.recv();
    let t = timeouts(&mut h, start, 4);
    assert_eq!(t.last().unwrap().1, 1024);
    // A good path now: the window grows past 11 segments, then one probe of
    // (1024 + 1460) / 2 = 1242 bytes goes out, whole; its ACK makes it the size.
    let rounds = ack_rounds(&mut h, 12, None);
    let all: Vec<usize> = rounds.iter().flatten().copied().collect();
    let first_probe = all.iter().position(|&l| l > 1024).expect("a probe");
    assert_eq!(all[first_probe], 1242, "{rounds:?}");
    assert!(all.contains(&1351), "the next probe, (1242 + 1460) / 2: {rounds:?}");
    assert!(h.c.stats().send_mss > 1242, "{rounds:?}");
    assert!(h.c.blackhole.probes_ok >= 2);
}

#[test]
fn rfc4821_7_3_linux_a_lost_probe_lowers_the_search_ceiling() {
    let cfg = Config { send_buffer: 1 << 20, ..plain_cfg() };
    let mut h = Harness::established(&cfg);
    let start = h.now;
    h.c.send(&vec![7u8; 900_000]).unwrap();
    h.recv();
    timeouts(&mut h, start, 4);
    // The 1242-byte probe is dropped (the path's limit is below it): the
    // ACKs stay at its start, duplicate ACKs start recovery with the probe
    // first to resend, and the ceiling falls to 1241; the resent bytes go
    // at 1024, and the size stays 1024.
    let rounds = ack_rounds(&mut h, 16, Some(1242));
    assert!(rounds.iter().flatten().any(|&l| l == 1242), "{rounds:?}");
    assert_eq!(h.c.blackhole.probes_lost, 1, "{rounds:?}");
    assert_eq!(h.c.blackhole.high_mss, 1241);
    assert_eq!(h.c.stats().send_mss, 1024);
}
