//! Epoll sets over engine sockets. The kernel's epoll instance holds the
//! program's kernel descriptors (and, while a thread sleeps in it, that
//! thread's wake-up eventfd); the engine sockets' interests live here and
//! are evaluated from the board. Level- and edge-triggered and one-shot
//! interests behave as Linux's: an edge-triggered interest is reported when
//! the engine posted news for the endpoint (or the socket changed state)
//! since it was last reported and it is ready.
//!
//! A wait costs O(ready), not O(interests), as the kernel's epoll does: each
//! set keeps a queue of candidates, and only candidates are looked at.
//! An interest becomes a candidate when
//! - it is added or modified;
//! - the engine posts an event for its endpoint (`Board::take_changed`,
//!   handed out through the shim's endpoint index to every set watching the
//!   socket: see `state::Shim::collect_epoll`);
//! - the shim changes the socket's own state (`Sock::bump`: shutdown,
//!   listen, a connect completing), through the set's inbox.
//!
//! It stays one while it is reported level-triggered (Linux re-reports a
//! ready level-triggered descriptor on every wait). Sockets without an
//! engine endpoint that posts events (not yet bound or connected, a connect
//! in progress, datagram sockets, whose send space is board-wide) stay
//! candidates always: they are few in the programs the shim serves.

use crate::sock::Sock;
use outboard_api::Board;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::os::fd::RawFd;
use std::rc::Rc;

/// The `data` our wake-up eventfds carry in the kernel's epoll instance (filtered out of results).
pub const WAKE_TOKEN: u64 = 0x0B0A_2D5E_1F00_D00D;

/// Descriptors of a set whose sockets changed (pushed by `Sock::bump` and
/// by the shim handing out engine events; sockets hold it weakly), taken at
/// the set's next wait. A set: a set nobody waits on stays bounded.
#[derive(Default)]
pub struct Inbox(RefCell<HashSet<RawFd, outboard_wire::flowhash::FlowState>>);

impl Inbox {
    pub fn push(&self, fd: RawFd) {
        if let Ok(mut v) = self.0.try_borrow_mut() {
            v.insert(fd);
        }
    }
}

pub struct Interest {
    pub sock: Rc<RefCell<Sock>>,
    pub events: u32,
    pub data: u64,
    /// `news_key` when last reported (edge-triggered).
    last_key: Option<u64>,
    /// A one-shot interest that fired (until EPOLL_CTL_MOD re-arms it).
    disarmed: bool,
    /// Names this registration in the queue (a descriptor deleted and
    /// added again is a new registration: old queue entries go stale).
    id: u64,
    /// On the queue now.
    queued: bool,
    /// The wait (`EpollSet::wait_no`) that last reported it.
    reported: u64,
    /// The endpoint last handed to the shim's endpoint index for it.
    indexed: Option<u32>,
    /// Its endpoint is in the set's wake group.
    grouped: bool,
}

#[derive(Default)]
pub struct EpollSet {
    pub interests: BTreeMap<RawFd, Interest>,
    /// The set's wake group (1 to `WAKE_SLOTS - 1`, given round robin; 0:
    /// none), and how many interests are not in it. While every interest
    /// is, a thread sleeps in the group's slot and is woken only for its
    /// own endpoints (and endpoints in no group); else in the shared slot,
    /// for every event of the board.
    pub group: u8,
    ungrouped: usize,
    /// Thread eventfds already added to the kernel's instance.
    pub wake_fds: Vec<RawFd>,
    inbox: Rc<Inbox>,
    /// Candidates (descriptor, registration id), each interest at most once.
    queue: VecDeque<(RawFd, u64)>,
    next_id: u64,
    wait_no: u64,
    gone_seen: bool,
    /// Reused by `absorb_inbox` (no allocation per wait).
    scratch: Vec<RawFd>,
}

impl EpollSet {
    /// A new set in wake group `group`.
    pub fn in_group(group: u8) -> EpollSet {
        EpollSet { group, ..EpollSet::default() }
    }

    /// The wake slot a thread sleeps in for this set (see `group`).
    pub fn wake_slot(&self) -> usize {
        if self.ungrouped == 0 {
            usize::from(self.group)
        } else {
            0
        }
    }

    /// EPOLL_CTL_ADD of an engine socket.
    pub fn add(&mut self, fd: RawFd, sock: Rc<RefCell<Sock>>, events: u32, data: u64) -> Result<(), i32> {
        if self.interests.contains_key(&fd) {
            return Err(libc::EEXIST);
        }
        {
            let mut s = sock.borrow_mut();
            s.watchers.retain(|(w, _)| w.strong_count() > 0); // sets closed since
            s.watchers.push((Rc::downgrade(&self.inbox), fd));
        }
        self.next_id += 1;
        let id = self.next_id;
        self.interests.insert(fd, Interest { sock, events, data, last_key: None, disarmed: false, id, queued: false, reported: 0, indexed: None, grouped: false });
        self.ungrouped += 1;
        self.enqueue(fd);
        Ok(())
    }

    /// EPOLL_CTL_MOD: new events and data; re-arms a one-shot interest.
    pub fn modify(&mut self, fd: RawFd, events: u32, data: u64) -> Result<(), i32> {
        let i = self.interests.get_mut(&fd).ok_or(libc::ENOENT)?;
        i.events = events;
        i.data = data;
        i.last_key = None;
        i.disarmed = false;
        self.enqueue(fd);
        Ok(())
    }

    /// EPOLL_CTL_DEL (and a closed descriptor): the interest, if there was one.
    pub fn remove(&mut self, fd: RawFd) -> Option<Interest> {
        let i = self.interests.remove(&fd)?;
        if !i.grouped {
            self.ungrouped -= 1;
        }
        if let Ok(mut s) = i.sock.try_borrow_mut() {
            let me = Rc::as_ptr(&self.inbox);
            s.watchers.retain(|(w, f)| !(*f == fd && w.as_ptr() == me));
        }
        Some(i)
    }

    /// Makes `fd`'s interest (if any) a candidate, looked at first.
    pub fn enqueue(&mut self, fd: RawFd) {
        if let Some(i) = self.interests.get_mut(&fd) {
            if !i.queued {
                i.queued = true;
                self.queue.push_front((fd, i.id));
            }
        }
        if self.queue.len() > 2 * self.interests.len() + 64 {
            // Entries of deleted interests pile up in a set nobody waits on: drop them.
            let interests = &self.interests;
            self.queue.retain(|(fd, id)| interests.get(fd).is_some_and(|i| i.id == *id && i.queued));
        }
    }

    /// The engine died: every interest is a candidate once more (each
    /// engine socket now polls as failed). Once per set.
    pub fn engine_gone(&mut self) {
        if self.gone_seen {
            return;
        }
        self.gone_seen = true;
        let fds: Vec<RawFd> = self.interests.keys().copied().collect();
        for fd in fds {
            self.enqueue(fd);
        }
    }

    /// Starts a wait: its `collect` calls report each interest at most once.
    pub fn begin_wait(&mut self) {
        self.wait_no += 1;
    }

    /// Moves what the inbox holds onto the queue; true if anything was new.
    pub fn absorb_inbox(&mut self) -> bool {
        let before = self.queue.len();
        let mut fds = std::mem::take(&mut self.scratch);
        fds.extend(self.inbox.0.borrow_mut().drain());
        for &fd in &fds {
            self.enqueue(fd);
        }
        fds.clear();
        self.scratch = fds;
        self.queue.len() > before
    }

    /// Looks at the candidates (each once per call) and appends the ready
    /// ones to `out` (at most `max` in all; none twice in one wait). Pushes
    /// onto `seen_eps` the engine endpoints of the sockets looked at, the
    /// first time each interest sees its socket on one, for the shim's
    /// endpoint index.
    pub fn collect(&mut self, board: Option<&Board>, out: &mut Vec<libc::epoll_event>, max: usize, seen_eps: &mut Vec<(u32, Rc<RefCell<Sock>>)>) {
        for _ in 0..self.queue.len() {
            if out.len() >= max {
                break;
            }
            let Some((fd, id)) = self.queue.pop_front() else { break };
            let Some(i) = self.interests.get_mut(&fd).filter(|i| i.id == id && i.queued) else {
                continue; // stale: deleted, or added again since
            };
            if i.reported == self.wait_no {
                self.queue.push_back((fd, id)); // in `out` already
                continue;
            }
            let (reported, requeue, ep) = report(i, board, out);
            if reported {
                i.reported = self.wait_no;
            }
            if let Some(e) = ep.filter(|_| ep != i.indexed) {
                i.indexed = ep;
                seen_eps.push((e, i.sock.clone()));
                if !i.grouped && join_group(i, e, self.group, board) {
                    i.grouped = true;
                    self.ungrouped -= 1;
                }
            }
            if requeue {
                self.queue.push_back((fd, id));
            } else {
                i.queued = false;
            }
        }
    }
}

/// Puts `i`'s endpoint `ep` in wake group `group` unless the socket's is in
/// another already (a socket in two sets: it stays there, and this set
/// sleeps in the shared slot). Whether it is in `group` now.
fn join_group(i: &mut Interest, ep: u32, group: u8, board: Option<&Board>) -> bool {
    let Some(board) = board.filter(|_| group != 0 && crate::wait::slot_fd(usize::from(group)) >= 0) else { return false };
    let mut s = i.sock.borrow_mut();
    match s.wake_group {
        Some((e, g)) if e == ep => g == group,
        _ => {
            let joined = board.set_wake_group(ep, group).is_ok();
            if joined {
                s.wake_group = Some((ep, group));
            }
            joined
        }
    }
}

/// Adds `i` to `out` if it is to be reported now. Returns whether it was,
/// whether it stays a candidate, and its socket's engine endpoint if that
/// endpoint posts events for every change (a listener or a stream).
fn report(i: &mut Interest, board: Option<&Board>, out: &mut Vec<libc::epoll_event>) -> (bool, bool, Option<u32>) {
    let mut s = i.sock.borrow_mut();
    let bits = if i.disarmed { 0 } else { s.poll_bits(board) as u16 as u32 };
    let ep = s.evented_endpoint();
    let always = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
    let bits = bits & (i.events | always);
    let mut reported = false;
    if bits != 0 {
        let fresh = if i.events & libc::EPOLLET as u32 != 0 {
            let key = s.news_key(board, i.events);
            let fresh = i.last_key != Some(key);
            i.last_key = Some(key);
            fresh
        } else {
            true
        };
        if fresh {
            if i.events & libc::EPOLLONESHOT as u32 != 0 {
                i.disarmed = true;
            }
            out.push(libc::epoll_event { events: bits, u64: i.data });
            reported = true;
        }
    }
    let level = i.events & (libc::EPOLLET | libc::EPOLLONESHOT) as u32 == 0;
    let requeue = ep.is_none() || (reported && level);
    (reported, requeue, ep)
}
