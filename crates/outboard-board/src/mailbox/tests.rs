use super::*;
use crate::arena::ClassSpec;
use crate::ring::ring_bytes;
use proptest::prelude::*;
use std::collections::{BTreeSet, VecDeque};

const CAP: u32 = 4;
const A: usize = 0;
const B: usize = 1024;
const ARENA: usize = 4096;
const SIZE: u32 = 64;
const BUFS: u32 = 8;

/// Two mailboxes (A: app → engine, B: engine → elsewhere) and one class of buffers.
struct World {
    map: Arc<Mapping>,
    arena: Arc<ArenaLayout>,
    pa: MailboxProducer,
    ca: MailboxConsumer,
    pb: MailboxProducer,
    cb: MailboxConsumer,
    stock: FreeList,
}

fn world() -> World {
    assert!(B >= A + ring_bytes::<Descriptor>(CAP));
    let map = Arc::new(Mapping::anonymous_shared(ARENA + (SIZE * BUFS) as usize).unwrap());
    let arena = Arc::new(ArenaLayout { classes: vec![ClassSpec { size: SIZE, count: BUFS, offset: ARENA }] });
    World {
        pa: MailboxProducer::new(map.clone(), A, CAP, arena.clone()),
        ca: MailboxConsumer::new(map.clone(), A, CAP),
        pb: MailboxProducer::new(map.clone(), B, CAP, arena.clone()),
        cb: MailboxConsumer::new(map.clone(), B, CAP),
        stock: FreeList::new((0..BUFS).map(|index| BufRef { class: 0, index })),
        map,
        arena,
    }
}

/// The payload byte at position `i` of a buffer filled for message `seq`.
fn pattern(seq: u32, i: usize) -> u8 {
    (seq as usize * 31 + i * 7) as u8
}

fn board_bytes(map: &Mapping, offset: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    map.copy_out(offset, &mut v);
    v
}

/// A producer built from another's `position()` continues its mailbox: the
/// consumer reads the old producer's messages, then the new one's, and the
/// ring wraps as it would have.
#[test]
fn a_producer_continues_from_another_ones_position() {
    let mut w = world();
    for i in 0..3u32 {
        assert_eq!(w.pa.put(Descriptor { offset: 0, len: i, tag: 0, aux: 0 }), Ok(true));
    }
    assert_eq!(w.ca.begin_get(), Ok(Some(Descriptor { offset: 0, len: 0, tag: 0, aux: 0 })));
    w.ca.end_get();
    let open = w.pa.begin_put(&mut w.stock).unwrap().unwrap();
    assert_eq!(w.pa.open(), Some(open));
    w.pa.end_put(1, 0, 0).unwrap();
    assert_eq!(w.pa.open(), None);
    assert_eq!(w.pa.position(), 4);
    let mut next = MailboxProducer::with_start(w.map.clone(), A, CAP, w.arena.clone(), w.pa.position());
    assert_eq!(next.position(), 4);
    assert_eq!(next.free(), Ok(1), "three messages still unread");
    assert_eq!(next.put(Descriptor { offset: 0, len: 9, tag: 0, aux: 0 }), Ok(true));
    assert_eq!(next.put(Descriptor { offset: 0, len: 10, tag: 0, aux: 0 }), Ok(false), "full");
    let mut lens = Vec::new();
    while let Some(d) = w.ca.begin_get().unwrap() {
        lens.push(d.len);
        w.ca.end_get();
    }
    assert_eq!(lens, [1, 2, SIZE.min(1), 9]);
}

#[test]
fn put_get_and_give_the_buffer_back() {
    let mut w = world();
    let pb = w.pa.begin_put(&mut w.stock).unwrap().unwrap();
    assert_eq!((pb.offset, pb.size), (w.arena.offset_of(pb.buf), SIZE as usize));
    assert_eq!(w.pa.begin_put(&mut w.stock), Ok(Some(pb)), "an open put is returned again, not a second buffer");
    assert_eq!(w.stock.len(), BUFS as usize - 1);
    w.map.copy_in(pb.offset, b"hello");
    let d = w.pa.end_put(1000, 7, 9).unwrap();
    assert_eq!(d, Descriptor { offset: pb.offset as u32, len: SIZE, tag: 7, aux: 9 }, "len clamps to the buffer");
    assert_eq!(w.ca.available(), Ok(1));
    let got = w.ca.begin_get().unwrap().unwrap();
    assert_eq!(got, d);
    assert_eq!(board_bytes(&w.map, got.offset as usize, 5), b"hello");
    assert_eq!(w.ca.end_get(), Some(d));
    assert_eq!(w.ca.end_get(), None);
    let buf = w.arena.locate(u64::from(d.offset), u64::from(d.len)).unwrap();
    assert_eq!(buf, pb.buf);
    w.stock.free(buf);
    assert_eq!(w.stock.len(), BUFS as usize);
}

#[test]
fn begin_put_takes_nothing_when_the_mailbox_or_stock_is_empty() {
    let mut w = world();
    for _ in 0..CAP {
        w.pa.begin_put(&mut w.stock).unwrap().unwrap();
        w.pa.end_put(1, 0, 0).unwrap();
    }
    assert_eq!(w.pa.begin_put(&mut w.stock), Ok(None));
    assert_eq!(w.stock.len(), (BUFS - CAP) as usize, "a full mailbox took no buffer");
    let mut empty = FreeList::default();
    assert_eq!(w.pb.begin_put(&mut empty), Ok(None));
}

#[test]
fn put_keeps_room_for_an_open_begin_put() {
    let mut w = world();
    w.pa.begin_put(&mut w.stock).unwrap().unwrap();
    let d = Descriptor { offset: ARENA as u32, len: 1, tag: 0, aux: 0 };
    for _ in 0..CAP - 1 {
        assert_eq!(w.pa.put(d), Ok(true));
    }
    assert_eq!(w.pa.put(d), Ok(false), "the last slot belongs to the open message");
    assert!(w.pa.end_put(1, 0, 0).is_ok());
}

#[test]
fn enqueue_moves_the_descriptor_not_the_bytes() {
    let mut w = world();
    let pb = w.pa.begin_put(&mut w.stock).unwrap().unwrap();
    let payload: Vec<u8> = (0..SIZE as usize).map(|i| pattern(3, i)).collect();
    w.map.copy_in(pb.offset, &payload);
    let d = w.pa.end_put(40, 1, 2).unwrap();
    let before = board_bytes(&w.map, 0, w.map.len());
    assert_eq!(w.ca.enqueue(&mut w.pb), Ok(true));
    assert_eq!(w.ca.available(), Ok(0));
    assert_eq!(w.cb.begin_get(), Ok(Some(d)), "the same descriptor, same offset");
    let after = board_bytes(&w.map, 0, w.map.len());
    assert_eq!(&after[ARENA..], &before[ARENA..], "the arena is untouched");
    assert_eq!(&after[pb.offset..pb.offset + 40], &payload[..40]);
    assert_eq!(w.ca.enqueue(&mut w.pb), Ok(false), "nothing to move");
}

#[test]
fn enqueue_into_a_full_mailbox_moves_nothing() {
    let mut w = world();
    let d = Descriptor { offset: ARENA as u32, len: 1, tag: 5, aux: 0 };
    for _ in 0..CAP {
        w.pb.put(d).unwrap();
    }
    w.pa.put(Descriptor { tag: 6, ..d }).unwrap();
    assert_eq!(w.ca.enqueue(&mut w.pb), Ok(false));
    assert_eq!(w.ca.available(), Ok(1));
    assert_eq!(w.ca.begin_get(), Ok(Some(Descriptor { tag: 6, ..d })));
}

#[test]
fn end_get_returns_the_checked_copy_not_what_the_slot_holds_now() {
    let mut w = world();
    let d = Descriptor { offset: ARENA as u32, len: 8, tag: 1, aux: 0 };
    w.pa.put(d).unwrap();
    assert_eq!(w.ca.begin_get(), Ok(Some(d)));
    // The other side rewrites the slot after we checked it.
    w.map.write(A + 128, Descriptor { offset: 0, len: u32::MAX, tag: 0, aux: 0 });
    assert_eq!(w.ca.begin_get(), Ok(Some(d)));
    assert_eq!(w.ca.end_get(), Some(d));
}

#[test]
fn adjust_trims_in_place() {
    let mut d = Descriptor { offset: 100, len: 50, tag: 1, aux: 2 };
    assert_eq!(adjust(&mut d, 10, 5), Ok(()));
    assert_eq!(d, Descriptor { offset: 110, len: 35, tag: 1, aux: 2 });
    assert_eq!(adjust(&mut d, 20, 16), Err(AdjustError::TooLong));
    assert_eq!(d.len, 35, "a failed adjust changes nothing");
    assert_eq!(adjust(&mut d, u32::MAX, u32::MAX), Err(AdjustError::TooLong));
    assert_eq!(adjust(&mut d, 35, 0), Ok(()));
    assert_eq!(d, Descriptor { offset: 145, len: 0, tag: 1, aux: 2 });
}

proptest! {
    #[test]
    fn adjust_matches_arithmetic(
        offset in any::<u32>(),
        len in any::<u32>(),
        front in any::<u32>(),
        back in any::<u32>(),
    ) {
        let mut d = Descriptor { offset, len, tag: 0, aux: 0 };
        let fits = u64::from(front) + u64::from(back) <= u64::from(len)
            && u64::from(offset) + u64::from(len) <= u64::from(u32::MAX);
        let r = adjust(&mut d, front, back);
        if fits {
            prop_assert_eq!(r, Ok(()));
            prop_assert_eq!((d.offset, d.len), (offset + front, len - front - back));
        } else {
            prop_assert_eq!(r, Err(AdjustError::TooLong));
            prop_assert_eq!((d.offset, d.len), (offset, len));
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    BeginPut,
    EndPut {
        len: usize,
        tag: u32,
    },
    BeginGet,
    EndGet,
    Enqueue,
    /// Trim a message the A consumer holds, then re-post it on B.
    AdjustAndPut {
        pick: usize,
        front: u32,
        back: u32,
    },
    /// B's consumer takes a message and gives the buffer back to the stock.
    DrainB,
    FreeHeld {
        pick: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::BeginPut),
        (0..100usize, any::<u32>()).prop_map(|(len, tag)| Op::EndPut { len, tag }),
        Just(Op::BeginGet),
        Just(Op::EndGet),
        Just(Op::Enqueue),
        (any::<usize>(), 0..40u32, 0..40u32).prop_map(|(pick, front, back)| Op::AdjustAndPut { pick, front, back }),
        Just(Op::DrainB),
        any::<usize>().prop_map(|pick| Op::FreeHeld { pick }),
    ]
}

/// The model: where every message is; payloads are checked against `seq_of`.
#[derive(Default)]
struct Model {
    stock: Vec<BufRef>,
    open_put: Option<PutBuffer>,
    qa: VecDeque<Descriptor>,
    open_get: bool,
    qb: VecDeque<Descriptor>,
    held: Vec<Descriptor>,
    /// The message number each buffer was last filled for.
    seq_of: Vec<u32>,
    seq: u32,
}

impl World {
    fn check_payload(&self, m: &Model, d: Descriptor) -> Result<(), TestCaseError> {
        let b = self.arena.locate(u64::from(d.offset), u64::from(d.len));
        prop_assert!(b.is_some(), "{:?} is not inside one buffer", d);
        let b = b.unwrap();
        let start = self.arena.offset_of(b);
        let got = board_bytes(&self.map, d.offset as usize, d.len as usize);
        let seq = m.seq_of[b.index as usize];
        let want: Vec<u8> = (0..d.len as usize).map(|i| pattern(seq, d.offset as usize - start + i)).collect();
        prop_assert_eq!(got, want);
        Ok(())
    }
}

proptest! {
    /// Random mailbox operations against a model; every buffer is always in
    /// exactly one place (stock, open put, A, B, or held), payloads intact.
    #[test]
    fn mailboxes_match_a_model(ops in proptest::collection::vec(op(), 1..80)) {
        let mut w = world();
        let mut m = Model {
            stock: (0..BUFS).map(|index| BufRef { class: 0, index }).collect(),
            seq_of: vec![0; BUFS as usize],
            ..Default::default()
        };
        for op in ops {
            match op {
                Op::BeginPut => {
                    let r = w.pa.begin_put(&mut w.stock).unwrap();
                    if m.open_put.is_some() {
                        prop_assert_eq!(r, m.open_put);
                    } else if m.qa.len() == CAP as usize || m.stock.is_empty() {
                        prop_assert_eq!(r, None);
                    } else {
                        let buf = m.stock.pop().unwrap();
                        let pb = r.unwrap();
                        prop_assert_eq!(pb.buf, buf);
                        m.seq += 1;
                        m.seq_of[buf.index as usize] = m.seq;
                        let bytes: Vec<u8> = (0..pb.size).map(|i| pattern(m.seq, i)).collect();
                        w.map.copy_in(pb.offset, &bytes);
                        m.open_put = Some(pb);
                    }
                }
                Op::EndPut { len, tag } => {
                    if let Some(pb) = m.open_put.take() {
                        let d = w.pa.end_put(len, tag, !tag).unwrap();
                        let len = len.min(pb.size) as u32;
                        let want = Descriptor { offset: pb.offset as u32, len, tag, aux: !tag };
                        prop_assert_eq!(d, want);
                        m.qa.push_back(d);
                    }
                }
                Op::BeginGet => {
                    let r = w.ca.begin_get().unwrap();
                    prop_assert_eq!(r, m.qa.front().copied());
                    if let Some(d) = r {
                        w.check_payload(&m, d)?;
                        m.open_get = true;
                    }
                }
                Op::EndGet => {
                    let r = w.ca.end_get();
                    if m.open_get {
                        m.open_get = false;
                        let d = m.qa.pop_front().unwrap();
                        prop_assert_eq!(r, Some(d));
                        m.held.push(d);
                    } else {
                        prop_assert_eq!(r, None);
                    }
                }
                Op::Enqueue => {
                    let before = board_bytes(&w.map, ARENA, (SIZE * BUFS) as usize);
                    let moved = w.ca.enqueue(&mut w.pb).unwrap();
                    let can = !m.qa.is_empty() && m.qb.len() < CAP as usize;
                    prop_assert_eq!(moved, can);
                    if can {
                        m.open_get = false;
                        let d = m.qa.pop_front().unwrap();
                        m.qb.push_back(d);
                    }
                    prop_assert_eq!(board_bytes(&w.map, ARENA, (SIZE * BUFS) as usize), before);
                }
                Op::AdjustAndPut { pick, front, back } => {
                    if !m.held.is_empty() {
                        let i = pick % m.held.len();
                        let mut d = m.held[i];
                        if adjust(&mut d, front, back).is_ok() {
                            w.check_payload(&m, d)?;
                            let ok = w.pb.put(d).unwrap();
                            prop_assert_eq!(ok, m.qb.len() < CAP as usize);
                            if ok {
                                m.held.swap_remove(i);
                                m.qb.push_back(d);
                            }
                        }
                    }
                }
                Op::DrainB => {
                    let r = w.cb.begin_get().unwrap();
                    prop_assert_eq!(r, m.qb.front().copied());
                    if let Some(d) = r {
                        w.check_payload(&m, d)?;
                        prop_assert_eq!(w.cb.end_get(), Some(d));
                        m.qb.pop_front();
                        let b = w.arena.locate(u64::from(d.offset), u64::from(d.len)).unwrap();
                        w.stock.free(b);
                        m.stock.push(b);
                    }
                }
                Op::FreeHeld { pick } => {
                    if !m.held.is_empty() {
                        let d = m.held.swap_remove(pick % m.held.len());
                        let b = w.arena.locate(u64::from(d.offset), u64::from(d.len)).unwrap();
                        w.stock.free(b);
                        m.stock.push(b);
                    }
                }
            }
            prop_assert_eq!(w.ca.available(), Ok(m.qa.len() as u32));
            prop_assert_eq!(w.pb.free(), Ok(CAP - m.qb.len() as u32));
            prop_assert_eq!(w.stock.len(), m.stock.len());
            // Ownership: each buffer in exactly one place.
            let mut seen = BTreeSet::new();
            let places = m.qa.iter().chain(&m.qb).chain(&m.held);
            let mut all: Vec<BufRef> =
                places.map(|d| w.arena.locate(u64::from(d.offset), u64::from(d.len)).unwrap()).collect();
            all.extend(m.open_put.map(|p| p.buf));
            all.extend(m.stock.iter().copied());
            for b in &all {
                prop_assert!(seen.insert(*b), "{:?} is in two places", b);
            }
            prop_assert_eq!(seen.len(), BUFS as usize);
        }
    }
}
