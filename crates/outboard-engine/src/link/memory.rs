//! An in-memory link: a [`MemoryLink`] (the shard's end, a [`Link`] like
//! any other) joined to a plain [`MemoryPeer`] end, with no kernel, no
//! wire and no other process in between. Made for `outboard bench scale`,
//! where each shard is driven by a peer `Stack` in the same thread, so the
//! measurement is protocol processing alone; usable in tests too.
//!
//! # How
//!
//! - **Two queues** of frames, one each way, in one `Mutex` shared by the
//!   two ends (an `Arc`: a `Link` must be `Send`; in one thread the lock is
//!   never contended and costs two atomic operations). Each end batches:
//!   `receive` moves the whole inbound queue to the end's private queue
//!   under one lock and hands frames out from there without it;
//!   `transmit` builds frames in private buffers and `flush` appends them to
//!   the outbound queue under one lock. So a turn of the shard takes the
//!   lock about twice, not once per frame. A callback is never called with
//!   the lock held.
//! - **Buffers are recycled**: every buffer is `mtu + 14` bytes, made once
//!   and reused; a frame's length is kept beside it, so nothing is cleared
//!   or reallocated per frame. A received frame's buffer goes to the
//!   receiving end's spares (its next `transmit` builds in it); an end with
//!   more than [`LOCAL_SPARE`] spares gives the rest back to a shared pool
//!   at its next lock, and an end without spares takes a batch from the
//!   pool (or allocates, the first time). One side sending much more than
//!   the other (bulk data one way, ACKs back) thus moves buffers across
//!   rather than allocating.
//! - **Backpressure**: each direction holds at most [`QUEUE_FRAMES`]
//!   frames queued (shared queue plus unflushed ones); beyond that
//!   `transmit` returns [`TxStatus::Full`] (counted in `tx_full`) without
//!   calling the callback, and the sender's frames wait in its stack. No
//!   frame is ever dropped, reordered or altered.
//! - **No offloads**: `receive` reports `RxMeta::default()` (the stack
//!   verifies every checksum), `transmit` takes only `TxMeta::default()`.
//! - **`wait`** returns at once when a frame is queued for this end;
//!   otherwise it sleeps on a condition variable until the other end flushes
//!   a frame to it or `timeout` passes (the other end signals only while
//!   this one sleeps, so a flush costs no system call otherwise). `also` fds
//!   and futex words are not watched: a single-threaded user (the peer in
//!   the same thread) never calls `wait`, since nothing could arrive while it
//!   sleeps; with the peer in another thread, wake-ups are at most `timeout`
//!   late for anything but frames.
//! - `info()`: kind `memory`, mode `in-process queues`. Counters:
//!   frames and bytes each way, `tx_full`; nothing else applies.

use super::*;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Frames one direction holds before `transmit` says `Full`.
pub const QUEUE_FRAMES: usize = 8192;
/// Spare buffers an end keeps for itself; more go back to the shared pool.
pub const LOCAL_SPARE: usize = 512;
/// Buffers an end takes from the shared pool when it has none.
const REFILL: usize = 128;

/// One frame: a recycled buffer of the link's frame size and the length used.
struct Frame {
    buf: Box<[u8]>,
    len: usize,
}

/// Which end: the shard's link or the peer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Link = 0,
    Peer = 1,
}

/// What the two ends share, under the lock.
#[derive(Default)]
struct Wire {
    /// `queues[s]`: frames for side `s`.
    queues: [VecDeque<Frame>; 2],
    /// Spare buffers either end may take.
    pool: Vec<Box<[u8]>>,
    /// `sleeping[s]`: side `s` waits in `wait` for frames.
    sleeping: [bool; 2],
}

struct Shared {
    wire: Mutex<Wire>,
    wake: Condvar,
}

/// Gives an end's spares beyond `LOCAL_SPARE` back to the pool (lock held).
fn give_back(spare: &mut Vec<Box<[u8]>>, w: &mut Wire) {
    if spare.len() > LOCAL_SPARE {
        w.pool.extend(spare.drain(LOCAL_SPARE..));
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Wire> {
        // A panic on the other end with the lock held leaves queues that are
        // still consistent (every operation on them is a single call).
        self.wire.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The machinery of one end (both ends are alike).
struct End {
    side: Side,
    shared: Arc<Shared>,
    frame_len: usize,
    spare: Vec<Box<[u8]>>,
    /// Frames taken from the shared inbound queue, not yet handed out.
    rx: VecDeque<Frame>,
    /// Frames built, not yet flushed.
    tx: Vec<Frame>,
    /// The outbound shared queue's length when we last held the lock.
    queued_out: usize,
    counters: LinkCounters,
}

impl End {
    fn new(side: Side, shared: Arc<Shared>, frame_len: usize) -> End {
        End {
            side,
            shared,
            frame_len,
            spare: Vec::new(),
            rx: VecDeque::new(),
            tx: Vec::new(),
            queued_out: 0,
            counters: LinkCounters::default(),
        }
    }

    fn other(&self) -> usize {
        1 - self.side as usize
    }

    fn receive(&mut self, max: usize, rx: &mut dyn FnMut(&[u8])) -> usize {
        if self.rx.is_empty() {
            let mut w = self.shared.lock();
            let me = self.side as usize;
            if !w.queues[me].is_empty() {
                // Take the whole queue in one swap; ours is empty.
                std::mem::swap(&mut self.rx, &mut w.queues[me]);
            }
            give_back(&mut self.spare, &mut w);
        }
        let mut n = 0;
        while n < max {
            let Some(f) = self.rx.pop_front() else { break };
            rx(&f.buf[..f.len]);
            self.counters.rx_frames += 1;
            self.counters.rx_bytes += f.len as u64;
            self.spare.push(f.buf);
            n += 1;
        }
        n
    }

    fn transmit(&mut self, fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>) -> TxStatus {
        if self.tx.len() + self.queued_out >= QUEUE_FRAMES {
            // Our count may be stale: the other end may have taken frames since.
            self.queued_out = self.shared.lock().queues[self.other()].len();
            if self.tx.len() + self.queued_out >= QUEUE_FRAMES {
                self.counters.tx_full += 1;
                return TxStatus::Full;
            }
        }
        if self.spare.is_empty() {
            let mut w = self.shared.lock();
            let take = w.pool.len().min(REFILL);
            let at = w.pool.len() - take;
            self.spare.extend(w.pool.drain(at..));
        }
        let mut buf = self
            .spare
            .pop()
            .unwrap_or_else(|| vec![0u8; self.frame_len].into_boxed_slice());
        match fill(&mut buf) {
            Some(len) if len > 0 => {
                let len = len.min(self.frame_len);
                self.counters.tx_frames += 1;
                self.counters.tx_bytes += len as u64;
                self.tx.push(Frame { buf, len });
                TxStatus::Queued
            }
            _ => {
                self.spare.push(buf);
                TxStatus::Idle
            }
        }
    }

    fn flush(&mut self) {
        if self.tx.is_empty() && self.spare.len() <= LOCAL_SPARE {
            return;
        }
        let other = self.other();
        let mut w = self.shared.lock();
        let q = &mut w.queues[other];
        q.extend(self.tx.drain(..));
        self.queued_out = q.len();
        let wake = w.sleeping[other] && self.queued_out > 0;
        give_back(&mut self.spare, &mut w);
        drop(w);
        if wake {
            self.shared.wake.notify_all();
        }
    }

    fn wait(&mut self, timeout: Duration) {
        if !self.rx.is_empty() || timeout.is_zero() {
            return;
        }
        let me = self.side as usize;
        let mut w = self.shared.lock();
        if !w.queues[me].is_empty() {
            return;
        }
        w.sleeping[me] = true;
        let (mut w, _) = self
            .shared
            .wake
            .wait_timeout(w, timeout)
            .unwrap_or_else(|e| e.into_inner());
        w.sleeping[me] = false;
    }
}

/// The shard's end of an in-memory link. See the module docs.
pub struct MemoryLink {
    end: End,
    name: String,
    mac: [u8; 6],
    mtu: usize,
}

/// The other end of a [`MemoryLink`]: frames the shard sent come out of
/// `receive`, frames built with `transmit` (and `flush`ed) go to the shard.
/// Typically driven by a peer `Stack` in the same thread.
pub struct MemoryPeer {
    end: End,
}

impl MemoryLink {
    /// A link named `name` (for `stat`) with our `mac` and IP `mtu`
    /// (68 to 9000), and its peer end.
    pub fn pair(
        name: &str,
        mac: [u8; 6],
        mtu: usize,
    ) -> Result<(MemoryLink, MemoryPeer), LinkError> {
        if !(68..=MAX_FRAME - 14).contains(&mtu) {
            return Err(LinkError::BadSpec(format!(
                "MTU {mtu} for memory link {name}: must be 68..={}",
                MAX_FRAME - 14
            )));
        }
        let shared = Arc::new(Shared {
            wire: Mutex::new(Wire::default()),
            wake: Condvar::new(),
        });
        let frame_len = mtu + 14;
        let link = MemoryLink {
            end: End::new(Side::Link, shared.clone(), frame_len),
            name: name.to_string(),
            mac,
            mtu,
        };
        Ok((
            link,
            MemoryPeer {
                end: End::new(Side::Peer, shared, frame_len),
            },
        ))
    }
}

impl Link for MemoryLink {
    fn info(&self) -> LinkInfo {
        LinkInfo {
            kind: "memory".into(),
            name: self.name.clone(),
            mode: "in-process queues".into(),
            mtu: self.mtu,
            mac: self.mac,
            offloads: Vec::new(),
        }
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn receive(
        &mut self,
        max: usize,
        rx: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, LinkError> {
        Ok(self.end.receive(max, &mut |f| rx(f, RxMeta::default())))
    }

    fn transmit(&mut self, fill: &mut MetaFill<'_>) -> Result<TxStatus, LinkError> {
        Ok(self.end.transmit(&mut |buf| without_offloads(fill(buf))))
    }

    fn flush(&mut self) -> Result<(), LinkError> {
        self.end.flush();
        Ok(())
    }

    fn wait(
        &mut self,
        timeout: Duration,
        _also: &[RawFd],
        _futexes: &[(&AtomicU32, u32)],
    ) -> Result<(), LinkError> {
        self.end.wait(timeout);
        Ok(())
    }

    fn counters(&self) -> LinkCounters {
        self.end.counters
    }
}

impl MemoryPeer {
    /// Hands up to `max` frames the shard sent to `rx`, in order; returns how many.
    pub fn receive(&mut self, max: usize, mut rx: impl FnMut(&[u8])) -> usize {
        self.end.receive(max, &mut rx)
    }

    /// Lends `fill` a buffer of `frame_len()` bytes to build one frame for
    /// the shard in; `fill` returns its length, or None when it has nothing
    /// to send. `Full` (without calling `fill`) while the shard's queue holds
    /// [`QUEUE_FRAMES`]. The frame reaches the shard at the next `flush`.
    pub fn transmit(&mut self, mut fill: impl FnMut(&mut [u8]) -> Option<usize>) -> TxStatus {
        self.end.transmit(&mut fill)
    }

    /// Hands every frame built since the last flush to the shard.
    pub fn flush(&mut self) {
        self.end.flush()
    }

    /// Sleeps until the shard flushes a frame to us or `timeout` passes
    /// (spurious wake-ups allowed). Only useful with the shard in another thread.
    pub fn wait(&mut self, timeout: Duration) {
        self.end.wait(timeout)
    }

    /// Largest frame either way: the link's MTU plus the Ethernet header.
    pub fn frame_len(&self) -> usize {
        self.end.frame_len
    }

    /// This end's counters (rx: frames from the shard; tx: frames to it).
    pub fn counters(&self) -> LinkCounters {
        self.end.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outboard_stack::{Stack, StackConfig};
    use outboard_time::Instant;
    use std::net::{Ipv4Addr, SocketAddrV4};

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

    fn frame(n: usize, tag: u8) -> impl FnMut(&mut [u8]) -> Option<usize> {
        move |b: &mut [u8]| {
            b[..n].fill(tag);
            Some(n)
        }
    }

    #[test]
    fn frames_cross_both_ways_in_order_and_buffers_are_reused() {
        let (mut link, mut peer) = MemoryLink::pair("t", MAC, 1500).unwrap();
        assert_eq!(peer.frame_len(), 1514);
        assert_eq!(link.info().kind, "memory");
        for i in 0..10u8 {
            assert_eq!(peer.transmit(frame(60 + i as usize, i)), TxStatus::Queued);
        }
        // Nothing arrives before the flush.
        assert_eq!(
            link.receive(64, &mut |_, _| panic!("unflushed frame"))
                .unwrap(),
            0
        );
        peer.flush();
        let mut got = Vec::new();
        let n = link
            .receive(4, &mut |f, meta| {
                assert_eq!(meta, RxMeta::default());
                got.push((f.len(), f[0]));
            })
            .unwrap();
        assert_eq!(n, 4);
        link.receive(64, &mut |f, _| got.push((f.len(), f[0])))
            .unwrap();
        let want: Vec<(usize, u8)> = (0..10u8).map(|i| (60 + i as usize, i)).collect();
        assert_eq!(got, want);
        // The link sends back in the buffers it received: nothing new allocated.
        assert_eq!(link.end.spare.len(), 10);
        for i in 0..10u8 {
            let st = link
                .transmit(&mut |b| {
                    b[..100].fill(i);
                    Some((100, TxMeta::default()))
                })
                .unwrap();
            assert_eq!(st, TxStatus::Queued);
        }
        assert_eq!(link.end.spare.len(), 0);
        // Nothing to send: the slot goes back.
        assert_eq!(link.transmit(&mut |_| None).unwrap(), TxStatus::Idle);
        link.flush().unwrap();
        let mut back = 0;
        peer.receive(usize::MAX, |f| {
            assert_eq!(f, &[back; 100][..]);
            back += 1;
        });
        assert_eq!(back, 10);
        let (l, p) = (link.counters(), peer.counters());
        assert_eq!((l.rx_frames, l.tx_frames, l.tx_bytes), (10, 10, 1000));
        assert_eq!((p.rx_frames, p.tx_frames, p.rx_bytes), (10, 10, 1000));
    }

    #[test]
    fn a_full_queue_says_full_until_the_other_end_reads() {
        let (mut link, mut peer) = MemoryLink::pair("t", MAC, 1500).unwrap();
        for _ in 0..QUEUE_FRAMES {
            assert_eq!(
                link.transmit(&mut |b| Some((b.len(), TxMeta::default())))
                    .unwrap(),
                TxStatus::Queued
            );
        }
        let mut called = false;
        let st = link
            .transmit(&mut |_| {
                called = true;
                None
            })
            .unwrap();
        assert_eq!(st, TxStatus::Full);
        assert!(!called);
        link.flush().unwrap();
        assert_eq!(link.transmit(&mut |_| None).unwrap(), TxStatus::Full);
        assert_eq!(link.counters().tx_full, 2);
        assert_eq!(peer.receive(10, |f| assert_eq!(f.len(), 1514)), 10);
        // The peer took the whole queue: room again.
        assert_eq!(link.transmit(&mut |_| None).unwrap(), TxStatus::Idle);
        assert_eq!(peer.receive(usize::MAX, |_| {}), QUEUE_FRAMES - 10);
        // Buffers beyond the peer's own spares went back to the pool, and the
        // link takes them from there.
        peer.flush();
        let pooled = link.end.shared.lock().pool.len();
        assert_eq!(pooled, QUEUE_FRAMES - LOCAL_SPARE);
        // The link's one spare (from the Idle call above), then a batch from the pool.
        for _ in 0..2 {
            link.transmit(&mut |b| Some((b.len(), TxMeta::default())))
                .unwrap();
        }
        assert_eq!(link.end.shared.lock().pool.len(), pooled - REFILL);
        assert_eq!(link.end.spare.len(), REFILL - 1);
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // the test times real sleeps
    fn wait_returns_on_a_frame_or_after_the_timeout() {
        let (mut link, mut peer) = MemoryLink::pair("t", MAC, 1500).unwrap();
        let t0 = std::time::Instant::now();
        link.wait(Duration::from_millis(20), &[], &[]).unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(15));
        peer.transmit(frame(64, 1));
        peer.flush();
        let t0 = std::time::Instant::now();
        link.wait(Duration::from_secs(10), &[], &[]).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5));
        // A peer in another thread wakes a sleeping link.
        link.receive(64, &mut |_, _| {}).unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            peer.transmit(frame(64, 2));
            peer.flush();
            peer
        });
        let t0 = std::time::Instant::now();
        let mut got = 0;
        while got == 0 && t0.elapsed() < std::time::Duration::from_secs(5) {
            link.wait(Duration::from_secs(10), &[], &[]).unwrap();
            got += link.receive(64, &mut |_, _| {}).unwrap();
        }
        assert_eq!(got, 1);
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
        t.join().unwrap();
    }

    /// Two stacks over the link, in one thread: ARP, a handshake and an echo.
    #[test]
    fn two_stacks_talk_through_it() {
        let (mut link, mut peer) = MemoryLink::pair("t", MAC, 1500).unwrap();
        let now = Instant::from_millis(1);
        let mut a = Stack::new(StackConfig::new(MAC, Ipv4Addr::new(10, 9, 0, 1), 24), now);
        let peer_mac = [0x02, 0, 0, 0, 0, 2];
        let mut b = Stack::new(
            StackConfig::new(peer_mac, Ipv4Addr::new(10, 9, 0, 2), 24),
            now,
        );
        let l = a.tcp_listen(7, 8).unwrap();
        let c = b
            .tcp_connect(now, SocketAddrV4::new(Ipv4Addr::new(10, 9, 0, 1), 7))
            .unwrap();
        let mut server = None;
        let mut echoed = Vec::new();
        let mut sent = false;
        for _ in 0..100 {
            link.receive(64, &mut |f, _| a.receive_frame(now, f))
                .unwrap();
            if server.is_none() {
                server = a.tcp_accept(l);
            }
            if let Some(s) = server {
                let mut buf = [0u8; 64];
                if let Ok(n) = a.tcp(s).unwrap().recv(&mut buf) {
                    a.tcp(s).unwrap().send(&buf[..n]).unwrap();
                }
            }
            while link
                .transmit(&mut |buf| a.poll_transmit(now, buf).map(|n| (n, TxMeta::default())))
                .unwrap()
                == TxStatus::Queued
            {}
            link.flush().unwrap();
            peer.receive(usize::MAX, |f| b.receive_frame(now, f));
            let conn = b.tcp(c).unwrap();
            if !sent && conn.state() == outboard_tcp::State::Established {
                assert_eq!(conn.send(b"hello, shard").unwrap(), 12);
                sent = true;
            }
            let mut buf = [0u8; 64];
            if let Ok(n) = conn.recv(&mut buf) {
                echoed.extend_from_slice(&buf[..n]);
            }
            while peer.transmit(|buf| b.poll_transmit(now, buf)) == TxStatus::Queued {}
            peer.flush();
            if echoed.len() == 12 {
                break;
            }
        }
        assert_eq!(echoed, b"hello, shard");
        assert_eq!(a.stats().frames_in, link.counters().rx_frames);
    }
}
