//! Acting on commands: each record is copied out of the command ring once,
//! decoded into a typed `BoardCommand` (`outboard_board::command::decode`),
//! and only the typed value is acted on. What decoding cannot know (is the
//! endpoint open and of the right kind, is the buffer the application's) is
//! checked here against the engine's own tables.

use super::{EpKind, Session, Violation, COMMANDS_PER_TURN};
use crate::host::SessionCx;
use outboard_board::arena::Side;
use crate::host::handover::{self, Adopt, Handover};
use crate::host::listeners::{Joiner, Listeners};
use outboard_board::command::{decode, BoardCommand, Endpoint, ListenFamily, ListenFlags, StreamOption, SyncSlot};
use outboard_board::layout::{status, tcp_info, CLASS_DGRAM_RX};
use outboard_board::proto::{ev, kind, opt};
use outboard_board::{MailboxProducer, NetAddr};
use outboard_stack::{ConnId, ListenerId, Stack, StackError};
use outboard_time::Instant;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Session {
    /// Runs up to `COMMANDS_PER_TURN` commands. `owned` learns which
    /// connections this session now owns or gave up.
    #[inline]
    pub fn run_commands(&mut self, sc: &mut SessionCx<'_>) -> Result<bool, Violation> {
        // An empty ring (most turns) is one load: the work below sets up a
        // large frame first.
        if self.cmds.is_empty() {
            return Ok(false);
        }
        self.run_queued_commands(sc)
    }

    fn run_queued_commands(&mut self, sc: &mut SessionCx<'_>) -> Result<bool, Violation> {
        let (stack, now, claims, listeners, hand) = (&mut *sc.stack, sc.now, &mut *sc.claims, &mut *sc.listeners, &mut *sc.handover);
        let owned = &mut |c: ConnId, ep: Option<u32>| claims.push((c, ep));
        let mut work = false;
        for _ in 0..COMMANDS_PER_TURN {
            let record = match self.cmds.begin_get() {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(_) => return Err(Violation::Corrupt("command ring tail")),
            };
            self.cmds.end_get();
            self.counters.commands += 1;
            work = true;
            let cmd = decode(&record, self.bounds)?;
            match cmd {
                c if c.is_message() => self.act_message(sc.messages.as_deref_mut(), now, c)?,
                // A mailbox closes with the message service at hand.
                BoardCommand::Close { ep } if matches!(self.eps.get(ep.0 as usize), Some(Some(EpKind::Mailbox(_)))) => {
                    self.close_mailbox(sc.messages.as_deref_mut(), ep.0)
                }
                c => self.act(stack, listeners, hand, now, c, owned)?,
            }
        }
        Ok(work)
    }

    /// The endpoint's slot if it is open.
    fn open_slot(&self, ep: Endpoint, what: &'static str) -> Result<usize, Violation> {
        match self.eps.get(ep.0 as usize) {
            Some(Some(_)) => Ok(ep.0 as usize),
            _ => Err(Violation::BadEndpoint(what)),
        }
    }

    /// Acts on one decoded command.
    pub(crate) fn act(
        &mut self,
        stack: &mut Stack,
        listeners: &mut Listeners,
        hand: &mut Handover,
        now: Instant,
        cmd: BoardCommand,
        owned: &mut dyn FnMut(ConnId, Option<u32>),
    ) -> Result<(), Violation> {
        match cmd {
            // Here without the message service (`run_commands` gives it to them where it runs).
            BoardCommand::MsgBind { .. }
            | BoardCommand::MsgSend { .. }
            | BoardCommand::MsgCall { .. }
            | BoardCommand::MsgReply { .. }
            | BoardCommand::MsgLookup { .. }
            | BoardCommand::MsgPostRecv { .. }
            | BoardCommand::MsgRegister { .. }
            | BoardCommand::MsgUnregister { .. }
            | BoardCommand::MsgWrite { .. }
            | BoardCommand::HandlerStage { .. }
            | BoardCommand::HandlerLoad { .. }
            | BoardCommand::HandlerUnload { .. } => return self.act_message(None, now, cmd),
            BoardCommand::Listen { sync, port, backlog, flags } => self.listen(stack, listeners, sync, port, backlog, flags)?,
            BoardCommand::Inherit { sync, key, ep, flags } => self.inherit(stack, listeners, sync, key, ep, flags)?,
            BoardCommand::ShadowListen { ep, port, backlog, flags } => {
                self.check_shadow(ep)?;
                match listeners.listen(stack, port, backlog, flags, self.joiner(ep.0, flags)) {
                    Ok(lid) => {
                        listener_options(stack, lid, flags);
                        self.eps[ep.0 as usize] = Some(EpKind::Listener { lid, shadow: true });
                    }
                    Err(_) => self.counters.shadows_refused += 1,
                }
            }
            BoardCommand::ShadowInherit { ep, key, parent, flags } => {
                self.check_shadow(ep)?;
                match listeners.inherit(key, parent, self.joiner(ep.0, flags)) {
                    Ok((lid, _)) => self.eps[ep.0 as usize] = Some(EpKind::Listener { lid, shadow: true }),
                    Err(_) => self.counters.shadows_refused += 1,
                }
            }
            BoardCommand::Release { ep } => {
                let i = self.open_slot(ep, "release")?;
                if !matches!(self.eps[i], Some(EpKind::Stream(_))) {
                    return Err(Violation::BadEndpoint("release"));
                }
                if self.forked_recently(now) || hand.has_child(self.key) {
                    self.orphan(ep.0, now + handover::LINGER, false, hand, owned);
                } else if let Some(conn) = self.drop_stream(stack, ep.0, false) {
                    owned(conn, None);
                }
            }
            BoardCommand::Adopt { sync, key, ep, .. } => {
                if self.free_eps.is_empty() {
                    self.sync_result(sync.0, -i64::from(libc::EMFILE))?;
                } else {
                    hand.adopts.push(Adopt { session: self.id, sync: sync.0, key, ep, until: now + handover::ADOPT_WAIT });
                }
            }
            BoardCommand::ChildOf { key } => {
                // Counted once per child, in the parent it named first.
                if self.parent_key.is_none() {
                    self.new_parent = Some(key);
                }
                self.parent_key = Some(key);
            }
            BoardCommand::AcceptOn { ep } => {
                let slot = self.open_slot(ep, "accept on")?;
                match self.eps[slot] {
                    Some(EpKind::Listener { lid, .. }) => listeners.arm(lid, self.id, ep.0),
                    _ => return Err(Violation::BadEndpoint("accept on")),
                }
            }
            BoardCommand::Connect { sync, to, mss, fast_open, tos, rcv_clamp } => {
                self.connect(stack, now, sync, (to, mss, fast_open, tos, rcv_clamp), owned)?
            }
            BoardCommand::Push { ep, written } => self.push(stack, ep, written)?,
            BoardCommand::WakeGroup { ep, group } => {
                let i = self.open_slot(ep, "wake group")?;
                self.groups.set(i as u32, group);
            }
            BoardCommand::Info { sync, ep } => {
                let i = self.open_slot(ep, "info")?;
                let Some(EpKind::Stream(s)) = self.eps[i].as_mut() else {
                    return Err(Violation::BadEndpoint("info"));
                };
                s.info_wanted = true;
                s.published_info = None;
                // Written now, and on every update from here on.
                self.update_stream(stack, ep.0)?;
                self.sync_result(sync.0, 0)?;
            }
            BoardCommand::Consumed { ep, read } => {
                let i = self.open_slot(ep, "consumed")?;
                let Some(EpKind::Stream(s)) = self.eps[i].as_mut() else {
                    return Err(Violation::BadEndpoint("consumed"));
                };
                if read < s.rx_consumed || read > s.rx_published {
                    return Err(Violation::BadLength("consumed more than was delivered"));
                }
                let n = (read - s.rx_consumed) as usize;
                if n > 0 {
                    s.rx_consumed = read;
                    self.counters.rx_delivered += n as u64;
                    stack.tcp_consume(now, s.conn, n);
                }
            }
            BoardCommand::Shutdown { ep } => {
                let i = self.open_slot(ep, "shutdown")?;
                if let Some(EpKind::Stream(s)) = self.eps[i].as_ref() {
                    if let Some(conn) = stack.tcp(s.conn) {
                        conn.shutdown_write();
                    }
                }
            }
            BoardCommand::SetOption { ep, option } => {
                let i = self.open_slot(ep, "set option")?;
                if option == StreamOption::Invalid {
                    self.counters.bad_options += 1;
                    return Ok(());
                }
                if let Some(&EpKind::Listener { lid, .. }) = self.eps[i].as_ref() {
                    match option {
                        // TCP_FASTOPEN after listen (RFC 7413 server side).
                        StreamOption::FastOpen(qlen) => stack.tcp_listen_fast_open(lid, usize::from(qlen)),
                        // As Linux's listener: what the connections it accepts from now on inherit.
                        StreamOption::MaxSeg(mss) => stack.tcp_listen_mss(lid, mss),
                        StreamOption::Tos(t) => stack.tcp_listen_tos(lid, false, t),
                        StreamOption::TrafficClass(t) => stack.tcp_listen_tos(lid, true, t),
                        StreamOption::RcvClamp(v) => stack.tcp_listen_rcv_clamp(lid, v as usize),
                        _ => {}
                    }
                }
                // Options apply to the stream as it is now (an accepted one
                // inherits only TCP_MAXSEG and IP_TOS from its listener, as
                // on Linux: the application sets the rest).
                if let Some(EpKind::Stream(s)) = self.eps[i].as_ref() {
                    if let Some(conn) = stack.tcp(s.conn) {
                        match option {
                            StreamOption::NoDelay(on) => conn.set_nodelay(on),
                            StreamOption::KeepAlive(k) => {
                                conn.set_keepalive(now, k.map(|k| (k.idle, k.interval, k.probes)))
                            }
                            StreamOption::Cork(on) => conn.set_cork(now, on),
                            StreamOption::UserTimeout(ms) => {
                                conn.set_user_timeout(now, Some(std::time::Duration::from_millis(u64::from(ms))))
                            }
                            StreamOption::Congestion(k) => conn.set_congestion(if u64::from(k) == opt::CC_CUBIC {
                                outboard_tcp::CcKind::Cubic
                            } else {
                                outboard_tcp::CcKind::NewReno
                            }),
                            StreamOption::Tos(t) => conn.set_tos(t),
                            StreamOption::RcvClamp(v) => conn.set_rcv_clamp(v as usize),
                            StreamOption::QuickAck(v) => conn.set_quickack(v),
                            // A listener's option; on a stream Linux takes it and
                            // it does nothing (TCP_MAXSEG once the SYN went out).
                            StreamOption::FastOpen(_)
                            | StreamOption::MaxSeg(_)
                            | StreamOption::TrafficClass(_)
                            | StreamOption::Invalid => {}
                        }
                    }
                }
            }
            BoardCommand::Close { ep } | BoardCommand::Abort { ep } => {
                let i = self.open_slot(ep, "close")?;
                match self.eps[i].as_ref() {
                    Some(EpKind::Stream(_)) => {
                        let abort = matches!(cmd, BoardCommand::Abort { .. });
                        if let Some(conn) = self.drop_stream(stack, ep.0, abort) {
                            owned(conn, None);
                        }
                    }
                    Some(EpKind::Listener { .. }) => self.close_listener(stack, listeners, ep.0, None),
                    Some(EpKind::Datagram { udp, .. }) => {
                        stack.udp_close(*udp);
                        self.close_ep(ep.0);
                    }
                    // Closed by `run_commands` (it holds the message service).
                    Some(EpKind::Mailbox(_)) => {}
                    None => {}
                }
            }
            BoardCommand::UdpBind { sync, port, family } => self.udp_bind(stack, sync, port, family)?,
            BoardCommand::UdpSend { ep, offset, len, to } => {
                let i = self.open_slot(ep, "udp send")?;
                let Some(EpKind::Datagram { udp, .. }) = self.eps[i].as_ref() else {
                    return Err(Violation::BadEndpoint("udp send"));
                };
                let udp = *udp;
                let buf = self.layout.arena.locate(offset, len).ok_or(Violation::BadBuffer)?;
                if self.owners.owner(buf) != Some(Side::App) {
                    return Err(Violation::BadBuffer);
                }
                // SAFETY: `locate` checked [offset, offset + len) lies inside one
                // arena buffer, which lies inside the mapping; the engine holds no
                // other slice of it. The application may change the bytes
                // meanwhile: payload only.
                let data = unsafe { self.map.bytes(offset as usize, len as usize) };
                // An IPv6 destination on an engine without IPv6 is counted, not sent.
                let sent = stack.udp_send_to(now, udp, to, data).is_ok();
                if sent {
                    self.counters.datagrams_out += 1;
                } else {
                    self.counters.datagrams_unsent += 1;
                }
                // The bytes are in a frame now (or dropped): the buffer goes straight back.
                self.post(ep.0, ev::BUF_RETURN, offset);
            }
            BoardCommand::UdpRelease { offset } => {
                let buf = self.layout.arena.locate(offset, 0).ok_or(Violation::BadBuffer)?;
                if buf.class != CLASS_DGRAM_RX {
                    return Err(Violation::BadBuffer);
                }
                self.owners.transfer(buf, Side::App, Side::Engine).map_err(|_| Violation::BadBuffer)?;
                self.dgram_rx.free(buf);
            }
            BoardCommand::Detach => self.detached = true,
        }
        Ok(())
    }

    fn listen(
        &mut self,
        stack: &mut Stack,
        listeners: &mut Listeners,
        sync: SyncSlot,
        port: Option<u16>,
        backlog: u32,
        flags: ListenFlags,
    ) -> Result<(), Violation> {
        let Some(port) = port else { return self.sync_result(sync.0, -i64::from(libc::EINVAL)).map(|_| ()) };
        self.open_listener(stack, listeners, sync, flags, |stack, ls, j| {
            let lid = ls.listen(stack, port, backlog, flags, j)?;
            listener_options(stack, lid, flags);
            Ok((lid, port))
        })
    }

    /// Joins a listener inherited across fork (`listeners` checks the key).
    fn inherit(
        &mut self,
        stack: &mut Stack,
        listeners: &mut Listeners,
        sync: SyncSlot,
        key: u64,
        parent_ep: u32,
        flags: ListenFlags,
    ) -> Result<(), Violation> {
        self.open_listener(stack, listeners, sync, flags, |_, ls, j| ls.inherit(key, parent_ep, j))
    }

    /// A new listener endpoint that `join` puts on a listener (a new one or
    /// a place in a group); the sync slot gets the endpoint or -errno.
    fn open_listener(
        &mut self,
        stack: &mut Stack,
        listeners: &mut Listeners,
        sync: SyncSlot,
        flags: ListenFlags,
        join: impl FnOnce(&mut Stack, &mut Listeners, Joiner) -> Result<(ListenerId, u16), i64>,
    ) -> Result<(), Violation> {
        let result = if self.free_eps.is_empty() {
            -i64::from(libc::EMFILE)
        } else {
            let ep = self.open_ep(kind::LISTENER).expect("checked non-empty");
            match join(stack, listeners, self.joiner(ep, flags)) {
                Ok((lid, port)) => {
                    self.listening(stack, ep, lid, port, flags.family);
                    i64::from(ep)
                }
                Err(errno) => {
                    self.close_ep(ep);
                    errno
                }
            }
        };
        if !self.sync_result(sync.0, result)? && result >= 0 {
            self.close_listener(stack, listeners, result as u32, None);
        }
        Ok(())
    }

    fn joiner(&self, ep: u32, flags: ListenFlags) -> Joiner {
        Joiner { session: self.id, uid: self.uid, key: self.key, ep, on_demand: flags.on_demand }
    }

    /// Endpoint `ep` is now a member of listener `lid` on `port`.
    fn listening(&mut self, stack: &Stack, ep: u32, lid: ListenerId, port: u16, family: ListenFamily) {
        let base = self.layout.endpoint_status(ep);
        let listen = tcp_info::pack([tcp_info::TCP_LISTEN, 0, 0, 0, 0, 0, 0, 0]);
        self.map.atomic_u64(base + status::INFO_BYTES).store(listen, Ordering::Release);
        // The address it takes connections on: its own, the IPv6 wildcard
        // for an IPv6-only one, else the engine's IPv4 address.
        let ip = match family {
            ListenFamily::Addr(a) => a,
            ListenFamily::Ipv6 => std::net::Ipv6Addr::UNSPECIFIED.into(),
            ListenFamily::Both | ListenFamily::Ipv4 => stack.config().addr.into(),
        };
        let local = SocketAddr::new(ip, port);
        self.map.write(base + status::LOCAL, NetAddr::from(local));
        self.eps[ep as usize] = Some(EpKind::Listener { lid, shadow: false });
    }

    fn connect(
        &mut self,
        stack: &mut Stack,
        now: Instant,
        sync: SyncSlot,
        (to, mss, fast_open, tos, rcv_clamp): (SocketAddr, u16, bool, u8, u32),
        owned: &mut dyn FnMut(ConnId, Option<u32>),
    ) -> Result<(), Violation> {
        // RFC 7413: with a cookie cached the SYN waits for the first data
        // and the connect completes at once (Linux's TCP_FASTOPEN_CONNECT).
        let mut deferred = false;
        let result = match to {
            _ if to.port() == 0 => Err(-i64::from(libc::EINVAL)),
            // The board carries IPv6; an engine started without it refuses the family.
            SocketAddr::V6(_) if stack.ipv6_config().is_none() => Err(-i64::from(libc::EAFNOSUPPORT)),
            to => match stack.tcp_connect(now, to) {
                Ok(conn) => {
                    // TCP_MAXSEG and IP_TOS set before connect: before the SYN goes out.
                    if let Some(k) = stack.tcp(conn) {
                        k.set_user_mss(mss);
                        k.set_tos(tos);
                        k.set_rcv_clamp(rcv_clamp as usize);
                    }
                    deferred = fast_open && stack.tcp_fast_open(now, conn);
                    match self.new_stream(stack, conn, Some(sync.0)) {
                        Some(ep) => {
                            owned(conn, Some(ep));
                            Ok(ep)
                        }
                        None => {
                            if let Some(k) = stack.tcp(conn) {
                                k.abort();
                            }
                            stack.tcp_release(conn);
                            Err(-i64::from(libc::ENOBUFS))
                        }
                    }
                }
                Err(e) => Err(stack_errno(e)),
            },
        };
        match result {
            Ok(ep) if deferred => {
                if let Some(EpKind::Stream(s)) = self.eps[ep as usize].as_mut() {
                    s.connect_sync = None;
                    s.flags |= outboard_board::layout::flags::CONNECTED;
                }
                self.sync_result(sync.0, i64::from(ep))?;
                self.update_stream(stack, ep)?;
            }
            // The sync completes when the handshake does (update_stream).
            Ok(ep) => self.update_stream(stack, ep)?,
            Err(v) => {
                self.sync_result(sync.0, v)?;
            }
        }
        Ok(())
    }

    fn push(&mut self, stack: &mut Stack, ep: Endpoint, written: u64) -> Result<(), Violation> {
        let i = self.open_slot(ep, "push")?;
        let Some(EpKind::Stream(s)) = self.eps[i].as_mut() else { return Err(Violation::BadEndpoint("push")) };
        if written < s.tx_pushed {
            return Err(Violation::BadLength("push went backwards"));
        }
        let n = written - s.tx_pushed;
        if n > 0 {
            let Some(conn) = stack.tcp(s.conn) else { return Ok(()) };
            let room = conn.send_capacity() as u64;
            if room == 0 {
                // Reset or shut down meanwhile: the application learns it from the status.
                return Ok(());
            }
            if n > room {
                return Err(Violation::BadLength("push beyond the transmit region"));
            }
            let took = conn.send_in_place(n as usize).unwrap_or(0) as u64;
            if outboard_trace::enabled() && took > 0 {
                let (a, b) = conn.send_peek(conn.send_queued() - took as usize, 16);
                outboard_trace::ring(outboard_trace::Hop::EnginePickup, a, b, 0);
            }
            s.tx_pushed += took;
            conn.request_writable();
        }
        Ok(())
    }

    fn udp_bind(&mut self, stack: &mut Stack, sync: SyncSlot, port: u16, family: ListenFamily) -> Result<(), Violation> {
        let families = crate::host::listeners::families_of(stack, family);
        let result = if self.free_eps.is_empty() {
            -i64::from(libc::EMFILE)
        } else if let Err(e) = families {
            e
        } else {
            match stack.udp_bind_for(port, families.unwrap_or_default()) {
                Ok(udp) => {
                    let ep = self.open_ep(kind::DATAGRAM).expect("checked non-empty");
                    let local = stack.udp_local_port(udp).unwrap_or(port);
                    let base = self.layout.endpoint_status(ep);
                    let ip: std::net::IpAddr = match family {
                        ListenFamily::Addr(a) => a,
                        ListenFamily::Ipv6 => std::net::Ipv6Addr::UNSPECIFIED.into(),
                        ListenFamily::Both | ListenFamily::Ipv4 => stack.config().addr.into(),
                    };
                    self.map.write(base + status::LOCAL, NetAddr::from(SocketAddr::new(ip, local)));
                    let mailbox = MailboxProducer::new(
                        self.map.clone(),
                        self.layout.endpoint_mailbox(ep),
                        self.layout.params.mailbox_capacity,
                        Arc::new(self.layout.arena.clone()),
                    );
                    // The new socket's mailbox starts empty, whoever used the slot before.
                    outboard_board::ring::reset(&self.map, self.layout.endpoint_mailbox(ep));
                    self.eps[ep as usize] = Some(EpKind::Datagram { udp, mailbox });
                    self.polled.push(ep);
                    i64::from(ep)
                }
                Err(e) => stack_errno(e),
            }
        };
        if !self.sync_result(sync.0, result)? && result >= 0 {
            if let Some(EpKind::Datagram { udp, .. }) = self.eps[result as usize].as_ref() {
                stack.udp_close(*udp);
            }
            self.close_ep(result as u32);
        }
        Ok(())
    }

    /// Leaves the listener (the last member out closes it, or leaves it
    /// lingering until `linger_until`).
    pub(super) fn close_listener(&mut self, stack: &mut Stack, listeners: &mut Listeners, ep: u32, linger_until: Option<Instant>) {
        let Some(EpKind::Listener { lid, shadow }) = self.eps[ep as usize] else { return };
        listeners.leave(stack, lid, self.id, ep, linger_until);
        if shadow {
            // The id, its record and its CLOSED event are its own shard's.
            self.eps[ep as usize] = None;
            self.groups.set(ep, 0);
        } else {
            self.close_ep(ep);
        }
    }

    /// Whether the application forked within the last `LINGER` (its
    /// `FORKS` counter changed since `forks_seen`).
    pub(super) fn forked_recently(&mut self, now: Instant) -> bool {
        let forks = self.app_counters()[outboard_board::layout::app_counter::FORKS];
        if forks != self.forks_seen.0 {
            self.forks_seen = (forks, Some(now));
        }
        self.forks_seen.1.is_some_and(|t| now.saturating_duration_since(t) < handover::LINGER)
    }

    /// Stream `ep` leaves this board but not the stack: its connection waits
    /// (`until`) for a child's ADOPT. The endpoint id is freed.
    pub(super) fn orphan(&mut self, ep: u32, until: Instant, abort: bool, hand: &mut Handover, owned: &mut dyn FnMut(ConnId, Option<u32>)) {
        let Some(EpKind::Stream(s)) = self.eps[ep as usize].as_ref() else { return };
        let conn = s.conn;
        owned(conn, None);
        hand.orphans.push(handover::Orphan { key: self.key, ep, conn, until, abort });
        hand.counters.released += 1;
        self.close_ep(ep);
    }

    /// A shadow listener names an endpoint of another shard that this shard
    /// has no entry for yet.
    fn check_shadow(&self, ep: Endpoint) -> Result<(), Violation> {
        let ours = self.layout.shard_of(ep.0) == self.shard;
        if ours || !matches!(self.eps.get(ep.0 as usize), Some(None)) {
            return Err(Violation::BadEndpoint("shadow listener"));
        }
        Ok(())
    }
}

fn stack_errno(e: StackError) -> i64 {
    -i64::from(match e {
        StackError::AddrInUse => libc::EADDRINUSE,
        StackError::NoEphemeralPorts => libc::EADDRNOTAVAIL,
        StackError::NoRoute => libc::ENETUNREACH,
        _ => libc::EINVAL,
    })
}

/// Options set before `listen`: TCP_FASTOPEN (the listener takes RFC 7413
/// Fast Open SYNs), TCP_MAXSEG and IP_TOS (its connections inherit them).
fn listener_options(stack: &mut Stack, lid: ListenerId, flags: ListenFlags) {
    if flags.fastopen_qlen > 0 {
        stack.tcp_listen_fast_open(lid, usize::from(flags.fastopen_qlen));
    }
    stack.tcp_listen_mss(lid, flags.mss);
    stack.tcp_listen_tos(lid, false, flags.tos);
    stack.tcp_listen_tos(lid, true, flags.tclass);
    stack.tcp_listen_rcv_clamp(lid, flags.rcv_clamp as usize);
}
