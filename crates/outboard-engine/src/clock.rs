//! The engine's one clock: CLOCK_MONOTONIC, the same in every process on the
//! machine (the fabric stamps frames with it across processes). Protocol code
//! never calls this: the shard reads it once per loop turn and passes it in.

use outboard_time::Instant;

/// Now, on CLOCK_MONOTONIC, as nanoseconds since boot.
pub fn now() -> Instant {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    Instant::from_nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The calling thread's CPU clock, which any thread of the process may read
/// (`cpu_time`): a shard shared with the application's threads reports its
/// own thread's CPU whichever thread answers `outboard stat`.
pub fn thread_cpu_clock() -> libc::clockid_t {
    let mut id: libc::clockid_t = libc::CLOCK_THREAD_CPUTIME_ID;
    // SAFETY: asks for the calling thread's own clock id into a live clockid_t.
    if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) } != 0 {
        return libc::CLOCK_THREAD_CPUTIME_ID;
    }
    id
}

/// CPU time on `clock` (a thread's CPU clock, `thread_cpu_clock`).
pub fn cpu_time(clock: libc::clockid_t) -> outboard_time::Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; an unknown clock id is an error, not UB.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return outboard_time::Duration::ZERO;
    }
    outboard_time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time the calling thread has used.
pub fn thread_cpu_time() -> outboard_time::Duration {
    cpu_time(libc::CLOCK_THREAD_CPUTIME_ID)
}
