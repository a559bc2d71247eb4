//! Memory held per connection: ring storage exists only while it can hold
//! data, so half-open and TIME-WAIT connections cost a struct, not two buffers,
//! while the windows on the wire still follow the configured buffer sizes.

use super::*;
use crate::ring::MIN_STORAGE;

/// Full options and the default 256 KiB buffers: what a listener really uses.
fn full_cfg() -> Config {
    Config::default()
}

fn syn_with_options() -> TcpRepr {
    let mut syn = seg(SYN, PEER_ISS, 0);
    syn.options = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some((77, 0)),
        ..TcpOptions::default()
    };
    syn
}

#[test]
fn syn_received_connection_holds_under_4_kib() {
    let mut h = Harness::accept(&full_cfg(), &syn_with_options());
    assert_eq!(h.c.state(), State::SynReceived);
    let synack = h.recv_one();
    assert_eq!(synack.flags(), SYN | ACK);
    assert_eq!(h.c.buffer_bytes(), (0, 0));
    let m = h.c.memory_in_use();
    assert!(m < 4096, "SYN-RECEIVED holds {m} bytes");
    assert!(m >= std::mem::size_of::<Connection>());
}

#[test]
fn syn_ack_window_and_scale_still_follow_the_configured_receive_buffer() {
    // RFC 7323 §2.2: the SYN-ACK window is unscaled; the shift is the smallest
    // covering max(256 KiB, 6 MiB) (`offered_wscale`). Lazy storage must change neither.
    let mut h = Harness::accept(&full_cfg(), &syn_with_options());
    let synack = h.recv_one();
    assert_eq!(synack.repr.window, 65535);
    assert_eq!(synack.repr.options.window_scale, Some(7));
    // The first window after the handshake, scaled, covers the whole buffer.
    let mut ack = seg(ACK, PEER_ISS + 1, ISS + 1);
    ack.options.timestamps = Some((78, synack.repr.options.timestamps.map_or(0, |t| t.0)));
    h.send(&ack, b"x");
    assert_eq!(h.c.state(), State::Established);
    let a = h.recv_one();
    assert!(usize::from(a.repr.window) << 7 >= 256 * 1024 - 128, "window {} << 7", a.repr.window);
}

#[test]
fn syn_sent_holds_no_ring_storage_until_the_application_sends() {
    let mut h = Harness::connect(&plain_cfg());
    h.recv_one();
    assert_eq!(h.c.buffer_bytes(), (0, 0));
    assert!(h.c.memory_in_use() < 4096);
    // Data before the handshake is still accepted into the send queue.
    assert_eq!(h.c.send(b"early"), Ok(5));
    assert_eq!(h.c.buffer_bytes(), (MIN_STORAGE, 0));
    h.send(&seg(SYN | ACK, PEER_ISS, ISS + 1), b"");
    let out = h.recv();
    assert!(out.iter().any(|o| o.payload == b"early"), "{out:#?}");
}

#[test]
fn transfer_allocates_each_ring_and_memory_counts_them() {
    let mut h = Harness::established(&plain_cfg());
    assert_eq!(h.c.buffer_bytes(), (0, 0), "an idle ESTABLISHED connection holds no ring");
    let idle = h.c.memory_in_use();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"request");
    assert_eq!(h.c.buffer_bytes(), (0, MIN_STORAGE));
    h.c.send(b"response").unwrap();
    assert_eq!(h.c.buffer_bytes(), (MIN_STORAGE, MIN_STORAGE));
    assert!(h.c.memory_in_use() >= idle + 2 * MIN_STORAGE);
    assert_eq!(h.c.stats().memory, h.c.memory_in_use());
    h.recv();
    // Draining does not free: the connection can still receive and send.
    h.send(&seg(ACK, PEER_ISS + 8, ISS + 9), b"");
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Ok(7));
    assert_eq!(h.c.buffer_bytes(), (MIN_STORAGE, MIN_STORAGE));
}

/// ESTABLISHED, 7 bytes each way exchanged and acknowledged, all read.
fn after_exchange() -> Harness {
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"request");
    h.c.send(b"reply!!").unwrap();
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 8, ISS + 8), b"");
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Ok(7));
    assert_eq!(h.c.buffer_bytes(), (MIN_STORAGE, MIN_STORAGE));
    h
}

#[test]
fn time_wait_frees_both_rings() {
    let mut h = after_exchange();
    h.c.close();
    assert_eq!(h.recv_one().flags(), FIN | ACK);
    // Nothing more can be queued and all is acknowledged: the send ring goes now.
    h.send(&seg(ACK, PEER_ISS + 8, ISS + 9), b"");
    assert_eq!(h.c.state(), State::FinWait2);
    assert_eq!(h.c.buffer_bytes().0, 0);
    h.send(&seg(FIN | ACK, PEER_ISS + 8, ISS + 9), b"");
    assert_eq!(h.c.state(), State::TimeWait);
    assert_eq!(h.c.buffer_bytes(), (0, 0));
    assert!(h.c.memory_in_use() < 4096, "TIME-WAIT holds {}", h.c.memory_in_use());
    // The ACK of the FIN keeps the right edge advertised before (RFC 7323
    // §2.4: it never moves left): 64 KiB (capped at 65535) from PEER_ISS + 1,
    // now 8 sequence numbers on. Freed storage does not shrink it.
    let a = h.recv_one();
    assert_eq!((a.ack(), a.repr.window), (PEER_ISS + 9, 65535 - 8));
    // A retransmitted FIN is answered the same way, without allocating.
    h.send(&seg(FIN | ACK, PEER_ISS + 8, ISS + 9), b"");
    assert_eq!(h.recv_one().repr.window, 65535 - 8);
    assert_eq!(h.c.buffer_bytes(), (0, 0));
}

#[test]
fn closing_and_time_wait_via_simultaneous_close_free_both_rings() {
    let mut h = after_exchange();
    h.c.shutdown_write();
    assert_eq!(h.recv_one().flags(), FIN | ACK);
    // The peer's FIN crosses ours: CLOSING, then its ACK of our FIN: TIME-WAIT.
    h.send(&seg(FIN | ACK, PEER_ISS + 8, ISS + 8), b"");
    assert_eq!(h.c.state(), State::Closing);
    assert_eq!(h.c.buffer_bytes().1, 0, "the peer's FIN ends what can arrive");
    h.send(&seg(ACK, PEER_ISS + 9, ISS + 9), b"");
    assert_eq!(h.c.state(), State::TimeWait);
    assert_eq!(h.c.buffer_bytes(), (0, 0));
}

#[test]
fn unread_bytes_survive_time_wait_and_are_freed_once_read() {
    let mut h = Harness::established(&plain_cfg());
    h.c.shutdown_write();
    h.recv_one();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 2), b"");
    h.send(&seg(FIN | ACK, PEER_ISS + 1, ISS + 2), b"last words");
    assert_eq!(h.c.state(), State::TimeWait);
    assert_eq!(h.c.buffer_bytes(), (0, MIN_STORAGE), "unread data is kept");
    let mut buf = [0u8; 4];
    assert_eq!(h.c.recv(&mut buf), Ok(4));
    assert_eq!(h.c.buffer_bytes().1, MIN_STORAGE, "still six bytes to read");
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Ok(6));
    assert_eq!(&buf[..6], b" words");
    assert_eq!(h.c.buffer_bytes(), (0, 0));
    assert_eq!(h.c.recv(&mut buf), Ok(0), "end of stream after the release");
}

#[test]
fn close_wait_frees_the_receive_ring_but_keeps_sending() {
    let mut h = after_exchange();
    h.send(&seg(FIN | ACK, PEER_ISS + 8, ISS + 8), b"");
    assert_eq!(h.c.state(), State::CloseWait);
    assert_eq!(h.c.buffer_bytes(), (MIN_STORAGE, 0));
    // The application may still answer.
    assert_eq!(h.c.send(b"bye"), Ok(3));
    let out = h.recv();
    assert!(out.iter().any(|o| o.payload == b"bye"));
    assert_eq!(h.c.buffer_bytes().0, MIN_STORAGE);
    h.c.close();
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 9, ISS + 12), b"");
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.c.buffer_bytes(), (0, 0));
}

#[test]
fn rfc9293_reset_flushes_the_send_queue_storage() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(&[1u8; 5000]).unwrap();
    h.recv();
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"unread");
    assert_eq!(h.c.buffer_bytes(), (2 * MIN_STORAGE, MIN_STORAGE), "5000 bytes took the storage to 8 KiB");
    // §3.10.7.4: on RST "all segment queues should be flushed".
    h.send(&seg(RST, PEER_ISS + 7, 0), b"");
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.c.buffer_bytes().0, 0);
    assert_eq!(h.c.stats().send_queue, 0);
    // What was received stays readable, as before the change.
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Ok(6));
    assert_eq!(h.c.buffer_bytes(), (0, 0));
}

#[test]
fn abort_frees_both_rings() {
    let mut h = Harness::established(&plain_cfg());
    h.c.send(b"pending").unwrap();
    h.c.abort();
    assert_eq!(h.c.state(), State::Closed);
    assert_eq!(h.c.buffer_bytes(), (0, 0));
    assert_eq!(h.recv_one().flags(), RST | ACK);
}

#[test]
fn cookie_connection_allocates_nothing_until_data() {
    let ack = seg(ACK, PEER_ISS + 1, ISS + 1);
    let c = Connection::from_cookie(&full_cfg(), tuple(), SeqNumber(ISS), SeqNumber(PEER_ISS), 1460, &ack, Instant::from_millis(1));
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.buffer_bytes(), (0, 0));
    assert!(c.memory_in_use() < 4096);
}

#[test]
fn out_of_order_data_is_kept_while_the_queue_is_empty() {
    // Parked out-of-order bytes live in the receive ring's free space: an
    // empty queue must not release them.
    let mut h = Harness::established(&plain_cfg());
    h.send(&seg(ACK, PEER_ISS + 4, ISS + 1), b"def");
    assert_eq!(h.c.recv_available(), 0);
    h.send(&seg(ACK, PEER_ISS + 1, ISS + 1), b"abc");
    let mut buf = [0u8; 16];
    assert_eq!(h.c.recv(&mut buf), Ok(6));
    assert_eq!(&buf[..6], b"abcdef");
}

/// Steps of the random conversation in `release_never_loses_bytes_and_frees_when_idle`.
#[derive(Debug, Clone)]
enum Step {
    /// The peer sends `len` bytes of its stream starting `skip` bytes past
    /// what we acknowledged (a gap when `skip > 0`), acknowledging `ack_frac`
    /// quarters of what we sent.
    PeerData { skip: usize, len: usize, ack_frac: u32 },
    /// The peer (re)sends everything unacknowledged with its FIN after it.
    PeerFin,
    /// The peer acknowledges everything we sent.
    PeerAckAll,
    AppSend(usize),
    AppRecv(usize),
    AppShutdown,
    AppClose,
    Wait(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (prop_oneof![3 => Just(0usize), 1 => 1usize..2000], 1usize..1500, 0u32..5)
            .prop_map(|(skip, len, ack_frac)| Step::PeerData { skip, len, ack_frac }),
        1 => Just(Step::PeerFin),
        2 => Just(Step::PeerAckAll),
        2 => (1usize..3000).prop_map(Step::AppSend),
        3 => (1usize..3000).prop_map(Step::AppRecv),
        1 => Just(Step::AppShutdown),
        1 => Just(Step::AppClose),
        1 => (1u64..3000).prop_map(Step::Wait),
    ]
}

/// Byte `i` of the peer's stream.
fn peer_byte(i: usize) -> u8 {
    (i * 7 % 251) as u8
}

use proptest::prelude::*;

proptest! {
    /// Whatever the peer and the application do, each ring is either absent
    /// or fully allocated; nothing is freed while it may still be read (every
    /// byte read is the peer's stream, in order); a connection in TIME-WAIT or
    /// CLOSED holds no send storage, and once the peer's FIN is in and all is
    /// read, no receive storage.
    #[test]
    fn release_never_loses_bytes_and_frees_when_idle(steps in proptest::collection::vec(step(), 1..80)) {
        let cfg = Config { recv_buffer: 4096, send_buffer: 4096, ..plain_cfg() };
        let mut h = Harness::established(&cfg);
        // Highest ACK we sent (the peer resends from there) and highest
        // sequence number we sent.
        let mut acked = PEER_ISS + 1;
        let mut our_max = ISS + 1;
        // Peer stream: highest offset sent, and where its FIN sits once sent.
        let mut high = 0usize;
        let mut fin_at: Option<usize> = None;
        let mut read = 0usize;
        for s in steps {
            let low = ((acked - PEER_ISS - 1) as usize).min(fin_at.unwrap_or(usize::MAX));
            match s {
                Step::PeerData { skip, len, ack_frac } => {
                    let start = low + skip;
                    let end = fin_at.map_or(start + len, |f| (start + len).min(f));
                    if start < end {
                        let data: Vec<u8> = (start..end).map(peer_byte).collect();
                        let ack = ISS + 1 + (our_max - ISS - 1) * ack_frac.min(4) / 4;
                        h.send(&seg(ACK, PEER_ISS + 1 + start as u32, ack), &data);
                        high = high.max(end);
                    }
                }
                Step::PeerFin => {
                    let f = *fin_at.get_or_insert(high);
                    let data: Vec<u8> = (low..f).map(peer_byte).collect();
                    h.send(&seg(FIN | ACK, PEER_ISS + 1 + low as u32, our_max), &data);
                }
                Step::PeerAckAll => h.send(&seg(ACK, acked, our_max), b""),
                Step::AppSend(n) => {
                    let _ = h.c.send(&vec![9u8; n]);
                }
                Step::AppRecv(n) => {
                    let mut buf = vec![0u8; n];
                    if let Ok(got) = h.c.recv(&mut buf) {
                        for (k, &b) in buf[..got].iter().enumerate() {
                            prop_assert_eq!(b, peer_byte(read + k), "stream byte {}", read + k);
                        }
                        read += got;
                    }
                }
                Step::AppShutdown => h.c.shutdown_write(),
                Step::AppClose => h.c.close(),
                Step::Wait(ms) => h.advance(Duration::from_millis(ms)),
            }
            for o in h.recv() {
                if o.flags().rst() {
                    continue;
                }
                our_max = our_max.max(o.seq() + o.len() as u32 + u32::from(o.flags().fin()));
                if o.flags().ack() {
                    acked = acked.max(o.ack());
                }
            }
            let (sb, rb) = h.c.buffer_bytes();
            prop_assert!(sb == 0 || sb == 4096, "send ring {}", sb);
            prop_assert!(rb == 0 || rb == 4096, "recv ring {}", rb);
            let st = h.c.state();
            if matches!(st, State::TimeWait | State::Closed) {
                prop_assert_eq!(sb, 0, "send storage in {:?}", st);
            }
            if h.c.recv_available() == 0
                && matches!(st, State::TimeWait | State::Closed | State::CloseWait | State::LastAck | State::Closing)
            {
                prop_assert_eq!(rb, 0, "receive storage in {:?} with nothing to read", st);
            }
            prop_assert!(h.c.memory_in_use() - sb - rb < 4096);
        }
    }
}
