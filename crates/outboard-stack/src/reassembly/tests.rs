use super::*;
use std::net::Ipv4Addr;

const HDR: [u8; 20] = [0x45; 20];

fn key(ident: u16) -> FragKey {
    FragKey {
        src: Ipv4Addr::new(10, 0, 0, 2).into(),
        dst: Ipv4Addr::new(10, 0, 0, 1).into(),
        protocol: 17,
        ident: u32::from(ident),
    }
}

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn frag(offset: usize, more: bool, data: &[u8]) -> Fragment<'_> {
    Fragment {
        offset,
        more_fragments: more,
        data,
        header: &HDR,
    }
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

fn r() -> Reassembler {
    Reassembler::new(64 * 1024, Duration::from_secs(30))
}

#[test]
fn in_order_fragments_reassemble() {
    let (mut r, mut st) = (r(), StackStats::default());
    let p = payload(3000);
    assert_eq!(
        r.add(t(0), key(1), frag(0, true, &p[..1480]), &mut st),
        None
    );
    assert_eq!(
        r.add(t(0), key(1), frag(1480, true, &p[1480..2960]), &mut st),
        None
    );
    let done = r
        .add(t(0), key(1), frag(2960, false, &p[2960..]), &mut st)
        .expect("complete");
    assert_eq!(done.payload, p);
    assert_eq!(done.header, HDR);
    assert_eq!(r.memory(), 0, "everything released");
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(st.reassembled, 1);
}

#[test]
fn out_of_order_fragments_reassemble() {
    let (mut r, mut st) = (r(), StackStats::default());
    let p = payload(2500);
    assert!(r
        .add(t(0), key(1), frag(2000, false, &p[2000..]), &mut st)
        .is_none());
    assert!(r
        .add(t(0), key(1), frag(1000, true, &p[1000..2000]), &mut st)
        .is_none());
    let done = r
        .add(t(0), key(1), frag(0, true, &p[..1000]), &mut st)
        .expect("complete");
    assert_eq!(done.payload, p);
}

#[test]
fn interleaved_datagrams_are_kept_apart() {
    let (mut r, mut st) = (r(), StackStats::default());
    let a = payload(16);
    let b = vec![9u8; 16];
    assert!(r
        .add(t(0), key(1), frag(0, true, &a[..8]), &mut st)
        .is_none());
    assert!(r
        .add(t(0), key(2), frag(0, true, &b[..8]), &mut st)
        .is_none());
    assert_eq!(
        r.add(t(0), key(2), frag(8, false, &b[8..]), &mut st)
            .unwrap()
            .payload,
        b
    );
    assert_eq!(
        r.add(t(0), key(1), frag(8, false, &a[8..]), &mut st)
            .unwrap()
            .payload,
        a
    );
}

#[test]
fn exact_duplicate_fragment_is_ignored() {
    let (mut r, mut st) = (r(), StackStats::default());
    let p = payload(16);
    r.add(t(0), key(1), frag(0, true, &p[..8]), &mut st);
    r.add(t(0), key(1), frag(0, true, &p[..8]), &mut st);
    assert_eq!(st.reassembly_duplicates, 1);
    assert_eq!(
        r.add(t(0), key(1), frag(8, false, &p[8..]), &mut st)
            .unwrap()
            .payload,
        p
    );
}

#[test]
fn rfc5722_style_overlap_drops_the_whole_datagram() {
    let (mut r, mut st) = (r(), StackStats::default());
    let p = payload(24);
    r.add(t(0), key(1), frag(0, true, &p[..16]), &mut st);
    // Starts inside the first fragment.
    assert!(r
        .add(t(0), key(1), frag(8, false, &p[8..]), &mut st)
        .is_none());
    assert_eq!(st.reassembly_overlaps, 1);
    assert_eq!(r.datagrams_held(), 0);
    assert_eq!(r.memory(), 0);
    // Same offset and length but different bytes is an overlap too.
    r.add(t(0), key(2), frag(0, true, &p[..8]), &mut st);
    r.add(t(0), key(2), frag(0, true, &[0u8; 8]), &mut st);
    assert_eq!(st.reassembly_overlaps, 2);
    // A fragment covering the tail of an earlier one.
    r.add(t(0), key(3), frag(8, true, &p[8..16]), &mut st);
    r.add(t(0), key(3), frag(0, true, &p[..16]), &mut st);
    assert_eq!(st.reassembly_overlaps, 3);
    assert_eq!(r.datagrams_held(), 0);
}

#[test]
fn inconsistent_lengths_are_rejected() {
    let (mut r, mut st) = (r(), StackStats::default());
    let p = payload(64);
    // Non-final fragment not a multiple of 8.
    r.add(t(0), key(1), frag(0, true, &p[..10]), &mut st);
    // Ping of death: ends beyond 65515 bytes.
    r.add(t(0), key(1), frag(65512, false, &p[..8]), &mut st);
    assert_eq!(st.reassembly_bad_fragments, 2);
    assert_eq!(r.datagrams_held(), 0);
    // Data beyond a known end drops the datagram.
    r.add(t(0), key(2), frag(16, false, &p[16..24]), &mut st);
    r.add(t(0), key(2), frag(24, true, &p[24..32]), &mut st);
    assert_eq!(st.reassembly_bad_fragments, 3);
    assert_eq!(r.datagrams_held(), 0);
}

#[test]
fn incomplete_datagram_times_out_with_a_time_exceeded_quote() {
    let (mut r, mut st) = (r(), StackStats::default());
    let p = payload(32);
    r.add(t(0), key(1), frag(0, true, &p[..16]), &mut st);
    r.add(t(5), key(2), frag(16, false, &p[16..]), &mut st);
    assert_eq!(r.poll_timeout(), Some(t(30_000)));
    assert!(r.handle_timeout(t(29_999), &mut st).is_empty());
    let quotes = r.handle_timeout(t(30_000), &mut st);
    assert_eq!(quotes.len(), 1);
    assert_eq!(quotes[0].0, key(1));
    assert_eq!(&quotes[0].1[..20], &HDR);
    assert_eq!(&quotes[0].1[20..], &p[..8], "header plus 8 bytes (RFC 792)");
    // The second had no first fragment: dropped without a quote.
    assert!(r.handle_timeout(t(30_005), &mut st).is_empty());
    assert_eq!(st.reassembly_timeouts, 2);
    assert_eq!(r.memory(), 0);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn reassembly_stays_under_cap_under_fragment_flood() {
    let cap = 64 * 1024;
    let mut r = Reassembler::new(cap, Duration::from_secs(30));
    let mut st = StackStats::default();
    let junk = [0xeeu8; 1480];
    // 20 000 never-completed datagrams of assorted shapes, including tiny
    // 8-byte fragments that maximise per-fragment overhead.
    for i in 0..20_000u32 {
        let k = key(i as u16);
        let k = FragKey {
            src: Ipv4Addr::from(0x0a00_0000 | (i >> 16)).into(),
            ..k
        };
        let f = match i % 3 {
            0 => frag(8 * (i as usize % 4000), true, &junk),
            1 => frag(8 * (i as usize % 8000), true, &junk[..8]),
            _ => frag(0, true, &junk[..1480]),
        };
        r.add(t(i as u64 / 100), k, f, &mut st);
        assert!(
            r.memory() <= cap,
            "memory {} over cap after {i}",
            r.memory()
        );
    }
    assert!(st.reassembly_evictions > 0);
    // A legitimate datagram still gets through afterwards.
    let p = payload(3000);
    r.add(t(300), key(7), frag(0, true, &p[..1480]), &mut st);
    r.add(t(300), key(7), frag(1480, true, &p[1480..2960]), &mut st);
    assert_eq!(
        r.add(t(300), key(7), frag(2960, false, &p[2960..]), &mut st)
            .unwrap()
            .payload,
        p
    );
    assert!(r.memory() <= cap);
}

#[test]
fn accounting_matches_after_mixed_operations() {
    let (mut r, mut st) = (r(), StackStats::default());
    let p = payload(48);
    r.add(t(0), key(1), frag(0, true, &p[..16]), &mut st);
    r.add(t(0), key(2), frag(16, true, &p[16..32]), &mut st);
    let expect = 2 * DATAGRAM_OVERHEAD + 2 * (FRAGMENT_OVERHEAD + 16) + HDR.len();
    assert_eq!(r.memory(), expect);
    r.add(t(0), key(2), frag(8, true, &p[8..24]), &mut st); // overlap drops key 2
    assert_eq!(
        r.memory(),
        DATAGRAM_OVERHEAD + FRAGMENT_OVERHEAD + 16 + HDR.len()
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any permutation of a datagram's fragments (with duplicates) reassembles to it.
        #[test]
        fn any_fragment_order_reassembles(len in 1usize..4000, chunk8 in 1usize..64, seed in any::<u64>()) {
            let p = payload(len);
            let chunk = chunk8 * 8;
            let mut frags: Vec<(usize, bool)> = (0..len).step_by(chunk).map(|o| (o, o + chunk < len)).collect();
            // Deterministic shuffle plus one duplicate.
            let mut s = seed;
            for i in (1..frags.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                frags.swap(i, (s >> 33) as usize % (i + 1));
            }
            if frags.len() > 1 { frags.insert(1, frags[0]); }
            let (mut r, mut st) = (super::r(), StackStats::default());
            let mut out = None;
            for (o, more) in frags {
                if let Some(d) = r.add(t(0), key(1), frag(o, more, &p[o..(o + chunk).min(len)]), &mut st) {
                    prop_assert!(out.is_none());
                    out = Some(d);
                }
            }
            if len <= chunk {
                // A single unfragmented piece is not a fragment; nothing to say.
            } else {
                prop_assert_eq!(out.map(|d| d.payload), Some(p));
                prop_assert_eq!(r.memory(), 0);
            }
        }
    }
}
