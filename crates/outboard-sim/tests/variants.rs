//! The transfer under settings away from the defaults: small MTU, tiny
//! buffers, long fat pipe, unlimited link. Each must deliver byte-exact.

use outboard_sim::{run_transfer, Direction, TransferConfig};
use outboard_tcp::CcKind;

fn check(name: &str, cfg: TransferConfig) {
    for cc in [CcKind::NewReno, CcKind::Cubic] {
        let r = run_transfer(&TransferConfig { cc, ..cfg.clone() });
        eprintln!(
            "{name} {cc:?}: {:.3} s, {:.1} Mbit/s, {} retransmits",
            r.virtual_seconds, r.goodput_mbit, r.retransmits
        );
        assert!(r.ok, "{name}: {}", r.summary());
        for d in &r.directions {
            assert!(
                d.sender.send_mss as u64 <= u64::from(cfg.mss),
                "{name}: sender MSS {} above ours",
                d.sender.send_mss
            );
        }
    }
}

#[test]
fn small_mtu_and_mss_deliver_byte_exact() {
    check(
        "mtu 576",
        TransferConfig {
            bytes: 1 << 20,
            mtu: 576,
            mss: 536,
            loss: 0.01,
            direction: Direction::Both,
            ..TransferConfig::default()
        },
    );
}

#[test]
fn tiny_buffers_deliver_byte_exact() {
    check(
        "8 KiB buffers",
        TransferConfig {
            bytes: 1 << 20,
            send_buffer: 8 * 1024,
            recv_buffer: 8 * 1024,
            loss: 0.01,
            reorder: 0.05,
            direction: Direction::Both,
            ..TransferConfig::default()
        },
    );
}

#[test]
fn long_fat_pipe_fills_with_window_scaling() {
    // 1 Gbit/s, 50 ms RTT (BDP 6.25 MB): the window must grow far past the
    // 64 KiB an unscaled window allows (RFC 7323 §2). The 8 MiB receive window
    // fits in BDP + queue, so slow start cannot overflow the queue and the
    // run measures window growth, not loss recovery.
    let cfg = TransferConfig {
        bytes: 64 << 20,
        bandwidth_mbit: 1000.0,
        delay_ms: 25.0,
        send_buffer: 8 << 20,
        recv_buffer: 8 << 20,
        queue_bytes: 8 << 20,
        ..TransferConfig::default()
    };
    check("long fat pipe", cfg.clone());
    let r = run_transfer(&cfg);
    assert!(
        r.directions[0].sender.max_cwnd > 4 << 20,
        "cwnd stayed at {}",
        r.directions[0].sender.max_cwnd
    );
    assert_eq!(r.retransmits, 0, "{}", r.summary());
    // Ideal: ~0.55 s of slow start plus 0.54 s at line rate for 64 MiB = ~490 Mbit/s.
    assert!(
        r.goodput_mbit > 400.0,
        "only {:.1} Mbit/s on a 1 Gbit/s, 50 ms path",
        r.goodput_mbit
    );
}

#[test]
fn unlimited_zero_delay_link_finishes_at_once() {
    let r = run_transfer(&TransferConfig {
        bytes: 4 << 20,
        bandwidth_mbit: 0.0,
        delay_ms: 0.0,
        direction: Direction::Both,
        ..TransferConfig::default()
    });
    assert!(r.ok, "{}", r.summary());
    assert_eq!(
        r.virtual_seconds, 0.0,
        "no delay and no serialisation: no virtual time passes"
    );
}
