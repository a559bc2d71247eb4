//! IPv6: any bytes parse or fail cleanly (also as an ICMPv6-quoted packet),
//! the extension-header walk is total, and a parsed header re-emits and re-parses to the same repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::ipv6::{walk_extensions, Ipv6Packet, Ipv6Repr};

fuzz_target!(|data: &[u8]| {
    let _ = Ipv6Repr::parse_quoted(data);
    if let Some((&first, rest)) = data.split_first() {
        let _ = walk_extensions(first, rest);
    }
    let Ok(packet) = Ipv6Packet::new_checked(data) else { return };
    if let Ok(w) = walk_extensions(packet.next_header(), packet.payload()) {
        assert!(w.upper_offset <= packet.payload().len());
    }
    let Ok(repr) = Ipv6Repr::parse(&packet) else { return };
    let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
    repr.emit(&mut out).expect("a parsed header always emits");
    let back = Ipv6Repr::parse(&Ipv6Packet::new_checked(&out[..]).expect("emitted packet")).expect("re-parse");
    assert_eq!(back, repr);
});
