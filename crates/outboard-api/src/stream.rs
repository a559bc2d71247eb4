//! Streams: the bytes live in two regions of the board. Byte k of the
//! received stream is at `rx_offset + k % rx_size`, byte k of the sent
//! stream at `tx_offset + k % tx_size`; the engine publishes how far it has
//! filled (`rx_total`) and how far the peer has acknowledged (`tx_acked`),
//! and we tell it how far we consumed (CONSUMED) and produced (PUSH).

use crate::board::{Board, Inner, Mode};
use crate::{EndpointId, Error, Result};
use outboard_board::command::{Endpoint, StreamOption};
use outboard_board::layout::status;
use outboard_board::shm::Mapping;
use outboard_board::BoardCommand;
use outboard_trace::Hop;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// What an address getter gives when the status record holds no address
/// (as a v2 board's zero words read: `0.0.0.0:0`).
pub(crate) const NO_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// A TCP stream through the engine. Its bytes live in two regions of the
/// board: the engine writes received bytes into one (read them in place with
/// `begin_get`/`end_get`, or copy them out with `recv`), and sends from the
/// other (fill it in place with `begin_put`/`end_put`, or copy in with `send`).
/// Dropping it closes it (FIN after what is queued).
pub struct Stream {
    pub(crate) board: Board,
    pub(crate) id: EndpointId,
    rx: (usize, usize),
    tx: (usize, usize),
    /// A `set_quickack` went to the engine after TCP_INFO was published:
    /// the next `tcp_info` asks again, so it reads the mode just set.
    pub(crate) info_stale: std::cell::Cell<bool>,
}

/// Copies `bytes` into the ring region `(offset, size)` at `at`, wrapping
/// past its end (a piece of the region's size at most).
fn ring_copy_in(map: &Mapping, region: (usize, usize), at: usize, bytes: &[u8]) {
    let a = bytes.len().min(region.1 - at);
    map.copy_in(region.0 + at, &bytes[..a]);
    if a < bytes.len() {
        map.copy_in(region.0, &bytes[a..]);
    }
}

/// Fills `out` from the ring region `(offset, size)` at `at`, wrapping past its end.
fn ring_copy_out(map: &Mapping, region: (usize, usize), at: usize, out: &mut [u8]) {
    let a = out.len().min(region.1 - at);
    let (first, rest) = out.split_at_mut(a);
    map.copy_out(region.0 + at, first);
    if !rest.is_empty() {
        map.copy_out(region.0, rest);
    }
}

impl Stream {
    pub(crate) fn new(board: Board, id: EndpointId) -> Stream {
        let (rx, tx) = board.inner.borrow().regions(id).unwrap_or(((0, 0), (0, 0)));
        Stream { board, id, rx, tx, info_stale: std::cell::Cell::new(false) }
    }
    pub fn id(&self) -> EndpointId {
        self.id
    }
    /// The engine shard that serves this stream (the one whose hash its
    /// 4-tuple names: where its SYN arrived, or the shard of the core that
    /// connected it).
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

    fn check_regions(&self) -> Result<()> {
        if self.rx.1 == 0 || self.tx.1 == 0 {
            return Err(Error::Invalid("the engine gave this stream no regions"));
        }
        Ok(())
    }

    /// The most bytes written and not yet acknowledged: the transmit
    /// region's size, or less under `set_send_limit`.
    fn tx_cap(&self, i: &Inner) -> usize {
        match i.eps[self.id as usize].tx_limit {
            0 => self.tx.1,
            l => (l as usize).min(self.tx.1),
        }
    }

    /// Room in the transmit region and its contiguous part: (free, at, contiguous).
    fn tx_room(&self, i: &Inner) -> (usize, usize, usize) {
        let ep = &i.eps[self.id as usize];
        let in_flight = ep.tx_produced.saturating_sub(i.tx_acked(self.id)) as usize;
        let free = self.tx_cap(i).saturating_sub(in_flight);
        let at = (ep.tx_produced % self.tx.1 as u64) as usize;
        (free, at, free.min(self.tx.1 - at))
    }

    fn rx_ready(&self, i: &Inner) -> (usize, usize, usize) {
        let ep = &i.eps[self.id as usize];
        let avail = i.rx_total(self.id).saturating_sub(ep.rx_consumed) as usize;
        let avail = avail.min(self.rx.1);
        let at = (ep.rx_consumed % self.rx.1 as u64) as usize;
        (avail, at, avail.min(self.rx.1 - at))
    }

    fn stream_error(&self, i: &Inner) -> Option<Error> {
        match i.error(self.id) {
            0 => None,
            e => Some(Error::from_errno(e as i32)),
        }
    }

    /// Waits for room to write; Err on error/shutdown.
    fn wait_writable(&self) -> Result<()> {
        self.check_regions()?;
        if self.board.inner.borrow().eps[self.id as usize].shut {
            return Err(Error::Closed);
        }
        let mut err = None;
        let mode = self.mode();
        // Any room will do if there is some now. Once the region is full, a
        // sleeping writer waits for half of it (Linux wakes a writer at a third
        // of its buffer): one wake-up per big batch of
        // acknowledgements, not per ACK. Polling writers take any room.
        let (full, cap) = {
            let i = self.board.inner.borrow();
            (self.tx_room(&i).0 == 0, self.tx_cap(&i))
        };
        let want = if full && mode == Mode::Blocking { (cap / 2).max(1) } else { 1 };
        self.board.wait(mode, None, |i| {
            err = self.stream_error(i);
            err.is_some() || self.tx_room(i).0 >= want
        })?;
        err.map_or(Ok(()), Err)
    }

    /// Waits for bytes (or end of stream / error).
    fn wait_readable(&self) -> Result<()> {
        self.check_regions()?;
        let mut err = None;
        self.board.wait(self.mode(), None, |i| {
            if self.rx_ready(i).0 > 0 {
                return true;
            }
            err = self.stream_error(i);
            err.is_some() || i.peer_closed(self.id)
        })?;
        err.map_or(Ok(()), Err)
    }

    fn push(&self, i: &mut Inner, n: usize) -> Result<()> {
        if outboard_trace::enabled() {
            let at = (i.eps[self.id as usize].tx_produced % self.tx.1 as u64) as usize;
            self.trace(i, Hop::AppWrite, self.tx, at, n);
        }
        let ep = &mut i.eps[self.id as usize];
        ep.tx_produced += n as u64;
        let total = ep.tx_produced;
        i.command(BoardCommand::Push { ep: Endpoint(self.id), written: total })
    }

    /// The hop trace (`outboard_trace`): the first bytes of the `n` at
    /// `at` in `region`, looked at only when this process traces.
    fn trace(&self, i: &Inner, hop: Hop, region: (usize, usize), at: usize, n: usize) {
        let mut first = [0u8; 16];
        let k = n.min(16);
        ring_copy_out(&i.map, region, at, &mut first[..k]);
        outboard_trace::bytes(hop, &first[..k]);
    }

    /// The application sees received bytes (hop trace).
    fn trace_wake(&self, i: &Inner) {
        if outboard_trace::enabled() {
            let (avail, at, _) = self.rx_ready(i);
            if avail > 0 {
                self.trace(i, Hop::AppWake, self.rx, at, avail);
            }
        }
    }

    /// Tells the engine the application read `n` more bytes. With an inline
    /// engine, a read that empties the buffer, which was less than half full,
    /// leaves that news for the engine's next turn: the application's next
    /// call (its reply's push, or the wait for more) runs one at once, and
    /// the window it opens is not one the peer waits for (the engine
    /// offered at least half the buffer). A turn of its own cost a
    /// request/response round trip a third of its engine turns. Other
    /// reads take effect now, as with an engine thread, so a peer held by a
    /// small window hears of the room at once (Linux sends its window
    /// update from the read when the offered window fell to half).
    fn consumed(&self, i: &mut Inner, n: usize) -> Result<()> {
        // Only an inline engine defers: the status word is read for nothing otherwise.
        let unread = i.driver.is_some().then(|| i.rx_total(self.id).saturating_sub(i.eps[self.id as usize].rx_consumed));
        let ep = &mut i.eps[self.id as usize];
        ep.rx_consumed += n as u64;
        let c = BoardCommand::Consumed { ep: Endpoint(self.id), read: ep.rx_consumed };
        if unread.is_some_and(|u| u == n as u64 && u < self.rx.1 as u64 / 2) {
            i.command_at_next_turn(c)
        } else {
            i.command(c)
        }
    }

    /// Copies as much of `data` as fits now (at least 1 byte unless non-blocking).
    pub fn send(&mut self, data: &[u8]) -> Result<usize> {
        self.send_vectored(&[data])
    }

    /// Copies as much of `bufs`, in order, as fits now (at least 1 byte
    /// unless non-blocking), and tells the engine with one push: a gathered
    /// write (`writev`, `sendmsg` with several pieces) is one command and
    /// goes out as the kernel sends it, in as few segments as its bytes
    /// need, not one push (and maybe one segment) per piece.
    pub fn send_vectored(&mut self, bufs: &[&[u8]]) -> Result<usize> {
        // Saturating: pieces may overlap (C iovecs), their lengths may add up past usize.
        let want = bufs.iter().fold(0usize, |t, b| t.saturating_add(b.len()));
        if want == 0 {
            return Ok(0);
        }
        self.wait_writable()?;
        let mut i = self.board.inner.borrow_mut();
        let (free, mut at, _) = self.tx_room(&i);
        let n = want.min(free);
        let mut left = n;
        for b in bufs {
            if left == 0 {
                break;
            }
            let b = &b[..b.len().min(left)];
            ring_copy_in(&i.map, self.tx, at, b);
            at = (at + b.len()) % self.tx.1;
            left -= b.len();
        }
        i.copies.send_copied += n as u64;
        self.push(&mut i, n)?;
        Ok(n)
    }

    /// Sends all of `data` (waiting for room as the mode allows; a
    /// non-blocking stream returns WouldBlock after a partial send — use `send`).
    pub fn send_all(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let n = self.send(data)?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Copies received bytes into `buf`; Ok(0) at end of stream.
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<usize> {
        self.recv_vectored(&mut [buf])
    }

    /// Copies received bytes into `bufs`, filling each before the next (a
    /// `readv`), and tells the engine with one `CONSUMED`; Ok(0) at end of
    /// stream (or when `bufs` hold no room).
    pub fn recv_vectored(&mut self, bufs: &mut [&mut [u8]]) -> Result<usize> {
        // Saturating: pieces may overlap (C iovecs), their lengths may add up past usize.
        let want = bufs.iter().fold(0usize, |t, b| t.saturating_add(b.len()));
        if want == 0 {
            return Ok(0);
        }
        self.wait_readable()?;
        let mut i = self.board.inner.borrow_mut();
        self.trace_wake(&i);
        let (avail, mut at, _) = self.rx_ready(&i);
        let n = want.min(avail);
        let mut left = n;
        for b in bufs.iter_mut() {
            if left == 0 {
                break;
            }
            let k = b.len().min(left);
            ring_copy_out(&i.map, self.rx, at, &mut b[..k]);
            at = (at + k) % self.rx.1;
            left -= k;
        }
        i.copies.recv_copied += n as u64;
        if n > 0 {
            self.consumed(&mut i, n)?;
        }
        Ok(n)
    }

    /// Writable room in the transmit region, contiguous, at least 1 byte
    /// (waits as the mode allows). Write into it, then `end_put`.
    pub fn begin_put(&mut self) -> Result<&mut [u8]> {
        self.wait_writable()?;
        let mut i = self.board.inner.borrow_mut();
        let (_, at, len) = self.tx_room(&i);
        i.eps[self.id as usize].put_len = len;
        let map = i.map.clone();
        drop(i);
        // SAFETY: [tx.0 + at, + len) lies in the transmit region (checked
        // inside the mapping by `regions`), in its free part: the engine
        // reads only published bytes, and no other slice of it exists here
        // (`&mut self` for the slice's life). `self.board` keeps the mapping
        // alive for that long.
        Ok(unsafe { std::slice::from_raw_parts_mut(map.as_ptr().add(self.tx.0 + at), len) })
    }

    /// Publishes the first `n` bytes of what `begin_put` gave.
    pub fn end_put(&mut self, n: usize) -> Result<()> {
        let mut i = self.board.inner.borrow_mut();
        if n > i.eps[self.id as usize].put_len {
            return Err(Error::Invalid("end_put of more than begin_put gave"));
        }
        i.eps[self.id as usize].put_len = 0;
        if n == 0 {
            return Ok(());
        }
        self.push(&mut i, n)
    }

    /// Received bytes in place, contiguous (empty slice at end of stream).
    pub fn begin_get(&mut self) -> Result<&[u8]> {
        self.wait_readable()?;
        let mut i = self.board.inner.borrow_mut();
        self.trace_wake(&i);
        let (_, at, len) = self.rx_ready(&i);
        i.eps[self.id as usize].get_len = len;
        let map = i.map.clone();
        drop(i);
        // SAFETY: the bytes are in the receive region inside the mapping,
        // published by the engine (Acquire on rx_total) and not released to
        // it until `end_get`, so the engine does not write them meanwhile.
        Ok(unsafe { std::slice::from_raw_parts(map.as_ptr().add(self.rx.0 + at), len) })
    }

    /// Releases the first `n` bytes of what `begin_get` gave.
    pub fn end_get(&mut self, n: usize) -> Result<()> {
        let mut i = self.board.inner.borrow_mut();
        if n > i.eps[self.id as usize].get_len {
            return Err(Error::Invalid("end_get of more than begin_get gave"));
        }
        i.eps[self.id as usize].get_len -= n;
        if n == 0 {
            return Ok(());
        }
        self.consumed(&mut i, n)
    }

    /// What `begin_get` and `begin_put` would give, both at once and without
    /// waiting (either may be empty): for relaying received bytes straight
    /// into the transmit region (an echo that copies once, region to region).
    /// End each side with `end_get` / `end_put`.
    pub fn begin_get_put(&mut self) -> Result<(&[u8], &mut [u8])> {
        self.check_regions()?;
        let mut i = self.board.inner.borrow_mut();
        i.pump()?;
        i.check_alive()?;
        if let Some(e) = self.stream_error(&i) {
            return Err(e);
        }
        self.trace_wake(&i);
        let (_, rat, rlen) = self.rx_ready(&i);
        let (_, tat, tlen) = if i.eps[self.id as usize].shut { (0, 0, 0) } else { self.tx_room(&i) };
        i.eps[self.id as usize].get_len = rlen;
        i.eps[self.id as usize].put_len = tlen;
        let map = i.map.clone();
        drop(i);
        // SAFETY: as for `begin_get` and `begin_put`; the two ranges lie in
        // different regions, so the slices do not overlap.
        unsafe {
            Ok((
                std::slice::from_raw_parts(map.as_ptr().add(self.rx.0 + rat), rlen),
                std::slice::from_raw_parts_mut(map.as_ptr().add(self.tx.0 + tat), tlen),
            ))
        }
    }

    /// Copies received bytes into `buf` without consuming them (MSG_PEEK); never waits.
    pub fn peek(&self, buf: &mut [u8]) -> Result<usize> {
        self.check_regions()?;
        let mut i = self.board.inner.borrow_mut();
        i.pump()?;
        let (avail, at, _) = self.rx_ready(&i);
        let n = buf.len().min(avail);
        ring_copy_out(&i.map, self.rx, at, &mut buf[..n]);
        Ok(n)
    }
    /// The stream's error, if it failed (as `recv`/`send` would return it).
    pub fn error(&self) -> Option<Error> {
        let i = self.board.inner.borrow();
        self.stream_error(&i)
    }
    /// Bytes written and not yet sent (Linux's SIOCOUTQNSD): those not
    /// acknowledged less those in flight, as the engine last published.
    pub fn notsent(&self) -> u64 {
        let in_flight = u64::from(self.tcp_info().in_flight);
        self.unacked().0.saturating_sub(in_flight)
    }
    /// Bytes written but not yet acknowledged, and the most there may be
    /// (the transmit region's size, or the send limit).
    pub fn unacked(&self) -> (u64, u64) {
        let i = self.board.inner.borrow();
        let ep = &i.eps[self.id as usize];
        (ep.tx_produced.saturating_sub(i.tx_acked(self.id)), self.tx_cap(&i) as u64)
    }
    /// SO_SNDBUF as Linux applies it: at most `limit` bytes written and not
    /// yet acknowledged (writes wait, or return WouldBlock, beyond it; not
    /// writable to poll); 0 or more than the transmit region: the region.
    /// Kept here, in the application: the engine sends what was written.
    pub fn set_send_limit(&mut self, limit: usize) {
        self.board.inner.borrow_mut().eps[self.id as usize].tx_limit = limit as u64;
    }
    /// SO_RCVBUF as a window clamp in bytes (0: none): the window the engine
    /// offers from now on never exceeds it less the bytes not yet read.
    pub fn set_rcv_clamp(&mut self, clamp: u32) -> Result<()> {
        self.set_option(StreamOption::RcvClamp(clamp))
    }
    /// True once the peer's FIN arrived (whether or not its bytes were read).
    pub fn peer_closed(&self) -> bool {
        let mut i = self.board.inner.borrow_mut();
        let _ = i.pump();
        i.peer_closed(self.id)
    }
    /// Size of the receive region (the most bytes that can wait unread).
    pub fn rx_region_size(&self) -> usize {
        self.rx.1
    }
    /// True once the peer has sent FIN and every byte before it was consumed.
    pub fn at_eof(&self) -> bool {
        let mut i = self.board.inner.borrow_mut();
        let _ = i.pump();
        i.peer_closed(self.id) && (self.rx.1 == 0 || self.rx_ready(&i).0 == 0)
    }

    /// No more data from us: FIN after what is queued.
    pub fn shutdown(&mut self) -> Result<()> {
        let mut i = self.board.inner.borrow_mut();
        if i.eps[self.id as usize].shut {
            return Ok(());
        }
        i.eps[self.id as usize].shut = true;
        i.command(BoardCommand::Shutdown { ep: Endpoint(self.id) })
    }
    pub fn set_nodelay(&mut self, on: bool) -> Result<()> {
        self.set_option(StreamOption::NoDelay(on))
    }
    fn set_option(&mut self, option: StreamOption) -> Result<()> {
        let mut i = self.board.inner.borrow_mut();
        i.command(BoardCommand::SetOption { ep: Endpoint(self.id), option })
    }
    /// TCP_CORK: while on, the engine sends new data only in full segments
    /// (a partial one waits until this is turned off, or 200 ms).
    pub fn set_cork(&mut self, on: bool) -> Result<()> {
        self.set_option(StreamOption::Cork(on))
    }
    /// TCP_QUICKACK, as Linux takes it: 0 makes the stream interactive (its
    /// ACKs wait for replies to carry them); any other value leaves that
    /// mode, and sends an ACK that waits if nothing is left unread; an even
    /// one then makes it interactive again. Not sticky: a prompt reply makes
    /// the stream interactive again. `tcp_info().interactive` reads the mode.
    pub fn set_quickack(&mut self, val: u32) -> Result<()> {
        self.set_option(StreamOption::QuickAck(val))?;
        self.info_stale.set(true);
        Ok(())
    }
    /// TCP_USER_TIMEOUT: data unacknowledged for `ms` milliseconds fails the
    /// stream with `TimedOut` (0: off).
    pub fn set_user_timeout(&mut self, ms: u32) -> Result<()> {
        self.set_option(StreamOption::UserTimeout(ms))
    }
    /// IP_TOS: the TOS byte of the stream's packets from now on (the
    /// engine keeps the ECN bits, as Linux does on a TCP socket).
    pub fn set_tos(&mut self, tos: u8) -> Result<()> {
        self.set_option(StreamOption::Tos(tos))
    }
    /// TCP_CONGESTION: CUBIC (`true`) or NewReno.
    pub fn set_cubic(&mut self, cubic: bool) -> Result<()> {
        let k = if cubic { outboard_board::proto::opt::CC_CUBIC } else { outboard_board::proto::opt::CC_RENO };
        self.set_option(StreamOption::Congestion(k as u8))
    }
    /// The stream's local address (either family; `0.0.0.0:0` if the engine
    /// published none).
    pub fn local_addr(&self) -> SocketAddr {
        self.board.inner.borrow().addr(self.id, status::LOCAL).unwrap_or(NO_ADDR)
    }
    /// The peer's address (either family; `0.0.0.0:0` if the engine published none).
    pub fn peer_addr(&self) -> SocketAddr {
        self.board.inner.borrow().addr(self.id, status::REMOTE).unwrap_or(NO_ADDR)
    }
    /// Bytes that can be read now without waiting.
    pub fn readable_bytes(&self) -> usize {
        let mut i = self.board.inner.borrow_mut();
        let _ = i.pump();
        if self.rx.1 == 0 {
            return 0;
        }
        self.rx_ready(&i).0
    }
    /// Resets the stream now (RST), instead of the graceful close of drop.
    pub fn abort(self) {
        let mut i = self.board.inner.borrow_mut();
        i.eps[self.id as usize].open = false;
        let _ = i.command(BoardCommand::Abort { ep: Endpoint(self.id) });
    }
}

impl Stream {
    /// Closes this process's copy of a stream that a process it forked may
    /// take over (`Board::adopt_stream` there): the connection waits for that
    /// child for a moment (while it lives), then closes as `drop` would.
    pub fn release(self) {
        if let Ok(mut i) = self.board.inner.try_borrow_mut() {
            if i.eps[self.id as usize].open {
                i.eps[self.id as usize].open = false;
                let _ = i.command(BoardCommand::Release { ep: Endpoint(self.id) });
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(mut i) = self.board.inner.try_borrow_mut() {
            if !i.eps[self.id as usize].open {
                return;
            }
            i.eps[self.id as usize].open = false;
            let _ = i.command(BoardCommand::Close { ep: Endpoint(self.id) });
        }
    }
}
