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

/// Reads a stream to its end in place (`begin_get` / `end_get`: the
/// application copies nothing), hashing what arrives.
pub fn read_to_end_in_place(s: &mut outboard_api::Stream) -> (u64, Sha256) {
    let (mut h, mut total) = (Sha256::new(), 0u64);
    loop {
        let buf = s.begin_get().unwrap_or_else(|e| fail("receive", e));
        if buf.is_empty() {
            return (total, h);
        }
        h.update(buf);
        let n = buf.len();
        total += n as u64;
        s.end_get(n).unwrap_or_else(|e| fail("receive", e));
    }
}

/// Writes `total` bytes of the seeded pattern in place into the transmit
/// region (`begin_put` / `end_put`), hashing them; then half-closes and
/// waits for the peer's close, so every byte was acknowledged.
pub fn write_pattern_in_place(s: &mut outboard_api::Stream, total: u64) -> (u64, Sha256) {
    let (mut h, mut sent) = (Sha256::new(), 0u64);
    while sent < total {
        let buf = s.begin_put().unwrap_or_else(|e| fail("send", e));
        let n = buf.len().min((total - sent) as usize);
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = pattern(sent + k as u64);
        }
        h.update(&buf[..n]);
        s.end_put(n).unwrap_or_else(|e| fail("send", e));
        sent += n as u64;
    }
    s.shutdown().unwrap_or_else(|e| fail("shutdown", e));
    let mut tail = [0u8; 64];
    while s.recv(&mut tail).unwrap_or_else(|e| fail("linger", e)) > 0 {}
    (sent, h)
}
