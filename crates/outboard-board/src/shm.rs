//! A shared mapping and bounds-checked access into it.
//!
//! Every accessor checks `offset + size <= len` (and alignment for atomics)
//! and panics on a violation: offsets passed here are always computed by the
//! caller from its own layout, never read from the board, so a failed check
//! is a bug of ours, not of the other side.

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Plain data: any bit pattern is a valid value, no padding that matters, no
/// pointers. Records read from a board are `Pod` so a hostile writer can
/// produce only wrong values, never undefined behaviour.
///
/// # Safety
/// Implement only for `#[repr(C)]` types made of integers (and arrays of them)
/// for which every bit pattern is valid.
pub unsafe trait Pod: Copy + 'static {}
// SAFETY: integers accept every bit pattern.
unsafe impl Pod for u8 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for u64 {}

/// Asks the CPU to start bringing the cache lines of `len` bytes from `p`
/// into this core's cache: a hint for memory another core is about to
/// write and we are about to read (the next slot of a ring we poll), so
/// that its data is on its way with the index that announces it, not
/// fetched after it. A prefetch reads nothing architecturally, changes
/// nothing and never faults, whatever the address; elsewhere than x86-64
/// it does nothing.
#[inline]
pub fn prefetch(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..len).step_by(64) {
        // SAFETY: PREFETCHT0 has no architectural effect and cannot fault,
        // even for an address outside any mapping (wrapping_add keeps the
        // pointer arithmetic itself defined).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(line).cast::<i8>())
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// A `MAP_SHARED` mapping, unmapped on drop. `Send + Sync`: all access goes
/// through atomics, volatile copies or byte slices whose aliasing rules the
/// caller states.
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; access discipline is documented per accessor.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// A new memfd named `name` of `len` bytes (zeroed), mapped shared.
    /// Returns the mapping and the memfd (to hand to the other side).
    ///
    /// The memfd is sealed against shrinking and growing: the other side
    /// receives the fd, and a shrunk file would turn our accesses into SIGBUS.
    pub fn create_memfd(name: &str, len: usize) -> io::Result<(Mapping, OwnedFd)> {
        check_len(len)?;
        let cname = CString::new(name).map_err(|_| invalid("memfd name contains a NUL byte"))?;
        // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
        let raw = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = libc::off_t::try_from(len).map_err(|_| invalid("mapping too large"))?;
        // SAFETY: plain syscall on a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: plain syscall on a descriptor we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let map = Self::mmap(fd.as_raw_fd(), len, libc::MAP_SHARED)?;
        Ok((map, fd))
    }
    /// Maps `len` bytes of a memfd received from the other side.
    ///
    /// Refuses a file shorter than `len` (touching past its end would SIGBUS).
    pub fn map_fd(fd: RawFd, len: usize) -> io::Result<Mapping> {
        check_len(len)?;
        // SAFETY: `stat` is plain data, zero is a valid value; fstat only writes it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a valid out-pointer; a bad fd yields EBADF.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if (st.st_size as u64) < len as u64 {
            return Err(invalid("file shorter than the requested mapping"));
        }
        Self::mmap(fd, len, libc::MAP_SHARED)
    }
    /// Anonymous shared memory (survives `fork`, for tests of two processes).
    pub fn anonymous_shared(len: usize) -> io::Result<Mapping> {
        check_len(len)?;
        Self::mmap(-1, len, libc::MAP_SHARED | libc::MAP_ANONYMOUS)
    }
    fn mmap(fd: RawFd, len: usize, flags: libc::c_int) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel; it aliases nothing of ours.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: ptr.cast(), len })
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Panics unless `[offset, offset + size)` lies in the mapping and
    /// `offset` is a multiple of `align`; returns the address of `offset`.
    #[inline]
    fn at(&self, offset: usize, size: usize, align: usize, what: &str) -> *mut u8 {
        match offset.checked_add(size) {
            Some(end) if end <= self.len => {}
            _ => panic!(
                "board access out of bounds: {what} of {size} bytes at offset {offset}, mapping is {} bytes",
                self.len
            ),
        }
        assert!(offset.is_multiple_of(align), "board access misaligned: {what} at offset {offset} needs {align}-byte alignment");
        // SAFETY: `offset <= len`, so the result stays inside (or one past) the mapping.
        unsafe { self.ptr.add(offset) }
    }
    /// Prefetches `len` bytes at `offset` ([`prefetch`]); nothing when the
    /// range is outside the mapping.
    #[inline]
    pub fn prefetch(&self, offset: usize, len: usize) {
        if offset.checked_add(len).is_some_and(|end| end <= self.len) {
            prefetch(self.ptr.wrapping_add(offset), len);
        }
    }
    /// The atomic u32 at `offset` (4-aligned).
    #[inline]
    pub fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        let p = self.at(offset, 4, std::mem::align_of::<AtomicU32>(), "atomic u32");
        // SAFETY: in bounds and aligned (the base is page-aligned); the memory
        // lives as long as `self`, and any bit pattern is a valid u32.
        unsafe { &*p.cast::<AtomicU32>() }
    }
    /// The atomic u64 at `offset` (8-aligned).
    #[inline]
    pub fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        let p = self.at(offset, 8, std::mem::align_of::<AtomicU64>(), "atomic u64");
        // SAFETY: as in `atomic_u32`.
        unsafe { &*p.cast::<AtomicU64>() }
    }
    /// A volatile copy of the record at `offset`.
    ///
    /// A record of whole 8-byte words at an 8-aligned offset (commands,
    /// events, status records) is copied a word at a time: a volatile read
    /// of the whole struct is lowered field by field and its byte arrays
    /// byte by byte, about 400 instructions for a 64-byte command.
    #[inline]
    pub fn read<T: Pod>(&self, offset: usize) -> T {
        let p = self.at(offset, size_of::<T>(), 1, "read");
        if size_of::<T>() > 8 && size_of::<T>().is_multiple_of(8) && (p as usize).is_multiple_of(8) {
            let mut out = MaybeUninit::<T>::uninit();
            let dst = out.as_mut_ptr().cast::<u8>();
            for i in (0..size_of::<T>()).step_by(8) {
                // SAFETY: `p + i .. p + i + 8` is in bounds (checked above)
                // and 8-aligned; `dst + i .. + 8` is inside `out`.
                unsafe { dst.add(i).cast::<u64>().write_unaligned(p.add(i).cast::<u64>().read_volatile()) };
            }
            // SAFETY: every byte was written, and `T: Pod` accepts any bytes.
            unsafe { out.assume_init() }
        } else if (p as usize).is_multiple_of(align_of::<T>()) {
            // SAFETY: in bounds and aligned; `T: Pod` accepts any bytes.
            unsafe { p.cast::<T>().read_volatile() }
        } else {
            // SAFETY: `p .. p + size_of::<T>()` is in bounds (checked above).
            unsafe { read_bytes(p) }
        }
    }
    /// A volatile store of `value` at `offset` (a word at a time where
    /// `read` copies so).
    #[inline]
    pub fn write<T: Pod>(&self, offset: usize, value: T) {
        let p = self.at(offset, size_of::<T>(), 1, "write");
        if size_of::<T>() > 8 && size_of::<T>().is_multiple_of(8) && (p as usize).is_multiple_of(8) {
            let src = (&value as *const T).cast::<u8>();
            for i in (0..size_of::<T>()).step_by(8) {
                // SAFETY: `src + i .. + 8` inside `value` (Pod: no padding);
                // `p + i .. + 8` in bounds and 8-aligned.
                unsafe { p.add(i).cast::<u64>().write_volatile(src.add(i).cast::<u64>().read_unaligned()) };
            }
        } else if (p as usize).is_multiple_of(align_of::<T>()) {
            // SAFETY: in bounds and aligned.
            unsafe { p.cast::<T>().write_volatile(value) };
        } else {
            // SAFETY: `p .. p + size_of::<T>()` is in bounds (checked above).
            unsafe { write_bytes(p, value) }
        }
    }
    /// Copies `src` into the board at `offset`.
    pub fn copy_in(&self, offset: usize, src: &[u8]) {
        let p = self.at(offset, src.len(), 1, "copy_in");
        // SAFETY: the destination is in bounds; `src` is private memory, so
        // the ranges cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) };
    }
    /// Copies bytes at `offset` out into `dst`.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) {
        let p = self.at(offset, dst.len(), 1, "copy_out");
        // SAFETY: the source is in bounds; `dst` is an exclusive borrow of
        // private memory, so the ranges cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) };
    }
    /// The bytes `[offset, offset + len)` as a slice.
    ///
    /// # Safety
    /// The caller must not hold a `bytes_mut` over an overlapping range at the
    /// same time. The other process may write these bytes concurrently; they
    /// are plain data, so the caller may only see garbled values.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        let p = self.at(offset, len, 1, "bytes");
        // SAFETY: in bounds, lives as long as `self`; aliasing is the caller's promise.
        unsafe { std::slice::from_raw_parts(p, len) }
    }
    /// The bytes `[offset, offset + len)` as a mutable slice.
    ///
    /// # Safety
    /// The caller must hold no other slice overlapping the range while this
    /// one lives (in this process); see `bytes` for the other process.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        let p = self.at(offset, len, 1, "bytes_mut");
        // SAFETY: in bounds, lives as long as `self`; exclusivity is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }
    /// Base address, for tests that must scribble over the whole board.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from a successful mmap and are unmapped
        // once; every borrow into the mapping borrows `self`, so none outlives it.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn check_len(len: usize) -> io::Result<()> {
    if len == 0 {
        return Err(invalid("an empty mapping"));
    }
    Ok(())
}

/// `Mapping::read`'s byte-at-a-time copy, for a record at an offset its
/// words cannot be read at. Out of line on purpose: inlined beside the word
/// copy, it made the compiler keep every record as 64 separate bytes, and
/// the word copy took apart and put back each word a byte at a time (about
/// 340 instructions for a 64-byte command instead of 16).
///
/// # Safety
/// `p .. p + size_of::<T>()` must be readable.
#[cold]
#[inline(never)]
unsafe fn read_bytes<T: Pod>(p: *const u8) -> T {
    let mut out = MaybeUninit::<T>::uninit();
    let dst = out.as_mut_ptr().cast::<u8>();
    for i in 0..size_of::<T>() {
        // SAFETY: `p + i` is readable (the caller's word), `dst + i` inside `out`.
        unsafe { dst.add(i).write(p.add(i).read_volatile()) };
    }
    // SAFETY: every byte was written, and `T: Pod` accepts any bytes.
    unsafe { out.assume_init() }
}

/// `Mapping::write`'s byte-at-a-time store (see `read_bytes`).
///
/// # Safety
/// `p .. p + size_of::<T>()` must be writable.
#[cold]
#[inline(never)]
unsafe fn write_bytes<T: Pod>(p: *mut u8, value: T) {
    let src = (&value as *const T).cast::<u8>();
    for i in 0..size_of::<T>() {
        // SAFETY: `src + i` inside `value` (Pod: no padding), `p + i` writable.
        unsafe { p.add(i).write_volatile(src.add(i).read()) };
    }
}

#[cfg(test)]
mod tests;
