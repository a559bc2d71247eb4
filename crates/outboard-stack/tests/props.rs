//! Property tests: no input from the network makes the stack panic, and
//! whatever arrives, memory stays bounded.
mod common;

use common::*;
use outboard_stack::Stack;
use outboard_wire::ipv4::IpProtocol;
use outboard_wire::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
use proptest::prelude::*;

/// A stack with something listening on every protocol.
fn busy_stack() -> Stack {
    let mut s = Stack::new(cfg(MAC_A, IP_A, 1), t(0));
    teach_arp(&mut s, t(0), MAC_PEER, IP_PEER);
    s.tcp_listen(80, 4).unwrap();
    s.udp_bind(53).unwrap();
    s
}

/// Valid frames of every kind the stack handles, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let syn = TcpRepr {
        src_port: 4000,
        dst_port: 80,
        seq: SeqNumber(1),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 1000,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            window_scale: Some(3),
            sack_permitted: true,
            timestamps: Some((1, 0)),
            ..TcpOptions::default()
        },
    };
    let mut frag = ip_repr(IP_PEER, IP_A, IpProtocol::Udp, 16);
    frag.more_frags = true;
    let echo = icmp_bytes(&outboard_wire::icmpv4::Icmpv4Repr::EchoRequest {
        ident: 1,
        seq_no: 2,
        data: b"abcdefgh",
    });
    vec![
        arp_frame(
            outboard_wire::arp::ArpOperation::Request,
            MAC_PEER,
            IP_PEER,
            [0; 6],
            IP_A,
            [0xff; 6],
        ),
        udp_frame(IP_PEER, IP_A, 1000, 53, b"payload", MAC_A),
        udp_frame(IP_PEER, IP_A, 1000, 54, b"closed", MAC_A),
        tcp_frame(IP_PEER, IP_A, &syn, &[], MAC_A, MAC_PEER),
        tcp_frame(
            IP_PEER,
            IP_A,
            &TcpRepr {
                flags: TcpFlags::ACK,
                ack: SeqNumber(9),
                ..syn
            },
            b"data",
            MAC_A,
            MAC_PEER,
        ),
        ip_frame(MAC_A, MAC_PEER, &frag, &[0u8; 16]),
        ip_frame(
            MAC_A,
            MAC_PEER,
            &ip_repr(IP_PEER, IP_A, IpProtocol::Icmp, echo.len()),
            &echo,
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_into_receive_frame_never_panic(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1600), 1..8)) {
        let mut s = busy_stack();
        for (i, f) in frames.iter().enumerate() {
            s.receive_frame(t(i as u64), f);
            drain(&mut s, t(i as u64));
        }
        s.handle_timeout(t(100_000));
        drain(&mut s, t(100_000));
    }

    #[test]
    fn mutated_valid_frames_never_panic_and_memory_stays_bounded(
        edits in proptest::collection::vec((0usize..7, any::<u16>(), any::<u8>(), 0usize..64), 1..40),
    ) {
        let seeds = seeds();
        let mut s = busy_stack();
        for (step, (which, pos, byte, cut)) in edits.into_iter().enumerate() {
            let mut f = seeds[which].clone();
            let at = usize::from(pos) % f.len();
            // Keep the Ethernet header mostly intact so the mutation reaches deeper layers.
            if at >= 12 || byte & 1 == 0 {
                f[at] = byte;
            }
            if cut < 8 {
                f.truncate(f.len().saturating_sub(cut * 3));
            }
            let now = t(step as u64 * 10);
            s.receive_frame(now, &f);
            drain(&mut s, now);
            if let Some(d) = s.poll_timeout() {
                if d <= now { s.handle_timeout(now); }
            }
            prop_assert!(s.memory_in_use() < 8 * 1024 * 1024);
        }
    }
}

fn arb_flags() -> impl Strategy<Value = TcpFlags> {
    any::<u8>().prop_map(TcpFlags)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Well-checksummed segments with arbitrary header fields, against a
    /// listener and an established passive connection.
    #[test]
    fn arbitrary_valid_tcp_segments_never_panic(
        segs in proptest::collection::vec(
            (arb_flags(), any::<u32>(), any::<u32>(), any::<u16>(), proptest::option::of(any::<u16>()),
             proptest::option::of(any::<u8>()), any::<bool>(), 0usize..3000, any::<bool>()),
            1..30),
    ) {
        let mut s = busy_stack();
        // Establish one connection with a known ISN pair.
        let syn = TcpRepr {
            src_port: 4000, dst_port: 80, seq: SeqNumber(1000), ack: SeqNumber(0), flags: TcpFlags::SYN,
            window: 65535, urgent: 0, options: TcpOptions { mss: Some(1460), ..TcpOptions::default() },
        };
        s.receive_frame(t(1), &tcp_frame(IP_PEER, IP_A, &syn, &[], MAC_A, MAC_PEER));
        let out = drain(&mut s, t(1));
        let (_, seg) = ip_of(&out[0]).unwrap();
        let synack = TcpRepr::parse(&outboard_wire::TcpPacket::new_checked(&seg[..]).unwrap(), IP_A, IP_PEER, outboard_wire::RxChecksum::Verify).unwrap();
        let iss = synack.seq;
        let data = vec![0x5au8; 3000];
        for (i, (flags, dseq, dack, window, mss, ws, near, len, other_port)) in segs.into_iter().enumerate() {
            // Half the time stay near the live sequence space so the state machine engages.
            let (seq, ack) = if near {
                (SeqNumber(1001u32.wrapping_add(dseq % 70_000)), iss + 1 + (dack % 70_000) as usize)
            } else {
                (SeqNumber(dseq), SeqNumber(dack))
            };
            let repr = TcpRepr {
                src_port: if other_port { 4001 } else { 4000 }, dst_port: 80, seq, ack, flags, window, urgent: 0,
                options: TcpOptions { mss, window_scale: ws, ..TcpOptions::default() },
            };
            let now = t(2 + i as u64 * 50);
            s.receive_frame(now, &tcp_frame(IP_PEER, IP_A, &repr, &data[..len.min(1400)], MAC_A, MAC_PEER));
            drain(&mut s, now);
            if s.poll_timeout().is_some_and(|d| d <= now) { s.handle_timeout(now); }
        }
        s.handle_timeout(t(1_000_000));
        drain(&mut s, t(1_000_000));
    }
}

#[path = "support/frame_driver.rs"]
mod frame_driver;

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The fuzz target's driver: arbitrary programs of frames, timers and calls.
    #[test]
    fn arbitrary_programs_of_frames_and_calls_never_panic(data in proptest::collection::vec(any::<u8>(), 0..4000)) {
        frame_driver::run(&data);
    }
}
