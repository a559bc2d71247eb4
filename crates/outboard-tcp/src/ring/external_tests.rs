//! Rings in external storage: the same behaviour as an owned ring, fixed
//! positions (byte `k` since the attach at index `k % capacity`), and the
//! migration of queued and parked bytes by `attach`.

use super::{RingBuffer, RingStorage};
use proptest::prelude::*;

/// Test storage: a `Vec` whose bytes start as `fill`, so bytes never written
/// are told apart from zeros.
fn lent(cap: usize, fill: u8) -> Box<dyn RingStorage> {
    Box::new(vec![fill; cap])
}

fn external(cap: usize, fill: u8) -> RingBuffer {
    let mut r = RingBuffer::new(0);
    assert_eq!(r.attach(lent(cap, fill), []), 0);
    r
}

fn joined(parts: (&[u8], &[u8])) -> Vec<u8> {
    let mut v = parts.0.to_vec();
    v.extend_from_slice(parts.1);
    v
}

#[test]
fn external_ring_is_fixed_size_and_allocates_nothing() {
    let mut r = external(8, 0xee);
    assert!(r.is_external());
    assert_eq!((r.capacity(), r.free(), r.len(), r.allocated_bytes()), (8, 8, 0, 0));
    assert_eq!(r.push(b"0123456789"), 8);
    assert_eq!(r.allocated_bytes(), 0, "lent storage is not the ring's heap");
    assert_eq!(r.storage_bytes(), b"01234567");
}

#[test]
fn stream_byte_k_stays_at_index_k_mod_capacity_across_wraps() {
    let mut r = external(10, 0);
    let stream: Vec<u8> = (0..100u8).collect();
    let (mut written, mut read) = (0, 0);
    let mut out = [0u8; 7];
    while read < stream.len() {
        written += r.push(&stream[written..(written + 6).min(stream.len())]);
        for (k, &byte) in stream.iter().enumerate().take(written).skip(read) {
            assert_eq!(r.storage_bytes()[k % 10], byte, "byte {k}");
        }
        let n = r.pop(&mut out);
        assert_eq!(&out[..n], &stream[read..read + n]);
        read += n;
        assert_eq!(r.head(), read % 10);
    }
}

#[test]
fn release_gives_external_storage_back() {
    let mut r = external(8, 0);
    r.push(b"abcde");
    r.consume(2);
    r.write_unqueued(1, b"P");
    r.release();
    // The board region is dropped (it goes back to its board); nothing is queued.
    assert!(!r.is_external());
    assert_eq!((r.len(), r.allocated_bytes(), r.capacity()), (0, 0, 8));
    // Written again (never, for a finished stream), it would use owned storage.
    assert_eq!(r.push(b"xyzw"), 4);
    assert_eq!(joined(r.peek(0, 8)), b"xyzw");
}

#[test]
fn unqueued_mut_then_enqueue_is_an_in_place_push() {
    let mut r = external(8, 0);
    r.push(b"abcdef");
    r.consume(5);
    let (a, b) = r.unqueued_mut(0, 5);
    assert_eq!((a.len(), b.len()), (2, 3), "wraps at the end of the storage");
    a.copy_from_slice(b"gh");
    b.copy_from_slice(b"ijk");
    assert!(r.has_room_unqueued(0, 7) && !r.has_room_unqueued(0, 8) && !r.has_room_unqueued(3, 5));
    r.enqueue_unqueued(5);
    assert_eq!(joined(r.peek(0, 8)), b"fghijk");
}

#[test]
fn owned_ring_has_room_only_where_storage_exists() {
    let mut r = RingBuffer::new(1 << 16);
    assert!(!r.has_room_unqueued(0, 1), "no storage yet: writing would allocate");
    r.push(b"x");
    assert!(r.has_room_unqueued(0, super::MIN_STORAGE - 1));
    assert!(!r.has_room_unqueued(0, super::MIN_STORAGE));
}

#[test]
fn attach_moves_queued_and_parked_bytes_to_index_zero() {
    let mut r = RingBuffer::new(16);
    r.push(b"0123456789");
    r.consume(7);
    r.push(b"abcdefgh"); // wraps: queued "789abcdefgh"
    r.write_unqueued(2, b"PQ"); // parked at offsets 13..15 from the head
    let queued = r.len();
    let moved = r.attach(lent(32, b'.'), [(0, queued), (queued + 2, queued + 4)]);
    assert_eq!(moved, queued + 2);
    assert_eq!((r.head(), r.len(), r.capacity()), (0, queued, 32));
    assert_eq!(&r.storage_bytes()[..16], b"789abcdefgh..PQ.");
    assert_eq!(joined(r.peek(0, 32)), b"789abcdefgh");
    // The hole between stays unwritten; parked bytes become readable in place.
    r.write_unqueued(0, b"rs");
    r.enqueue_unqueued(4);
    assert_eq!(joined(r.peek(queued, 4)), b"rsPQ");
}

#[test]
fn attach_from_unallocated_and_reattach() {
    let mut r = RingBuffer::new(64);
    assert_eq!(r.attach(lent(64, 0), [(0, 0)]), 0);
    r.push(b"hello");
    r.consume(3);
    assert_eq!(r.attach(lent(80, 0), [(0, r.len())]), 2);
    assert_eq!((r.head(), r.capacity()), (0, 80));
    assert_eq!(&r.storage_bytes()[..2], b"lo");
}

#[test]
#[should_panic(expected = "do not fit")]
fn attach_refuses_storage_smaller_than_the_queued_bytes() {
    let mut r = RingBuffer::new(16);
    r.push(b"0123456789");
    r.attach(lent(8, 0), [(0, 10)]);
}

/// The model: the storage as it really lies, the head index, and the queued
/// length. Positions are checked directly: byte `i` of the queue is at
/// `(head + i) % cap`.
#[derive(Debug)]
struct Model {
    store: Vec<u8>,
    head: usize,
    len: usize,
}

impl Model {
    fn at(&self, i: usize) -> usize {
        (self.head + i) % self.store.len()
    }
    fn cap(&self) -> usize {
        self.store.len()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Push(Vec<u8>),
    Pop(usize),
    Peek(usize, usize),
    WriteUnqueued(usize, Vec<u8>),
    EnqueueUnqueued(usize),
    Release,
    /// Moves to new storage `extra` bytes larger, keeping the queued bytes
    /// and `parked` bytes after them.
    Attach {
        extra: usize,
        parked: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Push),
        (0usize..40).prop_map(Op::Pop),
        (0usize..40, 0usize..40).prop_map(|(o, l)| Op::Peek(o, l)),
        (0usize..40, proptest::collection::vec(any::<u8>(), 0..20)).prop_map(|(o, d)| Op::WriteUnqueued(o, d)),
        (0usize..40).prop_map(Op::EnqueueUnqueued),
        Just(Op::Release),
        (0usize..8, 0usize..20).prop_map(|(extra, parked)| Op::Attach { extra, parked }),
    ]
}

proptest! {
    #[test]
    fn external_ring_matches_model_and_keeps_positions(
        cap in 1usize..33,
        fill in any::<u8>(),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        let mut r = external(cap, fill);
        let mut m = Model { store: vec![fill; cap], head: 0, len: 0 };
        for op in ops {
            match op {
                Op::Push(d) => {
                    let n = d.len().min(m.cap() - m.len);
                    for (i, &b) in d[..n].iter().enumerate() {
                        let at = m.at(m.len + i);
                        m.store[at] = b;
                    }
                    m.len += n;
                    prop_assert_eq!(r.push(&d), n);
                }
                Op::Pop(k) => {
                    let n = k.min(m.len);
                    let want: Vec<u8> = (0..n).map(|i| m.store[m.at(i)]).collect();
                    m.head = m.at(n);
                    m.len -= n;
                    let mut out = vec![0u8; k];
                    prop_assert_eq!(r.pop(&mut out), n);
                    prop_assert_eq!(&out[..n], &want[..]);
                }
                Op::Peek(o, l) => {
                    let o2 = o.min(m.len);
                    let l2 = l.min(m.len - o2);
                    let want: Vec<u8> = (o2..o2 + l2).map(|i| m.store[m.at(i)]).collect();
                    prop_assert_eq!(joined(r.peek(o, l)), want);
                }
                Op::WriteUnqueued(o, d) => {
                    let n = d.len().min((m.cap() - m.len).saturating_sub(o));
                    for (i, &b) in d[..n].iter().enumerate() {
                        let at = m.at(m.len + o + i);
                        m.store[at] = b;
                    }
                    prop_assert_eq!(r.write_unqueued(o, &d), n);
                }
                Op::EnqueueUnqueued(k) => {
                    let n = k.min(m.cap() - m.len);
                    m.len += n;
                    r.enqueue_unqueued(n);
                }
                Op::Release => {
                    // The lent storage goes back; the stream is over. Carry on
                    // with fresh lent storage of the same size, from index 0.
                    r.release();
                    prop_assert!(!r.is_external() && r.is_empty());
                    let cap = m.cap();
                    m.store = vec![fill ^ 0x33; cap];
                    m.head = 0;
                    m.len = 0;
                    prop_assert_eq!(r.attach(lent(cap, fill ^ 0x33), [(0, 0)]), 0);
                }
                Op::Attach { extra, parked } => {
                    let cap2 = m.cap() + extra;
                    let parked = parked.min(m.cap() - m.len);
                    let keep = m.len + parked;
                    let mut store = vec![fill ^ 0x55; cap2];
                    for (i, b) in store.iter_mut().enumerate().take(keep) {
                        *b = m.store[m.at(i)];
                    }
                    m.store = store;
                    m.head = 0;
                    prop_assert_eq!(r.attach(lent(cap2, fill ^ 0x55), [(0, keep)]), keep);
                }
            }
            prop_assert_eq!(r.allocated_bytes(), 0);
            prop_assert_eq!(r.head(), m.head);
            prop_assert_eq!(r.len(), m.len);
            prop_assert_eq!(r.capacity(), m.cap());
            prop_assert_eq!(r.free(), m.cap() - m.len);
            prop_assert_eq!(r.storage_bytes(), &m.store[..]);
        }
    }

    /// An owned ring moved into lent storage mid-stream carries on as if
    /// nothing happened (queued and parked bytes alike), from index 0.
    #[test]
    fn attach_mid_stream_preserves_contents(
        cap in 1usize..33,
        pre in proptest::collection::vec(op(), 0..30),
        post in proptest::collection::vec(op(), 0..30),
    ) {
        let mut moved = RingBuffer::new(cap);
        let mut reference = RingBuffer::new(cap);
        for op in &pre {
            apply(&mut moved, op);
            apply(&mut reference, op);
        }
        let queued = moved.len();
        // Everything the storage holds (at most `cap`), parked bytes included.
        prop_assert!(moved.attach(lent(cap, 0), [(0, cap)]) >= queued);
        prop_assert_eq!((moved.head(), moved.len()), (0, queued));
        for op in &post {
            apply(&mut moved, op);
            apply(&mut reference, op);
            prop_assert_eq!(joined(moved.peek(0, cap)), joined(reference.peek(0, cap)));
        }
    }
}

/// One op on a ring, with no checks. `Release` is left out: the owned ring
/// then forgets parked bytes (zeros) while lent storage keeps them, and
/// either is right for free space.
fn apply(r: &mut RingBuffer, op: &Op) {
    match op {
        Op::Push(d) => {
            r.push(d);
        }
        Op::Pop(k) => {
            r.pop(&mut vec![0u8; *k]);
        }
        Op::WriteUnqueued(o, d) => {
            r.write_unqueued(*o, d);
        }
        Op::EnqueueUnqueued(k) => r.enqueue_unqueued((*k).min(r.free())),
        Op::Peek(..) | Op::Attach { .. } | Op::Release => {}
    }
}

#[test]
fn a_ring_record_in_lent_storage_is_its_length_and_bad_ones_are_errors() {
    let mut r = external(8, 0);
    r.push(b"abcdefgh");
    r.consume(3);
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(json, r#"{"store":{"lent":8},"cap":8,"head":3,"len":5}"#);
    let mut back: RingBuffer = serde_json::from_str(&json).unwrap();
    assert!(back.is_unbound() && back.check().is_err());
    assert!(back.rebind(lent(9, 0)).is_err(), "another length than recorded");
    back.rebind(Box::new(r.storage_bytes().to_vec())).unwrap();
    back.check().unwrap();
    let mut out = [0u8; 8];
    let n = back.pop(&mut out);
    assert_eq!(&out[..n], b"defgh");
    for bad in [
        r#"{"store":{"lent":8,"x":1},"cap":8,"head":0,"len":0}"#,
        r#"{"store":{},"cap":8,"head":0,"len":0}"#,
        r#"{"store":{"lent":-1},"cap":8,"head":0,"len":0}"#,
        r#"{"store":7,"cap":8,"head":0,"len":0}"#,
    ] {
        assert!(serde_json::from_str::<RingBuffer>(bad).is_err(), "{bad}");
    }
    // A record whose lent length is not its capacity cannot be bound.
    let mut odd: RingBuffer = serde_json::from_str(r#"{"store":{"lent":8},"cap":4,"head":0,"len":0}"#).unwrap();
    assert!(odd.rebind(lent(8, 0)).is_err());
}
