//! Failing seeds found by the simulator, each kept as a named test.

use outboard_sim::{run_transfer, Direction, TransferConfig};
use outboard_tcp::CcKind;

/// Found by tests/random_faults.rs with OUTBOARD_SIM_PROP_SEED=3: 4 KiB
/// windows, both directions, heavy loss. Each side has filled the other's
/// receive window, so its pure ACKs carry SEQ = RCV.NXT + RCV.WND of the
/// peer, and its RTO retransmission ends exactly at the peer's RCV.NXT. The
/// strict RFC 9293 §3.10.7.4 test rejects both (half-open window), and an
/// unacceptable segment's ACK field is dropped, so neither side ever learns
/// that its data was acknowledged: 60 s of mutual go-back-N until ETIMEDOUT.
/// Linux's `tcp_sequence` accepts `end_seq >= rcv_wup && seq <= rcv_nxt + wnd`.
/// Fixed: such segments' ACK fields are processed (the §3.10.7.4 "special
/// allowance"), see `Connection::ack_field_usable`.
#[test]
fn mutual_full_windows_do_not_deadlock_on_unacceptable_acks() {
    let cfg = TransferConfig {
        bytes: 525732,
        loss: 0.148586047148607,
        duplicate: 0.10935015080778034,
        reorder: 0.14486041962271337,
        corrupt: 0.013024110560842272,
        delay_ms: 15.774314024317231,
        jitter_ms: 0.6115280321542444,
        bandwidth_mbit: 10.0,
        seed: 5988031265139613755,
        cc: CcKind::Cubic,
        direction: Direction::Both,
        mss: 536,
        mtu: 576,
        send_buffer: 4096,
        recv_buffer: 4096,
        time_limit_s: 3600.0,
        ..TransferConfig::default()
    };
    let r = run_transfer(&cfg);
    assert!(r.ok, "{}", r.summary());
}

/// Found by tests/random_faults.rs with OUTBOARD_SIM_PROP_SEED=54: one way,
/// 4 KiB windows, 12 % loss, 3 % corruption. The sender (FIN-WAIT-1, 429
/// bytes queued: 428 in flight filling the peer's 428-byte window, 1 more
/// byte, then FIN) loses the ACKs of its last segment. From then on every
/// other RTO expiry retransmits nothing: `rto_events` goes up at 147.7,
/// 152.5, 171.7 and 248.5 s with `retransmits` unchanged, while the expiries
/// at 149.3, 158.9, 197.3 and 308.5 s do resend. Half the retransmission
/// budget is spent silently and the connection times out at 668 s, one byte
/// short. (Seen with `Network::set_tx_tap` and the connection's stats.)
/// Cause: sender SWS avoidance held back the window-trimmed go-back-N
/// resend until the persist timer overrode it. Fixed: data already sent once
/// is resent at once (SWS avoidance applies to new data).
#[test]
fn every_rto_expiry_retransmits_when_the_window_is_full() {
    let cfg = TransferConfig {
        bytes: 2591083,
        loss: 0.12170146927978397,
        duplicate: 0.022707891057452034,
        reorder: 0.2327121291274273,
        corrupt: 0.02912706745485392,
        delay_ms: 2.1813648216029473,
        jitter_ms: 1.8531952697308305,
        bandwidth_mbit: 10.0,
        seed: 12907530703861303089,
        mss: 536,
        mtu: 576,
        send_buffer: 4096,
        recv_buffer: 4096,
        time_limit_s: 3600.0,
        ..TransferConfig::default()
    };
    let r = run_transfer(&cfg);
    assert!(r.ok, "{}", r.summary());
}
