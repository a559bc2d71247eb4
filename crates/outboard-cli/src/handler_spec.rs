//! `--handler NAME=FILE.wasm:mailbox=M|tcp=PORT[:memory=SIZE][:deadline_ms=N][:max_faults=N][:kv=SIZE]`
//! and the TOML config's `[[handler]]` tables: which module to run on which
//! mailbox, with which limits (docs/HANDLERS.md).

use crate::args::{parse_size, show_size};
use outboard_engine::messages::handlers::{HandlerSettings, MailboxSpec};
use outboard_engine::tcp_handlers::TcpHandlerSettings;
use outboard_handler::{Limits, MAX_DEADLINE, MAX_KV, MAX_MEMORY, MIN_MEMORY};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a handler attaches.
#[derive(Debug, Clone, PartialEq)]
pub enum AttachSpec {
    /// A message mailbox's reader (needs `--messages`).
    Mailbox(MailboxSpec),
    /// A TCP port, on every shard.
    Tcp(u16),
}

/// A handler as the command line or the config file gives it (the module not read yet).
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerArg {
    pub name: String,
    pub path: PathBuf,
    pub attach: AttachSpec,
    pub limits: Limits,
}

/// A `[[handler]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandlerFile {
    name: String,
    module: PathBuf,
    mailbox: Option<toml::Value>,
    tcp: Option<u16>,
    memory: Option<toml::Value>,
    deadline_ms: Option<u64>,
    max_faults: Option<u32>,
    kv: Option<toml::Value>,
}

fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        return Err(format!("handler name {name:?}: 1 to 64 letters, digits, '-', '_' or '.'"));
    }
    Ok(())
}

fn mailbox(v: &str) -> Result<MailboxSpec, String> {
    match v.parse::<u32>() {
        Ok(0) => Err("mailbox 0 is the protocol's control mailbox".into()),
        Ok(n) => Ok(MailboxSpec::Number(n)),
        Err(_) if !v.is_empty() && v.len() <= 24 && !v.contains('\0') => Ok(MailboxSpec::Name(v.to_string())),
        Err(_) => Err(format!("mailbox {v:?}: a number (1 to 4294967295) or a name of 1 to 24 bytes")),
    }
}

fn tcp_port(v: &str) -> Result<u16, String> {
    match v.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("tcp port {v:?}: 1 to 65535")),
    }
}

fn attach(mailbox: Option<MailboxSpec>, tcp: Option<u16>, usage: &str) -> Result<AttachSpec, String> {
    match (mailbox, tcp) {
        (Some(m), None) => Ok(AttachSpec::Mailbox(m)),
        (None, Some(p)) => Ok(AttachSpec::Tcp(p)),
        (Some(_), Some(_)) => Err(format!("a handler attaches to a mailbox or a TCP port, not both ({usage})")),
        (None, None) => Err(format!("say where it attaches (mailbox=M or tcp=PORT): {usage}")),
    }
}

fn memory(v: &str) -> Result<usize, String> {
    let n = parse_size(v)?;
    if !(MIN_MEMORY as u64..=MAX_MEMORY as u64).contains(&n) {
        return Err(format!("memory {v}: must be between {} and {}", show_size(MIN_MEMORY as u64), show_size(MAX_MEMORY as u64)));
    }
    Ok(n as usize)
}

fn deadline(ms: u64) -> Result<Duration, String> {
    if ms == 0 || Duration::from_millis(ms) > MAX_DEADLINE {
        return Err(format!("deadline_ms {ms}: must be between 1 and {}", MAX_DEADLINE.as_millis()));
    }
    Ok(Duration::from_millis(ms))
}

fn kv(v: &str) -> Result<usize, String> {
    let n = parse_size(v)?;
    if n > MAX_KV as u64 {
        return Err(format!("kv {v}: must be at most {}", show_size(MAX_KV as u64)));
    }
    Ok(n as usize)
}

/// Parses the flag's value.
pub fn parse(s: &str) -> Result<HandlerArg, String> {
    let usage = "NAME=FILE.wasm:mailbox=M|tcp=PORT[:memory=SIZE][:deadline_ms=N][:max_faults=N][:kv=SIZE]";
    let (name, rest) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected {usage}"))?;
    valid_name(name)?;
    let mut parts = rest.split(':');
    let path = parts.next().filter(|p| !p.is_empty()).ok_or_else(|| format!("{s:?}: no module file; expected {usage}"))?;
    let mut mb = None;
    let mut tcp = None;
    let mut limits = Limits::default();
    for p in parts {
        let (k, v) = p.split_once('=').ok_or_else(|| format!("{p:?}: expected KEY=VALUE ({usage})"))?;
        match k {
            "mailbox" => mb = Some(mailbox(v)?),
            "memory" => limits.memory = memory(v)?,
            "deadline_ms" => limits.deadline = deadline(v.parse().map_err(|_| format!("deadline_ms {v:?} is not a number"))?)?,
            "max_faults" => limits.max_faults = v.parse().map_err(|_| format!("max_faults {v:?}: a number, 0 to never disable"))?,
            "kv" => limits.kv_bytes = kv(v)?,
            "tcp" => tcp = Some(tcp_port(v)?),
            other => return Err(format!("unknown handler setting {other:?} ({usage})")),
        }
    }
    let attach = attach(mb, tcp, usage)?;
    Ok(HandlerArg { name: name.to_string(), path: PathBuf::from(path), attach, limits })
}

fn text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl HandlerFile {
    /// A table of the config file; a relative module path is taken from the file's directory.
    pub fn resolve(&self, config_dir: &Path) -> Result<HandlerArg, String> {
        let at = |e: String| format!("[[handler]] {:?}: {e}", self.name);
        valid_name(&self.name).map_err(at)?;
        let mut limits = Limits::default();
        if let Some(m) = &self.memory {
            limits.memory = memory(&text(m)).map_err(at)?;
        }
        if let Some(d) = self.deadline_ms {
            limits.deadline = deadline(d).map_err(at)?;
        }
        if let Some(f) = self.max_faults {
            limits.max_faults = f;
        }
        if let Some(k) = &self.kv {
            limits.kv_bytes = kv(&text(k)).map_err(at)?;
        }
        let mb = self.mailbox.as_ref().map(|m| mailbox(&text(m))).transpose().map_err(at)?;
        let attach = attach(mb, self.tcp, "mailbox = M or tcp = PORT").map_err(at)?;
        Ok(HandlerArg { name: self.name.clone(), path: config_dir.join(&self.module), attach, limits })
    }
}

impl HandlerArg {
    fn module(&self) -> Result<std::sync::Arc<Vec<u8>>, String> {
        let wasm = std::fs::read(&self.path).map_err(|e| format!("handler {}: {}: {e}", self.name, self.path.display()))?;
        Ok(std::sync::Arc::new(wasm))
    }

    /// Reads the module (compiled and checked when the engine loads it) of
    /// a mailbox handler, or of a TCP handler.
    pub fn read(&self) -> Result<Result<HandlerSettings, TcpHandlerSettings>, String> {
        let (name, source, wasm, limits) = (self.name.clone(), self.path.display().to_string(), self.module()?, self.limits);
        Ok(match &self.attach {
            AttachSpec::Mailbox(m) => Ok(HandlerSettings { name, source, wasm, mailbox: m.clone(), limits }),
            AttachSpec::Tcp(port) => Err(TcpHandlerSettings { name, source, wasm, port: *port, limits }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_impossible_ones_say_why() {
        let h = parse("kv=/tmp/kv.wasm:mailbox=kv:memory=1MiB:deadline_ms=5:max_faults=0:kv=64KiB").unwrap();
        assert_eq!(h.attach, AttachSpec::Mailbox(MailboxSpec::Name("kv".into())));
        assert_eq!((h.limits.memory, h.limits.deadline, h.limits.max_faults, h.limits.kv_bytes), (1 << 20, Duration::from_millis(5), 0, 64 << 10));
        assert_eq!(parse("e=e.wasm:mailbox=12").unwrap().attach, AttachSpec::Mailbox(MailboxSpec::Number(12)));
        assert_eq!(parse("l=l.wasm:tcp=7000").unwrap().attach, AttachSpec::Tcp(7000));
        for (bad, why) in [
            ("kv", "expected"),
            ("kv=", "no module"),
            ("kv=x.wasm", "mailbox=M or tcp=PORT"),
            ("kv=x.wasm:mailbox=0", "control mailbox"),
            ("kv=x.wasm:mailbox=1:memory=0", "between 64 KiB"),
            ("kv=x.wasm:mailbox=1:memory=2GiB", "between 64 KiB"),
            ("kv=x.wasm:mailbox=1:deadline_ms=0", "between 1 and 10000"),
            ("kv=x.wasm:mailbox=1:colour=red", "unknown handler setting"),
            ("k v=x.wasm:mailbox=1", "letters"),
            ("kv=x.wasm:tcp=0", "1 to 65535"),
            ("kv=x.wasm:tcp=80:mailbox=3", "not both"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
