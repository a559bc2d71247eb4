use super::*;
use proptest::prelude::*;

const K: usize = 1024;

fn pool(cap: usize) -> BufferPool {
    BufferPool::new(PoolConfig::with_cap(cap)).expect("valid config")
}

#[test]
fn alloc_picks_smallest_fitting_class() {
    let mut p = pool(1024 * K);
    let cases = [
        (0, 2 * K),
        (1, 2 * K),
        (2 * K, 2 * K),
        (2 * K + 1, 16 * K),
        (16 * K, 16 * K),
        (60 * K, 64 * K),
    ];
    for (len, cap) in cases {
        let b = p.alloc(len).expect("fits");
        assert_eq!((b.len(), b.capacity()), (len, cap));
        p.free(b).expect("ours");
    }
    assert_eq!(p.alloc(64 * K + 1).unwrap_err(), PoolError::TooLarge);
    assert_eq!(p.stats().failed_too_large, 1);
}

#[test]
fn freed_buffer_is_reused_not_reallocated() {
    let mut p = pool(1024 * K);
    let b = p.alloc(100).expect("fits");
    let addr = b.as_slice().as_ptr();
    p.free(b).expect("ours");
    let c = p.alloc(1500).expect("fits");
    assert_eq!(
        c.as_slice().as_ptr(),
        addr,
        "same storage back from the free list"
    );
    assert_eq!((p.stats().fresh, p.stats().reused), (1, 1));
    p.free(c).expect("ours");
}

#[test]
fn reused_buffer_is_zeroed_up_to_len() {
    let mut p = pool(1024 * K);
    let mut b = p.alloc(2 * K).expect("fits");
    b.as_mut_slice().fill(0xab);
    p.free(b).expect("ours");
    let c = p.alloc(2 * K).expect("fits");
    assert!(c.as_slice().iter().all(|&x| x == 0));
    p.free(c).expect("ours");
}

#[test]
fn cap_refuses_allocation_and_counts_it() {
    let mut p = pool(64 * K);
    let a = p.alloc(64 * K).expect("exactly the cap");
    assert_eq!(p.alloc(1).unwrap_err(), PoolError::OverCap);
    assert_eq!(p.stats().failed_over_cap, 1);
    p.free(a).expect("ours");
    let b = p.alloc(1).expect("room again");
    p.free(b).expect("ours");
}

#[test]
fn cached_buffers_of_other_classes_are_released_to_make_room() {
    let mut p = pool(64 * K);
    let small: Vec<Buffer> = (0..32).map(|_| p.alloc(2 * K).expect("fits")).collect();
    for b in small {
        p.free(b).expect("ours");
    }
    assert_eq!(p.stats().cached_bytes, 64 * K);
    let big = p.alloc(64 * K).expect("cache released for it");
    assert_eq!(p.stats().reclaimed, 32);
    assert_eq!(p.stats().footprint_bytes(), 64 * K);
    p.free(big).expect("ours");
}

#[test]
fn pressure_follows_watermarks_up_and_down() {
    // 128 KiB cap: low at 64 KiB, high at 102 KiB (80 %, rounded down).
    let mut p = pool(128 * K);
    assert_eq!(p.pressure(), Pressure::Normal);
    let mut held = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..8 {
        held.push(p.alloc(16 * K).expect("fits"));
        seen.push(p.pressure());
    }
    use Pressure::*;
    assert_eq!(
        seen,
        [Normal, Normal, Normal, Low, Low, Low, Critical, Critical]
    );
    while let Some(b) = held.pop() {
        p.free(b).expect("ours");
    }
    assert_eq!(
        p.pressure(),
        Normal,
        "cached bytes do not count as pressure"
    );
    assert_eq!(p.stats().peak_in_use_bytes, 128 * K);
}

#[test]
fn foreign_or_double_accounted_buffers_are_rejected() {
    let mut a = pool(1024 * K);
    let mut b = BufferPool::new(PoolConfig {
        classes: vec![4 * K],
        ..PoolConfig::with_cap(1024 * K)
    })
    .expect("valid");
    let x = b.alloc(10).expect("fits");
    assert_eq!(
        a.free(x),
        Err(PoolError::ForeignBuffer),
        "size matches no class of a"
    );
    let y = a.alloc(10).expect("fits");
    let z = b.alloc(10).expect("fits");
    a.free(y).expect("ours");
    assert_eq!(b.free(z), Ok(()));
    let w = BufferPool::new(PoolConfig::with_cap(K * 1024))
        .expect("valid")
        .alloc(10)
        .expect("fits");
    assert_eq!(
        a.free(w),
        Err(PoolError::ForeignBuffer),
        "a has none of that class in use"
    );
    assert_eq!(a.stats().rejected_frees, 2);
}

#[test]
fn bad_configs_are_refused() {
    let ok = PoolConfig::with_cap(K * 1024);
    assert_eq!(
        BufferPool::new(PoolConfig {
            classes: vec![],
            ..ok.clone()
        })
        .unwrap_err(),
        ConfigError::BadClasses
    );
    assert_eq!(
        BufferPool::new(PoolConfig {
            classes: vec![4, 4],
            ..ok.clone()
        })
        .unwrap_err(),
        ConfigError::BadClasses
    );
    assert_eq!(
        BufferPool::new(PoolConfig {
            classes: vec![0, 4],
            ..ok.clone()
        })
        .unwrap_err(),
        ConfigError::BadClasses
    );
    assert_eq!(
        BufferPool::new(PoolConfig {
            low_watermark: ok.high_watermark + 1,
            ..ok.clone()
        })
        .unwrap_err(),
        ConfigError::BadWatermarks
    );
    assert_eq!(
        BufferPool::new(PoolConfig {
            high_watermark: ok.cap_bytes + 1,
            ..ok
        })
        .unwrap_err(),
        ConfigError::BadWatermarks
    );
}

#[test]
fn trim_releases_cache() {
    let mut p = pool(1024 * K);
    let b = p.alloc(20 * K).expect("fits");
    p.free(b).expect("ours");
    p.trim();
    assert_eq!(p.stats().cached_bytes, 0);
    assert_eq!(p.class_stats()[2].cached, 0);
}

proptest! {
    /// Random alloc/free never takes the footprint past the cap, accounting
    /// matches a model, and a refusal happens only when the cap forces it.
    #[test]
    fn cap_never_exceeded_under_random_alloc_free(
        cap_k in 2usize..512,
        ops in proptest::collection::vec((any::<bool>(), 0usize..70 * K, any::<prop::sample::Index>()), 1..300),
    ) {
        let mut p = pool(cap_k * K);
        let mut held: Vec<Buffer> = Vec::new();
        for (is_alloc, len, pick) in ops {
            if is_alloc || held.is_empty() {
                let in_use = p.stats().in_use_bytes;
                match p.alloc(len) {
                    Ok(b) => {
                        prop_assert!(b.capacity() >= len);
                        prop_assert_eq!(b.len(), len);
                        held.push(b);
                    }
                    Err(PoolError::TooLarge) => prop_assert!(len > 64 * K),
                    Err(PoolError::OverCap) => {
                        let size = DEFAULT_CLASSES.iter().copied().find(|&s| s >= len).expect("not too large");
                        prop_assert!(in_use + size > cap_k * K, "refused although it fit");
                    }
                    Err(e) => prop_assert!(false, "unexpected {:?}", e),
                }
            } else {
                let b = held.swap_remove(pick.index(held.len()));
                prop_assert_eq!(p.free(b), Ok(()));
            }
            let s = *p.stats();
            prop_assert!(s.footprint_bytes() <= cap_k * K);
            prop_assert_eq!(s.in_use_bytes, held.iter().map(Buffer::capacity).sum::<usize>());
            prop_assert!(s.peak_in_use_bytes >= s.in_use_bytes);
            let cached: usize = p.class_stats().iter().map(|c| c.cached * c.size).sum();
            prop_assert_eq!(cached, s.cached_bytes);
        }
    }
}
