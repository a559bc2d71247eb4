//! ICMPv4: any bytes parse or fail cleanly; a parsed message re-emits and
//! re-parses, checksum verified, to the same repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::{Icmpv4Packet, Icmpv4Repr, RxChecksum};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Icmpv4Packet::new_checked(data) else { return };
    let _ = Icmpv4Repr::parse(&packet, RxChecksum::Verify);
    let Ok(repr) = Icmpv4Repr::parse(&packet, RxChecksum::Skip) else { return };
    let _ = repr.quoted();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut out).expect("buffer_len bytes suffice");
    let back = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&out[..]).expect("emitted message"), RxChecksum::Verify)
        .expect("re-parse");
    assert_eq!(back, repr);
});
