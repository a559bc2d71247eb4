use super::*;

fn run(inj: &mut FaultInjector, now: Instant, frame: Vec<u8>) -> Vec<(Instant, Vec<u8>)> {
    let mut out = Vec::new();
    inj.send(now, frame, &mut |t, f| out.push((t, f)));
    out
}

fn frame(n: usize, tag: u8) -> Vec<u8> {
    vec![tag; n]
}

#[test]
fn perfect_link_delivers_unchanged_at_once() {
    let mut inj = FaultInjector::new(FaultConfig::default(), 1);
    let out = run(&mut inj, Instant::from_millis(3), frame(100, 7));
    assert_eq!(out, vec![(Instant::from_millis(3), frame(100, 7))]);
    assert_eq!(inj.stats().frames_seen, 1);
    assert_eq!(inj.stats().frames_delivered, 1);
}

#[test]
fn loss_rate_matches_knob_and_is_counted() {
    let cfg = FaultConfig {
        loss: 0.05,
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 42);
    let delivered: usize = (0..20_000)
        .map(|_| run(&mut inj, Instant::ZERO, frame(60, 0)).len())
        .sum();
    let s = *inj.stats();
    assert_eq!(s.frames_seen, 20_000);
    assert_eq!(s.dropped + delivered as u64, 20_000);
    assert!(
        (800..1200).contains(&s.dropped),
        "5% of 20000 gave {}",
        s.dropped
    );
}

#[test]
fn outage_drops_everything_inside_its_window_only() {
    let cfg = FaultConfig {
        outages: vec![(Instant::from_millis(10), Instant::from_millis(20))],
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 1);
    let got: Vec<usize> = [9, 10, 15, 19, 20]
        .iter()
        .map(|&ms| run(&mut inj, Instant::from_millis(ms), frame(60, 0)).len())
        .collect();
    assert_eq!(got, [1, 0, 0, 0, 1]);
    assert_eq!(inj.stats().outage_drops, 3);
}

#[test]
fn duplication_delivers_two_identical_copies() {
    let cfg = FaultConfig {
        duplicate: 1.0,
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 3);
    let out = run(&mut inj, Instant::ZERO, frame(64, 9));
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], out[1]);
    assert_eq!(inj.stats().duplicated, 1);
    assert_eq!(inj.stats().frames_delivered, 2);
}

#[test]
fn corruption_flips_exactly_one_bit_anywhere_in_the_frame() {
    let cfg = FaultConfig {
        corrupt: 1.0,
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 5);
    let mut header_hits = 0;
    for _ in 0..2000 {
        let original: Vec<u8> = (0..100u8).collect();
        let out = run(&mut inj, Instant::ZERO, original.clone());
        let flipped: u32 = out[0]
            .1
            .iter()
            .zip(&original)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(flipped, 1);
        if out[0].1[..14] != original[..14] {
            header_hits += 1;
        }
    }
    // The Ethernet header is 14% of this frame: it must get its share of flips.
    assert!(header_hits > 150, "only {header_hits} flips hit the header");
    assert_eq!(inj.stats().corrupted, 2000);
}

#[test]
fn bandwidth_serialises_frames_back_to_back() {
    // 8 Mbit/s = 1 byte per microsecond; no per-frame overhead for round numbers.
    let cfg = FaultConfig {
        bandwidth_bps: 8_000_000,
        wire_overhead: 0,
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 1);
    let arrivals: Vec<Instant> = (0..3)
        .map(|_| run(&mut inj, Instant::ZERO, frame(1000, 0))[0].0)
        .collect();
    assert_eq!(
        arrivals,
        [
            Instant::from_micros(1000),
            Instant::from_micros(2000),
            Instant::from_micros(3000)
        ]
    );
    // An idle link starts serialising at once.
    let later = run(&mut inj, Instant::from_millis(10), frame(500, 0));
    assert_eq!(later[0].0, Instant::from_micros(10_500));
}

#[test]
fn full_queue_tail_drops_and_drains_over_time() {
    let cfg = FaultConfig {
        bandwidth_bps: 8_000_000,
        wire_overhead: 0,
        queue_bytes: 2500,
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 1);
    let sent: usize = (0..4)
        .map(|_| run(&mut inj, Instant::ZERO, frame(1000, 0)).len())
        .sum();
    assert_eq!(sent, 2);
    assert_eq!(inj.stats().queue_drops, 2);
    // After the first frame has left, there is room for one more.
    assert_eq!(
        run(&mut inj, Instant::from_micros(1000), frame(1000, 0)).len(),
        1
    );
    assert_eq!(inj.queued_bytes(), 2000);
}

#[test]
fn delay_and_jitter_stay_within_bounds() {
    let cfg = FaultConfig {
        delay: Duration::from_millis(5),
        jitter: Duration::from_millis(2),
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 11);
    let mut spread = std::collections::BTreeSet::new();
    for _ in 0..1000 {
        let t = run(&mut inj, Instant::ZERO, frame(60, 0))[0].0;
        assert!(
            t >= Instant::from_millis(5) && t <= Instant::from_millis(7),
            "{t:?}"
        );
        spread.insert(t);
    }
    assert!(spread.len() > 900, "jitter should vary the delay");
}

#[test]
fn reordered_frame_is_overtaken_by_a_later_one() {
    let cfg = FaultConfig {
        reorder: 1.0,
        reorder_delay: Duration::from_millis(1),
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 2);
    let first = run(&mut inj, Instant::ZERO, frame(60, 1))[0].0;
    assert!(first > Instant::ZERO && first <= Instant::from_millis(1));
    inj.set_config(FaultConfig::default());
    let second = run(&mut inj, Instant::ZERO, frame(60, 2))[0].0;
    assert!(second < first);
    assert_eq!(inj.stats().reordered, 1);
}

#[test]
fn same_seed_makes_the_same_decisions() {
    let cfg = FaultConfig {
        loss: 0.1,
        duplicate: 0.1,
        reorder: 0.1,
        corrupt: 0.1,
        jitter: Duration::from_micros(300),
        bandwidth_bps: 100_000_000,
        ..FaultConfig::default()
    };
    let trace = |seed| {
        let mut inj = FaultInjector::new(cfg.clone(), seed);
        let mut out = Vec::new();
        for i in 0..500u64 {
            inj.send(
                Instant::from_micros(i * 50),
                frame(1514, i as u8),
                &mut |t, f| out.push((t, f)),
            );
        }
        (out, *inj.stats())
    };
    assert_eq!(trace(77), trace(77));
    assert_ne!(trace(77).0, trace(78).0);
}

#[test]
fn undetectable_corruption_changes_payload_but_not_the_ones_complement_sum() {
    let cfg = FaultConfig {
        undetectable_corrupt: 1.0,
        ..FaultConfig::default()
    };
    let mut inj = FaultInjector::new(cfg, 8);
    let sum = |f: &[u8]| -> u32 {
        let mut s: u32 = f
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s
    };
    let mut changed = 0;
    for k in 0..200u32 {
        let original: Vec<u8> = (0..400u32)
            .map(|i| (i.wrapping_mul(2654435761).wrapping_add(k) >> 13) as u8)
            .collect();
        let out = run(&mut inj, Instant::ZERO, original.clone());
        let got = &out[0].1;
        assert_eq!(
            got[..UNDETECTABLE_FROM],
            original[..UNDETECTABLE_FROM],
            "headers must stay intact"
        );
        assert_eq!(sum(got), sum(&original));
        if *got != original {
            changed += 1;
            let flipped: u32 = got
                .iter()
                .zip(&original)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert_eq!(flipped, 2);
        }
    }
    assert!(changed > 150, "only {changed} of 200 frames were changed");
    assert_eq!(inj.stats().corrupted_undetectable, changed);
    // Too short to have payload past the largest headers: untouched.
    assert_eq!(
        run(&mut inj, Instant::ZERO, frame(80, 3))[0].1,
        frame(80, 3)
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn any_config() -> impl Strategy<Value = FaultConfig> {
        (
            0.0..=1.0f64,
            0.0..=1.0f64,
            0.0..=1.0f64,
            0.0..=1.0f64,
            0u64..5_000,
            0u64..2_000,
            prop_oneof![Just(0u64), 1_000_000u64..1_000_000_000],
            0usize..20_000,
        )
            .prop_map(
                |(
                    loss,
                    duplicate,
                    reorder,
                    corrupt,
                    delay_us,
                    jitter_us,
                    bandwidth_bps,
                    queue_bytes,
                )| FaultConfig {
                    loss,
                    duplicate,
                    reorder,
                    corrupt,
                    delay: Duration::from_micros(delay_us),
                    jitter: Duration::from_micros(jitter_us),
                    bandwidth_bps,
                    queue_bytes,
                    ..FaultConfig::default()
                },
            )
    }

    proptest! {
        #[test]
        fn counters_account_for_every_frame_and_nothing_arrives_early(
            cfg in any_config(),
            seed in any::<u64>(),
            frames in proptest::collection::vec((0u64..10_000, 1usize..1600), 1..60),
        ) {
            let mut inj = FaultInjector::new(cfg.clone(), seed);
            let mut now = Instant::ZERO;
            let mut delivered = 0u64;
            for (gap_us, len) in frames {
                now += Duration::from_micros(gap_us);
                let sent = now;
                inj.send(now, vec![0xa5; len], &mut |at, f| {
                    delivered += 1;
                    assert!(at >= sent + cfg.delay, "arrived before the propagation delay");
                    assert_eq!(f.len(), len, "faults never change a frame's length");
                });
            }
            let s = *inj.stats();
            prop_assert_eq!(s.frames_delivered, delivered);
            prop_assert_eq!(s.frames_seen + s.duplicated, s.dropped + s.queue_drops + s.outage_drops + s.frames_delivered);
            prop_assert!(inj.queued_bytes() <= cfg.queue_bytes);
        }
    }
}
