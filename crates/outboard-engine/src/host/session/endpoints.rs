//! A session's endpoint table: opening and closing endpoint slots (ids
//! partitioned among shards), giving streams their board regions, and the
//! sync results that hand new endpoints to the application.

use super::{EpKind, Session, StreamEp, Violation};
use crate::host::region::BoardRegion;
use outboard_board::layout::status;
use outboard_board::proto::{ev, kind};
use outboard_board::sync::CompleteError;
use outboard_board::{EndpointStatus, NetAddr};
use outboard_stack::{ConnId, Stack};
use std::sync::atomic::Ordering;

impl Session {
    pub(super) fn open_ep(&mut self, kind_code: u32) -> Option<u32> {
        let ep = self.free_eps.pop()?;
        let g = self.generations[ep as usize].wrapping_add(1);
        self.generations[ep as usize] = g;
        let base = self.layout.endpoint_status(ep);
        // A fresh status record; the application learns the id only after this.
        self.map.write(base, EndpointStatus { generation: g, kind: kind_code, shard: self.shard, ..Default::default() });
        Some(ep)
    }

    pub(super) fn close_ep(&mut self, ep: u32) {
        self.polled.retain(|&p| p != ep);
        if self.eps[ep as usize].take().is_some() {
            self.groups.set(ep, 0);
            let base = self.layout.endpoint_status(ep);
            self.map.atomic_u32(base + status::KIND).store(kind::FREE, Ordering::Release);
            self.free_eps.push(ep);
            self.post(ep, ev::CLOSED, 0);
        }
    }

    pub(super) fn sync_result(&mut self, slot: u32, value: i64) -> Result<bool, Violation> {
        match self.syncs.complete(slot, value) {
            Ok(()) => {
                self.post(u32::MAX, ev::SYNC, u64::from(slot));
                Ok(true)
            }
            Err(CompleteError::Cancelled) => {
                self.syncs.release_cancelled(slot);
                Ok(false)
            }
            Err(CompleteError::NotPending) => Err(Violation::BadSync),
        }
    }

    /// Gives a stream connection its two board regions. None when the board has none left.
    fn attach_regions(&mut self, stack: &mut Stack, conn: ConnId) -> Option<(u64, u64, usize)> {
        let (tx, rx) = {
            let mut f = self.regions.lock().ok()?;
            if f.len() < 2 {
                return None;
            }
            (f.alloc()?, f.alloc()?)
        };
        let a = &self.layout.arena;
        let (txo, rxo, size) = (a.offset_of(tx), a.offset_of(rx), a.size_of(tx));
        let txr = BoardRegion::new(self.id, self.map.clone(), tx, txo, size, self.regions.clone());
        let rxr = BoardRegion::new(self.id, self.map.clone(), rx, rxo, size, self.regions.clone());
        let c = stack.tcp(conn)?;
        let moved = c.attach_storage(Box::new(txr), Box::new(rxr));
        self.counters.migrated_bytes += moved as u64;
        Some((txo as u64, rxo as u64, size))
    }

    pub(super) fn new_stream(&mut self, stack: &mut Stack, conn: ConnId, sync: Option<u32>) -> Option<u32> {
        if self.free_eps.is_empty() {
            return None;
        }
        let (txo, rxo, size) = self.attach_regions(stack, conn)?;
        let ep = self.open_ep(kind::STREAM)?;
        let mut st = self.map.read::<EndpointStatus>(self.layout.endpoint_status(ep));
        st.rx_offset = rxo;
        st.rx_size = size as u64;
        st.tx_offset = txo;
        st.tx_size = size as u64;
        if let Some(c) = stack.tcp(conn) {
            let t = c.tuple();
            st.local = NetAddr::from(t.local);
            st.remote = NetAddr::from(t.remote);
        }
        self.map.write(self.layout.endpoint_status(ep), st);
        self.eps[ep as usize] = Some(EpKind::Stream(StreamEp {
            conn,
            tx_pushed: 0,
            rx_consumed: 0,
            rx_published: 0,
            acked_published: 0,
            flags: 0,
            error: 0,
            published_flags: 0,
            published_error: 0,
            connect_sync: sync,
            info_wanted: false,
            published_info: None,
        }));
        Some(ep)
    }

    /// Whether `ep` is an open stream of this session.
    pub fn has_stream(&self, ep: u32) -> bool {
        matches!(self.eps.get(ep as usize), Some(Some(EpKind::Stream(_))))
    }

    /// Completes sync `slot` with `value` (an errno as a negative number).
    pub fn complete_sync(&mut self, slot: u32, value: i64) -> Result<(), Violation> {
        self.sync_result(slot, value).map(|_| ())
    }

    /// Takes over connection `conn` (released by a parent process) as a new
    /// stream of this board: its rings move into this board's regions, and
    /// the status record's `TX_BASE` says how many bytes were queued to send
    /// already. `Ok(false)`: no endpoint or region fits here.
    pub fn adopt(&mut self, sc: &mut crate::host::SessionCx<'_>, conn: ConnId, sync: u32) -> Result<bool, Violation> {
        let (stack, claims) = (&mut *sc.stack, &mut *sc.claims);
        let size = self.layout.arena.classes[outboard_board::layout::CLASS_STREAM as usize].size as usize;
        let (queued, state) = match stack.tcp(conn) {
            Some(c) if c.storage_fits(size, size) => (c.send_queued() as u64, c.state()),
            Some(_) => return Ok(false),
            None => {
                // The peer reset it while it waited.
                self.sync_result(sync, -i64::from(libc::ECONNRESET))?;
                return Ok(true);
            }
        };
        let Some(ep) = self.new_stream(stack, conn, None) else { return Ok(false) };
        let base = self.layout.endpoint_status(ep);
        self.map.atomic_u64(base + status::TX_BASE).store(queued, Ordering::Release);
        if let Some(EpKind::Stream(s)) = self.eps[ep as usize].as_mut() {
            use outboard_tcp::State;
            // What the parent saw happen is the child's too.
            s.tx_pushed = queued;
            if !matches!(state, State::SynSent | State::SynReceived | State::Closed) {
                s.flags |= outboard_board::layout::flags::CONNECTED;
            }
            if matches!(state, State::CloseWait | State::LastAck | State::Closing | State::TimeWait) {
                s.flags |= outboard_board::layout::flags::PEER_CLOSED;
            }
        }
        claims.push((conn, Some(ep)));
        self.sync_result(sync, i64::from(ep))?;
        self.update_stream(stack, ep)?;
        Ok(true)
    }

    /// Closes (or aborts) a stream and frees its endpoint; the connection
    /// lingers in the stack (FIN, TIME-WAIT) holding its regions until done.
    pub(super) fn drop_stream(&mut self, stack: &mut Stack, ep: u32, abort: bool) -> Option<ConnId> {
        let Some(EpKind::Stream(s)) = self.eps[ep as usize].as_ref() else { return None };
        let conn = s.conn;
        if let Some(c) = stack.tcp(conn) {
            if abort {
                c.abort();
            } else {
                c.close();
            }
        }
        stack.tcp_release(conn);
        self.close_ep(ep);
        Some(conn)
    }

}
