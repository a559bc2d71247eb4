//! The control socket: how `outboard stat` reaches a running engine.
//!
//! Each engine has a name (`--name`, default `default`) and listens on the
//! Unix socket `RUN_DIR/NAME.sock`. `RUN_DIR` is `$OUTBOARD_RUN_DIR` if set,
//! else `/run/outboard` when writable (root), else
//! `$XDG_RUNTIME_DIR/outboard`, else `/tmp/outboard-$USER`. The socket lives
//! in the filesystem, not the abstract namespace, so `stat` works from any
//! network namespace (lab engines run inside one).
//!
//! A small thread accepts connections, reads one request line (`stat`),
//! hands it to every shard through a channel each, rings each shard's
//! doorbell (one byte on a socket pair the shard sleeps on), and writes the
//! answer back: with several shards, their snapshots merged into one
//! (`Snapshot::merge`: sums, with a row per shard). The shard never blocks on a client: it answers between two turns.
//! A second engine with the same name finds the socket alive and stops with
//! "name taken"; a socket left by a dead engine is replaced.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

/// Where control sockets live (the board crate's, which applications use
/// to find a daemon's board socket too).
pub use outboard_board::attach::run_dir;

pub fn socket_path(name: &str) -> PathBuf {
    run_dir().join(format!("{name}.sock"))
}

#[derive(Debug)]
pub enum ControlError {
    /// Another live engine uses this name.
    NameTaken(PathBuf),
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::NameTaken(p) => write!(
                f,
                "engine name taken: an engine is running with control socket {} (pick another --name, or stop that engine)",
                p.display()
            ),
            ControlError::Io(p, e) => write!(f, "control socket {}: {e}", p.display()),
        }
    }
}

/// A request from a control client, with where to send the answer.
pub struct Request {
    pub line: String,
    pub reply: Sender<String>,
    /// `upgrade`: where the shard sends its offer and learns the outcome.
    pub upgrade: Option<crate::upgrade::ShardSide>,
}

/// The shard's side: requests to answer and the doorbell fd to sleep on.
pub struct ControlInbox {
    rx: Receiver<Request>,
    bell: UnixStream,
}

impl ControlInbox {
    /// The fd that becomes readable when a request is waiting.
    pub fn doorbell_fd(&self) -> RawFd {
        self.bell.as_raw_fd()
    }

    /// Next request, if any (never blocks). Drains the doorbell.
    pub fn try_next(&mut self) -> Option<Request> {
        let r = self.rx.try_recv().ok();
        if r.is_some() {
            let mut b = [0u8; 64];
            let _ = (&self.bell).read(&mut b);
        }
        r
    }
}

/// The listening side; dropping it stops the thread and removes the socket.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    /// Set once the socket went to the engine that upgraded this one: the
    /// path is then that engine's and stays.
    handed: Arc<AtomicBool>,
    /// The board socket's listening fd, handed over with the control socket.
    board_fd: Arc<std::sync::Mutex<Option<RawFd>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlServer {
    pub fn bind(name: &str) -> Result<(ControlServer, ControlInbox), ControlError> {
        let (server, mut inboxes) = ControlServer::bind_shards(name, 1)?;
        Ok((server, inboxes.remove(0)))
    }

    /// The control socket of an engine of `shards` shards: one inbox each.
    pub fn bind_shards(name: &str, shards: usize) -> Result<(ControlServer, Vec<ControlInbox>), ControlError> {
        ControlServer::with_listener(name, ControlServer::bind_listener(name)?, shards)
    }

    /// Binds the control socket's name and nothing more (no thread, no
    /// inbox): what an engine prepared before its process drops privileges
    /// holds until it starts (`Engine::prepare`).
    pub fn bind_listener(name: &str) -> Result<UnixListener, ControlError> {
        let dir = run_dir();
        std::fs::create_dir_all(&dir).map_err(|e| ControlError::Io(dir.clone(), e))?;
        let path = dir.join(format!("{name}.sock"));
        if path.exists() {
            // Taken when an engine answers there, or when the socket is
            // another user's: its engine may well be alive, and this user
            // could not remove the file anyway (binding would say "address
            // in use", naming no one).
            let taken = match UnixStream::connect(&path) {
                Ok(_) => true,
                Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
            };
            if taken {
                return Err(ControlError::NameTaken(path));
            }
            // Left by an engine that died: take it over.
            let _ = std::fs::remove_file(&path);
        }
        UnixListener::bind(&path).map_err(|e| ControlError::Io(path, e))
    }

    /// The control socket handed over by the engine this one upgrades (the
    /// same listening socket: clients waiting in its backlog are served here).
    pub fn with_listener(name: &str, listener: UnixListener, shards: usize) -> Result<(ControlServer, Vec<ControlInbox>), ControlError> {
        let path = socket_path(name);
        listener.set_nonblocking(true).map_err(|e| ControlError::Io(path.clone(), e))?;
        let mut shard_ends = Vec::new();
        let mut inboxes = Vec::new();
        for _ in 0..shards.max(1) {
            let (bell_tx, bell_rx) = UnixStream::pair().map_err(|e| ControlError::Io(path.clone(), e))?;
            bell_rx.set_nonblocking(true).map_err(|e| ControlError::Io(path.clone(), e))?;
            bell_tx.set_nonblocking(true).map_err(|e| ControlError::Io(path.clone(), e))?;
            let (tx, rx) = mpsc::channel();
            shard_ends.push((tx, bell_tx));
            inboxes.push(ControlInbox { rx, bell: bell_rx });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let handed = Arc::new(AtomicBool::new(false));
        let board_fd = Arc::new(std::sync::Mutex::new(None));
        let ctx = Ctx { stop: stop.clone(), handed: handed.clone(), board_fd: board_fd.clone() };
        let thread = std::thread::Builder::new()
            .name("outboard-control".into())
            .spawn(move || serve(listener, shard_ends, ctx))
            .map_err(|e| ControlError::Io(path.clone(), e))?;
        Ok((ControlServer { path, stop, handed, board_fd, thread: Some(thread) }, inboxes))
    }

    /// The board socket's listening fd, to hand over in an upgrade beside the control socket's.
    pub fn set_board_listener(&self, fd: RawFd) {
        *self.board_fd.lock().unwrap_or_else(|p| p.into_inner()) = Some(fd);
    }

    /// Whether this engine's sockets went to an engine that upgraded it.
    pub fn handed_over(&self) -> bool {
        self.handed.load(Ordering::SeqCst)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if !self.handed.load(Ordering::SeqCst) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What the control thread shares with its server.
struct Ctx {
    stop: Arc<AtomicBool>,
    handed: Arc<AtomicBool>,
    board_fd: Arc<std::sync::Mutex<Option<RawFd>>>,
}

fn serve(listener: UnixListener, shards: Vec<(Sender<Request>, UnixStream)>, ctx: Ctx) {
    while !ctx.stop.load(Ordering::Relaxed) && !ctx.handed.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = handle(stream, &shards, &listener, &ctx);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn handle(
    stream: UnixStream,
    shards: &[(Sender<Request>, UnixStream)],
    listener: &UnixListener,
    ctx: &Ctx,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    // One byte at a time: an upgrade's descriptors follow its line on this socket.
    (&stream).take(4096).read_line_unbuffered(&mut line)?;
    if line.trim_start().starts_with("upgrade") {
        let board = *ctx.board_fd.lock().unwrap_or_else(|p| p.into_inner());
        let mut fds = vec![listener.as_raw_fd()];
        fds.extend(board);
        let handed = crate::upgrade::serve(&stream, line.trim(), shards, &fds)?;
        if handed {
            ctx.handed.store(true, Ordering::SeqCst);
        }
        return Ok(());
    }
    // Handler commands go to shard 0, which runs the message service.
    let shards = if line.trim_start().starts_with("handler ") { &shards[..1] } else { shards };
    let mut pending = Vec::new();
    for (tx, bell) in shards {
        let (rtx, rrx) = mpsc::channel();
        if tx.send(Request { line: line.trim().to_string(), reply: rtx, upgrade: None }).is_err() {
            return Ok(());
        }
        let _ = (&*bell).write(&[1]);
        pending.push(rrx);
    }
    let deadline = crate::clock::now() + Duration::from_secs(5);
    let answers: Vec<String> = pending
        .iter()
        .enumerate()
        .map(|(i, rrx)| {
            let left = deadline.saturating_duration_since(crate::clock::now());
            rrx.recv_timeout(left)
                .unwrap_or_else(|_| format!("{{\"error\":\"shard {i} of the engine did not answer within 5 s\"}}"))
        })
        .collect();
    (&stream).write_all(merge_answers(answers).as_bytes())
}

/// One answer from the shards' answers: their snapshots merged, or the
/// first answer that is not a snapshot (an error).
fn merge_answers(mut answers: Vec<String>) -> String {
    if answers.len() == 1 {
        return answers.remove(0);
    }
    let mut snaps = Vec::new();
    for a in &answers {
        match crate::stat::parse(a) {
            Ok(s) => snaps.push(s),
            Err(e) => return e,
        }
    }
    let merged = crate::stat::Snapshot::merge(snaps);
    serde_json::to_string(&merged).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Reading a line without reading ahead (what follows may come with descriptors).
trait ReadLineUnbuffered {
    fn read_line_unbuffered(&mut self, line: &mut String) -> std::io::Result<usize>;
}

impl<R: Read> ReadLineUnbuffered for R {
    fn read_line_unbuffered(&mut self, line: &mut String) -> std::io::Result<usize> {
        let mut bytes = Vec::new();
        let mut b = [0u8; 1];
        loop {
            match self.read(&mut b)? {
                0 => break,
                _ if b[0] == b'\n' => break,
                _ => bytes.push(b[0]),
            }
        }
        line.push_str(&String::from_utf8_lossy(&bytes));
        Ok(bytes.len())
    }
}

/// The client side (`outboard stat`): sends `request`, returns the answer.
pub fn query(name: &str, request: &str) -> Result<String, String> {
    let path = socket_path(name);
    let mut s = UnixStream::connect(&path).map_err(|e| {
        format!(
            "no engine named {name:?} is running ({}: {e}); start one with `outboard engine --name {name} ...`, or set OUTBOARD_RUN_DIR as the engine had it",
            path.display()
        )
    })?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    s.write_all(format!("{request}\n").as_bytes()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| format!("reading the answer: {e}"))?;
    Ok(out)
}
