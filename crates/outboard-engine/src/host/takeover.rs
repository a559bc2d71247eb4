//! Attached applications across a live upgrade (`crate::upgrade`): the old
//! engine's host writes its boards' sessions and listener groups and hands
//! on each board's memfd, the application's socket, its wake eventfd and
//! its wake groups' eventfds, and the doorbell applications ring; the new
//! engine's host maps the same boards, builds the same sessions (their
//! endpoints in the same wake groups), opens the same listeners and gives
//! each stream its connection back in the same board regions. The
//! application notices nothing: its board, socket, rings and endpoint ids
//! are unchanged, and its shim or library never learns that the engine
//! process changed.
//!
//! On an engine of several shards every board has a session on every
//! shard: each shard writes its sessions and listener groups, shard 0 hands
//! on the descriptors, and the new engine maps each board once for all its
//! shards' sessions.
//!
//! Datagram sockets are handed over as their stack sockets' settings (the
//! new engine binds the same ports again) and their mailboxes' positions.
//!
//! Not handed over yet (the upgrade is refused with the reason, the old
//! engine serving on): message mailboxes and handlers an application
//! loaded (the message service is not handed over). Passing states (events
//! waiting for room in a full event ring, a board detaching, a listener
//! lingering for a forked child, a stream waiting for its child to adopt
//! it, datagrams the stack still queues for a datagram socket) answer
//! "busy" and the new engine asks again.

use super::listeners::GroupRecord;
use super::session::{Session, SessionRecord};
use super::{tag, Host, NewSession};
use crate::app::AppCx;
use crate::upgrade::{Holder, LentPlaces, TcpRecord};
use outboard_board::layout::{CLASS_STREAM, WAKE_SLOTS};
use outboard_board::{BoardLayout, BufRef, FreeList, Mapping};
use outboard_stack::ConnId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// The host's part of a shard's record.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BoardsRecord {
    pub sessions: Vec<SessionRecord>,
    pub groups: Vec<GroupRecord>,
}

/// What the old host hands over: its record, its descriptors (named as the
/// record's `fds` names them), and which connection is which board stream.
pub struct BoardsExport {
    pub record: BoardsRecord,
    pub fds: Vec<(String, RawFd)>,
    pub streams: HashMap<ConnId, (u64, u32)>,
}

/// A board's descriptor names in the record.
pub fn fd_name(board: u64, what: &str) -> String {
    format!("board {board} {what}")
}
pub const DOORBELL_FD: &str = "board doorbell";

/// The name board `board`'s wake group `g`'s eventfd is handed over under.
fn group_fd_name(board: u64, g: usize) -> String {
    fd_name(board, &format!("wake group {g}"))
}

impl Host {
    /// The host's record, or why its applications cannot be handed over now.
    /// Shard 0's host hands on the boards' descriptors (every board has a
    /// session on every shard; the others' sessions name the same boards).
    pub fn export(&self, stack: &outboard_stack::Stack) -> Result<BoardsExport, String> {
        if self.sessions.is_empty() {
            return Ok(BoardsExport { record: BoardsRecord::default(), fds: Vec::new(), streams: HashMap::new() });
        }
        if !self.handover.orphans.is_empty() || !self.handover.adopts.is_empty() {
            return Err("busy: a stream waits for a forked child to adopt it; try again".into());
        }
        if let Some(svc) = &self.messages {
            let svc = svc.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(s) = self.sessions.iter().find(|s| svc.has_handlers_of(s.id)) {
                return Err(format!(
                    "application {} (pid {}) has loaded a handler: the message service and its handlers are not handed over",
                    s.id, s.pid
                ));
            }
        }
        let groups = self.listeners.export(stack)?;
        let group_of = |lid| groups.iter().position(|(l, _)| *l == lid);
        let first = self.shard == 0;
        let mut fds = Vec::new();
        if let (true, Some(inbox)) = (first, &self.inbox) {
            fds.push((DOORBELL_FD.to_string(), inbox.doorbell_fd()));
        }
        let mut sessions = Vec::new();
        let mut streams = HashMap::new();
        for s in &self.sessions {
            let r = s.export(stack, group_of)?;
            let Some(h) = s.handover_fds() else {
                return Err(format!("application {} has no board memory descriptor to hand over", s.id));
            };
            if first {
                fds.push((fd_name(s.id, "memory"), h.memory));
                fds.push((fd_name(s.id, "socket"), h.sock));
                if let Some(w) = h.wake {
                    fds.push((fd_name(s.id, "wake"), w));
                }
                for (i, g) in h.wake_groups.into_iter().enumerate() {
                    fds.push((group_fd_name(s.id, i + 1), g));
                }
            }
            for (ep, conn) in s.stream_conns() {
                streams.insert(conn, (s.id, ep));
            }
            sessions.push(r);
        }
        Ok(BoardsExport { record: BoardsRecord { sessions, groups: groups.into_iter().map(|(_, g)| g).collect() }, fds, streams })
    }

    /// Builds the old engine's sessions of this shard here, on the boards
    /// `boards` opened again, and gives back every connection of `tcp` (this
    /// shard's) whose bytes live in a board: those held by a board's stream,
    /// and those released whose rings are still in a board's regions.
    /// Writes nothing to any board.
    pub fn import(&mut self, cx: &mut AppCx<'_>, r: BoardsRecord, boards: &HashMap<u64, OpenBoard>, tcp: Vec<TcpRecord>) -> Result<(), String> {
        let lids = self.listeners.import(cx.stack, &r.groups)?;
        for sr in &r.sessions {
            let what = |e: String| format!("application {} (pid {}): {e}", sr.id, sr.pid);
            let b = boards.get(&sr.id).ok_or_else(|| what("its board was not handed over".into()))?;
            let n = b.session(sr).map_err(|e| what(format!("its descriptors: {e}")))?;
            let s = Session::import(self.shard, sr, n, cx.stack, |g| lids.get(g).copied()).map_err(what)?;
            self.next_id = self.next_id.max(sr.id);
            self.sessions.push(s);
        }
        for t in tcp {
            self.adopt_board_connection(cx, t)?;
        }
        for s in &self.sessions {
            if let Some(ep) = s.unbound_streams().first() {
                return Err(format!("application {}: stream endpoint {ep} has no connection in the record", s.id));
            }
        }
        Ok(())
    }

    /// One connection whose rings live in a board: bound to the same regions again, in the stack, and
    /// (held) given back to its stream.
    fn adopt_board_connection(&mut self, cx: &mut AppCx<'_>, t: TcpRecord) -> Result<(), String> {
        let mut conn = t.conn;
        let tuple = conn.tuple();
        let what = |e: String| format!("handed-over connection {} - {}: {e}", tuple.local, tuple.remote);
        let places = t.lent.unwrap_or_default();
        let storage = |place: Option<(u64, u64)>| -> Result<Option<Box<dyn outboard_tcp::RingStorage>>, String> {
            let Some((board, offset)) = place else { return Ok(None) };
            let s = self.sessions.iter().find(|s| s.id == board).ok_or_else(|| format!("its rings are in board {board}, not handed over"))?;
            let a = &s.layout().arena;
            let b = a
                .locate(offset, 0)
                .filter(|b| b.class == CLASS_STREAM && a.offset_of(*b) as u64 == offset)
                .ok_or_else(|| format!("no stream region starts at {offset:#x}"))?;
            let (off, size) = (a.offset_of(b), a.size_of(b));
            Ok(Some(Box::new(super::region::BoardRegion::new(board, s.map.clone(), b, off, size, s.regions()))))
        };
        let send = storage(places.send).map_err(what)?;
        let recv = storage(places.recv).map_err(what)?;
        conn.rebind_lent(send, recv).map_err(what)?;
        conn.check_restored().map_err(what)?;
        let held = matches!(t.holder, Holder::Board { .. });
        let id = cx.stack.tcp_adopt(conn, held).map_err(|e| what(format!("{e:?}")))?;
        if let Holder::Board { session, ep } = t.holder {
            let s = self.sessions.iter_mut().find(|s| s.id == session).ok_or_else(|| what(format!("held by board {session}, not handed over")))?;
            s.bind_stream(ep, id).map_err(what)?;
            cx.claim(id, tag(session, ep));
        }
        Ok(())
    }
}

/// A board of the engine being upgraded, mapped again by the new one: what
/// its sessions on every shard share.
pub struct OpenBoard {
    map: Arc<Mapping>,
    layout: BoardLayout,
    sock: UnixStream,
    wake: Option<OwnedFd>,
    /// Its wake groups' eventfds (shared by its sessions on every shard, as at attach).
    wake_groups: Arc<Vec<OwnedFd>>,
    dead: Arc<AtomicBool>,
    regions: Arc<Mutex<FreeList>>,
    memory: Arc<OwnedFd>,
}

impl OpenBoard {
    /// The attach thread watches this for the application's hang-up.
    pub fn watch(&self) -> std::io::Result<(UnixStream, Arc<AtomicBool>)> {
        Ok((self.sock.try_clone()?, self.dead.clone()))
    }

    fn session(&self, sr: &SessionRecord) -> std::io::Result<NewSession> {
        Ok(NewSession {
            map: self.map.clone(),
            layout: self.layout.clone(),
            sock: self.sock.try_clone()?,
            pid: sr.pid,
            uid: sr.uid,
            key: sr.key,
            dead: self.dead.clone(),
            wake: self.wake.as_ref().map(|w| w.try_clone()).transpose()?,
            wake_groups: self.wake_groups.clone(),
            board: sr.id,
            regions: self.regions.clone(),
            memory: Some(self.memory.clone()),
        })
    }
}

/// Maps again every board shard 0's record names (every board has a
/// session on every shard), from the descriptors `take_fd` gives by name;
/// each board's free stream regions are those no connection of `tcp` (every
/// shard's) has its rings in.
pub fn open_boards(
    r0: &BoardsRecord,
    mut take_fd: impl FnMut(&str) -> Option<OwnedFd>,
    tcp: &[&TcpRecord],
) -> Result<HashMap<u64, OpenBoard>, String> {
    let mut used: HashMap<u64, Vec<u64>> = HashMap::new();
    for t in tcp {
        for (board, offset) in t.lent.iter().flat_map(|l| [l.send, l.recv]).flatten() {
            used.entry(board).or_default().push(offset);
        }
    }
    let mut out = HashMap::new();
    for sr in &r0.sessions {
        let what = |e: String| format!("application {} (pid {}): {e}", sr.id, sr.pid);
        let params = super::session::params_from(&sr.params);
        let layout = BoardLayout::new(params).map_err(|e| what(format!("board layout: {e:?}")))?;
        let memory = take_fd(&fd_name(sr.id, "memory")).ok_or_else(|| what("no board memory descriptor".into()))?;
        let sock = take_fd(&fd_name(sr.id, "socket")).ok_or_else(|| what("no socket descriptor".into()))?;
        let wake = take_fd(&fd_name(sr.id, "wake"));
        // Group g's is the g-th: up to the first not handed over (an engine
        // before groups were handed on gave none; `Session::ring_wake` then
        // wakes their sleepers through the shared eventfd).
        let wake_groups = Arc::new((1..WAKE_SLOTS).map_while(|g| take_fd(&group_fd_name(sr.id, g))).collect());
        let map = Mapping::map_fd(memory.as_raw_fd(), layout.total).map_err(|e| what(format!("mapping its board: {e}")))?;
        let a = &layout.arena;
        let streams = a.classes[CLASS_STREAM as usize].count;
        let in_use: Vec<u32> = used
            .get(&sr.id)
            .into_iter()
            .flatten()
            .filter_map(|&off| a.locate(off, 0).filter(|b| b.class == CLASS_STREAM && a.offset_of(*b) as u64 == off).map(|b| b.index))
            .collect();
        let free = FreeList::new((0..streams).filter(|i| !in_use.contains(i)).map(|index| BufRef { class: CLASS_STREAM, index }));
        out.insert(
            sr.id,
            OpenBoard {
                map: Arc::new(map),
                layout,
                sock: UnixStream::from(sock),
                wake,
                wake_groups,
                dead: Arc::new(AtomicBool::new(false)),
                regions: Arc::new(Mutex::new(free)),
                memory: Arc::new(memory),
            },
        );
    }
    Ok(out)
}

impl TcpRecord {
    /// Whether the new engine's host takes this connection (its bytes are in a board).
    pub fn in_board(&self) -> bool {
        matches!(self.holder, Holder::Board { .. }) || self.lent.as_ref().is_some_and(|l: &LentPlaces| l.send.is_some() || l.recv.is_some())
    }
}
