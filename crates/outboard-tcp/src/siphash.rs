//! SipHash-2-4 (Aumasson and Bernstein, 2012), the keyed hash behind ISNs and
//! SYN cookies: a PRF over short inputs, so an off-path attacker who does not
//! know the key cannot predict or forge its output.

/// SipHash-2-4 of `data` under the 128-bit `key` (little-endian, as in the paper).
pub(crate) fn siphash24(key: &[u8; 16], data: &[u8]) -> u64 {
    let k0 = le64(&key[..8]);
    let k1 = le64(&key[8..]);
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        compress(&mut v, le64(block));
    }
    // Last block: the remaining bytes, and the length mod 256 in the top byte.
    let tail = blocks.remainder();
    let mut last = [0u8; 8];
    last[..tail.len()].copy_from_slice(tail);
    last[7] = data.len() as u8;
    compress(&mut v, u64::from_le_bytes(last));
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Two SipRounds over one message word (the "2" in 2-4).
fn compress(v: &mut [u64; 4], m: u64) {
    v[3] ^= m;
    round(v);
    round(v);
    v[0] ^= m;
}

fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13);
    v[1] ^= v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16);
    v[3] ^= v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21);
    v[3] ^= v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17);
    v[1] ^= v[2];
    v[2] = v[2].rotate_left(32);
}

/// Reads 8 little-endian bytes; `b` is always exactly 8 long here.
fn le64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::siphash24;

    fn key() -> [u8; 16] {
        core::array::from_fn(|i| i as u8)
    }

    #[test]
    fn paper_appendix_a_vector() {
        // SipHash paper, Appendix A: key 00..0f, message 00..0e (15 bytes).
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(&key(), &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn reference_implementation_vectors() {
        // vectors.h of the reference implementation: message 00..(n-1) for n = 0..4 and 8.
        let want = [
            (0, 0x726f_db47_dd0e_0e31),
            (1, 0x74f8_39c5_93dc_67fd),
            (2, 0x0d6c_8009_d9a9_4f5a),
            (3, 0x8567_6696_d7fb_7e2d),
            (4, 0xcf27_94e0_2771_87b7),
            (8, 0x93f5_f579_9a93_2462),
        ];
        let msg: Vec<u8> = (0..64).collect();
        for (n, h) in want {
            assert_eq!(siphash24(&key(), &msg[..n]), h, "length {n}");
        }
    }

    #[test]
    fn key_changes_output() {
        let mut k = key();
        let a = siphash24(&k, b"outboard");
        k[15] ^= 1;
        assert_ne!(a, siphash24(&k, b"outboard"));
    }
}
