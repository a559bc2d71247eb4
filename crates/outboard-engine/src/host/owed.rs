//! Wake-ups a turn owes applications, issued after the engine is let go.
//!
//! An engine shared by its own thread and the program's threads (the socket
//! shim's in-process engine) runs each turn holding the engine's lock. A
//! wake-up issued in the middle of that turn often hands the core to the
//! woken thread at once (the scheduler puts a wakee beside its waker and
//! lets it preempt): the program reads its request, answers, and finds the
//! engine taken by the preempted holder, so its answer waits until that
//! thread gets the core back (sockperf at 1,000 requests/s on 2 vCPUs: tens
//! of microseconds a request). With [`Host::defer_wakes`](super::Host) the
//! turn publishes its events (the condition's word moves, so a thread not
//! yet asleep sees them) but queues the futex wakes and eventfd writes
//! here; whoever ran the turn issues them once the lock is dropped.

use outboard_board::Condition;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// One wake-up owed: the board's event condition's sleepers, or an eventfd
/// an application's threads sleep on in poll/epoll. Each holds its own
/// reference, so it stays valid when the board detaches meanwhile.
enum Owed {
    Sleepers(Condition),
    EventFd(Arc<OwnedFd>),
    Group(Arc<Vec<OwnedFd>>, usize),
}

/// The wake-ups owed by the turns since the last [`OwedWakes::issue`].
#[derive(Default)]
pub struct OwedWakes(Vec<Owed>);

impl OwedWakes {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub(crate) fn sleepers(&mut self, cond: &Condition) {
        self.0.push(Owed::Sleepers(cond.clone()));
    }
    pub(crate) fn eventfd(&mut self, fd: &Arc<OwnedFd>) {
        self.0.push(Owed::EventFd(fd.clone()));
    }
    pub(crate) fn group(&mut self, fds: &Arc<Vec<OwnedFd>>, index: usize) {
        self.0.push(Owed::Group(fds.clone(), index));
    }
    /// Moves another's owed wake-ups here.
    pub fn append(&mut self, other: &mut OwedWakes) {
        if self.0.is_empty() {
            std::mem::swap(&mut self.0, &mut other.0);
        } else {
            self.0.append(&mut other.0);
        }
    }
    /// Issues every owed wake-up (call with the engine let go).
    pub fn issue(&mut self) {
        for w in self.0.drain(..) {
            match w {
                Owed::Sleepers(c) => c.wake_sleepers(),
                Owed::EventFd(fd) => super::ring_eventfd(fd.as_raw_fd()),
                Owed::Group(fds, i) => {
                    if let Some(fd) = fds.get(i) {
                        super::ring_eventfd(fd.as_raw_fd());
                    }
                }
            }
        }
    }
}

impl Drop for OwedWakes {
    /// A wake-up is never lost: one dropped unissued is issued here.
    fn drop(&mut self) {
        self.issue();
    }
}
