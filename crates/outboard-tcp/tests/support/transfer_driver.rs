//! A two-way transfer over a network that the input bytes control: segments
//! are delivered, dropped, duplicated, reordered or held back, time jumps,
//! and the applications write, read and half-close at moments the input
//! picks. Unlike `segment_driver`, nothing is forged, so the checks are
//! strong: every byte read is the byte sent at that offset (safety), and once
//! the faults stop and the network is perfect, both streams complete and both
//! ends see end-of-stream (liveness), unless a retransmission limit was hit.

use super::segment_driver::{config, establish, relay_all, Input, Peer, Segment};
use outboard_time::{Duration, Instant};

/// Steps one input may drive, and settle rounds after it.
const MAX_STEPS: usize = 3_000;
const MAX_SETTLE_ROUNDS: usize = 3_000;

/// The byte at `offset` of stream `id`: not periodic in any small period, so a
/// misplaced segment cannot read back as correct.
fn pattern(id: u32, offset: usize) -> u8 {
    let x = (offset as u32).wrapping_add(id.wrapping_mul(0x9e37_79b9)).wrapping_mul(0x85eb_ca6b);
    (x ^ (x >> 13) ^ (offset as u32 >> 8)) as u8
}

/// One direction's application-level progress.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stream {
    pub total: usize,
    pub written: usize,
    pub read: usize,
    pub eof: bool,
    pub shut: bool,
}

/// What a transfer run ended with.
#[derive(Debug, Clone, Copy)]
pub struct TransferSummary {
    /// Client to server, server to client.
    pub streams: [Stream; 2],
    pub timed_out: bool,
    /// Perfect-network rounds it took to finish after the faults stopped.
    pub settle_rounds: usize,
}

/// Writes as much of stream `id` as the send queue takes.
fn write_some(p: &mut Peer, s: &mut Stream, id: u32) {
    let mut chunk = [0u8; 4096];
    while s.written < s.total {
        let n = (s.total - s.written).min(chunk.len());
        for (i, b) in chunk[..n].iter_mut().enumerate() {
            *b = pattern(id, s.written + i);
        }
        match p.conn.send(&chunk[..n]) {
            Ok(0) | Err(_) => break,
            Ok(k) => s.written += k,
        }
    }
}

/// Reads everything available from `p`, checking it against stream `id`.
fn read_all(p: &mut Peer, s: &mut Stream, id: u32) {
    let mut buf = [0u8; 4096];
    loop {
        match p.conn.recv(&mut buf) {
            Ok(0) => {
                s.eof = true;
                return;
            }
            Ok(n) => {
                for (i, &b) in buf[..n].iter().enumerate() {
                    assert_eq!(b, pattern(id, s.read + i), "stream {id}: wrong byte at offset {}", s.read + i);
                }
                s.read += n;
                assert!(s.read <= s.total, "stream {id}: more bytes read than sent");
            }
            Err(_) => return,
        }
    }
}

/// Delivers, drops, duplicates, reorders or delays up to `count` segments of `from`.
fn network_step(input: &mut Input, from: &mut Peer, to: &mut Peer, held: &mut Vec<Segment>, now: Instant) {
    for _ in 0..input.u8() % 16 {
        let choice = input.u8() % 10;
        let Some((repr, payload)) = from.outbox.pop_front() else { continue };
        match choice {
            0 => {}                                      // lost
            1 => {
                to.conn.handle_segment(now, &repr, &payload);
                to.conn.handle_segment(now, &repr, &payload); // duplicated
            }
            2 => from.outbox.push_back((repr, payload)), // reordered behind later ones
            3 => held.push((repr, payload)),             // delayed until released
            _ => to.conn.handle_segment(now, &repr, &payload),
        }
        to.drain(now);
    }
    from.drain(now);
}

/// Runs one program. Panics on corrupted data, a stalled transfer, or any
/// check `segment_driver` makes.
pub fn run_transfer(data: &[u8]) -> TransferSummary {
    let mut input = Input::new(data);
    let cfg = config(&mut input);
    let mut now = Instant::from_millis(1_000);
    let (client, server) = establish(&cfg, now);
    let mut peers = [client, server];
    let mut streams = [
        Stream { total: usize::from(input.u16()) * 4, ..Stream::default() },
        Stream { total: usize::from(input.u16()), ..Stream::default() },
    ];
    // Segments held back by the network, per direction, released at once later.
    let mut held: [Vec<Segment>; 2] = [Vec::new(), Vec::new()];
    let mut steps = 0;
    while !input.is_empty() && steps < MAX_STEPS {
        steps += 1;
        let op = input.u8();
        let side = usize::from(op & 1);
        let [a, b] = &mut peers;
        let (me, other) = if side == 0 { (a, b) } else { (b, a) };
        match (op >> 1) % 7 {
            0 => write_some(me, &mut streams[side], side as u32),
            1 => read_all(me, &mut streams[1 - side], (1 - side) as u32),
            2 => network_step(&mut input, me, other, &mut held[side], now),
            3 => {
                for (repr, payload) in held[side].drain(..) {
                    other.conn.handle_segment(now, &repr, &payload);
                }
            }
            4 => {
                now += Duration::from_millis(u64::from(input.u8()) * 4);
                me.timeout_if_due(now);
                other.timeout_if_due(now);
            }
            5 => {
                let next = [me.conn.poll_timeout(), other.conn.poll_timeout()].into_iter().flatten().min();
                if let Some(at) = next {
                    now = now.max(at);
                    me.timeout_if_due(now);
                    other.timeout_if_due(now);
                }
            }
            _ => {
                let s = &mut streams[side];
                if s.written == s.total && !s.shut {
                    me.conn.shutdown_write();
                    s.shut = true;
                }
            }
        }
        me.drain(now);
        other.drain(now);
    }
    // The faults stop. Held segments arrive late, then the network is perfect.
    for (side, segs) in held.iter_mut().enumerate() {
        let [a, b] = &mut peers;
        let to = if side == 0 { b } else { a };
        for (repr, payload) in segs.drain(..) {
            to.conn.handle_segment(now, &repr, &payload);
        }
        to.drain(now);
    }
    let mut rounds = 0;
    let timed_out = loop {
        let [a, b] = &mut peers;
        if a.seen.timed_out || b.seen.timed_out {
            break true;
        }
        assert!(!a.seen.reset && !b.seen.reset, "a reset without any forged segment: {streams:?}");
        let done = streams.iter().all(|s| s.eof && s.read == s.total);
        if done {
            break false;
        }
        rounds += 1;
        assert!(
            rounds <= MAX_SETTLE_ROUNDS,
            "transfer stalled on a perfect network: {streams:?}, client {:?}, server {:?}",
            a.conn.state(),
            b.conn.state()
        );
        for (side, p) in [&mut *a, &mut *b].into_iter().enumerate() {
            let s = &mut streams[side];
            write_some(p, s, side as u32);
            if s.written == s.total && !s.shut {
                p.conn.shutdown_write();
                s.shut = true;
            }
            p.drain(now);
        }
        relay_all(a, b, now);
        relay_all(b, a, now);
        read_all(b, &mut streams[0], 0);
        read_all(a, &mut streams[1], 1);
        a.drain(now);
        b.drain(now);
        if a.outbox.is_empty() && b.outbox.is_empty() {
            // Nothing on the wire: let the next timer (delayed ACK, RTO, persist) fire.
            let next = [a.conn.poll_timeout(), b.conn.poll_timeout()].into_iter().flatten().min();
            if let Some(at) = next {
                now = now.max(at);
                a.timeout_if_due(now);
                b.timeout_if_due(now);
                a.drain(now);
                b.drain(now);
            }
        }
    };
    TransferSummary { streams, timed_out, settle_rounds: rounds }
}
