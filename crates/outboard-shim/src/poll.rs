//! poll, ppoll, select, pselect and epoll_wait over a mix of engine and
//! kernel descriptors (see wait.rs for how they sleep).

use crate::epoll::WAKE_TOKEN;
use crate::state::{self, lock, mark, Count, MARK_SOCK};
use crate::wait;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}
pub fn set_errno(e: i32) {
    // SAFETY: errno is thread-local and always writable.
    unsafe { *libc::__errno_location() = e };
}

fn to_timespec(d: Duration) -> libc::timespec {
    libc::timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long }
}

fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

/// poll/ppoll: `timeout` None waits forever. Returns what ppoll returns.
///
/// # Safety
/// `sigmask` is null or a valid sigset.
pub unsafe fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>, sigmask: *const libc::sigset_t) -> i32 {
    let engine: Vec<usize> = (0..fds.len()).filter(|&i| mark(fds[i].fd) == MARK_SOCK).collect();
    if engine.is_empty() {
        let ts = timeout.map(to_timespec);
        let tp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: the caller's array, its length; ts lives across the call.
        return unsafe { crate::real::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, tp, sigmask) };
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    // Kernel descriptors (engine ones set to -1, which ppoll skips), and room for the wake-up eventfd.
    let mut kfds: Vec<libc::pollfd> = fds.iter().map(|p| libc::pollfd { fd: p.fd, events: p.events, revents: 0 }).collect();
    for &i in &engine {
        kfds[i].fd = -1;
    }
    let efd = wait::wake_fd();
    kfds.push(libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 });
    let nk = fds.len();
    loop {
        // What this thread sent goes out before it looks and waits.
        wait::run_wanted_turn();
        let (n_eng, news, seq) = {
            let mut st = lock();
            let (news, seq, board) = st.look();
            let mut n = 0;
            for &i in &engine {
                let bits = match st.sock(fds[i].fd) {
                    Some(s) => {
                        let mut s = s.borrow_mut();
                        if fds[i].events & libc::POLLIN != 0 {
                            s.want_accepts();
                        }
                        s.poll_bits(board.as_ref()) & (fds[i].events | libc::POLLERR | libc::POLLHUP)
                    }
                    None => libc::POLLNVAL,
                };
                fds[i].revents = bits;
                if bits != 0 {
                    n += 1;
                }
            }
            st.push_counters();
            (n, news, seq)
        };
        let rest = left(deadline);
        let now_only = n_eng > 0 || rest.is_some_and(|d| d.is_zero()) || news.is_none();
        let use_efd = match (&news, now_only) {
            (Some(n), false) => match wait::before_kernel_sleep(n, seq, 0, rest) {
                None => continue, // news arrived: look again
                Some(announced) => announced,
            },
            _ => false,
        };
        let ts = if now_only { Some(to_timespec(Duration::ZERO)) } else { rest.map(to_timespec) };
        let tp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        let count = if use_efd { kfds.len() } else { nk };
        // SAFETY: our own array and length; ts lives across the call.
        let r = unsafe { crate::real::ppoll(kfds.as_mut_ptr(), count as libc::nfds_t, tp, sigmask) };
        let e = errno();
        if use_efd {
            if let Some(n) = &news {
                wait::poll_exit(n, 0);
            }
        }
        if r < 0 {
            if e == libc::EINTR {
                state::count(Count::Eintr);
            }
            set_errno(e);
            return -1;
        }
        let mut n_kernel: i32 = 0;
        for i in 0..nk {
            if kfds[i].fd >= 0 {
                fds[i].revents = kfds[i].revents;
                if kfds[i].revents != 0 {
                    n_kernel += 1;
                }
            }
        }
        if n_kernel > 0 || now_only {
            return n_kernel + n_eng;
        }
        if left(deadline).is_some_and(|d| d.is_zero()) {
            return 0;
        }
    }
}

/// select/pselect through `poll`.
///
/// # Safety
/// The fd_set pointers are null or valid; `sigmask` as for `poll`.
pub unsafe fn select(
    nfds: i32,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    x: *mut libc::fd_set,
    timeout: Option<Duration>,
    sigmask: *const libc::sigset_t,
) -> i32 {
    if !(0..=libc::FD_SETSIZE as i32).contains(&nfds) {
        set_errno(libc::EINVAL);
        return -1;
    }
    let isset = |s: *mut libc::fd_set, fd: RawFd| -> bool {
        // SAFETY: s is a valid fd_set (caller) and fd < FD_SETSIZE.
        !s.is_null() && unsafe { libc::FD_ISSET(fd, s) }
    };
    let mut pfds = Vec::new();
    for fd in 0..nfds {
        let mut ev = 0;
        if isset(r, fd) {
            ev |= libc::POLLIN;
        }
        if isset(w, fd) {
            ev |= libc::POLLOUT;
        }
        if isset(x, fd) {
            ev |= libc::POLLPRI;
        }
        if ev != 0 {
            pfds.push(libc::pollfd { fd, events: ev, revents: 0 });
        }
    }
    // SAFETY: forwarded contract.
    let n = unsafe { poll(&mut pfds, timeout, sigmask) };
    if n < 0 {
        return n;
    }
    for s in [r, w, x] {
        if !s.is_null() {
            // SAFETY: valid fd_set.
            unsafe { libc::FD_ZERO(s) };
        }
    }
    let mut count = 0;
    for p in &pfds {
        if p.revents & libc::POLLNVAL != 0 {
            set_errno(libc::EBADF);
            return -1;
        }
        let rd = p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 && p.events & libc::POLLIN != 0;
        let wr = p.revents & (libc::POLLOUT | libc::POLLERR) != 0 && p.events & libc::POLLOUT != 0;
        let ex = p.revents & libc::POLLPRI != 0 && p.events & libc::POLLPRI != 0;
        for (on, s) in [(rd, r), (wr, w), (ex, x)] {
            if on {
                // SAFETY: valid fd_set, fd < nfds ≤ FD_SETSIZE.
                unsafe { libc::FD_SET(p.fd, s) };
                count += 1;
            }
        }
    }
    count
}

/// Removes our wake-up entries from kernel results; returns the new count.
fn strip_wake(evs: *mut libc::epoll_event, n: usize) -> usize {
    let mut k = 0;
    for i in 0..n {
        // SAFETY: i < n ≤ the caller's array length; epoll_event may be packed: copy it.
        let ev = unsafe { evs.add(i).read_unaligned() };
        if ev.u64 == WAKE_TOKEN {
            continue;
        }
        // SAFETY: k ≤ i < n.
        unsafe { evs.add(k).write_unaligned(ev) };
        k += 1;
    }
    k
}

/// epoll_wait/epoll_pwait for an epoll instance the shim tracks.
///
/// # Safety
/// `evs` points to `max` writable events; `sigmask` as for `poll`.
pub unsafe fn epoll_wait(epfd: RawFd, evs: *mut libc::epoll_event, max: i32, timeout_ms: i32, sigmask: *const libc::sigset_t) -> i32 {
    let has_engine = {
        let st = lock();
        st.epolls.get(&epfd).is_some_and(|s| !s.borrow().interests.is_empty())
    };
    if !has_engine || max <= 0 || evs.is_null() {
        // SAFETY: caller's arguments as given.
        let r = unsafe { crate::real::epoll_pwait(epfd, evs, max, timeout_ms, sigmask) };
        if r > 0 {
            return strip_wake(evs, r as usize) as i32;
        }
        return r;
    }
    let max = max as usize;
    let deadline = (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
    let efd = wait::wake_fd();
    let mut out = Vec::with_capacity(max.min(1024));
    loop {
        out.clear();
        // What this thread sent goes out before it looks and waits.
        wait::run_wanted_turn();
        let (news, seq, slot) = {
            let mut st = lock();
            let (news, seq, board) = st.look();
            let Some(set) = st.epolls.get(&epfd).cloned() else {
                set_errno(libc::EBADF);
                return -1;
            };
            let mut set = set.borrow_mut();
            st.collect_epoll(board.as_ref(), &mut set, &mut out, max);
            // A thread sleeps in its set's wake group while every interest
            // is in it; the shared eventfd is in every set all the same (an
            // engine without the group's, a dead engine, a re-attach ring it).
            let slot = set.wake_slot();
            let slot = if wait::slot_fd(slot) >= 0 { slot } else { 0 };
            for fd in [efd, wait::slot_fd(slot)] {
                if out.is_empty() && fd >= 0 && !set.wake_fds.contains(&fd) {
                    // Edge-triggered: each engine write wakes each epoll set once.
                    // The eventfd is drained only when the last poller leaves, so
                    // with several threads in epoll (memcached's workers, libuv's
                    // pool) a level-triggered registration stayed ready and every
                    // wait returned at once: the threads spun (memcached -t 4
                    // ran at a fifth of its -t 1 rate).
                    let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLET) as u32, u64: WAKE_TOKEN };
                    // SAFETY: adds our eventfd to the program's epoll instance.
                    if unsafe { crate::real::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } == 0 {
                        set.wake_fds.push(fd);
                    }
                }
            }
            drop(set);
            st.push_counters();
            (news, seq, slot)
        };
        let n_eng = out.len();
        for (i, ev) in out.iter().enumerate() {
            // SAFETY: i < n_eng ≤ max.
            unsafe { evs.add(i).write_unaligned(*ev) };
        }
        if n_eng >= max {
            return n_eng as i32;
        }
        let rest = left(deadline);
        let now_only = n_eng > 0 || rest.is_some_and(|d| d.is_zero()) || news.is_none();
        let announced = match (&news, now_only) {
            (Some(n), false) => match wait::before_kernel_sleep(n, seq, slot, rest) {
                None => continue, // news arrived: look again
                Some(announced) => announced,
            },
            _ => false,
        };
        let tmo = if now_only { 0 } else { rest.map_or(-1, |d| d.as_millis().min(i32::MAX as u128) as i32) };
        // Round a sub-millisecond remainder up, so a short timeout still sleeps.
        let tmo = if !now_only && tmo == 0 && rest.is_some_and(|d| !d.is_zero()) { 1 } else { tmo };
        // SAFETY: the rest of the caller's array.
        let r = unsafe { crate::real::epoll_pwait(epfd, evs.add(n_eng), (max - n_eng) as i32, tmo, sigmask) };
        let e = errno();
        if announced {
            if let Some(n) = &news {
                wait::poll_exit(n, slot);
            }
        }
        if r < 0 {
            if n_eng > 0 {
                return n_eng as i32;
            }
            if e == libc::EINTR {
                state::count(Count::Eintr);
            }
            set_errno(e);
            return -1;
        }
        // SAFETY: r entries were written after ours.
        let k = strip_wake(unsafe { evs.add(n_eng) }, r as usize);
        if n_eng + k > 0 || now_only {
            return (n_eng + k) as i32;
        }
        if left(deadline).is_some_and(|d| d.is_zero()) {
            return 0;
        }
    }
}
