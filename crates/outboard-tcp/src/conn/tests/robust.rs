//! Hostile input: arbitrary segments (near the windows and anywhere), timer
//! firings and application calls never panic, never make `poll_transmit`
//! spin, and keep the sequence-space invariants.

use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// A segment relative to our RCV.NXT / SND.UNA (deltas), flags, window, payload length, options.
    Near { dseq: i32, dack: i32, flags: u8, window: u16, len: usize, ts: Option<(u32, u32)>, sack: Vec<(i32, i32)> },
    /// A segment with fully random numbers.
    Wild { seq: u32, ack: u32, flags: u8, window: u16, len: usize },
    Advance(u32),
    Send(usize),
    Recv(usize),
    Icmp(u16, u8),
    Close,
    Shutdown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (-3000i32..70_000, -70_000i32..3000, any::<u8>(), any::<u16>(), 0usize..3000,
              proptest::option::of((any::<u32>(), any::<u32>())),
              proptest::collection::vec((-2000i32..70_000, -2000i32..70_000), 0..4))
            .prop_map(|(dseq, dack, flags, window, len, ts, sack)| Op::Near { dseq, dack, flags, window, len, ts, sack }),
        2 => (any::<u32>(), any::<u32>(), any::<u8>(), any::<u16>(), 0usize..2000)
            .prop_map(|(seq, ack, flags, window, len)| Op::Wild { seq, ack, flags, window, len }),
        2 => (0u32..5_000).prop_map(Op::Advance),
        2 => (0usize..20_000).prop_map(Op::Send),
        2 => (0usize..20_000).prop_map(Op::Recv),
        1 => (any::<u16>(), any::<u8>()).prop_map(|(m, c)| Op::Icmp(m, c)),
        1 => Just(Op::Close),
        1 => Just(Op::Shutdown),
    ]
}

fn check_invariants(h: &Harness) {
    let c = &h.c;
    assert!(c.snd_una <= c.snd_nxt, "SND.UNA {:?} > SND.NXT {:?}", c.snd_una, c.snd_nxt);
    assert!(c.snd_nxt <= c.snd_max, "SND.NXT {:?} > SND.MAX {:?}", c.snd_nxt, c.snd_max);
    assert!(c.snd_buf_seq <= c.snd_una + 1);
    assert!(c.recv_buf.len() <= c.recv_buf.capacity());
    assert!(c.assembler.range_count() <= c.cfg.max_ooo_ranges.max(1));
}

fn run(cfg: &Config, ops: Vec<Op>) {
    let mut h = Harness::established_with(
        cfg,
        TcpOptions {
            mss: Some(1000),
            window_scale: Some(3),
            sack_permitted: true,
            timestamps: Some((100, 10_001)),
            ..TcpOptions::default()
        },
    );
    let mut buf = vec![0u8; 20_000];
    let data = vec![0x5au8; 20_000];
    for op in ops {
        match op {
            Op::Near { dseq, dack, flags, window, len, ts, sack: blocks } => {
                let mut s = seg(TcpFlags(flags), 0, 0);
                s.seq = SeqNumber(h.c.rcv_nxt.0.wrapping_add(dseq as u32));
                s.ack = SeqNumber(h.c.snd_una.0.wrapping_add(dack as u32));
                s.window = window;
                s.options.timestamps = ts;
                for (l, r) in blocks {
                    s.options.sack.push(h.c.snd_una + l.max(0) as usize, h.c.snd_una + r.max(0) as usize);
                }
                h.send(&s, &data[..len]);
            }
            Op::Wild { seq, ack, flags, window, len } => {
                let mut s = seg(TcpFlags(flags), seq, ack);
                s.window = window;
                h.send(&s, &data[..len]);
            }
            Op::Advance(ms) => h.advance(Duration::from_millis(u64::from(ms))),
            Op::Send(n) => {
                let _ = h.c.send(&data[..n]);
            }
            Op::Recv(n) => {
                let _ = h.c.recv(&mut buf[..n]);
            }
            Op::Icmp(mtu, code) => {
                h.c.handle_icmp(h.now, IcmpError::FragmentationNeeded { mtu });
                h.c.handle_icmp(h.now, IcmpError::Unreachable { code });
            }
            Op::Close => h.c.close(),
            Op::Shutdown => h.c.shutdown_write(),
        }
        let out = h.recv();
        for s in &out {
            assert!(s.len() <= h.c.send_mss.max(1000), "oversized segment {}", s.len());
        }
        h.events();
        check_invariants(&h);
        if let Some(t) = h.c.poll_timeout() {
            assert!(t >= h.now || h.c.state() != State::Closed);
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_segments_never_panic_full_options(ops in proptest::collection::vec(op(), 1..80)) {
        let cfg = Config { window_scaling: true, sack: true, timestamps: true, recv_buffer: 100_000, send_buffer: 50_000, max_ooo_ranges: 4, ..plain_cfg() };
        run(&cfg, ops);
    }

    #[test]
    fn arbitrary_segments_never_panic_plain(ops in proptest::collection::vec(op(), 1..80)) {
        let cfg = Config { recv_buffer: 3_000, send_buffer: 5_000, nodelay: true, ..plain_cfg() };
        run(&cfg, ops);
    }
}
