//! The event queue: the engine posts one event per endpoint that changed
//! (into the board's event ring); `pump` moves each registered endpoint onto
//! a ready list at most once, and `wait` looks only at that list — O(1) per
//! event, never a scan of every endpoint. An endpoint leaves the list when
//! `wait` finds it no longer ready (level-triggered, as epoll without EPOLLET).

use crate::board::{Inner, Mode};
use crate::{EndpointId, Error, Result};
use std::time::Duration;

/// What to be told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Interest {
    pub readable: bool,
    pub writable: bool,
}

impl Interest {
    pub const READABLE: Interest = Interest { readable: true, writable: false };
    pub const WRITABLE: Interest = Interest { readable: false, writable: true };
    pub const BOTH: Interest = Interest { readable: true, writable: true };
}

/// One ready endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    pub token: u64,
    pub endpoint: EndpointId,
    /// Data to read, a connection to accept, or end of stream.
    pub readable: bool,
    pub writable: bool,
    /// The endpoint failed (read it to get the error).
    pub error: bool,
    /// The peer closed its side.
    pub hup: bool,
}

/// One queue of readiness over many endpoints of a board (CLAN's
/// asynchronous event queue): the engine posts one event per endpoint that
/// changed; `wait` costs O(1) per event, not O(endpoints). Level-triggered:
/// an endpoint stays reported while it is ready.
pub struct EventQueue {
    pub(crate) board: crate::board::Board,
}

/// What an endpoint is ready for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readiness {
    /// Data to read, a connection to accept, end of stream, or an error.
    pub readable: bool,
    /// Room to write (streams: connected, not shut down, region not full).
    pub writable: bool,
    pub error: bool,
    /// The peer closed its side.
    pub hup: bool,
}

pub(crate) fn readiness_of(i: &mut Inner, ep: EndpointId) -> Readiness {
    let (readable, writable, error, hup) = readiness(i, ep);
    Readiness { readable, writable, error, hup }
}

fn readiness(i: &mut Inner, ep: EndpointId) -> (bool, bool, bool, bool) {
    use outboard_board::proto::kind;
    let e = &i.eps[ep as usize];
    if !e.open {
        return (false, false, false, false);
    }
    let k = i.map.atomic_u32(i.layout.endpoint_status(ep) + outboard_board::layout::status::KIND).load(std::sync::atomic::Ordering::Acquire);
    let error = i.error(ep) != 0;
    let hup = i.peer_closed(ep);
    match k {
        kind::LISTENER => (!e.accepts.is_empty(), false, error, false),
        kind::DATAGRAM => {
            let has = e.held.is_some() || e.mailbox.as_ref().is_some_and(|m| m.available().is_ok_and(|n| n > 0));
            (has || error, e.put_buf.is_some() || !i.dgram_tx.is_empty(), error, false)
        }
        kind::MAILBOX => {
            let ring = e.mailbox.as_ref().is_some_and(|m| m.available().is_ok_and(|n| n > 0));
            let readable = ring || e.msg_queued > 0 || !e.completions.is_empty() || !e.writes.is_empty() || !e.tripwires.is_empty();
            (readable, e.put_buf.is_some() || !i.dgram_tx.is_empty(), false, false)
        }
        kind::STREAM => {
            let Some(((_, rsize), (_, tsize))) = i.regions(ep) else { return (false, false, error, hup) };
            let avail = i.rx_total(ep).saturating_sub(e.rx_consumed);
            let in_flight = e.tx_produced.saturating_sub(i.tx_acked(ep));
            let connected = i.flags(ep) & outboard_board::layout::flags::CONNECTED != 0;
            let readable = avail > 0 || hup || error;
            let cap = match e.tx_limit {
                0 => tsize as u64,
                l => l.min(tsize as u64),
            };
            let writable = (connected && in_flight < cap && !e.shut) || error;
            let _ = rsize;
            (readable, writable, error, hup)
        }
        _ => (false, false, false, false),
    }
}

impl EventQueue {
    fn set(&mut self, id: EndpointId, reg: Option<(u64, Interest)>) -> Result<()> {
        let mut i = self.board.inner.borrow_mut();
        let Some(ep) = i.eps.get_mut(id as usize) else { return Err(Error::Invalid("no such endpoint")) };
        if !ep.open {
            return Err(Error::Invalid("endpoint not open"));
        }
        ep.token = reg;
        // Look at it on the next wait: it may be ready already.
        if reg.is_some() && !ep.in_ready {
            ep.in_ready = true;
            i.ready.push(id);
        }
        Ok(())
    }
    /// Registers endpoint `id` (a listener, stream or datagram of this board).
    pub fn add(&mut self, id: EndpointId, token: u64, interest: Interest) -> Result<()> {
        self.set(id, Some((token, interest)))
    }
    pub fn modify(&mut self, id: EndpointId, token: u64, interest: Interest) -> Result<()> {
        self.set(id, Some((token, interest)))
    }
    pub fn remove(&mut self, id: EndpointId) -> Result<()> {
        self.set(id, None)
    }
    /// Fills `out` (cleared first) with ready endpoints, waiting up to
    /// `timeout` (None: forever; zero: poll) per the board's mode.
    pub fn wait(&mut self, out: &mut Vec<Ready>, timeout: Option<Duration>) -> Result<usize> {
        out.clear();
        let mode = match (self.board.inner.borrow().mode, timeout) {
            (_, Some(t)) if t.is_zero() => Mode::NonBlocking,
            (Mode::NonBlocking, _) => Mode::Blocking,
            (m, _) => m,
        };
        let r = self.board.wait(mode, timeout, |i| {
            let list = std::mem::take(&mut i.ready);
            let mut keep = Vec::with_capacity(list.len());
            for ep in list {
                let Some((token, want)) = i.eps[ep as usize].token else {
                    i.eps[ep as usize].in_ready = false;
                    continue;
                };
                let (r, w, err, hup) = readiness(i, ep);
                let (r2, w2) = (r && want.readable, w && want.writable);
                if r2 || w2 || err {
                    out.push(Ready { token, endpoint: ep, readable: r2, writable: w2, error: err, hup });
                    keep.push(ep);
                } else {
                    i.eps[ep as usize].in_ready = false;
                }
            }
            i.ready = keep;
            !out.is_empty()
        });
        match r {
            Ok(()) => Ok(out.len()),
            Err(Error::WouldBlock) => Ok(0),
            Err(e) => Err(e),
        }
    }
}
