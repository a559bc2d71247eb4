//! Epoll sets over engine sockets. The kernel's epoll instance holds the
//! program's kernel descriptors (and, while a thread sleeps in it, that
//! thread's wake-up eventfd); the engine sockets' interests live here and
//! are evaluated from the board. Level- and edge-triggered and one-shot
//! interests behave as Linux's: an edge-triggered interest is reported when
//! the engine posted news for the endpoint (or the socket changed state)
//! since it was last reported and it is ready.

use crate::sock::Sock;
use outboard_api::Board;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::rc::Rc;

/// The `data` our wake-up eventfds carry in the kernel's epoll set (filtered out of results).
pub const WAKE_TOKEN: u64 = 0x0B0A_2D5E_1F00_D00D;

pub struct Interest {
    pub sock: Rc<RefCell<Sock>>,
    pub events: u32,
    pub data: u64,
    /// `news_key` when last reported (edge-triggered).
    pub last_key: Option<u64>,
    /// A one-shot interest that fired (until EPOLL_CTL_MOD re-arms it).
    pub disarmed: bool,
}

#[derive(Default)]
pub struct EpollSet {
    pub interests: BTreeMap<RawFd, Interest>,
    /// Thread eventfds already added to the kernel's instance.
    pub wake_fds: Vec<RawFd>,
    /// Where the next scan starts (fairness when more are ready than fit).
    cursor: RawFd,
}

impl EpollSet {
    /// Appends ready engine interests to `out` (at most `max` in all),
    /// starting where the last call stopped so none waits forever.
    pub fn collect(&mut self, board: Option<&Board>, out: &mut Vec<libc::epoll_event>, max: usize) {
        let start = self.cursor;
        let mut stop = None;
        for (&fd, i) in self.interests.range_mut(start..) {
            if !report(i, board, out, max) {
                stop = Some(fd);
                break;
            }
        }
        if stop.is_none() {
            for (&fd, i) in self.interests.range_mut(..start) {
                if !report(i, board, out, max) {
                    stop = Some(fd);
                    break;
                }
            }
        }
        self.cursor = stop.unwrap_or(0);
    }
}

/// Adds `i` to `out` if it is to be reported now; false when `out` is full.
fn report(i: &mut Interest, board: Option<&Board>, out: &mut Vec<libc::epoll_event>, max: usize) -> bool {
    if out.len() >= max {
        return false;
    }
    if i.disarmed {
        return true;
    }
    let mut s = i.sock.borrow_mut();
    let always = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
    let bits = (s.poll_bits(board) as u16 as u32) & (i.events | always);
    if bits == 0 {
        return true;
    }
    if i.events & libc::EPOLLET as u32 != 0 {
        let key = s.news_key(board);
        if i.last_key == Some(key) {
            return true;
        }
        i.last_key = Some(key);
    }
    if i.events & libc::EPOLLONESHOT as u32 != 0 {
        i.disarmed = true;
    }
    out.push(libc::epoll_event { events: bits, u64: i.data });
    true
}
