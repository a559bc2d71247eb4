//! IPv4: any bytes parse or fail cleanly (also as an ICMP-quoted datagram); a
//! parsed header re-emits (without options) and re-parses, checksum verified, to the same repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::{Ipv4Packet, Ipv4Repr, RxChecksum};

fuzz_target!(|data: &[u8]| {
    let _ = Ipv4Repr::parse_quoted(data);
    let Ok(packet) = Ipv4Packet::new_checked(data) else { return };
    let _ = (packet.options(), packet.payload(), packet.verify_checksum());
    let _ = Ipv4Repr::parse(&packet, RxChecksum::Verify);
    let Ok(repr) = Ipv4Repr::parse(&packet, RxChecksum::Skip) else { return };
    let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
    repr.emit(&mut out).expect("a parsed header always emits");
    let back = Ipv4Repr::parse(&Ipv4Packet::new_checked(&out[..]).expect("emitted packet"), RxChecksum::Verify)
        .expect("re-parse");
    assert_eq!(back, repr);
});
