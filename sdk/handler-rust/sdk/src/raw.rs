//! The engine's functions exactly as ABI version 1 declares them
//! (docs/HANDLERS.md, "The module's side"): imported from the wasm module
//! `"outboard"`, every argument and result an `i32` (`now_ns`: `i64`).
//!
//! Pointers are offsets in the handler's linear memory. Every function
//! returns a negative errno on error (see [`Errno`](crate::Errno)); the
//! engine checks every pointer and length against the memory before it
//! copies a byte, and answers a bad one with `-EFAULT`.
//!
//! These are `unsafe` only because they are foreign functions: the engine
//! never writes outside the handler's memory, but a call with a wrong
//! pointer may overwrite the handler's own data. Prefer the safe wrappers at
//! the crate's root.

#[link(wasm_import_module = "outboard")]
extern "C" {
    /// Copies bytes `offset..offset+len` of the message (or TCP data) being
    /// handled to `dst`; returns the bytes copied (fewer at its end).
    pub fn input_read(offset: i32, dst: i32, len: i32) -> i32;

    /// Writes the sender's 24-byte address ([`Addr`](crate::Addr)) to `dst`;
    /// returns 24.
    pub fn msg_from(dst: i32) -> i32;

    /// Answers the request being handled with `ptr..ptr+len` (once:
    /// `-EALREADY` after; `-EINVAL` if it is not a request).
    pub fn reply(ptr: i32, len: i32) -> i32;

    /// Sends `ptr..ptr+len` to the 24-byte address at `addr`, from the
    /// handler's mailbox; `flags` bit 0 ([`SEND_RELIABLE`](crate::SEND_RELIABLE)):
    /// a reliable message, else a datagram. `-EAGAIN`: no room now.
    pub fn send(addr: i32, ptr: i32, len: i32, flags: i32) -> i32;

    /// Puts `ptr..ptr+len` into mailbox `mailbox` of this engine, from the
    /// handler's mailbox, as a datagram. `-ENOENT`: no such mailbox;
    /// `-ENOSPC`: it is full.
    pub fn enqueue(mailbox: i32, ptr: i32, len: i32) -> i32;

    /// Queues `ptr..ptr+len` on connection `conn`; returns how many bytes
    /// were taken (fewer when its send buffer is full).
    pub fn tcp_write(conn: i32, ptr: i32, len: i32) -> i32;

    /// Closes connection `conn` after what was written.
    pub fn tcp_close(conn: i32) -> i32;

    /// The engine's monotonic clock, in nanoseconds.
    pub fn now_ns() -> i64;

    /// Looks `key..key+key_len` up in the handler's key-value store: the
    /// value's length (copying at most `cap` bytes of it to `dst`), or
    /// `-ENOENT`.
    pub fn kv_get(key: i32, key_len: i32, dst: i32, cap: i32) -> i32;

    /// Stores a value under a key: 0; `-ENOSPC` beyond the store's cap.
    /// Keys are 1..=256 bytes, values up to 64 KiB.
    pub fn kv_put(key: i32, key_len: i32, val: i32, val_len: i32) -> i32;

    /// Deletes a key: 0 or `-ENOENT`.
    pub fn kv_del(key: i32, key_len: i32) -> i32;

    /// Writes one line (at most 256 bytes) to the engine's log; `-EAGAIN`
    /// when the engine's rate limit dropped it.
    pub fn log(ptr: i32, len: i32) -> i32;
}
