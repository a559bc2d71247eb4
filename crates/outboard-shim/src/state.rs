//! The process's shim state: one board (attached lazily, at the first socket
//! the engine should own), the table of engine-owned descriptors, and the
//! lock that serialises every use of the board (the native API's board is
//! single-threaded; the shim makes it safe for a multi-threaded program by
//! holding one process-wide lock around each short operation and never
//! while sleeping).
//!
//! Two fast paths need no lock: `mark(fd)` (an atomic byte per descriptor
//! says whether the shim owns it, so `read` on a file costs one load), and
//! the thread-local reentrancy flag (while the shim itself runs, every
//! interposed call goes straight to libc).

use crate::sock::Sock;
use crate::epoll::EpollSet;
use outboard_api::{AttachOptions, Board, News};
use outboard_board::layout::app_counter;
use outboard_board::BoardParams;
use outboard_wire::flowhash::FlowMap;
use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Descriptors the mark table covers; an engine socket needs a placeholder
/// descriptor below this (above it, sockets stay with the kernel).
pub const MAX_FDS: usize = 1 << 16;

pub const MARK_KERNEL: u8 = 0;
/// An AF_INET or AF_INET6 socket the shim tracks (undecided, or owned by the engine).
pub const MARK_SOCK: u8 = 1;
/// An epoll instance the shim tracks (it may hold engine sockets).
pub const MARK_EPOLL: u8 = 2;
/// The shim's own descriptors (the attach socket, wake-up eventfds): the
/// program may not close them.
pub const MARK_INTERNAL: u8 = 3;

static MARKS: [AtomicU8; MAX_FDS] = [const { AtomicU8::new(0) }; MAX_FDS];

pub fn mark(fd: RawFd) -> u8 {
    if fd < 0 || fd as usize >= MAX_FDS {
        return MARK_KERNEL;
    }
    MARKS[fd as usize].load(Ordering::Acquire)
}

pub fn set_mark(fd: RawFd, m: u8) {
    if fd >= 0 && (fd as usize) < MAX_FDS {
        MARKS[fd as usize].store(m, Ordering::Release);
    }
}

thread_local! {
    static IN_SHIM: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread runs shim code: interposed calls then go straight
/// to libc (the native API and Rust's std call `write`, `poll`, `close`…).
pub fn in_shim() -> bool {
    IN_SHIM.with(|c| c.get())
}

/// Marks this thread as the shim's own for the rest of its life: every call
/// it makes goes to the kernel untouched (an engine thread inside the program).
pub fn mark_thread_internal() {
    IN_SHIM.with(|c| c.set(true));
}

/// Marks this thread as inside the shim until dropped.
pub struct Reentry(bool);
impl Reentry {
    pub fn enter() -> Reentry {
        Reentry(IN_SHIM.with(|c| c.replace(true)))
    }
}
impl Drop for Reentry {
    fn drop(&mut self) {
        let was = self.0;
        IN_SHIM.with(|c| c.set(was));
    }
}

/// What the shim counts; shown per board by `outboard stat` (the slots of
/// the board's application counters, `layout::app_counter`).
#[derive(Debug, Clone, Copy)]
pub enum Count {
    EngineSockets = app_counter::ENGINE_SOCKETS as isize,
    KernelSockets = app_counter::KERNEL_SOCKETS as isize,
    Unsupported = app_counter::UNSUPPORTED as isize,
    UnsupportedOptions = app_counter::UNSUPPORTED_OPTIONS as isize,
    ForkInherited = app_counter::FORK_INHERITED as isize,
    PollWaits = app_counter::POLL_WAITS as isize,
    BlockingSleeps = app_counter::BLOCKING_SLEEPS as isize,
    Eintr = app_counter::EINTR as isize,
    KernelFallbackConnects = app_counter::KERNEL_FALLBACK_CONNECTS as isize,
    Forks = app_counter::FORKS as isize,
    SharedListeners = app_counter::SHARED_LISTENERS as isize,
    AdoptedStreams = app_counter::ADOPTED_STREAMS as isize,
}
pub const COUNTS: usize = app_counter::NAMES.len();

/// Counted here first; pushed into the board's application counters (which
/// the engine shows) whenever the board is at hand.
static COUNTERS: [AtomicU64; COUNTS] = [const { AtomicU64::new(0) }; COUNTS];

pub fn count(c: Count) {
    COUNTERS[c as usize].fetch_add(1, Ordering::Relaxed);
}

/// The engine's network (which destinations it serves).
pub type Net = outboard_api::EngineNet;

/// Local addresses a socket may bind to and be served by the engine: its
/// IPv4 address or 0.0.0.0; on a dual-stack engine its static IPv6
/// address, and `::` (an IPv6-only `::` needs the engine's IPv6; a
/// dual-stack one is served for IPv4 at least).
pub fn is_local(net: &Net, a: IpAddr, v6only: bool) -> bool {
    match a {
        IpAddr::V4(a) => a.is_unspecified() || IpAddr::V4(a) == net.addr,
        IpAddr::V6(a) if a.is_unspecified() => !v6only || net.ipv6.is_some(),
        IpAddr::V6(a) => net.ipv6.is_some_and(|n| n.is_local(a)),
    }
}

pub struct Shim {
    pub pid: u32,
    pub board: Option<Board>,
    pub news: Option<News>,
    pub net: Option<Net>,
    attach_failed: bool,
    /// Looked up at every call on a descriptor, and by endpoint at every
    /// event handed out: the flow hash, not SipHash (the keys are the
    /// program's descriptors and the engine's endpoint numbers).
    pub socks: FlowMap<RawFd, Rc<RefCell<Sock>>>,
    pub epolls: FlowMap<RawFd, Rc<RefCell<EpollSet>>>,
    /// Engine endpoint → the listener or stream socket on it, as epoll last
    /// saw it: which sockets an engine event concerns.
    by_endpoint: FlowMap<u32, Weak<RefCell<Sock>>>,
    /// Scratch lists of `collect_epoll` (kept to avoid allocating per wait).
    changed: Vec<u32>,
    seen_eps: Vec<(u32, Rc<RefCell<Sock>>)>,
    /// Threads blocked in calls on engine sockets.
    pub waiters: crate::wait::Waiters,
    pushed: [u64; COUNTS],
}

// SAFETY: the board and every socket object (Rc/RefCell inside) are only
// ever touched with the process-wide `STATE` lock held, so no two threads
// use them at once; nothing of them escapes the lock.
unsafe impl Send for Shim {}

static STATE: Mutex<Option<Shim>> = Mutex::new(None);

pub struct Guard(MutexGuard<'static, Option<Shim>>, #[allow(dead_code)] Reentry);

impl std::ops::Deref for Guard {
    type Target = Shim;
    fn deref(&self) -> &Shim {
        self.0.as_ref().expect("initialised in lock()")
    }
}
impl std::ops::DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Shim {
        self.0.as_mut().expect("initialised in lock()")
    }
}

/// Takes the process-wide lock (and marks this thread as inside the shim).
pub fn lock() -> Guard {
    let r = Reentry::enter();
    let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if g.is_none() {
        *g = Some(Shim {
            pid: std::process::id(),
            board: None,
            news: None,
            net: None,
            attach_failed: false,
            socks: FlowMap::default(),
            epolls: FlowMap::default(),
            by_endpoint: FlowMap::default(),
            changed: Vec::new(),
            seen_eps: Vec::new(),
            waiters: Default::default(),
            pushed: [0; COUNTS],
        });
    }
    Guard(g, r)
}

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// What the environment said when the library was loaded, read once:
/// programs such as nginx clear their environment after start-up (workers
/// keep only `TZ`), and the shim must still find its engine when it comes
/// back after a restart.
pub struct Settings {
    /// The engine this process attaches to (`OUTBOARD_ENGINE`, as `outboard run --name` sets it).
    pub engine: String,
    /// Where that engine's sockets are (`OUTBOARD_RUN_DIR`, or the default run directory).
    pub run_dir: std::path::PathBuf,
    /// `OUTBOARD_STREAMS`: streams a board holds (4..=4096).
    pub streams: u32,
    /// `OUTBOARD_STREAM_KIB`: each stream region's size (256..=16384 KiB).
    pub region_kib: u32,
    /// `OUTBOARD_REQUIRE_ENGINE=1` (`outboard run --require-engine`): a
    /// process the engine will not take exits (status 4) rather than run
    /// on the kernel.
    pub require_engine: bool,
    /// `OUTBOARD_EXEC_SOCKETS`: the engine sockets the image before an exec
    /// left this one (`exec.rs`).
    pub exec_sockets: Option<String>,
    /// `OUTBOARD_WAKE_GROUPS=0`: no wake groups (every thread asleep in
    /// poll/epoll is woken for every event, as before they existed).
    pub wake_groups: bool,
}

impl Settings {
    fn from_env() -> Settings {
        Settings {
            engine: std::env::var("OUTBOARD_ENGINE").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "default".into()),
            run_dir: outboard_board::attach::run_dir(),
            streams: env_u32("OUTBOARD_STREAMS", 256).clamp(4, 4096),
            region_kib: env_u32("OUTBOARD_STREAM_KIB", 1024).clamp(256, 16384),
            require_engine: std::env::var("OUTBOARD_REQUIRE_ENGINE").is_ok_and(|v| v == "1"),
            exec_sockets: std::env::var(crate::exec::ENV).ok(),
            wake_groups: std::env::var("OUTBOARD_WAKE_GROUPS").map_or(true, |v| v.trim() != "0"),
        }
    }
}

/// Where boards come from when not from the engine daemon `OUTBOARD_ENGINE`
/// names: an engine inside this process (`liboutboard_shim_inline`, for
/// `outboard run --inline`, installs one when it loads).
pub type BoardSource = fn(&AttachOptions) -> Result<Board, outboard_api::Error>;

static BOARD_SOURCE: std::sync::OnceLock<BoardSource> = std::sync::OnceLock::new();

/// Makes `source` where this process's board comes from (once; false if one was set already).
pub fn set_board_source(source: BoardSource) -> bool {
    BOARD_SOURCE.set(source).is_ok()
}

/// Whether the engine runs inside this process (`outboard run --inline`):
/// it ends with the process image, so nothing is carried across `exec`.
pub fn in_process_engine() -> bool {
    BOARD_SOURCE.get().is_some()
}

/// What the in-process engine does when the program is about to drop its
/// privileges (see [`before_credentials_change`]): true when it opened what
/// it needs them for; false to have the engine started now instead.
pub type BeforeDrop = fn() -> bool;

static BEFORE_DROP: std::sync::OnceLock<BeforeDrop> = std::sync::OnceLock::new();

/// Makes `f` what runs before a credentials change (once; false if one was set already).
pub fn set_before_drop(f: BeforeDrop) -> bool {
    BEFORE_DROP.set(f).is_ok()
}

/// The program is about to change its credentials (setuid, setgid,
/// setgroups and the like: a daemon dropping to its `user`). With the
/// engine inside it (`--inline`) and not started yet, what the engine needs
/// privileges for (its link: AF_XDP needs CAP_NET_RAW; its control socket)
/// is opened now, while the process may ([`BeforeDrop`]); opened after the
/// drop it could not be, and every socket would stay with the kernel. The
/// engine itself starts at the first socket, in this process or in the
/// child a daemon forks after the drop (`memcached -d -u nobody`: its parent
/// exits). An engine that cannot be prepared (a fabric) starts now. A
/// daemon engine is left alone: it admits the dropped user by its own rules
/// (`--allow-user`).
///
/// Not in a drop that keeps capabilities thread by thread (`setpriv`,
/// `capsh`: PR_SET_KEEPCAPS, the uid change, then `capset` of the calling
/// thread only, then the gid change): glibc runs each set*id call in every
/// thread of the process and aborts it when one thread's result differs, and
/// the engine's threads, without the capabilities the calling thread set
/// back, would fail the gid change (SIGABRT, without a word). Such a wrapper
/// execs the program it drops for, which starts its own engine at its first
/// socket if it still may open the link.
pub fn before_credentials_change() {
    if !in_process_engine() || in_shim() {
        return;
    }
    // SAFETY: PR_GET_KEEPCAPS only reads this thread's flag.
    if unsafe { libc::prctl(libc::PR_GET_KEEPCAPS) } == 1 {
        return;
    }
    let _r = Reentry::enter();
    if BEFORE_DROP.get().is_some_and(|f| f()) {
        return;
    }
    let _ = lock().board();
}

/// The process is exiting (an `atexit` handler of the in-process engine):
/// the board detaches, so the engine closes every stream gracefully (FIN
/// after what is queued) instead of resetting it, and the watcher stays
/// quiet about the hang-up. Later engine calls fail (EngineGone).
pub fn detach_for_exit() {
    crate::wait::DETACHING.store(true, Ordering::SeqCst);
    let mut g = lock();
    g.push_counters();
    if let Some(b) = g.board.as_ref() {
        b.detach();
    }
}

/// Exit status of a process under `--require-engine` that the engine does not take.
pub const REQUIRED_ENGINE_REFUSED: i32 = 4;

/// The settings, read from the environment on first use (at load, by [`init`]).
pub fn settings() -> &'static Settings {
    static SETTINGS: std::sync::OnceLock<Settings> = std::sync::OnceLock::new();
    SETTINGS.get_or_init(Settings::from_env)
}

impl Shim {
    /// The board, attaching on first use. None (and the kernel keeps every
    /// socket) when no engine is there: said once, loudly.
    pub fn board(&mut self) -> Option<Board> {
        if let Some(b) = &self.board {
            return Some(b.clone());
        }
        if self.attach_failed {
            return None;
        }
        match self.attach_new() {
            Ok(b) => Some(b),
            Err(e) => {
                self.attach_failed = true;
                if settings().require_engine {
                    crate::log::error(&format!("{e}; the engine is required (outboard run --require-engine): exiting with status 4"));
                    // SAFETY: ends the process at once, as asked; nothing of ours is half-written.
                    unsafe { libc::_exit(REQUIRED_ENGINE_REFUSED) };
                }
                crate::log::warn(&format!("not on the engine: every socket of this process stays with the kernel ({e})"));
                None
            }
        }
    }

    /// Attaches a board to the engine `OUTBOARD_ENGINE` names, and watches it.
    fn attach_new(&mut self) -> Result<Board, outboard_api::Error> {
        let cfg = settings();
        let name = &cfg.engine;
        // Streams: 2 regions each. Many-connection servers need many streams;
        // pages are only allocated as they are touched.
        let (streams, region_kib) = (cfg.streams, cfg.region_kib);
        let params = BoardParams {
            command_capacity: 4096,
            event_capacity: 16384,
            endpoints: (streams * 2 + 64).next_power_of_two(),
            syncs: 1024,
            stream_buffer: region_kib * 1024,
            stream_buffers: streams * 2,
            ..BoardParams::default()
        };
        // One wake eventfd for the process's life: epoll sets keep it registered across re-attaches.
        let wake_fd = crate::wait::make_wake_fd();
        let opts = AttachOptions {
            params,
            mode: outboard_api::Mode::NonBlocking,
            wake_fd,
            wake_group_fds: if cfg.wake_groups { crate::wait::group_fds() } else { Vec::new() },
            run_dir: Some(cfg.run_dir.clone()),
            ..AttachOptions::default()
        };
        let b = match BOARD_SOURCE.get() {
            Some(source) => source(&opts)?,
            None => Board::attach_with(name, &opts)?,
        };
        set_mark(b.attach_socket_fd(), MARK_INTERNAL);
        let net = b.engine_net();
        self.net = Some(net);
        self.news = Some(b.news());
        crate::wait::start_watcher(&b);
        crate::log::info(&format!("attached to engine {name:?} at {}/{}", net.addr, net.prefix_len));
        self.board = Some(b.clone());
        Ok(b)
    }

    /// The engine came back after dying (an engine of the same name takes
    /// applications again): attach to it, re-create every listening and
    /// bound datagram socket on it (same ports), and wake every waiting
    /// call to look again. Streams of the dead engine stay failed (reset).
    /// False when no engine takes us yet.
    pub fn reattach(&mut self) -> bool {
        let Some(old_news) = self.news.clone() else { return false };
        if self.attach_new().is_err() {
            return false;
        }
        let b = self.board.clone().expect("just attached");
        self.pushed = [0; COUNTS];
        self.by_endpoint.clear();
        self.changed.clear();
        self.seen_eps.clear();
        crate::wait::ENGINE_GONE.store(false, Ordering::SeqCst);
        let (mut listeners, mut dgrams, mut lost, mut idle) = (0, 0, 0, 0);
        for sock in self.socks.values() {
            let mut s = sock.borrow_mut();
            let again = match &s.kind {
                // A listener this process shares but never accepted on (nginx's
                // master: its workers accept) is not re-created: it would take
                // the port before the processes that do accept. It stays quiet.
                crate::sock::Kind::Listener(_) if s.joined && !s.armed => {
                    idle += 1;
                    s.gone_reported = true;
                    None
                }
                crate::sock::Kind::Listener(l) => {
                    // A listener several processes shared (inherited, or SO_REUSEPORT) is
                    // re-created by each of them: they share the port on the new engine too.
                    let mut flags = crate::ops::listen_flags(&s);
                    flags.reuseport |= s.joined;
                    Some(b.listen_with(l.local_port(), s.backlog, flags).map(crate::sock::Kind::Listener))
                }
                crate::sock::Kind::Dgram(d) => Some(b.bind_udp(d.local_port()).map(crate::sock::Kind::Dgram)),
                _ => None,
            };
            match again {
                Some(Ok(k)) => {
                    if matches!(k, crate::sock::Kind::Listener(_)) {
                        listeners += 1;
                    } else {
                        dgrams += 1;
                    }
                    s.kind = k;
                    s.gone_reported = false;
                    // It accepted before: it does on the new engine too.
                    if std::mem::take(&mut s.armed) {
                        s.want_accepts();
                    }
                    // Its events on the new board find it at once.
                    if let Some(ep) = s.evented_endpoint() {
                        self.by_endpoint.insert(ep, Rc::downgrade(sock));
                    }
                }
                Some(Err(e)) if matches!(s.kind, crate::sock::Kind::Listener(_)) => {
                    // The port is taken on the new engine: the listener stays the
                    // dead one, quiet (not ready, accept would block), never a
                    // socket that fails at once forever (a server would spin on it).
                    lost += 1;
                    crate::log::warn(&format!("a listener could not be re-created on the new engine: {e}"));
                    s.gone_reported = true;
                }
                Some(Err(e)) => {
                    // The port is taken on the new engine: the socket stays failed.
                    lost += 1;
                    s.so_error = crate::sock::errno_of(&e, false);
                    s.kind = crate::sock::Kind::Failed;
                }
                None => {}
            }
            s.bump();
        }
        crate::log::warn(&format!(
            "the engine is back: re-attached; {listeners} listening and {dgrams} datagram sockets re-created{}{}",
            if lost > 0 { format!(", {lost} could not be") } else { String::new() },
            if idle > 0 { format!(", {idle} shared and never accepted on left to the processes that accept") } else { String::new() }
        ));
        // Calls asleep on the dead board's word, and poll/epoll sleepers, look again.
        old_news.signal();
        let efd = crate::wait::wake_fd();
        if efd >= 0 {
            crate::wait::ring(efd);
        }
        true
    }

    /// The engine's network, attaching if needed.
    pub fn net(&mut self) -> Option<Net> {
        self.board()?;
        self.net
    }

    /// Copies new counts into the board's application counters.
    pub fn push_counters(&mut self) {
        let Some(b) = &self.board else { return };
        for (i, c) in COUNTERS.iter().enumerate() {
            let now = c.load(Ordering::Relaxed);
            if now != self.pushed[i] {
                b.app_counter_add(i, now.wrapping_sub(self.pushed[i]));
                self.pushed[i] = now;
            }
        }
    }

    /// The first step of every look at engine sockets: read the news word
    /// (before looking, so a later wait cannot miss what arrives meanwhile),
    /// then move the engine's pending events into the endpoints' state.
    /// The events it moved are handed out at once: to the epoll sets
    /// watching their sockets, and to the blocked calls waiting for them.
    pub fn look(&mut self) -> (Option<News>, u32, Option<Board>) {
        let news = self.news.clone();
        let seq = news.as_ref().map_or(0, |n| n.current());
        let board = self.board.clone();
        if let Some(b) = &board {
            if crate::wait::ENGINE_GONE.load(Ordering::Relaxed) {
                // The watcher saw the engine die: every call on its sockets fails from now on.
                b.mark_gone();
            }
            let _ = b.pump();
            self.hand_out_changes(Some(b), seq);
        }
        (news, seq, board)
    }

    pub fn sock(&self, fd: RawFd) -> Option<Rc<RefCell<Sock>>> {
        let s = self.socks.get(&fd).cloned()?;
        self.adopt_if_inherited(fd, &s);
        Some(s)
    }

    /// The first call on a stream inherited across fork takes it over from
    /// the parent (which releases it when it closes its copy): the
    /// connection moves into this process's board. If it cannot (the
    /// parent keeps it: EBUSY), the socket stays inherited (its calls fail
    /// with EOPNOTSUPP).
    fn adopt_if_inherited(&self, fd: RawFd, s: &Rc<RefCell<Sock>>) {
        let Ok(mut sock) = s.try_borrow_mut() else { return };
        let crate::sock::Kind::InheritedStream { key, ep, shard } = sock.kind else { return };
        let adopted = self.board.as_ref().map(|b| b.adopt_stream(key, ep, shard));
        sock.kind = match adopted {
            Some(Ok(stream)) => {
                COUNTERS[Count::AdoptedStreams as usize].fetch_add(1, Ordering::Relaxed);
                crate::sock::Kind::Stream(stream)
            }
            Some(Err(e)) => {
                crate::log::debug(&format!("fd {fd}: the stream inherited across fork stays the parent's: {e}"));
                crate::sock::Kind::Inherited
            }
            None => crate::sock::Kind::Inherited,
        };
        if matches!(sock.kind, crate::sock::Kind::Stream(_)) {
            sock.apply_opts();
        }
        sock.bump();
    }

    /// One look of an epoll wait at `set`'s engine interests: appends the
    /// ready ones to `out` (at most `max`). Costs O(candidates): the
    /// endpoints the engine posted events for since the last look are
    /// handed to the sets watching their sockets first (see epoll.rs).
    /// Call after `look`, which pumped the events in.
    pub fn collect_epoll(&mut self, board: Option<&Board>, set: &mut EpollSet, out: &mut Vec<libc::epoll_event>, max: usize) {
        set.begin_wait();
        if crate::wait::ENGINE_GONE.load(Ordering::Relaxed) {
            set.engine_gone();
        }
        let mut first = true;
        loop {
            let news = self.news.as_ref().map_or(0, |n| n.current());
            self.hand_out_changes(board, news);
            // Another pass only for what became a candidate during the last
            // (a socket's state changed while it was looked at).
            if !set.absorb_inbox() && !first {
                break;
            }
            first = false;
            let mut seen = std::mem::take(&mut self.seen_eps);
            set.collect(board, out, max, &mut seen);
            for (ep, sock) in seen.drain(..) {
                let known = self.by_endpoint.get(&ep).is_some_and(|w| std::ptr::eq(w.as_ptr(), Rc::as_ptr(&sock)));
                if !known {
                    self.by_endpoint.insert(ep, Rc::downgrade(&sock));
                }
            }
            self.seen_eps = seen;
            if out.len() >= max {
                break;
            }
        }
    }

    /// Makes every socket the engine posted news for since the last call a
    /// candidate in each epoll set watching it, and wakes the blocked calls
    /// waiting for it.
    fn hand_out_changes(&mut self, board: Option<&Board>, news: u32) {
        let Some(b) = board else { return };
        b.take_changed(&mut self.changed);
        self.waiters.wake_for(&self.changed, news);
        for ep in &self.changed {
            let Some(sock) = self.by_endpoint.get(ep).and_then(Weak::upgrade) else { continue };
            let Ok(sock) = sock.try_borrow() else { continue };
            // The id may have been reused by a socket epoll has not looked at
            // yet: that one is a candidate already.
            if sock.evented_endpoint() != Some(*ep) {
                continue;
            }
            for (inbox, fd) in &sock.watchers {
                if let Some(i) = inbox.upgrade() {
                    i.push(*fd);
                }
            }
        }
    }
}

/// After fork, in the child: the engine sockets are the parent's (the board
/// is single-producer). Forget them without closing anything in the
/// parent's board, close the inherited attach socket (so the engine still
/// notices the parent's death), and start afresh: the child attaches its own
/// board if it makes engine sockets of its own, and at once if it inherited
/// listeners, which it joins (`join_inherited`). Other inherited engine
/// sockets fail with EOPNOTSUPP (counted) except `close`.
pub fn forget_after_fork(shim: &mut Shim) {
    // The parent board's inherit key, from the mapping the child inherited.
    let key = shim.board.as_ref().map(|b| b.inherit_key());
    if let Some(b) = shim.board.take() {
        let fd = b.attach_socket_fd();
        set_mark(fd, MARK_KERNEL);
        // SAFETY: closes the inherited copy of our attach socket in this (child) process.
        unsafe { crate::real::close(fd) };
        std::mem::forget(b);
    }
    let socks = std::mem::take(&mut shim.socks);
    let mut listeners = Vec::new();
    let mut streams = 0;
    for (fd, s) in &socks {
        let old = s.borrow();
        let mut inherited = Sock::inherited(&old);
        match (&old.kind, key) {
            (crate::sock::Kind::Listener(l), Some(key)) => listeners.push((*fd, key, l.id())),
            // Taken over at its first use here (`Shim::sock`).
            (crate::sock::Kind::Stream(x), Some(key)) => {
                inherited.kind = crate::sock::Kind::InheritedStream { key, ep: x.id(), shard: x.shard() };
                streams += 1;
            }
            _ => {}
        }
        shim.socks.insert(*fd, Rc::new(RefCell::new(inherited)));
    }
    std::mem::forget(socks);
    let epolls = std::mem::take(&mut shim.epolls);
    for fd in epolls.keys() {
        set_mark(*fd, MARK_KERNEL);
    }
    std::mem::forget(epolls);
    std::mem::forget(std::mem::take(&mut shim.by_endpoint));
    // The threads blocked in the parent are not in the child.
    std::mem::forget(std::mem::take(&mut shim.waiters));
    if let Some(n) = shim.news.take() {
        std::mem::forget(n);
    }
    shim.net = None;
    shim.attach_failed = false;
    shim.pid = std::process::id();
    // The child's board counts what the child does from here on, not what
    // the parent did: its `FORKS` are its own (the engine lets a board's
    // listeners linger at its end only for children it forked itself).
    shim.pushed = std::array::from_fn(|i| COUNTERS[i].load(Ordering::Relaxed));
    if !listeners.is_empty() || streams > 0 {
        // A board of the child's own at once (with the parent's credentials),
        // the inherited listeners joined, then the engine told whose child
        // it is: the parent's released streams wait for this child, and
        // once every child the parent forked has said so, its listeners
        // need not wait for one at its end. So `CHILD_OF` comes after the
        // joins (each answered before the next): a parent that dies right
        // after `fork` (a daemon) leaves its listener to the child.
        join_inherited(shim, &listeners);
        if let (Some(board), Some(key)) = (shim.board(), key) {
            let _ = board.child_of(key);
        }
    }
}

/// The child joins the listeners it inherited (fd, the parent board's
/// key, the listener's endpoint there) on a board of its own, on demand:
/// the engine gives it connections once it accepts (nginx's workers), none
/// if it never does (a `BGSAVE` child, nginx's cache manager). At once, not
/// at first use: a daemon's parent exits right after `fork`, and its
/// listeners linger only briefly for its children (`LINGER` in the engine).
/// A listener that cannot be joined stays `Inherited` (its calls fail; it is
/// never ready: `Sock::unjoined_listener`).
fn join_inherited(shim: &mut Shim, listeners: &[(RawFd, u64, u32)]) {
    let Some(board) = shim.board() else { return };
    let mut joined = 0;
    for (fd, key, ep) in listeners {
        let Some(s) = shim.socks.get(fd).cloned() else { continue };
        let mut sock = s.borrow_mut();
        let flags = crate::ops::listen_flags(&sock);
        match board.inherit_listener(*key, *ep, flags) {
            Ok(l) => {
                sock.kind = crate::sock::Kind::Listener(l);
                sock.joined = true;
                sock.bump();
                joined += 1;
            }
            Err(e) => crate::log::warn(&format!("fd {fd}: could not join the listener inherited across fork: {e}")),
        }
    }
    COUNTERS[Count::SharedListeners as usize].fetch_add(joined, Ordering::Relaxed);
    shim.push_counters();
}

thread_local! {
    static FORK_GUARD: RefCell<Option<MutexGuard<'static, Option<Shim>>>> = const { RefCell::new(None) };
}

extern "C" fn before_fork() {
    let _r = Reentry::enter();
    let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(shim) = g.as_mut() {
        // The engine learns now (the header word, no command) that a child
        // is on its way to join this board's listeners and take its streams
        // over: it lets them linger if we die before the child says
        // `CHILD_OF`. Counted only when the child will (it attaches when it
        // inherits engine listeners or streams, `forget_after_fork`): so
        // once as many children said it, none is still coming.
        if shim.board.is_some() && shim.socks.values().any(|s| s.try_borrow().map_or(true, |s| s.hands_over_at_fork())) {
            count(Count::Forks);
        }
        shim.push_counters();
        // A child may hold these streams now: closing one releases it to the
        // child. Listeners are shared with the children from now on.
        for s in shim.socks.values() {
            if let Ok(mut s) = s.try_borrow_mut() {
                match s.kind {
                    crate::sock::Kind::Stream(_) => s.forked = true,
                    crate::sock::Kind::Listener(_) => s.joined = true,
                    _ => {}
                }
            }
        }
    }
    FORK_GUARD.with(|f| *f.borrow_mut() = Some(g));
    crate::wait::before_fork();
}
extern "C" fn after_fork_parent() {
    crate::wait::after_fork();
    FORK_GUARD.with(|f| f.borrow_mut().take());
}
extern "C" fn after_fork_child() {
    let _r = Reentry::enter();
    crate::wait::after_fork_child();
    FORK_GUARD.with(|f| {
        if let Some(mut g) = f.borrow_mut().take() {
            if let Some(shim) = g.as_mut() {
                forget_after_fork(shim);
            }
        }
    });
}

/// Runs once when the library loads (a second call does nothing: a
/// library that links the shim may call it from its own constructor too).
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(init_once);
}

fn init_once() {
    // Read the environment now, before the program can clear it.
    let _ = settings();
    crate::log::prime();
    let _ = crate::wait::spin();
    // SAFETY: registers plain extern "C" handlers.
    unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_parent), Some(after_fork_child)) };
    // Engine sockets the image before an exec carried over.
    crate::exec::restore(settings().exec_sockets.as_deref());
}
