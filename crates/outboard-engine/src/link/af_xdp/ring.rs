//! The four AF_XDP rings and the UMEM, mapped from the XSK.
//!
//! Each ring is a power-of-two array of descriptors plus a producer and a
//! consumer index (free-running u32s) shared with the kernel. The side that
//! produces writes descriptors, then publishes the producer index with
//! Release; the side that consumes reads the producer index with Acquire,
//! reads the descriptors, then publishes its consumer index with Release.
//! Fill and TX are ours to produce; RX and completion are ours to consume.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// An `mmap`ed region, unmapped on drop.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// Anonymous private memory, zeroed, populated up front.
    pub fn anonymous(len: usize) -> io::Result<Mapping> {
        Self::map(
            len,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    }

    /// `len` bytes of the memfd `fd`, shared, populated up front (the UMEM:
    /// an engine that upgrades this one maps the same pages from the fd).
    pub fn shared(fd: RawFd, len: usize) -> io::Result<Mapping> {
        Self::map(len, libc::MAP_SHARED | libc::MAP_POPULATE, fd, 0)
    }

    /// A ring of the XSK `fd` at page offset `pgoff`.
    pub fn ring(fd: RawFd, len: usize, pgoff: u64) -> io::Result<Mapping> {
        Self::map(
            len,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff as libc::off_t,
        )
    }

    fn map(len: usize, flags: libc::c_int, fd: RawFd, off: libc::off_t) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL); no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(p as *mut u8)
            .map(|ptr| Mapping { ptr, len })
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn size(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping we created and nothing else unmaps; every
        // reference into it (rings, UMEM slices) is owned by structures dropped before or with it.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// One mapped ring with descriptors of type `D` (`u64` for fill/completion,
/// `libc::xdp_desc` for RX/TX).
pub struct Ring<D: Copy> {
    /// Keeps the pointers below valid.
    _map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut D,
    mask: u32,
    size: u32,
    /// Our own index (producer on fill/TX, consumer on RX/completion), ahead of
    /// what the kernel has seen until published.
    local: u32,
    /// Last seen value of the other side's index.
    cached: u32,
}

impl<D: Copy> Ring<D> {
    /// Wraps ring `map` laid out as `off` says, with `size` entries (a power of two).
    pub fn new(
        map: Mapping,
        off: &libc::xdp_ring_offset,
        size: u32,
        producer_side: bool,
    ) -> io::Result<Ring<D>> {
        let end = off.desc as usize + size as usize * std::mem::size_of::<D>();
        let fits = |o: u64| (o as usize) + 4 <= map.size() && o.is_multiple_of(4);
        if !size.is_power_of_two()
            || end > map.size()
            || !fits(off.producer)
            || !fits(off.consumer)
            || !fits(off.flags)
        {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let base = map.as_ptr();
        // SAFETY: all offsets were checked to lie inside the mapping just above, and are
        // 4-byte aligned (descriptors at `desc` are aligned by the kernel's layout).
        let (producer, consumer, flags, descs) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize) as *mut D,
            )
        };
        let mut r = Ring {
            _map: map,
            producer,
            consumer,
            flags,
            descs,
            mask: size - 1,
            size,
            local: 0,
            cached: 0,
        };
        if producer_side {
            r.local = r.prod().load(Ordering::Relaxed);
            r.cached = r.cons().load(Ordering::Acquire);
        } else {
            r.local = r.cons().load(Ordering::Relaxed);
            r.cached = r.prod().load(Ordering::Acquire);
        }
        Ok(r)
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into `self.map`, which lives as long as `self`; the kernel accesses it
        // only atomically (READ_ONCE/smp_store_release), so an AtomicU32 view is sound.
        unsafe { &*self.producer }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as for `prod`.
        unsafe { &*self.consumer }
    }

    /// The ring's flags word (XDP_RING_NEED_WAKEUP).
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `prod`.
        let flags = unsafe { &*self.flags };
        flags.load(Ordering::Acquire) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, idx: u32) -> *mut D {
        // SAFETY: `idx & mask` < size, and the descriptor array of `size` entries lies inside the mapping.
        unsafe { self.descs.add((idx & self.mask) as usize) }
    }

    // ---- producer side (fill, TX) ----

    /// Free slots we may write without overtaking the kernel.
    pub fn free(&mut self) -> u32 {
        let free = self.size - self.local.wrapping_sub(self.cached);
        if free > 0 {
            return free;
        }
        self.cached = self.cons().load(Ordering::Acquire);
        self.size - self.local.wrapping_sub(self.cached)
    }

    /// Whether `n` slots are free, re-reading the kernel's consumer index if
    /// the cached one says fewer.
    pub fn has_free(&mut self, n: u32) -> bool {
        if self.size - self.local.wrapping_sub(self.cached) >= n {
            return true;
        }
        self.cached = self.cons().load(Ordering::Acquire);
        self.size - self.local.wrapping_sub(self.cached) >= n
    }

    /// Writes one descriptor at our producer index (call `free` first); not yet visible.
    pub fn push(&mut self, d: D) {
        // SAFETY: the caller checked `free() > 0`, so the kernel is done with this slot
        // (its consumer index passed it, read with Acquire).
        unsafe { self.slot(self.local).write(d) };
        self.local = self.local.wrapping_add(1);
    }

    /// Publishes pushed descriptors to the kernel.
    pub fn submit(&mut self) {
        self.prod().store(self.local, Ordering::Release);
    }

    /// Descriptors we published that the kernel has not consumed yet.
    pub fn pending(&self) -> u32 {
        self.local.wrapping_sub(self.cons().load(Ordering::Acquire))
    }

    // ---- consumer side (RX, completion) ----

    /// How many descriptors the kernel has produced that we have not consumed.
    pub fn available(&mut self) -> u32 {
        let n = self.cached.wrapping_sub(self.local);
        if n > 0 {
            return n;
        }
        self.cached = self.prod().load(Ordering::Acquire);
        self.cached.wrapping_sub(self.local)
    }

    /// Reads the `i`-th available descriptor (`i < available()`).
    pub fn peek(&self, i: u32) -> D {
        // SAFETY: the caller keeps `i` below `available()`: the kernel published this slot
        // (producer index read with Acquire) and will not touch it until we release it.
        unsafe { self.slot(self.local.wrapping_add(i)).read() }
    }

    /// Gives `n` consumed descriptors back to the kernel.
    pub fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.cons().store(self.local, Ordering::Release);
    }
}
