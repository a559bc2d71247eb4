//! Message protocol: any bytes parse or fail cleanly; a parsed frame re-emits
//! (header plus its payload) and re-parses to the same header and payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::msg::HEADER_LEN;
use outboard_wire::{MsgPacket, MsgRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = MsgPacket::new_checked(data) else { return };
    let Ok(repr) = MsgRepr::parse(&packet) else { return };
    let payload = packet.payload();
    let mut out = vec![0u8; repr.buffer_len(payload.len())];
    assert_eq!(repr.emit(&mut out), Ok(HEADER_LEN));
    out[repr.header_len()..].copy_from_slice(payload);
    // Without a header extension or unknown flags the frame is the input itself.
    if packet.header_len() as usize == HEADER_LEN && packet.flags() == repr.flags {
        assert_eq!(&out[..], data);
    }
    let back = MsgPacket::new_checked(&out[..]).expect("emitted frame");
    assert_eq!(MsgRepr::parse(&back).expect("re-parse"), repr);
    assert_eq!(back.payload(), payload);
});
