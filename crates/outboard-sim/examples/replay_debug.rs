//! Scratch: replays one config and writes its pcap (diagnostics).
use outboard_sim::{run_transfer_pcap, Direction, TransferConfig};
use outboard_tcp::CcKind;

fn main() {
    let cfg = TransferConfig { bytes: 525732, loss: 0.148586047148607, duplicate: 0.10935015080778034, reorder: 0.14486041962271337, corrupt: 0.013024110560842272, delay_ms: 15.774314024317231, jitter_ms: 0.6115280321542444, bandwidth_mbit: 10.0, seed: 5988031265139613755, cc: CcKind::Cubic, direction: Direction::Both, mss: 536, mtu: 576, send_buffer: 4096, recv_buffer: 4096, time_limit_s: 3600.0, ..TransferConfig::default() };
    let (r, pcap) = run_transfer_pcap(&cfg, &mut |_| {});
    println!("{}", r.summary());
    println!("{}", serde_json::to_string_pretty(&r.directions).unwrap());
    std::fs::write("/tmp/h5_replay.pcap", pcap).unwrap();
}
