//! Decoding a command record is total: any 64 bytes give a command or a
//! violation, and a command re-encodes to a record that decodes to it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use outboard_board::command::{decode, Bounds};
use outboard_board::Command;

fuzz_target!(|data: &[u8]| {
    let mut b = [0u8; 64];
    let n = data.len().min(64);
    b[..n].copy_from_slice(&data[..n]);
    let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let rec = Command { op: u(0), endpoint: u(4), sync: u(8), flags: u(12), a: w(16), b: w(24), c: w(32), d: w(40), e: w(48), f: w(56) };
    let bounds = Bounds { endpoints: 1 + u(4) % 4096, syncs: 1 + u(8) % 4096 };
    if let Ok(cmd) = decode(&rec, bounds) {
        assert_eq!(decode(&cmd.encode(), bounds), Ok(cmd));
    }
});
