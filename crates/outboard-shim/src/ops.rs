//! The socket calls for descriptors the shim tracks, as plain Rust over the
//! socket objects: each returns `Ok(value)` or `Err(errno)`. interpose.rs
//! turns them into the C calling convention.

use crate::addr;
use crate::epoll::EpollSet;
use crate::poll::errno;
use crate::sock::{errno_of, Kind, SResult, Sock};
use crate::state::{self, count, lock, set_mark, Count, Guard, MARK_KERNEL, MARK_SOCK, MAX_FDS};
use crate::wait::{self, Slept};
use outboard_api::{Error, ListenFamily, ListenFlags};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A call on an engine socket inherited across fork: counted, named at debug level.
pub fn inherited(call: &str) -> i32 {
    count(Count::ForkInherited);
    if crate::log::debug_enabled() {
        crate::log::debug(&format!("fork-inherited call={call} errno=EOPNOTSUPP (engine sockets stay with the parent)"));
    }
    libc::EOPNOTSUPP
}

fn sock_of(st: &Guard, fd: RawFd) -> SResult<Rc<RefCell<Sock>>> {
    st.sock(fd).ok_or(libc::EBADF)
}

/// Hands an undecided socket to the kernel for good: the placeholder is the
/// socket. Epoll interests move to the kernel's instances.
pub fn to_kernel(st: &mut Guard, fd: RawFd) {
    let Some(s) = st.socks.remove(&fd) else { return };
    let fds: Vec<RawFd> = st.socks.iter().filter(|(_, v)| Rc::ptr_eq(v, &s)).map(|(k, _)| *k).collect();
    for f in fds.iter().copied().chain([fd]) {
        st.socks.remove(&f);
        set_mark(f, MARK_KERNEL);
        for (epfd, set) in st.epolls.iter() {
            if let Some(i) = set.borrow_mut().remove(f) {
                let mut ev = libc::epoll_event { events: i.events, u64: i.data };
                // SAFETY: adds a kernel descriptor to the program's epoll instance.
                unsafe { crate::real::epoll_ctl(*epfd, libc::EPOLL_CTL_ADD, f, &mut ev) };
            }
        }
    }
    count(Count::KernelSockets);
}

/// Generic wait loop: runs `op` under the lock until it completes, sleeping
/// between tries unless the socket (or the call) is non-blocking.
/// `timeout` is the socket's SO_RCVTIMEO/SO_SNDTIMEO (`pick` chooses).
fn blocking<T>(
    fd: RawFd,
    dontwait: bool,
    pick: fn(&Sock) -> Option<Duration>,
    op: impl FnMut(&mut Guard, &mut Sock) -> Option<SResult<T>>,
) -> SResult<T> {
    let mut reg = None;
    let r = blocking_registered(fd, dontwait, pick, op, &mut reg);
    if let Some(reg) = reg {
        lock().waiters.unregister(&reg);
    }
    r
}

/// `blocking`, with the registration among the blocked calls (made at the
/// first wait) left in `reg` for the caller to drop.
fn blocking_registered<T>(
    fd: RawFd,
    dontwait: bool,
    pick: fn(&Sock) -> Option<Duration>,
    mut op: impl FnMut(&mut Guard, &mut Sock) -> Option<SResult<T>>,
    reg: &mut Option<wait::Registration>,
) -> SResult<T> {
    let mut deadline: Option<Instant> = None;
    loop {
        let (news, seq, timeout, role) = {
            let mut st = lock();
            let s = sock_of(&st, fd)?;
            let (news, seq, _) = st.look();
            let mut sock = s.borrow_mut();
            if let Some(r) = op(&mut st, &mut sock) {
                st.push_counters();
                return r;
            }
            if dontwait || sock.nonblock {
                return Err(libc::EAGAIN);
            }
            let r = reg.get_or_insert_with(|| st.waiters.register(sock.evented_endpoint()));
            let role = st.waiters.role(r);
            (news, seq, pick(&sock), role)
        };
        let Some(news) = news else { return Err(libc::EAGAIN) };
        if wait::ENGINE_GONE.load(std::sync::atomic::Ordering::Relaxed) {
            // Let the op see the engine gone (the API checks the socket).
            let quiet = {
                let st = lock();
                if let Some(b) = &st.board {
                    b.mark_gone();
                }
                sock_of(&st, fd)?.borrow().gone_reported
            };
            if !quiet {
                continue;
            }
            // The op said "engine gone" once already and now waits for
            // nothing: sleep on the dead board's news word, which nobody
            // bumps any more (as any blocked call sleeps: restarted after a
            // signal handler with SA_RESTART, EINTR without or with a
            // timeout), instead of spinning on a dead engine.
            let rest = time_left(&mut deadline, timeout)?;
            if news.wait(seq, Duration::ZERO, rest) == outboard_board::WaitOutcome::Interrupted {
                return Err(libc::EINTR);
            }
            continue;
        }
        let rest = time_left(&mut deadline, timeout)?;
        let slept = match (role, reg.as_ref()) {
            (wait::Role::Follower(seen), Some(r)) => wait::follow(r, seen, rest),
            _ => wait::sleep(&news, seq, rest),
        };
        match slept {
            Slept::News => {}
            Slept::TimedOut => {}
            Slept::Interrupted => return Err(libc::EINTR),
        }
    }
}

/// What is left of a blocking call's timeout (its deadline set at the
/// first wait); EAGAIN once it has run out. `None`: no timeout.
fn time_left(deadline: &mut Option<Instant>, timeout: Option<Duration>) -> SResult<Option<Duration>> {
    let Some(t) = timeout else { return Ok(None) };
    let d = *deadline.get_or_insert_with(|| Instant::now() + t);
    let r = d.saturating_duration_since(Instant::now());
    if r.is_zero() {
        return Err(libc::EAGAIN);
    }
    Ok(Some(r))
}

fn rcvtimeo(s: &Sock) -> Option<Duration> {
    s.opts.rcvtimeo
}
fn sndtimeo(s: &Sock) -> Option<Duration> {
    s.opts.sndtimeo
}

/// Byte ranges of an iovec list from `skip` bytes on.
fn advance<'a>(bufs: &'a mut [&mut [u8]], mut skip: usize) -> Vec<&'a mut [u8]> {
    let mut out = Vec::new();
    for b in bufs.iter_mut() {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        out.push(&mut b[skip..]);
        skip = 0;
    }
    out
}

pub fn recv(fd: RawFd, bufs: &mut [&mut [u8]], flags: i32, from: &mut Option<SocketAddr>) -> SResult<usize> {
    const KNOWN: i32 = libc::MSG_PEEK | libc::MSG_DONTWAIT | libc::MSG_WAITALL | libc::MSG_TRUNC | libc::MSG_NOSIGNAL | libc::MSG_CMSG_CLOEXEC;
    if flags & libc::MSG_OOB != 0 || flags & !KNOWN != 0 {
        crate::log::unsupported("recv", if flags & libc::MSG_OOB != 0 { "flag MSG_OOB" } else { "unknown flags" }, libc::EOPNOTSUPP);
        return Err(libc::EOPNOTSUPP);
    }
    let want: usize = bufs.iter().map(|b| b.len()).sum();
    let waitall = flags & libc::MSG_WAITALL != 0 && flags & libc::MSG_PEEK == 0;
    let mut got = 0usize;
    loop {
        let r = {
            let mut part = advance(bufs, got);
            blocking(fd, flags & libc::MSG_DONTWAIT != 0, rcvtimeo, |_, s| s.recv(&mut part, flags, from))
        };
        match r {
            Ok(n) => {
                got += n;
                if !waitall || n == 0 || got >= want || !s_is_stream(fd) {
                    return Ok(got);
                }
            }
            Err(e) if got > 0 && (e == libc::EAGAIN || e == libc::EINTR) => return Ok(got),
            Err(e) => return if got > 0 { Ok(got) } else { Err(e) },
        }
    }
}

pub fn s_is_stream(fd: RawFd) -> bool {
    let st = lock();
    st.sock(fd).is_some_and(|s| s.borrow().stream)
}

/// Sends; a blocking stream sends everything (or until a signal, with a partial count).
/// `Err(EPIPE)` means: raise SIGPIPE unless MSG_NOSIGNAL (the caller does it).
pub fn send(fd: RawFd, bufs: &[&[u8]], flags: i32, to: Option<SocketAddr>) -> SResult<usize> {
    const KNOWN: i32 = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_MORE | libc::MSG_EOR | libc::MSG_CONFIRM;
    if flags & libc::MSG_OOB != 0 || flags & !KNOWN != 0 {
        crate::log::unsupported("send", if flags & libc::MSG_OOB != 0 { "flag MSG_OOB" } else { "unknown flags" }, libc::EOPNOTSUPP);
        return Err(libc::EOPNOTSUPP);
    }
    let want: usize = bufs.iter().map(|b| b.len()).sum();
    let mut sent = 0usize;
    loop {
        let r = {
            // What is left to send: all of it the first time round (no copy of the list).
            let tail: Vec<&[u8]>;
            let rest: &[&[u8]] = if sent == 0 {
                bufs
            } else {
                let mut skip = sent;
                tail = bufs
                    .iter()
                    .filter_map(|b| {
                        let k = skip.min(b.len());
                        skip -= k;
                        (k < b.len()).then(|| &b[k..])
                    })
                    .collect();
                &tail
            };
            let mut stream = true;
            let more = flags & libc::MSG_MORE != 0;
            let r = blocking(fd, flags & libc::MSG_DONTWAIT != 0, sndtimeo, |_, s| {
                stream = s.stream;
                // MSG_MORE corks the stream before its bytes go in; the next
                // send without it uncorks after its bytes (one segment for both).
                if more {
                    s.cork_for_send(true);
                }
                let r = s.send(rest, to);
                if !more && s.engine_cork {
                    s.cork_for_send(false);
                }
                r
            });
            (r, stream)
        };
        match r {
            (Ok(n), true) => {
                sent += n;
                if sent >= want || n == 0 {
                    return Ok(sent);
                }
                // A blocking stream keeps going; a non-blocking one returns the partial count.
                let nonblock = flags & libc::MSG_DONTWAIT != 0 || {
                    let st = lock();
                    st.sock(fd).is_some_and(|s| s.borrow().nonblock)
                };
                if nonblock {
                    return Ok(sent);
                }
            }
            (Ok(n), false) => return Ok(n),
            (Err(e), _) if sent > 0 && (e == libc::EAGAIN || e == libc::EINTR) => return Ok(sent),
            (Err(e), _) => return if sent > 0 { Ok(sent) } else { Err(e) },
        }
    }
}

pub fn accept(fd: RawFd, flags: i32) -> SResult<(RawFd, SocketAddr, bool)> {
    if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return Err(libc::EINVAL);
    }
    blocking(fd, false, rcvtimeo, |st, s| {
        s.want_accepts();
        let opts = s.opts;
        let v6 = s.v6;
        let l = match &mut s.kind {
            Kind::Listener(l) => l,
            Kind::Inherited | Kind::InheritedStream { .. } => return Some(Err(inherited("accept"))),
            _ => return Some(Err(libc::EINVAL)),
        };
        let stream = match l.accept() {
            Ok(x) => x,
            Err(Error::WouldBlock) => return None,
            // The engine's death was reported once: nothing to accept, ever.
            Err(Error::EngineGone) if s.gone_reported => return None,
            Err(e) => {
                s.gone_reported |= matches!(e, Error::EngineGone);
                return Some(Err(errno_of(&e, false)));
            }
        };
        // SAFETY: a plain socket() for the placeholder descriptor.
        let nfd = unsafe { crate::real::socket(if v6 { libc::AF_INET6 } else { libc::AF_INET }, libc::SOCK_STREAM | flags, 0) };
        if nfd < 0 {
            let e = errno();
            stream.abort();
            return Some(Err(e));
        }
        if nfd as usize >= MAX_FDS {
            stream.abort();
            // SAFETY: our own new descriptor.
            unsafe { crate::real::close(nfd) };
            return Some(Err(libc::EMFILE));
        }
        let peer = crate::addr::unmap(stream.peer_addr());
        let mut ns = Sock::new(true, v6, flags & libc::SOCK_NONBLOCK != 0);
        ns.opts = opts;
        ns.opts.rcvtimeo = None;
        ns.opts.sndtimeo = None;
        ns.peer = Some(peer);
        ns.kind = Kind::Stream(stream);
        ns.apply_opts();
        st.socks.insert(nfd, Rc::new(RefCell::new(ns)));
        set_mark(nfd, MARK_SOCK);
        count(Count::EngineSockets);
        Some(Ok((nfd, peer, v6)))
    })
}

/// What `connect` decided.
pub enum Connect {
    /// Done here (engine socket): the result.
    Engine(SResult<()>),
    /// The kernel takes it: call the real connect.
    Kernel,
}

pub fn connect(fd: RawFd, a: Option<SocketAddr>, unspec: bool) -> Connect {
    connect_inner(fd, a, unspec, false)
}

/// How long a non-blocking `MSG_FASTOPEN` send waits for the engine to say
/// whether the SYN may carry the data (it answers at once when it holds a
/// cookie for the destination; otherwise the SYN asks for one and, as on
/// Linux, the send fails with EINPROGRESS).
fn fastopen_answer(_: &Sock) -> Option<Duration> {
    Some(Duration::from_millis(50))
}

/// `sendto`/`sendmsg` with MSG_FASTOPEN on a stream socket (RFC 7413): a
/// connect with Fast Open; the caller then sends the data, which goes in
/// the SYN when the engine has a cookie. Linux's `tcp_sendmsg_fastopen`.
pub fn connect_fast_open(fd: RawFd, a: SocketAddr) -> Connect {
    connect_inner(fd, Some(a), false, true)
}

fn connect_inner(fd: RawFd, a: Option<SocketAddr>, unspec: bool, msg_fastopen: bool) -> Connect {
    let nonblock;
    let started = {
        let mut st = lock();
        let Ok(s) = sock_of(&st, fd) else { return Connect::Kernel };
        let mut sock = s.borrow_mut();
        sock.settle();
        let confirmable = !sock.connect_confirmed && sock.peer.is_some();
        match &mut sock.kind {
            Kind::Undecided | Kind::Bound => {
                let Some(a) = a else {
                    drop(sock);
                    to_kernel(&mut st, fd);
                    return Connect::Kernel;
                };
                let net = st.net();
                // A family the socket cannot reach (IPv6 on AF_INET, IPv4 on
                // an IPv6-only socket) is the kernel's to refuse as Linux does.
                let Some(net) = net.filter(|n| fits_family(&sock, a) && n.serves(a.ip())) else {
                    drop(sock);
                    count(Count::KernelFallbackConnects);
                    to_kernel(&mut st, fd);
                    return Connect::Kernel;
                };
                let board = st.board().expect("net() attached");
                if sock.stream {
                    let fast_open = msg_fastopen || sock.opts.fastopen_connect;
                    // TCP_MAXSEG and IP_TOS / IPV6_TCLASS set before connect go on the SYN.
                    let opts = outboard_api::ConnectOptions { tos: sock.opts.tos_for(a), rcv_clamp: sock.opts.rcv_clamp() };
                    match board.connect_start_opts(a, sock.opts.maxseg, fast_open, opts) {
                        Ok(p) => {
                            sock.kind = Kind::Connecting(p);
                            sock.peer = Some(a);
                            sock.bump();
                            sock.became_engine();
                        }
                        Err(e) => return Connect::Engine(Err(errno_of(&e, false))),
                    }
                    let _ = net;
                    nonblock = sock.nonblock;
                    if sock.nonblock && !msg_fastopen {
                        return Connect::Engine(Err(libc::EINPROGRESS));
                    }
                    true
                } else {
                    let port = sock.bound.map_or(0, |b| b.port());
                    match board.bind_udp_for(port, udp_family(&sock, sock.bound)) {
                        Ok(d) => {
                            sock.bound = Some(crate::addr::unspecified(sock.v6, d.local_port()));
                            sock.kind = Kind::Dgram(d);
                            sock.peer = Some(a);
                            sock.became_engine();
                            return Connect::Engine(Ok(()));
                        }
                        Err(e) => return Connect::Engine(Err(errno_of(&e, false))),
                    }
                }
            }
            Kind::Connecting(_) => return Connect::Engine(Err(libc::EALREADY)),
            Kind::Stream(_) if confirmable => {
                sock.connect_confirmed = true;
                return Connect::Engine(Ok(()));
            }
            Kind::Stream(_) => return Connect::Engine(Err(libc::EISCONN)),
            Kind::Listener(_) => return Connect::Engine(Err(libc::EISCONN)),
            Kind::Failed => {
                let e = sock.take_error();
                return Connect::Engine(Err(if e != 0 { e } else { libc::ECONNABORTED }));
            }
            Kind::Dgram(_) => {
                if unspec {
                    sock.peer = None;
                    return Connect::Engine(Ok(()));
                }
                let Some(a) = a else { return Connect::Engine(Err(libc::EAFNOSUPPORT)) };
                if !fits_family(&sock, a) {
                    return Connect::Engine(Err(if sock.v6 { libc::ENETUNREACH } else { libc::EAFNOSUPPORT }));
                }
                sock.peer = Some(a);
                return Connect::Engine(Ok(()));
            }
            Kind::Inherited | Kind::InheritedStream { .. } => return Connect::Engine(Err(inherited("connect"))),
        }
    };
    debug_assert!(started);
    // A blocking connect waits for the handshake (SO_SNDTIMEO bounds it: EINPROGRESS, as Linux).
    let pick: fn(&Sock) -> Option<Duration> = if nonblock { fastopen_answer } else { sndtimeo };
    let r = blocking(fd, false, pick, |_, s| {
        s.settle();
        match s.kind {
            Kind::Stream(_) => {
                s.connect_confirmed = true;
                Some(Ok(()))
            }
            Kind::Failed => Some(Err(s.take_error())),
            _ => None,
        }
    });
    Connect::Engine(match r {
        Err(libc::EAGAIN) => Err(libc::EINPROGRESS),
        r => r,
    })
}

/// `Ok(true)`: the engine took it; `Ok(false)`: the kernel should bind.
pub fn bind(fd: RawFd, a: Option<SocketAddr>) -> SResult<bool> {
    let mut st = lock();
    let s = sock_of(&st, fd)?;
    let mut sock = s.borrow_mut();
    match sock.kind {
        Kind::Undecided => {}
        Kind::Inherited | Kind::InheritedStream { .. } => return Err(inherited("bind/shutdown")),
        _ => return Err(libc::EINVAL),
    }
    let Some(a) = a else {
        drop(sock);
        to_kernel(&mut st, fd);
        return Ok(false);
    };
    let local = fits_family(&sock, a) && st.net().is_some_and(|n| state::is_local(&n, a.ip(), sock.opts.v6only));
    // Port 0 for a stream: the kernel picks ports for listeners (the engine listens on given ports).
    if !local || (sock.stream && a.port() == 0) {
        drop(sock);
        to_kernel(&mut st, fd);
        return Ok(false);
    }
    if sock.stream {
        // Sockets of families that do not overlap share a port (an AF_INET
        // 0.0.0.0 one beside an IPV6_V6ONLY `::` one), as on Linux.
        let family = ListenFamily::of_bound(a.ip(), sock.opts.v6only);
        let clash = st.socks.values().any(|o| {
            if Rc::ptr_eq(o, &s) {
                return false;
            }
            let o = o.borrow();
            o.stream
                && matches!(o.kind, Kind::Bound | Kind::Listener(_))
                && o.bound.is_some_and(|b| b.port() == a.port() && ListenFamily::of_bound(b.ip(), o.opts.v6only).overlaps(&family))
                && !(o.opts.reuseport && sock.opts.reuseport)
        });
        if clash {
            return Err(libc::EADDRINUSE);
        }
        sock.bound = Some(a);
        sock.kind = Kind::Bound;
        sock.bump();
        return Ok(true);
    }
    let board = st.board().expect("net() attached");
    match board.bind_udp_for(a.port(), udp_family(&sock, Some(a))) {
        Ok(d) => {
            sock.bound = Some(SocketAddr::new(a.ip(), d.local_port()));
            sock.kind = Kind::Dgram(d);
            sock.bump();
            sock.became_engine();
            Ok(true)
        }
        Err(e) => Err(errno_of(&e, false)),
    }
}

/// `Ok(true)`: listening on the engine; `Ok(false)`: the kernel should listen.
pub fn listen(fd: RawFd, backlog: i32) -> SResult<bool> {
    let mut st = lock();
    let s = sock_of(&st, fd)?;
    let mut sock = s.borrow_mut();
    if !sock.stream {
        return Err(libc::EOPNOTSUPP);
    }
    let backlog = backlog.clamp(1, 4096) as u32;
    match &sock.kind {
        Kind::Undecided => {
            drop(sock);
            to_kernel(&mut st, fd);
            Ok(false)
        }
        Kind::Listener(_) => {
            sock.backlog = backlog;
            Ok(true)
        }
        Kind::Bound => {
            let port = sock.bound.map_or(0, |b| b.port());
            let board = st.board().ok_or(libc::ENETDOWN)?;
            match board.listen_with(port, backlog, listen_flags(&sock)) {
                Ok(l) => {
                    sock.kind = Kind::Listener(l);
                    sock.backlog = backlog;
                    sock.bump();
                    sock.became_engine();
                    Ok(true)
                }
                Err(e) => Err(errno_of(&e, false)),
            }
        }
        Kind::Inherited | Kind::InheritedStream { .. } => Err(inherited("listen")),
        _ => Err(libc::EINVAL),
    }
}

/// Which datagrams a UDP socket bound to `bound` (None: its family's
/// wildcard) takes, as Linux's: an AF_INET socket IPv4 ones, an AF_INET6
/// one on `::` both (IPv6 only with IPV6_V6ONLY), one address only its own.
fn udp_family(sock: &Sock, bound: Option<SocketAddr>) -> ListenFamily {
    let ip = bound.map_or_else(|| crate::addr::unspecified(sock.v6, 0).ip(), |b| b.ip());
    ListenFamily::of_bound(ip, sock.opts.v6only)
}

/// How the shim listens: on demand (connections only once the process
/// accepts: see `Sock::want_accepts`), sharing the port if SO_REUSEPORT.
/// Its family as Linux's: an AF_INET6 socket on `::` takes both families
/// (IPv4 peers shown IPv4-mapped) unless IPV6_V6ONLY; 0.0.0.0 only IPv4;
/// one address only connections to it.
pub fn listen_flags(sock: &Sock) -> ListenFlags {
    let family = sock.bound.map_or(ListenFamily::Ipv4, |b| ListenFamily::of_bound(b.ip(), sock.opts.v6only));
    let o = &sock.opts;
    ListenFlags {
        reuseport: o.reuseport,
        on_demand: true,
        family,
        fastopen_qlen: o.fastopen_qlen,
        // What the accepted connections inherit, as from Linux's listener.
        mss: o.maxseg,
        tos: o.tos & !0x3,
        tclass: o.tclass & !0x3,
        rcv_clamp: o.rcv_clamp(),
    }
}

pub fn shutdown(fd: RawFd, how: i32) -> SResult<()> {
    let st = lock();
    let s = sock_of(&st, fd)?;
    let mut sock = s.borrow_mut();
    if !(libc::SHUT_RD..=libc::SHUT_RDWR).contains(&how) {
        return Err(libc::EINVAL);
    }
    sock.settle();
    let rd = how != libc::SHUT_WR;
    let wr = how != libc::SHUT_RD;
    let has_peer = sock.peer.is_some();
    match &mut sock.kind {
        Kind::Stream(x) => {
            if wr {
                x.shutdown().map_err(|e| errno_of(&e, true))?;
            }
        }
        Kind::Inherited | Kind::InheritedStream { .. } => return Err(inherited("bind/shutdown")),
        Kind::Dgram(_) if has_peer => {}
        _ => return Err(libc::ENOTCONN),
    }
    sock.shut_rd |= rd;
    sock.shut_wr |= wr;
    sock.bump();
    Ok(())
}

pub fn sockname(fd: RawFd, peer: bool) -> SResult<Option<(SocketAddr, bool)>> {
    let st = lock();
    let s = sock_of(&st, fd)?;
    let mut sock = s.borrow_mut();
    sock.settle();
    let r = match (&sock.kind, peer) {
        (Kind::Undecided, _) => return Ok(None),
        (Kind::Inherited | Kind::InheritedStream { .. }, _) => return Err(inherited(if peer { "getpeername" } else { "getsockname" })),
        (Kind::Stream(x), false) => Some(crate::addr::unmap(x.local_addr())),
        (Kind::Stream(x), true) => Some(crate::addr::unmap(x.peer_addr())),
        (Kind::Listener(_) | Kind::Bound, false) => sock.bound,
        (Kind::Dgram(d), false) => {
            Some(SocketAddr::new(sock.bound.map_or(crate::addr::unspecified(sock.v6, 0).ip(), |b| b.ip()), d.local_port()))
        }
        (Kind::Dgram(_), true) => sock.peer,
        (Kind::Connecting(_), false) => Some(crate::addr::unspecified(sock.v6, 0)),
        _ => None,
    };
    match r {
        Some(a) => Ok(Some((a, sock.v6))),
        None if peer => Err(libc::ENOTCONN),
        None => Ok(Some((crate::addr::unspecified(sock.v6, 0), sock.v6))),
    }
}

/// Forgets `fd` (closing the engine side when it was the last descriptor of
/// the socket). The caller closes the kernel descriptor.
pub fn forget(fd: RawFd) {
    let mut st = lock();
    if let Some(set) = st.epolls.remove(&fd) {
        set_mark(fd, MARK_KERNEL);
        drop(set);
        return;
    }
    let Some(s) = st.socks.remove(&fd) else { return };
    set_mark(fd, MARK_KERNEL);
    for set in st.epolls.values() {
        set.borrow_mut().remove(fd);
    }
    let last = !st.socks.values().any(|o| Rc::ptr_eq(o, &s));
    if !last {
        return;
    }
    let mut sock = s.borrow_mut();
    let linger = sock.opts.linger;
    let kind = std::mem::replace(&mut sock.kind, Kind::Failed);
    match kind {
        // SO_LINGER with zero time: reset, as Linux does.
        Kind::Stream(x) if linger == Some(0) => x.abort(),
        // A child this process forked may hold it: release it to that child.
        Kind::Stream(x) if sock.forked => x.release(),
        Kind::Stream(x) => {
            if let Some(secs) = linger.filter(|_| !sock.nonblock) {
                // SO_LINGER with time on a blocking socket: wait (bounded) for
                // the peer to acknowledge what is queued, then close.
                drop(sock);
                drop(st);
                linger_wait(&x, Duration::from_secs(u64::from(secs)));
                let _st = lock();
                drop(x);
                return;
            }
            drop(x);
        }
        Kind::Inherited | Kind::InheritedStream { .. } => std::mem::forget(kind),
        other => drop(other),
    }
    st.push_counters();
}

fn linger_wait(x: &outboard_api::Stream, limit: Duration) {
    let end = Instant::now() + limit;
    loop {
        let (news, seq, done) = {
            let mut st = lock();
            let (news, seq, _) = st.look();
            (news, seq, x.unacked().0 == 0 || x.error().is_some())
        };
        let rest = end.saturating_duration_since(Instant::now());
        if done || rest.is_zero() {
            return;
        }
        let Some(news) = news else { return };
        if let Slept::Interrupted = wait::sleep(&news, seq, Some(rest)) {
            return;
        }
    }
}

/// `new` now also names the socket (or epoll set) `old` names.
pub fn share(old: RawFd, new: RawFd) {
    let mut st = lock();
    if let Some(s) = st.sock(old) {
        st.socks.insert(new, s);
        set_mark(new, MARK_SOCK);
    } else if let Some(e) = st.epolls.get(&old).cloned() {
        st.epolls.insert(new, e);
        set_mark(new, state::MARK_EPOLL);
    }
}

pub fn new_socket(fd: RawFd, stream: bool, v6: bool, nonblock: bool) {
    if fd < 0 || fd as usize >= MAX_FDS {
        return;
    }
    let mut st = lock();
    st.socks.insert(fd, Rc::new(RefCell::new(Sock::new(stream, v6, nonblock))));
    set_mark(fd, MARK_SOCK);
}

pub fn new_epoll(fd: RawFd) {
    if fd < 0 || fd as usize >= MAX_FDS {
        return;
    }
    // Wake groups round robin: sets beyond their number share one (a
    // sleeper is then woken for the other set's endpoints too).
    static NEXT_GROUP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT_GROUP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let group = 1 + (n % (outboard_board::layout::WAKE_SLOTS - 1)) as u8;
    let mut st = lock();
    st.epolls.insert(fd, Rc::new(RefCell::new(EpollSet::in_group(group))));
    set_mark(fd, state::MARK_EPOLL);
}

/// epoll_ctl for an engine socket (`Ok(false)`: the kernel's business).
pub fn epoll_ctl(epfd: RawFd, op: i32, fd: RawFd, ev: Option<libc::epoll_event>) -> SResult<bool> {
    let st = lock();
    let Some(s) = st.sock(fd) else { return Ok(false) };
    let Some(set) = st.epolls.get(&epfd).cloned() else {
        // An epoll instance we do not know (made before we loaded?): the kernel would see only the placeholder.
        crate::log::unsupported("epoll_ctl", "engine socket in an untracked epoll instance", libc::EPERM);
        return Err(libc::EPERM);
    };
    let mut set = set.borrow_mut();
    match op {
        libc::EPOLL_CTL_ADD => {
            let ev = ev.ok_or(libc::EFAULT)?;
            if ev.events & libc::EPOLLIN as u32 != 0 {
                s.borrow_mut().want_accepts();
            }
            set.add(fd, s, ev.events, ev.u64)?;
        }
        libc::EPOLL_CTL_MOD => {
            let ev = ev.ok_or(libc::EFAULT)?;
            if ev.events & libc::EPOLLIN as u32 != 0 {
                s.borrow_mut().want_accepts();
            }
            set.modify(fd, ev.events, ev.u64)?;
        }
        libc::EPOLL_CTL_DEL => {
            set.remove(fd).ok_or(libc::ENOENT)?;
        }
        _ => return Err(libc::EINVAL),
    }
    drop(set);
    // Wake sleepers of this set so they look again.
    if let Some(n) = &st.news {
        n.signal();
    }
    Ok(true)
}

pub fn set_nonblock(fd: RawFd, on: bool) {
    let st = lock();
    if let Some(s) = st.sock(fd) {
        s.borrow_mut().nonblock = on;
    }
}

/// linux/sockios.h: bytes written and not yet sent.
const SIOCOUTQNSD: u64 = 0x894B;

/// FIONREAD / SIOCOUTQ / SIOCOUTQNSD for engine sockets; None: not ours to answer.
pub fn ioctl_value(fd: RawFd, req: u64) -> Option<SResult<i32>> {
    let st = lock();
    let s = st.sock(fd)?;
    let mut sock = s.borrow_mut();
    sock.settle();
    match (&mut sock.kind, req) {
        (Kind::Undecided, _) => None,
        (Kind::Stream(x), r) if r == libc::FIONREAD => Some(Ok(x.readable_bytes().min(i32::MAX as usize) as i32)),
        (Kind::Stream(x), r) if r == libc::TIOCOUTQ => Some(Ok(x.unacked().0.min(i32::MAX as u64) as i32)),
        (Kind::Stream(x), SIOCOUTQNSD) => Some(Ok(x.notsent().min(i32::MAX as u64) as i32)),
        (Kind::Listener(_), SIOCOUTQNSD) => Some(Err(libc::EINVAL)),
        (Kind::Bound | Kind::Connecting(_) | Kind::Failed, SIOCOUTQNSD) => Some(Ok(0)),
        (Kind::Dgram(d), r) if r == libc::FIONREAD => Some(Ok(match d.begin_get() {
            Ok((m, _)) => m.len() as i32,
            Err(_) => 0,
        })),
        // SIOCINQ/SIOCOUTQ on a listener: EINVAL, as Linux's tcp_ioctl.
        (Kind::Listener(_), r) if r == libc::FIONREAD || r == libc::TIOCOUTQ => Some(Err(libc::EINVAL)),
        (Kind::Bound | Kind::Connecting(_) | Kind::Failed, r) if r == libc::FIONREAD || r == libc::TIOCOUTQ => Some(Ok(0)),
        _ => None,
    }
}

fn is_pipe(fd: RawFd) -> bool {
    // SAFETY: fstat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0) && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO
}

/// splice with an engine socket on one side and a pipe on the other, by
/// copying through a buffer (the engine's bytes are in the board, not in
/// kernel pages): one transfer of at most `n` bytes, as Linux's splice
/// moves what is there. socket → pipe takes no more than the pipe has
/// room for (peeked, written, then consumed, so nothing is lost); pipe →
/// socket reads no more than the stream has room for. Waits as Linux does:
/// for bytes on the socket (unless non-blocking or `SPLICE_F_NONBLOCK`),
/// for the pipe to have bytes or room (unless `SPLICE_F_NONBLOCK`).
///
/// # Safety
/// `ioff`/`ooff` are null or valid.
pub unsafe fn splice(i: RawFd, ioff: *mut libc::loff_t, o: RawFd, ooff: *mut libc::loff_t, n: usize, flags: u32) -> Option<SResult<usize>> {
    let engine = |fd| {
        let st = lock();
        st.sock(fd).is_some_and(|s| s.borrow().is_engine())
    };
    if !engine(i) && !engine(o) {
        return None;
    }
    // SAFETY: forwarded contract.
    Some(unsafe { splice_engine(engine(i), i, ioff, o, ooff, n, flags) })
}

/// # Safety
/// As `splice`.
unsafe fn splice_engine(sock_in: bool, i: RawFd, ioff: *mut libc::loff_t, o: RawFd, ooff: *mut libc::loff_t, n: usize, flags: u32) -> SResult<usize> {
    thread_local! {
        static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0u8; 64 * 1024]);
    }
    let (pipe, pipe_off, sock_off) = if sock_in { (o, ooff, ioff) } else { (i, ioff, ooff) };
    if !is_pipe(pipe) {
        // Linux needs a pipe on one side.
        return Err(libc::EINVAL);
    }
    if !pipe_off.is_null() {
        return Err(libc::ESPIPE);
    }
    if !sock_off.is_null() {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(0);
    }
    let nonblock = flags & libc::SPLICE_F_NONBLOCK != 0;
    // Waits for the pipe to be readable or writable (`ev`); Err(EAGAIN) if non-blocking.
    let pipe_ready = |ev: i16| -> SResult<()> {
        let mut p = libc::pollfd { fd: pipe, events: ev, revents: 0 };
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let ts: *const libc::timespec = if nonblock { &zero } else { std::ptr::null() };
        // SAFETY: one pollfd of ours, a timespec of ours or none.
        let r = unsafe { crate::real::ppoll(&mut p, 1, ts, std::ptr::null()) };
        match r {
            r if r < 0 => Err(errno()),
            0 => Err(libc::EAGAIN),
            _ => Ok(()),
        }
    };
    BUF.with(|b| {
        let mut buf = b.borrow_mut();
        if sock_in {
            pipe_ready(libc::POLLOUT)?;
            // The pipe's free room: its capacity less what it holds.
            // SAFETY: fcntl/ioctl on the program's pipe.
            let cap = unsafe { crate::real::fcntl(pipe, libc::F_GETPIPE_SZ, 0) };
            let mut held: libc::c_int = 0;
            // SAFETY: FIONREAD takes an int pointer.
            unsafe { crate::real::ioctl(pipe, libc::FIONREAD, (&mut held as *mut libc::c_int).cast()) };
            let room = (cap.max(0) as usize).saturating_sub(held.max(0) as usize).max(1);
            let want = n.min(room).min(buf.len());
            let dontwait = if nonblock { libc::MSG_DONTWAIT } else { 0 };
            let got = recv(i, &mut [&mut buf[..want]], libc::MSG_PEEK | dontwait, &mut None)?;
            if got == 0 {
                return Ok(0);
            }
            // SAFETY: writes our buffer into the program's pipe.
            let w = unsafe { crate::real::write(pipe, buf.as_ptr().cast(), got) };
            if w < 0 {
                return Err(errno());
            }
            let w = w as usize;
            // Consume what went into the pipe.
            let mut sink = 0usize;
            while sink < w {
                let k = recv(i, &mut [&mut buf[..w - sink]], libc::MSG_DONTWAIT, &mut None)?;
                if k == 0 {
                    break;
                }
                sink += k;
            }
            Ok(w)
        } else {
            // Linux looks at the pipe first: empty and non-blocking is EAGAIN.
            pipe_ready(libc::POLLIN)?;
            let room = blocking(o, false, sndtimeo, |_, s| {
                s.settle();
                match &s.kind {
                    Kind::Stream(x) => {
                        if let Some(e) = s.error() {
                            return Some(Err(errno_of(&e, true)));
                        }
                        if s.shut_wr {
                            return Some(Err(libc::EPIPE));
                        }
                        let (unacked, size) = x.unacked();
                        let room = size.saturating_sub(unacked) as usize;
                        (room > 0).then_some(Ok(room))
                    }
                    _ => Some(Err(libc::EINVAL)),
                }
            })?;
            let want = n.min(room).min(buf.len());
            // SAFETY: reads the program's pipe into our buffer.
            let r = unsafe { crate::real::read(pipe, buf.as_mut_ptr().cast(), want) };
            if r < 0 {
                return Err(errno());
            }
            if r == 0 {
                return Ok(0);
            }
            send(o, &[&buf[..r as usize]], libc::MSG_NOSIGNAL, None)
        }
    })
}

/// TCP_INQ: the TCP_CM_INQ value for a recvmsg on a stream that asked for
/// it — Linux's `tcp_inq_hint`: the bytes still queued, plus one for the
/// peer's FIN once it came (so a reader sees non-zero until it reads the 0).
pub fn inq_hint(fd: RawFd) -> Option<i32> {
    let st = lock();
    let s = st.sock(fd)?;
    let sock = s.borrow();
    match &sock.kind {
        Kind::Stream(x) if sock.opts.inq => {
            // RCV.NXT - copied: the FIN counts one once it came.
            let n = x.readable_bytes().min(i32::MAX as usize - 1) as i32;
            Some(n + i32::from(x.peer_closed()))
        }
        _ => None,
    }
}

/// sendfile into an engine stream, by copying through a buffer.
///
/// # Safety
/// `off` is null or points to a valid `off_t`.
pub unsafe fn sendfile(out: RawFd, inp: RawFd, off: *mut libc::off_t, count_: usize) -> SResult<usize> {
    if state::mark(inp) == MARK_SOCK {
        return Err(libc::EINVAL);
    }
    thread_local! {
        // One buffer per thread, reused: sendfile of small files is common (nginx).
        static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0u8; 64 * 1024]);
    }
    BUF.with(|b| {
        let mut buf = b.borrow_mut();
        // SAFETY: forwarded contract.
        unsafe { sendfile_with(out, inp, off, count_, &mut buf) }
    })
}

/// # Safety
/// As `sendfile`.
unsafe fn sendfile_with(out: RawFd, inp: RawFd, off: *mut libc::off_t, count_: usize, buf: &mut [u8]) -> SResult<usize> {
    let mut done = 0usize;
    // SAFETY: off is null or a valid off_t (the caller's contract).
    let mut pos: Option<libc::off_t> = if off.is_null() { None } else { Some(unsafe { *off }) };
    while done < count_ {
        // Room first, so whatever is read from the file is sent whole.
        let room = match blocking(out, done > 0, sndtimeo, |_, s| {
            s.settle();
            match &s.kind {
                Kind::Stream(x) => {
                    if let Some(e) = s.error() {
                        return Some(Err(errno_of(&e, true)));
                    }
                    let (unacked, size) = x.unacked();
                    let room = size.saturating_sub(unacked) as usize;
                    if s.shut_wr {
                        return Some(Err(libc::EPIPE));
                    }
                    (room > 0).then_some(Ok(room))
                }
                _ => Some(Err(libc::EINVAL)),
            }
        }) {
            Ok(r) => r,
            Err(e) if done > 0 && (e == libc::EAGAIN || e == libc::EINTR) => break,
            Err(e) => return if done > 0 { Ok(done) } else { Err(e) },
        };
        let want = room.min(buf.len()).min(count_ - done);
        // SAFETY: reads into our buffer from the program's file descriptor.
        let n = unsafe {
            match pos {
                Some(p) => crate::real::pread(inp, buf.as_mut_ptr().cast(), want, p),
                None => crate::real::read(inp, buf.as_mut_ptr().cast(), want),
            }
        };
        if n < 0 {
            let e = errno();
            return if done > 0 { Ok(done) } else { Err(e) };
        }
        if n == 0 {
            break;
        }
        let n = n as usize;
        let sent = send(out, &[&buf[..n]], libc::MSG_NOSIGNAL, None)?;
        done += sent;
        if let Some(p) = pos.as_mut() {
            *p += sent as libc::off_t;
        }
        if sent < n {
            if pos.is_none() {
                // Put back what did not go (the file offset moves by what was sent, as Linux's does).
                // SAFETY: lseek on the program's file descriptor.
                unsafe { crate::real::lseek(inp, -((n - sent) as libc::off_t), libc::SEEK_CUR) };
            }
            break;
        }
    }
    if let Some(p) = pos {
        // SAFETY: off is a valid off_t (checked non-null above).
        unsafe { *off = p };
    }
    Ok(done)
}

pub fn setsockopt(fd: RawFd, level: i32, name: i32, val: *const libc::c_void, len: libc::socklen_t) -> Option<SResult<()>> {
    let st = lock();
    let s = st.sock(fd)?;
    let mut sock = s.borrow_mut();
    match sock.kind {
        // Undecided: the kernel placeholder takes it too (the caller passes
        // it on); we keep what we understand for if the engine gets it.
        Kind::Undecided => {
            let _ = crate::sockopt::set_quiet(&mut sock, level, name, val, len);
            None
        }
        Kind::Inherited | Kind::InheritedStream { .. } => Some(Err(inherited("setsockopt/getsockopt"))),
        _ => Some(crate::sockopt::set(&mut sock, level, name, val, len)),
    }
}

/// # Safety
/// `val`/`len` as getsockopt's contract.
pub unsafe fn getsockopt(fd: RawFd, level: i32, name: i32, val: *mut libc::c_void, len: *mut libc::socklen_t) -> Option<SResult<()>> {
    let st = lock();
    let s = st.sock(fd)?;
    let mut sock = s.borrow_mut();
    match sock.kind {
        Kind::Undecided => None,
        Kind::Inherited | Kind::InheritedStream { .. } => Some(Err(inherited("setsockopt/getsockopt"))),
        // SAFETY: forwarded contract.
        _ => Some(unsafe { crate::sockopt::get(&mut sock, level, name, val, len) }),
    }
}

/// Reads a socket address argument (`Err`: EFAULT/EINVAL).
///
/// # Safety
/// As `addr::read_v4`.
pub unsafe fn read_addr(a: *const libc::sockaddr, len: libc::socklen_t) -> SResult<Option<SocketAddr>> {
    // SAFETY: forwarded contract.
    unsafe { addr::read_sockaddr(a, len) }
}

/// A datagram's destination decides an undecided datagram socket:
/// `Ok(true)` the engine sends it, `Ok(false)` the kernel does.
pub fn decide_dgram(fd: RawFd, a: SocketAddr) -> SResult<bool> {
    let mut st = lock();
    let s = sock_of(&st, fd)?;
    let mut sock = s.borrow_mut();
    let fits = fits_family(&sock, a);
    let serves = |st: &mut Guard| fits && st.net().is_some_and(|n| n.serves(a.ip()));
    match sock.kind {
        Kind::Undecided if !sock.stream => {
            if !serves(&mut st) {
                drop(sock);
                to_kernel(&mut st, fd);
                return Ok(false);
            }
            let board = st.board().expect("net() attached");
            let d = board.bind_udp_for(0, udp_family(&sock, None)).map_err(|e| errno_of(&e, false))?;
            sock.bound = Some(crate::addr::unspecified(sock.v6, d.local_port()));
            sock.kind = Kind::Dgram(d);
            sock.bump();
            sock.became_engine();
            Ok(true)
        }
        Kind::Dgram(_) if !fits => Err(if sock.v6 { libc::ENETUNREACH } else { libc::EAFNOSUPPORT }),
        Kind::Dgram(_) if !serves(&mut st) => {
            crate::log::unsupported("sendto", "destination the engine does not reach from an engine socket", libc::ENETUNREACH);
            Err(libc::ENETUNREACH)
        }
        _ => Ok(true),
    }
}

/// Whether `a` is of a family the socket can reach: IPv4 for AF_INET;
/// either for a dual-stack AF_INET6 socket; IPv6 only with IPV6_V6ONLY.
pub fn fits_family(sock: &Sock, a: SocketAddr) -> bool {
    if sock.v6 {
        !(sock.opts.v6only && a.is_ipv4())
    } else {
        a.is_ipv4()
    }
}

/// True for an AF_INET6 socket.
pub fn is_v6(fd: RawFd) -> bool {
    let st = lock();
    st.sock(fd).is_some_and(|s| s.borrow().v6)
}

/// The destination of a sendto/sendmsg: `Ok(Some(None))` none (streams
/// ignore one, as Linux's TCP does), `Ok(Some(Some(a)))` send there through
/// the engine, `Ok(None)` the kernel sends it (an undecided datagram socket
/// whose first destination the engine does not reach).
///
/// # Safety
/// As `addr::read_sockaddr` (null is fine).
pub unsafe fn destination(fd: RawFd, a: *const libc::sockaddr, len: libc::socklen_t) -> SResult<Option<Option<SocketAddr>>> {
    if a.is_null() || s_is_stream(fd) {
        return Ok(Some(None));
    }
    // SAFETY: forwarded contract.
    let Some(to) = (unsafe { addr::read_sockaddr(a, len) })? else { return Err(libc::EAFNOSUPPORT) };
    if decide_dgram(fd, to)? {
        Ok(Some(Some(to)))
    } else {
        Ok(None)
    }
}
