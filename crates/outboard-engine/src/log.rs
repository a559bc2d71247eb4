//! Structured logs: one logfmt line per event on stderr,
//! `t=SECONDS level=LEVEL event=NAME key=value ...`, filtered by a level set
//! once at start (`--log-level`, or `OUTBOARD_LOG`). Values with spaces are quoted.

use std::fmt::Display;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
}

impl std::str::FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Level, String> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Ok(Level::Error),
            "warn" | "warning" => Ok(Level::Warn),
            "info" => Ok(Level::Info),
            "debug" => Ok(Level::Debug),
            _ => Err(format!("{s:?} is not a log level (error, warn, info, debug)")),
        }
    }
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

pub fn set_level(l: Level) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

pub fn enabled(l: Level) -> bool {
    l as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Writes one event if its level is enabled.
pub fn event(level: Level, name: &str, fields: &[(&str, &dyn Display)]) {
    if !enabled(level) {
        return;
    }
    let t = crate::clock::now().as_secs_f64();
    let mut line = format!("t={t:.6} level={} event={name}", level.name());
    for (k, v) in fields {
        let v = v.to_string();
        if v.is_empty() || v.contains([' ', '"', '=']) {
            line.push_str(&format!(" {k}={v:?}"));
        } else {
            line.push_str(&format!(" {k}={v}"));
        }
    }
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
