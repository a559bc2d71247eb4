// Shared by the examples: argument parsing, the seeded byte pattern, results as one JSON line.
#![allow(dead_code)]

use sha2::{Digest, Sha256};

pub fn arg(n: usize, usage: &str) -> String {
    std::env::args().nth(n).unwrap_or_else(|| {
        eprintln!("usage: {usage}");
        std::process::exit(2)
    })
}

pub fn num(s: &str) -> u64 {
    let (v, mul) = match s.trim_end_matches(['B', 'i']) {
        t if t.ends_with('K') => (&t[..t.len() - 1], 1 << 10),
        t if t.ends_with('M') => (&t[..t.len() - 1], 1 << 20),
        t if t.ends_with('G') => (&t[..t.len() - 1], 1 << 30),
        t => (t, 1),
    };
    v.parse::<u64>().unwrap_or_else(|_| {
        eprintln!("not a number: {s}");
        std::process::exit(2)
    }) * mul
}

/// Byte `i` of the seeded stream the source examples send.
pub fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

pub fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {e}");
    std::process::exit(1)
}

pub fn report(bytes: u64, h: Sha256) {
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("{{\"bytes\": {bytes}, \"sha256\": \"{hex}\"}}");
}
