//! ARP: any bytes parse or fail cleanly; a parsed packet re-emits to the same 28 bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::{ArpPacket, ArpRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = ArpPacket::new_checked(data) else { return };
    let Ok(repr) = ArpRepr::parse(&packet) else { return };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut out).expect("buffer_len bytes suffice");
    assert_eq!(&out[..], &data[..out.len()]);
    let back = ArpRepr::parse(&ArpPacket::new_checked(&out[..]).expect("emitted packet")).expect("re-parse");
    assert_eq!(back, repr);
});
