use super::*;
use proptest::prelude::*;

/// Two classes with a gap between them, like a board's.
fn arena() -> ArenaLayout {
    ArenaLayout {
        classes: vec![ClassSpec { size: 64, count: 4, offset: 4096 }, ClassSpec { size: 4096, count: 2, offset: 8192 }],
    }
}

#[test]
fn offsets_and_sizes() {
    let a = arena();
    assert_eq!(a.offset_of(BufRef { class: 0, index: 3 }), 4096 + 192);
    assert_eq!(a.size_of(BufRef { class: 1, index: 1 }), 4096);
    assert_eq!(a.offset_of(BufRef { class: 1, index: 1 }), 12288);
    assert_eq!(a.total_buffers(), 6);
}

#[test]
#[should_panic(expected = "not a buffer")]
fn offset_of_a_foreign_buffer_panics() {
    arena().offset_of(BufRef { class: 0, index: 4 });
}

#[test]
fn locate_finds_the_containing_buffer_only() {
    let a = arena();
    let b = |class, index| Some(BufRef { class, index });
    assert_eq!(a.locate(4096, 64), b(0, 0));
    assert_eq!(a.locate(4096 + 64, 0), b(0, 1), "empty range at a boundary: the buffer that starts there");
    assert_eq!(a.locate(4096 + 70, 58), b(0, 1));
    assert_eq!(a.locate(4096 + 70, 59), None, "straddles two buffers");
    assert_eq!(a.locate(4096 + 255, 1), b(0, 3));
    assert_eq!(a.locate(4096 + 256, 0), None, "the gap after class 0");
    assert_eq!(a.locate(4095, 1), None);
    assert_eq!(a.locate(8192 + 4096, 4096), b(1, 1));
    assert_eq!(a.locate(8192 + 8192, 0), None, "one past the arena");
    assert_eq!(a.locate(u64::MAX, 1), None);
    assert_eq!(a.locate(4096, u64::MAX), None);
    assert_eq!(a.locate(u64::MAX, u64::MAX), None);
}

fn class() -> impl Strategy<Value = ClassSpec> {
    let size = prop_oneof![Just(0u32), 1..128u32, Just(u32::MAX)];
    let count = prop_oneof![Just(0u32), 1..16u32, Just(u32::MAX)];
    let offset = prop_oneof![0..1usize << 16, Just(usize::MAX - 100), any::<usize>()];
    (size, count, offset).prop_map(|(size, count, offset)| ClassSpec { size, count, offset })
}

fn span() -> impl Strategy<Value = u64> {
    prop_oneof![0..1u64 << 17, (u64::MAX - 200..=u64::MAX), any::<u64>()]
}

proptest! {
    /// Total: any layout and any pair of numbers, and a Some really contains the range.
    #[test]
    fn locate_is_total_and_sound(classes in proptest::collection::vec(class(), 0..4), offset in span(), len in span()) {
        let a = ArenaLayout { classes };
        if let Some(b) = a.locate(offset, len) {
            let c = a.classes[b.class as usize];
            prop_assert!(b.index < c.count);
            let start = c.offset as u128 + b.index as u128 * c.size as u128;
            prop_assert!(start <= offset as u128);
            prop_assert!(offset as u128 + len as u128 <= start + c.size as u128);
        }
    }

    /// On a board-like arena, locate agrees with a search over every buffer.
    #[test]
    fn locate_matches_brute_force(offset in 4000..17000u64, len in prop_oneof![Just(0u64), 0..5000u64]) {
        let a = arena();
        let mut want = None;
        for (class, c) in a.classes.iter().enumerate() {
            for index in 0..c.count {
                let b = BufRef { class: class as u8, index };
                let start = a.offset_of(b) as u64;
                let inside = offset >= start && offset < start + c.size as u64;
                if inside && offset + len <= start + c.size as u64 {
                    want = Some(b);
                }
            }
        }
        prop_assert_eq!(a.locate(offset, len), want);
    }
}

#[test]
fn owner_table_tracks_transfers() {
    let a = arena();
    let mut t = OwnerTable::new(&a, |b| if b.class == 0 { Side::Engine } else { Side::App });
    let rx = BufRef { class: 0, index: 2 };
    assert_eq!(t.owner(rx), Some(Side::Engine));
    assert_eq!((t.held_by(Side::Engine), t.held_by(Side::App)), (4, 2));
    assert_eq!(t.transfer(rx, Side::Engine, Side::App), Ok(()));
    assert_eq!(t.owner(rx), Some(Side::App));
    // The application hands back a buffer it no longer holds: refused, nothing changes.
    assert_eq!(t.transfer(rx, Side::Engine, Side::App), Err(Some(Side::App)));
    assert_eq!((t.held_by(Side::Engine), t.held_by(Side::App)), (3, 3));
    for bad in [BufRef { class: 0, index: 4 }, BufRef { class: 2, index: 0 }, BufRef { class: 255, index: u32::MAX }] {
        assert_eq!(t.owner(bad), None);
        assert_eq!(t.transfer(bad, Side::App, Side::Engine), Err(None));
    }
}

#[test]
fn free_list_is_lifo() {
    let mut f = FreeList::new([BufRef { class: 0, index: 0 }, BufRef { class: 0, index: 1 }]);
    assert_eq!(f.alloc(), Some(BufRef { class: 0, index: 1 }));
    f.free(BufRef { class: 1, index: 0 });
    assert_eq!(f.len(), 2);
    assert_eq!(f.alloc(), Some(BufRef { class: 1, index: 0 }));
    assert_eq!(f.alloc(), Some(BufRef { class: 0, index: 0 }));
    assert!(f.is_empty());
    assert_eq!(f.alloc(), None);
}
