//! A producer and a consumer in two processes (fork) sharing an anonymous
//! mapping: order and content survive, and nothing hangs.
#![allow(clippy::disallowed_methods)] // Stress tests are bounded by the real clock.

mod common;

use common::{fork, ping_pong, yield_now, SERIAL};
use outboard_board::arena::ClassSpec;
use outboard_board::ring::ring_bytes;
use outboard_board::{ArenaLayout, BufRef, Condition, Consumer, Descriptor, FreeList, Mapping};
use outboard_board::{MailboxConsumer, MailboxProducer, Pod, Producer};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(5);

/// A record whose two halves must agree.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rec {
    seq: u64,
    check: u64,
}
// SAFETY: repr(C), two u64s, no padding.
unsafe impl Pod for Rec {}

fn check_of(seq: u64) -> u64 {
    seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5555
}

#[test]
fn ring_across_fork_keeps_order_and_content() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: u64 = 200_000;
    const CAP: u32 = 1024;
    // Start 5000 records before the u32 wrap so the run crosses it.
    let start = u32::MAX - 5000;
    let map = Arc::new(Mapping::anonymous_shared(ring_bytes::<Rec>(CAP)).unwrap());
    map.atomic_u32(0).store(start, Ordering::Relaxed);
    map.atomic_u32(64).store(start, Ordering::Relaxed);
    let deadline = Instant::now() + LIMIT;

    let child = fork(|| {
        let mut p = Producer::<Rec>::with_start(map.clone(), 0, CAP, start);
        let mut seq = 0;
        while seq < N {
            // Batches of up to 16, one publication each.
            let mut batch = 0;
            while batch < 16 && seq < N {
                match p.begin_put(Rec { seq, check: check_of(seq) }) {
                    Ok(true) => {
                        seq += 1;
                        batch += 1;
                    }
                    Ok(false) => break,
                    Err(_) => return 3,
                }
            }
            p.end_put();
            if batch == 0 {
                if Instant::now() > deadline {
                    return 2;
                }
                yield_now();
            }
        }
        0
    });

    let mut c = Consumer::<Rec>::with_start(map.clone(), 0, CAP, start);
    let mut want = 0;
    while want < N {
        match c.get().expect("the producer wrote a sane tail") {
            Some(r) => {
                assert_eq!(r, Rec { seq: want, check: check_of(want) });
                want += 1;
            }
            None => {
                assert!(Instant::now() < deadline, "consumer stalled at {want}");
                yield_now();
            }
        }
    }
    assert_eq!(c.get(), Ok(None), "nothing past the end");
    assert_eq!(child.wait(deadline), Some(0));
    assert_eq!(map.atomic_u32(0).load(Ordering::Relaxed), start.wrapping_add(N as u32));
}

/// The payload byte `i` of message `seq`.
fn pattern(seq: u32, i: usize) -> u8 {
    (seq as usize).wrapping_mul(131).wrapping_add(i * 7) as u8
}

fn len_of(seq: u32) -> usize {
    (seq as usize * 13) % 257
}

#[test]
fn mailbox_across_fork_carries_payloads_and_returns_buffers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: u32 = 50_000;
    const CAP: u32 = 64;
    const BUFS: u32 = 32;
    const SIZE: u32 = 256;
    // Mailbox 0 carries messages child → parent; mailbox 1 returns the buffers.
    let (m0, m1, arena_at) = (0, 2048, 4096);
    let arena = Arc::new(ArenaLayout { classes: vec![ClassSpec { size: SIZE, count: BUFS, offset: arena_at }] });
    let map = Arc::new(Mapping::anonymous_shared(arena_at + (SIZE * BUFS) as usize).unwrap());
    let deadline = Instant::now() + LIMIT;

    let child = fork(|| {
        let mut out = MailboxProducer::new(map.clone(), m0, CAP, arena.clone());
        let mut back = MailboxConsumer::new(map.clone(), m1, CAP);
        let mut stock = FreeList::new((0..BUFS).map(|index| BufRef { class: 0, index }));
        let mut bytes = [0u8; SIZE as usize];
        for seq in 0..N {
            let pb = loop {
                match out.begin_put(&mut stock) {
                    Ok(Some(pb)) => break pb,
                    Ok(None) => {}
                    Err(_) => return 3,
                }
                // Out of buffers: take back what the parent returned.
                while let Ok(Some(d)) = back.begin_get() {
                    back.end_get();
                    match arena.locate(u64::from(d.offset), u64::from(d.len)) {
                        Some(b) => stock.free(b),
                        None => return 4,
                    }
                }
                if Instant::now() > deadline {
                    return 2;
                }
                yield_now();
            };
            let len = len_of(seq);
            for (i, b) in bytes[..len].iter_mut().enumerate() {
                *b = pattern(seq, i);
            }
            map.copy_in(pb.offset, &bytes[..len]);
            if out.end_put(len, seq, !seq).is_err() {
                return 5;
            }
        }
        0
    });

    let mut inbox = MailboxConsumer::new(map.clone(), m0, CAP);
    let mut giveback = MailboxProducer::new(map.clone(), m1, CAP, arena.clone());
    let mut bytes = vec![0u8; SIZE as usize];
    for seq in 0..N {
        let d = loop {
            if let Some(d) = inbox.begin_get().unwrap() {
                break d;
            }
            assert!(Instant::now() < deadline, "consumer stalled at {seq}");
            yield_now();
        };
        assert_eq!((d.tag, d.aux, d.len as usize), (seq, !seq, len_of(seq)));
        let buf = arena.locate(u64::from(d.offset), u64::from(d.len)).expect("inside one buffer");
        assert_eq!(arena.offset_of(buf), d.offset as usize);
        map.copy_out(d.offset as usize, &mut bytes[..d.len as usize]);
        for (i, b) in bytes[..d.len as usize].iter().enumerate() {
            assert_eq!(*b, pattern(seq, i), "message {seq} byte {i}");
        }
        assert_eq!(inbox.end_get(), Some(d));
        // 32 buffers never fill a 64-slot return mailbox.
        assert_eq!(giveback.put(Descriptor { len: 0, ..d }), Ok(true));
    }
    assert_eq!(child.wait(deadline), Some(0));
}

#[test]
fn conditions_ping_pong_across_fork() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const ROUNDS: u32 = 5_000;
    let map = Arc::new(Mapping::anonymous_shared(4096).unwrap());
    let (ping, pong) = (Condition::new(map.clone(), 0), Condition::new(map.clone(), 64));
    let deadline = Instant::now() + LIMIT;
    let child = {
        let (ping, pong) = (ping.clone(), pong.clone());
        fork(move || match ping_pong(&pong, &ping, false, ROUNDS, deadline) {
            Ok(_) => 0,
            Err(_) => 2,
        })
    };
    let wakes = ping_pong(&ping, &pong, true, ROUNDS, deadline).unwrap();
    eprintln!("parent futex wakes: {wakes} of {ROUNDS} signals");
    assert_eq!(child.wait(deadline), Some(0), "the child lost a wake-up or failed");
    assert_eq!((ping.current(), pong.current()), (ROUNDS, ROUNDS));
    assert!(wakes > 0, "the child never slept: the futex path went untested");
    assert_eq!((ping.waiters(), pong.waiters()), (0, 0));
}
