//! Ethernet II: any bytes parse or fail cleanly; a parsed header re-emits to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::{EthernetFrame, EthernetRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = EthernetFrame::new_checked(data) else { return };
    let _ = frame.payload();
    let Ok(repr) = EthernetRepr::parse(&frame) else { return };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut out).expect("buffer_len bytes suffice");
    assert_eq!(&out[..], &data[..out.len()]);
    let back = EthernetRepr::parse(&EthernetFrame::new_checked(&out[..]).expect("emitted header")).expect("re-parse");
    assert_eq!(back, repr);
});
