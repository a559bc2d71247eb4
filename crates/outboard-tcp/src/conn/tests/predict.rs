//! Header prediction (`conn::predict`) against the full receive path: two
//! connections, one with the fast path and one without, take the same
//! generated exchange step by step (in-order data, gaps, duplicates, window
//! changes, timestamps old and new, reads, our own data and its ACKs, timer
//! expiry, the peer's FIN) and must agree after every step: in their
//! records, ring bytes, segments sent and events.
//!
//! The same exchanges check `Connection::nothing_to_send` (which lets the
//! stack skip a poll): wherever it says so, `poll_transmit` finds nothing.

use super::*;
use crate::conn::predict::set_prediction_off;
use proptest::prelude::*;

const RING: usize = 16 * 1024;

fn lent() -> Box<dyn crate::ring::RingStorage> {
    Box::new(vec![0u8; RING])
}

fn cfg() -> Config {
    Config { recv_buffer: RING, send_buffer: RING, ..Config::default() }
}

/// The peer's byte at sequence number `s`: a segment sent again carries the same bytes.
fn byte_at(s: u32) -> u8 {
    (s % 251) as u8
}

#[derive(Debug, Clone)]
enum Step {
    /// Data from the peer at `next + offset` (offset 0: in order, and `next`
    /// moves past it; negative: old bytes again; positive: beyond a gap).
    Data { offset: i32, len: usize, psh: bool },
    /// The peer's window field changes (from its next segment on).
    Window(u16),
    /// The peer's timestamp clock moves by this much (a step back fails PAWS).
    Clock(i32),
    /// The application reads up to this many bytes.
    Read(usize),
    /// The application writes this many bytes.
    Write(usize),
    /// A pure ACK from the peer of everything we sent.
    AckAll,
    /// Time passes, timers fire.
    Wait(u64),
    /// The peer's FIN, after its last byte.
    Fin,
    /// The peer's FIN `len` bytes ahead, then those bytes in order.
    FinBehindData(usize),
    /// The peer's ACK field moves by this much from what it has seen
    /// (stale, or ahead of what we sent), from its next segment on.
    AckSkew(i32),
    /// The peer's next segment carries a SACK block: a D-SACK of bytes of
    /// ours below its ACK, or one beyond it.
    Sack(bool),
}

fn step() -> impl Strategy<Value = Step> {
    let len = prop_oneof![Just(1usize), Just(100), Just(536), Just(1000), Just(1448)];
    prop_oneof![
        12 => (len.clone(), any::<bool>()).prop_map(|(len, psh)| Step::Data { offset: 0, len, psh }),
        2 => (prop_oneof![-3000i32..-1, 1i32..4000], len, any::<bool>())
            .prop_map(|(offset, len, psh)| Step::Data { offset, len, psh }),
        1 => prop_oneof![Just(0u16), 1u16..64, Just(u16::MAX)].prop_map(Step::Window),
        2 => prop_oneof![0i32..3, Just(-1)].prop_map(Step::Clock),
        3 => prop_oneof![Just(usize::MAX), 1usize..5000].prop_map(Step::Read),
        1 => (1usize..3000).prop_map(Step::Write),
        1 => Just(Step::AckAll),
        1 => prop_oneof![Just(1u64), Just(41), Just(250), Just(2_000)].prop_map(Step::Wait),
        1 => Just(Step::Fin),
        1 => (1usize..3000).prop_map(Step::FinBehindData),
        1 => prop_oneof![Just(0i32), Just(-1000), Just(-1), Just(1), Just(1000)].prop_map(Step::AckSkew),
        1 => any::<bool>().prop_map(Step::Sack),
    ]
}

/// The peer, as far as the two connections see it.
struct Peer {
    next: u32,
    ts: u32,
    window: u16,
    /// Our highest sequence number sent so far, acknowledged by `AckAll`.
    our_high: u32,
    acked: u32,
    ack_skew: i32,
    /// A SACK block for the next segment only.
    sack: Option<(u32, u32)>,
}

impl Peer {
    fn segment(&mut self, flags: TcpFlags, seq: u32) -> TcpRepr {
        let mut r = seg(flags, seq, self.acked.wrapping_add_signed(self.ack_skew));
        if let Some(block) = self.sack.take() {
            r.options.sack = sack(&[block]);
        }
        r.window = self.window;
        r.options.timestamps = Some((self.ts, 10_000));
        r
    }
}

/// A segment in as the stack gives it: through the fused path when the
/// connection can prefill it.
fn feed(h: &mut Harness, repr: &TcpRepr, payload: &[u8], prediction: bool) {
    set_prediction_off(!prediction);
    match h.c.prefill_payload(repr, payload) {
        Some(p) => h.c.handle_segment_prefilled(h.now, repr, payload, p),
        None => h.c.handle_segment(h.now, repr, payload),
    }
    set_prediction_off(false);
}

/// Everything two runs must agree on, with the fast path's own counter left out.
fn observed(h: &mut Harness) -> (serde_json::Value, Vec<u8>, Vec<Out>, Vec<Event>) {
    let mut record = serde_json::to_value(&h.c).expect("a connection has a record");
    record["stats"]
        .as_object_mut()
        .expect("stats in the record")
        .remove("predicted_segments");
    let ring = h.c.recv_buf.storage_bytes().to_vec();
    let sent = h.recv();
    let events = std::iter::from_fn(|| h.c.poll_event()).collect();
    (record, ring, sent, events)
}

fn established() -> Harness {
    let opts = TcpOptions {
        mss: Some(1460),
        window_scale: Some(0),
        sack_permitted: true,
        timestamps: Some((100, 10_001)),
        ..TcpOptions::default()
    };
    let mut h = Harness::established_with(&cfg(), opts);
    h.c.attach_storage(lent(), lent());
    h
}

/// What a side-by-side run counted.
struct Counts {
    /// Segments the connection with prediction took by it.
    predicted: u64,
    /// Steps after which `nothing_to_send` said so (both connections).
    nothing_to_send: u64,
}

/// Runs `steps` on a connection with prediction and one without.
fn run_side_by_side(steps: &[Step]) -> Result<Counts, TestCaseError> {
    let mut quiet = 0;
    let (mut fast, mut full) = (established(), established());
    let mut peer = Peer { next: PEER_ISS + 1, ts: 101, window: 65535, our_high: ISS + 1, acked: ISS + 1, ack_skew: 0, sack: None };
    for (i, s) in steps.iter().enumerate() {
        let mut segment = None;
        match *s {
            Step::Data { offset, len, psh } => {
                let seq = peer.next.wrapping_add_signed(offset);
                let payload: Vec<u8> = (0..len as u32).map(|k| byte_at(seq.wrapping_add(k))).collect();
                let flags = if psh { ACK | TcpFlags::PSH } else { ACK };
                segment = Some((peer.segment(flags, seq), payload));
                if offset == 0 {
                    peer.next = seq.wrapping_add(len as u32);
                }
            }
            Step::Window(w) => peer.window = w,
            Step::Clock(d) => peer.ts = peer.ts.wrapping_add_signed(d),
            Step::Read(n) => {
                prop_assert_eq!(fast.c.recv_consume(n), full.c.recv_consume(n));
            }
            Step::Write(n) => {
                let data = vec![7u8; n];
                prop_assert_eq!(fast.c.send(&data), full.c.send(&data));
            }
            Step::AckAll => {
                peer.acked = peer.our_high;
                segment = Some((peer.segment(ACK, peer.next), Vec::new()));
            }
            Step::Wait(ms) => {
                fast.advance(Duration::from_millis(ms));
                full.advance(Duration::from_millis(ms));
            }
            Step::Fin => {
                segment = Some((peer.segment(ACK | FIN, peer.next), Vec::new()));
                peer.next = peer.next.wrapping_add(1);
            }
            Step::FinBehindData(len) => {
                let fin = peer.segment(ACK | FIN, peer.next.wrapping_add(len as u32));
                feed(&mut fast, &fin, b"", true);
                feed(&mut full, &fin, b"", false);
                let payload: Vec<u8> = (0..len as u32).map(|k| byte_at(peer.next.wrapping_add(k))).collect();
                segment = Some((peer.segment(ACK, peer.next), payload));
                peer.next = peer.next.wrapping_add(len as u32 + 1);
            }
            Step::AckSkew(d) => peer.ack_skew = d,
            Step::Sack(below) => {
                let at = if below { peer.acked.wrapping_sub(100) } else { peer.acked.wrapping_add(100) };
                peer.sack = Some((at, at.wrapping_add(100)));
            }
        }
        if let Some((repr, payload)) = segment {
            feed(&mut fast, &repr, &payload, true);
            feed(&mut full, &repr, &payload, false);
        }
        for h in [&mut fast, &mut full] {
            if h.c.nothing_to_send(h.now) {
                quiet += 1;
                prop_assert!(h.c.poll_transmit(h.now).is_none(), "nothing_to_send, yet a segment after step {} ({:?})", i, s);
            }
        }
        let (a, b) = (observed(&mut fast), observed(&mut full));
        prop_assert_eq!(&a.0, &b.0, "records differ after step {} ({:?})", i, s);
        prop_assert!(a.1 == b.1, "ring bytes differ after step {} ({:?})", i, s);
        let sent = |outs: &[Out]| outs.iter().map(|o| format!("{:?} {:?}", o.repr, o.payload)).collect::<Vec<_>>();
        prop_assert_eq!(sent(&a.2), sent(&b.2), "segments sent differ after step {} ({:?})", i, s);
        prop_assert_eq!(&a.3, &b.3, "events differ after step {} ({:?})", i, s);
        for out in &a.2 {
            // Our own data and FIN, for the peer's next ACK.
            let end = out.seq().wrapping_add(out.len() as u32 + u32::from(out.flags().fin()));
            if end.wrapping_sub(peer.our_high) as i32 > 0 {
                peer.our_high = end;
            }
        }
    }
    prop_assert_eq!(full.c.stats().predicted_segments, 0);
    Ok(Counts { predicted: fast.c.stats().predicted_segments, nothing_to_send: quiet })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn header_prediction_changes_nothing_the_full_path_would_not(steps in proptest::collection::vec(step(), 1..160)) {
        run_side_by_side(&steps)?;
    }
}

/// The fast path is taken where it should be: a bulk receiver's in-order
/// segments, read as they come. (Without this, the test above could pass
/// with a fast path that never runs.)
#[test]
fn a_bulk_receiver_takes_its_in_order_segments_by_prediction() {
    let mut steps = Vec::new();
    for _ in 0..40 {
        steps.push(Step::Data { offset: 0, len: 1448, psh: false });
        steps.push(Step::Clock(1));
        steps.push(Step::Read(usize::MAX));
    }
    let predicted = run_side_by_side(&steps).expect("the two paths agree").predicted;
    // The first data segment finds an empty ring, later ones the fast path.
    assert!(predicted >= 39, "only {predicted} of 40 segments predicted");
}

/// A request/response exchange: after the request is acknowledged and the
/// reply read, each connection has nothing to send, and says so without a
/// poll (without this, the check in `run_side_by_side` could pass with a
/// `nothing_to_send` that is never true).
#[test]
fn a_request_response_exchange_has_nothing_to_send_between_round_trips() {
    let mut steps = Vec::new();
    for _ in 0..20 {
        steps.push(Step::Write(100));
        steps.push(Step::Clock(1));
        steps.push(Step::AckAll);
        steps.push(Step::Data { offset: 0, len: 100, psh: true });
        steps.push(Step::Read(usize::MAX));
    }
    let counts = run_side_by_side(&steps).expect("the two paths agree");
    // Both connections, after at least the ACK, the reply and the read of each round trip.
    assert!(counts.nothing_to_send >= 2 * 3 * 19, "nothing_to_send only {} times", counts.nothing_to_send);
}
