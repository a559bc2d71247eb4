//! Running the engine under an init system: readiness and stopping
//! notifications in systemd's `sd_notify` protocol (a datagram of
//! `KEY=VALUE` lines to the socket `$NOTIFY_SOCKET` names, `@` for the
//! abstract namespace), written here in a few lines rather than linking
//! libsystemd. Without `NOTIFY_SOCKET` nothing is sent.
//!
//! The engine says `READY=1` once its link is open, its control and board
//! sockets take requests and its services listen — `Type=notify` units
//! (packaging/outboard-engine@.service) start what depends on it only
//! then — and `STOPPING=1` when it begins to stop.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `state` (newline-separated `KEY=VALUE`) to `$NOTIFY_SOCKET`.
/// Ok(false) when there is no such variable (not started by systemd).
pub fn notify(state: &str) -> io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return Ok(false) };
    let path = path.to_string_lossy().into_owned();
    let addr = match path.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())?
        }
        None => SocketAddr::from_pathname(&path)?,
    };
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test: it owns `NOTIFY_SOCKET` for its duration (tests run in threads).
    #[test]
    fn ready_reaches_the_socket_and_without_one_nothing_is_sent() {
        let dir = std::env::temp_dir().join(format!("ob-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("notify");
        let rx = UnixDatagram::bind(&p).unwrap();
        std::env::set_var("NOTIFY_SOCKET", &p);
        let sent = notify("READY=1\nSTATUS=up");
        std::env::remove_var("NOTIFY_SOCKET");
        assert!(sent.unwrap());
        let mut b = [0u8; 64];
        let n = rx.recv(&mut b).unwrap();
        assert_eq!(&b[..n], b"READY=1\nSTATUS=up");
        assert!(!notify("READY=1").unwrap(), "no NOTIFY_SOCKET: nothing sent");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
