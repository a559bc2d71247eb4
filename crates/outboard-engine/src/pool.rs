//! Buffer pools: fixed size classes, free-list reuse, a hard memory cap.
//!
//! A shard allocates every packet and payload buffer here. Buffers come in
//! a few size classes (2 KiB for a frame, 16 KiB and 64 KiB for coalesced
//! data by default); a freed buffer goes to its class's free list and the
//! next allocation of that class takes it back, so the steady state
//! allocates nothing from the system.
//!
//! Memory is bounded: the pool's footprint (buffers in use plus buffers
//! cached on free lists) never exceeds `cap_bytes`. When a fresh buffer
//! would cross the cap, cached buffers of other classes are released first;
//! only if that is not enough does the allocation fail with `OverCap`.
//!
//! Watermarks turn the bytes in use into a [`Pressure`] level a shard acts
//! on before the cap is hit: at `Low` it stops accepting connections and
//! shrinks windows, at `Critical` it drops new inbound data.

/// Default size classes: a 2 KiB frame, 16 KiB and 64 KiB (a full TSO/GRO
/// segment).
pub const DEFAULT_CLASSES: [usize; 3] = [2 * 1024, 16 * 1024, 64 * 1024];

/// Sizes and limits of a pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Buffer sizes in bytes, strictly ascending, at most 255 classes.
    pub classes: Vec<usize>,
    /// Hard limit on in-use plus cached bytes.
    pub cap_bytes: usize,
    /// In-use bytes at which pressure becomes `Low`.
    pub low_watermark: usize,
    /// In-use bytes at which pressure becomes `Critical`.
    pub high_watermark: usize,
}

impl PoolConfig {
    /// Default classes, with watermarks at 50 % and 80 % of `cap_bytes`.
    pub fn with_cap(cap_bytes: usize) -> PoolConfig {
        PoolConfig {
            classes: DEFAULT_CLASSES.to_vec(),
            cap_bytes,
            low_watermark: cap_bytes / 2,
            high_watermark: cap_bytes / 5 * 4,
        }
    }
}

/// Why a configuration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// No classes, more than 255, a zero size, or sizes not strictly ascending.
    BadClasses,
    /// Watermarks must satisfy `low <= high <= cap`.
    BadWatermarks,
}

/// Why an allocation (or a free) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolError {
    /// The buffer would take the pool past its memory cap.
    OverCap,
    /// Larger than the largest size class.
    TooLarge,
    /// `free` was given a buffer this pool does not account for.
    ForeignBuffer,
}

/// Memory pressure, from the bytes in use against the watermarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pressure {
    /// Below the low watermark.
    Normal,
    /// At or above the low watermark: memory is running low.
    Low,
    /// At or above the high watermark: shed load now.
    Critical,
}

/// A buffer from a pool: `capacity()` bytes of storage of which the first
/// `len()` are in use. Return it with [`BufferPool::free`]; a buffer merely
/// dropped is released to the system but stays counted as in use.
#[derive(Debug)]
#[must_use = "return buffers to their pool with BufferPool::free"]
pub struct Buffer {
    data: Box<[u8]>,
    len: usize,
    class: u8,
}

impl Buffer {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The size of the buffer's class.
    pub fn capacity(&self) -> usize {
        self.data.len()
    }
    /// Index of the size class this buffer belongs to.
    pub fn class(&self) -> usize {
        usize::from(self.class)
    }
    pub fn as_slice(&self) -> &[u8] {
        &self.data[..self.len]
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data[..self.len]
    }
    /// Shortens the buffer; no effect if `len` is not shorter. (There is no
    /// way to grow past the allocated length: reused storage is only zeroed
    /// up to it.)
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

/// Counters for one size class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    pub size: usize,
    pub in_use: usize,
    /// Buffers waiting on the free list.
    pub cached: usize,
    pub allocations: u64,
}

/// Pool-wide counters; every failure has its reason's counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub in_use_bytes: usize,
    pub peak_in_use_bytes: usize,
    /// Bytes on free lists.
    pub cached_bytes: usize,
    pub allocations: u64,
    pub frees: u64,
    /// Allocations served from a free list.
    pub reused: u64,
    /// Allocations that took fresh memory.
    pub fresh: u64,
    /// Cached buffers released to make room under the cap.
    pub reclaimed: u64,
    pub failed_over_cap: u64,
    pub failed_too_large: u64,
    pub rejected_frees: u64,
}

impl PoolStats {
    /// In-use plus cached bytes: what the pool holds; never above the cap.
    pub fn footprint_bytes(&self) -> usize {
        self.in_use_bytes + self.cached_bytes
    }
}

/// A set of size-classed free lists under one memory cap.
#[derive(Debug)]
pub struct BufferPool {
    config: PoolConfig,
    free: Vec<Vec<Box<[u8]>>>,
    classes: Vec<ClassStats>,
    stats: PoolStats,
}

impl BufferPool {
    pub fn new(config: PoolConfig) -> Result<BufferPool, ConfigError> {
        let c = &config.classes;
        let ascending = c.windows(2).all(|w| w[0] < w[1]);
        if c.is_empty() || c.len() > usize::from(u8::MAX) || c[0] == 0 || !ascending {
            return Err(ConfigError::BadClasses);
        }
        if config.low_watermark > config.high_watermark || config.high_watermark > config.cap_bytes
        {
            return Err(ConfigError::BadWatermarks);
        }
        let classes = c
            .iter()
            .map(|&size| ClassStats {
                size,
                ..ClassStats::default()
            })
            .collect();
        Ok(BufferPool {
            free: vec![Vec::new(); c.len()],
            classes,
            stats: PoolStats::default(),
            config,
        })
    }

    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    pub fn stats(&self) -> &PoolStats {
        &self.stats
    }

    pub fn class_stats(&self) -> &[ClassStats] {
        &self.classes
    }

    /// The pressure level from the bytes in use.
    pub fn pressure(&self) -> Pressure {
        let used = self.stats.in_use_bytes;
        if used >= self.config.high_watermark {
            Pressure::Critical
        } else if used >= self.config.low_watermark {
            Pressure::Low
        } else {
            Pressure::Normal
        }
    }

    /// A buffer of the smallest class holding `len` bytes, with `len()` =
    /// `len` and those bytes zeroed (a reused buffer must not show a
    /// previous owner's data).
    pub fn alloc(&mut self, len: usize) -> Result<Buffer, PoolError> {
        let Some(class) = self.config.classes.iter().position(|&size| size >= len) else {
            self.stats.failed_too_large += 1;
            return Err(PoolError::TooLarge);
        };
        let size = self.config.classes[class];
        if self.stats.in_use_bytes + size > self.config.cap_bytes {
            self.stats.failed_over_cap += 1;
            return Err(PoolError::OverCap);
        }
        let data = match self.free[class].pop() {
            Some(mut data) => {
                data[..len].fill(0);
                self.stats.cached_bytes -= size;
                self.classes[class].cached -= 1;
                self.stats.reused += 1;
                data
            }
            None => {
                self.reclaim_for(size);
                if self.stats.footprint_bytes() + size > self.config.cap_bytes {
                    self.stats.failed_over_cap += 1;
                    return Err(PoolError::OverCap);
                }
                self.stats.fresh += 1;
                vec![0u8; size].into_boxed_slice()
            }
        };
        self.stats.in_use_bytes += size;
        self.stats.peak_in_use_bytes = self.stats.peak_in_use_bytes.max(self.stats.in_use_bytes);
        self.stats.allocations += 1;
        self.classes[class].in_use += 1;
        self.classes[class].allocations += 1;
        // class < classes.len() <= 255, checked in `new`.
        Ok(Buffer {
            data,
            len,
            class: class as u8,
        })
    }

    /// Returns a buffer to its class's free list. A buffer whose size
    /// matches none of this pool's classes, or of a class with none in use,
    /// is refused; one from another pool with the same class size and
    /// buffers in use cannot be told apart and is accepted.
    pub fn free(&mut self, buf: Buffer) -> Result<(), PoolError> {
        let class = buf.class();
        let ours = self.config.classes.get(class) == Some(&buf.data.len())
            && self.classes[class].in_use > 0;
        if !ours {
            self.stats.rejected_frees += 1;
            return Err(PoolError::ForeignBuffer);
        }
        let size = buf.data.len();
        self.classes[class].in_use -= 1;
        self.classes[class].cached += 1;
        self.stats.in_use_bytes -= size;
        self.stats.cached_bytes += size;
        self.stats.frees += 1;
        self.free[class].push(buf.data);
        Ok(())
    }

    /// Releases every cached buffer to the system.
    pub fn trim(&mut self) {
        for class in 0..self.free.len() {
            while self.release_one(class) {}
        }
    }

    /// Releases cached buffers, largest class first, until `size` more bytes
    /// fit under the cap or nothing is cached.
    fn reclaim_for(&mut self, size: usize) {
        for class in (0..self.free.len()).rev() {
            while self.stats.footprint_bytes() + size > self.config.cap_bytes {
                if !self.release_one(class) {
                    break;
                }
                self.stats.reclaimed += 1;
            }
        }
    }

    fn release_one(&mut self, class: usize) -> bool {
        match self.free[class].pop() {
            Some(data) => {
                self.stats.cached_bytes -= data.len();
                self.classes[class].cached -= 1;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests;
