use super::*;
use proptest::prelude::*;

fn table(count: u32) -> (Arc<Mapping>, SyncTable) {
    let map = Arc::new(Mapping::anonymous_shared(4096).unwrap());
    (map.clone(), SyncTable::new(map, 64, count))
}

#[test]
fn complete_then_take() {
    let (_m, t) = table(4);
    assert_eq!(t.state(1), Some(SyncState::Free));
    assert_eq!(t.take(1), None);
    assert!(t.arm(1));
    assert!(!t.arm(1), "armed twice");
    assert_eq!(t.state(1), Some(SyncState::Pending));
    assert_eq!(t.take(1), None, "not done yet");
    assert_eq!(t.complete(1, -111), Ok(()));
    assert_eq!(t.complete(1, 5), Err(CompleteError::NotPending), "completed once only");
    assert_eq!(t.state(1), Some(SyncState::Done(-111)));
    assert!(!t.arm(1));
    assert_eq!(t.take(1), Some(-111));
    assert_eq!(t.take(1), None, "taken once only");
    assert_eq!(t.state(1), Some(SyncState::Free));
    assert!(t.arm(1), "reusable");
}

#[test]
fn cancel_before_completion() {
    let (_m, t) = table(4);
    assert!(t.arm(0));
    assert_eq!(t.cancel(0), CancelOutcome::Cancelled);
    assert_eq!(t.cancel(0), CancelOutcome::NotPending);
    assert_eq!(t.state(0), Some(SyncState::Cancelled));
    assert_eq!(t.complete(0, 3), Err(CompleteError::Cancelled));
    assert!(!t.arm(0), "not reusable until the engine frees it");
    assert_eq!(t.take(0), None);
    assert!(t.release_cancelled(0));
    assert!(!t.release_cancelled(0));
    assert_eq!(t.state(0), Some(SyncState::Free));
    assert!(t.arm(0));
}

#[test]
fn cancel_after_completion_takes_the_value() {
    let (_m, t) = table(4);
    assert!(t.arm(3));
    t.complete(3, 42).unwrap();
    assert_eq!(t.cancel(3), CancelOutcome::AlreadyDone(42));
    assert_eq!(t.state(3), Some(SyncState::Free));
    assert!(!t.release_cancelled(3));
    assert_eq!(t.cancel(3), CancelOutcome::NotPending);
}

#[test]
fn engine_calls_on_a_slot_that_is_not_pending_are_refused() {
    let (_m, t) = table(4);
    assert_eq!(t.complete(2, 1), Err(CompleteError::NotPending), "free");
    assert!(!t.release_cancelled(2));
    assert!(t.arm(2));
    assert!(!t.release_cancelled(2), "pending, not cancelled");
}

#[test]
fn out_of_range_slots_are_refused_not_panicked() {
    let (_m, t) = table(4);
    for slot in [4, 5, u32::MAX] {
        assert!(!t.arm(slot));
        assert_eq!(t.complete(slot, 1), Err(CompleteError::NotPending));
        assert!(!t.release_cancelled(slot));
        assert_eq!(t.take(slot), None);
        assert_eq!(t.cancel(slot), CancelOutcome::NotPending);
        assert_eq!(t.state(slot), None);
    }
}

#[test]
fn garbage_words_are_refused() {
    let (m, t) = table(4);
    for garbage in [3u64, 1 << 62, DONE | 1 << 62, u64::MAX, 12345] {
        m.atomic_u64(64).store(garbage, Ordering::Relaxed);
        assert_eq!(t.state(0), None, "{garbage:#x}");
        assert!(!t.arm(0));
        assert_eq!(t.complete(0, 1), Err(CompleteError::NotPending));
        assert!(!t.release_cancelled(0));
        assert_eq!(t.take(0), None);
        assert_eq!(t.cancel(0), CancelOutcome::NotPending);
        assert_eq!(m.atomic_u64(64).load(Ordering::Relaxed), garbage, "left alone");
    }
}

#[test]
fn extreme_values_round_trip() {
    let (_m, t) = table(1);
    for v in [MIN_VALUE, MAX_VALUE, -1, 0, 1] {
        assert!(t.arm(0));
        t.complete(0, v).unwrap();
        assert_eq!(t.take(0), Some(v));
    }
}

#[test]
#[should_panic(expected = "does not fit")]
fn a_value_past_62_bits_is_a_caller_bug() {
    SyncState::Done(MAX_VALUE + 1).encode();
}

proptest! {
    #[test]
    fn encode_decode_round_trip(v in MIN_VALUE..=MAX_VALUE) {
        let s = SyncState::Done(v);
        prop_assert_eq!(SyncState::decode(s.encode()), Some(s));
    }

    /// Decoding is injective: a word that decodes is the canonical encoding.
    #[test]
    fn decode_accepts_only_canonical_words(w in any::<u64>()) {
        if let Some(s) = SyncState::decode(w) {
            prop_assert_eq!(s.encode(), w);
        }
    }
}
