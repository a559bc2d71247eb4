//! Same seed, same run, bit for bit; a different seed, a different run.

use outboard_sim::{run_transfer, Direction, TransferConfig};
use outboard_tcp::CcKind;

fn faulty(seed: u64, cc: CcKind) -> TransferConfig {
    TransferConfig {
        bytes: 2 << 20,
        seed,
        cc,
        direction: Direction::Both,
        loss: 0.02,
        duplicate: 0.01,
        reorder: 0.05,
        jitter_ms: 0.3,
        corrupt: 0.002,
        ..TransferConfig::default()
    }
}

#[test]
fn same_seed_gives_an_identical_report() {
    for cc in [CcKind::NewReno, CcKind::Cubic] {
        let a = run_transfer(&faulty(7, cc));
        let b = run_transfer(&faulty(7, cc));
        assert!(a.ok, "{}", a.summary());
        assert_eq!(a, b);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
    }
}

#[test]
fn different_seed_gives_a_different_run() {
    let a = run_transfer(&faulty(7, CcKind::NewReno));
    let b = run_transfer(&faulty(8, CcKind::NewReno));
    assert!(a.ok && b.ok, "{}\n{}", a.summary(), b.summary());
    assert_ne!(a.faults, b.faults);
    assert_eq!(a.seed, 7);
    assert_eq!(b.seed, 8);
}

#[test]
fn report_serialises_with_the_fields_the_cli_prints() {
    let r = run_transfer(&TransferConfig {
        bytes: 100_000,
        ..TransferConfig::default()
    });
    assert!(r.ok, "{}", r.summary());
    assert!(
        r.closed_at_s.is_some_and(|c| c >= r.virtual_seconds),
        "{:?}",
        r.closed_at_s
    );
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    for key in [
        "ok",
        "bytes",
        "sha256_match",
        "virtual_seconds",
        "goodput_mbit",
        "retransmits",
        "seed",
        "first_bad_offset",
        "faults",
        "directions",
        "closed_at_s",
    ] {
        assert!(v.get(key).is_some(), "report lacks {key}");
    }
    let d = &v["directions"][0];
    for key in [
        "sender",
        "receiver",
        "link",
        "sent_sha256",
        "received_sha256",
    ] {
        assert!(d.get(key).is_some(), "direction lacks {key}");
    }
    for key in [
        "cwnd",
        "srtt_us",
        "rto_events",
        "fast_retransmits",
        "max_sacked_bytes",
    ] {
        assert!(d["sender"].get(key).is_some(), "sender stats lack {key}");
    }
}

#[test]
fn pcap_capture_holds_every_delivered_frame_in_time_order() {
    let cfg = TransferConfig {
        bytes: 200_000,
        loss: 0.02,
        ..TransferConfig::default()
    };
    let (r, pcap) = outboard_sim::run_transfer_pcap(&cfg, &mut |_| {});
    assert!(r.ok, "{}", r.summary());
    assert_eq!(r, run_transfer(&cfg), "capturing must not change the run");
    let (mut at, mut records, mut last_ns) = (24usize, 0u64, 0u64);
    while at < pcap.len() {
        let word =
            |o: usize| u32::from_le_bytes(pcap[at + o..at + o + 4].try_into().unwrap()) as u64;
        let ns = word(0) * 1_000_000_000 + word(4);
        assert!(ns >= last_ns, "records out of time order");
        last_ns = ns;
        at += 16 + word(8) as usize;
        records += 1;
    }
    assert_eq!(at, pcap.len());
    assert_eq!(records, r.net.frames_received);
}
