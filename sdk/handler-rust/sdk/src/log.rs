//! Formatted log lines without an allocator.

use crate::Errno;

/// The longest line the engine logs (bytes).
pub const MAX_LOG_LINE: usize = 256;

/// A log line being formatted: `core::fmt::Write` into a 256-byte buffer;
/// text past [`MAX_LOG_LINE`] is cut (at a character boundary). The
/// [`ob_log!`](crate::ob_log) macro formats and sends one.
pub struct LogLine {
    buf: [u8; MAX_LOG_LINE],
    len: usize,
}

impl LogLine {
    /// An empty line.
    pub const fn new() -> Self {
        LogLine {
            buf: [0; MAX_LOG_LINE],
            len: 0,
        }
    }

    /// The text so far.
    pub fn as_str(&self) -> &str {
        // Only whole characters are ever copied in.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }

    /// Writes the line to the engine's log ([`log`](crate::log)).
    pub fn send(&self) -> Result<(), Errno> {
        crate::log(self.as_str())
    }
}

impl Default for LogLine {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Write for LogLine {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = MAX_LOG_LINE - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Formats a line (as `format!` does) and writes it to the engine's log;
/// evaluates to the [`log`](crate::log) call's `Result<(), Errno>`.
///
/// ```ignore
/// let _ = ob_log!("stored {} bytes under {:?}", value.len(), key);
/// ```
#[macro_export]
macro_rules! ob_log {
    ($($arg:tt)*) => {{
        let mut line = $crate::LogLine::new();
        let _ = ::core::fmt::Write::write_fmt(&mut line, ::core::format_args!($($arg)*));
        line.send()
    }};
}
