use super::{Assembler, TooManyRanges};
use proptest::prelude::*;

fn ranges(a: &Assembler) -> Vec<(usize, usize)> {
    a.ranges().collect()
}

#[test]
fn disjoint_adds_stay_sorted() {
    let mut a = Assembler::new(8);
    a.add(20, 5).unwrap();
    a.add(5, 5).unwrap();
    assert_eq!(ranges(&a), vec![(5, 10), (20, 25)]);
    assert_eq!(a.range_count(), 2);
    assert_eq!(a.held_bytes(), 10);
}

#[test]
fn overlapping_and_touching_adds_merge() {
    let mut a = Assembler::new(8);
    a.add(5, 5).unwrap();
    a.add(20, 5).unwrap();
    a.add(10, 2).unwrap(); // touches the first
    assert_eq!(ranges(&a), vec![(5, 12), (20, 25)]);
    a.add(8, 14).unwrap(); // bridges both
    assert_eq!(ranges(&a), vec![(5, 25)]);
    a.add(0, 100).unwrap(); // covers all
    assert_eq!(ranges(&a), vec![(0, 100)]);
}

#[test]
fn zero_length_add_records_nothing() {
    let mut a = Assembler::new(1);
    a.add(7, 0).unwrap();
    assert!(a.is_empty());
}

#[test]
fn add_beyond_range_cap_fails_and_records_nothing() {
    let mut a = Assembler::new(2);
    a.add(10, 1).unwrap();
    a.add(20, 1).unwrap();
    assert_eq!(a.add(30, 1), Err(TooManyRanges));
    assert_eq!(ranges(&a), vec![(10, 11), (20, 21)]);
    // Merging into an existing range needs no new slot, so it still succeeds.
    a.add(11, 9).unwrap();
    assert_eq!(ranges(&a), vec![(10, 21)]);
}

#[test]
fn pop_front_only_removes_a_range_at_rcv_nxt() {
    let mut a = Assembler::new(4);
    a.add(3, 2).unwrap();
    assert_eq!(a.pop_front(), 0);
    a.add(0, 3).unwrap();
    a.add(10, 5).unwrap();
    assert_eq!(a.pop_front(), 5);
    assert_eq!(ranges(&a), vec![(5, 10)]);
    assert_eq!(a.pop_front(), 0);
}

#[test]
fn advance_shifts_and_trims() {
    let mut a = Assembler::new(4);
    a.add(2, 3).unwrap();
    a.add(10, 5).unwrap();
    a.advance(3);
    assert_eq!(ranges(&a), vec![(0, 2), (7, 12)]);
    a.advance(9);
    assert_eq!(ranges(&a), vec![(0, 3)]);
    assert!(a.contains(0) && a.contains(2) && !a.contains(3));
}

#[test]
fn huge_offsets_saturate_instead_of_overflowing() {
    let mut a = Assembler::new(4);
    a.add(usize::MAX - 1, 10).unwrap();
    assert_eq!(ranges(&a), vec![(usize::MAX - 1, usize::MAX)]);
}

const BITS: usize = 96;

#[derive(Debug, Clone)]
enum Op {
    Add(usize, usize),
    Pop,
    Advance(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..80, 0usize..16).prop_map(|(o, l)| Op::Add(o, l)),
        1 => Just(Op::Pop),
        1 => (0usize..10).prop_map(Op::Advance),
    ]
}

/// Ranges of set bits in a bitmap, the reference the assembler must match.
fn runs(bits: &[bool]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bits.len() {
        if bits[i] {
            let s = i;
            while i < bits.len() && bits[i] {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

proptest! {
    #[test]
    fn assembler_matches_bitmap_model(max in 1usize..6, ops in proptest::collection::vec(op(), 0..50)) {
        let mut a = Assembler::new(max);
        let mut bits = vec![false; BITS];
        for op in ops {
            match op {
                Op::Add(o, l) => {
                    let mut next = bits.clone();
                    next[o..o + l].iter_mut().for_each(|b| *b = true);
                    let fits = runs(&next).len() <= max;
                    prop_assert_eq!(a.add(o, l).is_ok(), fits);
                    if fits {
                        bits = next;
                    }
                }
                Op::Pop => {
                    let n = bits.iter().take_while(|&&b| b).count();
                    prop_assert_eq!(a.pop_front(), n);
                    bits.drain(..n);
                    bits.resize(BITS, false);
                }
                Op::Advance(n) => {
                    a.advance(n);
                    bits.drain(..n);
                    bits.resize(BITS, false);
                }
            }
            let want = runs(&bits);
            prop_assert_eq!(ranges(&a), want.clone());
            prop_assert_eq!(a.range_count(), want.len());
            prop_assert_eq!(a.held_bytes(), bits.iter().filter(|&&b| b).count());
            prop_assert_eq!(a.is_empty(), want.is_empty());
            for (i, &b) in bits.iter().enumerate() {
                prop_assert_eq!(a.contains(i), b);
            }
        }
    }
}
