//! A stream region of a board as a TCP ring's storage: the connection's
//! send or receive bytes live in the application's board, so the engine
//! copies each byte once (frame ↔ board) and the application reads and
//! writes in place. The region goes back to its board's free list when the
//! connection drops its storage (after the last retransmission is
//! acknowledged, or when the connection is freed).

use outboard_board::{BufRef, FreeList, Mapping};
use std::sync::{Arc, Mutex};

pub struct BoardRegion {
    /// The board's number (its session id): with the offset, the region's place.
    board: u64,
    map: Arc<Mapping>,
    offset: usize,
    len: usize,
    buf: BufRef,
    free: Arc<Mutex<FreeList>>,
}

impl std::fmt::Debug for BoardRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BoardRegion({:#x}+{})", self.offset, self.len)
    }
}

impl BoardRegion {
    /// `buf` (taken from `free`) at `[offset, offset + len)` of `map`; the
    /// caller computed both from its own layout.
    pub fn new(board: u64, map: Arc<Mapping>, buf: BufRef, offset: usize, len: usize, free: Arc<Mutex<FreeList>>) -> Self {
        assert!(offset.checked_add(len).is_some_and(|end| end <= map.len()));
        BoardRegion { board, map, offset, len, buf, free }
    }
}

impl outboard_tcp::RingStorage for BoardRegion {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the range is inside the mapping (checked in `new`), which
        // `self.map` keeps alive; this region is handed to exactly one ring,
        // which holds no other slice of it while this one lives. The
        // application may write these bytes at any time: they are payload,
        // plain data, and only ever garble its own stream.
        unsafe { self.map.bytes(self.offset, self.len) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `bytes`; `&mut self` makes this the only slice in the engine.
        unsafe { self.map.bytes_mut(self.offset, self.len) }
    }
    fn place(&self) -> Option<(u64, u64)> {
        Some((self.board, self.offset as u64))
    }
}

impl Drop for BoardRegion {
    fn drop(&mut self) {
        if let Ok(mut f) = self.free.lock() {
            f.free(self.buf);
        }
    }
}
