//! A message-protocol endpoint fed a stream of frames from lying peers: the
//! input is cut into frames by a length byte, each from one of four sources,
//! with time moving between them. Nothing panics, everything the endpoint
//! sends parses, and no mailbox goes over its budget.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_msg::{Config, Endpoint};
use outboard_time::{Duration, Instant};
use outboard_wire::msg::{MsgPacket, MsgRepr};
use std::net::SocketAddr;

fuzz_target!(|data: &[u8]| {
    let cfg = Config { mailbox_capacity: 64 << 10, ..Config::default() };
    let mut ep = Endpoint::new(cfg, 7);
    ep.bind(Some(1), Some("one")).unwrap();
    ep.bind(Some(2), None).unwrap();
    let peers: [SocketAddr; 4] =
        ["10.0.0.2:7373", "10.0.0.3:7373", "[fd00::2]:7373", "10.0.0.2:9"].map(|s| s.parse().unwrap());
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 2048];
    let mut rest = data;
    while rest.len() >= 2 {
        let (who, len) = (rest[0], usize::from(rest[1]) * 8);
        let frame = &rest[2..(2 + len).min(rest.len())];
        rest = &rest[(2 + len).min(rest.len())..];
        ep.handle_datagram(now, peers[usize::from(who & 3)], frame);
        if who & 0x80 != 0 {
            now += Duration::from_millis(u64::from(who & 0x7c));
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
            while ep.recv(now, 1).is_some() {}
        }
        while let Some((_, n)) = ep.poll_transmit(&mut buf) {
            let p = MsgPacket::new_checked(&buf[..n]).expect("a sent frame parses");
            MsgRepr::parse(&p).expect("a sent frame parses");
        }
        while ep.poll_event().is_some() {}
        for mb in ep.mailboxes() {
            assert!(mb.queued_bytes + mb.held_bytes + mb.reserved_bytes <= mb.capacity + 64 * (mb.queued_messages + 1));
        }
    }
    now += Duration::from_secs(60);
    ep.handle_timeout(now);
});
