//! Handlers through the board (docs/HANDLERS.md): an application loads a
//! WebAssembly module onto its engine as the reader of a mailbox, replaces
//! it, and unloads it. The module crosses in board send buffers (staged on
//! shard 0, then loaded in one command); the engine compiles it, checks it
//! against the handler ABI and starts it, or refuses it (`Error::Errno`:
//! EINVAL with the reason in the engine's log, EPERM for a name another
//! board or the operator holds, E2BIG over 16 MiB, ENOSPC, EADDRINUSE for a
//! mailbox in use, EPROTONOSUPPORT without `--messages`). A board's handlers
//! are unloaded when it detaches or dies.

use crate::board::Board;
use crate::error::{Error, Result};
use outboard_board::command::{BoardCommand, MsgName};
use std::time::Duration;

/// A handler's mailbox and limits; `None`: the engine's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandlerOptions {
    /// The mailbox number; `None`: a number the engine picks, the mailbox
    /// named after the handler (so peers can look it up by that name).
    pub mailbox: Option<u32>,
    /// Its memory cap in bytes (64 KiB to 1 GiB).
    pub memory: Option<usize>,
    /// How long one invocation may run (1 ms to 10 s).
    pub deadline: Option<Duration>,
    /// Faults in a row that disable it (`Some(0)`: never).
    pub max_faults: Option<u32>,
    /// Its key-value store's cap in bytes.
    pub kv_bytes: Option<usize>,
}

fn name(n: &str) -> Result<MsgName> {
    MsgName::new(n).filter(|_| !n.is_empty()).ok_or(Error::Invalid("handler names through the board are 1 to 24 bytes"))
}

impl Board {
    /// Loads `wasm` as handler `handler` (or replaces this board's handler
    /// of that name, keeping its mailbox and key-value store); the mailbox's number.
    pub fn load_handler(&self, handler: &str, wasm: &[u8], o: &HandlerOptions) -> Result<u32> {
        let n = name(handler)?;
        let deadline_ms = match o.deadline {
            None => 0,
            Some(d) => u32::try_from(d.as_millis()).ok().filter(|ms| *ms > 0).ok_or(Error::Invalid("a handler's deadline is 1 ms to 10 s"))?,
        };
        let size = self.inner.borrow().layout.params.dgram_size as usize;
        for chunk in wasm.chunks(size) {
            let mut got = None;
            let mode = self.inner.borrow().mode;
            self.wait(mode, None, |i| {
                got = i.dgram_tx.alloc();
                got.is_some()
            })?;
            let b = got.expect("waited for a buffer");
            let mut i = self.inner.borrow_mut();
            let off = i.layout.arena.offset_of(b);
            // SAFETY: a send buffer from our free list (not the engine's),
            // inside the mapping the board keeps alive, at least a chunk long.
            unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), i.map.as_ptr().add(off), chunk.len()) };
            i.command(BoardCommand::HandlerStage { offset: off as u64, len: chunk.len() as u64 })?;
        }
        let v = self.request_value(
            |sync| BoardCommand::HandlerLoad {
                sync,
                name: n,
                mailbox: o.mailbox.unwrap_or(0),
                memory: o.memory.unwrap_or(0) as u64,
                kv: o.kv_bytes.unwrap_or(0) as u64,
                deadline_ms,
                max_faults: match o.max_faults {
                    None => 0,
                    Some(0) => u32::MAX,
                    Some(n) => n,
                },
            },
            None,
        )?;
        u32::try_from(v).map_err(|_| Error::Invalid("the engine returned a mailbox number out of range"))
    }

    /// Unloads this board's handler `handler` (what waits in its mailbox runs through it first).
    pub fn unload_handler(&self, handler: &str) -> Result<()> {
        let n = name(handler)?;
        self.request_value(|sync| BoardCommand::HandlerUnload { sync, name: n }, None).map(|_| ())
    }
}
