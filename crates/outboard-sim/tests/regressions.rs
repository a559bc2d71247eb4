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
#[test]
#[ignore = "outboard-tcp: right-edge pure ACKs and segments ending at RCV.NXT are rejected with their ACK field (see doc)"]
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
