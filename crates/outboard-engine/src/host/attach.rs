//! Attaching applications: a thread listens on `RUN_DIR/NAME.board` (daemon)
//! or serves in-process socket pairs (embedded), makes each application its
//! board (a memfd), sends the memfd and the shard's doorbell eventfd
//! (SCM_RIGHTS), and hands the new session to the shard through a channel.
//! The same thread then watches every attached application's socket for a
//! hang-up (the kernel closes it when the process dies, SIGKILL included)
//! and raises that session's `dead` flag, which the shard checks each turn:
//! the shard never makes a syscall to learn that an application died.

use crate::control::run_dir;
pub use outboard_board::attach::board_socket_path;
pub use outboard_board::wake::ring_eventfd;
use outboard_board::access::{current_uid, Access, PeerCreds};
use outboard_board::attach::{recv_record, send_record, AttachReply, AttachRequest, ATTACH_MAGIC};
use outboard_board::layout::{header, BoardParams, CLASS_STREAM, ENGINE_RUNNING, MAGIC, VERSION, WAKE_SLOTS};
use crate::log::{self, Level};
use outboard_board::{BoardLayout, BufRef, FreeList, Mapping, NetAddr};
use std::net::SocketAddr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What an engine that upgrades a running one takes over for attaching:
/// the board socket (daemon mode), the doorbell attached applications ring,
/// and how many boards the old engine numbered (new ones are numbered on).
#[derive(Debug, Default)]
pub struct TakenAttach {
    pub listener: Option<UnixListener>,
    pub doorbell: Option<OwnedFd>,
    pub boards_before: u64,
}

/// A new application, ready for the shard.
pub struct NewSession {
    pub map: Arc<Mapping>,
    pub layout: BoardLayout,
    pub sock: UnixStream,
    pub pid: u32,
    /// The application's user (from the kernel's SO_PEERCRED).
    pub uid: u32,
    /// The board's inherit key (`header::INHERIT_KEY`): what a process
    /// forked from the application presents to join its listeners.
    pub key: u64,
    pub dead: Arc<AtomicBool>,
    /// The application's wake eventfd, if it gave one (checked to be an eventfd, made non-blocking).
    pub wake: Option<OwnedFd>,
    /// Its wake groups' eventfds, if it gave them (after the wake eventfd; same checks).
    pub wake_groups: Arc<Vec<OwnedFd>>,
    /// The board's number on this engine (its session id on every shard).
    pub board: u64,
    /// The board's free stream regions, shared by its sessions on every shard.
    pub regions: Arc<Mutex<FreeList>>,
    /// The board's memfd, kept: a live upgrade hands it to the new engine,
    /// which maps the same memory. None for boards made otherwise (tests).
    pub memory: Option<Arc<OwnedFd>>,
}

impl NewSession {
    /// The board's free stream regions: every stream buffer of `layout`.
    pub fn all_regions(layout: &BoardLayout) -> Arc<Mutex<FreeList>> {
        let n = layout.arena.classes[CLASS_STREAM as usize].count;
        Arc::new(Mutex::new(FreeList::new((0..n).map(|index| BufRef { class: CLASS_STREAM, index }))))
    }
}

/// What boards look like on this engine.
#[derive(Debug, Clone, Copy)]
pub struct BoardLimits {
    /// Largest board an application may ask for.
    pub max_board_bytes: usize,
    /// The smallest stream region (the stack's TCP buffer size).
    pub stream_buffer: u32,
    pub engine_addr: std::net::IpAddr,
    /// The engine's subnet prefix and default gateway: told to applications
    /// so they know which destinations the engine serves.
    pub prefix_len: u8,
    pub gateway: Option<std::net::IpAddr>,
    /// `Some` when the engine runs IPv6: its static address and prefix (if
    /// any) and static default router (if any), told to applications.
    pub ipv6: Option<Ipv6Facts>,
    /// Shards the engine runs: every board gets a ring pair per shard.
    pub shards: u32,
}

/// The engine's IPv6 as applications are told it at attach.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ipv6Facts {
    pub addr: Option<(std::net::Ipv6Addr, u8)>,
    pub gateway: Option<std::net::Ipv6Addr>,
}

struct Shared {
    /// One channel per shard: every shard gets a session of each board.
    txs: Mutex<Vec<Sender<NewSession>>>,
    pending: Vec<AtomicUsize>,
    next_board: std::sync::atomic::AtomicU64,
    doorbell: OwnedFd,
    watch: Mutex<Vec<(UnixStream, Arc<AtomicBool>)>>,
    stop: AtomicBool,
    limits: BoardLimits,
    name: String,
    /// Who besides root and the engine's user may attach.
    access: Access,
    engine_uid: u32,
}

impl Shared {
    fn ring(&self) {
        ring_eventfd(self.doorbell.as_raw_fd());
    }
}

/// A shard's end: new sessions and the doorbell to sleep on.
pub struct AttachInbox {
    rx: Receiver<NewSession>,
    shared: Arc<Shared>,
    shard: usize,
}

impl AttachInbox {
    /// The next new application, if any (one atomic load when none).
    #[inline]
    pub fn try_next(&mut self) -> Option<NewSession> {
        if self.shared.pending[self.shard].load(Ordering::Acquire) == 0 {
            return None;
        }
        let s = self.rx.try_recv().ok()?;
        self.shared.pending[self.shard].fetch_sub(1, Ordering::AcqRel);
        Some(s)
    }
    pub fn doorbell_fd(&self) -> RawFd {
        self.shared.doorbell.as_raw_fd()
    }
    /// Empties the doorbell after a wake-up: true if it had been rung.
    pub fn drain_doorbell(&self) -> bool {
        outboard_board::wake::drain_eventfd(self.shared.doorbell.as_raw_fd())
    }
}

/// The attach thread; dropping it stops the thread and removes the socket.
pub struct AttachServer {
    path: Option<PathBuf>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    listener_fd: Option<RawFd>,
}

#[derive(Debug)]
pub enum AttachError {
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachError::Io(p, e) => write!(f, "board socket {}: {e}", p.display()),
        }
    }
}

/// Largest stream region an application may ask for.
pub const MAX_STREAM_REGION: u32 = 16 << 20;

impl AttachServer {
    /// Starts the attach thread; with `listen`, also the socket
    /// `RUN_DIR/NAME.board` (daemon mode, its mode from `access`); without,
    /// only `attach_local`. One inbox per shard (`limits.shards`): each
    /// board is handed to every shard, which serves its endpoints there.
    pub fn start(name: &str, limits: BoardLimits, listen: bool, access: Access) -> Result<(AttachServer, Vec<AttachInbox>), AttachError> {
        AttachServer::start_with(name, limits, listen, access, TakenAttach::default())
    }

    /// As `start`, listening on `taken` (the board socket handed over by
    /// the engine this one upgrades) instead of binding a new one.
    pub fn start_with(
        name: &str,
        limits: BoardLimits,
        listen: bool,
        access: Access,
        taken: TakenAttach,
    ) -> Result<(AttachServer, Vec<AttachInbox>), AttachError> {
        let path = board_socket_path(name);
        let io_err = |e| AttachError::Io(path.clone(), e);
        let listener = if let Some(l) = taken.listener.filter(|_| listen) {
            l.set_nonblocking(true).map_err(io_err)?;
            Some(l)
        } else if listen {
            let dir = run_dir();
            std::fs::create_dir_all(&dir).map_err(|e| AttachError::Io(dir.clone(), e))?;
            if path.exists() {
                // The control socket already proved the name is ours: a leftover.
                let _ = std::fs::remove_file(&path);
            }
            let l = UnixListener::bind(&path).map_err(io_err)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(access.socket_mode())).map_err(io_err)?;
            l.set_nonblocking(true).map_err(io_err)?;
            Some(l)
        } else {
            None
        };
        let doorbell = match taken.doorbell {
            // Applications attached to the engine this one upgrades ring it.
            Some(d) => d,
            None => outboard_board::wake::new_eventfd().map_err(io_err)?,
        };
        let shards = limits.shards.max(1) as usize;
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..shards).map(|_| mpsc::channel()).unzip();
        let shared = Arc::new(Shared {
            txs: Mutex::new(txs),
            pending: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
            next_board: std::sync::atomic::AtomicU64::new(taken.boards_before),
            doorbell,
            watch: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            limits,
            name: name.to_string(),
            access,
            engine_uid: current_uid(),
        });
        let listener_fd = listener.as_ref().map(|l| l.as_raw_fd());
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("outboard-attach".into())
            .spawn(move || serve(listener, sh))
            .map_err(io_err)?;
        let inboxes = rxs.into_iter().enumerate().map(|(shard, rx)| AttachInbox { rx, shared: shared.clone(), shard }).collect();
        Ok((AttachServer { path: listen.then_some(path), shared, thread: Some(thread), listener_fd }, inboxes))
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The board socket's listening fd (daemon mode), to hand over in an upgrade.
    pub fn listener_fd(&self) -> Option<std::os::fd::RawFd> {
        self.listener_fd
    }

    /// The board socket went to the engine that upgraded this one: stop
    /// accepting on it now, and leave its path to that engine.
    pub fn hand_over(&mut self) {
        self.path = None;
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Watches a board's socket for its application's hang-up (a session
    /// taken over from the engine this one upgraded), as for those attached here.
    pub fn watch(&self, sock: UnixStream, dead: Arc<AtomicBool>) {
        if let Ok(mut w) = self.shared.watch.lock() {
            w.push((sock, dead));
        }
    }

    /// The doorbell applications ring while the shards sleep (handed over in an upgrade).
    pub fn doorbell_fd(&self) -> RawFd {
        self.shared.doorbell.as_raw_fd()
    }

    /// A handle that can make local attachments from another thread.
    pub fn local_attacher(&self) -> LocalAttacher {
        LocalAttacher { shared: self.shared.clone() }
    }
}

/// `AttachServer::attach_local` from anywhere (the embedded engine's API side).
#[derive(Clone)]
pub struct LocalAttacher {
    shared: Arc<Shared>,
}

impl LocalAttacher {
    pub fn attach(&self) -> io::Result<UnixStream> {
        let (app, engine) = UnixStream::pair()?;
        let sh = self.shared.clone();
        std::thread::Builder::new().name("outboard-attach-local".into()).spawn(move || {
            let _ = handshake(&sh, engine);
        })?;
        Ok(app)
    }
}

impl Drop for AttachServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn serve(listener: Option<UnixListener>, sh: Arc<Shared>) {
    while !sh.stop.load(Ordering::Relaxed) {
        // Poll the listener and every attached socket for hang-ups.
        let mut fds = Vec::new();
        if let Some(l) = &listener {
            fds.push(libc::pollfd { fd: l.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        let watched: Vec<(RawFd, Arc<AtomicBool>)> = match sh.watch.lock() {
            Ok(w) => w.iter().map(|(s, d)| (s.as_raw_fd(), d.clone())).collect(),
            Err(_) => return,
        };
        for (fd, _) in &watched {
            // Only hang-ups (always reported): data an application writes must not spin us.
            fds.push(libc::pollfd { fd: *fd, events: libc::POLLRDHUP, revents: 0 });
        }
        // SAFETY: fds is a live array of pollfd of the length given.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) };
        if n <= 0 {
            continue;
        }
        let base = usize::from(listener.is_some());
        let mut gone = Vec::new();
        for (i, (fd, dead)) in watched.iter().enumerate() {
            if fds[base + i].revents != 0 {
                dead.store(true, Ordering::Release);
                gone.push(*fd);
            }
        }
        if !gone.is_empty() {
            if let Ok(mut w) = sh.watch.lock() {
                w.retain(|(s, _)| !gone.contains(&s.as_raw_fd()));
            }
            sh.ring();
        }
        if let Some(l) = &listener {
            if fds[0].revents & libc::POLLIN != 0 {
                while let Ok((stream, _)) = l.accept() {
                    // A slow or hostile client must not hold up the others for long.
                    let _ = handshake(&sh, stream);
                }
            }
        }
    }
}

/// The engine's side of the handshake, then the session goes to the shard.
/// The descriptor an application sent as its wake eventfd, if it is one:
/// anything else (a pipe that could fill and block the engine, a socket) is
/// dropped. Made non-blocking so a full counter can never stall the shard.
fn checked_eventfd(fd: OwnedFd) -> Option<OwnedFd> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    if link.to_str() != Some("anon_inode:[eventfd]") {
        return None;
    }
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return None;
        }
    }
    Some(fd)
}

fn handshake(sh: &Shared, stream: UnixStream) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let (req, fds) = recv_record::<AttachRequest>(&stream)?;
    let mut fds = fds.into_iter();
    let wake = fds.next().and_then(checked_eventfd);
    // Group g's eventfd is the g-th after it: up to the first that is not one.
    let wake_groups: Arc<Vec<OwnedFd>> =
        Arc::new(if wake.is_some() { fds.take(WAKE_SLOTS - 1).map_while(checked_eventfd).collect() } else { Vec::new() });
    let reply = |status: i32, board_bytes: u64, params: BoardParams| AttachReply {
        magic: ATTACH_MAGIC,
        status: status as u32,
        board_bytes,
        params,
        version: VERSION,
        prefix_len: sh.limits.prefix_len,
        _pad: [0; 3],
        engine_addr: NetAddr::from(SocketAddr::new(sh.limits.engine_addr, 0)),
        gateway: NetAddr::from(sh.limits.gateway.map(|g| SocketAddr::new(g, 0))),
        ipv6_flags: if sh.limits.ipv6.is_some() { outboard_board::attach::ipv6::ON } else { 0 },
        prefix_len6: sh.limits.ipv6.and_then(|v| v.addr).map_or(0, |(_, p)| p),
        _pad6: [0; 6],
        engine_addr6: NetAddr::from(sh.limits.ipv6.and_then(|v| v.addr).map(|(a, _)| SocketAddr::new(a.into(), 0))),
        gateway6: NetAddr::from(sh.limits.ipv6.and_then(|v| v.gateway).map(|g| SocketAddr::new(g.into(), 0))),
    };
    let refuse = |errno: i32| {
        let _ = send_record(&stream, &reply(errno, 0, req.params), &[]);
    };
    if req.magic != ATTACH_MAGIC {
        refuse(libc::EPROTO);
        return Ok(());
    }
    // Credentials from the kernel, never from the request.
    let admitted = match PeerCreds::of(&stream) {
        Ok(p) if sh.access.admits(sh.engine_uid, &p) => Some(p.uid),
        Ok(p) => {
            log::event(Level::Warn, "app_refused", &[("pid", &p.pid), ("uid", &p.uid), ("gid", &p.gid), ("why", &"user not admitted")]);
            None
        }
        Err(e) => {
            log::event(Level::Warn, "app_refused", &[("pid", &req.pid), ("why", &format!("no peer credentials: {e}"))]);
            None
        }
    };
    let Some(uid) = admitted else {
        refuse(libc::EACCES);
        return Ok(());
    };
    if req.version != VERSION {
        // An application built for another board layout: refuse it by name
        // (its reply's first bytes are where every version reads them).
        log::event(
            Level::Warn,
            "app_refused",
            &[("pid", &req.pid), ("app_layout_version", &req.version), ("engine_layout_version", &VERSION)],
        );
        refuse(libc::EPROTONOSUPPORT);
        return Ok(());
    }
    // A stream region holds at least one TCP buffer (the window offered in
    // the SYN); an application may ask for more (up to 16 MiB; the window
    // grows into it), rounded up to whole pages.
    let asked = req.params.stream_buffer.clamp(sh.limits.stream_buffer, MAX_STREAM_REGION);
    let params = BoardParams { stream_buffer: asked.div_ceil(4096) * 4096, shards: sh.limits.shards, ..req.params };
    let layout = match BoardLayout::new(params) {
        Ok(l) if l.total <= sh.limits.max_board_bytes => l,
        Ok(_) => {
            refuse(libc::ENOMEM);
            return Ok(());
        }
        Err(_) => {
            refuse(libc::EINVAL);
            return Ok(());
        }
    };
    let (map, memfd) = match Mapping::create_memfd(&format!("outboard-board-{}-{}", sh.name, req.pid), layout.total) {
        Ok(m) => m,
        Err(e) => {
            refuse(e.raw_os_error().unwrap_or(libc::ENOMEM));
            return Ok(());
        }
    };
    map.write(header::MAGIC, MAGIC);
    map.write(header::VERSION, VERSION);
    map.write(header::PARAMS, params);
    map.atomic_u32(header::ENGINE_STATE).store(ENGINE_RUNNING, Ordering::Release);
    let key = random_key();
    map.atomic_u64(header::INHERIT_KEY).store(key, Ordering::Release);
    send_record(&stream, &reply(0, layout.total as u64, params), &[memfd.as_raw_fd(), sh.doorbell.as_raw_fd()])?;
    let memfd = Arc::new(memfd);
    stream.set_read_timeout(None)?;
    let dead = Arc::new(AtomicBool::new(false));
    let watch_copy = stream.try_clone()?;
    let map = Arc::new(map);
    let board = sh.next_board.fetch_add(1, Ordering::Relaxed) + 1;
    let regions = NewSession::all_regions(&layout);
    {
        let txs = sh.txs.lock().map_err(|_| io::Error::other("attach channel poisoned"))?;
        for (shard, tx) in txs.iter().enumerate() {
            let wake = match &wake {
                Some(w) => Some(w.try_clone()?),
                None => None,
            };
            let session = NewSession {
                map: map.clone(),
                layout: layout.clone(),
                sock: stream.try_clone()?,
                pid: req.pid,
                uid,
                key,
                dead: dead.clone(),
                wake,
                wake_groups: wake_groups.clone(),
                board,
                regions: regions.clone(),
                memory: Some(memfd.clone()),
            };
            if tx.send(session).is_err() {
                return Ok(());
            }
            sh.pending[shard].fetch_add(1, Ordering::AcqRel);
        }
    }
    if let Ok(mut w) = sh.watch.lock() {
        w.push((watch_copy, dead));
    }
    sh.ring();
    Ok(())
}

/// A board's inherit key: 64 random bits (the kernel's), never 0.
fn random_key() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    let from_kernel = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_ok();
    if !from_kernel {
        // No /dev/urandom: the clock and a counter (weaker, still unguessable in practice).
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let t = crate::clock::now().as_nanos() ^ N.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed).rotate_left(17);
        b = t.to_le_bytes();
    }
    u64::from_le_bytes(b).max(1)
}
