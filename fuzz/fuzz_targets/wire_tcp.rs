//! TCP: the first 8 bytes are the pseudo-header's addresses, the rest the
//! segment. Any bytes parse or fail cleanly; a parsed segment re-emits, by
//! both the in-place and the fused copy-and-checksum paths, to the same bytes
//! and re-parses, checksum verified, to the same repr (options as `fitted`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::checksum::copy_and_checksum;
use outboard_wire::{RxChecksum, TcpOptions, TcpPacket, TcpRepr, TxChecksum};
use std::net::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let _ = TcpOptions::parse(&data[8..]);
    let src = Ipv4Addr::new(data[0], data[1], data[2], data[3]);
    let dst = Ipv4Addr::new(data[4], data[5], data[6], data[7]);
    let Ok(packet) = TcpPacket::new_checked(&data[8..]) else { return };
    let _ = TcpRepr::parse(&packet, src, dst, RxChecksum::Verify);
    let Ok(repr) = TcpRepr::parse(&packet, src, dst, RxChecksum::Skip) else { return };
    let payload = packet.payload();
    let hl = repr.header_len();
    let mut a = vec![0u8; repr.buffer_len(payload.len())];
    a[hl..].copy_from_slice(payload);
    if repr.emit(&mut a, src, dst, payload.len(), TxChecksum::Compute).is_err() {
        // Only a segment over 65535 bytes cannot be emitted.
        assert!(a.len() > 65535);
        return;
    }
    let mut b = vec![0u8; a.len()];
    let sum = copy_and_checksum(&mut b[hl..], payload);
    repr.emit(&mut b, src, dst, payload.len(), TxChecksum::Payload(sum)).expect("emit fused");
    assert_eq!(a, b);
    let back = TcpPacket::new_checked(&a[..]).expect("emitted segment");
    let again = TcpRepr::parse(&back, src, dst, RxChecksum::Verify).expect("re-parse");
    assert_eq!(again, TcpRepr { options: repr.options.fitted(), ..repr });
    assert_eq!(back.payload(), payload);
});
