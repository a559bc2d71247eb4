//! # Outboard handler SDK
//!
//! Write engine *handlers* in Rust: WebAssembly modules
//! (`wasm32-unknown-unknown`, `crate-type = ["cdylib"]`) that the Outboard
//! engine runs as a mailbox's reader upcall or as a TCP listener's handler,
//! each in a sandboxed instance of its own with a memory cap and a CPU
//! deadline per invocation. The contract is ABI version 1 of
//! docs/HANDLERS.md ("The module's side").
//!
//! What this crate gives a handler:
//!
//! - the `ob_abi` export (ABI version 1), defined here, so linking the crate
//!   is enough; the linker keeps the `memory` export itself;
//! - [`raw`]: the engine's functions as the ABI declares them;
//! - safe wrappers over them at the root ([`input_read`], [`reply`],
//!   [`send`], [`enqueue`], [`tcp_write`], [`kv_get`], [`log`], ...),
//!   returning [`Errno`] on error;
//! - [`Addr`] (the 24-byte address) and [`Kind`] (a message's kind);
//! - memory without an allocator: [`StaticCell`] for state,
//!   [`with_scratch`]/[`with_input`] for buffers of any size;
//! - [`ob_log!`] for formatted log lines;
//! - with the default feature `panic-handler`, a panic handler that traps.
//!
//! The handler itself defines the entry points it serves, with exactly the
//! ABI's signatures:
//!
//! ```ignore
//! #![no_std]
//! use outboard_handler_sdk as ob;
//!
//! /// A request echo: answers each request with its own bytes.
//! #[no_mangle]
//! pub extern "C" fn ob_message(kind: i32, len: i32) -> i32 {
//!     if ob::Kind::from_i32(kind) != Some(ob::Kind::Request) {
//!         return 0;
//!     }
//!     ob::ret(&ob::with_input(len, |req| ob::reply(req)).and_then(|r| r))
//! }
//! ```
//!
//! Optional exports: `ob_init() -> i32` (once per instance, before its
//! first message; non-zero refuses the load), and for TCP handlers
//! `ob_tcp_open(conn)`, `ob_tcp_data(conn, len)`, `ob_tcp_close(conn)`.
//!
//! A handler's state lives in its linear memory across invocations, until a
//! trap (a panic, an out-of-bounds access, an overrun of the deadline, ...)
//! discards the instance; the next message gets a fresh one. State that
//! must survive that belongs in the host key-value store ([`kv_put`]).

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

mod addr;
mod errno;
mod log;
mod mem;
pub mod raw;

pub use addr::{Addr, Kind, FAMILY_IPV4, FAMILY_IPV6};
pub use errno::{ret, Errno};
pub use log::{LogLine, MAX_LOG_LINE};
#[cfg(target_arch = "wasm32")]
pub use mem::with_scratch;
pub use mem::{StaticCell, PAGE_SIZE};

/// The ABI version this crate implements (what `ob_abi` returns).
pub const ABI_VERSION: i32 = 1;

/// The longest key of the key-value store (bytes; keys are 1..=256).
pub const MAX_KEY: usize = 256;

/// The largest value of the key-value store (bytes).
pub const MAX_VALUE: usize = 64 * 1024;

/// [`raw::send`]'s `flags` bit: a reliable message (else a datagram).
pub const SEND_RELIABLE: i32 = 1;

/// The ABI version export the engine checks before anything else: a module
/// that links this crate exports it.
#[no_mangle]
pub extern "C" fn ob_abi() -> i32 {
    ABI_VERSION
}

/// A trap for any panic: the engine discards the instance and answers the
/// request being served as failed.
#[cfg(all(feature = "panic-handler", target_arch = "wasm32"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

/// An offset or length as the ABI's `i32`; one past `i32::MAX` cannot be
/// meant (no handler memory is that large).
#[inline]
fn i32_of(n: usize) -> Result<i32, Errno> {
    i32::try_from(n).map_err(|_| Errno::EMSGSIZE)
}

/// A pointer as the ABI's `i32` (an offset in the 32-bit linear memory).
#[inline]
fn ptr_of(p: *const u8) -> i32 {
    p as usize as i32
}

/// Copies bytes `offset..` of the message or TCP data being handled into
/// `dst`: returns how many were copied (fewer than `dst.len()` at its end,
/// 0 past it).
pub fn input_read(offset: usize, dst: &mut [u8]) -> Result<usize, Errno> {
    let (off, len) = (i32_of(offset)?, i32_of(dst.len())?);
    Errno::check(unsafe { raw::input_read(off, ptr_of(dst.as_mut_ptr()), len) })
}

/// Reads the whole input (`len` bytes, the entry point's argument) into
/// `buf`, returning the filled part; [`Errno::EMSGSIZE`] when it does not
/// fit.
pub fn read_input(len: i32, buf: &mut [u8]) -> Result<&mut [u8], Errno> {
    let len = usize::try_from(len).map_err(|_| Errno::EINVAL)?;
    if len > buf.len() {
        return Err(Errno::EMSGSIZE);
    }
    let mut got = 0;
    while got < len {
        let n = input_read(got, &mut buf[got..len])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(&mut buf[..got])
}

/// Runs `f` with the whole input (`len` bytes, the entry point's argument)
/// in scratch memory ([`with_scratch`]): any size the handler's memory cap
/// allows.
#[cfg(target_arch = "wasm32")]
pub fn with_input<R>(len: i32, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, Errno> {
    let n = usize::try_from(len).map_err(|_| Errno::EINVAL)?;
    with_scratch(n, |buf| read_input(len, buf).map(f))?
}

/// The sender of the message being handled.
pub fn msg_from() -> Result<Addr, Errno> {
    let mut a = Addr::default();
    Errno::check(unsafe { raw::msg_from(ptr_of(&mut a as *mut Addr as *const u8)) })?;
    Ok(a)
}

/// Answers the request being handled with `data`. Once per request
/// ([`Errno::EALREADY`] after); [`Errno::EINVAL`] if the message is not a
/// request.
pub fn reply(data: &[u8]) -> Result<(), Errno> {
    Errno::check(unsafe { raw::reply(ptr_of(data.as_ptr()), i32_of(data.len())?) }).map(drop)
}

/// Sends `data` to `to` from the handler's mailbox: a reliable message if
/// `reliable`, else a datagram. [`Errno::EAGAIN`]: no room now (the reliable
/// flow's queue is full).
pub fn send(to: &Addr, data: &[u8], reliable: bool) -> Result<(), Errno> {
    let flags = if reliable { SEND_RELIABLE } else { 0 };
    let to = ptr_of(to as *const Addr as *const u8);
    Errno::check(unsafe { raw::send(to, ptr_of(data.as_ptr()), i32_of(data.len())?, flags) })
        .map(drop)
}

/// Puts `data` into mailbox `mailbox` of this engine, as a datagram from the
/// handler's mailbox. [`Errno::ENOENT`]: no such mailbox; [`Errno::ENOSPC`]:
/// it is full.
pub fn enqueue(mailbox: u32, data: &[u8]) -> Result<(), Errno> {
    let (ptr, len) = (ptr_of(data.as_ptr()), i32_of(data.len())?);
    Errno::check(unsafe { raw::enqueue(mailbox as i32, ptr, len) }).map(drop)
}

/// Queues `data` on connection `conn`: returns how many bytes were taken
/// (fewer than `data.len()` when its send buffer is full).
pub fn tcp_write(conn: i32, data: &[u8]) -> Result<usize, Errno> {
    Errno::check(unsafe { raw::tcp_write(conn, ptr_of(data.as_ptr()), i32_of(data.len())?) })
}

/// Closes connection `conn` after what was written.
pub fn tcp_close(conn: i32) -> Result<(), Errno> {
    Errno::check(unsafe { raw::tcp_close(conn) }).map(drop)
}

/// The engine's monotonic clock, in nanoseconds.
pub fn now_ns() -> u64 {
    unsafe { raw::now_ns() as u64 }
}

/// Looks `key` up in the handler's key-value store: copies at most
/// `dst.len()` bytes of its value into `dst` and returns the value's full
/// length (which may exceed `dst.len()`); [`Errno::ENOENT`] when absent.
pub fn kv_get(key: &[u8], dst: &mut [u8]) -> Result<usize, Errno> {
    let (k, kl) = (ptr_of(key.as_ptr()), i32_of(key.len())?);
    let (d, cap) = (ptr_of(dst.as_mut_ptr()), i32_of(dst.len())?);
    Errno::check(unsafe { raw::kv_get(k, kl, d, cap) })
}

/// Stores `value` under `key` (keys 1..=[`MAX_KEY`] bytes, values up to
/// [`MAX_VALUE`]); [`Errno::ENOSPC`] beyond the store's cap.
pub fn kv_put(key: &[u8], value: &[u8]) -> Result<(), Errno> {
    let (k, kl) = (ptr_of(key.as_ptr()), i32_of(key.len())?);
    let (v, vl) = (ptr_of(value.as_ptr()), i32_of(value.len())?);
    Errno::check(unsafe { raw::kv_put(k, kl, v, vl) }).map(drop)
}

/// Deletes `key`; [`Errno::ENOENT`] when absent.
pub fn kv_del(key: &[u8]) -> Result<(), Errno> {
    Errno::check(unsafe { raw::kv_del(ptr_of(key.as_ptr()), i32_of(key.len())?) }).map(drop)
}

/// Writes one line to the engine's log (at most [`MAX_LOG_LINE`] bytes;
/// the engine rate-limits lines and answers [`Errno::EAGAIN`] for one it
/// dropped). See also [`ob_log!`].
pub fn log(line: &str) -> Result<(), Errno> {
    Errno::check(unsafe { raw::log(ptr_of(line.as_ptr()), i32_of(line.len())?) }).map(drop)
}
