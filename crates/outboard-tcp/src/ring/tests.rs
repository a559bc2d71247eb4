use super::{RingBuffer, MIN_STORAGE};
use proptest::prelude::*;
use std::collections::VecDeque;

fn joined(parts: (&[u8], &[u8])) -> Vec<u8> {
    let mut v = parts.0.to_vec();
    v.extend_from_slice(parts.1);
    v
}

#[test]
fn push_pop_fifo_order() {
    let mut r = RingBuffer::new(8);
    assert!(r.is_empty());
    assert_eq!(r.push(b"hello"), 5);
    assert_eq!(r.len(), 5);
    assert_eq!(r.free(), 3);
    let mut out = [0u8; 3];
    assert_eq!(r.pop(&mut out), 3);
    assert_eq!(&out, b"hel");
    assert_eq!(r.push(b"world!"), 6);
    let mut out = [0u8; 16];
    assert_eq!(r.pop(&mut out), 8);
    assert_eq!(&out[..8], b"loworld!");
    assert!(r.is_empty());
}

#[test]
fn push_is_clamped_to_free_space() {
    let mut r = RingBuffer::new(4);
    assert_eq!(r.push(b"abcdef"), 4);
    assert_eq!(r.push(b"x"), 0);
    assert_eq!(r.free(), 0);
}

#[test]
fn peek_returns_two_slices_when_wrapped() {
    let mut r = RingBuffer::new(8);
    r.push(b"012345");
    r.consume(4);
    r.push(b"6789ab");
    let (a, b) = r.peek(0, 8);
    assert_eq!(a, b"4567");
    assert_eq!(b, b"89ab");
    let (a, b) = r.peek(1, 2);
    assert_eq!((a, b), (&b"56"[..], &b""[..]));
    let (a, b) = r.peek(5, 100);
    assert_eq!((a, b), (&b"9ab"[..], &b""[..]));
    // Entirely past the queued bytes: nothing.
    assert_eq!(r.peek(9, 3), (&b""[..], &b""[..]));
}

#[test]
fn out_of_order_bytes_become_readable_after_enqueue() {
    let mut r = RingBuffer::new(10);
    r.push(b"ab");
    // Bytes 2..4 ("cd") missing; "ef" arrives first.
    assert_eq!(r.write_unqueued(2, b"ef"), 2);
    assert_eq!(r.len(), 2);
    assert_eq!(r.write_unqueued(0, b"cd"), 2);
    r.enqueue_unqueued(4);
    assert_eq!(joined(r.peek(0, 10)), b"abcdef");
}

#[test]
fn unqueued_bytes_survive_the_queue_emptying() {
    let mut r = RingBuffer::new(6);
    r.push(b"abcd");
    r.write_unqueued(1, b"x");
    let mut out = [0u8; 4];
    r.pop(&mut out);
    assert!(r.is_empty());
    r.write_unqueued(0, b"w");
    r.enqueue_unqueued(2);
    assert_eq!(joined(r.peek(0, 2)), b"wx");
}

#[test]
fn write_unqueued_is_clamped_to_free_space() {
    let mut r = RingBuffer::new(8);
    r.push(b"abc");
    assert_eq!(r.write_unqueued(3, b"123456"), 2);
    assert_eq!(r.write_unqueued(5, b"1"), 0);
    assert_eq!(r.write_unqueued(100, b"1"), 0);
}

#[test]
fn zero_capacity_ring_is_inert() {
    let mut r = RingBuffer::new(0);
    assert_eq!(r.push(b"a"), 0);
    assert_eq!(r.write_unqueued(0, b"a"), 0);
    assert_eq!(r.pop(&mut [0u8; 4]), 0);
    r.consume(0);
    r.enqueue_unqueued(0);
    assert_eq!(r.peek(0, 4), (&b""[..], &b""[..]));
}

#[test]
fn storage_is_allocated_by_the_first_write_not_by_new() {
    let mut r = RingBuffer::new(1 << 20);
    assert_eq!(r.allocated_bytes(), 0);
    assert_eq!((r.capacity(), r.free(), r.len()), (1 << 20, 1 << 20, 0));
    // Reads and empty writes allocate nothing.
    assert_eq!(r.pop(&mut [0u8; 8]), 0);
    assert_eq!(r.peek(0, 8), (&b""[..], &b""[..]));
    assert_eq!(r.push(b""), 0);
    assert_eq!(r.write_unqueued(1 << 20, b"x"), 0);
    r.enqueue_unqueued(0);
    assert_eq!(r.allocated_bytes(), 0);
    assert_eq!(r.push(b"a"), 1);
    assert_eq!(r.allocated_bytes(), MIN_STORAGE, "small writes take small storage");
    // Storage doubles as bytes need it, never past the capacity, and every
    // byte keeps its place (the model test checks contents under growth).
    assert_eq!(r.push(&vec![7u8; 10_000]), 10_000);
    assert_eq!(r.allocated_bytes(), 16384);
    assert_eq!(r.push(&vec![7u8; 2 << 20]), (1 << 20) - 10_001);
    assert_eq!(r.allocated_bytes(), 1 << 20);
}

#[test]
fn growth_keeps_wrapped_queued_and_parked_bytes_in_order() {
    let mut r = RingBuffer::new(1 << 16);
    assert_eq!(r.push(&[1u8; 3000]), 3000);
    let mut out = vec![0u8; 2500];
    assert_eq!(r.pop(&mut out), 2500);
    // Wrap inside the 4 KiB storage, then park bytes past the queue.
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(r.push(&data), 3000);
    assert_eq!(r.write_unqueued(100, b"parked"), 6);
    assert_eq!(r.allocated_bytes(), MIN_STORAGE);
    // Growing past 4 KiB must move all of it in ring order.
    assert_eq!(r.write_unqueued(5000, b"far"), 3);
    assert!(r.allocated_bytes() >= 8192);
    let mut all = vec![0u8; 3500];
    assert_eq!(r.pop(&mut all), 3500);
    assert_eq!(&all[..500], &[1u8; 500][..]);
    assert_eq!(&all[500..], &data[..]);
    r.enqueue_unqueued(5003);
    let mut rest = vec![0u8; 5003];
    assert_eq!(r.pop(&mut rest), 5003);
    assert_eq!(&rest[100..106], b"parked");
    assert_eq!(&rest[5000..5003], b"far");
}

#[test]
fn out_of_order_write_allocates_too() {
    let mut r = RingBuffer::new(16);
    assert_eq!(r.write_unqueued(4, b"xy"), 2);
    assert_eq!(r.allocated_bytes(), 16, "storage never exceeds the capacity");
    assert!(r.is_empty());
}

#[test]
fn release_frees_storage_and_keeps_capacity() {
    let mut r = RingBuffer::new(8);
    r.push(b"abcdef");
    r.consume(5);
    r.write_unqueued(1, b"zz");
    r.release();
    assert_eq!(r.allocated_bytes(), 0);
    assert_eq!((r.capacity(), r.len(), r.free()), (8, 0, 8));
    // Usable again, from a fresh (zeroed) storage: nothing parked survives.
    assert_eq!(r.push(b"0123456789"), 8);
    assert_eq!(r.allocated_bytes(), 8);
    assert_eq!(joined(r.peek(0, 8)), b"01234567");
    r.release();
    r.enqueue_unqueued(2);
    assert_eq!(joined(r.peek(0, 8)), [0, 0]);
}

/// The model: the whole storage as a deque rotated so that index 0 is the
/// head, plus the queued length. Consuming rotates it, exactly as advancing
/// the head does.
#[derive(Debug)]
struct Model {
    store: VecDeque<u8>,
    len: usize,
}

#[derive(Debug, Clone)]
enum Op {
    Push(Vec<u8>),
    Pop(usize),
    Consume(usize),
    Peek(usize, usize),
    WriteUnqueued(usize, Vec<u8>),
    EnqueueUnqueued(usize),
    Release,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Push),
        (0usize..40).prop_map(Op::Pop),
        (0usize..40).prop_map(Op::Consume),
        (0usize..40, 0usize..40).prop_map(|(o, l)| Op::Peek(o, l)),
        (0usize..40, proptest::collection::vec(any::<u8>(), 0..20)).prop_map(|(o, d)| Op::WriteUnqueued(o, d)),
        (0usize..40).prop_map(Op::EnqueueUnqueued),
        Just(Op::Release),
    ]
}

proptest! {
    #[test]
    fn ring_matches_rotating_deque_model(cap in 0usize..33, ops in proptest::collection::vec(op(), 0..60)) {
        let mut r = RingBuffer::new(cap);
        let mut m = Model { store: VecDeque::from(vec![0u8; cap]), len: 0 };
        for op in ops {
            match op {
                Op::Push(d) => {
                    let n = d.len().min(cap - m.len);
                    for (i, &b) in d[..n].iter().enumerate() {
                        m.store[m.len + i] = b;
                    }
                    m.len += n;
                    prop_assert_eq!(r.push(&d), n);
                }
                Op::Pop(k) => {
                    let n = k.min(m.len);
                    let want: Vec<u8> = m.store.iter().take(n).copied().collect();
                    m.store.rotate_left(n);
                    m.len -= n;
                    let mut out = vec![0u8; k];
                    prop_assert_eq!(r.pop(&mut out), n);
                    prop_assert_eq!(&out[..n], &want[..]);
                }
                Op::Consume(k) => {
                    let n = k.min(m.len);
                    m.store.rotate_left(n);
                    m.len -= n;
                    r.consume(n);
                }
                Op::Peek(o, l) => {
                    let o2 = o.min(m.len);
                    let l2 = l.min(m.len - o2);
                    let want: Vec<u8> = m.store.iter().skip(o2).take(l2).copied().collect();
                    let (a, b) = r.peek(o, l);
                    prop_assert!(b.is_empty() || !a.is_empty());
                    prop_assert_eq!(joined((a, b)), want);
                }
                Op::WriteUnqueued(o, d) => {
                    let n = d.len().min((cap - m.len).saturating_sub(o));
                    for (i, &b) in d[..n].iter().enumerate() {
                        m.store[m.len + o + i] = b;
                    }
                    prop_assert_eq!(r.write_unqueued(o, &d), n);
                }
                Op::EnqueueUnqueued(k) => {
                    let n = k.min(cap - m.len);
                    m.len += n;
                    r.enqueue_unqueued(n);
                }
                Op::Release => {
                    m.store = VecDeque::from(vec![0u8; cap]);
                    m.len = 0;
                    r.release();
                    prop_assert_eq!(r.allocated_bytes(), 0);
                }
            }
            prop_assert!(r.allocated_bytes() == 0 || r.allocated_bytes() == cap);
            prop_assert_eq!(r.len(), m.len);
            prop_assert_eq!(r.free(), cap - m.len);
            prop_assert_eq!(r.capacity(), cap);
            prop_assert_eq!(r.is_empty(), m.len == 0);
            prop_assert_eq!(joined(r.peek(0, cap)), m.store.iter().take(m.len).copied().collect::<Vec<_>>());
        }
    }
}
