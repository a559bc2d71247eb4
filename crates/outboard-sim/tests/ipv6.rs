//! TCP over IPv6 in the simulator: the fault matrix's faults, fewer seeds
//! (the IPv4 matrix covers the TCP core; this covers the IPv6 paths under
//! the same faults: neighbour discovery instead of ARP, the IPv6 pseudo-header
//! on every segment, the IPv6 MSS), byte-exact and deterministic.

mod common;

use common::{assert_all_ok, env_u64, run_matrix};
use outboard_sim::{run_transfer, run_transfer_pcap, Direction, TransferConfig};

fn v6(seed: u64, cc: outboard_tcp::CcKind, faults: impl Fn(&mut TransferConfig)) -> TransferConfig {
    let mut cfg = TransferConfig {
        bytes: env_u64("OUTBOARD_SIM_MIB", 8) << 20,
        seed,
        cc,
        direction: Direction::Both,
        bandwidth_mbit: 100.0,
        delay_ms: 1.0,
        ipv6: true,
        ..TransferConfig::default()
    };
    faults(&mut cfg);
    cfg
}

#[test]
fn ipv6_transfers_are_byte_exact_under_every_fault() {
    let seeds = env_u64("OUTBOARD_SIM_SEEDS", 4);
    for (name, f) in [
        // Clean means no loss: the bottleneck queue holds a full receive
        // window of frames (256 KiB of payload is about 280 KiB of IPv6
        // frames, over the default 256 KiB queue, so a sender using the whole
        // window could tail-drop in slow start).
        ("clean", (|c: &mut TransferConfig| c.queue_bytes = 512 * 1024) as fn(&mut TransferConfig)),
        ("loss 2%", |c| c.loss = 0.02),
        ("reorder 10%", |c| {
            c.reorder = 0.10;
            c.jitter_ms = 0.5;
        }),
        ("duplicate 2%", |c| c.duplicate = 0.02),
        ("corrupt 0.1%", |c| c.corrupt = 0.001),
        ("all at once", |c| {
            c.loss = 0.01;
            c.duplicate = 0.01;
            c.reorder = 0.05;
            c.corrupt = 0.001;
        }),
    ] {
        let reports = run_matrix(1..seeds + 1, |seed, cc| v6(seed, cc, f));
        assert_all_ok(&format!("IPv6 {name}"), &reports);
        if name == "clean" {
            for r in &reports {
                assert_eq!(r.retransmits, 0, "{}", r.summary());
            }
        }
    }
}

#[test]
fn an_ipv6_run_replays_from_its_seed() {
    let cfg = v6(7, outboard_tcp::CcKind::Cubic, |c| {
        c.loss = 0.01;
        c.reorder = 0.05;
        c.bytes = 2 << 20;
    });
    let (a, b) = (run_transfer(&cfg), run_transfer(&cfg));
    assert!(a.ok, "{}", a.summary());
    assert_eq!(a.summary(), b.summary());
    // The frames really are IPv6: pcap records (16-byte header after the
    // 24-byte file header) carrying EtherType 0x86dd, none carrying IPv4.
    let (_, pcap) = run_transfer_pcap(&TransferConfig { bytes: 64 << 10, ..cfg }, &mut |_| {});
    let (mut v6, mut v4, mut at) = (0, 0, 24);
    while at + 16 <= pcap.len() {
        let incl = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        let frame = &pcap[at + 16..at + 16 + incl];
        match (frame[12], frame[13]) {
            (0x86, 0xdd) => v6 += 1,
            (0x08, 0x00) => v4 += 1,
            _ => {}
        }
        at += 16 + incl;
    }
    assert!(v6 > 50 && v4 == 0, "{v6} IPv6 frames, {v4} IPv4");
}
