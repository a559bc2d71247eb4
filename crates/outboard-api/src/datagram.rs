//! Datagrams: received ones are messages in the socket's mailbox (a buffer
//! the engine filled, lent to us until `end_get` gives it back: its source
//! address in the first `layout::DGRAM_HEADER` bytes, then the payload); sent ones
//! are written into one of our send buffers and handed to the engine, which
//! copies it into a frame and hands the buffer back (`BUF_RETURN`).

use crate::board::{Board, Mode};
use crate::{EndpointId, Error, Result};
use outboard_board::command::Endpoint;
use outboard_board::layout::{status, DGRAM_HEADER};
use outboard_board::{BoardCommand, Descriptor, NetAddr};
use std::net::SocketAddr;

/// A UDP socket through the engine. Received datagrams are messages in the
/// socket's mailbox (read in place with `begin_get`/`end_get`); sent ones
/// are written in place into a board buffer (`begin_put`/`end_put_to`).
pub struct Datagram {
    pub(crate) board: Board,
    pub(crate) id: EndpointId,
}

impl Datagram {
    pub fn id(&self) -> EndpointId {
        self.id
    }
    /// The engine shard that serves this socket (the shard of the core that bound it).
    pub fn shard(&self) -> u32 {
        self.board.inner.borrow().ep_shard(self.id)
    }
    fn mode(&self) -> Mode {
        let b = self.board.inner.borrow();
        b.eps[self.id as usize].mode.unwrap_or(b.mode)
    }
    pub fn set_mode(&mut self, mode: Mode) {
        self.board.inner.borrow_mut().eps[self.id as usize].mode = Some(mode);
    }
    pub fn local_port(&self) -> u16 {
        self.board.inner.borrow().addr(self.id, status::LOCAL).map_or(0, |a| a.port())
    }
    /// Sends one datagram to `to` (either family: the engine drops one of a
    /// family it does not run).
    pub fn send_to(&mut self, data: &[u8], to: impl Into<SocketAddr>) -> Result<usize> {
        let to = to.into();
        let buf = self.begin_put()?;
        if data.len() > buf.len() {
            let _ = self.end_put_to(0, to);
            return Err(Error::Errno(libc::EMSGSIZE));
        }
        buf[..data.len()].copy_from_slice(data);
        self.board.inner.borrow_mut().copies.send_copied += data.len() as u64;
        self.end_put_to(data.len(), to)?;
        Ok(data.len())
    }
    pub fn recv_from(&mut self, buf: &mut [u8]) -> Result<(usize, SocketAddr)> {
        let (n, from) = {
            let (msg, from) = self.begin_get()?;
            let n = msg.len().min(buf.len());
            buf[..n].copy_from_slice(&msg[..n]);
            (n, from)
        };
        self.board.inner.borrow_mut().copies.recv_copied += n as u64;
        self.end_get()?;
        Ok((n, from))
    }
    /// A board buffer to write one datagram into.
    pub fn begin_put(&mut self) -> Result<&mut [u8]> {
        if self.board.inner.borrow().eps[self.id as usize].put_buf.is_none() {
            let mut got = None;
            self.board.wait(self.mode(), None, |i| {
                got = i.dgram_tx.alloc();
                got.is_some()
            })?;
            self.board.inner.borrow_mut().eps[self.id as usize].put_buf = got;
        }
        let i = self.board.inner.borrow();
        let b = i.eps[self.id as usize].put_buf.ok_or(Error::WouldBlock)?;
        let (off, size) = (i.layout.arena.offset_of(b), i.layout.arena.size_of(b));
        let map = i.map.clone();
        drop(i);
        // SAFETY: a send buffer we hold (from our free list, not handed to the
        // engine), inside the mapping the board keeps alive; `&mut self` makes
        // this the only slice of it.
        Ok(unsafe { std::slice::from_raw_parts_mut(map.as_ptr().add(off), size) })
    }
    /// Sends the first `n` bytes of the `begin_put` buffer to `to` (n = 0 gives the buffer back unsent).
    pub fn end_put_to(&mut self, n: usize, to: impl Into<SocketAddr>) -> Result<()> {
        let to = to.into();
        let mut i = self.board.inner.borrow_mut();
        let b = i.eps[self.id as usize].put_buf.take().ok_or(Error::Invalid("end_put_to without begin_put"))?;
        let (off, size) = (i.layout.arena.offset_of(b), i.layout.arena.size_of(b));
        if n == 0 {
            i.dgram_tx.free(b);
            return Ok(());
        }
        if n > size {
            i.dgram_tx.free(b);
            return Err(Error::Errno(libc::EMSGSIZE));
        }
        i.command(BoardCommand::UdpSend { ep: Endpoint(self.id), offset: off as u64, len: n as u64, to })
    }
    /// The next datagram in place, and its source.
    pub fn begin_get(&mut self) -> Result<(&[u8], SocketAddr)> {
        let mut err = None;
        let id = self.id as usize;
        self.board.wait(self.mode(), None, |i| {
            if i.eps[id].held.is_some() {
                return true;
            }
            let got = i.eps[id].mailbox.as_mut().and_then(|m| m.begin_get().ok().flatten());
            if let Some(d) = got {
                i.eps[id].held = Some(d);
                return true;
            }
            if i.error(id as u32) != 0 {
                err = Some(Error::from_errno(i.error(id as u32) as i32));
                // ICMP errors are reported once, as on Linux.
                i.map.atomic_u32(i.layout.endpoint_status(id as u32) + status::ERROR).store(0, std::sync::atomic::Ordering::Relaxed);
                return true;
            }
            false
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        let i = self.board.inner.borrow();
        let d = i.eps[id].held.ok_or(Error::WouldBlock)?;
        let (payload, len) = received(&i.layout.arena, d)?;
        let from = i.map.read::<NetAddr>(d.offset as usize).to_socket_addr();
        let map = i.map.clone();
        drop(i);
        let from = from.map_err(|_| Error::Invalid("the engine posted a datagram without a source address"))?;
        // SAFETY: checked by `received` to lie in one arena buffer inside the
        // mapping; the engine lent it to us until `end_get`.
        let msg = unsafe { std::slice::from_raw_parts(map.as_ptr().add(payload), len) };
        Ok((msg, from))
    }
    /// Gives the datagram `begin_get` returned back to the engine.
    pub fn end_get(&mut self) -> Result<()> {
        let mut i = self.board.inner.borrow_mut();
        let id = self.id as usize;
        let d = i.eps[id].held.take().ok_or(Error::Invalid("end_get without begin_get"))?;
        if let Some(m) = i.eps[id].mailbox.as_mut() {
            m.end_get();
        }
        // The buffer's start, to the shard that lent it (the socket's).
        let shard = i.ep_shard(self.id);
        i.put_command(shard, BoardCommand::UdpRelease { offset: u64::from(d.offset) }.encode())
    }
}

impl Drop for Datagram {
    fn drop(&mut self) {
        if let Ok(mut i) = self.board.inner.try_borrow_mut() {
            i.eps[self.id as usize].open = false;
            let _ = i.command(BoardCommand::Close { ep: Endpoint(self.id) });
        }
    }
}

/// Where a received datagram's payload is (board offset, length): after its
/// source address, the whole of both inside one arena buffer.
fn received(arena: &outboard_board::ArenaLayout, d: Descriptor) -> Result<(usize, usize)> {
    let whole = DGRAM_HEADER as u64 + u64::from(d.len);
    if arena.locate(u64::from(d.offset), whole).is_none() {
        return Err(Error::Invalid("the engine posted a datagram outside the board"));
    }
    Ok((d.offset as usize + DGRAM_HEADER, d.len as usize))
}
