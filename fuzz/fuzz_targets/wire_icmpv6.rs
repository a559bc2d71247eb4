//! ICMPv6 and neighbour discovery: any bytes parse or fail cleanly; a parsed
//! message's options iterate, and it re-emits and re-parses, checksum verified, to the same repr.
#![no_main]

use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use outboard_wire::{Icmpv6Packet, Icmpv6Repr, RxChecksum};

const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Icmpv6Packet::new_checked(data) else { return };
    let _ = Icmpv6Repr::parse(&packet, SRC, DST, RxChecksum::Verify);
    let Ok(repr) = Icmpv6Repr::parse(&packet, SRC, DST, RxChecksum::Skip) else { return };
    let _ = (repr.quoted(), repr.source_lla(), repr.target_lla(), repr.mtu());
    if let Some(options) = repr.options() {
        let _ = options.count();
    }
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(SRC, DST, &mut out).expect("buffer_len bytes suffice");
    let back = Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&out[..]).expect("emitted message"), SRC, DST, RxChecksum::Verify)
        .expect("re-parse");
    assert_eq!(back, repr);
});
