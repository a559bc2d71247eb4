//! `line`: a TCP line-protocol server. Each complete line (ending in `\n`;
//! a `\r` before it is dropped) is answered:
//!
//! | line          | answer                                  |
//! |---------------|-----------------------------------------|
//! | `PING`        | `PONG\n`                                |
//! | `ECHO <text>` | `<text>\n` (`ECHO` alone: an empty line) |
//! | `QUIT`        | `BYE\n`, then the connection is closed  |
//! | anything else | `ERR unknown command\n`                 |
//!
//! Connections are buffered in a fixed table in static memory: 64
//! connections of 4 KiB each, keyed by the engine's connection id. A 65th
//! connection is refused (reset). A line that does not fit the 4 KiB buffer
//! is answered `ERR line too long\n` and the connection is closed.
//!
//! The ABI has no "writable again" upcall, so an answer the connection's
//! send buffer cannot take whole (a peer that sends but does not read)
//! closes the connection. Once the handler closed a connection its slot is
//! free, and data or a close for it afterwards is ignored.

#![no_std]

use ob::{Errno, StaticCell};
use outboard_handler_sdk as ob;

/// Connections served at once.
const SLOTS: usize = 64;
/// Bytes buffered per connection (the longest line, its `\n` included).
const LINE_MAX: usize = 4096;

/// One connection's state. The all-zero value is a free slot, so the table
/// costs memory, not module size.
struct Slot {
    /// Whether the slot serves a connection.
    used: bool,
    /// The connection's id (valid when `used`).
    conn: i32,
    /// Bytes of `buf` holding a partial line.
    fill: usize,
    /// The partial line.
    buf: [u8; LINE_MAX],
}

const FREE: Slot = Slot {
    used: false,
    conn: 0,
    fill: 0,
    buf: [0; LINE_MAX],
};

static TABLE: StaticCell<[Slot; SLOTS]> = StaticCell::new([FREE; SLOTS]);

/// The slot serving `conn`.
fn find(table: &mut [Slot; SLOTS], conn: i32) -> Option<&mut Slot> {
    table.iter_mut().find(|s| s.used && s.conn == conn)
}

/// A connection was accepted: give it a slot, or refuse it (non-zero: the
/// engine resets it) when all are taken.
#[no_mangle]
pub extern "C" fn ob_tcp_open(conn: i32) -> i32 {
    let taken = TABLE.with(|t| {
        let slot = match t.iter().position(|s| s.used && s.conn == conn) {
            Some(i) => &mut t[i],
            None => t.iter_mut().find(|s| !s.used)?,
        };
        slot.used = true;
        slot.conn = conn;
        slot.fill = 0;
        Some(())
    });
    match taken {
        Some(Some(())) => 0,
        _ => -1,
    }
}

/// `len` bytes arrived on `conn`: buffer them and answer every complete
/// line. A negative return resets the connection.
#[no_mangle]
pub extern "C" fn ob_tcp_data(conn: i32, len: i32) -> i32 {
    let r = TABLE.with(|t| match find(t, conn) {
        Some(slot) => {
            let r = receive(slot, len);
            // Closed (by QUIT, a long line or a failed write): free the slot.
            if !matches!(r, Ok(Open::Yes)) {
                slot.used = false;
            }
            r.map(drop)
        }
        // Not ours (closed by us already): discard.
        None => Ok(()),
    });
    match r {
        Some(r) => ob::ret(&r),
        None => Errno::EAGAIN.to_ret(),
    }
}

/// The peer closed or the connection was reset: free its slot.
#[no_mangle]
pub extern "C" fn ob_tcp_close(conn: i32) -> i32 {
    TABLE.with(|t| {
        if let Some(slot) = find(t, conn) {
            slot.used = false;
        }
    });
    0
}

/// Whether a connection stays open after its data was handled.
enum Open {
    Yes,
    No,
}

/// Reads `len` bytes of input into the slot, answering each complete line.
fn receive(slot: &mut Slot, len: i32) -> Result<Open, Errno> {
    let len = usize::try_from(len).map_err(|_| Errno::EINVAL)?;
    let mut off = 0;
    while off < len {
        if slot.fill == LINE_MAX {
            return close_with(slot.conn, b"ERR line too long\n");
        }
        let want = (len - off).min(LINE_MAX - slot.fill);
        let n = ob::input_read(off, &mut slot.buf[slot.fill..slot.fill + want])?;
        if n == 0 {
            break;
        }
        let scan_from = slot.fill;
        slot.fill += n;
        off += n;
        // Answer the complete lines, then keep the partial one.
        let mut start = 0;
        while let Some(nl) = slot.buf[scan_from.max(start)..slot.fill]
            .iter()
            .position(|c| *c == b'\n')
        {
            let end = scan_from.max(start) + nl;
            let mut line = &slot.buf[start..end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if let Open::No = answer(slot.conn, line)? {
                return Ok(Open::No);
            }
            start = end + 1;
        }
        slot.buf.copy_within(start..slot.fill, 0);
        slot.fill -= start;
    }
    if slot.fill == LINE_MAX {
        return close_with(slot.conn, b"ERR line too long\n");
    }
    Ok(Open::Yes)
}

/// Answers one line (without its `\n`).
fn answer(conn: i32, line: &[u8]) -> Result<Open, Errno> {
    match line {
        b"PING" => write_all(conn, b"PONG\n"),
        b"QUIT" => return close_with(conn, b"BYE\n"),
        b"ECHO" => write_all(conn, b"\n"),
        [b'E', b'C', b'H', b'O', b' ', text @ ..] => {
            write_all(conn, text).and_then(|_| write_all(conn, b"\n"))
        }
        _ => write_all(conn, b"ERR unknown command\n"),
    }
    .map(|_| Open::Yes)
    .or_else(|e| {
        if e == Errno::EAGAIN {
            close_with(conn, b"")
        } else {
            Err(e)
        }
    })
}

/// Writes all of `data`, or fails with [`Errno::EAGAIN`] when the
/// connection's send buffer cannot take it.
fn write_all(conn: i32, data: &[u8]) -> Result<(), Errno> {
    if data.is_empty() {
        return Ok(());
    }
    if ob::tcp_write(conn, data)? < data.len() {
        return Err(Errno::EAGAIN);
    }
    Ok(())
}

/// Writes `last` (as much as is taken) and closes the connection.
fn close_with(conn: i32, last: &[u8]) -> Result<Open, Errno> {
    if !last.is_empty() {
        ob::tcp_write(conn, last)?;
    }
    ob::tcp_close(conn)?;
    Ok(Open::No)
}
