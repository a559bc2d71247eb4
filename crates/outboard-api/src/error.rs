use std::fmt;

pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong; `errno()` maps each to the Linux errno a socket would give.
#[derive(Debug)]
pub enum Error {
    /// Non-blocking mode and nothing to do now.
    WouldBlock,
    /// The engine died or dropped this board (it disconnects applications that break the board's rules).
    EngineGone,
    ConnectionRefused,
    ConnectionReset,
    TimedOut,
    AddrInUse,
    /// No route / host unreachable.
    Unreachable,
    /// An address of a family the engine does not run (today: IPv6).
    AddrFamily,
    /// The stream was shut down for writing, or the endpoint is closed.
    Closed,
    /// The board has no free endpoint, sync or buffer.
    NoResources(&'static str),
    /// A call that makes no sense now (e.g. `end_put` more than `begin_put` gave).
    Invalid(&'static str),
    /// Attaching failed: no such engine, refused, or a handshake error.
    Attach(String),
    /// The engine does not admit this user (see `outboard_board::access`):
    /// the message names the engine, the user and the option that would.
    NotAdmitted(String),
    /// Another errno the engine reported.
    Errno(i32),
}

impl Error {
    pub fn errno(&self) -> i32 {
        match self {
            Error::WouldBlock => libc::EAGAIN,
            Error::EngineGone => libc::ESHUTDOWN,
            Error::ConnectionRefused => libc::ECONNREFUSED,
            Error::ConnectionReset => libc::ECONNRESET,
            Error::TimedOut => libc::ETIMEDOUT,
            Error::AddrInUse => libc::EADDRINUSE,
            Error::Unreachable => libc::EHOSTUNREACH,
            Error::AddrFamily => libc::EAFNOSUPPORT,
            Error::Closed => libc::EPIPE,
            Error::NoResources(_) => libc::ENOBUFS,
            Error::Invalid(_) => libc::EINVAL,
            Error::Attach(_) => libc::ECONNREFUSED,
            Error::NotAdmitted(_) => libc::EACCES,
            Error::Errno(e) => *e,
        }
    }
    pub fn from_errno(e: i32) -> Error {
        match e {
            libc::EAGAIN => Error::WouldBlock,
            libc::ECONNREFUSED => Error::ConnectionRefused,
            libc::ECONNRESET => Error::ConnectionReset,
            libc::ETIMEDOUT => Error::TimedOut,
            libc::EADDRINUSE => Error::AddrInUse,
            libc::EHOSTUNREACH | libc::ENETUNREACH => Error::Unreachable,
            libc::EAFNOSUPPORT => Error::AddrFamily,
            libc::EPIPE => Error::Closed,
            other => Error::Errno(other),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::WouldBlock => write!(f, "would block"),
            Error::EngineGone => write!(f, "the engine is gone (it died or disconnected this application)"),
            Error::ConnectionRefused => write!(f, "connection refused"),
            Error::ConnectionReset => write!(f, "connection reset by peer"),
            Error::TimedOut => write!(f, "connection timed out"),
            Error::AddrInUse => write!(f, "address in use"),
            Error::Unreachable => write!(f, "no route to host"),
            Error::AddrFamily => write!(f, "address family not supported by the engine"),
            Error::Closed => write!(f, "endpoint closed for writing"),
            Error::NoResources(what) => write!(f, "the board has no free {what}"),
            Error::Invalid(why) => write!(f, "invalid call: {why}"),
            Error::Attach(why) => write!(f, "cannot attach to the engine: {why}"),
            Error::NotAdmitted(why) => write!(f, "cannot attach to the engine: {why}"),
            Error::Errno(e) => write!(f, "{}", std::io::Error::from_raw_os_error(*e)),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_map_both_ways() {
        for e in [libc::ECONNREFUSED, libc::ECONNRESET, libc::ETIMEDOUT, libc::EADDRINUSE, libc::EHOSTUNREACH, libc::EAFNOSUPPORT, libc::EPIPE] {
            assert_eq!(Error::from_errno(e).errno(), e);
        }
        // An IPv6 destination: the engine answers EAFNOSUPPORT.
        assert!(matches!(Error::from_errno(libc::EAFNOSUPPORT), Error::AddrFamily));
        assert!(matches!(Error::from_errno(libc::EMSGSIZE), Error::Errno(libc::EMSGSIZE)));
    }
}
