use super::*;
use proptest::prelude::*;

/// RFC 1071 §4.1's algorithm, one big-endian 16-bit word at a time: the
/// reference the fast paths are checked against.
fn reference_sum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        sum += u64::from(u16::from_be_bytes([data[i], data[i + 1]]));
        i += 2;
    }
    if i < data.len() {
        sum += u64::from(data[i]) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// 0x0000 and 0xFFFF are both ones-complement zero.
fn same_ones_complement(a: u16, b: u16) -> bool {
    a == b || (a == 0 || a == 0xffff) && (b == 0 || b == 0xffff)
}

/// Every length a header or field can have (0 to 64 bytes, the plain-loop
/// path) at every start modulo 8, over bytes that set high bits, against
/// the reference.
#[test]
fn small_sums_of_every_length_and_alignment_match_rfc1071_reference() {
    let data: Vec<u8> = (0..80u32).map(|i| (i.wrapping_mul(151) ^ 0xA5) as u8).collect();
    for start in 0..8 {
        for len in 0..=64 {
            let d = &data[start..start + len];
            assert_eq!(sum(d).sum(), reference_sum(d), "start {start} len {len}");
        }
    }
    let ones = [0xFFu8; 64];
    for len in 0..=64 {
        assert!(same_ones_complement(sum(&ones[..len]).sum(), reference_sum(&ones[..len])), "all-ones len {len}");
    }
}

#[test]
fn rfc1071_section_3_example_sum() {
    // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(sum(&data).sum(), 0xddf2);
    assert_eq!(checksum(&data), !0xddf2);
}

#[test]
fn fold_carries_end_around_at_every_width() {
    assert_eq!(fold(0), 0);
    assert_eq!(fold(0xffff), 0xffff);
    assert_eq!(fold(0x1_0000), 1);
    assert_eq!(fold(0xffff_ffff), 0xffff);
    assert_eq!(fold(0x1_ffff_fffe), 0xffff); // 0xFFFFFFFF + 0xFFFFFFFF
    assert_eq!(fold(u64::MAX), 0xffff);
    for x in [12_345_678_901u64, 0xdead_beef_cafe, 1 << 47, (1 << 48) - 3] {
        let want = (x % 0xffff) as u16;
        assert!(same_ones_complement(fold(x), want), "{x:#x}");
    }
}

#[test]
fn odd_length_pads_last_byte_as_high_byte() {
    assert_eq!(sum(&[0xab]).sum(), 0xab00);
    assert!(sum(&[0xab]).is_odd());
    assert_eq!(sum(&[0x12, 0x34, 0xab]).sum(), 0x12 * 256 + 0x34 + 0xab00);
}

#[test]
fn empty_sums_to_zero_and_checksums_to_ffff() {
    assert_eq!(sum(&[]), PartialSum::ZERO);
    assert_eq!(checksum(&[]), 0xffff);
}

#[test]
fn region_with_its_checksum_verifies_to_zero() {
    // The IPv4 header of testdata's captured ICMP echo request, checksum in place.
    let hdr: [u8; 20] = crate::testdata::ICMP_ECHO_REQUEST[14..34].try_into().unwrap();
    let mut zeroed = hdr;
    zeroed[10] = 0;
    zeroed[11] = 0;
    let c = checksum(&zeroed);
    assert_eq!(c.to_be_bytes(), [hdr[10], hdr[11]]);
    assert_eq!(checksum(&hdr), 0);
}

#[test]
fn all_ff_and_all_80_buffers_exercise_lane_extremes() {
    // 0xFFFF and 0x8000 words are the extremes of the biased `vpmaddwd` lanes.
    for b in [0xffu8, 0x80, 0x7f, 0x00] {
        for len in [31usize, 32, 127, 128, 129, 4096, 65536 + 3] {
            let data = vec![b; len];
            assert!(same_ones_complement(sum(&data).sum(), reference_sum(&data)), "{b:#x} x {len}");
            let mut dst = vec![0u8; len];
            assert!(same_ones_complement(copy_and_checksum(&mut dst, &data).sum(), reference_sum(&data)));
        }
    }
}

#[test]
fn multi_block_buffer_matches_reference() {
    // Many fold blocks (64 KiB each), odd length.
    let data: Vec<u8> = (0..(3 << 20) + 7).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let mut dst = vec![0u8; data.len()];
    assert_eq!(copy_and_checksum(&mut dst, &data).sum(), reference_sum(&data));
    assert_eq!(dst, data);
    assert_eq!(sum(&data).sum(), reference_sum(&data));
}

/// Pseudo-random bytes (a multiplicative hash of the index).
fn noise(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 24) as u8).collect()
}

/// Checks every way of summing `src` against the reference: the public
/// functions, the portable kernels, and the AVX2 ones where the CPU has them.
/// The copies go to `dst_off` in a buffer of guard bytes, which must come
/// out untouched (the vector tails store overlapping whole vectors).
fn check_all_paths(src: &[u8], dst_off: usize) {
    let n = src.len();
    let want = reference_sum(src);
    let what = |path: &str| format!("{path}: len {n}, src at {:#x}, dst_off {dst_off}", src.as_ptr() as usize % 64);
    assert_eq!(sum(src).sum(), want, "{}", what("sum"));
    assert_eq!(sum(src).is_odd(), n % 2 == 1);
    assert_eq!(checksum(src), !want, "{}", what("checksum"));
    let guard = 0xa5u8;
    let mut buf = vec![guard; n + dst_off + 64];
    let check_copy = |buf: &mut Vec<u8>, s: u16, path: &str| {
        assert_eq!(s, want, "{}", what(path));
        assert_eq!(&buf[dst_off..dst_off + n], src, "{}", what(path));
        assert!(
            buf[..dst_off].iter().chain(&buf[dst_off + n..]).all(|&b| b == guard),
            "{}: wrote outside dst",
            what(path)
        );
        buf.fill(guard);
    };
    let s = copy_and_checksum(&mut buf[dst_off..dst_off + n], src);
    assert_eq!(s.is_odd(), n % 2 == 1);
    check_copy(&mut buf, s.sum(), "copy_and_checksum");
    if n <= BLOCK {
        assert_eq!(native_to_be(fold(portable_sum(src))), want, "{}", what("portable_sum"));
        let s = native_to_be(fold(portable_copy_sum(&mut buf[dst_off..dst_off + n], src)));
        check_copy(&mut buf, s, "portable_copy_sum");
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            #[allow(unsafe_code)]
            // SAFETY: AVX2 was detected just above.
            let (s, c) = unsafe { (avx2::sum(src), avx2::copy_sum(&mut buf[dst_off..dst_off + n], src)) };
            assert_eq!(native_to_be(fold(s)), want, "{}", what("avx2::sum"));
            check_copy(&mut buf, native_to_be(fold(c)), "avx2::copy_sum");
        }
        #[cfg(target_arch = "x86_64")]
        if level::detect() == level::VNNI {
            #[allow(unsafe_code)]
            // SAFETY: the kernel's features were detected just above.
            let c = unsafe { vnni::copy_sum(&mut buf[dst_off..dst_off + n], src) };
            check_copy(&mut buf, native_to_be(fold(c)), "vnni::copy_sum");
        }
    }
}

#[test]
fn every_length_to_2000_at_every_alignment_matches_reference() {
    // Each length 0..=2000 from each source offset 0..64 (every position
    // relative to a 32-byte vector and a cache line), the destination at yet
    // another offset, in random bytes and in the lane extremes.
    for fill in [None, Some(0xffu8), Some(0x80), Some(0x7f)] {
        let data = match fill {
            None => noise(2000 + 64, 7),
            Some(b) => vec![b; 2000 + 64],
        };
        for off in 0..64 {
            for len in 0..=2000 {
                check_all_paths(&data[off..off + len], (off * 7 + len) % 64);
            }
        }
    }
}

#[test]
fn lengths_around_64_kib_at_every_alignment_match_reference() {
    // A TSO-sized segment, and the edges of the kernels' 64 KiB block.
    let data = noise(2 * BLOCK + 200, 11);
    let ff = vec![0xffu8; 2 * BLOCK + 200];
    for len in [BLOCK - 33, BLOCK - 1, BLOCK, BLOCK + 1, BLOCK + 31, 2 * BLOCK + 3] {
        for off in 0..64 {
            check_all_paths(&data[off..off + len], (off * 5 + 3) % 64);
        }
        check_all_paths(&ff[1..1 + len], 0);
    }
}

#[test]
fn copies_at_every_distance_modulo_4_kib_match_reference() {
    // The vector kernels copy from the top down when `dst` lies 1..=256 bytes
    // after `src` modulo 4 KiB (`backward`): check both directions and the
    // edges between them, each kernel, with guard bytes around `dst`.
    const PAGE: usize = 4096;
    let mut buf = vec![0u8; 4 * PAGE + 4200];
    let base = (PAGE - buf.as_ptr() as usize % PAGE) % PAGE;
    let s0 = base + 64 + 5;
    let data = noise(4200, 5);
    let distances = (0..=300).chain([PAGE - 300, PAGE - 1, PAGE + 1, PAGE + 128, PAGE + 256, PAGE + 257]);
    for delta in distances {
        let d0 = s0 + 2 * PAGE + delta;
        for len in [0usize, 1, 31, 32, 33, 63, 127, 128, 129, 255, 256, 257, 300, 1499, 1500, 4096 + 33] {
            buf[s0..s0 + len].copy_from_slice(&data[..len]);
            let (lo, hi) = buf.split_at_mut(d0 - 64);
            let src = &lo[s0..s0 + len];
            let want = reference_sum(src);
            let (guard, window) = (0x5au8, &mut hi[..len + 128]);
            let mut run = |path: &str, f: &mut dyn FnMut(&mut [u8], &[u8]) -> u16| {
                window.fill(guard);
                let got = f(&mut window[64..64 + len], src);
                assert_eq!(got, want, "{path}: delta {delta}, len {len}");
                assert_eq!(&window[64..64 + len], src, "{path}: delta {delta}, len {len}");
                assert!(
                    window[..64].iter().chain(&window[64 + len..]).all(|&b| b == guard),
                    "{path}: wrote outside dst"
                );
            };
            run("copy_and_checksum", &mut |d, s| copy_and_checksum(d, s).sum());
            #[cfg(target_arch = "x86_64")]
            {
                let l = level::detect();
                if l >= level::AVX2 {
                    #[allow(unsafe_code)]
                    // SAFETY: AVX2 was detected (`level::detect`).
                    run("avx2::copy_sum", &mut |d, s| native_to_be(fold(unsafe { avx2::copy_sum(d, s) })));
                }
                if l == level::VNNI {
                    #[allow(unsafe_code)]
                    // SAFETY: the kernel's features were detected (`level::detect`).
                    run("vnni::copy_sum", &mut |d, s| native_to_be(fold(unsafe { vnni::copy_sum(d, s) })));
                }
            }
        }
    }
}

#[test]
fn fused_piece_after_an_odd_prefix_matches_whole() {
    // The running sum starts at an odd offset: the piece's bytes sit in
    // swapped lanes and must be swapped when added (RFC 1071 §2(B)).
    let data = noise(2100, 3);
    for prefix in [1usize, 3, 13, 33] {
        for len in (0..=2000).step_by(7).chain([1499, 1500, 1501]) {
            let whole = &data[..prefix + len];
            let mut copy = vec![0u8; len];
            let piece = copy_and_checksum(&mut copy, &whole[prefix..]);
            let mut acc = Accumulator::new();
            acc.add(&whole[..prefix]).add_partial(piece);
            assert_eq!(acc.partial().sum(), reference_sum(whole), "prefix {prefix}, len {len}");
            assert_eq!(acc.partial().is_odd(), whole.len() % 2 == 1);
            assert_eq!(copy, &whole[prefix..]);
        }
    }
}

#[test]
fn long_buffer_of_ff_folds_correctly() {
    // 0xFFFF words are ones-complement zero; many of them must not overflow anything.
    let data = vec![0xffu8; 1 << 20];
    assert!(same_ones_complement(sum(&data).sum(), reference_sum(&data)));
}

#[test]
fn rfc1624_update_matches_recompute_for_ttl_decrement() {
    let mut hdr = [
        0x45, 0x00, 0x00, 0x54, 0xa6, 0xf2, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x01, 0x7f, 0x00,
        0x00, 0x01,
    ];
    let hc = checksum(&hdr);
    let old = u16::from_be_bytes([hdr[8], hdr[9]]);
    hdr[8] -= 1;
    let new = u16::from_be_bytes([hdr[8], hdr[9]]);
    assert_eq!(update(hc, old, new), checksum(&hdr));
}

#[test]
fn rfc1624_section_4_example_avoids_minus_zero() {
    // RFC 1624 §4: HC = 0xDD2F, m = 0x5555 -> m' = 0x3285 gives HC' = 0x0000 (eqn. 3),
    // where eqn. 2 would give the wrong 0xFFFF.
    assert_eq!(update(0xdd2f, 0x5555, 0x3285), 0x0000);
}

proptest! {
    /// The pseudo-header added word by word sums as its 12 bytes do, after
    /// an even or an odd number of bytes already added.
    #[test]
    fn ipv4_pseudo_header_sums_as_its_bytes(src in any::<u32>(), dst in any::<u32>(), proto in any::<u8>(), len in any::<u16>(), before in prop::collection::vec(any::<u8>(), 0..4)) {
        let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
        let mut bytes = before.clone();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&[0, proto]);
        bytes.extend_from_slice(&len.to_be_bytes());
        let mut acc = Accumulator::new();
        acc.add(&before).add_ipv4_pseudo_header(src, dst, proto, len);
        prop_assert!(same_ones_complement(acc.finish(), !reference_sum(&bytes)));
    }

    #[test]
    fn fast_sum_matches_rfc1071_reference(data in prop::collection::vec(any::<u8>(), 0..3000), start in 0usize..64) {
        // Slicing at `start` exercises every alignment of the chunked loop.
        let start = start.min(data.len());
        let d = &data[start..];
        prop_assert_eq!(sum(d).sum(), reference_sum(d));
        prop_assert_eq!(checksum(d), !reference_sum(d));
    }

    #[test]
    fn copy_and_checksum_copies_and_matches_reference(data in prop::collection::vec(any::<u8>(), 0..5000), start in 0usize..64, dst_off in 0usize..64) {
        let start = start.min(data.len());
        let src = &data[start..];
        let mut dst_buf = vec![0u8; src.len() + dst_off];
        let dst = &mut dst_buf[dst_off..];
        let s = copy_and_checksum(dst, src);
        prop_assert_eq!(&*dst, src);
        prop_assert_eq!(s.sum(), reference_sum(src));
        prop_assert_eq!(s.is_odd(), src.len() % 2 == 1);
    }

    #[test]
    fn every_kernel_matches_rfc1071_reference(data in prop::collection::vec(any::<u8>(), 0..2000), start in 0usize..64) {
        // The public functions take the AVX2 path on CPUs that have it; check the
        // portable kernel, and the AVX2 one wherever it can run, directly.
        let d = &data[start.min(data.len())..];
        let want = reference_sum(d);
        let mut dst = vec![0u8; d.len()];
        prop_assert_eq!(native_to_be(fold(portable_sum(d))), want);
        prop_assert_eq!(native_to_be(fold(portable_copy_sum(&mut dst, d))), want);
        prop_assert_eq!(&dst[..], d);
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            #[allow(unsafe_code)]
            // SAFETY: AVX2 was detected just above.
            let (s, c) = unsafe { (avx2::sum(d), avx2::copy_sum(&mut dst, d)) };
            prop_assert_eq!(native_to_be(fold(s)), want);
            prop_assert_eq!(native_to_be(fold(c)), want);
        }
        #[cfg(target_arch = "x86_64")]
        if level::detect() == level::VNNI {
            let mut dst = vec![0u8; d.len()];
            #[allow(unsafe_code)]
            // SAFETY: the kernel's features were detected just above.
            let c = unsafe { vnni::copy_sum(&mut dst, d) };
            prop_assert_eq!(native_to_be(fold(c)), want);
            prop_assert_eq!(&dst[..], d);
        }
    }

    #[test]
    fn accumulator_over_odd_pieces_matches_whole(data in prop::collection::vec(any::<u8>(), 0..600), cuts in prop::collection::vec(0usize..600, 0..6)) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
        cuts.push(0);
        cuts.push(data.len());
        cuts.sort_unstable();
        let mut by_slice = Accumulator::new();
        let mut by_partial = Accumulator::new();
        for w in cuts.windows(2) {
            by_slice.add(&data[w[0]..w[1]]);
            let mut copy = vec![0u8; w[1] - w[0]];
            by_partial.add_partial(copy_and_checksum(&mut copy, &data[w[0]..w[1]]));
        }
        prop_assert!(same_ones_complement(by_slice.partial().sum(), reference_sum(&data)));
        prop_assert!(same_ones_complement(by_partial.partial().sum(), reference_sum(&data)));
        prop_assert!(same_ones_complement(by_slice.finish(), checksum(&data)));
    }

    #[test]
    fn rfc1624_update_matches_recompute(mut data in prop::collection::vec(any::<u8>(), 2..200), idx in any::<prop::sample::Index>(), new in any::<u16>()) {
        let words = data.len() / 2;
        let i = idx.index(words) * 2;
        let hc = checksum(&data);
        let old = u16::from_be_bytes([data[i], data[i + 1]]);
        data[i..i + 2].copy_from_slice(&new.to_be_bytes());
        prop_assert!(same_ones_complement(update(hc, old, new), checksum(&data)));
    }

    #[test]
    fn rfc1624_update_u32_matches_recompute(mut data in prop::collection::vec(any::<u8>(), 4..200), idx in any::<prop::sample::Index>(), new in any::<u32>()) {
        let i = idx.index(data.len() / 4) * 4;
        let hc = checksum(&data);
        let old = u32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
        data[i..i + 4].copy_from_slice(&new.to_be_bytes());
        prop_assert!(same_ones_complement(update_u32(hc, old, new), checksum(&data)));
    }
}
