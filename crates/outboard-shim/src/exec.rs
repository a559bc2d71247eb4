//! Engine sockets across `exec`: a program that execs another image (a
//! server re-executing itself for an upgrade, a supervisor handing a
//! listening socket to a worker program) keeps the engine sockets whose
//! descriptors it did not mark close-on-exec, as on Linux.
//!
//! The old image's board goes away with it (its attach socket is
//! close-on-exec), so the sockets travel the way they do across `fork`:
//!
//! - Before the real `execve`/`execv`/`execvp`/`execvpe`, the shim writes a
//!   small table — for each inherited engine listener and stream: its
//!   descriptor, the board's inherit key, its endpoint (and shard, port,
//!   backlog, flags) — into a memfd the new image inherits, names it in
//!   `OUTBOARD_EXEC_SOCKETS` (added to the environment the new image gets),
//!   counts a fork (`FORKS`: the engine then keeps the old board's
//!   listeners and streams for a moment when it goes), and marks the
//!   streams forked.
//! - The new image's shim reads the table when it loads (before `main`),
//!   attaches a board, says whose child it is (`CHILD_OF`), joins each
//!   listener (`INHERIT`, on demand) and takes each stream over at its
//!   first use (`ADOPT`), as a forked child does.
//!
//! If the exec fails, the memfd is closed and the environment restored.
//! Not covered: the variadic `execl*` calls, and `posix_spawn`/`system`
//! (glibc calls the kernel directly there): such images see only the
//! kernel placeholders. Datagram sockets are not carried.

use crate::sock::{Kind, Sock};
use crate::state::{count, lock, set_mark, Count, Reentry, MARK_SOCK, MAX_FDS};
use libc::{c_char, c_int};
use std::cell::RefCell;
use std::ffi::{CStr, CString};

use std::rc::Rc;

/// The environment variable naming the memfd with the table.
pub const ENV: &str = "OUTBOARD_EXEC_SOCKETS";
/// Most entries read back (a table longer than this is cut).
const MAX_ENTRIES: usize = 4096;

/// One carried socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Listener { fd: c_int, v6: bool, nonblock: bool, key: u64, ep: u32, port: u16, backlog: u32, reuseport: bool },
    Stream { fd: c_int, v6: bool, nonblock: bool, key: u64, ep: u32, shard: u32 },
}

impl Entry {
    fn line(&self) -> String {
        match self {
            Entry::Listener { fd, v6, nonblock, key, ep, port, backlog, reuseport } => {
                format!("L {fd} {} {} {key} {ep} {port} {backlog} {}\n", u8::from(*v6), u8::from(*nonblock), u8::from(*reuseport))
            }
            Entry::Stream { fd, v6, nonblock, key, ep, shard } => {
                format!("S {fd} {} {} {key} {ep} {shard}\n", u8::from(*v6), u8::from(*nonblock))
            }
        }
    }

    /// One line of the table; None for anything malformed (skipped).
    pub fn parse(line: &str) -> Option<Entry> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| -> Option<u64> { f.get(i)?.parse().ok() };
        let b = |i: usize| -> Option<bool> { Some(n(i)? != 0) };
        let fd = c_int::try_from(n(1)?).ok().filter(|fd| (*fd as usize) < MAX_FDS)?;
        match *f.first()? {
            "L" if f.len() == 9 => Some(Entry::Listener {
                fd,
                v6: b(2)?,
                nonblock: b(3)?,
                key: n(4)?,
                ep: u32::try_from(n(5)?).ok()?,
                port: u16::try_from(n(6)?).ok().filter(|p| *p != 0)?,
                backlog: u32::try_from(n(7)?).ok()?.clamp(1, 4096),
                reuseport: b(8)?,
            }),
            "S" if f.len() == 7 => Some(Entry::Stream {
                fd,
                v6: b(2)?,
                nonblock: b(3)?,
                key: n(4)?,
                ep: u32::try_from(n(5)?).ok()?,
                shard: u32::try_from(n(6)?).ok()?,
            }),
            _ => None,
        }
    }
}

/// The table of the engine sockets this image hands to the next one: those
/// whose descriptor is not close-on-exec.
fn carried() -> Vec<Entry> {
    let mut st = lock();
    let Some(board) = st.board.clone() else { return Vec::new() };
    let key = board.inherit_key();
    let mut out = Vec::new();
    for (fd, s) in &st.socks {
        // SAFETY: F_GETFD on a descriptor number; no memory is involved.
        let fl = unsafe { libc::fcntl(*fd, libc::F_GETFD) };
        if fl < 0 || fl & libc::FD_CLOEXEC != 0 {
            continue;
        }
        let Ok(mut s) = s.try_borrow_mut() else { continue };
        let (v6, nonblock) = (s.v6, s.nonblock);
        match &s.kind {
            Kind::Listener(l) => out.push(Entry::Listener {
                fd: *fd,
                v6,
                nonblock,
                key,
                ep: l.id(),
                port: l.local_port(),
                backlog: s.backlog,
                reuseport: s.opts.reuseport || s.joined,
            }),
            Kind::Stream(x) => {
                out.push(Entry::Stream { fd: *fd, v6, nonblock, key, ep: x.id(), shard: x.shard() });
                s.forked = true;
            }
            _ => {}
        }
    }
    if !out.is_empty() {
        // The engine keeps the old board's listeners and streams for the new image.
        count(Count::Forks);
        st.push_counters();
    }
    out
}

/// What an exec carries: the memfd (kept open across the exec) and the variable's value.
pub struct Carry {
    fd: c_int,
    pub value: String,
}

impl Carry {
    /// After a failed exec: the memfd goes.
    pub fn abandon(self) {
        // SAFETY: our own memfd.
        unsafe { crate::real::close(self.fd) };
    }
    pub fn env_entry(&self) -> CString {
        CString::new(format!("{ENV}={}", self.value)).expect("no NUL in digits")
    }
}

/// Writes the table for the next image, if there is anything to carry.
pub fn prepare() -> Option<Carry> {
    let _r = Reentry::enter();
    if crate::state::in_process_engine() {
        // The engine ends with this image: its sockets cannot be carried.
        return None;
    }
    let entries = carried();
    if entries.is_empty() {
        return None;
    }
    let text: String = entries.iter().map(Entry::line).collect();
    // SAFETY: a NUL-terminated literal name; flags 0 (inherited across exec on purpose).
    let fd = unsafe { libc::memfd_create(c"outboard-exec".as_ptr(), 0) };
    if fd < 0 {
        crate::log::warn("exec: no memfd for the engine sockets; the new image gets only their placeholders");
        return None;
    }
    let bytes = text.as_bytes();
    // SAFETY: writes our own buffer to our own memfd, then rewinds it.
    let ok = unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len()) == bytes.len() as isize && libc::lseek(fd, 0, libc::SEEK_SET) == 0
    };
    if !ok {
        // SAFETY: our own memfd.
        unsafe { crate::real::close(fd) };
        return None;
    }
    Some(Carry { fd, value: fd.to_string() })
}

/// `envp` (a NULL-terminated array) without our variable, plus `extra`.
///
/// # Safety
/// `envp` is NULL or a valid NULL-terminated array of C strings.
pub unsafe fn env_with(envp: *const *const c_char, extra: &CString) -> Vec<*const c_char> {
    let mut v = Vec::new();
    let prefix = format!("{ENV}=");
    if !envp.is_null() {
        let mut p = envp;
        // SAFETY: the caller's array is NULL-terminated.
        unsafe {
            while !(*p).is_null() {
                if !CStr::from_ptr(*p).to_bytes().starts_with(prefix.as_bytes()) {
                    v.push(*p);
                }
                p = p.add(1);
            }
        }
    }
    v.push(extra.as_ptr());
    v.push(std::ptr::null());
    v
}

/// In the new image, when the library loads: the sockets the old image
/// carried, if any, are taken up again (see the module doc).
pub fn restore(value: Option<&str>) {
    let Some(fd) = value.and_then(|v| v.trim().parse::<c_int>().ok()).filter(|fd| *fd >= 0) else { return };
    let mut text = Vec::new();
    {
        use std::io::Read;
        // SAFETY: the memfd the old image left us; we own it from here on (File closes it).
        let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let _ = f.by_ref().take(1 << 20).read_to_end(&mut text);
    }
    // Our children must not read a table that was ours.
    // SAFETY: a NUL-terminated literal; called at load, before the program's threads.
    unsafe { libc::unsetenv(c"OUTBOARD_EXEC_SOCKETS".as_ptr()) };
    let entries: Vec<Entry> = String::from_utf8_lossy(&text).lines().filter_map(Entry::parse).take(MAX_ENTRIES).collect();
    if entries.is_empty() {
        return;
    }
    let _r = Reentry::enter();
    let mut st = lock();
    let Some(board) = st.board() else { return };
    let mut keys: Vec<u64> = entries.iter().map(|e| match e {
        Entry::Listener { key, .. } | Entry::Stream { key, .. } => *key,
    }).collect();
    keys.dedup();
    let mut joined = 0u64;
    for e in entries {
        let (fd, v6, nonblock) = match &e {
            Entry::Listener { fd, v6, nonblock, .. } | Entry::Stream { fd, v6, nonblock, .. } => (*fd, *v6, *nonblock),
        };
        if !is_socket(fd) {
            continue;
        }
        let mut sock = Sock::new(true, v6, nonblock);
        match e {
            Entry::Listener { key, ep, port, backlog, reuseport, .. } => {
                let flags = outboard_api::ListenFlags { reuseport, on_demand: true, ..Default::default() };
                match board.inherit_listener(key, ep, flags) {
                    Ok(l) => {
                        sock.kind = Kind::Listener(l);
                        sock.joined = true;
                        sock.backlog = backlog;
                        sock.opts.reuseport = reuseport;
                        sock.bound = Some(crate::addr::unspecified(v6, port));
                        joined += 1;
                    }
                    Err(err) => {
                        crate::log::warn(&format!("fd {fd}: the listener carried across exec is gone: {err}"));
                        continue;
                    }
                }
            }
            Entry::Stream { key, ep, shard, .. } => sock.kind = Kind::InheritedStream { key, ep, shard },
        }
        st.socks.insert(fd, Rc::new(RefCell::new(sock)));
        set_mark(fd, MARK_SOCK);
    }
    // After the joins (each answered): once the engine has counted this
    // child, the old image's listeners need not wait for it (see
    // `forget_after_fork`).
    for k in keys {
        let _ = board.child_of(k);
    }
    for _ in 0..joined {
        count(Count::SharedListeners);
    }
    st.push_counters();
}

fn is_socket(fd: c_int) -> bool {
    if fd < 0 || fd as usize >= MAX_FDS {
        return false;
    }
    // SAFETY: fstat writes a stat we own.
    unsafe {
        let mut sb: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut sb) == 0 && sb.st_mode & libc::S_IFMT == libc::S_IFSOCK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_round_trip_and_garbage_is_skipped() {
        let l = Entry::Listener { fd: 5, v6: true, nonblock: false, key: u64::MAX, ep: 7, port: 8080, backlog: 511, reuseport: true };
        let s = Entry::Stream { fd: 9, v6: false, nonblock: true, key: 3, ep: 12, shard: 1 };
        for e in [l, s] {
            assert_eq!(Entry::parse(&e.line()), Some(e));
        }
        for bad in ["", "L", "X 1 0 0 1 2 3 4 0", "L 70000 0 0 1 2 3 4 0", "L 5 0 0 1 2 0 4 0", "S 5 0 0 1 2", "S -1 0 0 1 2 3", "L 5 0 0 1 2 99999 4 0"] {
            assert_eq!(Entry::parse(bad), None, "{bad:?}");
        }
    }
}
