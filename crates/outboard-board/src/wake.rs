//! Wake-ups through an eventfd: the engine's doorbell (an application rings
//! it when the engine sleeps in epoll rather than on the board's futex) and
//! an application's wake eventfd (the engine rings it for threads asleep in
//! poll/epoll).

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A new eventfd, non-blocking and close-on-exec, counting from 0.
pub fn new_eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd(2) with valid flags; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Empties the non-blocking eventfd `fd`: true if it had been rung.
pub fn drain_eventfd(fd: RawFd) -> bool {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64; `fd` is only a number to the
    // kernel (a bad one gives EBADF, read as not rung).
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    n == 8 && v > 0
}

/// Writes 1 to the eventfd `fd`. A full counter or a closed descriptor is
/// fine to ignore: the reader is awake, or gone, either way.
pub fn ring_eventfd(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: write(2) reads 8 bytes from a live u64 on our stack; `fd` is
    // only a number to the kernel (a bad one gives EBADF, ignored).
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ringing_adds_one_to_the_counter_and_draining_empties_it() {
        use std::os::fd::AsRawFd;
        let fd = new_eventfd().expect("eventfd");
        assert!(!drain_eventfd(fd.as_raw_fd()), "a new eventfd was not rung");
        ring_eventfd(fd.as_raw_fd());
        ring_eventfd(fd.as_raw_fd());
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from the eventfd we made.
        let n = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        assert_eq!((n, v), (8, 2));
        ring_eventfd(fd.as_raw_fd());
        assert!(drain_eventfd(fd.as_raw_fd()));
        assert!(!drain_eventfd(fd.as_raw_fd()), "drained");
    }
}
