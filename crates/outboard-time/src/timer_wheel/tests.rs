use super::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn fire_all(w: &mut TimerWheel, now: Instant) -> Vec<u64> {
    let mut out = Vec::new();
    w.advance(now, &mut |t| out.push(t));
    out.sort_unstable();
    out
}

#[test]
fn fires_at_deadline_not_before() {
    let mut w = TimerWheel::default();
    w.insert(1, ms(10));
    assert!(fire_all(&mut w, ms(9)).is_empty());
    assert!(fire_all(&mut w, Instant::from_nanos(9_999_999)).is_empty());
    assert_eq!(fire_all(&mut w, ms(10)), vec![1]);
    assert!(w.is_empty());
    assert!(fire_all(&mut w, ms(100)).is_empty(), "fires exactly once");
}

#[test]
fn sub_tick_deadline_compared_exactly_within_current_tick() {
    let mut w = TimerWheel::default();
    w.insert(1, Instant::from_micros(5_700));
    assert!(
        fire_all(&mut w, Instant::from_micros(5_200)).is_empty(),
        "same tick, still early"
    );
    assert_eq!(w.next_deadline(), Some(Instant::from_micros(5_700)));
    assert_eq!(fire_all(&mut w, Instant::from_micros(5_700)), vec![1]);
}

#[test]
fn rearm_replaces_previous_deadline() {
    let mut w = TimerWheel::default();
    assert_eq!(w.insert(7, ms(5)), None);
    assert_eq!(w.insert(7, ms(50)), Some(ms(5)));
    assert_eq!(w.len(), 1);
    assert!(fire_all(&mut w, ms(20)).is_empty());
    assert_eq!(fire_all(&mut w, ms(50)), vec![7]);
}

#[test]
fn cancel_disarms_and_reports_deadline() {
    let mut w = TimerWheel::default();
    w.insert(1, ms(3));
    w.insert(2, ms(3));
    w.insert(3, ms(3));
    assert_eq!(w.cancel(2), Some(ms(3)));
    assert_eq!(w.cancel(2), None);
    assert_eq!(fire_all(&mut w, ms(3)), vec![1, 3]);
}

#[test]
fn far_timers_cascade_down_through_levels() {
    let mut w = TimerWheel::default();
    // One per level, plus one in overflow (beyond 64^4 ms).
    let deadlines = [
        ms(30),
        ms(3_000),
        ms(200_000),
        ms(10_000_000),
        ms(RANGE_TICKS * 3 + 17),
    ];
    for (i, &d) in deadlines.iter().enumerate() {
        w.insert(i as u64, d);
    }
    for (i, &d) in deadlines.iter().enumerate() {
        assert!(
            fire_all(&mut w, d - Duration::from_nanos(1)).is_empty(),
            "timer {i} early"
        );
        assert_eq!(fire_all(&mut w, d), vec![i as u64]);
    }
    assert!(w.is_empty());
}

#[test]
fn big_jump_fires_everything_due_once() {
    let mut w = TimerWheel::default();
    for i in 0..1000u64 {
        w.insert(i, ms(i * 7_919 % 5_000_000));
    }
    let fired = fire_all(&mut w, ms(5_000_000));
    assert_eq!(fired, (0..1000).collect::<Vec<_>>());
}

#[test]
fn past_deadline_fires_on_next_advance() {
    let mut w = TimerWheel::starting_at(Duration::from_millis(1), ms(1000));
    w.insert(1, ms(10));
    assert_eq!(w.next_deadline(), Some(ms(10)));
    assert_eq!(fire_all(&mut w, ms(1000)), vec![1]);
}

#[test]
fn now_going_backwards_fires_nothing() {
    let mut w = TimerWheel::default();
    w.insert(1, ms(10));
    assert!(fire_all(&mut w, ms(8)).is_empty());
    w.insert(2, ms(5));
    assert!(fire_all(&mut w, ms(4)).is_empty());
    assert_eq!(fire_all(&mut w, ms(10)), vec![1, 2]);
}

#[test]
fn next_deadline_is_exact_near_and_lower_bound_far() {
    let mut w = TimerWheel::default();
    assert_eq!(w.next_deadline(), None);
    w.insert(1, Instant::from_micros(40_500));
    assert_eq!(w.next_deadline(), Some(Instant::from_micros(40_500)));
    w.cancel(1);
    w.insert(2, ms(5_000) + Duration::from_micros(300));
    let bound = w.next_deadline().expect("armed");
    assert!(bound <= ms(5_000) + Duration::from_micros(300));
    // Stepping to each bound converges on the deadline without firing early.
    let mut steps = 0;
    while let Some(b) = w.next_deadline() {
        let fired = fire_all(&mut w, b);
        if !fired.is_empty() {
            assert_eq!(b, ms(5_000) + Duration::from_micros(300));
            break;
        }
        steps += 1;
        assert!(steps <= LEVELS, "converges within one step per level");
    }
    assert!(w.is_empty());
}

#[test]
fn next_deadline_after_advance_is_later_than_now() {
    let mut w = TimerWheel::default();
    for i in 0..50u64 {
        w.insert(i, Instant::from_micros(i * 123_457));
    }
    let mut now = Instant::ZERO;
    while !w.is_empty() {
        now += Duration::from_micros(777);
        w.advance(now, &mut |_| {});
        if let Some(d) = w.next_deadline() {
            assert!(d > now, "{d:?} <= {now:?}");
        }
    }
}

#[test]
fn far_future_deadline_fires_only_at_u64_max() {
    let mut w = TimerWheel::new(Duration::from_nanos(1));
    w.insert(1, Instant::from_nanos(u64::MAX));
    assert!(fire_all(&mut w, Instant::from_nanos(u64::MAX - 1)).is_empty());
    assert_eq!(fire_all(&mut w, Instant::from_nanos(u64::MAX)), vec![1]);
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    Cancel(u64),
    Advance(u64),
    /// Advance exactly to `next_deadline()`, as a sleeping shard would.
    AdvanceToNext,
}

fn op() -> impl Strategy<Value = Op> {
    // Deadlines mix sub-tick, near, far and overflow distances.
    let delta = prop_oneof![
        0u64..5_000_000,
        0u64..200_000_000_000,
        0u64..40_000_000_000_000
    ];
    prop_oneof![
        4 => (0u64..32, delta.clone()).prop_map(|(t, d)| Op::Insert(t, d)),
        1 => (0u64..32).prop_map(Op::Cancel),
        3 => delta.prop_map(Op::Advance),
        2 => Just(Op::AdvanceToNext),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    /// The wheel against a BTreeMap model: per advance, the fired set equals
    /// the model's expired set; nothing early, nothing lost, nothing twice.
    #[test]
    fn wheel_matches_btreemap_model(tick_us in 1u64..2_000, ops in proptest::collection::vec(op(), 1..200)) {
        let mut w = TimerWheel::new(Duration::from_micros(tick_us));
        let mut model: BTreeMap<u64, Instant> = BTreeMap::new();
        let mut now = Instant::ZERO;
        for op in ops {
            match op {
                Op::Insert(t, d) => {
                    // Deadlines relative to now, sometimes slightly in the past.
                    let deadline = (now + Duration::from_nanos(d)) - Duration::from_micros(500);
                    prop_assert_eq!(w.insert(t, deadline), model.insert(t, deadline));
                }
                Op::Cancel(t) => prop_assert_eq!(w.cancel(t), model.remove(&t)),
                Op::Advance(_) | Op::AdvanceToNext => {
                    now = match op {
                        Op::Advance(d) => now + Duration::from_nanos(d),
                        _ => w.next_deadline().map_or(now, |d| d.max(now)),
                    };
                    let mut fired = Vec::new();
                    w.advance(now, &mut |t| fired.push(t));
                    let fired_set: BTreeSet<u64> = fired.iter().copied().collect();
                    prop_assert_eq!(fired_set.len(), fired.len(), "a token fired twice");
                    let expired: BTreeSet<u64> = model.iter().filter(|(_, &d)| d <= now).map(|(&t, _)| t).collect();
                    model.retain(|_, d| *d > now);
                    prop_assert_eq!(fired_set, expired);
                    if let Some(nd) = w.next_deadline() {
                        prop_assert!(nd > now);
                    }
                }
            }
            prop_assert_eq!(w.len(), model.len());
            // The remembered answer is the one a fresh look would give.
            prop_assert_eq!(w.next_deadline(), w.find_next_deadline());
            let true_min = model.values().min().copied();
            match (w.next_deadline(), true_min) {
                (Some(bound), Some(min)) => prop_assert!(bound <= min),
                (a, b) => prop_assert_eq!(a, b),
            }
        }
    }
}

#[test]
fn cancelling_earliest_overflow_timer_updates_next_deadline() {
    let mut w = TimerWheel::default();
    let far = ms(RANGE_TICKS * 2);
    w.insert(1, far);
    w.insert(2, far + Duration::from_secs(60));
    assert_eq!(w.next_deadline(), Some(far));
    w.cancel(1);
    assert_eq!(w.next_deadline(), Some(far + Duration::from_secs(60)));
    assert!(fire_all(&mut w, far + Duration::from_secs(59)).is_empty());
    assert_eq!(fire_all(&mut w, far + Duration::from_secs(60)), vec![2]);
}

#[test]
fn wheel_started_late_handles_block_boundaries() {
    // Start just before a level-3 block boundary so inserts straddle it.
    let start = Instant::from_millis(RANGE_TICKS - 3);
    let mut w = TimerWheel::starting_at(Duration::from_millis(1), start);
    for i in 0..10u64 {
        w.insert(i, start + Duration::from_millis(i));
    }
    for i in 0..10u64 {
        assert_eq!(fire_all(&mut w, start + Duration::from_millis(i)), vec![i]);
    }
}

#[test]
fn many_timers_on_one_tick_all_fire_and_rearming_in_bulk_is_stable() {
    let mut w = TimerWheel::default();
    for round in 0..3u64 {
        for t in 0..10_000u64 {
            w.insert(t, ms(1_000 + round));
        }
    }
    assert_eq!(w.len(), 10_000);
    assert!(fire_all(&mut w, ms(1_001)).is_empty());
    assert_eq!(fire_all(&mut w, ms(1_002)).len(), 10_000);
}
