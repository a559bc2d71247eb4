use super::*;
use proptest::prelude::*;
use std::collections::VecDeque;

const OFF: usize = 64;

fn board(capacity: u32, start: u32) -> (Arc<Mapping>, Producer<u64>, Consumer<u64>) {
    let map = Arc::new(Mapping::anonymous_shared(OFF + ring_bytes::<u64>(capacity)).unwrap());
    // A ring that has already carried `start` records: both indices there.
    map.atomic_u32(OFF + HEAD).store(start, Ordering::Relaxed);
    map.atomic_u32(OFF + TAIL).store(start, Ordering::Relaxed);
    let p = Producer::with_start(map.clone(), OFF, capacity, start);
    let c = Consumer::with_start(map.clone(), OFF, capacity, start);
    (map, p, c)
}

#[derive(Debug, Clone)]
enum Op {
    /// `n` × begin_put, then end_put unless `open`.
    Put { n: u32, open: bool },
    /// `n` × get.
    Get(u32),
    /// begin_get twice (same record), end_get or not.
    Peek { release: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1..6u32, any::<bool>()).prop_map(|(n, open)| Op::Put { n, open }),
        (1..6u32).prop_map(Op::Get),
        any::<bool>().prop_map(|release| Op::Peek { release }),
    ]
}

fn start() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0), (u32::MAX - 20..=u32::MAX), any::<u32>()]
}

proptest! {
    /// Random sequences against a VecDeque, across the 2^32 wrap of the indices.
    #[test]
    fn ring_matches_a_queue_model(cap_log in 0..4u32, start in start(), ops in proptest::collection::vec(op(), 1..60)) {
        let cap = 1 << cap_log;
        let (map, mut p, mut c) = board(cap, start);
        let mut published: VecDeque<u64> = VecDeque::new();
        let mut reserved: Vec<u64> = Vec::new();
        let mut next = 0u64;
        let mut total = 0u32;
        for op in ops {
            match op {
                Op::Put { n, open } => {
                    for _ in 0..n {
                        let room = (published.len() + reserved.len()) < cap as usize;
                        prop_assert_eq!(p.begin_put(next), Ok(room));
                        if room {
                            reserved.push(next);
                            next += 1;
                        }
                    }
                    if !open {
                        p.end_put();
                        total = total.wrapping_add(reserved.len() as u32);
                        published.extend(reserved.drain(..));
                    }
                }
                Op::Get(n) => {
                    for _ in 0..n {
                        prop_assert_eq!(c.get(), Ok(published.pop_front()));
                    }
                }
                Op::Peek { release } => {
                    let first = c.begin_get();
                    prop_assert_eq!(first, Ok(published.front().copied()));
                    prop_assert_eq!(c.begin_get(), first);
                    if release {
                        c.end_get();
                        published.pop_front();
                    }
                }
            }
            prop_assert_eq!(c.available(), Ok(published.len() as u32));
            prop_assert_eq!(p.pending(), Ok(published.len() as u32));
            prop_assert_eq!(p.free(), Ok(cap - published.len() as u32 - reserved.len() as u32));
            // Only end_put moves the shared tail.
            prop_assert_eq!(map.atomic_u32(OFF + TAIL).load(Ordering::Relaxed), start.wrapping_add(total));
        }
    }

    /// Garbage in the other side's index: Corrupt exactly when the fill is
    /// impossible, and never a panic or an access outside the ring.
    #[test]
    fn garbage_indices_give_corrupt_not_panic(
        cap_log in 0..4u32,
        start in start(),
        head in any::<u32>(),
        tail in any::<u32>(),
        near in -10i32..10,
    ) {
        let cap = 1u32 << cap_log;
        let (map, mut p, mut c) = board(cap, start);
        // Half the cases: a value near our own index, the interesting edge.
        let tail = if tail % 2 == 0 { start.wrapping_add(near as u32) } else { tail };
        let head = if head % 2 == 0 { start.wrapping_add(near as u32) } else { head };
        map.atomic_u32(OFF + TAIL).store(tail, Ordering::Relaxed);
        let avail = tail.wrapping_sub(start);
        let want = if avail > cap { Err(RingError::Corrupt) } else { Ok(avail) };
        prop_assert_eq!(c.available(), want);
        for _ in 0..cap + 2 {
            match c.get() {
                Ok(Some(_)) | Ok(None) | Err(RingError::Corrupt) => {}
            }
        }
        map.atomic_u32(OFF + HEAD).store(head, Ordering::Relaxed);
        let used = start.wrapping_sub(head);
        let want = if used > cap { Err(RingError::Corrupt) } else { Ok(used) };
        prop_assert_eq!(p.pending(), want);
        prop_assert_eq!(p.free(), want.map(|u| cap - u));
        for i in 0..cap + 2 {
            let r = p.begin_put(u64::from(i));
            prop_assert!(r.is_ok() || r == Err(RingError::Corrupt));
        }
        p.end_put();
    }
}

#[test]
fn full_and_empty() {
    let (_m, mut p, mut c) = board(4, 0);
    assert_eq!(c.get(), Ok(None));
    for i in 0..4 {
        assert_eq!(p.put(i), Ok(true));
    }
    assert_eq!(p.put(99), Ok(false), "a full ring takes nothing");
    assert_eq!(p.free(), Ok(0));
    assert_eq!(c.available(), Ok(4));
    for i in 0..4 {
        assert_eq!(c.get(), Ok(Some(i)));
    }
    assert_eq!(c.get(), Ok(None));
    assert_eq!(p.free(), Ok(4));
}

#[test]
fn a_batch_is_invisible_until_end_put() {
    let (_m, mut p, mut c) = board(8, u32::MAX - 1);
    for i in 0..5 {
        assert_eq!(p.begin_put(i), Ok(true));
    }
    assert_eq!(c.available(), Ok(0));
    assert_eq!(p.free(), Ok(3));
    p.end_put();
    assert_eq!(c.available(), Ok(5));
    for i in 0..5 {
        assert_eq!(c.get(), Ok(Some(i)));
    }
}

#[test]
fn end_get_without_a_record_releases_nothing() {
    let (_m, mut p, mut c) = board(2, 0);
    c.end_get();
    assert_eq!(p.pending(), Ok(0));
    p.put(7).unwrap();
    c.end_get();
    assert_eq!(c.get(), Ok(Some(7)));
}

#[test]
fn a_head_moving_backwards_under_reservations_is_corrupt() {
    let (map, mut p, _c) = board(4, 100);
    map.atomic_u32(OFF + HEAD).store(104, Ordering::Relaxed);
    // The consumer claims to have read 4 records we never published.
    assert_eq!(p.free(), Err(RingError::Corrupt));
    map.atomic_u32(OFF + HEAD).store(100, Ordering::Relaxed);
    for i in 0..4 {
        assert_eq!(p.begin_put(i), Ok(true));
    }
    p.end_put();
    map.atomic_u32(OFF + HEAD).store(102, Ordering::Relaxed);
    assert_eq!(p.begin_put(9), Ok(true));
    map.atomic_u32(OFF + HEAD).store(101, Ordering::Relaxed);
    // 3 published + 1 reserved in 4 slots: fine; back one more is impossible.
    assert_eq!(p.free(), Ok(0));
    map.atomic_u32(OFF + HEAD).store(100, Ordering::Relaxed);
    assert_eq!(p.free(), Err(RingError::Corrupt));
}

#[test]
fn records_of_any_pod_type_round_trip() {
    use crate::proto::Command;
    let map = Arc::new(Mapping::anonymous_shared(ring_bytes::<Command>(2)).unwrap());
    let mut p = Producer::<Command>::new(map.clone(), 0, 2);
    let mut c = Consumer::<Command>::new(map, 0, 2);
    let cmd = Command { op: 2, endpoint: 3, a: u64::MAX, f: 42, ..Default::default() };
    assert_eq!(p.put(cmd), Ok(true));
    assert_eq!(c.get(), Ok(Some(cmd)));
}

#[test]
#[should_panic(expected = "does not fit")]
fn a_ring_past_the_mapping_is_refused() {
    let map = Arc::new(Mapping::anonymous_shared(4096).unwrap());
    let _ = Producer::<u64>::new(map, 0, 1024);
}
