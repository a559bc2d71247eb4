//! Accepting into a session's listeners and delivering datagrams to its
//! datagram sockets (each buffer: the source address, then the payload).

use super::{EpKind, Session, Violation, DATAGRAMS_PER_TURN};
use crate::host::SessionCx;
use outboard_board::arena::Side;
use outboard_board::layout::{status, DGRAM_HEADER};
use outboard_board::mailbox::Descriptor;
use outboard_board::proto::ev;
use outboard_board::NetAddr;
use outboard_stack::{ListenerId, Stack, StackError};
use std::sync::atomic::Ordering;

impl Session {
    /// Delivers datagrams to this session's datagram sockets. (Listeners'
    /// connections are handed out by the host: `accept_one`.)
    pub fn poll_endpoints(&mut self, sc: &mut SessionCx<'_>) -> Result<bool, Violation> {
        let mut work = false;
        for i in 0..self.polled.len() {
            let Some(&ep) = self.polled.get(i) else { break };
            if let Some(EpKind::Datagram { .. }) = self.eps[ep as usize].as_ref() {
                work |= self.deliver_datagrams(sc.stack, ep);
            }
        }
        work |= self.poll_mailboxes(sc)?;
        Ok(work)
    }

    /// Takes one waiting connection of listener `lid` into a new stream of
    /// endpoint `ep`'s board. `Ok(false)`: no room here (no free endpoint
    /// or stream region, or the memory cap), so another member may take it.
    pub fn accept_one(&mut self, sc: &mut SessionCx<'_>, ep: u32, lid: ListenerId) -> Result<bool, Violation> {
        let (stack, admission, claims) = (&mut *sc.stack, &mut *sc.admission, &mut *sc.claims);
        if !matches!(self.eps.get(ep as usize), Some(Some(EpKind::Listener { lid: l, .. })) if *l == lid) {
            return Ok(false);
        }
        let room = !self.free_eps.is_empty() && self.regions.lock().is_ok_and(|f| f.len() >= 2);
        if !room || !admission.may_accept(stack) {
            self.counters.accepts_deferred += 1;
            return Ok(false);
        }
        let Some(conn) = stack.tcp_accept(lid) else { return Ok(false) };
        match self.new_stream(stack, conn, None) {
            Some(new) => {
                self.counters.accepts += 1;
                claims.push((conn, Some(new)));
                self.post(ep, ev::ACCEPT | ev::READABLE, u64::from(new));
                self.update_stream(stack, new)?;
            }
            None => {
                if let Some(c) = stack.tcp(conn) {
                    c.abort();
                }
                stack.tcp_release(conn);
            }
        }
        Ok(true)
    }

    fn deliver_datagrams(&mut self, stack: &mut Stack, ep: u32) -> bool {
        let Some(EpKind::Datagram { udp, mailbox }) = self.eps[ep as usize].as_mut() else { return false };
        let udp = *udp;
        let mut got = 0;
        for _ in 0..DATAGRAMS_PER_TURN {
            if mailbox.free().map_or(true, |f| f == 0) {
                break;
            }
            let Some(buf) = self.dgram_rx.alloc() else { break };
            let (off, size) = (self.layout.arena.offset_of(buf), self.layout.arena.size_of(buf));
            // The payload goes after the source address (`DGRAM_HEADER`).
            // SAFETY: the buffer is the engine's (from its free list), inside
            // the mapping; no other engine slice of it exists.
            let dst = unsafe { self.map.bytes_mut(off + DGRAM_HEADER, size - DGRAM_HEADER) };
            match stack.udp_recv_from(udp, dst) {
                Ok((n, src)) => {
                    self.map.write(off, NetAddr::from(src));
                    let d = Descriptor { offset: off as u32, len: n as u32, tag: 0, aux: 0 };
                    if mailbox.put(d).unwrap_or(false) {
                        let _ = self.owners.transfer(buf, Side::Engine, Side::App);
                        got += 1;
                    } else {
                        self.dgram_rx.free(buf);
                        self.counters.datagrams_dropped += 1;
                    }
                }
                Err(StackError::Refused) => {
                    self.dgram_rx.free(buf);
                    let base = self.layout.endpoint_status(ep);
                    self.map.atomic_u32(base + status::ERROR).store(libc::ECONNREFUSED as u32, Ordering::Release);
                    self.post(ep, ev::ERROR | ev::READABLE, 0);
                    break;
                }
                Err(_) => {
                    self.dgram_rx.free(buf);
                    break;
                }
            }
        }
        if got > 0 {
            self.counters.datagrams_in += got;
            self.post(ep, ev::READABLE, 0);
        }
        got > 0
    }

}
