//! Handlers through the board (docs/HANDLERS.md): `ob_handler_load` and
//! `ob_handler_unload` over `outboard_api::Board::{load_handler, unload_handler}`.

use crate::{c_str, ffi, handle, ob_board_t, EINVAL};
use libc::{c_char, c_int};

/// Loads the WebAssembly module `wasm[0..len)` onto the board's engine as
/// handler `name` (1 to 24 bytes), the reader of mailbox `mailbox` (0: a
/// number the engine picks, the mailbox named after the handler), or
/// replaces this board's handler of that name (keeping its mailbox and
/// key-value store). Limits, 0 for the engine's default: `memory` bytes
/// (64 KiB to 1 GiB), `deadline_ms` per invocation (1 to 10000),
/// `max_faults` in a row before it is disabled (-1: never), `kv` bytes for
/// its key-value store. Returns the mailbox number, or -1 with errno
/// (EINVAL: refused, the engine's log says why; EPERM: a name another board
/// or the operator holds; E2BIG; ENOSPC; EADDRINUSE; ESHUTDOWN; an engine
/// without `--messages` refuses). The board's handlers are unloaded when it
/// detaches or dies.
#[no_mangle]
pub unsafe extern "C" fn ob_handler_load(
    board: *mut ob_board_t,
    name: *const c_char,
    wasm: *const u8,
    len: usize,
    mailbox: u32,
    memory: u64,
    deadline_ms: u32,
    max_faults: i32,
    kv: u64,
) -> i64 {
    ffi(-1, || {
        let b = handle(board)?;
        let name = c_str(name)?;
        if wasm.is_null() {
            return Err(EINVAL);
        }
        let module = std::slice::from_raw_parts(wasm, len);
        let o = outboard_api::HandlerOptions {
            mailbox: Some(mailbox).filter(|m| *m != 0),
            memory: usize::try_from(memory).ok().filter(|m| *m != 0),
            deadline: Some(deadline_ms).filter(|d| *d != 0).map(|d| std::time::Duration::from_millis(u64::from(d))),
            max_faults: match max_faults {
                0 => None,
                n if n < 0 => Some(0),
                n => Some(n as u32),
            },
            kv_bytes: usize::try_from(kv).ok().filter(|k| *k != 0),
        };
        Ok(i64::from(b.board.load_handler(name, module, &o)?))
    })
}

/// Unloads this board's handler `name` (what waits in its mailbox runs
/// through it first). Returns 0, or -1 with errno (ENOENT; EPERM: not this
/// board's; EINVAL; ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_handler_unload(board: *mut ob_board_t, name: *const c_char) -> c_int {
    ffi(-1, || {
        let b = handle(board)?;
        b.board.unload_handler(c_str(name)?)?;
        Ok(0)
    })
}
