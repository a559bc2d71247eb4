//! `garbage` (a hostile handler, for tests): every message makes it call
//! the engine with bad arguments, all of which the engine must refuse with
//! an error (never touching memory outside the instance, never sending
//! anything):
//!
//! - `reply` from a range outside the memory, from one whose end wraps past
//!   4 GiB, and with a negative length;
//! - `send` to an address of random bytes (the family forced to no valid
//!   value, and the IPv6 address into the reserved `::/8` range, so that
//!   even an engine that failed to check could not reach a real host), and
//!   to an address outside the memory;
//! - `input_read`, `msg_from`, `enqueue`, `kv_put`, `kv_get` and `log` with
//!   pointers outside the memory;
//! - `tcp_write` and `tcp_close` on guessed connection ids (it is a
//!   mailbox handler: it has none).
//!
//! (It also stores one valid key, so that `kv_get` has a value to copy.) It
//! logs each call's return value (three lines), then answers a request
//! with 64 KiB of 0xFF bytes when every call was refused, or with
//! `garbage: accepted <call>` naming the first that was not.

#![no_std]

use ob::{raw, Addr, Kind, StaticCell};
use outboard_handler_sdk as ob;

/// An offset 16 bytes short of 4 GiB: beyond any handler memory.
const FAR: i32 = 0xFFFF_FFF0_u32 as i32;

/// The key `kv_get` is asked for.
const KEY: &[u8] = b"garbage";

/// The 64 KiB answer (all-zero here, so it costs no module size).
static ANSWER: StaticCell<[u8; 65536]> = StaticCell::new([0; 65536]);

/// A xorshift generator seeded from the engine's clock.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// One message arrived: misbehave, then answer.
#[no_mangle]
pub extern "C" fn ob_message(kind: i32, _len: i32) -> i32 {
    let mut rng = Rng(ob::now_ns() | 1);
    let mut junk = [0u8; Addr::SIZE];
    for chunk in junk.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next().to_le_bytes()[..chunk.len()]);
    }
    junk[0] = 0; // ::/8, reserved: never a routable address
    junk[19] |= 1; // family >= 256: neither 4 nor 6
    let junk_ptr = junk.as_ptr() as usize as i32;
    let random_conn = rng.next() as i32;
    // A value to read, so that `kv_get` to a bad buffer has bytes to copy.
    let _ = ob::kv_put(KEY, b"value");

    // SAFETY: the engine checks every pointer and length; none of these
    // calls may write to the handler's memory except inside `junk`.
    let calls: [(&str, i32); 15] = unsafe {
        [
            ("reply(far)", raw::reply(FAR, 4096)),
            ("reply(wrap)", raw::reply(0x7FFF_FFF0, 0x7FFF_FFFF)),
            ("reply(-len)", raw::reply(16, -1)),
            (
                "send(junk)",
                raw::send(
                    junk_ptr,
                    junk_ptr,
                    Addr::SIZE as i32,
                    (rng.next() & 1) as i32,
                ),
            ),
            ("send(far)", raw::send(FAR, junk_ptr, 8, 0)),
            ("input_read(far)", raw::input_read(0, FAR, 4096)),
            ("msg_from(far)", raw::msg_from(-8)),
            ("enqueue(far)", raw::enqueue(-1, FAR, 100)),
            ("kv_put(far)", raw::kv_put(FAR, 16, junk_ptr, 8)),
            (
                "kv_get(far)",
                raw::kv_get(KEY.as_ptr() as usize as i32, KEY.len() as i32, FAR, 4096),
            ),
            ("kv_del(far)", raw::kv_del(FAR, 300)),
            ("log(far)", raw::log(FAR, 64)),
            ("tcp_write(0)", raw::tcp_write(0, junk_ptr, 8)),
            ("tcp_write(rand)", raw::tcp_write(random_conn, junk_ptr, 8)),
            ("tcp_close(rand)", raw::tcp_close(random_conn)),
        ]
    };

    // The results, five calls to a log line (a line holds 256 bytes).
    for (i, group) in calls.chunks(5).enumerate() {
        let mut line = Line::new();
        line.push(b"garbage ");
        line.push_i32(i as i32 + 1);
        line.push(b"/3:");
        for (name, r) in group {
            line.push(b" ");
            line.push(name.as_bytes());
            line.push(b"=");
            line.push_i32(*r);
        }
        let _ = ob::log(line.as_str());
    }

    if Kind::from_i32(kind) != Some(Kind::Request) {
        return 0;
    }
    if let Some((name, _)) = calls.iter().find(|(_, r)| *r >= 0) {
        let mut msg = Line::new();
        msg.push(b"garbage: accepted ");
        msg.push(name.as_bytes());
        return ob::ret(&ob::reply(msg.as_str().as_bytes()));
    }
    let r = ANSWER.with(|a| {
        a.fill(0xFF);
        ob::reply(a)
    });
    ob::ret(&r.unwrap_or(Err(ob::Errno::EAGAIN)))
}

/// A log line built without `core::fmt` (which would triple the module's
/// size); bytes past 256 are dropped.
struct Line {
    buf: [u8; ob::MAX_LOG_LINE],
    len: usize,
}

impl Line {
    fn new() -> Self {
        Line {
            buf: [0; ob::MAX_LOG_LINE],
            len: 0,
        }
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn push_i32(&mut self, v: i32) {
        let mut digits = [0u8; 11];
        let mut i = digits.len();
        let mut u = v.unsigned_abs();
        loop {
            i -= 1;
            digits[i] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if v < 0 {
            i -= 1;
            digits[i] = b'-';
        }
        self.push(&digits[i..]);
    }

    fn as_str(&self) -> &str {
        // Only ASCII is pushed.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("garbage")
    }
}
