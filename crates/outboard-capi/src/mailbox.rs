//! Message mailboxes (docs/MESSAGES.md): datagrams, reliable messages and
//! calls between mailboxes anywhere, read and written in place in the board;
//! one-sided writes into registered regions; and VIA-style queue pairs on a
//! completion queue.

use crate::{addr_from_c, addr_to_c, bytes, bytes_mut, c_str, ffi, free, handle, handle_ref, ob_addr_t, ob_board_t, put_opt};
use crate::{Errno, EINVAL, OB_NO_ENDPOINT};
use libc::{c_char, c_int, c_void};
use outboard_api::{Completion, CompletionQueue, Error, Mailbox, MailboxAddr, MailboxOptions, MessageKind, QueuePair, Region, WorkOp};
use std::ptr;
use std::time::Duration;

/// `ob_message_t.kind`: a datagram (no acknowledgement, may be lost).
pub const OB_MSG_DATAGRAM: c_int = 1;
/// `ob_message_t.kind`: a reliable message (exactly once, in order per sender mailbox).
pub const OB_MSG_MESSAGE: c_int = 2;
/// `ob_message_t.kind`: a request: answer it with `ob_mailbox_reply` or
/// `ob_mailbox_reply_buffer` + `ob_mailbox_reply_in_place` (not `ob_mailbox_end_get`).
pub const OB_MSG_REQUEST: c_int = 3;
/// `ob_message_t.kind`: a message in a buffer posted with `ob_mailbox_post_recv` (`tag` is the post's).
pub const OB_MSG_POSTED: c_int = 5;
/// `ob_message_t.kind`: a posted buffer was too small for the message that
/// came (the engine dropped it): `data` is NULL, `len` says how long it was,
/// `tag` is the post's.
pub const OB_MSG_POSTED_TOO_SMALL: c_int = 6;

/// `ob_completion_t.op`: a send (`ob_qp_post_send`) completed.
pub const OB_WC_SEND: c_int = 0;
/// `ob_completion_t.op`: a receive (`ob_qp_post_recv`) completed.
pub const OB_WC_RECV: c_int = 1;

/// A mailbox anywhere: an engine's message address (`host`: its address and
/// message port, `outboard engine --messages PORT`, 7373 by default) and the
/// mailbox's number there. Printed as `HOST:PORT/MAILBOX`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ob_mailbox_addr_t {
    pub host: ob_addr_t,
    pub mailbox: u32,
}

/// A received message in place in the board, as `ob_mailbox_begin_get` gives
/// it: valid until `ob_mailbox_end_get`, a reply, or the next call on the mailbox.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ob_message_t {
    /// `OB_MSG_*`.
    pub kind: c_int,
    /// The sending mailbox.
    pub from: ob_mailbox_addr_t,
    /// The message's bytes (NULL when `len` is 0 and for `OB_MSG_POSTED_TOO_SMALL`).
    pub data: *const c_void,
    /// The message's length.
    pub len: usize,
    /// The post's tag for `OB_MSG_POSTED` and `OB_MSG_POSTED_TOO_SMALL`, else 0.
    pub tag: u32,
}

/// A message mailbox through the engine (from `ob_mailbox_bind`; free with
/// `ob_mailbox_close`). Messages to it wait in the board, where
/// `ob_mailbox_begin_get` reads them in place; messages from it are copied
/// into a board buffer (`ob_mailbox_send`) or written there in place
/// (`ob_mailbox_begin_put`). Calls made from it wait for their responses by
/// tag; sends, failed calls and writes complete by tag
/// (`ob_mailbox_poll_completion`).
pub struct ob_mailbox_t {
    mb: Mailbox,
    /// Regions registered through this handle (the Rust `Region` is needed to give one up).
    regions: Vec<Region>,
}

fn new_mailbox(mb: Mailbox) -> *mut ob_mailbox_t {
    Box::into_raw(Box::new(ob_mailbox_t { mb, regions: Vec::new() }))
}

unsafe fn mailbox_addr_from_c(a: *const ob_mailbox_addr_t) -> Result<MailboxAddr, Errno> {
    let a = a.as_ref().ok_or(EINVAL)?;
    Ok(MailboxAddr { host: addr_from_c(&a.host)?, mailbox: a.mailbox })
}

fn mailbox_addr_to_c(a: MailboxAddr) -> ob_mailbox_addr_t {
    ob_mailbox_addr_t { host: addr_to_c(a.host), mailbox: a.mailbox }
}

/// A C timeout in milliseconds: negative waits forever.
fn timeout(ms: c_int) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// 1 for `Ok`, 0 for a wait that ran out (`WouldBlock`: the timeout, or a
/// non-blocking mailbox), the errno otherwise.
fn got_or_timeout<T>(r: Result<T, Error>, f: impl FnOnce(T)) -> Result<c_int, Errno> {
    match r {
        Ok(v) => {
            f(v);
            Ok(1)
        }
        Err(Error::WouldBlock) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

fn errno_of(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

/// Copies a response into `resp[..cap]` and its full length into `*resp_len` (may be NULL).
unsafe fn copy_response(data: &[u8], resp: *mut c_void, cap: usize, resp_len: *mut usize) -> Result<(), Errno> {
    let out = bytes_mut(resp, cap)?;
    let n = data.len().min(out.len());
    out[..n].copy_from_slice(&data[..n]);
    put_opt(resp_len, data.len());
    Ok(())
}

fn tag_out(tag: u32) -> i64 {
    i64::from(tag)
}

// ---- binding ----

/// Binds a mailbox on the board's engine: number `number` (0: the engine
/// picks one) and, unless `name` is NULL, a name peers can look up
/// (`ob_mailbox_lookup`; 1 to 24 bytes). Returns NULL with errno on failure
/// (EADDRINUSE: the number or name is taken; EINVAL: a bad name;
/// ENOBUFS; ESHUTDOWN; an engine without `--messages` refuses).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_bind(board: *mut ob_board_t, number: u32, name: *const c_char) -> *mut ob_mailbox_t {
    ffi(ptr::null_mut(), || {
        let b = handle(board)?;
        let name = if name.is_null() { None } else { Some(c_str(name)?) };
        let mb = b.board.bind_mailbox(Some(number).filter(|n| *n != 0), name)?;
        Ok(new_mailbox(mb))
    })
}

/// Binds a posted mailbox (number `number`, 0: any): messages to it land
/// only in buffers posted with `ob_mailbox_post_recv` (and come out of
/// `ob_mailbox_begin_get` as `OB_MSG_POSTED`); with none posted they wait
/// in the engine. Returns NULL with errno on failure, as `ob_mailbox_bind`.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_bind_posted(board: *mut ob_board_t, number: u32) -> *mut ob_mailbox_t {
    ffi(ptr::null_mut(), || {
        let b = handle(board)?;
        let o = MailboxOptions { number: Some(number).filter(|n| *n != 0), posted: true, ..Default::default() };
        Ok(new_mailbox(b.board.bind_mailbox_with(&o)?))
    })
}

/// Closes the mailbox (its number and name are free again) and frees the
/// handle. Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_close(mb: *mut ob_mailbox_t) -> c_int {
    free(mb)
}

/// The mailbox's network-wide address into `*out` (give it to peers).
/// Returns 0, or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_addr(mb: *const ob_mailbox_t, out: *mut ob_mailbox_addr_t) -> c_int {
    ffi(-1, || {
        let a = handle_ref(mb)?.mb.addr();
        out.as_mut().ok_or(EINVAL)?.clone_from(&mailbox_addr_to_c(a));
        Ok(0)
    })
}

/// The mailbox's endpoint id (for `ob_eq_add`: readable when a message,
/// response or completion is there); `OB_NO_ENDPOINT` for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_id(mb: *const ob_mailbox_t) -> u32 {
    ffi(OB_NO_ENDPOINT, || Ok(handle_ref(mb)?.mb.id()))
}

/// Which mailbox is called `name` at the engine whose message address is
/// `*host` (e.g. 10.0.0.1 port 7373): its address into `*out`. Asks that
/// engine over the network. Returns 0, or -1 with errno (ENOENT: no such
/// name there; ETIMEDOUT: the engine did not answer; EINVAL).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_lookup(
    board: *mut ob_board_t,
    host: *const ob_addr_t,
    name: *const c_char,
    out: *mut ob_mailbox_addr_t,
) -> c_int {
    ffi(-1, || {
        let b = handle(board)?;
        let host = addr_from_c(host)?;
        let name = c_str(name)?;
        let out = out.as_mut().ok_or(EINVAL)?;
        let a = b.board.lookup(host, name)?;
        out.clone_from(&mailbox_addr_to_c(a));
        Ok(0)
    })
}

/// Sets how this mailbox's calls wait (`OB_MODE_*`): a non-blocking
/// mailbox's `ob_mailbox_begin_get` and sends fail with EAGAIN instead of
/// waiting, and its `*_wait_*` calls only look. Returns 0, or -1 with EINVAL.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_set_mode(mb: *mut ob_mailbox_t, mode: c_int) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        m.mb.set_mode(crate::mode(mode)?);
        Ok(0)
    })
}

// ---- sending ----

/// Sends `buf[0..len]` to the mailbox `*to`: a reliable message (`reliable`
/// non-zero: exactly once, in order per destination; its completion comes
/// by the returned tag, `ob_mailbox_poll_completion`) or a datagram (whole
/// or not at all, no completion). Returns the tag (0 for a datagram), or -1
/// with errno (EMSGSIZE: longer than a board buffer; ENOBUFS, EAGAIN).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_send(
    mb: *mut ob_mailbox_t,
    to: *const ob_mailbox_addr_t,
    buf: *const c_void,
    len: usize,
    reliable: c_int,
) -> i64 {
    ffi(-1, || {
        let m = handle(mb)?;
        let to = mailbox_addr_from_c(to)?;
        let data = bytes(buf, len)?;
        if reliable != 0 {
            Ok(tag_out(m.mb.send_message(to, data)?))
        } else {
            m.mb.send_datagram(to, data)?;
            Ok(0)
        }
    })
}

/// Hands a board buffer the API lent (`room`) to C: its place in `*buf`,
/// its size in `*cap`. EINVAL for a NULL pointer (checked first).
unsafe fn lend(room: outboard_api::Result<&mut [u8]>, buf: *mut *mut c_void, cap: *mut usize) -> Result<c_int, crate::Errno> {
    if buf.is_null() || cap.is_null() {
        return Err(EINVAL);
    }
    let room = room?;
    buf.write(room.as_mut_ptr().cast());
    cap.write(room.len());
    Ok(0)
}

/// Zero-copy send, step 1: sets `*buf`, `*cap` to a board send buffer for
/// one message. Write it there, then call `ob_mailbox_end_put_send` or
/// `ob_mailbox_end_put_call`. Returns 0, or -1 with errno (ENOBUFS, EAGAIN).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_begin_put(mb: *mut ob_mailbox_t, buf: *mut *mut c_void, cap: *mut usize) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        lend(m.mb.begin_put(), buf, cap)
    })
}

/// Zero-copy send, step 2: sends the first `n` bytes of the
/// `ob_mailbox_begin_put` buffer to `*to`, as `ob_mailbox_send` would.
/// Returns the tag (0 for a datagram), or -1 with errno (EMSGSIZE when `n`
/// is more than the buffer: the buffer is given back).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_end_put_send(mb: *mut ob_mailbox_t, n: usize, to: *const ob_mailbox_addr_t, reliable: c_int) -> i64 {
    ffi(-1, || {
        let m = handle(mb)?;
        let to = mailbox_addr_from_c(to)?;
        let tag = m.mb.end_put_send(n, to, reliable != 0)?;
        Ok(if reliable != 0 { tag_out(tag) } else { 0 })
    })
}

/// Zero-copy call: calls `*to` with the first `n` bytes of the
/// `ob_mailbox_begin_put` buffer, as `ob_mailbox_call_start` would.
/// Returns the call's tag, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_end_put_call(mb: *mut ob_mailbox_t, n: usize, to: *const ob_mailbox_addr_t, timeout_ms: u32) -> i64 {
    ffi(-1, || {
        let m = handle(mb)?;
        let to = mailbox_addr_from_c(to)?;
        let t = (timeout_ms != 0).then(|| Duration::from_millis(u64::from(timeout_ms)));
        Ok(tag_out(m.mb.end_put_call(n, to, t)?))
    })
}

// ---- calls ----

/// Calls the mailbox `*to` with `req[0..req_len]` and waits for the
/// response (executed at most once at the server). Copies the response into
/// `resp` (at most `resp_cap` bytes; the rest is cut off) and its full
/// length into `*resp_len` (may be NULL). Returns 0, or -1 with errno
/// (ETIMEDOUT: no response in time; ECONNREFUSED: no such mailbox;
/// ECONNRESET: the server restarted; EMSGSIZE; ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_call(
    mb: *mut ob_mailbox_t,
    to: *const ob_mailbox_addr_t,
    req: *const c_void,
    req_len: usize,
    resp: *mut c_void,
    resp_cap: usize,
    resp_len: *mut usize,
) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        let to = mailbox_addr_from_c(to)?;
        let req = bytes(req, req_len)?;
        // Checked before the call is made: a bad buffer must not lose a response.
        bytes_mut(resp, resp_cap)?;
        let r = m.mb.call(to, req)?;
        copy_response(&r, resp, resp_cap, resp_len)?;
        Ok(0)
    })
}

/// Starts a call of `*to` with `req[0..len]` (many may be outstanding; the
/// engine gives up after `timeout_ms`, 0: its default). Returns the call's
/// tag for `ob_mailbox_wait_call` / `ob_mailbox_poll_call`, or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_call_start(
    mb: *mut ob_mailbox_t,
    to: *const ob_mailbox_addr_t,
    req: *const c_void,
    len: usize,
    timeout_ms: u32,
) -> i64 {
    ffi(-1, || {
        let m = handle(mb)?;
        let to = mailbox_addr_from_c(to)?;
        let t = (timeout_ms != 0).then(|| Duration::from_millis(u64::from(timeout_ms)));
        Ok(tag_out(m.mb.call_start(to, bytes(req, len)?, t)?))
    })
}

/// Waits for the response of the call `tag` (from `ob_mailbox_call_start`)
/// and copies it as `ob_mailbox_call` does. Returns 0, or -1 with errno:
/// the call's failure (ETIMEDOUT, ECONNREFUSED, ECONNRESET), or EAGAIN on a
/// non-blocking mailbox with no response yet, or EINVAL for a tag that is
/// not an outstanding call (its result already taken). A failed call's
/// error comes here only, never to `ob_mailbox_poll_completion`.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_wait_call(
    mb: *mut ob_mailbox_t,
    tag: u32,
    resp: *mut c_void,
    cap: usize,
    resp_len: *mut usize,
) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        bytes_mut(resp, cap)?;
        let r = m.mb.wait_call(tag, None)?;
        copy_response(&r, resp, cap, resp_len)?;
        Ok(0)
    })
}

/// The response of the call `tag` if it came, copied as `ob_mailbox_call`
/// does. Returns 1 (copied), 0 (not yet), or -1 with errno (the call failed:
/// ETIMEDOUT, ECONNREFUSED, ECONNRESET).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_poll_call(
    mb: *mut ob_mailbox_t,
    tag: u32,
    resp: *mut c_void,
    cap: usize,
    resp_len: *mut usize,
) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        bytes_mut(resp, cap)?;
        match m.mb.poll_call(tag) {
            None => Ok(0),
            Some(r) => {
                copy_response(&r?, resp, cap, resp_len)?;
                Ok(1)
            }
        }
    })
}

// ---- completions ----

/// The next completion, if there is one: a reliable message or write
/// acknowledged (`*err` = 0) or failed (`*err` an errno), a failed call, or
/// a send refused; `*tag` is its tag (each pointer may be NULL). Returns 1
/// (one taken), 0 (none), or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_poll_completion(mb: *mut ob_mailbox_t, tag: *mut u32, err: *mut c_int) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        match m.mb.poll_completion() {
            None => Ok(0),
            Some((t, r)) => {
                put_opt(tag, t);
                put_opt(err, errno_of(r));
                Ok(1)
            }
        }
    })
}

/// Waits up to `timeout_ms` (-1: forever, 0: just look) for a completion,
/// as `ob_mailbox_poll_completion`. Returns 1 (one taken), 0 (none in time),
/// or -1 with errno (ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_wait_completion(mb: *mut ob_mailbox_t, timeout_ms: c_int, tag: *mut u32, err: *mut c_int) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        got_or_timeout(m.mb.wait_completion(timeout(timeout_ms)), |(t, r)| {
            put_opt(tag, t);
            put_opt(err, errno_of(r));
        })
    })
}

// ---- receiving ----

/// Zero-copy receive, step 1: the next message (datagram, reliable message,
/// request or posted message; never a response: those go to their calls)
/// into `*out`, its bytes in place in the board. They stay valid until
/// `ob_mailbox_end_get`, a reply, or any other call on this mailbox.
/// Returns 0, or -1 with errno (EAGAIN when non-blocking and none).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_begin_get(mb: *mut ob_mailbox_t, out: *mut ob_message_t) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        let out = out.as_mut().ok_or(EINVAL)?;
        let msg = m.mb.begin_get()?;
        let kind = match msg.kind {
            MessageKind::Datagram => OB_MSG_DATAGRAM,
            MessageKind::Message => OB_MSG_MESSAGE,
            MessageKind::Request => OB_MSG_REQUEST,
            MessageKind::Posted => OB_MSG_POSTED,
            MessageKind::PostedTooSmall => OB_MSG_POSTED_TOO_SMALL,
        };
        let data = if msg.data.is_empty() { ptr::null() } else { msg.data.as_ptr().cast() };
        *out = ob_message_t { kind, from: mailbox_addr_to_c(msg.from), data, len: msg.len, tag: msg.tag };
        Ok(0)
    })
}

/// Zero-copy receive, step 2: gives the message `ob_mailbox_begin_get`
/// returned back to the engine (a request given back this way is never
/// answered: its caller times out). Returns 0, or -1 with errno (EINVAL:
/// none held).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_end_get(mb: *mut ob_mailbox_t) -> c_int {
    ffi(-1, || {
        handle(mb)?.mb.end_get()?;
        Ok(0)
    })
}

/// Answers the held request (`OB_MSG_REQUEST` from `ob_mailbox_begin_get`)
/// with `buf[0..len]` (written over the request when it fits, else through
/// another board buffer) and gives the request back. `buf` may point into
/// the request itself. Returns 0, or -1 with errno (EINVAL: no request held;
/// EMSGSIZE).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_reply(mb: *mut ob_mailbox_t, buf: *const c_void, len: usize) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        // `buf` may lie in the request's buffer, which the reply overwrites:
        // then it goes through a copy (and no slice of it outlives this check).
        let (at, room) = m.mb.reply_buffer().map(|r| (r.as_ptr() as usize, r.len()))?;
        let p = buf as usize;
        if len > 0 && p < at + room && at < p.saturating_add(len) {
            let response = bytes(buf, len)?.to_vec();
            m.mb.reply(&response)?;
        } else {
            m.mb.reply(bytes(buf, len)?)?;
        }
        Ok(0)
    })
}

/// Zero-copy reply, step 1: sets `*buf`, `*cap` to the held request's own
/// buffer (the request's bytes are at its start: read what you need before
/// writing over them). Write the response there, then call
/// `ob_mailbox_reply_in_place`. Returns 0, or -1 with errno (EINVAL: no
/// request held).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_reply_buffer(mb: *mut ob_mailbox_t, buf: *mut *mut c_void, cap: *mut usize) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        lend(m.mb.reply_buffer(), buf, cap)
    })
}

/// Zero-copy reply, step 2: answers the held request with the first `len`
/// bytes of the `ob_mailbox_reply_buffer` buffer. Returns 0, or -1 with
/// errno (EMSGSIZE: more than the buffer; EINVAL: no request held).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_reply_in_place(mb: *mut ob_mailbox_t, len: usize) -> c_int {
    ffi(-1, || {
        handle(mb)?.mb.reply_in_place(len)?;
        Ok(0)
    })
}

/// Posts a receive buffer (a board send buffer, lent to the engine until a
/// message fills it) on a posted mailbox (`ob_mailbox_bind_posted`): the
/// next message lands there and comes out of `ob_mailbox_begin_get` with
/// this `tag`. Returns 0, or -1 with errno (ENOBUFS, EAGAIN).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_post_recv(mb: *mut ob_mailbox_t, tag: u32) -> c_int {
    ffi(-1, || {
        handle(mb)?.mb.post_recv(tag)?;
        Ok(0)
    })
}

// ---- one-sided writes ----

/// Registers a board buffer (zeroed first) as a region peers write into
/// with `ob_mailbox_write` by its cookie and an offset. `tripwire`: the
/// offset of a byte whose writing posts a tripwire (`ob_mailbox_wait_tripwire`),
/// -1 for none; `notify` non-zero: a note per write (`ob_mailbox_poll_write`).
/// Sets `*cookie`, and `*region`, `*region_len` (these two may be NULL) to
/// the region's bytes in the board, which the engine writes as peers' writes
/// land, until `ob_mailbox_unregister`. Returns 0, or -1 with errno
/// (ENOBUFS; EINVAL for NULL `cookie` or a tripwire below -1).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_register(
    mb: *mut ob_mailbox_t,
    tripwire: i64,
    notify: c_int,
    cookie: *mut u64,
    region: *mut *const c_void,
    region_len: *mut usize,
) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        if cookie.is_null() {
            return Err(EINVAL);
        }
        let tripwire = match tripwire {
            -1 => None,
            t => Some(usize::try_from(t).map_err(|_| EINVAL)?),
        };
        let r = m.mb.register(tripwire, notify != 0)?;
        m.regions.push(r);
        let at = m.mb.region_bytes(&r).as_ptr();
        cookie.write(r.cookie);
        put_opt(region, at.cast());
        put_opt(region_len, r.len);
        Ok(0)
    })
}

/// Gives up the region `cookie` registered through this mailbox (its
/// buffer becomes a send buffer again; the pointer `ob_mailbox_register`
/// gave is no longer the region). Returns 0, or -1 with errno (EINVAL: no
/// such region).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_unregister(mb: *mut ob_mailbox_t, cookie: u64) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        let k = m.regions.iter().position(|r| r.cookie == cookie).ok_or(EINVAL)?;
        let r = m.regions.remove(k);
        m.mb.unregister(r)?;
        Ok(0)
    })
}

/// Writes `buf[0..len]` into the region `cookie` of the engine whose message
/// address is `*host`, at `offset` (reliable and in order from this
/// mailbox). Returns the tag its completion comes by once that engine has
/// it (`ob_mailbox_poll_completion`), or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_write(
    mb: *mut ob_mailbox_t,
    host: *const ob_addr_t,
    cookie: u64,
    offset: u32,
    buf: *const c_void,
    len: usize,
) -> i64 {
    ffi(-1, || {
        let m = handle(mb)?;
        let host = addr_from_c(host)?;
        Ok(tag_out(m.mb.write(host, cookie, offset, bytes(buf, len)?)?))
    })
}

/// A write that landed in one of this mailbox's regions registered with
/// `notify`: its `*offset` and `*len` (each may be NULL). Returns 1 (one
/// taken), 0 (none), or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_poll_write(mb: *mut ob_mailbox_t, offset: *mut u32, len: *mut u32) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        match m.mb.poll_write() {
            None => Ok(0),
            Some((o, n)) => {
                put_opt(offset, o);
                put_opt(len, n);
                Ok(1)
            }
        }
    })
}

/// Waits up to `timeout_ms` (-1: forever, 0: just look) until a write
/// covers the tripwire byte of one of this mailbox's regions; that region's
/// cookie into `*cookie` (may be NULL). Returns 1 (a tripwire), 0 (none in
/// time), or -1 with errno (ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_mailbox_wait_tripwire(mb: *mut ob_mailbox_t, timeout_ms: c_int, cookie: *mut u64) -> c_int {
    ffi(-1, || {
        let m = handle(mb)?;
        got_or_timeout(m.mb.wait_tripwire(timeout(timeout_ms)), |c| put_opt(cookie, c))
    })
}

// ---- queue pairs ----

/// One completion of a queue pair, as `ob_cq_poll` / `ob_cq_wait` give it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ob_completion_t {
    /// The queue pair (its `ob_qp_create` index).
    pub qp: c_int,
    /// `OB_WC_SEND` or `OB_WC_RECV`.
    pub op: c_int,
    /// The work-request id given to `ob_qp_post_send` / `ob_qp_post_recv`.
    pub wr_id: u32,
    /// 0, or the errno it failed with (EMSGSIZE: a message larger than the posted buffer, dropped).
    pub err: c_int,
    /// A receive's message length (0 for sends).
    pub len: usize,
}

/// A completion queue (from `ob_cq_new`; free with `ob_cq_free`) and the
/// queue pairs it owns (`ob_qp_create`), named by index. A queue pair is a
/// posted mailbox and the peer mailbox its sends go to (VIA's model): sends
/// are reliable messages, receives land in buffers posted with
/// `ob_qp_post_recv`; with none posted, messages wait in the engine.
/// Every queue pair of one completion queue is on the same board.
pub struct ob_cq_t {
    cq: CompletionQueue,
    pairs: usize,
    /// The board of its pairs, by its attach socket (open, so unique, while the pairs hold the board).
    board_fd: Option<c_int>,
}

impl ob_cq_t {
    fn pair(&self, qp: c_int) -> Result<usize, Errno> {
        usize::try_from(qp).ok().filter(|q| *q < self.pairs).ok_or(EINVAL)
    }
}

fn completion_to_c(c: Completion) -> ob_completion_t {
    let (err, len) = match c.result {
        Ok(n) => (0, n),
        Err(e) => (e.errno(), 0),
    };
    ob_completion_t {
        qp: c_int::try_from(c.qp).unwrap_or(c_int::MAX),
        op: match c.op {
            WorkOp::Send => OB_WC_SEND,
            WorkOp::Recv => OB_WC_RECV,
        },
        wr_id: c.wr_id,
        err,
        len,
    }
}

/// A new, empty completion queue; NULL with errno on failure.
#[no_mangle]
pub extern "C" fn ob_cq_new() -> *mut ob_cq_t {
    ffi(ptr::null_mut(), || Ok(Box::into_raw(Box::new(ob_cq_t { cq: CompletionQueue::new(), pairs: 0, board_fd: None }))))
}

/// Frees the completion queue and closes its queue pairs. Returns 0, or -1
/// with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_cq_free(cq: *mut ob_cq_t) -> c_int {
    free(cq)
}

/// Creates a queue pair on `board` (its mailbox number `number`, 0: any)
/// in the completion queue. Returns its index (0, 1, ...), or -1 with errno
/// (EINVAL: NULL, or a board other than that of the queue's other pairs;
/// as `ob_mailbox_bind_posted`).
#[no_mangle]
pub unsafe extern "C" fn ob_qp_create(cq: *mut ob_cq_t, board: *mut ob_board_t, number: u32) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let b = handle(board)?;
        let fd = b.board.attach_socket_fd();
        if q.board_fd.is_some_and(|f| f != fd) {
            return Err(EINVAL);
        }
        let index = c_int::try_from(q.pairs).map_err(|_| Errno(libc::ENOBUFS))?;
        let pair = QueuePair::bind(&b.board, Some(number).filter(|n| *n != 0))?;
        q.cq.add(pair);
        q.pairs += 1;
        q.board_fd = Some(fd);
        Ok(index)
    })
}

/// The queue pair's address into `*out` (give it to the peer for its
/// `ob_qp_connect`). Returns 0, or -1 with EINVAL (NULL, no such pair).
#[no_mangle]
pub unsafe extern "C" fn ob_qp_addr(cq: *mut ob_cq_t, qp: c_int, out: *mut ob_mailbox_addr_t) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let i = q.pair(qp)?;
        let out = out.as_mut().ok_or(EINVAL)?;
        out.clone_from(&mailbox_addr_to_c(q.cq.qp(i).addr()));
        Ok(0)
    })
}

/// Sets where the queue pair's sends go: the peer queue pair's address.
/// Returns 0, or -1 with errno (EINVAL, EAFNOSUPPORT).
#[no_mangle]
pub unsafe extern "C" fn ob_qp_connect(cq: *mut ob_cq_t, qp: c_int, peer: *const ob_mailbox_addr_t) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let i = q.pair(qp)?;
        let peer = mailbox_addr_from_c(peer)?;
        q.cq.qp(i).connect(peer);
        Ok(0)
    })
}

/// Sends `buf[0..len]` to the queue pair's peer (a reliable message): an
/// `OB_WC_SEND` completion with `wr_id` follows once the peer's engine has
/// it. Returns 0, or -1 with errno (EINVAL: not connected; EMSGSIZE,
/// ENOBUFS).
#[no_mangle]
pub unsafe extern "C" fn ob_qp_post_send(cq: *mut ob_cq_t, qp: c_int, buf: *const c_void, len: usize, wr_id: u32) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let i = q.pair(qp)?;
        q.cq.post_send(i, bytes(buf, len)?, wr_id)?;
        Ok(0)
    })
}

/// Posts a receive buffer (a board buffer of the board's datagram size) on
/// the queue pair: the next message lands there and completes as
/// `OB_WC_RECV` with `wr_id`. Returns 0, or -1 with errno (ENOBUFS).
#[no_mangle]
pub unsafe extern "C" fn ob_qp_post_recv(cq: *mut ob_cq_t, qp: c_int, wr_id: u32) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let i = q.pair(qp)?;
        q.cq.post_recv(i, wr_id)?;
        Ok(0)
    })
}

/// The next completion of any queue pair into `*out`, if there is one.
/// After an `OB_WC_RECV` completion the pair holds its buffer (read it with
/// `ob_qp_data`) and reports no further receive until `ob_qp_repost` or
/// `ob_qp_release`. Returns 1 (one taken), 0 (none), or -1 with EINVAL for NULL.
#[no_mangle]
pub unsafe extern "C" fn ob_cq_poll(cq: *mut ob_cq_t, out: *mut ob_completion_t) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let out = out.as_mut().ok_or(EINVAL)?;
        match q.cq.poll() {
            None => Ok(0),
            Some(c) => {
                *out = completion_to_c(c);
                Ok(1)
            }
        }
    })
}

/// Waits up to `timeout_ms` (-1: forever, 0: just look) for the next
/// completion of any queue pair, as `ob_cq_poll` (sleeping in the board's
/// mode; a polling board spins). Returns 1 (one taken), 0 (none in time),
/// or -1 with errno (EINVAL: no queue pairs; ESHUTDOWN).
#[no_mangle]
pub unsafe extern "C" fn ob_cq_wait(cq: *mut ob_cq_t, timeout_ms: c_int, out: *mut ob_completion_t) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let out = out.as_mut().ok_or(EINVAL)?;
        got_or_timeout(q.cq.wait(timeout(timeout_ms)), |c| *out = completion_to_c(c))
    })
}

/// The message of the queue pair's last `OB_WC_RECV` completion, in place:
/// `*buf`, `*len`, valid until `ob_qp_repost` or `ob_qp_release`. Returns
/// 0, or -1 with errno (EINVAL: no receive completion held).
#[no_mangle]
pub unsafe extern "C" fn ob_qp_data(cq: *mut ob_cq_t, qp: c_int, buf: *mut *const c_void, len: *mut usize) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let i = q.pair(qp)?;
        if buf.is_null() || len.is_null() {
            return Err(EINVAL);
        }
        let data = q.cq.data(i)?;
        buf.write(if data.is_empty() { ptr::null() } else { data.as_ptr().cast() });
        len.write(data.len());
        Ok(0)
    })
}

/// Posts the buffer of the queue pair's last receive completion again, as
/// `wr_id` (no copy, no new buffer). Returns 0, or -1 with errno (EINVAL:
/// no receive completion held).
#[no_mangle]
pub unsafe extern "C" fn ob_qp_repost(cq: *mut ob_cq_t, qp: c_int, wr_id: u32) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let i = q.pair(qp)?;
        q.cq.repost(i, wr_id)?;
        Ok(0)
    })
}

/// Frees the buffer of the queue pair's last receive completion (a
/// receive posted fewer from now on). Returns 0 (also when none is held),
/// or -1 with errno.
#[no_mangle]
pub unsafe extern "C" fn ob_qp_release(cq: *mut ob_cq_t, qp: c_int) -> c_int {
    ffi(-1, || {
        let q = handle(cq)?;
        let i = q.pair(qp)?;
        q.cq.release(i)?;
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{set_errno, OB_AF_INET, OB_AF_INET6};

    fn errno() -> c_int {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() }
    }

    #[test]
    fn null_handles_and_pointers_give_einval() {
        let null = ptr::null_mut::<ob_mailbox_t>();
        let mut tag = 0u32;
        let mut m = ob_message_t { kind: 0, from: ob_mailbox_addr_t::default(), data: ptr::null(), len: 0, tag: 0 };
        unsafe {
            set_errno(0);
            assert!(ob_mailbox_bind(ptr::null_mut(), 0, ptr::null()).is_null());
            assert_eq!(errno(), libc::EINVAL);
            assert!(ob_mailbox_bind_posted(ptr::null_mut(), 0).is_null());
            assert_eq!(ob_mailbox_close(null), -1);
            assert_eq!(ob_mailbox_addr(null, ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_id(null), OB_NO_ENDPOINT);
            assert_eq!(ob_mailbox_lookup(ptr::null_mut(), ptr::null(), ptr::null(), ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_send(null, ptr::null(), ptr::null(), 0, 1), -1);
            assert_eq!(ob_mailbox_call(null, ptr::null(), ptr::null(), 0, ptr::null_mut(), 0, ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_call_start(null, ptr::null(), ptr::null(), 0, 0), -1);
            assert_eq!(ob_mailbox_wait_call(null, 1, ptr::null_mut(), 0, ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_poll_call(null, 1, ptr::null_mut(), 0, ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_poll_completion(null, &mut tag, ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_wait_completion(null, 0, &mut tag, ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_begin_get(null, &mut m), -1);
            assert_eq!(ob_mailbox_end_get(null), -1);
            assert_eq!(ob_mailbox_reply(null, ptr::null(), 0), -1);
            assert_eq!(ob_mailbox_reply_in_place(null, 0), -1);
            assert_eq!(ob_mailbox_set_mode(null, 0), -1);
            assert_eq!(ob_mailbox_register(null, -1, 0, ptr::null_mut(), ptr::null_mut(), ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_unregister(null, 1), -1);
            assert_eq!(ob_mailbox_write(null, ptr::null(), 1, 0, ptr::null(), 0), -1);
            assert_eq!(ob_mailbox_poll_write(null, ptr::null_mut(), ptr::null_mut()), -1);
            assert_eq!(ob_mailbox_wait_tripwire(null, 0, ptr::null_mut()), -1);
            assert_eq!(errno(), libc::EINVAL);
        }
    }

    #[test]
    fn queue_pair_indexes_are_checked() {
        unsafe {
            let cq = ob_cq_new();
            assert!(!cq.is_null());
            let mut c = ob_completion_t::default();
            // No pairs: nothing to poll, nothing to wait on, no index valid.
            assert_eq!(ob_cq_poll(cq, &mut c), 0);
            set_errno(0);
            assert_eq!(ob_cq_wait(cq, 0, &mut c), -1);
            assert_eq!(errno(), libc::EINVAL);
            for qp in [-1, 0, 1] {
                set_errno(0);
                assert_eq!(ob_qp_post_recv(cq, qp, 1), -1);
                assert_eq!(errno(), libc::EINVAL, "qp {qp}: EINVAL, not a panic's EIO");
                assert_eq!(ob_qp_addr(cq, qp, &mut ob_mailbox_addr_t::default()), -1);
                assert_eq!(ob_qp_release(cq, qp), -1);
            }
            assert_eq!(ob_qp_create(cq, ptr::null_mut(), 0), -1);
            assert_eq!(ob_cq_poll(cq, ptr::null_mut()), -1);
            assert_eq!(ob_cq_free(cq), 0);
            assert_eq!(ob_cq_poll(ptr::null_mut(), &mut c), -1);
            assert_eq!(ob_cq_free(ptr::null_mut()), -1);
        }
    }

    #[test]
    fn mailbox_addresses_round_trip_and_check_the_family() {
        let a: MailboxAddr = "10.0.0.1:7373/5".parse().unwrap();
        let c = mailbox_addr_to_c(a);
        assert_eq!((c.host.family, c.host.port, c.mailbox), (OB_AF_INET, 7373, 5));
        assert_eq!(unsafe { mailbox_addr_from_c(&c) }.ok(), Some(a));
        let a6: MailboxAddr = "[fd00::1]:7373/9".parse().unwrap();
        assert_eq!(mailbox_addr_to_c(a6).host.family, OB_AF_INET6);
        assert_eq!(unsafe { mailbox_addr_from_c(&mailbox_addr_to_c(a6)) }.ok(), Some(a6));
        let bad = ob_mailbox_addr_t { host: ob_addr_t { family: 3, ..Default::default() }, mailbox: 1 };
        assert_eq!(unsafe { mailbox_addr_from_c(&bad) }.err().map(|Errno(e)| e), Some(libc::EAFNOSUPPORT));
        assert_eq!(unsafe { mailbox_addr_from_c(ptr::null()) }.err().map(|Errno(e)| e), Some(libc::EINVAL));
    }

    #[test]
    fn responses_are_cut_to_the_buffer_with_the_full_length_reported() {
        let mut buf = [0u8; 4];
        let mut n = 0usize;
        unsafe {
            assert!(copy_response(b"abcdef", buf.as_mut_ptr().cast(), buf.len(), &mut n).is_ok());
            assert_eq!((&buf, n), (b"abcd", 6));
            assert!(copy_response(b"xy", buf.as_mut_ptr().cast(), buf.len(), ptr::null_mut()).is_ok());
            assert_eq!(&buf[..2], b"xy");
            assert!(copy_response(b"xy", ptr::null_mut(), 0, &mut n).is_ok());
            assert_eq!(n, 2, "a NULL buffer of 0 bytes just asks the length");
        }
    }

    #[test]
    fn waits_that_run_out_are_zero_not_errors() {
        assert_eq!(got_or_timeout(Ok(5), |_| {}).ok(), Some(1));
        assert_eq!(got_or_timeout::<()>(Err(Error::WouldBlock), |_| {}).ok(), Some(0));
        assert_eq!(got_or_timeout::<()>(Err(Error::EngineGone), |_| {}).err().map(|Errno(e)| e), Some(libc::ESHUTDOWN));
        assert_eq!(timeout(-1), None);
        assert_eq!(timeout(0), Some(Duration::ZERO));
    }
}

