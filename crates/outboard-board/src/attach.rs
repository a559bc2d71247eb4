//! The attach handshake over a Unix stream socket: the application sends an
//! [`AttachRequest`]; the engine answers with an [`AttachReply`] and, on
//! success, two descriptors in one `SCM_RIGHTS` message: the board's memfd
//! and the engine's doorbell eventfd. The socket then stays open for the
//! application's whole life: its hang-up is how each side learns the other
//! is gone (the kernel closes it when a process dies, SIGKILL included).
//!
//! A daemon engine named NAME listens on [`board_socket_path`]`(NAME)`,
//! `RUN_DIR/NAME.board` (see [`run_dir`]): both sides compute it here.

use crate::addr::NetAddr;
use crate::layout::BoardParams;
use crate::shm::Pod;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Where engines put their sockets (the board socket `NAME.board`, the
/// control socket `NAME.sock`): `$OUTBOARD_RUN_DIR` if set, else
/// `/run/outboard` when writable (root), else `$XDG_RUNTIME_DIR/outboard`,
/// else `/tmp/outboard-$USER`. An application finds an engine only with the
/// run directory the engine had.
pub fn run_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OUTBOARD_RUN_DIR") {
        return PathBuf::from(d);
    }
    let root = Path::new("/run/outboard");
    if std::fs::create_dir_all(root).is_ok() && writable(root) {
        return root.to_path_buf();
    }
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        return Path::new(&x).join("outboard");
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
    PathBuf::from(format!("/tmp/outboard-{user}"))
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// The socket a daemon engine named `name` takes applications on: `RUN_DIR/NAME.board`.
pub fn board_socket_path(name: &str) -> PathBuf {
    board_socket_in(&run_dir(), name)
}

/// The same in a run directory known already.
pub fn board_socket_in(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join(format!("{name}.board"))
}

pub const ATTACH_MAGIC: u32 = 0x4f42_4154; // "OBAT"

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachRequest {
    pub magic: u32,
    pub version: u32,
    pub pid: u32,
    pub _pad: u32,
    pub params: BoardParams,
}
const _: () = assert!(std::mem::size_of::<AttachRequest>() == 56);
// SAFETY: repr(C), u32s only.
unsafe impl Pod for AttachRequest {}

/// The engine's answer. Its first 56 bytes (magic, status, board size,
/// params) are where every layout version had them, so an application of
/// any version can read a refusal; `version` sits where version 2 had the
/// engine's IPv4 address.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachReply {
    pub magic: u32,
    /// 0, or a positive errno saying why the engine refused
    /// (`EPROTONOSUPPORT`: the application's layout version is not the engine's).
    pub status: u32,
    pub board_bytes: u64,
    /// The parameters the engine used (it may lower what was asked; `shards` is the engine's).
    pub params: BoardParams,
    /// The engine's board layout version (`layout::VERSION`).
    pub version: u32,
    /// The engine's subnet: `engine_addr/prefix_len` is on its link.
    pub prefix_len: u8,
    pub _pad: [u8; 3],
    /// The engine's address, for the application's information.
    pub engine_addr: NetAddr,
    /// The engine's default gateway (`FAMILY_NONE` = none): destinations
    /// off the subnet are served only through it.
    pub gateway: NetAddr,
    /// `ipv6::*` bits: whether the engine runs IPv6 beside IPv4.
    pub ipv6_flags: u8,
    /// The prefix of `engine_addr6`.
    pub prefix_len6: u8,
    pub _pad6: [u8; 6],
    /// The engine's static IPv6 address (`FAMILY_NONE` when it has only its
    /// link-local one, or no IPv6).
    pub engine_addr6: NetAddr,
    /// The engine's static IPv6 default router (`FAMILY_NONE` = none):
    /// IPv6 destinations off its prefix are served only through it.
    pub gateway6: NetAddr,
}
const _: () = assert!(std::mem::size_of::<AttachReply>() == 168);
const _: () = assert!(std::mem::offset_of!(AttachReply, version) == 56);
// SAFETY: repr(C), integers and NetAddr (itself Pod) only, no padding.
unsafe impl Pod for AttachReply {}

/// Bits of `AttachReply::ipv6_flags`.
pub mod ipv6 {
    /// The engine runs IPv6 (its link-local address at least).
    pub const ON: u8 = 1;
}

/// Bytes of a reply that every layout version shares (through `params`).
pub const REPLY_COMMON_BYTES: usize = 56;

/// What the application tells its user when the engine refused it for its
/// layout version: both versions, and what to do.
pub fn version_refusal(engine: u32, ours: u32) -> String {
    format!(
        "the engine speaks board layout version {engine} and this application version {ours}: \
         rebuild the application against the engine's outboard (or run an engine of layout version {ours})"
    )
}

fn as_bytes<T: Pod>(v: &T) -> &[u8] {
    // SAFETY: T is Pod (plain integers, no padding that matters); the slice covers exactly *v.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// Most descriptors one message carries (`send_with_fds`): the kernel's
/// `SCM_MAX_FD` (a live upgrade sends more in several).
pub const MAX_FDS: usize = 253;
/// Control buffer for `MAX_FDS` descriptors, in 8-byte words:
/// `CMSG_SPACE(253 * 4)` is 1032 bytes.
const CBUF_WORDS: usize = 130;

/// Sends `bytes` and, if any, `fds` with them (one SCM_RIGHTS message): the
/// attach exchange's records and a live upgrade's hand-over messages.
pub fn send_with_fds(sock: &UnixStream, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "too many descriptors for one message"));
    }
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    let mut cbuf = [0u64; CBUF_WORDS];
    // SAFETY: msghdr is plain C data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let fd_bytes = std::mem::size_of_val(fds) as u32;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure size computation.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(fd_bytes) } as _;
        // SAFETY: msg_control points at cbuf (CBUF_WORDS * 8 bytes), room for one cmsg of MAX_FDS fds.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(fd_bytes) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<RawFd>(), fds.len());
        }
    }
    // SAFETY: msg and everything it points to live across the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != bytes.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short message on a Unix socket"));
    }
    Ok(())
}

/// Receives into `buf` (waiting for all of it unless the peer closes first)
/// and the descriptors sent with it. Returns the bytes that came, the
/// descriptors, and whether the kernel dropped descriptors for want of room.
pub fn recv_with_fds(sock: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>, bool)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut cbuf = [0u64; CBUF_WORDS];
    // SAFETY: msghdr is plain C data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: msg points at live buffers of the sizes given.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_WAITALL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into cbuf; each
    // descriptor it passed is new in this process and owned by nobody else.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, fds, msg.msg_flags & libc::MSG_CTRUNC != 0))
}

/// Sends `record` and, if any, `fds` with it (SCM_RIGHTS).
pub fn send_record<T: Pod>(sock: &UnixStream, record: &T, fds: &[RawFd]) -> io::Result<()> {
    send_with_fds(sock, as_bytes(record), fds)
}

/// Receives one `T` and up to 4 descriptors sent with it. A short or empty
/// read is an error (the peer closed or sent garbage).
pub fn recv_record<T: Pod>(sock: &UnixStream) -> io::Result<(T, Vec<OwnedFd>)> {
    let (v, _, fds) = recv_record_prefix::<T>(sock, std::mem::size_of::<T>())?;
    Ok((v, fds))
}

/// As `recv_record`, but a record cut short after at least `min` bytes (a
/// peer of another layout version that sent a smaller record and closed) is
/// accepted: the missing bytes read as zero, and the count says how many came.
pub fn recv_record_prefix<T: Pod>(sock: &UnixStream, min: usize) -> io::Result<(T, usize, Vec<OwnedFd>)> {
    let mut buf = vec![0u8; std::mem::size_of::<T>()];
    let (n, fds, _) = recv_with_fds(sock, &mut buf)?;
    if n < min.min(buf.len()) {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short attach message (peer closed?)"));
    }
    // SAFETY: buf holds exactly size_of::<T>() bytes (zero past what came) and T is Pod.
    let v = unsafe { std::ptr::read_unaligned(buf.as_ptr().cast::<T>()) };
    Ok((v, n, fds))
}

/// True if the peer of `sock` has hung up (a non-blocking poll, no data consumed).
pub fn peer_gone(sock: &UnixStream) -> bool {
    let mut p = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLIN | libc::POLLRDHUP, revents: 0 };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_round_trips_with_its_routing_facts() {
        let (a, b) = UnixStream::pair().unwrap();
        let r = AttachReply {
            magic: ATTACH_MAGIC,
            status: 0,
            board_bytes: 1 << 20,
            params: BoardParams::default(),
            version: crate::layout::VERSION,
            prefix_len: 24,
            _pad: [0; 3],
            engine_addr: NetAddr::from(std::net::SocketAddrV4::new([10, 0, 0, 1].into(), 0)),
            gateway: NetAddr::from(std::net::SocketAddrV4::new([10, 0, 0, 254].into(), 0)),
            ipv6_flags: ipv6::ON,
            prefix_len6: 64,
            _pad6: [0; 6],
            engine_addr6: NetAddr::from("[fd77::2]:0".parse::<std::net::SocketAddr>().unwrap()),
            gateway6: NetAddr::NONE,
        };
        send_record(&a, &r, &[]).unwrap();
        let (got, fds) = recv_record::<AttachReply>(&b).unwrap();
        assert_eq!(got, r);
        assert!(fds.is_empty());
    }

    #[test]
    fn board_socket_lives_in_the_run_dir() {
        assert_eq!(board_socket_path("x"), run_dir().join("x.board"));
    }

    #[test]
    fn a_short_reply_is_an_error_not_garbage() {
        let (a, b) = UnixStream::pair().unwrap();
        // A version-1 engine's 64-byte reply, then a hang-up.
        use std::io::Write;
        (&a).write_all(&[0u8; 64]).unwrap();
        drop(a);
        assert!(recv_record::<AttachReply>(&b).is_err());
    }

    #[test]
    fn a_refusal_from_an_engine_of_another_version_is_read_as_far_as_it_goes() {
        let (a, b) = UnixStream::pair().unwrap();
        // A version-2 engine's 72-byte refusal: magic, EPROTO, zero size, params, then its IPv4 words.
        let mut old = [0u8; 72];
        old[0..4].copy_from_slice(&ATTACH_MAGIC.to_ne_bytes());
        old[4..8].copy_from_slice(&(libc::EPROTO as u32).to_ne_bytes());
        use std::io::Write;
        (&a).write_all(&old).unwrap();
        drop(a);
        let (r, n, _) = recv_record_prefix::<AttachReply>(&b, REPLY_COMMON_BYTES).unwrap();
        assert_eq!((n, r.magic, r.status), (72, ATTACH_MAGIC, libc::EPROTO as u32));
        let m = version_refusal(3, 2);
        assert!(m.contains("version 3") && m.contains("version 2"), "{m}");
    }
}
