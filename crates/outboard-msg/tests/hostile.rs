//! Hostile and malformed input: an endpoint fed frames from a peer that
//! lies in every field never panics, answers only with well-formed frames,
//! counts what it drops, and keeps its mailboxes within their budgets.
//! (`fuzz/fuzz_targets/msg_endpoint.rs` drives the same checks with libFuzzer.)

use outboard_msg::{Config, Endpoint};
use outboard_time::{Duration, Instant};
use outboard_wire::msg::{MsgKind, MsgPacket, MsgRepr, HEADER_LEN};
use proptest::prelude::*;
use std::net::SocketAddr;

fn endpoint() -> Endpoint {
    let cfg = Config { mailbox_capacity: 64 << 10, ..Config::default() };
    let mut ep = Endpoint::new(cfg, 7);
    ep.bind(Some(1), Some("one")).unwrap();
    ep.bind(Some(2), None).unwrap();
    ep
}

/// A frame with a valid header whose fields are whatever the strategy drew.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    (
        1u8..=11,
        (0u32..4, 0u32..4, prop_oneof![Just(0u32), Just(7), any::<u32>()], prop_oneof![Just(0u32), Just(7), any::<u32>()]),
        (0u64..40, 0u64..4, any::<u64>(), prop_oneof![Just(0u32), 0u32..300, any::<u32>()]),
        (0u32..4000, 0u32..5000),
        proptest::collection::vec(any::<u8>(), 0..1600),
    )
        .prop_map(|(kind, (src_mb, dst_mb, src_s, dst_s), (id, ack, sack, credit), (offset, total), payload)| {
            let repr = MsgRepr {
                src_mailbox: src_mb,
                dst_mailbox: dst_mb,
                src_session: src_s,
                dst_session: dst_s,
                id,
                ack,
                sack,
                credit,
                offset,
                total_len: total,
                status: u32::from(kind % 5),
                ..MsgRepr::new(MsgKind::from_u8(kind).unwrap())
            };
            let mut b = vec![0u8; HEADER_LEN + payload.len()];
            repr.emit(&mut b).unwrap();
            b[HEADER_LEN..].copy_from_slice(&payload);
            b
        })
}

fn input() -> impl Strategy<Value = Vec<(u8, Vec<u8>)>> {
    proptest::collection::vec(
        (0u8..4, prop_oneof![3 => frame(), 1 => proptest::collection::vec(any::<u8>(), 0..200)]),
        1..120,
    )
}

fn check_outputs(ep: &mut Endpoint) -> Result<(), TestCaseError> {
    let mut buf = vec![0u8; 2048];
    while let Some((_, n)) = ep.poll_transmit(&mut buf) {
        let p = MsgPacket::new_checked(&buf[..n]).map_err(|e| TestCaseError::fail(format!("sent a bad frame: {e}")))?;
        MsgRepr::parse(&p).map_err(|e| TestCaseError::fail(format!("sent a bad frame: {e}")))?;
    }
    while ep.poll_event().is_some() {}
    for mb in ep.mailboxes() {
        // Queued and held bytes are counted with a 64-byte overhead per message.
        let used = mb.queued_bytes + mb.held_bytes + mb.reserved_bytes;
        prop_assert!(used <= mb.capacity + 64 * (mb.queued_messages + 1), "over budget: {mb:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn lying_peers_cannot_break_an_endpoint(frames in input()) {
        let mut ep = endpoint();
        let peers: [SocketAddr; 4] = ["10.0.0.2:7373", "10.0.0.3:7373", "[fd00::2]:7373", "10.0.0.2:9"].map(|s| s.parse().unwrap());
        let mut now = Instant::ZERO;
        for (i, (who, bytes)) in frames.iter().enumerate() {
            ep.handle_datagram(now, peers[*who as usize], bytes);
            if i % 7 == 0 {
                now += Duration::from_millis(3);
                if ep.poll_timeout().is_some_and(|t| t <= now) {
                    ep.handle_timeout(now);
                }
                while ep.recv(now, 1).is_some() {}
            }
            check_outputs(&mut ep)?;
        }
        // Time passes: every partial state expires without a panic.
        for _ in 0..50 {
            now += Duration::from_secs(1);
            ep.handle_timeout(now);
            check_outputs(&mut ep)?;
        }
        let s = ep.stats();
        prop_assert_eq!(s.frames_in, frames.len() as u64);
    }
}

#[test]
fn garbage_is_counted_as_malformed_and_other_versions_as_unsupported() {
    let mut ep = endpoint();
    let src: SocketAddr = "10.0.0.2:7373".parse().unwrap();
    ep.handle_datagram(Instant::ZERO, src, b"GET / HTTP/1.1\r\n");
    ep.handle_datagram(Instant::ZERO, src, &[0x4f, 0x42, 1, 2]);
    let mut b = vec![0u8; HEADER_LEN];
    MsgRepr::new(MsgKind::Datagram).emit(&mut b).unwrap();
    b[2] = 9;
    ep.handle_datagram(Instant::ZERO, src, &b);
    let s = ep.stats();
    assert_eq!((s.drop_malformed, s.drop_unsupported), (2, 1), "{s:?}");
    assert!(ep.poll_transmit(&mut [0u8; 2048]).is_none(), "garbage is never answered");
}
