//! One socket as the shim sees it. An AF_INET socket starts `Undecided`
//! (a real kernel socket holds its descriptor number); `bind`, `connect` or
//! a first `sendto` decides whether the engine or the kernel gets it. An
//! engine socket keeps the kernel socket as a placeholder (so descriptor
//! numbers, `fstat` and `F_GETFL` stay real) and never uses it for traffic.
//!
//! Every operation here runs with the process-wide lock held and never
//! waits: `None` means "would block", and the caller (interpose.rs) decides
//! whether to sleep or return EAGAIN.

use outboard_api::{Board, Datagram, Error, Listener, PendingConnect, Stream};
use crate::epoll::Inbox;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::rc::Weak;
use std::time::Duration;

pub type SResult<T> = Result<T, i32>;

pub enum Kind {
    /// Not bound or connected yet (the kernel placeholder may still become the socket).
    Undecided,
    /// Bound to an address the engine serves (TCP: not listening yet).
    Bound,
    Listener(Listener),
    Connecting(PendingConnect),
    Stream(Stream),
    Dgram(Datagram),
    /// A connect failed; `so_error` says why.
    Failed,
    /// Inherited across fork from a parent that owns it: only `close` works.
    /// (Listeners are not: the child joins them, see `state::join_inherited`.)
    Inherited,
    /// A stream inherited across fork, not used here yet: the first call on
    /// it takes it over from the parent (`Shim::sock`: ADOPT with the
    /// parent board's key, its endpoint there and its shard).
    InheritedStream { key: u64, ep: u32, shard: u32 },
}

/// Socket options the shim keeps for engine sockets (and applies when the
/// connection exists).
#[derive(Debug, Clone, Copy)]
pub struct Opts {
    pub reuseaddr: bool,
    pub reuseport: bool,
    pub nodelay: bool,
    pub keepalive: bool,
    pub keepidle_s: u32,
    pub keepintvl_s: u32,
    pub keepcnt: u32,
    pub rcvbuf: Option<u32>,
    pub sndbuf: Option<u32>,
    /// IPV6_V6ONLY (an IPv6-only socket is the kernel's).
    pub v6only: bool,
    /// SO_LINGER: Some(seconds) when on.
    pub linger: Option<u32>,
    pub rcvtimeo: Option<Duration>,
    pub sndtimeo: Option<Duration>,
    /// TCP_MAXSEG as set (0: none): the SYN's MSS and the send MSS's ceiling.
    pub maxseg: u16,
    /// TCP_CORK.
    pub cork: bool,
    /// IP_TOS as Linux keeps it (read back, and put on a stream's IPv4 packets).
    pub tos: u8,
    /// IPV6_TCLASS as Linux keeps it (read back, and put on a stream's IPv6 packets).
    pub tclass: u8,
    /// TCP_USER_TIMEOUT in milliseconds (0: off).
    pub user_timeout_ms: u32,
    /// TCP_CONGESTION as set (`proto::opt::CC_*`); None: the engine's.
    pub cc: Option<u8>,
    /// TCP_INQ: recvmsg adds a TCP_CM_INQ control message.
    pub inq: bool,
    /// TCP_FASTOPEN: the RFC 7413 Fast Open queue length of a listener
    /// (as Linux keeps it: at most net.core.somaxconn); 0: off.
    pub fastopen_qlen: u16,
    /// TCP_FASTOPEN_CONNECT: `connect` uses Fast Open.
    pub fastopen_connect: bool,
    /// TCP_NOTSENT_LOWAT (0: unset, Linux's default `tcp_notsent_lowat`
    /// UINT_MAX): writable only while fewer bytes wait unsent.
    pub notsent_lowat: u32,
    /// TCP_QUICKACK as read back before the socket is a connection (a
    /// connection's is the engine's: Linux leaves the interactive mode at
    /// the handshake, and accepted connections do not inherit it).
    pub quickack: bool,
}

impl Opts {
    /// SO_RCVBUF as the engine's window clamp: half the doubled value Linux
    /// keeps (its window at the default 50 % payload ratio); 0: not set.
    pub fn rcv_clamp(&self) -> u32 {
        self.rcvbuf.map_or(0, |b| b / 2)
    }

    /// SO_SNDBUF as the limit on bytes written and not yet acknowledged:
    /// the doubled value Linux keeps; 0: not set (the region's size).
    pub fn send_limit(&self) -> usize {
        self.sndbuf.map_or(0, |b| b as usize)
    }

    /// The TOS byte of packets to `peer`, as Linux picks it by the packet's
    /// family: IPV6_TCLASS for IPv6, IP_TOS for IPv4 (an IPv4-mapped peer of
    /// an AF_INET6 socket included). The engine keeps the ECN bits.
    pub fn tos_for(&self, peer: SocketAddr) -> u8 {
        match crate::addr::unmap(peer) {
            SocketAddr::V6(_) => self.tclass & !0b11,
            SocketAddr::V4(_) => self.tos & !0b11,
        }
    }
}

impl Default for Opts {
    fn default() -> Opts {
        // Linux's defaults (net.ipv4.tcp_keepalive_*).
        Opts {
            reuseaddr: false,
            reuseport: false,
            nodelay: false,
            keepalive: false,
            v6only: false,
            keepidle_s: 7200,
            keepintvl_s: 75,
            keepcnt: 9,
            rcvbuf: None,
            sndbuf: None,
            linger: None,
            rcvtimeo: None,
            sndtimeo: None,
            maxseg: 0,
            cork: false,
            tos: 0,
            tclass: 0,
            user_timeout_ms: 0,
            cc: None,
            inq: false,
            fastopen_qlen: 0,
            fastopen_connect: false,
            notsent_lowat: 0,
            quickack: true,
        }
    }
}

pub struct Sock {
    pub kind: Kind,
    /// SOCK_STREAM (else SOCK_DGRAM).
    pub stream: bool,
    /// An AF_INET6 socket (IPv4 peers of a dual-stack one are shown IPv4-mapped; real IPv6 when the engine runs it).
    pub v6: bool,
    /// O_NONBLOCK of the open file (shared by dup'ed descriptors, as in the kernel).
    pub nonblock: bool,
    /// What the program bound (getsockname shows it as bound: 0.0.0.0 stays 0.0.0.0).
    pub bound: Option<SocketAddr>,
    /// The connected peer (datagram sockets: the default destination and receive filter).
    pub peer: Option<SocketAddr>,
    /// Pending SO_ERROR.
    pub so_error: i32,
    /// The stream's failure was returned once already (later reads see end of stream, writes EPIPE).
    pub err_reported: bool,
    /// A listener's or datagram socket's "engine gone" was returned once
    /// already: from then on it is quiet (not ready, calls would block), so a
    /// server whose engine died does not spin on a socket that fails forever.
    pub gone_reported: bool,
    /// Kind `Inherited` that was a listener in the parent: the child could
    /// not join it (the engine down or refusing at `fork`). It is quiet,
    /// never ready (its calls fail with EOPNOTSUPP): an event loop must not
    /// spin on it, as it would on POLLERR|POLLHUP.
    pub unjoined_listener: bool,
    pub shut_rd: bool,
    pub shut_wr: bool,
    /// A non-blocking connect's success was seen by a later connect() (Linux returns 0 once, then EISCONN).
    pub connect_confirmed: bool,
    pub backlog: u32,
    /// A listener whose process showed it accepts (an `accept`, or read
    /// interest in poll, select or epoll): the engine was told
    /// (`ACCEPT_ON`), and gives it connections.
    pub armed: bool,
    /// A stream that existed when this process forked: a child may hold it,
    /// so closing it releases it to that child (`Stream::release`).
    pub forked: bool,
    /// A listener this process joined (inherited across fork, or SO_REUSEPORT):
    /// re-created on a restarted engine, it shares the port again.
    pub joined: bool,
    pub opts: Opts,
    /// Options set while undecided that the engine does not honour (the
    /// kernel placeholder took them): counted and logged as refused when
    /// the engine takes the socket (`became_engine`).
    pub unhonoured: Vec<(i32, i32)>,
    /// The engine holds this stream corked (TCP_CORK, or a MSG_MORE send
    /// until the next send without it).
    pub engine_cork: bool,
    /// Bumped when `kind` changes (edge-triggered epoll sees it as news).
    pub transitions: u32,
    /// The epoll sets watching this socket, and under which descriptor
    /// (`bump` makes it a candidate there).
    pub watchers: Vec<(Weak<Inbox>, RawFd)>,
    /// The wake group its endpoint was put in (`Board::set_wake_group`),
    /// with that endpoint: by the first epoll set that saw it evented.
    pub wake_group: Option<(u32, u8)>,
}

/// Maps an API error to the errno a Linux socket gives.
pub fn errno_of(e: &Error, stream: bool) -> i32 {
    match e {
        Error::EngineGone if stream => libc::ECONNRESET,
        Error::EngineGone => libc::ENETDOWN,
        Error::Attach(_) | Error::NotAdmitted(_) => libc::ENETDOWN,
        e => e.errno(),
    }
}

impl Sock {
    pub fn new(stream: bool, v6: bool, nonblock: bool) -> Sock {
        Sock {
            kind: Kind::Undecided,
            stream,
            v6,
            nonblock,
            bound: None,
            peer: None,
            so_error: 0,
            err_reported: false,
            gone_reported: false,
            unjoined_listener: false,
            shut_rd: false,
            shut_wr: false,
            connect_confirmed: false,
            backlog: 0,
            armed: false,
            forked: false,
            joined: false,
            opts: Opts::default(),
            engine_cork: false,
            unhonoured: Vec::new(),
            transitions: 0,
            watchers: Vec::new(),
            wake_group: None,
        }
    }

    /// Whether a child forked now takes this socket to the engine (a
    /// listener it joins, a stream it may take over: `forget_after_fork`).
    pub fn hands_over_at_fork(&self) -> bool {
        matches!(self.kind, Kind::Listener(_) | Kind::Stream(_))
    }

    pub fn inherited(old: &Sock) -> Sock {
        let mut s = Sock::new(old.stream, old.v6, old.nonblock);
        s.kind = match old.kind {
            Kind::Undecided => Kind::Undecided,
            _ => Kind::Inherited,
        };
        s.unjoined_listener = matches!(old.kind, Kind::Listener(_));
        s.peer = old.peer;
        s.bound = old.bound;
        s.opts = old.opts;
        s
    }

    /// The socket's state changed in the shim (not through an engine
    /// event): edge-triggered epoll sees news, and every epoll set watching
    /// it looks at it on its next wait.
    pub fn bump(&mut self) {
        self.transitions = self.transitions.wrapping_add(1);
        for (inbox, fd) in &self.watchers {
            if let Some(i) = inbox.upgrade() {
                i.push(*fd);
            }
        }
    }

    /// The engine endpoint of a listener or a stream: the engine posts an
    /// event on it for every change of its readiness (other sockets' epoll
    /// interests are looked at on every wait, and calls blocked on them are
    /// woken by any event: a datagram socket's send room is board-wide, a
    /// connect in progress completes through a sync slot).
    pub fn evented_endpoint(&self) -> Option<u32> {
        match &self.kind {
            Kind::Listener(l) => Some(l.id()),
            Kind::Stream(s) => Some(s.id()),
            _ => None,
        }
    }

    /// The process shows it accepts on this socket: a listener tells the
    /// engine once, which from then on gives it connections (listeners are
    /// opened on demand, so a process that holds a shared listener and
    /// never accepts — nginx's master — is given none).
    pub fn want_accepts(&mut self) {
        if let Kind::Listener(l) = &self.kind {
            if !self.armed && l.accept_on().is_ok() {
                self.armed = true;
            }
        }
    }

    /// The engine took this socket: counted, and the options set before
    /// that it cannot honour are counted as refused (`unsupported_options`)
    /// and named with `OUTBOARD_LOG=debug`.
    pub fn became_engine(&mut self) {
        crate::state::count(crate::state::Count::EngineSockets);
        for (level, name) in std::mem::take(&mut self.unhonoured) {
            crate::state::count(crate::state::Count::UnsupportedOptions);
            if crate::log::debug_enabled() {
                crate::log::debug(&format!(
                    "unsupported setsockopt level={level} name={name} (set before the engine took the socket; the kernel placeholder kept it)"
                ));
            }
        }
    }

    pub fn is_engine(&self) -> bool {
        !matches!(self.kind, Kind::Undecided | Kind::Inherited | Kind::InheritedStream { .. })
    }

    /// Moves a connect in progress forward (without waiting).
    pub fn settle(&mut self) {
        let Kind::Connecting(p) = &mut self.kind else { return };
        match p.poll() {
            None => {}
            Some(Ok(s)) => {
                self.kind = Kind::Stream(s);
                self.bump();
                self.apply_opts();
            }
            Some(Err(e)) => {
                self.so_error = errno_of(&e, true);
                self.kind = Kind::Failed;
                self.bump();
            }
        }
    }

    /// Pushes the options that the engine implements to a new connection.
    pub fn apply_opts(&mut self) {
        let o = self.opts;
        if let Kind::Stream(s) = &mut self.kind {
            if o.nodelay {
                let _ = s.set_nodelay(true);
            }
            if o.keepalive {
                let _ = s.set_keepalive(Some(keepalive_of(&o)));
            }
            if o.cork {
                let _ = s.set_cork(true);
            }
            if o.user_timeout_ms != 0 {
                let _ = s.set_user_timeout(o.user_timeout_ms);
            }
            if let Some(cc) = o.cc {
                let _ = s.set_cubic(u64::from(cc) == outboard_board::proto::opt::CC_CUBIC);
            }
            if o.rcvbuf.is_some() {
                let _ = s.set_rcv_clamp(o.rcv_clamp());
            }
            s.set_send_limit(o.send_limit());
            let tos = o.tos_for(s.peer_addr());
            if tos != 0 {
                let _ = s.set_tos(tos);
            }
        }
        self.engine_cork = o.cork;
    }

    /// Corks the engine's stream for a MSG_MORE send (`more`), or uncorks
    /// it after a send without MSG_MORE unless TCP_CORK is on (Linux: the
    /// bytes of a MSG_MORE send wait for the next send).
    pub fn cork_for_send(&mut self, more: bool) {
        let want = self.opts.cork || more;
        if want == self.engine_cork {
            return;
        }
        if let Kind::Stream(s) = &mut self.kind {
            if s.set_cork(want).is_ok() {
                self.engine_cork = want;
            }
        }
    }

    /// The stream's failure, if any.
    pub fn error(&self) -> Option<Error> {
        match &self.kind {
            Kind::Stream(x) => x.error(),
            _ => None,
        }
    }

    /// The failure to report now, once (SO_ERROR, or the first call after it).
    pub fn take_error(&mut self) -> i32 {
        if self.so_error != 0 {
            let e = self.so_error;
            self.so_error = 0;
            self.err_reported = true;
            return e;
        }
        if self.err_reported {
            return 0;
        }
        if let Kind::Stream(s) = &self.kind {
            if let Some(e) = s.error() {
                self.err_reported = true;
                return errno_of(&e, true);
            }
        }
        0
    }

    /// Receives into `bufs` (stream or datagram); `None`: nothing yet.
    pub fn recv(&mut self, bufs: &mut [&mut [u8]], flags: i32, from: &mut Option<SocketAddr>) -> Option<SResult<usize>> {
        self.settle();
        let peek = flags & libc::MSG_PEEK != 0;
        let trunc = flags & libc::MSG_TRUNC != 0;
        match &mut self.kind {
            Kind::Stream(s) => {
                // After SHUT_RD Linux still returns the bytes queued, then 0
                // (it never waits for more).
                if self.shut_rd && s.readable_bytes() == 0 {
                    return Some(Ok(0));
                }
                if peek {
                    let first = bufs.iter_mut().find(|b| !b.is_empty());
                    let Some(b) = first else { return Some(Ok(0)) };
                    return match s.peek(b) {
                        Ok(0) => self.recv_nothing(),
                        Ok(n) => Some(Ok(n)),
                        Err(e) => Some(Err(errno_of(&e, true))),
                    };
                }
                if bufs.iter().all(|b| b.is_empty()) {
                    return Some(Ok(0));
                }
                // All the pieces filled in one read, one CONSUMED for the engine.
                match s.recv_vectored(bufs) {
                    Ok(0) | Err(Error::WouldBlock) => self.recv_nothing(),
                    Ok(n) => Some(Ok(n)),
                    Err(e) if !self.err_reported => {
                        self.err_reported = true;
                        Some(Err(errno_of(&e, true)))
                    }
                    Err(_) => self.recv_nothing(),
                }
            }
            Kind::Dgram(d) => {
                let peer = self.peer;
                let (v6, v6only) = (self.v6, self.opts.v6only);
                let family_ok_of = |a: &SocketAddr| if v6 { !(v6only && a.is_ipv4()) } else { a.is_ipv4() };
                loop {
                    let (n, src) = match d.begin_get() {
                        Ok((msg, src)) => {
                            let family_ok = family_ok_of(&crate::addr::unmap(src));
                            let mut off = 0;
                            for b in bufs.iter_mut() {
                                let k = b.len().min(msg.len() - off);
                                b[..k].copy_from_slice(&msg[off..off + k]);
                                off += k;
                                if off == msg.len() {
                                    break;
                                }
                            }
                            // A source of a family the socket does not take (IPv6 on
                            // AF_INET, IPv4 on an IPv6-only socket) is not wanted.
                            (if trunc { msg.len() } else { off }, Some(crate::addr::unmap(src)).filter(|_| family_ok))
                        }
                        Err(Error::WouldBlock) => return None,
                        Err(Error::EngineGone) if self.gone_reported => return None,
                        Err(e) => {
                            self.gone_reported |= matches!(e, Error::EngineGone);
                            return Some(Err(errno_of(&e, false)));
                        }
                    };
                    // A connected datagram socket takes only its peer's datagrams.
                    // (Address and port: a link-local peer's scope may be written differently.)
                    let wanted = src.is_some_and(|s| peer.is_none_or(|p| p.ip() == s.ip() && p.port() == s.port()));
                    if !peek || !wanted {
                        let _ = d.end_get();
                    }
                    if wanted {
                        *from = src;
                        return Some(Ok(n));
                    }
                }
            }
            Kind::Failed => {
                let e = self.take_error();
                Some(if e != 0 { Err(e) } else { Ok(0) })
            }
            Kind::Listener(_) | Kind::Bound | Kind::Undecided if self.stream => Some(Err(libc::ENOTCONN)),
            Kind::Connecting(_) => None,
            Kind::Inherited | Kind::InheritedStream { .. } => Some(Err(crate::ops::inherited("recv/send"))),
            _ => None,
        }
    }

    /// No bytes now: end of stream, the failure (once), or "wait".
    fn recv_nothing(&mut self) -> Option<SResult<usize>> {
        let Kind::Stream(s) = &self.kind else { return None };
        if let Some(e) = s.error() {
            if !self.err_reported {
                self.err_reported = true;
                return Some(Err(errno_of(&e, true)));
            }
            return Some(Ok(0));
        }
        if s.at_eof() {
            return Some(Ok(0));
        }
        None
    }

    /// Sends what fits now from `bufs` (streams), or one datagram.
    /// Errors that raise SIGPIPE come back as `Err(EPIPE)`.
    pub fn send(&mut self, bufs: &[&[u8]], to: Option<SocketAddr>) -> Option<SResult<usize>> {
        self.settle();
        match &mut self.kind {
            Kind::Stream(s) => {
                if self.shut_wr {
                    return Some(Err(libc::EPIPE));
                }
                if let Some(e) = s.error() {
                    let mut e = errno_of(&e, true);
                    // A reset after the peer's FIN (CLOSE-WAIT) is EPIPE on Linux (tcp_reset).
                    if e == libc::ECONNRESET && s.peer_closed() {
                        e = libc::EPIPE;
                    }
                    if !self.err_reported {
                        self.err_reported = true;
                        return Some(Err(e));
                    }
                    return Some(Err(libc::EPIPE));
                }
                // All the pieces in one push, as the kernel's sendmsg queues them.
                match s.send_vectored(bufs) {
                    Ok(n) if n > 0 || bufs.iter().all(|b| b.is_empty()) => Some(Ok(n)),
                    Ok(_) | Err(Error::WouldBlock) => None,
                    Err(e) => {
                        let e = errno_of(&e, true);
                        Some(Err(if e == libc::EPIPE || self.err_reported { libc::EPIPE } else { e }))
                    }
                }
            }
            Kind::Dgram(d) => {
                let Some(to) = to.or(self.peer) else { return Some(Err(libc::EDESTADDRREQ)) };
                let len: usize = bufs.iter().map(|b| b.len()).sum();
                let buf = match d.begin_put() {
                    Ok(b) => b,
                    Err(Error::WouldBlock) => return None,
                    Err(e) => return Some(Err(errno_of(&e, false))),
                };
                if len > buf.len() {
                    let _ = d.end_put_to(0, to);
                    return Some(Err(libc::EMSGSIZE));
                }
                let mut off = 0;
                for b in bufs {
                    buf[off..off + b.len()].copy_from_slice(b);
                    off += b.len();
                }
                Some(d.end_put_to(len, to).map(|_| len).map_err(|e| errno_of(&e, false)))
            }
            Kind::Connecting(_) => None,
            Kind::Failed => {
                let e = self.take_error();
                Some(Err(if e != 0 { e } else { libc::EPIPE }))
            }
            Kind::Inherited | Kind::InheritedStream { .. } => Some(Err(crate::ops::inherited("recv/send"))),
            _ if self.stream => Some(Err(libc::EPIPE)),
            _ => Some(Err(libc::EDESTADDRREQ)),
        }
    }

    /// poll(2) bits for this socket now.
    pub fn poll_bits(&mut self, board: Option<&Board>) -> i16 {
        use libc::{POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDHUP, POLLRDNORM, POLLWRNORM};
        self.settle();
        let rd = POLLIN | POLLRDNORM;
        let wr = POLLOUT | POLLWRNORM;
        let pending_err = if self.so_error != 0 { POLLERR } else { 0 };
        if crate::wait::ENGINE_GONE.load(std::sync::atomic::Ordering::Relaxed) {
            // The engine died: its sockets fail (streams ECONNRESET, the rest
            // ENETDOWN); they poll ready so the program finds out — once, for
            // a listener or datagram socket (a stream's reset stays, as on Linux).
            match &self.kind {
                Kind::Listener(_) | Kind::Dgram(_) if self.gone_reported => return 0,
                Kind::Listener(_) => return rd | POLLERR,
                Kind::Stream(_) | Kind::Dgram(_) | Kind::Connecting(_) => return rd | wr | POLLERR | POLLHUP,
                _ => {}
            }
        }
        match &self.kind {
            // An unconnected TCP socket polls as POLLOUT|POLLHUP on Linux.
            Kind::Undecided | Kind::Bound if self.stream => wr | POLLHUP,
            Kind::Undecided | Kind::Bound => wr,
            Kind::Inherited if self.unjoined_listener => 0,
            Kind::Inherited | Kind::InheritedStream { .. } => POLLERR | POLLHUP,
            Kind::Failed => wr | POLLERR | POLLHUP | rd,
            Kind::Connecting(_) => 0,
            Kind::Listener(l) => {
                let r = board.map(|b| b.readiness(l.id())).unwrap_or_default();
                if r.readable { rd } else { 0 }
            }
            Kind::Dgram(d) => {
                let r = board.map(|b| b.readiness(d.id())).unwrap_or_default();
                (if r.readable { rd } else { 0 }) | (if r.writable { wr } else { 0 }) | pending_err
            }
            Kind::Stream(s) => {
                let r = board.map(|b| b.readiness(s.id())).unwrap_or_default();
                let mut bits = pending_err;
                if r.readable {
                    bits |= rd;
                }
                // Linux's tcp_poll: the receive side shut (the peer's FIN,
                // or our SHUT_RD) polls readable with RDHUP.
                if r.hup || self.shut_rd {
                    bits |= POLLRDHUP | rd;
                }
                // Linux's tcp_stream_memory_free: with TCP_NOTSENT_LOWAT,
                // writable only while the unsent bytes are below it.
                let lowat_ok = self.opts.notsent_lowat == 0 || s.notsent() < u64::from(self.opts.notsent_lowat);
                if (r.writable && !self.shut_wr && lowat_ok) || r.error {
                    bits |= wr;
                }
                if r.error && !self.err_reported {
                    bits |= POLLERR;
                }
                if r.error || ((r.hup || self.shut_rd) && self.shut_wr) {
                    bits |= POLLHUP;
                }
                bits
            }
        }
    }

    /// What changed lately, for an edge-triggered wait for `events`
    /// (EPOLLIN, EPOLLOUT…): the endpoint's edges of those kinds (bytes
    /// arriving for a reader, acknowledged for a writer: an acknowledgement
    /// is no edge for a reader, as on Linux; see `Board::edges`), our own
    /// state changes and the engine's death. Each term only grows, so the
    /// sum moves whenever one does.
    pub fn news_key(&self, board: Option<&Board>, events: u32) -> u64 {
        let e = match (&self.kind, board) {
            (Kind::Stream(s), Some(b)) => b.edges(s.id()),
            (Kind::Listener(l), Some(b)) => b.edges(l.id()),
            (Kind::Dgram(d), Some(b)) => b.edges(d.id()),
            _ => outboard_api::Edges::default(),
        };
        let rd = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLPRI) as u32;
        let mut ev = 0u64;
        if events & rd != 0 {
            ev = ev.wrapping_add(e.readable);
        }
        if events & libc::EPOLLOUT as u32 != 0 {
            ev = ev.wrapping_add(e.writable);
        }
        // Our own state changes and the engine's death are edges too.
        let gone = u64::from(crate::wait::ENGINE_GONE.load(std::sync::atomic::Ordering::Relaxed));
        ev.wrapping_add(u64::from(self.transitions) << 40).wrapping_add(gone << 63)
    }
}

pub fn keepalive_of(o: &Opts) -> (Duration, Duration, u32) {
    (Duration::from_secs(u64::from(o.keepidle_s)), Duration::from_secs(u64::from(o.keepintvl_s)), o.keepcnt)
}
