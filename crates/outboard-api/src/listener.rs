use crate::board::{Board, Mode};
use crate::{EndpointId, Error, Result, Stream};
use outboard_board::command::Endpoint;
use outboard_board::layout::status;
use outboard_board::BoardCommand;

/// A listening TCP port on the engine's address. The engine accepts
/// connections into the listener's backlog by itself (while the board has
/// endpoints and stream regions); `accept` hands them out.
pub struct Listener {
    pub(crate) board: Board,
    pub(crate) id: EndpointId,
}

impl Listener {
    pub fn id(&self) -> EndpointId {
        self.id
    }
    pub fn set_mode(&mut self, mode: Mode) {
        self.board.inner.borrow_mut().eps[self.id as usize].mode = Some(mode);
    }
    pub fn accept(&mut self) -> Result<Stream> {
        let mode = {
            let b = self.board.inner.borrow();
            b.eps[self.id as usize].mode.unwrap_or(b.mode)
        };
        let mut got = None;
        self.board.wait(mode, None, |i| {
            got = i.eps[self.id as usize].accepts.pop_front();
            got.is_some()
        })?;
        let ep = got.ok_or(Error::WouldBlock)?;
        {
            let mut b = self.board.inner.borrow_mut();
            if ep as usize >= b.eps.len() {
                return Err(Error::Invalid("the engine accepted into an endpoint out of range"));
            }
            b.open_ep(ep);
        }
        Ok(Stream::new(self.board.clone(), ep))
    }
    /// A listener opened on demand (`ListenFlags::on_demand`) takes
    /// connections from now on. Idempotent; the engine ignores it for
    /// listeners that take connections anyway.
    pub fn accept_on(&self) -> Result<()> {
        let mut b = self.board.inner.borrow_mut();
        b.check_alive()?;
        b.command_listener(BoardCommand::AcceptOn { ep: Endpoint(self.id) })
    }
    /// TCP_FASTOPEN: RFC 7413 Fast Open SYNs are taken, at most `qlen`
    /// pending at once (0: off). `ListenFlags::fastopen_qlen` sets it at `listen`.
    pub fn set_fast_open(&self, qlen: u16) -> Result<()> {
        let mut b = self.board.inner.borrow_mut();
        b.check_alive()?;
        b.command_listener(BoardCommand::SetOption { ep: Endpoint(self.id), option: outboard_board::command::StreamOption::FastOpen(qlen) })
    }
    /// TCP_MAXSEG on the listener, as Linux's (before or after `listen`):
    /// the connections it accepts from now on advertise at most `mss` in
    /// their SYN-ACK and never send larger segments (0: none; 88..=32767).
    /// `ListenFlags::mss` sets it at `listen`.
    pub fn set_max_seg(&self, mss: u16) -> Result<()> {
        let mut b = self.board.inner.borrow_mut();
        b.check_alive()?;
        b.command_listener(BoardCommand::SetOption { ep: Endpoint(self.id), option: outboard_board::command::StreamOption::MaxSeg(mss) })
    }
    /// IP_TOS (`ipv6` false) or IPV6_TCLASS (`ipv6` true) on the listener:
    /// the connections of that family it accepts from now on carry these
    /// DSCP bits from their SYN-ACK on (as Linux's accepted sockets inherit
    /// the listener's). `ListenFlags::tos` / `tclass` set them at `listen`.
    pub fn set_tos(&self, ipv6: bool, tos: u8) -> Result<()> {
        use outboard_board::command::StreamOption;
        let option = if ipv6 { StreamOption::TrafficClass(tos) } else { StreamOption::Tos(tos) };
        let mut b = self.board.inner.borrow_mut();
        b.check_alive()?;
        b.command_listener(BoardCommand::SetOption { ep: Endpoint(self.id), option })
    }
    /// SO_RCVBUF on the listener, as the window clamp in bytes (0: none):
    /// the connections it accepts from now on offer at most that window,
    /// their SYN-ACK's window scale chosen for it. `ListenFlags::rcv_clamp`
    /// sets it at `listen`.
    pub fn set_rcv_clamp(&self, clamp: u32) -> Result<()> {
        let mut b = self.board.inner.borrow_mut();
        b.check_alive()?;
        b.command_listener(BoardCommand::SetOption { ep: Endpoint(self.id), option: outboard_board::command::StreamOption::RcvClamp(clamp) })
    }
    pub fn local_port(&self) -> u16 {
        self.board.inner.borrow().addr(self.id, status::LOCAL).map_or(0, |a| a.port())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Ok(mut i) = self.board.inner.try_borrow_mut() {
            i.eps[self.id as usize].open = false;
            // Every shard listens (the others' shadows close with it).
            let _ = i.command_listener(BoardCommand::Close { ep: Endpoint(self.id) });
        }
    }
}
