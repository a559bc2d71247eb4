//! The application's side of one board: the attach handshake, the command
//! ring (with the doorbell rung only while the engine sleeps), the event
//! ring pumped into per-endpoint state, and the one wait loop every
//! blocking call goes through.

#![allow(clippy::disallowed_methods)] // The application's side waits on the real clock.

use crate::{Datagram, Error, EventQueue, Listener, Result, Stream};
use outboard_board::attach::{peer_gone, recv_record_prefix, send_record, version_refusal, AttachReply, AttachRequest, ATTACH_MAGIC, REPLY_COMMON_BYTES};
use outboard_board::command::{Endpoint, ListenFlags, SyncSlot};
use outboard_board::layout::{flags, header, shard_control, status, BoardParams, CLASS_DGRAM_TX, ENGINE_GONE, MAGIC, SLEEP_FUTEX, VERSION};
use outboard_board::proto::ev;
use outboard_board::{BoardCommand, BoardLayout, BufRef, Command, Condition, Consumer, Event, FreeList, MailboxConsumer, Mapping, NetAddr, Producer, SyncTable};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How calls that cannot complete now behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Spin briefly, then sleep on the board's futex until the engine posts news.
    #[default]
    Blocking,
    /// Return `Error::WouldBlock`.
    NonBlocking,
    /// Spin (never sleep): lowest latency, a core busy while waiting.
    Polling,
}

#[derive(Debug, Clone)]
pub struct AttachOptions {
    /// Board sizes to ask for (the engine sets the stream region size and may refuse a board too large).
    pub params: BoardParams,
    /// Mode of endpoints created from this board (each can change its own).
    pub mode: Mode,
    /// Spin this long before sleeping in `Mode::Blocking`.
    pub spin: Duration,
    /// An eventfd the engine writes while any thread of this application
    /// sleeps in poll/epoll on it (see [`News::poller_enter`]): for
    /// applications that wait on kernel descriptors and the board at once.
    /// The engine keeps its own copy.
    pub wake_fd: Option<std::os::fd::RawFd>,
    /// Eventfds of wake groups 1, 2, … (at most `WAKE_SLOTS - 1`; only with
    /// `wake_fd`): the engine writes group g's only for events of endpoints
    /// placed in it ([`Board::set_wake_group`]) or in none, while a thread
    /// sleeps in slot g ([`News::poller_enter_slot`]).
    pub wake_group_fds: Vec<std::os::fd::RawFd>,
    /// The engines' run directory; None: [`outboard_board::attach::run_dir`]
    /// (`OUTBOARD_RUN_DIR` read now). A library that must find the engine
    /// again after its program cleared the environment keeps it here.
    pub run_dir: Option<std::path::PathBuf>,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions { params: BoardParams::default(), mode: Mode::Blocking, spin: Duration::from_micros(20), wake_fd: None, wake_group_fds: Vec::new(), run_dir: None }
    }
}

/// Bytes the API copied for the application (copying `send`/`recv`); the
/// zero-copy calls copy nothing. The engine's own copies are in `outboard stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyCounters {
    pub send_copied: u64,
    pub recv_copied: u64,
}

/// How often this board's blocking waits had to wait: `waits` found
/// nothing ready and went to the board's condition (spinning first when
/// spinning has paid lately), and `sleeps` of them outlasted the spin and
/// slept until the engine woke them. Each sleep is a futex wake-up's worth
/// of the application's CPU: the figure behind its efficiency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitCounters {
    pub waits: u64,
    pub sleeps: u64,
}

/// The shard that LISTEN, CONNECT and UDP_BIND go to: the home shard (a
/// later change spreads them over the engine's shards).
pub(crate) const HOME_SHARD: u32 = 0;

/// How often [`Board::reattach`] tries the engine's socket while none answers.
const REATTACH_EVERY: Duration = Duration::from_millis(100);

/// How often a call checks that the engine's socket is still up.
const LIVENESS_EVERY: Duration = Duration::from_millis(100);
/// Longest single futex sleep (so engine death is noticed within a second).
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// An attachment to an engine. Dropping the last handle (the board, its
/// endpoints, its event queue) detaches: the engine resets the board's
/// remaining streams and frees everything.
#[derive(Clone)]
pub struct Board {
    pub(crate) inner: Rc<RefCell<Inner>>,
}

/// What an endpoint has become readable and writable by so far (see
/// [`Board::edges`]): each moves exactly when a new edge of its kind
/// happens, so an edge-triggered waiter compares them with what it last
/// reported. For a stream, bytes received (plus end of stream and an error)
/// and bytes acknowledged (plus connected and an error); for listeners and
/// datagram sockets, the events of each kind the engine posted (wrapping).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Edges {
    pub readable: u64,
    pub writable: u64,
}

/// What the application knows of one endpoint.
#[derive(Default)]
pub(crate) struct EpLocal {
    pub open: bool,
    /// The shard that owns the endpoint (its commands go to that shard's
    /// ring), from its status record when it opened.
    pub shard: u32,
    pub rx_consumed: u64,
    pub tx_produced: u64,
    /// SO_SNDBUF as a limit on the bytes written and not yet acknowledged
    /// (`Stream::set_send_limit`; 0: the transmit region's size).
    pub tx_limit: u64,
    pub accepts: VecDeque<u32>,
    pub mailbox: Option<MailboxConsumer>,
    /// A datagram `begin_get` returned and `end_get` has not released.
    pub held: Option<outboard_board::Descriptor>,
    /// A send buffer `begin_put` took.
    pub put_buf: Option<BufRef>,
    /// Mailboxes: completions (tag, errno), remote writes (offset, length)
    /// and tripwires (cookie) the engine posted, not taken yet.
    pub completions: VecDeque<(u32, u32)>,
    /// Mailboxes: messages and responses the `Mailbox` took off the ring
    /// and holds for its caller (level-triggered readiness counts them).
    pub msg_queued: usize,
    pub writes: VecDeque<(u32, u32)>,
    pub tripwires: VecDeque<u64>,
    /// Last contiguous length `begin_put`/`begin_get` gave (bounds `end_*`).
    pub put_len: usize,
    pub get_len: usize,
    pub shut: bool,
    pub mode: Option<Mode>,
    pub token: Option<(u64, crate::Interest)>,
    pub in_ready: bool,
    /// Events the engine posted for this endpoint (wrapping) that could make
    /// it readable (data, a connection, end of stream, an error) and
    /// writable (room acknowledged, connected, a send buffer back, an
    /// error): lets a caller tell "something it waits for happened since I
    /// last looked" (edge-triggered waits, which Linux wakes only for
    /// events of the kinds they ask for).
    pub edges: Edges,
    /// On `Inner::changed` (not yet taken by `Board::take_changed`).
    pub in_changed: bool,
}

pub(crate) struct Inner {
    sock: UnixStream,
    pub map: Arc<Mapping>,
    pub layout: BoardLayout,
    /// One command ring and one event ring per shard of the engine (index = shard).
    cmds: Vec<Producer<Command>>,
    events: Vec<Consumer<Event>>,
    cond: Condition,
    syncs: SyncTable,
    doorbell: OwnedFd,
    pub eps: Vec<EpLocal>,
    free_syncs: Vec<u32>,
    pub dgram_tx: FreeList,
    pub gone: bool,
    last_alive_check: Instant,
    alive_calls: u32,
    /// How often spinning paid off lately (0..=8): waits that the spin
    /// satisfied raise it, waits that had to sleep lower it. Below 2 a
    /// blocking wait sleeps at once: a spin that never helps only burns the
    /// CPU the application is there to save.
    spin_score: u8,
    sleeps: u32,
    waits: WaitCounters,
    pub engine_addr: IpAddr,
    pub net_prefix: u8,
    pub net_gateway: Option<IpAddr>,
    pub net6: Option<crate::EngineNet6>,
    pub mode: Mode,
    spin: Duration,
    pub copies: CopyCounters,
    pub ready: Vec<u32>,
    /// Endpoints the engine posted events for since the last
    /// `Board::take_changed`, each once (bounded by the endpoint count).
    pub changed: Vec<u32>,
    /// Keeps an embedded engine alive while boards use it.
    pub _engine: Option<Arc<dyn std::any::Any>>,
    /// An inline engine: this thread runs its turns whenever it waits.
    pub driver: Option<Rc<RefCell<dyn crate::InlineDriver>>>,
    /// An engine shared with a thread of its own: a command asks for a turn
    /// (see [`crate::SharedDriver`]).
    pub shared: Option<Arc<dyn crate::SharedDriver>>,
    /// The daemon engine's name and the options this board was attached
    /// with (for [`Board::reattach`]); None for embedded and inline engines.
    origin: Option<(String, AttachOptions)>,
    /// The shard new connections and datagram sockets go to (`Board::place_on`);
    /// None: the calling thread's core's.
    placement: Option<u32>,
}

/// Options set before `connect` that shape the SYN (`Board::connect_start_opts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectOptions {
    /// IP_TOS / IPV6_TCLASS: on every packet from the SYN on (the engine
    /// keeps the ECN bits).
    pub tos: u8,
    /// SO_RCVBUF as the window clamp in bytes (0: none): the SYN's window
    /// and window scale come from it, and no window offered exceeds it.
    pub rcv_clamp: u32,
}

impl Board {
    /// Attaches to the daemon engine `name` (`outboard engine --name NAME`).
    pub fn attach(name: &str) -> Result<Board> {
        Board::attach_with(name, &AttachOptions::default())
    }
    pub fn attach_with(name: &str, opts: &AttachOptions) -> Result<Board> {
        let path = match &opts.run_dir {
            Some(dir) => outboard_board::attach::board_socket_in(dir, name),
            None => outboard_board::attach::board_socket_path(name),
        };
        let sock = UnixStream::connect(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                // The board socket's mode keeps out whom the engine does not admit.
                return Error::NotAdmitted(outboard_board::access::refusal(name));
            }
            Error::Attach(format!(
                "no engine named {name:?} takes applications at {} ({e}); start one with `outboard engine --name {name} …` (and the same OUTBOARD_RUN_DIR)",
                path.display()
            ))
        })?;
        let board = Board::handshake(sock, opts, None).map_err(|e| match e {
            Error::NotAdmitted(_) => Error::NotAdmitted(outboard_board::access::refusal(name)),
            e => e,
        })?;
        board.inner.borrow_mut().origin = Some((name.to_string(), opts.clone()));
        Ok(board)
    }

    /// After the engine died (calls fail with [`Error::EngineGone`]): waits
    /// up to `timeout` for an engine of the same name to take applications
    /// again (a restart) and attaches a new board to it with this board's
    /// options. The old board stays failed — its streams were reset with
    /// the engine — and its listeners and datagram sockets are the
    /// caller's to open again on the new board (same ports); what the
    /// socket shim does by itself. `Error::TimedOut` if none came back;
    /// `Error::Invalid` for a board of an embedded or inline engine (it
    /// dies with its owner).
    pub fn reattach(&self, timeout: Duration) -> Result<Board> {
        let Some((name, opts)) = self.inner.borrow().origin.clone() else {
            return Err(Error::Invalid("only a board attached to a daemon engine by name can re-attach"));
        };
        let deadline = Instant::now() + timeout;
        loop {
            match Board::attach_with(&name, &opts) {
                Ok(b) => return Ok(b),
                // Not a matter of time: say so now.
                Err(e @ (Error::NotAdmitted(_) | Error::Invalid(_))) => return Err(e),
                Err(_) if Instant::now() >= deadline => return Err(Error::TimedOut),
                Err(_) => std::thread::sleep(REATTACH_EVERY.min(deadline.saturating_duration_since(Instant::now()))),
            }
        }
    }

    pub(crate) fn handshake(sock: UnixStream, opts: &AttachOptions, engine: Option<Arc<dyn std::any::Any>>) -> Result<Board> {
        let attach_err = |what: &str, e: std::io::Error| Error::Attach(format!("{what}: {e}"));
        sock.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| attach_err("socket", e))?;
        let req = AttachRequest { magic: ATTACH_MAGIC, version: VERSION, pid: std::process::id(), _pad: 0, params: opts.params };
        // The wake groups' eventfds follow the wake eventfd, and only it.
        let mut fds: Vec<std::os::fd::RawFd> = opts.wake_fd.into_iter().collect();
        if !fds.is_empty() {
            fds.extend(opts.wake_group_fds.iter().take(outboard_board::layout::WAKE_SLOTS - 1));
        }
        send_record(&sock, &req, &fds).map_err(|e| attach_err("sending the request", e))?;
        // A reply as short as the part every layout version shares is read:
        // an engine of another version still says why it refused.
        let (reply, got, mut fds) =
            recv_record_prefix::<AttachReply>(&sock, REPLY_COMMON_BYTES).map_err(|e| attach_err("reading the reply", e))?;
        if reply.magic != ATTACH_MAGIC {
            return Err(Error::Attach("the engine answered with a bad magic number".into()));
        }
        if let Some(why) = version_mismatch(&reply, got) {
            return Err(Error::Attach(why));
        }
        if reply.status == libc::EACCES as u32 {
            return Err(Error::NotAdmitted("the engine does not admit this user".into()));
        }
        if reply.status != 0 {
            return Err(Error::Attach(format!(
                "the engine refused the board: {}",
                std::io::Error::from_raw_os_error(reply.status as i32)
            )));
        }
        if fds.len() != 2 {
            return Err(Error::Attach(format!("the engine sent {} descriptors, not 2", fds.len())));
        }
        let layout = BoardLayout::new(reply.params).map_err(|e| Error::Attach(format!("bad board parameters: {e:?}")))?;
        if layout.total as u64 != reply.board_bytes {
            return Err(Error::Attach("board size disagrees with its parameters".into()));
        }
        let doorbell = fds.pop().expect("two fds");
        let memfd = fds.pop().expect("two fds");
        let map = Arc::new(
            Mapping::map_fd(memfd.as_raw_fd(), layout.total).map_err(|e| attach_err("mapping the board", e))?,
        );
        drop(memfd);
        if map.read::<u64>(header::MAGIC) != MAGIC {
            return Err(Error::Attach("the board has no magic number".into()));
        }
        let engine_addr = reply
            .engine_addr
            .to_socket_addr()
            .map_err(|e| Error::Attach(format!("the engine's address: {e}")))?
            .ip();
        let net_gateway =
            reply.gateway.to_option().map_err(|e| Error::Attach(format!("the engine's gateway: {e}")))?.map(|g| g.ip());
        let prefix_max = if engine_addr.is_ipv4() { 32 } else { 128 };
        let v6 = |a: NetAddr, what: &str| match a.to_option() {
            Ok(None) => Ok(None),
            Ok(Some(std::net::SocketAddr::V6(a))) => Ok(Some(*a.ip())),
            Ok(Some(_)) => Err(Error::Attach(format!("the engine's IPv6 {what} is an IPv4 address"))),
            Err(e) => Err(Error::Attach(format!("the engine's IPv6 {what}: {e}"))),
        };
        let net6 = if reply.ipv6_flags & outboard_board::attach::ipv6::ON != 0 {
            Some(crate::EngineNet6 {
                addr: v6(reply.engine_addr6, "address")?.map(|a| (a, reply.prefix_len6.min(128))),
                gateway: v6(reply.gateway6, "router")?,
            })
        } else {
            None
        };
        sock.set_read_timeout(None).map_err(|e| attach_err("socket", e))?;
        let p = layout.params;
        let tx_class = &layout.arena.classes[CLASS_DGRAM_TX as usize];
        let dgram_tx = FreeList::new((0..tx_class.count).rev().map(|index| BufRef { class: CLASS_DGRAM_TX, index }));
        let inner = Inner {
            cmds: layout.shards.iter().map(|s| Producer::new(map.clone(), s.command_ring, p.command_capacity)).collect(),
            events: layout.shards.iter().map(|s| Consumer::new(map.clone(), s.event_ring, p.event_capacity)).collect(),
            cond: Condition::new(map.clone(), header::EVENT_CONDITION),
            syncs: SyncTable::new(map.clone(), layout.syncs, p.syncs),
            eps: (0..p.endpoints).map(|_| EpLocal::default()).collect(),
            free_syncs: (0..p.syncs).rev().collect(),
            dgram_tx,
            gone: false,
            last_alive_check: Instant::now(),
            alive_calls: 0,
            spin_score: 4,
            sleeps: 0,
            waits: WaitCounters::default(),
            engine_addr,
            net_prefix: reply.prefix_len.min(prefix_max),
            net_gateway,
            net6,
            mode: opts.mode,
            spin: opts.spin,
            copies: CopyCounters::default(),
            ready: Vec::new(),
            changed: Vec::new(),
            _engine: engine,
            driver: None,
            shared: None,
            placement: None,
            origin: None,
            sock,
            map,
            layout,
            doorbell,
        };
        Ok(Board { inner: Rc::new(RefCell::new(inner)) })
    }

    /// Listens on `port` of the engine's addresses, IPv4 and (on a
    /// dual-stack engine) IPv6, as a Linux AF_INET6 socket on `[::]`.
    pub fn listen(&self, port: u16, backlog: u32) -> Result<Listener> {
        self.listen_with(port, backlog, ListenFlags::default())
    }

    /// Listens on `addr` as a Linux socket bound to it would: `0.0.0.0`
    /// takes IPv4 connections only, `[::]` both families (`flags.family`
    /// `Ipv6` for IPv6 only, as IPV6_V6ONLY), any other address only
    /// connections to it (EADDRNOTAVAIL when it is not the engine's).
    pub fn listen_on(&self, addr: SocketAddr, backlog: u32, flags: ListenFlags) -> Result<Listener> {
        use crate::ListenFamily;
        let family = match addr.ip() {
            IpAddr::V4(a) if a.is_unspecified() => ListenFamily::Ipv4,
            IpAddr::V6(a) if a.is_unspecified() => match flags.family {
                ListenFamily::Ipv6 => ListenFamily::Ipv6,
                _ => ListenFamily::Both,
            },
            ip => ListenFamily::Addr(ip),
        };
        self.listen_with(addr.port(), backlog, ListenFlags { family, ..flags })
    }

    /// Listens on `port`, sharing it with other processes' listeners that
    /// ask to (`flags.reuseport`, SO_REUSEPORT: same user), and taking
    /// connections only after `Listener::accept_on` when `flags.on_demand`.
    pub fn listen_with(&self, port: u16, backlog: u32, flags: ListenFlags) -> Result<Listener> {
        // Port 0 goes to the engine as it is (it answers EINVAL).
        let ep = self.request(|sync| BoardCommand::Listen { sync, port: Some(port).filter(|p| *p != 0), backlog, flags }, None)?;
        self.open_ep(ep);
        // Every other shard listens too: a SYN is accepted on whichever shard it reaches.
        if let Some(port) = Some(port).filter(|p| *p != 0) {
            self.inner.borrow_mut().shadow(ep, |e| BoardCommand::ShadowListen { ep: e, port, backlog, flags })?;
        }
        Ok(Listener { board: self.clone(), id: ep })
    }

    /// Joins a listener this process inherited across fork: `key` is the
    /// parent board's [`Board::inherit_key`] (read before the fork, or from
    /// the mapping the child inherited) and `parent_ep` the listener's
    /// endpoint there. Each connection the engine accepts goes to one of
    /// the listener's endpoints (those that said `accept_on`, with `on_demand`).
    pub fn inherit_listener(&self, key: u64, parent_ep: u32, flags: ListenFlags) -> Result<Listener> {
        let ep = self.request(|sync| BoardCommand::Inherit { sync, key, ep: parent_ep, flags }, None)?;
        self.open_ep(ep);
        self.inner.borrow_mut().shadow(ep, |e| BoardCommand::ShadowInherit { ep: e, key, parent: parent_ep, flags })?;
        Ok(Listener { board: self.clone(), id: ep })
    }

    /// Chooses the shard new connections and datagram sockets of this board
    /// go to (modulo the engine's shards); `None` (the default): the shard
    /// of the core the calling thread runs on.
    pub fn place_on(&self, shard: Option<u32>) {
        self.inner.borrow_mut().placement = shard;
    }

    /// Takes over stream `parent_ep` of the process this one was forked from
    /// (its board's `inherit_key` is `key`; the stream lives on shard
    /// `shard` there, `Stream::shard`): the connection moves into this
    /// board, with every byte still queued either way. Waits (up to a
    /// second) for the parent to `release` it. `Errno(EBADF)`: no such
    /// stream; `Errno(EBUSY)`: the parent kept it.
    pub fn adopt_stream(&self, key: u64, parent_ep: u32, shard: u32) -> Result<Stream> {
        let ep = self.request(|sync| BoardCommand::Adopt { sync, key, ep: parent_ep, shard }, None)?;
        self.open_ep(ep);
        Ok(Stream::new(self.clone(), ep))
    }

    /// Tells the engine this process was forked from the one whose board's
    /// key is `parent_key`: the streams that process releases wait for this
    /// one to adopt them while it lives.
    pub fn child_of(&self, parent_key: u64) -> Result<()> {
        self.inner.borrow_mut().command(BoardCommand::ChildOf { key: parent_key })
    }

    /// Detaches now, as dropping the last handle does, while handles remain:
    /// the engine closes this board's streams gracefully (FIN after what is
    /// queued), closes its listeners and datagram sockets, and forgets the
    /// board. Every later call returns [`Error::EngineGone`]. For a process
    /// that is about to exit with handles it cannot drop (the socket shim).
    pub fn detach(&self) {
        let mut i = self.inner.borrow_mut();
        if !i.gone {
            let _ = i.command(BoardCommand::Detach);
            i.gone = true;
        }
        let _ = i.sock.shutdown(std::net::Shutdown::Both);
    }

    /// The key processes forked from this one present to join its listeners
    /// (written by the engine at attach; only processes that map this board read it).
    pub fn inherit_key(&self) -> u64 {
        self.inner.borrow().map.atomic_u64(outboard_board::layout::header::INHERIT_KEY).load(Ordering::Acquire)
    }
    /// Connects; waits for the handshake (blocking or polling as the board's
    /// mode says; a non-blocking board waits too, sleeping). Either family:
    /// the engine answers a family it does not run with
    /// `Error::AddrFamily` (EAFNOSUPPORT: IPv6 on an engine without it).
    pub fn connect(&self, addr: impl Into<SocketAddr>) -> Result<Stream> {
        let to = addr.into();
        let ep = self.request(|sync| BoardCommand::Connect { sync, to, mss: 0, fast_open: false, tos: 0, rcv_clamp: 0 }, None)?;
        self.open_ep(ep);
        Ok(Stream::new(self.clone(), ep))
    }
    /// `connect` with RFC 7413 Fast Open (Linux's `TCP_FASTOPEN_CONNECT`):
    /// when the engine has a cookie for the destination this returns at
    /// once and the SYN carries the first data written; otherwise the SYN
    /// asks for a cookie (for the next connection) and this returns when
    /// the handshake completes.
    pub fn connect_fast_open(&self, addr: impl Into<SocketAddr>) -> Result<Stream> {
        let to = addr.into();
        let ep = self.request(|sync| BoardCommand::Connect { sync, to, mss: 0, fast_open: true, tos: 0, rcv_clamp: 0 }, None)?;
        self.open_ep(ep);
        Ok(Stream::new(self.clone(), ep))
    }
    /// A datagram socket on `port` (0: any), for both families.
    pub fn bind_udp(&self, port: u16) -> Result<Datagram> {
        self.bind_udp_for(port, crate::ListenFamily::Both)
    }
    /// A datagram socket on `port` (0: any) taking `family`'s datagrams, as
    /// a Linux socket bound as `ListenFamily::of_bound` says: an AF_INET one
    /// on 0.0.0.0 and an IPV6_V6ONLY one on `[::]` share a port.
    pub fn bind_udp_for(&self, port: u16, family: crate::ListenFamily) -> Result<Datagram> {
        let ep = self.request(|sync| BoardCommand::UdpBind { sync, port, family }, None)?;
        self.open_ep(ep);
        {
            let mut b = self.inner.borrow_mut();
            let off = b.layout.endpoint_mailbox(ep);
            let cap = b.layout.params.mailbox_capacity;
            let map = b.map.clone();
            b.eps[ep as usize].mailbox = Some(MailboxConsumer::new(map, off, cap));
        }
        Ok(Datagram { board: self.clone(), id: ep })
    }
    /// An event queue over this board's endpoints.
    pub fn event_queue(&self) -> EventQueue {
        EventQueue { board: self.clone() }
    }
    /// The engine's address (IPv4 on today's engines; match on it, or use
    /// [`crate::EngineNet::serves`], rather than assume a family).
    pub fn engine_addr(&self) -> IpAddr {
        self.inner.borrow().engine_addr
    }
    pub fn copy_counters(&self) -> CopyCounters {
        self.inner.borrow().copies
    }
    /// How often this board's blocking waits waited and slept (see [`WaitCounters`]).
    pub fn wait_counters(&self) -> WaitCounters {
        self.inner.borrow().waits
    }
    /// True while the engine is attached and alive (checks the socket).
    pub fn engine_alive(&self) -> bool {
        let mut b = self.inner.borrow_mut();
        b.last_alive_check = Instant::now() - LIVENESS_EVERY * 2;
        b.alive_calls = 63;
        b.check_alive().is_ok()
    }

    /// For the hostile-application tests only: the whole board, writable.
    /// Writing here can only break this application (the engine checks
    /// everything it reads); the tests scribble over it on purpose.
    #[doc(hidden)]
    #[allow(clippy::mut_from_ref)]
    pub fn __board_bytes_for_tests(&self) -> &mut [u8] {
        let i = self.inner.borrow();
        // SAFETY: the mapping lives as long as `self`; the caller accepts
        // racing with the engine over plain bytes.
        unsafe { std::slice::from_raw_parts_mut(i.map.as_ptr(), i.map.len()) }
    }

    /// For the hostile-application tests only: queue an arbitrary command.
    #[doc(hidden)]
    /// It goes to the ring of the shard of `c.endpoint` (the home shard when
    /// that is out of range).
    pub fn __raw_command_for_tests(&self, c: outboard_board::Command) -> Result<()> {
        let mut i = self.inner.borrow_mut();
        let shard = if c.endpoint < i.layout.params.endpoints { i.ep_shard(c.endpoint) } else { HOME_SHARD };
        i.put_command(shard, c)
    }

    /// Puts endpoint `ep` in wake group `group` (see
    /// [`AttachOptions::wake_group_fds`]; 0: in none, which wakes every
    /// sleeper). Takes effect at the engine's next turn; until then its
    /// events wake every group, so no sleeper misses one.
    pub fn set_wake_group(&self, ep: u32, group: u8) -> Result<()> {
        if usize::from(group) >= outboard_board::layout::WAKE_SLOTS {
            return Err(Error::Invalid("wake group out of range"));
        }
        let mut i = self.inner.borrow_mut();
        if ep >= i.layout.params.endpoints {
            return Err(Error::Invalid("endpoint out of range"));
        }
        i.command_at_next_turn(BoardCommand::WakeGroup { ep: Endpoint(ep), group })
    }

    /// The board's news word and futex, as a handle other threads may hold:
    /// read `current()` before looking at any endpoint, then `wait` for it to
    /// move. For callers that do their own waiting (the socket shim) with
    /// endpoints in `Mode::NonBlocking`.
    pub fn news(&self) -> News {
        let i = self.inner.borrow();
        News { cond: i.cond.clone(), map: i.map.clone() }
    }
    /// Moves the engine's pending events into the endpoints' state (what
    /// every call does first); `Err(EngineGone)` once the engine is gone.
    pub fn pump(&self) -> Result<()> {
        let mut i = self.inner.borrow_mut();
        i.check_alive()?;
        i.pump()
    }
    /// Readiness of endpoint `id` now (after `pump`), as the event queue sees it.
    pub fn readiness(&self, id: crate::EndpointId) -> crate::events::Readiness {
        let mut i = self.inner.borrow_mut();
        if id as usize >= i.eps.len() {
            return crate::events::Readiness::default();
        }
        crate::events::readiness_of(&mut i, id)
    }
    /// What endpoint `id` has become readable and writable by so far, as
    /// counters that move exactly when a new edge of that kind happens (see
    /// [`Edges`]).
    pub fn edges(&self, id: crate::EndpointId) -> Edges {
        let i = self.inner.borrow();
        let Some(e) = i.eps.get(id as usize) else { return Edges::default() };
        let kind = i.map.atomic_u32(i.layout.endpoint_status(id) + status::KIND).load(Ordering::Acquire);
        if kind != outboard_board::proto::kind::STREAM {
            return e.edges;
        }
        // A stream's are read from its status record, as its readiness is:
        // counting events instead would see data before its event is pumped
        // and report one arrival twice. Each term only grows.
        let f = i.flags(id);
        let (closed, failed) = (u64::from(f & flags::PEER_CLOSED != 0), u64::from(i.error(id) != 0));
        Edges {
            readable: i.rx_total(id) + closed + failed,
            writable: i.tx_acked(id) + u64::from(f & flags::CONNECTED != 0) + failed,
        }
    }
    /// Moves into `out` (cleared first) the endpoints the engine posted
    /// events for since the last call, each once: what a caller that keeps
    /// its own ready lists (the shim's epoll) looks at instead of every
    /// endpoint. Events reach the list when they are pumped (every call
    /// pumps); an id may name an endpoint closed since.
    pub fn take_changed(&self, out: &mut Vec<crate::EndpointId>) {
        out.clear();
        let mut i = self.inner.borrow_mut();
        let i = &mut *i;
        std::mem::swap(out, &mut i.changed);
        for &ep in out.iter() {
            if let Some(e) = i.eps.get_mut(ep as usize) {
                e.in_changed = false;
            }
        }
    }
    /// The descriptor of the attach socket: it hangs up when the engine dies
    /// (a watcher thread may poll it for `POLLHUP`).
    pub fn attach_socket_fd(&self) -> std::os::fd::RawFd {
        self.inner.borrow().sock.as_raw_fd()
    }
    /// Marks the engine gone (a watcher saw its socket hang up): every later call says so.
    pub fn mark_gone(&self) {
        self.inner.borrow_mut().gone = true;
    }
    /// Starts a connect without waiting for the handshake (non-blocking
    /// sockets): poll the result with [`PendingConnect::poll`].
    pub fn connect_start(&self, addr: impl Into<SocketAddr>) -> Result<PendingConnect> {
        self.connect_start_with(addr, 0)
    }

    /// `connect_start` with TCP_MAXSEG set before connect: the SYN
    /// advertises at most `mss` and the send MSS stays at or below it
    /// (0: the engine's; Linux's range is 88..=32767).
    pub fn connect_start_with(&self, addr: impl Into<SocketAddr>, mss: u16) -> Result<PendingConnect> {
        self.connect_start_opts(addr, mss, false, ConnectOptions::default())
    }

    /// `connect_start_with`, and with `fast_open` RFC 7413 Fast Open as
    /// `connect_fast_open` does (the connect may complete at once); `opts`:
    /// what else was set before connect and goes on the SYN.
    pub fn connect_start_opts(&self, addr: impl Into<SocketAddr>, mss: u16, fast_open: bool, opts: ConnectOptions) -> Result<PendingConnect> {
        let ConnectOptions { tos, rcv_clamp } = opts;
        let to = addr.into();
        let mut i = self.inner.borrow_mut();
        i.check_alive()?;
        let Some(slot) = i.take_sync() else { return Err(Error::NoResources("sync slot")) };
        if let Err(e) = i.command(BoardCommand::Connect { sync: SyncSlot(slot), to, mss, fast_open, tos, rcv_clamp }) {
            let _ = i.syncs.cancel(slot);
            return Err(e);
        }
        Ok(PendingConnect { board: self.clone(), slot: Some(slot) })
    }

    fn open_ep(&self, ep: u32) {
        self.inner.borrow_mut().open_ep(ep);
    }

    /// Sends a command that completes a sync (`cmd` builds it for the slot
    /// taken), and waits for the result.
    fn request(&self, cmd: impl FnOnce(SyncSlot) -> BoardCommand, mode: Option<Mode>) -> Result<u32> {
        let v = self.request_value(cmd, mode)?;
        if v < u64::from(self.inner.borrow().layout.params.endpoints) {
            Ok(v as u32)
        } else {
            Err(Error::Invalid("the engine returned an endpoint out of range"))
        }
    }

    /// Sends a command that completes a sync, and waits for its non-negative value.
    pub(crate) fn request_value(&self, cmd: impl FnOnce(SyncSlot) -> BoardCommand, mode: Option<Mode>) -> Result<u64> {
        let slot = {
            let mut i = self.inner.borrow_mut();
            i.check_alive()?;
            let Some(slot) = i.take_sync() else { return Err(Error::NoResources("sync slot")) };
            i.command(cmd(SyncSlot(slot)))?;
            slot
        };
        let mode = match mode.unwrap_or(self.inner.borrow().mode) {
            Mode::Polling => Mode::Polling,
            _ => Mode::Blocking,
        };
        let mut value = None;
        let r = self.wait(mode, None, |i| {
            value = i.syncs.take(slot);
            value.is_some()
        });
        let mut i = self.inner.borrow_mut();
        match r {
            Ok(()) => {
                i.free_syncs.push(slot);
                let v = value.expect("waited for it");
                if v < 0 {
                    Err(Error::from_errno((-v) as i32))
                } else {
                    Ok(v as u64)
                }
            }
            Err(e) => {
                // Cancelled (engine gone): the slot is not reusable until the engine frees it.
                let _ = i.syncs.cancel(slot);
                Err(e)
            }
        }
    }

    /// Waits until `ready` holds, per `mode`, at most `timeout`. With an
    /// inline engine, waiting means running the engine's turns here.
    pub(crate) fn wait(&self, mode: Mode, timeout: Option<Duration>, mut ready: impl FnMut(&mut Inner) -> bool) -> Result<()> {
        let driver = self.inner.borrow().driver.clone();
        if let Some(d) = driver {
            return self.wait_inline(&d, mode, timeout, ready);
        }
        // The clock is read where it is needed: at once for a timeout, else
        // only once the wait goes to spin or sleep. A wait whose news is
        // already there reads none: a request/response round trip used to
        // read it six times on each side here and in `put_command`, about
        // 20 ns each. The engine's liveness is checked as in every hot
        // loop: every 64th `check_alive` looks at the clock, every 100 ms at
        // the socket, and always right after a sleep.
        let mut started = timeout.map(|_| Instant::now());
        let mut since_start = move || started.get_or_insert_with(Instant::now).elapsed();
        loop {
            let (seq, spin, cond) = {
                let mut i = self.inner.borrow_mut();
                let seq = i.cond.current();
                i.pump()?;
                if ready(&mut i) {
                    return Ok(());
                }
                i.check_alive()?;
                (seq, i.spin, i.cond.clone())
            };
            if mode == Mode::NonBlocking {
                return Err(Error::WouldBlock);
            }
            let elapsed = since_start();
            if timeout.is_some_and(|t| elapsed >= t) {
                return Err(Error::WouldBlock);
            }
            let left = timeout.map_or(MAX_SLEEP, |t| (t - elapsed).min(MAX_SLEEP));
            match mode {
                Mode::Polling => {
                    // Spin on the sequence word: no syscall, no sleep.
                    let until = Instant::now() + left.min(Duration::from_millis(1));
                    while cond.current() == seq && Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
                _ => {
                    let try_spin = {
                        let mut i = self.inner.borrow_mut();
                        i.sleeps = i.sleeps.wrapping_add(1);
                        i.waits.waits += 1;
                        // Every 16th sleep spins anyway, to notice when spinning would help again.
                        i.spin_score >= 2 || i.sleeps.is_multiple_of(16)
                    };
                    let waited = Instant::now();
                    cond.wait(seq, if try_spin { spin } else { Duration::ZERO }, left);
                    let took = waited.elapsed();
                    let slept = elapsed + took > spin;
                    // Spinning pays when the news comes within a quarter of
                    // the spin: later, the spin has burnt more CPU than the
                    // sleep and wake-up it saved (a few µs), though it did save
                    // one. A bulk reader woken once per batch (the engine
                    // batches wake-ups for bytes not pushed) thus stops
                    // spinning; a request/response peer answering quickly
                    // keeps it.
                    let paid = took <= spin / 4;
                    let mut i = self.inner.borrow_mut();
                    i.spin_score = if paid { (i.spin_score + 1).min(8) } else { i.spin_score.saturating_sub(1) };
                    if slept {
                        i.waits.sleeps += 1;
                        // After a sleep the clock read is nothing: look at the socket now.
                        i.alive_calls = 63;
                    }
                }
            }
        }
    }

    /// `wait` with an inline engine: the engine's turns run here until
    /// `ready` holds. Each time round is one turn and one look at the
    /// events it posted (not a second look before the next turn: nothing
    /// runs between the two).
    fn wait_inline(
        &self,
        d: &Rc<RefCell<dyn crate::InlineDriver>>,
        mode: Mode,
        timeout: Option<Duration>,
        mut ready: impl FnMut(&mut Inner) -> bool,
    ) -> Result<()> {
        // The clock only for a timeout, or once the engine has been idle
        // (to sleep as the engine's own loop would): a wait whose news
        // arrives with a busy turn reads none.
        let mut started = timeout.map(|_| Instant::now());
        let mut since_start = move || started.get_or_insert_with(Instant::now).elapsed();
        let mut idle_since: Option<Instant> = None;
        let spin = {
            let mut i = self.inner.borrow_mut();
            i.pump()?;
            if ready(&mut i) {
                return Ok(());
            }
            i.spin
        };
        loop {
            self.inner.borrow_mut().check_alive()?;
            let work = d.borrow_mut().turn().map_err(|_| Error::EngineGone)?;
            {
                let mut i = self.inner.borrow_mut();
                i.pump()?;
                if ready(&mut i) {
                    return Ok(());
                }
            }
            if mode == Mode::NonBlocking {
                return Err(Error::WouldBlock);
            }
            let elapsed = if timeout.is_some() || (!work && mode == Mode::Blocking) { since_start() } else { Duration::ZERO };
            if timeout.is_some_and(|t| elapsed >= t) {
                return Err(Error::WouldBlock);
            }
            if work {
                idle_since = None;
            } else if mode == Mode::Blocking {
                // Idle for a while: sleep as the engine's own loop would.
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= spin.max(Duration::from_micros(50)) {
                    let left = timeout.map_or(MAX_SLEEP, |t| t.saturating_sub(elapsed).min(MAX_SLEEP));
                    d.borrow_mut().idle(left).map_err(|_| Error::EngineGone)?;
                    self.inner.borrow_mut().alive_calls = 63;
                }
            }
        }
    }
}

/// The board's news word (see [`Board::news`]); `Send + Sync`.
#[derive(Clone)]
pub struct News {
    cond: Condition,
    map: Arc<Mapping>,
}

impl News {
    pub fn current(&self) -> u32 {
        self.cond.current()
    }
    /// Waits for the word to move past `seen`: spins `spin`, then sleeps;
    /// `None` sleeps without a time limit (a signal handler without
    /// SA_RESTART interrupts it, as it would a socket call).
    pub fn wait(&self, seen: u32, spin: Duration, timeout: Option<Duration>) -> outboard_board::WaitOutcome {
        match timeout {
            Some(t) => self.cond.wait(seen, spin, t),
            None => self.cond.wait_untimed(seen, spin),
        }
    }
    /// Announces a thread about to sleep in poll/epoll on the wake eventfd:
    /// from now on the engine writes it when it signals. Re-read `current()`
    /// after this and before sleeping (SeqCst pairs with the engine's bump
    /// and read: one of the two sees the other).
    pub fn poller_enter(&self) {
        self.poller_enter_slot(0);
    }
    /// The thread woke; returns how many still sleep on the eventfd.
    pub fn poller_exit(&self) -> u32 {
        self.poller_exit_slot(0)
    }
    /// As [`News::poller_enter`], for a thread about to sleep on wake group
    /// `slot`'s eventfd (0: the shared one): the engine writes it for events
    /// of the group's endpoints and of endpoints in no group. A slot out of
    /// range is the shared one.
    pub fn poller_enter_slot(&self, slot: usize) {
        self.pollers(slot).fetch_add(1, Ordering::SeqCst);
    }
    /// As [`News::poller_exit`], for `slot`.
    pub fn poller_exit_slot(&self, slot: usize) -> u32 {
        self.pollers(slot).fetch_sub(1, Ordering::SeqCst).saturating_sub(1)
    }
    fn pollers(&self, slot: usize) -> &std::sync::atomic::AtomicU32 {
        let slot = if slot < outboard_board::layout::WAKE_SLOTS { slot } else { 0 };
        self.map.atomic_u32(outboard_board::layout::header::APP_POLLERS + 4 * slot)
    }
    /// Moves the word and wakes every sleeper (a watcher uses it when the engine dies).
    pub fn signal(&self) {
        self.cond.signal();
    }
}

/// A connect in progress (see [`Board::connect_start`]). Dropping it before
/// it completes abandons the attempt.
pub struct PendingConnect {
    board: Board,
    slot: Option<u32>,
}

impl PendingConnect {
    /// The outcome once the handshake finished (or failed); `None` while it runs.
    pub fn poll(&mut self) -> Option<Result<Stream>> {
        let slot = self.slot?;
        let v = {
            let mut i = self.board.inner.borrow_mut();
            if let Err(e) = i.check_alive().and_then(|_| i.pump()) {
                let _ = i.syncs.cancel(slot);
                self.slot = None;
                return Some(Err(e));
            }
            let v = i.syncs.take(slot)?;
            i.free_syncs.push(slot);
            self.slot = None;
            v
        };
        if v < 0 {
            return Some(Err(Error::from_errno((-v) as i32)));
        }
        let ep = v as u32;
        if ep >= self.board.inner.borrow().layout.params.endpoints {
            return Some(Err(Error::Invalid("the engine returned an endpoint out of range")));
        }
        self.board.open_ep(ep);
        Some(Ok(Stream::new(self.board.clone(), ep)))
    }
}

impl Drop for PendingConnect {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else { return };
        let Ok(mut i) = self.board.inner.try_borrow_mut() else { return };
        // The engine made the stream already: reset it, as closing a socket
        // whose handshake just finished would. (Cancelled: the slot is not
        // reusable until the engine frees it.)
        if let outboard_board::sync::CancelOutcome::AlreadyDone(v) = i.syncs.cancel(slot) {
            i.free_syncs.push(slot);
            if v >= 0 && (v as u64) < u64::from(i.layout.params.endpoints) {
                let _ = i.command(BoardCommand::Abort { ep: Endpoint(v as u32) });
            }
        }
    }
}

impl Inner {
    /// The engine died, or dropped this board.
    pub fn check_alive(&mut self) -> Result<()> {
        if self.gone {
            return Err(Error::EngineGone);
        }
        if self.map.atomic_u32(header::ENGINE_STATE).load(Ordering::Acquire) == ENGINE_GONE {
            self.gone = true;
            return Err(Error::EngineGone);
        }
        // The clock only every 64 calls: hot loops call this per iteration.
        self.alive_calls = self.alive_calls.wrapping_add(1);
        if !self.alive_calls.is_multiple_of(64) {
            return Ok(());
        }
        let now = Instant::now();
        if now.duration_since(self.last_alive_check) >= LIVENESS_EVERY {
            self.last_alive_check = now;
            if peer_gone(&self.sock) {
                self.gone = true;
                return Err(Error::EngineGone);
            }
        }
        Ok(())
    }

    fn take_sync(&mut self) -> Option<u32> {
        while let Some(s) = self.free_syncs.pop() {
            if self.syncs.arm(s) {
                return Some(s);
            }
        }
        None
    }

    /// The shard that owns endpoint `ep` (in range): the one its status
    /// record named when it opened; for an endpoint not open here, the
    /// shard whose ids it is in (`layout.shard_of`).
    pub fn ep_shard(&self, ep: u32) -> u32 {
        match self.eps.get(ep as usize) {
            Some(e) if e.open => e.shard,
            _ => self.layout.shard_of(ep),
        }
    }

    /// The shard whose ring `c` goes to: the endpoint's shard, or the home
    /// shard for commands that create an endpoint. (DETACH goes to every
    /// shard: see `command`; UDP_RELEASE names no endpoint: the datagram
    /// socket sends it with `put_command` to its own shard.)
    fn route(&self, c: &BoardCommand) -> u32 {
        match *c {
            BoardCommand::Listen { .. } | BoardCommand::Inherit { .. } => HOME_SHARD,
            // A connection or datagram socket lives on the shard of the core that makes it.
            BoardCommand::Connect { .. } | BoardCommand::UdpBind { .. } => self.placement_shard(),
            // Sent to one shard each by `shadow`.
            BoardCommand::ShadowListen { ep, .. } | BoardCommand::ShadowInherit { ep, .. } => self.ep_shard(ep.0),
            BoardCommand::Push { ep, .. }
            | BoardCommand::Consumed { ep, .. }
            | BoardCommand::Shutdown { ep }
            | BoardCommand::Close { ep }
            | BoardCommand::Abort { ep }
            | BoardCommand::UdpSend { ep, .. }
            | BoardCommand::SetOption { ep, .. }
            | BoardCommand::Info { ep, .. }
            | BoardCommand::WakeGroup { ep, .. }
            | BoardCommand::AcceptOn { ep } => self.ep_shard(ep.0),
            BoardCommand::UdpRelease { .. } | BoardCommand::Detach | BoardCommand::ChildOf { .. } => HOME_SHARD,
            // The message service runs on shard 0.
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
            | BoardCommand::HandlerUnload { .. } => 0,
            BoardCommand::Release { ep } => self.ep_shard(ep.0),
            // The shard the parent's stream lives on (a valid one: the ring index is clamped).
            BoardCommand::Adopt { shard, .. } => shard,
        }
    }

    /// The shard for a new connection or datagram socket: the one of the
    /// core this thread runs on (`sched_getcpu` modulo the shards), so with
    /// an engine of one shard per core and pinned threads, an endpoint is
    /// served by the core beside its thread.
    fn placement_shard(&self) -> u32 {
        let n = self.cmds.len() as u32;
        if n <= 1 {
            return HOME_SHARD;
        }
        if let Some(s) = self.placement {
            return s % n;
        }
        // SAFETY: sched_getcpu takes nothing and returns the CPU or -1.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            HOME_SHARD
        } else {
            cpu as u32 % n
        }
    }

    /// Listener `ep`, just opened on its shard: the same listener on every
    /// other shard (`make` builds the command for one shard).
    pub(crate) fn shadow(&mut self, ep: u32, make: impl Fn(Endpoint) -> BoardCommand) -> Result<()> {
        let home = self.ep_shard(ep);
        for shard in (0..self.cmds.len() as u32).filter(|s| *s != home) {
            self.put_command(shard, make(Endpoint(ep)).encode())?;
        }
        Ok(())
    }

    /// A listener's command (ACCEPT_ON, CLOSE) to every shard it listens on.
    pub(crate) fn command_listener(&mut self, c: BoardCommand) -> Result<()> {
        let rec = c.encode();
        let mut first_err = None;
        for shard in 0..self.cmds.len() as u32 {
            if let Err(e) = self.put_command(shard, rec) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Queues a command in its shard's ring (DETACH: in every shard's) and
    /// rings that shard's doorbell if it sleeps.
    pub fn command(&mut self, c: BoardCommand) -> Result<()> {
        if c == BoardCommand::Detach || matches!(c, BoardCommand::ChildOf { .. }) {
            let rec = c.encode();
            let mut first_err = None;
            for shard in 0..self.cmds.len() as u32 {
                if let Err(e) = self.put_command(shard, rec) {
                    first_err.get_or_insert(e);
                }
            }
            return first_err.map_or(Ok(()), Err);
        }
        let shard = self.route(&c);
        self.put_command(shard, c.encode())
    }

    /// As [`Inner::command`], for a command whose effect nothing waits on:
    /// with an inline engine it is queued and takes effect at the engine's
    /// next turn (the application's next command or wait) instead of in a
    /// turn of its own. With an engine thread this is `command`.
    pub fn command_at_next_turn(&mut self, c: BoardCommand) -> Result<()> {
        if self.driver.is_none() {
            return self.command(c);
        }
        let shard = self.route(&c);
        self.queue_command(shard, c.encode()).map(|_| ())
    }

    /// Queues a command record in shard `shard`'s ring and rings that
    /// shard's doorbell if it sleeps. Waits (spinning, then yielding) while
    /// the ring is full.
    pub fn put_command(&mut self, shard: u32, c: Command) -> Result<()> {
        let s = self.queue_command(shard, c)?;
        if let Some(d) = self.driver.clone() {
            // Inline: the command takes effect now, in this thread.
            d.borrow_mut().turn().map_err(|_| Error::EngineGone)?;
            return Ok(());
        }
        if let Some(d) = self.shared.as_ref() {
            // Shared: the command takes effect at this thread's next wait,
            // or in a turn another thread runs first (`SharedDriver::want_turn`);
            // an engine thread asleep is rung below, as a daemon is.
            d.want_turn();
        }
        // The shard sets its ENGINE_SLEEPING and then re-checks its ring
        // (SeqCst); we published and then check the flag: one of us sees the other.
        std::sync::atomic::fence(Ordering::SeqCst);
        let shard = s as u32;
        match self.map.atomic_u32(self.layout.shard_control(shard, shard_control::ENGINE_SLEEPING)).load(Ordering::SeqCst) {
            0 => {}
            SLEEP_FUTEX => {
                let w = self.map.atomic_u32(self.layout.shard_control(shard, shard_control::ENGINE_DOORBELL));
                w.fetch_add(1, Ordering::SeqCst);
                outboard_board::futex::wake(w, 1);
            }
            _ => self.ring_doorbell(),
        }
        Ok(())
    }

    /// Puts a command record in shard `shard`'s ring (waiting while it is
    /// full: an inline engine runs its turns meanwhile) and says which ring.
    fn queue_command(&mut self, shard: u32, c: Command) -> Result<usize> {
        self.check_alive()?;
        let s = (shard as usize).min(self.cmds.len() - 1);
        // When the ring first turned out full (the clock only then).
        let mut full_since: Option<Instant> = None;
        loop {
            match self.cmds[s].put(c) {
                Ok(true) => break,
                Ok(false) => {
                    if let Some(d) = self.driver.clone() {
                        d.borrow_mut().turn().map_err(|_| Error::EngineGone)?;
                        continue;
                    }
                    self.ring_doorbell();
                    self.check_alive()?;
                    if full_since.get_or_insert_with(Instant::now).elapsed() > Duration::from_micros(50) {
                        std::thread::yield_now();
                    }
                }
                Err(_) => {
                    self.gone = true;
                    return Err(Error::EngineGone);
                }
            }
        }
        Ok(s)
    }

    fn ring_doorbell(&self) {
        outboard_board::wake::ring_eventfd(self.doorbell.as_raw_fd());
    }

    /// Endpoint `ep` (in range) starts afresh, open, in the board's mode
    /// (still on `changed` if it was: one entry per id keeps it bounded).
    pub(crate) fn open_ep(&mut self, ep: u32) {
        let mode = self.mode;
        // The engine wrote the record before it published the id. A shard
        // out of range (never, from a sound engine) falls back to the id's.
        let named = self.status_u32(ep, status::SHARD);
        let shard = if named < self.layout.params.shards { named } else { self.layout.shard_of(ep) };
        // A stream adopted from a parent process starts with bytes queued to send.
        let size = self.status_u64(ep, status::TX_SIZE);
        let tx_produced = self.status_u64(ep, status::TX_BASE).min(size);
        let e = &mut self.eps[ep as usize];
        *e = EpLocal { open: true, shard, mode: Some(mode), in_changed: e.in_changed, tx_produced, ..Default::default() };
    }

    /// Drains every shard's event ring into the endpoints' state. O(1) per event.
    pub fn pump(&mut self) -> Result<()> {
        for shard in 0..self.events.len() {
            self.pump_shard(shard)?;
        }
        Ok(())
    }

    fn pump_shard(&mut self, shard: usize) -> Result<()> {
        loop {
            let e = match self.events[shard].get() {
                Ok(Some(e)) => e,
                Ok(None) => return Ok(()),
                Err(_) => {
                    self.gone = true;
                    return Err(Error::EngineGone);
                }
            };
            let Some(ep) = self.eps.get_mut(e.endpoint as usize) else { continue };
            if e.kind & (ev::READABLE | ev::ACCEPT | ev::PEER_CLOSED | ev::ERROR | ev::COMPLETION | ev::REMOTE_WRITE | ev::TRIPWIRE) != 0 {
                ep.edges.readable = ep.edges.readable.wrapping_add(1);
            }
            if e.kind & (ev::WRITABLE | ev::BUF_RETURN | ev::ERROR) != 0 {
                ep.edges.writable = ep.edges.writable.wrapping_add(1);
            }
            if !ep.in_changed {
                ep.in_changed = true;
                self.changed.push(e.endpoint);
            }
            if e.kind & ev::ACCEPT != 0 {
                ep.accepts.push_back(e.value as u32);
            }
            if e.kind & ev::COMPLETION != 0 {
                ep.completions.push_back(((e.value >> 32) as u32, e.value as u32));
            }
            if e.kind & ev::REMOTE_WRITE != 0 {
                ep.writes.push_back(((e.value >> 32) as u32, e.value as u32));
            }
            if e.kind & ev::TRIPWIRE != 0 {
                ep.tripwires.push_back(e.value);
            }
            if e.kind & ev::BUF_RETURN != 0 {
                if let Some(b) = self.layout.arena.locate(e.value, 0) {
                    self.dgram_tx.free(b);
                }
            }
            if e.kind & ev::CLOSED != 0 {
                let ep = &mut self.eps[e.endpoint as usize];
                if !ep.open {
                    *ep = EpLocal { in_changed: ep.in_changed, ..Default::default() };
                }
                continue;
            }
            let ep = &mut self.eps[e.endpoint as usize];
            if ep.token.is_some() && !ep.in_ready {
                ep.in_ready = true;
                self.ready.push(e.endpoint);
            }
        }
    }

    // ---- status record reads ----
    fn status_u64(&self, ep: u32, field: usize) -> u64 {
        self.map.atomic_u64(self.layout.endpoint_status(ep) + field).load(Ordering::Acquire)
    }
    fn status_u32(&self, ep: u32, field: usize) -> u32 {
        self.map.atomic_u32(self.layout.endpoint_status(ep) + field).load(Ordering::Acquire)
    }
    pub fn flags(&self, ep: u32) -> u32 {
        self.status_u32(ep, status::FLAGS)
    }
    pub fn error(&self, ep: u32) -> u32 {
        self.status_u32(ep, status::ERROR)
    }
    pub fn rx_total(&self, ep: u32) -> u64 {
        self.status_u64(ep, status::RX_TOTAL)
    }
    pub fn tx_acked(&self, ep: u32) -> u64 {
        self.status_u64(ep, status::TX_ACKED)
    }
    /// (offset, size) of a stream's receive and transmit regions, checked to lie in the board.
    pub fn regions(&self, ep: u32) -> Option<((usize, usize), (usize, usize))> {
        let r = (self.status_u64(ep, status::RX_OFFSET), self.status_u64(ep, status::RX_SIZE));
        let t = (self.status_u64(ep, status::TX_OFFSET), self.status_u64(ep, status::TX_SIZE));
        let ok = |(o, s): (u64, u64)| s > 0 && o.checked_add(s).is_some_and(|e| e <= self.map.len() as u64);
        (ok(r) && ok(t)).then_some(((r.0 as usize, r.1 as usize), (t.0 as usize, t.1 as usize)))
    }
    /// The address at `field` (`status::LOCAL` / `status::REMOTE`) of an
    /// endpoint's status record; `None` while the record holds none (or
    /// garbage: the application trusts the engine, but does not crash on it).
    pub fn addr(&self, ep: u32, field: usize) -> Option<SocketAddr> {
        self.map.read::<NetAddr>(self.layout.endpoint_status(ep) + field).to_socket_addr().ok()
    }
    pub fn peer_closed(&self, ep: u32) -> bool {
        self.flags(ep) & flags::PEER_CLOSED != 0
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Say so, then close the socket: the engine closes what is left
        // gracefully (a process that dies without this gets resets).
        if !self.gone {
            let _ = self.command(BoardCommand::Detach);
        }
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

/// Why the engine's reply shows it speaks another board layout version, or
/// `None` when it speaks ours. `got` is how many bytes of the reply came: an
/// engine of layout version 2 answers with 72 bytes (its IPv4 address where
/// `version` is now), older ones with no more than that.
fn version_mismatch(reply: &AttachReply, got: usize) -> Option<String> {
    const V2_REPLY_BYTES: usize = 72;
    let refused = matches!(reply.status as i32, libc::EPROTONOSUPPORT | libc::EPROTO);
    let whole = got >= std::mem::size_of::<AttachReply>();
    if !refused && whole && reply.version == VERSION {
        return None;
    }
    let version_came = got >= std::mem::offset_of!(AttachReply, version) + 4;
    Some(if got == V2_REPLY_BYTES {
        version_refusal(2, VERSION)
    } else if version_came && reply.version == VERSION && !refused {
        format!("the engine's attach reply was cut short ({got} of {} bytes)", std::mem::size_of::<AttachReply>())
    } else if !version_came || reply.version == 0 {
        format!(
            "an engine of an earlier board layout version (2 or older) refused this application of version {VERSION}: \
             rebuild the application against the engine's outboard (or run an engine of layout version {VERSION})"
        )
    } else {
        version_refusal(reply.version, VERSION)
    })
}

#[cfg(test)]
mod tests;
