//! Error numbers: what the engine's functions return, negated, on error.

/// An error number, as the engine's functions return it negated (`-14` is
/// [`Errno::EFAULT`]). The value held is the positive number, as in C's
/// `errno`; [`Errno::to_ret`] gives the negative form for an entry point's
/// return value.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct Errno(pub i32);

impl Errno {
    /// No such key, or no such mailbox.
    pub const ENOENT: Errno = Errno(2);
    /// No room now: a reliable flow's queue is full, or a log line was
    /// dropped by the rate limit. Try again later.
    pub const EAGAIN: Errno = Errno(11);
    /// A pointer and length that reach outside the handler's memory.
    pub const EFAULT: Errno = Errno(14);
    /// An invalid argument (for example `reply` when the message being
    /// handled is not a request).
    pub const EINVAL: Errno = Errno(22);
    /// Out of room: the key-value store's cap, or a full mailbox (and, in
    /// this SDK, a failed `memory.grow`).
    pub const ENOSPC: Errno = Errno(28);
    /// A message, key or value too large.
    pub const EMSGSIZE: Errno = Errno(90);
    /// The connection is not (or no longer) open.
    pub const ENOTCONN: Errno = Errno(107);
    /// Done already: a second `reply` to one request.
    pub const EALREADY: Errno = Errno(114);

    /// Reads a host function's return value: a non-negative value is
    /// `Ok(value)`, a negative one the error it names.
    #[inline]
    pub const fn check(ret: i32) -> Result<usize, Errno> {
        if ret < 0 {
            Err(Errno(ret.wrapping_neg()))
        } else {
            Ok(ret as usize)
        }
    }

    /// The positive error number (14 for `EFAULT`).
    #[inline]
    pub const fn code(self) -> i32 {
        self.0
    }

    /// The negative form, as an entry point returns a failure (`-14`).
    #[inline]
    pub const fn to_ret(self) -> i32 {
        self.0.wrapping_neg()
    }

    /// The error's symbolic name (`"EFAULT"`), or `"E?"` for a number the
    /// ABI does not name.
    pub const fn name(self) -> &'static str {
        match self.0 {
            2 => "ENOENT",
            11 => "EAGAIN",
            14 => "EFAULT",
            22 => "EINVAL",
            28 => "ENOSPC",
            90 => "EMSGSIZE",
            107 => "ENOTCONN",
            114 => "EALREADY",
            _ => "E?",
        }
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// Turns a `Result` into an entry point's return value: 0 on success, the
/// negative errno on failure.
#[inline]
pub const fn ret<T>(r: &Result<T, Errno>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.to_ret(),
    }
}
