//! The arena: buffers in fixed size classes, laid out once when the board
//! is made. Which side holds a buffer is tracked by each side privately: the
//! engine's [`OwnerTable`] is the authority it checks every descriptor an
//! application hands it against; a [`FreeList`] is one side's stock of
//! buffers it may fill. Nothing here lives in the board.

/// One size class: `count` buffers of `size` bytes from `offset` (board offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassSpec {
    pub size: u32,
    pub count: u32,
    pub offset: usize,
}

/// A buffer: its class and index in the class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufRef {
    pub class: u8,
    pub index: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArenaLayout {
    pub classes: Vec<ClassSpec>,
}

impl ArenaLayout {
    /// Board offset of the buffer's first byte.
    ///
    /// Panics if `b` is not a buffer of this layout (a caller bug: check
    /// references from the other side with `locate` or `OwnerTable::owner`).
    pub fn offset_of(&self, b: BufRef) -> usize {
        let c = self.class(b);
        c.offset + b.index as usize * c.size as usize
    }
    pub fn size_of(&self, b: BufRef) -> usize {
        self.class(b).size as usize
    }
    fn class(&self, b: BufRef) -> &ClassSpec {
        match self.classes.get(b.class as usize) {
            Some(c) if b.index < c.count => c,
            _ => panic!("{b:?} is not a buffer of this arena"),
        }
    }
    /// The buffer that wholly contains `[offset, offset + len)`, if any
    /// (`len` may be 0; an `adjust`ed message starts inside its buffer).
    /// Total: any pair of numbers gives Some or None, never a panic.
    ///
    /// An empty range exactly at the boundary of two buffers belongs to the
    /// one that starts there (an empty message at a buffer's start).
    pub fn locate(&self, offset: u64, len: u64) -> Option<BufRef> {
        let end = offset.checked_add(len)?;
        // Class numbers are u8: a class past 255 cannot be named.
        for (class, c) in self.classes.iter().enumerate().take(256) {
            let size = u64::from(c.size);
            let start = c.offset as u64;
            let Some(class_end) = size.checked_mul(u64::from(c.count)).and_then(|b| b.checked_add(start)) else {
                continue;
            };
            if size == 0 || offset < start || offset >= class_end {
                continue;
            }
            let index = (offset - start) / size;
            // index < count, so this cannot overflow (class_end did not).
            let buf_end = start + (index + 1) * size;
            if end <= buf_end {
                return Some(BufRef { class: class as u8, index: index as u32 });
            }
            return None;
        }
        None
    }
    /// Buffers in every class.
    pub fn total_buffers(&self) -> usize {
        self.classes.iter().map(|c| c.count as usize).sum()
    }
}

/// A LIFO stock of buffers of one side (private memory).
#[derive(Debug, Clone, Default)]
pub struct FreeList {
    free: Vec<BufRef>,
}

impl FreeList {
    pub fn new(bufs: impl IntoIterator<Item = BufRef>) -> FreeList {
        FreeList { free: bufs.into_iter().collect() }
    }
    pub fn alloc(&mut self) -> Option<BufRef> {
        self.free.pop()
    }
    pub fn free(&mut self, b: BufRef) {
        self.free.push(b)
    }
    pub fn len(&self) -> usize {
        self.free.len()
    }
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }
    /// The buffers in stock, in stock order (live upgrade: the engine's record).
    pub fn items(&self) -> &[BufRef] {
        &self.free
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Engine,
    App,
}

/// Who holds each buffer (the engine's private record).
#[derive(Debug, Clone)]
pub struct OwnerTable {
    /// Per class, per buffer.
    owners: Vec<Vec<Side>>,
}

impl OwnerTable {
    /// Every buffer starts with `initial(class, index)`.
    pub fn new(layout: &ArenaLayout, initial: impl Fn(BufRef) -> Side) -> OwnerTable {
        let owners = layout
            .classes
            .iter()
            .enumerate()
            .map(|(class, c)| (0..c.count).map(|index| initial(BufRef { class: class as u8, index })).collect())
            .collect();
        OwnerTable { owners }
    }
    pub fn owner(&self, b: BufRef) -> Option<Side> {
        self.owners.get(b.class as usize)?.get(b.index as usize).copied()
    }
    /// Hands `b` from `from` to `to`; Err(actual owner) if `from` does not
    /// hold it (or None if `b` is out of range): a violation when an
    /// application claims a buffer it does not hold.
    pub fn transfer(&mut self, b: BufRef, from: Side, to: Side) -> Result<(), Option<Side>> {
        let slot = self.owners.get_mut(b.class as usize).and_then(|c| c.get_mut(b.index as usize)).ok_or(None)?;
        if *slot != from {
            return Err(Some(*slot));
        }
        *slot = to;
        Ok(())
    }
    /// Every buffer `side` holds now (live upgrade: the engine's record).
    pub fn list(&self, side: Side) -> Vec<BufRef> {
        let mut out = Vec::new();
        for (class, c) in self.owners.iter().enumerate() {
            for (index, s) in c.iter().enumerate() {
                if *s == side {
                    out.push(BufRef { class: class as u8, index: index as u32 });
                }
            }
        }
        out
    }
    /// Sets who holds `b` (live upgrade: read back from the record). False if `b` is out of range.
    pub fn set(&mut self, b: BufRef, side: Side) -> bool {
        match self.owners.get_mut(b.class as usize).and_then(|c| c.get_mut(b.index as usize)) {
            Some(slot) => {
                *slot = side;
                true
            }
            None => false,
        }
    }
    /// Buffers `side` holds now.
    pub fn held_by(&self, side: Side) -> usize {
        self.owners.iter().flatten().filter(|&&s| s == side).count()
    }
}

#[cfg(test)]
mod tests;
