//! A hostile application writes arbitrary bytes over the whole board, also
//! between operations; every engine-side operation gives Ok, Err or None,
//! never a panic or an access outside the board.

use outboard_board::layout::{header, BoardLayout, BoardParams};
use outboard_board::mailbox::adjust;
use outboard_board::proto::op;
use outboard_board::{BufRef, Command, Condition, Consumer, Event, FreeList, Mapping, OwnerTable, Producer, Side};
use outboard_board::{EndpointStatus, MailboxConsumer, MailboxProducer, SyncTable, WaitOutcome};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

fn params() -> BoardParams {
    BoardParams {
        command_capacity: 8,
        event_capacity: 8,
        endpoints: 3,
        mailbox_capacity: 4,
        syncs: 6,
        dgram_buffers: 4,
        dgram_size: 64,
        stream_buffer: 4096,
        stream_buffers: 1,
        shards: 1,
    }
}

/// Words worth poking, where values near the legitimate ones reach the
/// edge cases: (control words: ring indices, syncs, condition; record
/// fields: commands' op, sync, offset and length, descriptors' offset and len).
fn hot_words(l: &BoardLayout) -> (Vec<usize>, Vec<usize>) {
    let mut control = vec![l.shards[0].command_ring, l.shards[0].command_ring + 64, l.shards[0].event_ring, l.shards[0].event_ring + 64];
    let mut fields = Vec::new();
    for i in 0..l.params.command_capacity as usize {
        let rec = l.shards[0].command_ring + 128 + 64 * i;
        fields.extend([rec, rec + 8, rec + 16, rec + 24]);
    }
    for ep in 0..l.params.endpoints {
        let m = l.endpoint_mailbox(ep);
        control.extend([m, m + 64]);
        fields.extend((0..l.params.mailbox_capacity as usize).flat_map(|i| [m + 128 + 16 * i, m + 132 + 16 * i]));
    }
    control.extend((0..l.params.syncs as usize).map(|s| l.syncs + 8 * s));
    control.extend([header::EVENT_CONDITION, header::EVENT_CONDITION + 4]);
    (control, fields)
}

/// The arena's offsets, and a little past its end.
fn arena_span() -> std::ops::Range<u64> {
    let l = BoardLayout::new(params()).unwrap();
    l.arena.classes[0].offset as u64..l.total as u64 + 64
}

fn value() -> impl Strategy<Value = u32> {
    let arena = arena_span();
    prop_oneof![0..12u32, (u32::MAX - 12..=u32::MAX), Just(1 << 31), arena.start as u32..arena.end as u32, any::<u32>()]
}

/// Fills the board from `seed` (xorshift).
fn scribble(map: &Mapping, seed: u64) {
    let mut x = seed | 1;
    for i in (0..map.len()).step_by(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        map.write::<u64>(i, x);
    }
}

fn poke(map: &Mapping, pokes: &[(usize, u32)], hot: &[usize]) {
    for &(which, v) in pokes {
        map.write::<u32>(hot[which % hot.len()], v);
    }
}

/// The engine's view of one board, built from its own layout.
struct Engine {
    l: BoardLayout,
    map: Arc<Mapping>,
    commands: Consumer<Command>,
    events: Producer<Event>,
    inboxes: Vec<MailboxConsumer>,
    outboxes: Vec<MailboxProducer>,
    syncs: SyncTable,
    cond: Condition,
    owners: OwnerTable,
    stock: FreeList,
}

impl Engine {
    fn new(map: Arc<Mapping>, l: BoardLayout, start: u32) -> Engine {
        let p = l.params;
        let arena = Arc::new(l.arena.clone());
        let eps = 0..p.endpoints;
        Engine {
            commands: Consumer::with_start(map.clone(), l.shards[0].command_ring, p.command_capacity, start),
            events: Producer::with_start(map.clone(), l.shards[0].event_ring, p.event_capacity, start),
            inboxes: eps
                .clone()
                .map(|ep| MailboxConsumer::new(map.clone(), l.endpoint_mailbox(ep), p.mailbox_capacity))
                .collect(),
            outboxes: eps
                .map(|ep| MailboxProducer::new(map.clone(), l.endpoint_mailbox(ep), p.mailbox_capacity, arena.clone()))
                .collect(),
            syncs: SyncTable::new(map.clone(), l.syncs, p.syncs),
            cond: Condition::new(map.clone(), header::EVENT_CONDITION),
            owners: OwnerTable::new(&l.arena, |b| if b.class == 1 { Side::App } else { Side::Engine }),
            stock: FreeList::new((0..p.dgram_buffers).map(|index| BufRef { class: 0, index })),
            l,
            map,
        }
    }

    /// Checks what `locate` says about a range the other side named.
    fn locate(&mut self, offset: u64, len: u64) -> Result<(), TestCaseError> {
        if let Some(b) = self.l.arena.locate(offset, len) {
            let start = self.l.arena.offset_of(b) as u64;
            prop_assert!(start <= offset && offset + len <= start + self.l.arena.size_of(b) as u64);
            prop_assert!(offset + len <= self.map.len() as u64);
            // An application claiming a buffer: granted only if it holds it.
            let _ = self.owners.transfer(b, Side::App, Side::Engine);
        }
        Ok(())
    }

    fn round(&mut self, k: u32) -> Result<(), TestCaseError> {
        let cap = self.l.params.command_capacity;
        for _ in 0..cap + 2 {
            match self.commands.begin_get() {
                Ok(Some(c)) => {
                    prop_assert!(self.commands.available().map_or(true, |n| n <= cap));
                    if c.op == op::UDP_SEND || c.op == op::UDP_RELEASE {
                        self.locate(c.a, c.b)?;
                    }
                    let _ = self.syncs.complete(c.sync, -11);
                    self.commands.end_get();
                }
                Ok(None) | Err(_) => break,
            }
        }
        for i in 0..self.l.params.event_capacity + 2 {
            match self.events.put(Event { endpoint: i, kind: k, value: 0 }) {
                Ok(_) => prop_assert!(self.events.pending().map_or(true, |n| n <= self.events.capacity())),
                Err(_) => break,
            }
        }
        let n = self.inboxes.len();
        for ep in 0..n {
            if let Ok(Some(d)) = self.inboxes[ep].begin_get() {
                self.locate(u64::from(d.offset), u64::from(d.len))?;
                let mut t = d;
                if adjust(&mut t, k % 7, k % 5).is_ok() {
                    self.locate(u64::from(t.offset), u64::from(t.len))?;
                }
                let _ = self.inboxes[ep].enqueue(&mut self.outboxes[(ep + 1) % n]);
            }
            let _ = self.inboxes[ep].end_get();
            if let Ok(Some(pb)) = self.outboxes[ep].begin_put(&mut self.stock) {
                self.map.copy_in(pb.offset, &[k as u8; 16]);
                let _ = self.outboxes[ep].end_put(16, k, 0);
            }
            let _ = self.outboxes[ep].free();
            let _: EndpointStatus = self.map.read(self.l.endpoint_status(ep as u32));
        }
        for slot in 0..self.syncs.count() + 2 {
            let _ = self.syncs.state(slot);
            let _ = self.syncs.complete(slot, i64::from(k));
            let _ = self.syncs.release_cancelled(slot);
            // The application's own calls on a scribbled table, too.
            let _ = self.syncs.take(slot);
            let _ = self.syncs.cancel(slot);
            let _ = self.syncs.arm(slot);
        }
        let _ = self.cond.signal();
        let seen = self.cond.current().wrapping_add(k);
        let r = self.cond.wait(seen, Duration::ZERO, Duration::ZERO);
        prop_assert!(matches!(r, WaitOutcome::Signalled | WaitOutcome::TimedOut));
        // Offsets and lengths straight from the garbage.
        for i in 0..8usize {
            let at = (k as usize * 64 + i * 8) % (self.map.len() - 16);
            let (o, l) = (self.map.read::<u64>(at), self.map.read::<u64>(at + 8));
            self.locate(o, l)?;
            self.locate(o % self.map.len() as u64, l % 5000)?;
        }
        Ok(())
    }
}

/// Makes the rings look half-sane: each index the engine reads sits
/// `fill` records from where the engine starts (past `capacity`: corrupt),
/// and the command records name plausible buffers. The rest stays garbage.
fn plausible(map: &Mapping, l: &BoardLayout, start: u32, fills: &[u32], cmds: &[(u32, u64, u64)]) {
    let u = |at: usize, v: u32| map.atomic_u32(at).store(v, std::sync::atomic::Ordering::Relaxed);
    u(l.shards[0].command_ring + 64, start.wrapping_add(fills[0]));
    u(l.shards[0].event_ring, start.wrapping_sub(fills[1]));
    for ep in 0..l.params.endpoints {
        // The engine's mailbox sides start at 0.
        let m = l.endpoint_mailbox(ep);
        u(m, 0);
        u(m + 64, fills[2 + ep as usize]);
    }
    for (i, &(op, a, b)) in cmds.iter().enumerate() {
        let old: Command = map.read(l.shards[0].command_ring + 128 + 64 * i);
        map.write(l.shards[0].command_ring + 128 + 64 * i, Command { op, a, b, ..old });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn engine_survives_arbitrary_boards(
        seed in any::<u64>(),
        start in prop_oneof![Just(0u32), Just(u32::MAX - 3), any::<u32>()],
        control in proptest::collection::vec((any::<usize>(), value()), 0..24),
        fields in proptest::collection::vec((any::<usize>(), value()), 0..64),
        later in proptest::collection::vec(proptest::collection::vec((any::<usize>(), value()), 0..8), 1..6),
        sane in any::<bool>(),
        fills in proptest::collection::vec(0..12u32, 5),
        cmds in proptest::collection::vec(
            (
                prop_oneof![Just(op::UDP_SEND), Just(op::UDP_RELEASE), 0..16u32],
                arena_span(),
                prop_oneof![0..80u64, 0..5000u64],
            ),
            8,
        ),
    ) {
        let l = BoardLayout::new(params()).unwrap();
        let map = Arc::new(Mapping::anonymous_shared(l.total).unwrap());
        let (hot_control, hot_fields) = hot_words(&l);
        scribble(&map, seed);
        poke(&map, &control, &hot_control);
        poke(&map, &fields, &hot_fields);
        if sane {
            plausible(&map, &l, start, &fills, &cmds);
        }
        let mut e = Engine::new(map.clone(), l, start);
        for (k, p) in later.iter().enumerate() {
            e.round(k as u32)?;
            // The application keeps scribbling between the engine's passes.
            poke(&map, p, if k % 2 == 0 { &hot_control } else { &hot_fields });
        }
    }
}
