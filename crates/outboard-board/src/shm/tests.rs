use super::*;
use std::sync::atomic::Ordering;

#[test]
fn memfd_is_zeroed_and_shared_with_a_second_mapping() {
    let (a, fd) = Mapping::create_memfd("board-test", 8192).unwrap();
    assert_eq!(a.len(), 8192);
    assert!(!a.is_empty());
    assert_eq!(a.read::<u64>(8184), 0);
    let b = Mapping::map_fd(fd.as_raw_fd(), 8192).unwrap();
    a.write::<u64>(16, 0xdead_beef_0123_4567);
    assert_eq!(b.read::<u64>(16), 0xdead_beef_0123_4567);
    b.atomic_u32(100).store(7, Ordering::Release);
    assert_eq!(a.atomic_u32(100).load(Ordering::Acquire), 7);
}

#[test]
fn memfd_is_sealed_against_resizing() {
    // The other side gets the fd; shrinking it would SIGBUS us.
    let (_a, fd) = Mapping::create_memfd("board-seal", 4096).unwrap();
    // SAFETY: plain syscall on a descriptor we own.
    assert_ne!(unsafe { libc::ftruncate(fd.as_raw_fd(), 0) }, 0);
}

#[test]
fn map_fd_refuses_a_short_file_and_bad_fds() {
    let (_a, fd) = Mapping::create_memfd("board-short", 4096).unwrap();
    assert!(Mapping::map_fd(fd.as_raw_fd(), 8192).is_err());
    assert!(Mapping::map_fd(-1, 4096).is_err());
    assert!(Mapping::anonymous_shared(0).is_err());
    assert!(Mapping::create_memfd("bad\0name", 4096).is_err());
}

#[test]
fn unaligned_records_round_trip() {
    let m = Mapping::anonymous_shared(4096).unwrap();
    m.write::<u64>(3, u64::MAX - 5);
    assert_eq!(m.read::<u64>(3), u64::MAX - 5);
    m.write::<u32>(4091, 0x0102_0304);
    assert_eq!(m.read::<u32>(4091), 0x0102_0304);
    let mut raw = [0u8; 8];
    m.copy_out(3, &mut raw);
    assert_eq!(u64::from_ne_bytes(raw), u64::MAX - 5);
}

/// Records of whole words go a word at a time at 8-aligned offsets, and
/// by the other paths elsewhere: the same bytes either way, and the same
/// bytes as `copy_out` sees.
#[test]
fn word_records_round_trip_at_every_alignment() {
    use crate::proto::{Command, Event};
    let m = Mapping::anonymous_shared(4096).unwrap();
    let mut c: Command = unsafe { std::mem::zeroed() };
    let bytes = |c: &Command| -> Vec<u8> {
        // SAFETY: Command is Pod (no padding): its bytes are all initialised.
        unsafe { std::slice::from_raw_parts((c as *const Command).cast::<u8>(), std::mem::size_of::<Command>()) }.to_vec()
    };
    // SAFETY: as above; every byte pattern is a valid Command.
    let raw = unsafe { std::slice::from_raw_parts_mut((&mut c as *mut Command).cast::<u8>(), std::mem::size_of::<Command>()) };
    for (i, b) in raw.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37).wrapping_add(11);
    }
    for off in [0usize, 8, 64, 3, 4, 1000, 4096 - 64] {
        m.write::<Command>(off, c);
        let back = m.read::<Command>(off);
        assert_eq!(bytes(&back), bytes(&c), "offset {off}");
        let mut out = vec![0u8; std::mem::size_of::<Command>()];
        m.copy_out(off, &mut out);
        assert_eq!(out, bytes(&c), "offset {off}");
        let e = Event { endpoint: off as u32, kind: 7, value: u64::MAX - off as u64 };
        m.write::<Event>(off + 8, e);
        let r = m.read::<Event>(off + 8);
        assert_eq!((r.endpoint, r.kind, r.value), (e.endpoint, e.kind, e.value), "offset {off}");
    }
}

#[test]
fn copies_and_slices_see_the_same_bytes() {
    let m = Mapping::anonymous_shared(4096).unwrap();
    m.copy_in(4000, &[1, 2, 3, 4]);
    // SAFETY: no other slice into the mapping exists.
    let s = unsafe { m.bytes(4000, 4) };
    assert_eq!(s, &[1, 2, 3, 4]);
    // SAFETY: no other slice into the mapping exists.
    let w = unsafe { m.bytes_mut(4094, 2) };
    w.copy_from_slice(&[9, 9]);
    let mut out = [0u8; 2];
    m.copy_out(4094, &mut out);
    assert_eq!(out, [9, 9]);
    // Empty ranges at the very end are in bounds.
    m.copy_in(4096, &[]);
}

#[test]
#[should_panic(expected = "out of bounds")]
fn read_past_the_end_panics() {
    let m = Mapping::anonymous_shared(4096).unwrap();
    let _: u64 = m.read(4090);
}

#[test]
#[should_panic(expected = "out of bounds")]
fn offset_overflow_panics_not_wraps() {
    let m = Mapping::anonymous_shared(4096).unwrap();
    m.copy_in(usize::MAX, &[1]);
}

#[test]
#[should_panic(expected = "misaligned")]
fn misaligned_atomic_panics() {
    let m = Mapping::anonymous_shared(4096).unwrap();
    m.atomic_u64(4);
}

#[test]
#[should_panic(expected = "out of bounds")]
fn slice_past_the_end_panics() {
    let m = Mapping::anonymous_shared(4096).unwrap();
    // SAFETY: never returns.
    let _ = unsafe { m.bytes(1, 4096) };
}
