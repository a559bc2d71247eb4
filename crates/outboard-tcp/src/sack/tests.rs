use super::Scoreboard;
use outboard_wire::SeqNumber;
use proptest::prelude::*;

const MSS: usize = 100;

fn s(n: u32) -> SeqNumber {
    SeqNumber(n)
}

/// Segment `i` of a flight starting at 1000, MSS bytes each.
fn seg(i: usize) -> SeqNumber {
    s(1000) + i * MSS
}

fn ranges(b: &Scoreboard) -> Vec<(u32, u32)> {
    b.ranges().map(|(a, z)| (a.0, z.0)).collect()
}

#[test]
fn rfc2018_blocks_merge_into_sorted_ranges() {
    let mut b = Scoreboard::new();
    let una = s(1000);
    let nxt = s(2000);
    assert_eq!(b.on_ack(una, nxt, &[(s(1500), s(1600))]), 100);
    assert_eq!(b.on_ack(una, nxt, &[(s(1200), s(1300)), (s(1500), s(1600))]), 100);
    assert_eq!(b.on_ack(una, nxt, &[(s(1300), s(1500))]), 200);
    assert_eq!(ranges(&b), vec![(1200, 1600)]);
    assert_eq!(b.sacked_bytes(), 400);
    assert_eq!(b.high_sacked(), Some(s(1600)));
    assert!(b.is_sacked(s(1200)) && b.is_sacked(s(1599)));
    assert!(!b.is_sacked(s(1199)) && !b.is_sacked(s(1600)));
}

#[test]
fn rfc2018_cumulative_ack_releases_sacked_data() {
    let mut b = Scoreboard::new();
    b.on_ack(s(1000), s(2000), &[(s(1200), s(1300)), (s(1500), s(1600))]);
    assert_eq!(b.on_ack(s(1250), s(2000), &[]), 0);
    assert_eq!(ranges(&b), vec![(1250, 1300), (1500, 1600)]);
    b.on_ack(s(1600), s(2000), &[]);
    assert!(b.is_empty());
    assert_eq!(b.high_sacked(), None);
}

#[test]
fn rfc2883_dsack_below_snd_una_is_ignored() {
    let mut b = Scoreboard::new();
    assert_eq!(b.on_ack(s(1000), s(2000), &[(s(900), s(1000))]), 0);
    assert!(b.is_empty());
}

#[test]
fn rfc2018_blocks_outside_the_window_are_ignored() {
    let mut b = Scoreboard::new();
    let blocks = [
        (s(1900), s(2100)),         // past snd_nxt
        (s(900), s(1100)),          // straddles snd_una
        (s(1500), s(1500)),         // empty
        (s(1600), s(1500)),         // reversed
        (s(0x8000_0000), s(1500)),  // nonsense far away
    ];
    assert_eq!(b.on_ack(s(1000), s(2000), &blocks), 0);
    assert!(b.is_empty());
}

#[test]
fn blocks_work_across_sequence_wrap() {
    let mut b = Scoreboard::new();
    let una = s(u32::MAX - 150);
    let nxt = una + 400;
    assert_eq!(b.on_ack(una, nxt, &[(una + 100, una + 300)]), 200);
    assert!(b.is_sacked(s(10)));
    assert_eq!(b.pipe(una, nxt, una, MSS), 200);
}

#[test]
fn range_cap_drops_the_highest_ranges() {
    let mut b = Scoreboard::new();
    let una = s(0);
    let nxt = s(1_000_000);
    for i in 0..Scoreboard::MAX_RANGES + 5 {
        let l = s(10) + i * 20;
        b.on_ack(una, nxt, &[(l, l + 10)]);
    }
    assert_eq!(b.ranges().count(), Scoreboard::MAX_RANGES);
    assert_eq!(b.high_sacked(), Some(s(10) + (Scoreboard::MAX_RANGES - 1) * 20 + 10));
    // A block below everything still gets in, pushing the top one out.
    b.on_ack(una, nxt, &[(s(1), s(2))]);
    assert_eq!(b.ranges().next(), Some((s(1), s(2))));
    assert_eq!(b.ranges().count(), Scoreboard::MAX_RANGES);
}

#[test]
fn rfc6675_is_lost_needs_three_segments_or_more_than_two_mss_above() {
    let mut b = Scoreboard::new();
    let (una, nxt) = (seg(0), seg(10));
    b.on_ack(una, nxt, &[(seg(1), seg(3))]); // two segments SACKed above seg 0
    assert!(!b.is_lost(seg(0), MSS));
    b.on_ack(una, nxt, &[(seg(4), seg(5))]); // third segment
    assert!(b.is_lost(seg(0), MSS));
    assert!(!b.is_lost(seg(3), MSS), "only one SACKed segment above the second hole");
    // Three small discontiguous SACKed pieces count as DupThresh sequences.
    let mut b = Scoreboard::new();
    b.on_ack(una, nxt, &[(seg(2), seg(2) + 1), (seg(4), seg(4) + 1), (seg(6), seg(6) + 1)]);
    assert!(b.is_lost(seg(0), MSS));
    assert!(!b.is_lost(seg(3), MSS));
}

/// RFC 6675 §4-5 on a flight of 10 segments where segment 0 is lost and
/// 1..=3 arrive: the classic fast-retransmit trigger.
#[test]
fn rfc6675_first_segment_lost_three_sacks_scripted() {
    let mut b = Scoreboard::new();
    let (una, nxt) = (seg(0), seg(10));
    for k in 1..=3 {
        b.on_ack(una, nxt, &[(seg(1), seg(k + 1))]);
    }
    // SetPipe: 10 segments outstanding, 3 SACKed, segment 0 lost: 6 in flight.
    assert_eq!(b.pipe(una, nxt, una, MSS), 6 * MSS);
    assert_eq!(b.lost_boundary(MSS), Some(seg(1)));
    assert_eq!(b.next_lost(una, una, MSS), Some((seg(0), MSS)));
    // After retransmitting segment 0 (HighRxt = end of it) it counts once more in pipe
    // and is no longer a candidate for rule (1).
    let high_rxt = seg(1);
    assert_eq!(b.pipe(una, nxt, high_rxt, MSS), 7 * MSS);
    assert_eq!(b.next_lost(una, high_rxt, MSS), None);
    // Rule (3): the unSACKed data that is not lost (segments 4..10) has no SACKed data above it.
    assert_eq!(b.next_rescue(una, nxt, high_rxt, MSS), None);
}

#[test]
fn rfc6675_next_seg_rule_3_rescues_an_unlost_hole_below_sacked_data() {
    let mut b = Scoreboard::new();
    let (una, nxt) = (seg(0), seg(10));
    // Segments 2 and 5 SACKed: nothing is lost yet (2 segments above seg 0).
    b.on_ack(una, nxt, &[(seg(2), seg(3)), (seg(5), seg(6))]);
    assert_eq!(b.lost_boundary(MSS), None);
    assert_eq!(b.next_lost(una, una, MSS), None);
    assert_eq!(b.next_rescue(una, nxt, una, MSS), Some((seg(0), MSS)));
    assert_eq!(b.next_rescue(una, nxt, seg(2), MSS), Some((seg(3), MSS)));
    assert_eq!(b.next_rescue(una, nxt, seg(5), MSS), None);
    // Everything unSACKed is in flight: 8 segments.
    assert_eq!(b.pipe(una, nxt, una, MSS), 8 * MSS);
}

#[test]
fn next_lost_length_is_bounded_by_mss_and_the_hole() {
    let mut b = Scoreboard::new();
    let una = s(0);
    let nxt = s(10_000);
    b.on_ack(una, nxt, &[(s(250), s(260)), (s(300), s(310)), (s(400), s(410))]);
    assert_eq!(b.next_lost(una, una, MSS), Some((s(0), MSS)));
    assert_eq!(b.next_lost(una, s(200), MSS), Some((s(200), 50)));
    assert_eq!(b.next_lost(una, s(255), MSS), None, "holes above the lowest of three ranges aren't lost");
}

#[test]
fn pipe_is_zero_for_an_empty_flight() {
    let b = Scoreboard::new();
    assert_eq!(b.pipe(s(5), s(5), s(5), MSS), 0);
    assert_eq!(b.pipe(s(5), s(105), s(5), MSS), 100);
}

/// The reference: one bool per full-sized segment, RFC 6675 §4 read literally.
#[derive(Debug, Clone)]
struct Model {
    sacked: Vec<bool>,
}

impl Model {
    fn sacked_above(&self, i: usize) -> usize {
        self.sacked[i + 1..].iter().filter(|&&x| x).count()
    }
    fn is_lost(&self, i: usize) -> bool {
        let n = self.sacked_above(i);
        n >= 3 || n * MSS > 2 * MSS
    }
    fn pipe(&self, una: usize, nxt: usize, high_rxt: usize) -> usize {
        (una..nxt)
            .filter(|&i| !self.sacked[i])
            .map(|i| if self.is_lost(i) { 0 } else { MSS } + if i < high_rxt { MSS } else { 0 })
            .sum()
    }
    fn next_lost(&self, una: usize, nxt: usize, high_rxt: usize) -> Option<usize> {
        (una.max(high_rxt)..nxt).find(|&i| !self.sacked[i] && self.is_lost(i))
    }
    fn next_rescue(&self, una: usize, nxt: usize, high_rxt: usize) -> Option<usize> {
        (una.max(high_rxt)..nxt).find(|&i| !self.sacked[i] && !self.is_lost(i) && self.sacked_above(i) > 0)
    }
}

const SEGS: usize = 24;

#[derive(Debug, Clone)]
struct Ack {
    advance: usize,
    blocks: Vec<(usize, usize)>,
    high_rxt: usize,
}

fn ack() -> impl Strategy<Value = Ack> {
    (
        prop_oneof![3 => Just(0usize), 1 => 1usize..4],
        proptest::collection::vec((0usize..SEGS + 2, 1usize..5), 0..4),
        0usize..SEGS + 2,
    )
        .prop_map(|(advance, blocks, high_rxt)| Ack {
            advance,
            blocks: blocks.into_iter().map(|(l, n)| (l, l + n)).collect(),
            high_rxt,
        })
}

proptest! {
    #[test]
    fn scoreboard_matches_per_segment_model(base in any::<u32>(), acks in proptest::collection::vec(ack(), 1..20)) {
        let at = |i: usize| SeqNumber(base) + i * MSS;
        let mut b = Scoreboard::new();
        let mut m = Model { sacked: vec![false; SEGS + 8] };
        let nxt = SEGS;
        let mut una = 0usize;
        for a in acks {
            una = (una + a.advance).min(nxt);
            for x in &mut m.sacked[..una] {
                *x = false;
            }
            let before = m.sacked.iter().filter(|&&x| x).count();
            for &(l, r) in &a.blocks {
                // RFC 2018 §4: blocks must lie within [una, nxt]; others are ignored.
                if l >= una && r <= nxt {
                    m.sacked[l..r].iter_mut().for_each(|x| *x = true);
                }
            }
            let blocks: Vec<_> = a.blocks.iter().map(|&(l, r)| (at(l), at(r))).collect();
            let newly = b.on_ack(at(una), at(nxt), &blocks);
            let after = m.sacked.iter().filter(|&&x| x).count();
            prop_assert_eq!(newly, (after - before) * MSS);
            prop_assert_eq!(b.sacked_bytes(), after * MSS);
            for i in una..nxt {
                prop_assert_eq!(b.is_sacked(at(i)), m.sacked[i]);
                prop_assert_eq!(b.is_sacked(at(i) + (MSS - 1)), m.sacked[i]);
                if !m.sacked[i] {
                    prop_assert_eq!(b.is_lost(at(i), MSS), m.is_lost(i), "is_lost seg {}", i);
                }
            }
            let hr = a.high_rxt.max(una).min(nxt);
            prop_assert_eq!(b.pipe(at(una), at(nxt), at(hr), MSS), m.pipe(una, nxt, hr));
            prop_assert_eq!(b.next_lost(at(una), at(hr), MSS), m.next_lost(una, nxt, hr).map(|i| (at(i), MSS)));
            prop_assert_eq!(b.next_rescue(at(una), at(nxt), at(hr), MSS), m.next_rescue(una, nxt, hr).map(|i| (at(i), MSS)));
            let hs = (0..nxt).rev().find(|&i| m.sacked[i]).map(|i| at(i + 1));
            prop_assert_eq!(b.high_sacked(), hs);
        }
    }
}
