//! Accepting into a session's listeners and delivering datagrams to its
//! datagram sockets (each buffer: the source address, then the payload).

use super::{EpKind, Session, Violation, DATAGRAMS_PER_TURN};
use crate::host::SessionCx;
use outboard_board::arena::Side;
use outboard_board::layout::{status, DGRAM_HEADER};
use outboard_board::mailbox::Descriptor;
use outboard_board::proto::ev;
use outboard_board::NetAddr;
use outboard_stack::{Stack, StackError};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

impl Session {
    /// Accepts waiting connections on this session's listeners into new
    /// streams (while endpoints and regions last) and delivers datagrams.
    pub fn poll_endpoints(&mut self, sc: &mut SessionCx<'_>) -> Result<bool, Violation> {
        let (stack, admission, claims) = (&mut *sc.stack, &mut *sc.admission, &mut *sc.claims);
        let mut work = false;
        for i in 0..self.polled.len() {
            let Some(&ep) = self.polled.get(i) else { break };
            match self.eps[ep as usize].as_ref() {
                Some(EpKind::Listener { lid }) => {
                    let lid = *lid;
                    while stack.tcp_accept_pending(lid) {
                        let room = !self.free_eps.is_empty() && self.regions.lock().is_ok_and(|f| f.len() >= 2);
                        if !room || !admission.may_accept(stack) {
                            self.counters.accepts_deferred += 1;
                            break;
                        }
                        let Some(conn) = stack.tcp_accept(lid) else { break };
                        work = true;
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
                    }
                }
                Some(EpKind::Datagram { .. }) => work |= self.deliver_datagrams(stack, ep),
                _ => {}
            }
        }
        Ok(work)
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
                    self.map.write(off, NetAddr::from(SocketAddr::from(src)));
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
