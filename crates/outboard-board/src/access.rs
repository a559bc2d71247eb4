//! Who may attach to an engine, as both sides see it.
//!
//! The engine admits root, its own user, and the users and groups its
//! operator named (`outboard engine --allow-user NAME --allow-group NAME`);
//! anyone else is refused with `EACCES` in the attach reply (or by the
//! board socket's mode: `0600` when nobody else is named, `0666` when
//! someone is, with the engine checking each peer's credentials from the
//! kernel — `SO_PEERCRED` and `SO_PEERGROUPS` — either way). The
//! application side turns a refusal into [`refusal`], a message that names
//! the engine, the user, and the option that would admit it.
//!
//! Names are looked up with the C library (`getpwnam_r` and friends), so
//! NSS sources (LDAP, systemd-userdb) work as for any daemon.

use std::ffi::{CStr, CString};

/// The users and groups an engine admits besides root and its own user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    pub users: Vec<u32>,
    pub groups: Vec<u32>,
}

/// An attaching process's credentials, as the kernel gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCreds {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Access {
    /// Root, the engine's own user (`engine_uid`), a named user, or a member
    /// (primary or supplementary) of a named group.
    pub fn admits(&self, engine_uid: u32, p: &PeerCreds) -> bool {
        p.uid == 0
            || p.uid == engine_uid
            || self.users.contains(&p.uid)
            || self.groups.contains(&p.gid)
            || p.groups.iter().any(|g| self.groups.contains(g))
    }

    /// The board socket's mode: owner only, unless others are admitted
    /// (then anyone may connect and the engine decides).
    pub fn socket_mode(&self) -> u32 {
        if self.users.is_empty() && self.groups.is_empty() {
            0o600
        } else {
            0o666
        }
    }
}

#[cfg(target_os = "linux")]
const SO_PEERGROUPS: libc::c_int = 59;

impl PeerCreds {
    /// The credentials of the process at the other end of `sock` (those it
    /// had when it connected).
    pub fn of(sock: &impl std::os::fd::AsRawFd) -> std::io::Result<PeerCreds> {
        let fd = sock.as_raw_fd();
        let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into a live ucred.
        let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut groups = vec![0 as libc::gid_t; 64];
        loop {
            let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
            // SAFETY: getsockopt writes at most `len` bytes into the live vector.
            let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, SO_PEERGROUPS, groups.as_mut_ptr().cast(), &mut len) };
            if r == 0 {
                groups.truncate(len as usize / std::mem::size_of::<libc::gid_t>());
                break;
            }
            let e = std::io::Error::last_os_error();
            // ERANGE: `len` now says how much is needed.
            if e.raw_os_error() == Some(libc::ERANGE) && groups.len() < 65536 {
                groups.resize((len as usize / std::mem::size_of::<libc::gid_t>()).max(groups.len() * 2), 0);
                continue;
            }
            // Not a unix socket with groups (a socket pair made before
            // SO_PEERGROUPS, an old kernel): the primary group only.
            groups.clear();
            break;
        }
        Ok(PeerCreds { pid: cred.pid as u32, uid: cred.uid, gid: cred.gid, groups })
    }
}

/// Reads a `getpw*_r`/`getgr*_r` style entry with a growing buffer.
fn lookup<T>(mut f: impl FnMut(&mut [libc::c_char]) -> Result<Option<T>, i32>) -> Option<T> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        match f(&mut buf) {
            Ok(v) => return v,
            Err(libc::ERANGE) if buf.len() < (1 << 20) => buf.resize(buf.len() * 4, 0),
            Err(_) => return None,
        }
    }
}

/// A user's uid from a name, or a number given as is.
pub fn uid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Some(n);
    }
    let c = CString::new(name).ok()?;
    lookup(|buf| {
        // SAFETY: all-zero is a valid passwd (null pointers, zero ids).
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is live for the call; buf's length is given.
        let r = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
        if r != 0 {
            return Err(r);
        }
        Ok((!out.is_null()).then_some(pw.pw_uid))
    })
}

/// A group's gid from a name, or a number given as is.
pub fn gid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse::<u32>() {
        return Some(n);
    }
    let c = CString::new(name).ok()?;
    lookup(|buf| {
        // SAFETY: all-zero is a valid group (null pointers, zero id).
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer is live for the call; buf's length is given.
        let r = unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
        if r != 0 {
            return Err(r);
        }
        Ok((!out.is_null()).then_some(gr.gr_gid))
    })
}

/// A uid's user name, if it has one.
pub fn user_name(uid: u32) -> Option<String> {
    lookup(|buf| {
        // SAFETY: all-zero is a valid passwd.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is live for the call; buf's length is given.
        let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
        if r != 0 {
            return Err(r);
        }
        if out.is_null() || pw.pw_name.is_null() {
            return Ok(None);
        }
        // SAFETY: getpwuid_r made pw_name a NUL-terminated string inside buf.
        Ok(Some(unsafe { CStr::from_ptr(pw.pw_name) }.to_string_lossy().into_owned()))
    })
}

/// This process's effective uid.
pub fn current_uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// What an application tells its user when engine `engine` refused it.
pub fn refusal(engine: &str) -> String {
    let uid = current_uid();
    let user = user_name(uid).unwrap_or_else(|| uid.to_string());
    format!(
        "engine {engine:?} does not admit user {user} (uid {uid}): it admits root, its own user, and the users and groups \
         it was started with --allow-user/--allow-group; start it with `--allow-user {user}`, or with `--allow-group` \
         naming one of {user}'s groups"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> PeerCreds {
        PeerCreds { pid: 1, uid, gid, groups: groups.to_vec() }
    }

    #[test]
    fn root_and_the_engine_s_user_always_others_only_when_named() {
        let none = Access::default();
        assert!(none.admits(1000, &peer(0, 0, &[])));
        assert!(none.admits(1000, &peer(1000, 1000, &[])));
        assert!(!none.admits(1000, &peer(1001, 1001, &[])));
        assert_eq!(none.socket_mode(), 0o600);
        let some = Access { users: vec![1001], groups: vec![50] };
        assert!(some.admits(1000, &peer(1001, 1001, &[])));
        assert!(some.admits(1000, &peer(1002, 50, &[])), "primary group");
        assert!(some.admits(1000, &peer(1003, 1003, &[7, 50])), "supplementary group");
        assert!(!some.admits(1000, &peer(1004, 1004, &[7])));
        assert_eq!(some.socket_mode(), 0o666);
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(uid_of("root"), Some(0));
        assert_eq!(uid_of("4242"), Some(4242));
        assert_eq!(gid_of("root"), Some(0));
        assert_eq!(uid_of("no-such-user-outboard"), None);
        assert_eq!(gid_of("no-such-group-outboard"), None);
        assert_eq!(uid_of("bad\0name"), None);
        assert_eq!(user_name(0).as_deref(), Some("root"));
    }

    #[test]
    fn a_socket_pair_reports_our_own_credentials() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let p = PeerCreds::of(&a).unwrap();
        assert_eq!(p.uid, current_uid());
        assert_eq!(p.pid, std::process::id());
    }

    #[test]
    fn the_refusal_names_the_engine_the_user_and_the_option() {
        let m = refusal("edge");
        assert!(m.contains("\"edge\"") && m.contains("--allow-user") && m.contains(&format!("uid {}", current_uid())), "{m}");
    }
}
