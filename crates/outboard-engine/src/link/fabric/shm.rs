//! The fabric file's layout and the raw pieces under it: the shared mapping,
//! futex, flock and `kill(pid, 0)`. Every byte of the mapping may be written
//! by another process at any time, so nothing here hands out a plain
//! reference into it: control words are reached as atomics, frame bytes are
//! copied in or out with bounds checks.

use crate::link::LinkError;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::time::Duration;

/// "OBFABRIC" little-endian: published last by the creator.
pub const MAGIC: u64 = u64::from_le_bytes(*b"OBFABRIC");
/// Layout version; bump on any change below. 2: the port record's group
/// word ([`P_GROUP`]); a version-1 engine would neither steer to a group's
/// queues nor clear the word, so the two must not share a file.
pub const VERSION: u32 = 2;
/// Ports per fabric.
pub const PORTS: usize = 8;
/// Slots per ring (a power of two, so `index % SLOTS` survives wrap-around).
pub const SLOTS: u32 = 256;
/// Bytes per slot: a 16-byte header and the frame.
pub const SLOT_SIZE: usize = 2048;
/// Slot header: `len: u32` at 0, reserved `u32` at 4, `deliver_at_ns: u64` at 8.
pub const SLOT_HEADER: usize = 16;
/// Largest frame the fabric carries: MTU 1500 plus the Ethernet header.
pub const MAX_FRAME: usize = 1514;

/// Header fields (offsets from the start of the file).
pub const H_MAGIC: usize = 0; // u64
pub const H_VERSION: usize = 8; // u32
pub const H_PORTS: usize = 12; // u32
pub const H_SLOTS: usize = 16; // u32
pub const H_SLOT_SIZE: usize = 20; // u32
pub const H_DATA: usize = 24; // u64: offset of the first ring's slots
pub const H_SIZE: usize = 32; // u64: file size

/// Port records: one 64-byte line each from `PORT_TABLE`.
pub const PORT_TABLE: usize = 256;
pub const PORT_STRIDE: usize = 64;
/// Owner pid (0 = free).
pub const P_OWNER: usize = 0; // u32
/// Doorbell sequence (the futex word).
pub const P_DOORBELL: usize = 4; // u32
/// 1 while the owner is (about to be) asleep in FUTEX_WAIT.
pub const P_SLEEPING: usize = 8; // u32
/// The port's group, `(base << 8) | count`, written by its owner after
/// claiming it (0 = not in a group: a group of one at itself). Trusted only
/// while the base port and this port have the same owner pid.
pub const P_GROUP: usize = 12; // u32
/// Frames senders dropped because this port's ring from them was full.
pub const P_DROPS: usize = 16; // u64

/// Ring control: head (written by the producer) and tail (by the consumer) on
/// separate cache lines, one 128-byte block per (source, destination) pair.
pub const RING_CTL: usize = 4096;
pub const RING_CTL_STRIDE: usize = 128;
pub const R_HEAD: usize = 0; // u32, free-running
pub const R_TAIL: usize = 64; // u32, free-running

/// Slots of ring (src, dst) start at `DATA + (src * PORTS + dst) * RING_BYTES`.
pub const DATA: usize = 16384;
pub const RING_BYTES: usize = SLOTS as usize * SLOT_SIZE;
/// The whole file (sparse on tmpfs: only touched slots use memory).
pub const FILE_SIZE: usize = DATA + PORTS * PORTS * RING_BYTES;

pub const fn port_offset(port: usize) -> usize {
    PORT_TABLE + port * PORT_STRIDE
}
pub const fn ring_offset(src: usize, dst: usize) -> usize {
    RING_CTL + (src * PORTS + dst) * RING_CTL_STRIDE
}
/// Offset of slot `index % SLOTS` of ring (src, dst).
pub const fn slot_offset(src: usize, dst: usize, index: u32) -> usize {
    DATA + (src * PORTS + dst) * RING_BYTES + (index % SLOTS) as usize * SLOT_SIZE
}

// The layout must fit together; checked at compile time.
const _: () = assert!(PORT_TABLE + PORTS * PORT_STRIDE <= RING_CTL);
const _: () = assert!(P_GROUP + 4 <= P_DROPS && P_DROPS + 8 <= PORT_STRIDE);
const _: () = assert!(PORTS <= 255); // a port number and a count fit a byte each
const _: () = assert!(RING_CTL + PORTS * PORTS * RING_CTL_STRIDE <= DATA);
const _: () = assert!(SLOT_HEADER + MAX_FRAME <= SLOT_SIZE);
const _: () = assert!(SLOTS.is_power_of_two());

/// A MAP_SHARED mapping of the whole fabric file.
pub struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; it is only
// touched through atomics and bounds-checked copies, which are fine from any
// thread, and it is unmapped exactly once in Drop.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file` read/write, shared. The caller has checked
    /// that the file is at least `len` bytes long.
    pub fn map(file: &File, len: usize) -> Result<Mapping, LinkError> {
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL) of a file
        // descriptor we own; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(LinkError::last("mmap fabric file"));
        }
        match NonNull::new(p.cast::<u8>()) {
            Some(base) => Ok(Mapping { base, len }),
            None => Err(LinkError::Io {
                call: "mmap fabric file",
                err: std::io::Error::other("mmap returned NULL"),
            }),
        }
    }

    /// The u32 at `off` as an atomic; `off` comes from the layout functions
    /// above with port/slot numbers we validated, so it is in bounds and aligned.
    pub fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        let off = off.min(self.len - 4) & !3;
        // SAFETY: in bounds and 4-aligned (clamped above; the mapping is
        // page-aligned); AtomicU32 has interior mutability, so concurrent
        // writers in other processes are allowed; the reference lives no
        // longer than `self`, which keeps the mapping alive.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast::<u32>()) }
    }

    /// The u64 at `off` as an atomic (see `u32_at`).
    pub fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8) && off + 8 <= self.len);
        let off = off.min(self.len - 8) & !7;
        // SAFETY: as in `u32_at`, with 8-byte alignment.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast::<u64>()) }
    }

    /// Copies `out.len()` bytes at `off` into private memory; false (nothing
    /// copied) when the range is outside the mapping.
    pub fn read(&self, off: usize, out: &mut [u8]) -> bool {
        if off.checked_add(out.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        // SAFETY: the range is inside the mapping (checked above) and `out`
        // is private memory that cannot overlap it. Bytes may change under us
        // only if a peer breaks the ring protocol; we only ever look at the
        // private copy, so that can garble a frame but not this process.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(off), out.as_mut_ptr(), out.len())
        };
        true
    }

    /// Prefetches the cache lines of `off..off + len`
    /// ([`outboard_board::shm::prefetch`]); ranges outside the mapping are ignored.
    pub fn prefetch(&self, off: usize, len: usize) {
        if off.checked_add(len).is_some_and(|end| end <= self.len) {
            outboard_board::shm::prefetch(self.base.as_ptr().wrapping_add(off), len);
        }
    }

    /// Copies `data` to `off`; false (nothing written) when out of range.
    pub fn write(&self, off: usize, data: &[u8]) -> bool {
        if off.checked_add(data.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        // SAFETY: the range is inside the mapping (checked above); the slot
        // belongs to us as the ring's single producer until we publish head.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.as_ptr().add(off), data.len())
        };
        true
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned; no references into
        // the mapping outlive `self` (all accessors borrow `self`).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// FUTEX_WAIT (shared, not private: the word lives in memory shared between
/// processes) while `*word == expected`, at most `timeout`. Returns whether
/// the wait ended for a reason other than the timeout (a wake, the value
/// having changed already, a signal).
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) -> bool {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 in a live mapping; `ts` outlives
    // the call; the remaining arguments are unused by FUTEX_WAIT.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    !(rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT))
}

/// Most words one `futex_waitv` takes (the kernel's limit).
pub const FUTEX_WAITV_MAX: usize = 128;

/// Sleeps until one of `words` no longer holds its expected value, a wake
/// on one of them, or `timeout` (Linux ≥ 5.16 `futex_waitv`, shared
/// futexes: the wakers are other processes). True unless it timed out.
pub fn futex_waitv(words: &[(&AtomicU32, u32)], timeout: Duration) -> bool {
    #[repr(C)]
    struct FutexWaitv {
        val: u64,
        uaddr: u64,
        flags: u32,
        reserved: u32,
    }
    const FUTEX2_SIZE_U32: u32 = 2;
    let v: Vec<FutexWaitv> = words
        .iter()
        .take(FUTEX_WAITV_MAX)
        .map(|(w, e)| FutexWaitv { val: u64::from(*e), uaddr: w.as_ptr() as u64, flags: FUTEX2_SIZE_U32, reserved: 0 })
        .collect();
    // futex_waitv takes an absolute CLOCK_MONOTONIC deadline.
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let total = now.tv_nsec as u64 + timeout.subsec_nanos() as u64;
    let ts = libc::timespec {
        tv_sec: now.tv_sec + timeout.as_secs().min(i32::MAX as u64) as libc::time_t + (total / 1_000_000_000) as libc::time_t,
        tv_nsec: (total % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `v` holds valid waiters for live, aligned words; `ts` outlives the call.
    let rc = unsafe {
        libc::syscall(libc::SYS_futex_waitv, v.as_ptr(), v.len() as u32, 0u32, &ts as *const libc::timespec, libc::CLOCK_MONOTONIC)
    };
    !(rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT))
}

/// FUTEX_WAKE every waiter on `word` (in any process).
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned u32 in a live mapping; FUTEX_WAKE
    // only reads the address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
}

/// flock(2) on the file; Err carries the errno (EWOULDBLOCK with LOCK_NB).
pub fn flock(file: &File, op: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Whether process `pid` exists (kill(pid, 0): ESRCH means gone; EPERM
/// means it exists but belongs to someone else). Values that are not a
/// positive pid count as dead.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only checks existence/permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// poll(2) the fds for readability without blocking: whether any is ready.
pub fn any_readable(fds: &[std::os::fd::RawFd]) -> bool {
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfds that outlives the call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 0) };
    rc > 0
}
