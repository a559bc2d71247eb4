//! The hop trace: where a message's time goes between two applications.
//!
//! A request from one application to another crosses five hops, and its
//! response five more: the application writes it into its board, the
//! engine picks it up, the frame goes out on the link, the other engine
//! takes the frame in and delivers the bytes to its application's board,
//! and that application wakes and sees them. `outboard bench latency
//! --breakdown` prints the median of each hop; this crate is what records
//! them, in every process a message passes through (applications on the
//! native API or the shim, daemon engines, inline engines).
//!
//! **Marked messages.** Only messages that carry [`MAGIC`] in their bytes
//! 8..16 are traced; their bytes 0..8 are the message's tag (little-endian).
//! Each hop point looks at the first bytes of what passes it (a stream's
//! newly written or newly arrived bytes, a frame's TCP payload) and, when
//! they are marked, records `(hop, tag, CLOCK_MONOTONIC ns)`. All processes
//! on a machine share that clock, so the records of different processes
//! can be subtracted. Nothing else in a payload is read or changed.
//!
//! **Turning it on.** A process traces when the environment variable
//! `OUTBOARD_TRACE_HOPS` names a path prefix when it first passes a hop
//! point; its records go to `PREFIX.PID` (one `hop tag ns` line each) when
//! it exits normally, or at [`flush`]. Records are kept in memory until
//! then, at most [`MAX_RECORDS`] (later ones are counted and dropped, and
//! the count is the file's last line). With the variable unset, every hop
//! point costs one relaxed load of a static and a branch.
//!
//! The clock is read only for marked bytes, so tracing changes the traced
//! run's latency by a few clock reads per hop (tens of ns each): compare
//! the breakdown's sum with the traced run's own round trip, not with an
//! untraced run's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

/// Bytes 8..16 of a traced message.
pub const MAGIC: [u8; 8] = *b"OBHOPTRC";

/// The environment variable that turns tracing on (a path prefix).
pub const ENV: &str = "OUTBOARD_TRACE_HOPS";

/// Records kept per process (24 bytes each in memory).
pub const MAX_RECORDS: usize = 1 << 21;

/// Where a marked message was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Hop {
    /// The application published the bytes to its engine (a stream's
    /// `end_put`/`send`, the shim's `send`).
    AppWrite = 0,
    /// The engine took them from the board (the push command).
    EnginePickup = 1,
    /// A frame carrying them was built and handed to the link.
    FrameOut = 2,
    /// The other engine's link gave it the frame.
    FrameIn = 3,
    /// The engine published the bytes to the application's board.
    BoardDeliver = 4,
    /// The application's read saw them (`begin_get`/`recv` returned).
    AppWake = 5,
}

impl Hop {
    pub const ALL: [Hop; 6] =
        [Hop::AppWrite, Hop::EnginePickup, Hop::FrameOut, Hop::FrameIn, Hop::BoardDeliver, Hop::AppWake];

    pub fn name(self) -> &'static str {
        match self {
            Hop::AppWrite => "app_write",
            Hop::EnginePickup => "engine_pickup",
            Hop::FrameOut => "frame_out",
            Hop::FrameIn => "frame_in",
            Hop::BoardDeliver => "board_deliver",
            Hop::AppWake => "app_wake",
        }
    }

    pub fn from_name(s: &str) -> Option<Hop> {
        Hop::ALL.into_iter().find(|h| h.name() == s)
    }
}

/// One record: a marked message's tag seen at a hop at `ns` (CLOCK_MONOTONIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub hop: Hop,
    pub tag: u64,
    pub ns: u64,
}

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static PATH: OnceLock<PathBuf> = OnceLock::new();
static RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// True when this process traces (`OUTBOARD_TRACE_HOPS` set at first use).
#[inline]
pub fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        OFF => false,
        ON => true,
        _ => init(),
    }
}

#[cold]
fn init() -> bool {
    let on = match std::env::var_os(ENV) {
        Some(p) if !p.is_empty() => {
            let mut path = PathBuf::from(p).into_os_string();
            path.push(format!(".{}", std::process::id()));
            let _ = PATH.set(PathBuf::from(path));
            true
        }
        _ => false,
    };
    let prev = STATE.compare_exchange(UNKNOWN, if on { ON } else { OFF }, Ordering::AcqRel, Ordering::Acquire);
    if on && prev.is_ok() {
        // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds
        // (it catches nothing and calls only non-panicking code paths).
        unsafe {
            libc::atexit(at_exit);
        }
    }
    STATE.load(Ordering::Relaxed) == ON
}

extern "C" fn at_exit() {
    // At exit another thread may hold the lock forever: never wait for it.
    if let Ok(mut r) = RECORDS.try_lock() {
        let _ = write_out(&mut r);
    }
}

/// The monotonic clock every process on the machine shares, in ns.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists on Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// The tag of bytes that start a marked message.
#[inline]
pub fn tag_of(first: &[u8]) -> Option<u64> {
    if first.len() >= 16 && first[8..16] == MAGIC {
        let mut t = [0u8; 8];
        t.copy_from_slice(&first[..8]);
        Some(u64::from_le_bytes(t))
    } else {
        None
    }
}

/// Records `hop` now if `first` (the first bytes that passed it) starts a
/// marked message.
#[inline]
pub fn bytes(hop: Hop, first: &[u8]) {
    if enabled() {
        if let Some(tag) = tag_of(first) {
            record(hop, tag, now_ns());
        }
    }
}

/// As [`bytes`], for bytes that start `offset` into a ring's contents
/// given as its two slices (the second one after the wrap).
pub fn ring(hop: Hop, a: &[u8], b: &[u8], offset: usize) {
    if enabled() {
        if let Some(tag) = tag_of(&gather(a, b, offset)) {
            record(hop, tag, now_ns());
        }
    }
}

/// Up to 16 bytes from `offset` into `a` then `b`.
fn gather(a: &[u8], b: &[u8], offset: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    let mut skip = offset;
    for s in [a, b] {
        if skip >= s.len() {
            skip -= s.len();
            continue;
        }
        let take = (s.len() - skip).min(16 - out.len());
        out.extend_from_slice(&s[skip..skip + take]);
        skip = 0;
        if out.len() == 16 {
            break;
        }
    }
    out
}

/// The tag of the marked message at the start of an Ethernet frame's TCP
/// payload (IPv4 or IPv6 without extension headers), if any.
pub fn frame_tag(frame: &[u8]) -> Option<u64> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let ip = frame.get(14..)?;
    let (tcp, ip_end) = match ethertype {
        0x0800 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            if *ip.get(9)? != 6 || ihl < 20 {
                return None;
            }
            (ihl, total.min(ip.len()))
        }
        0x86dd => {
            let plen = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            if *ip.get(6)? != 6 {
                return None;
            }
            (40, (40 + plen).min(ip.len()))
        }
        _ => return None,
    };
    let doff = usize::from(ip.get(tcp + 12)? >> 4) * 4;
    let start = tcp + doff;
    if doff < 20 || start >= ip_end {
        return None;
    }
    tag_of(ip.get(start..ip_end.min(start + 16))?)
}

/// Records a frame seen at `hop` now (`FrameIn`), if it carries a marked message.
#[inline]
pub fn frame(hop: Hop, f: &[u8]) {
    if enabled() {
        if let Some(tag) = frame_tag(f) {
            record(hop, tag, now_ns());
        }
    }
}

/// Records `tag` at `hop` at `ns`.
pub fn record(hop: Hop, tag: u64, ns: u64) {
    let Ok(mut r) = RECORDS.lock() else { return };
    if r.len() >= MAX_RECORDS {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if r.capacity() == 0 {
        r.reserve(1 << 16);
    }
    r.push(Record { hop, tag, ns });
}

/// Writes this process's records to its file now (appending; they are
/// then forgotten). Errors are returned, not printed.
pub fn flush() -> std::io::Result<()> {
    if !enabled() {
        return Ok(());
    }
    let mut r = RECORDS.lock().map_err(|_| std::io::Error::other("trace lock poisoned"))?;
    write_out(&mut r)
}

fn write_out(r: &mut Vec<Record>) -> std::io::Result<()> {
    let Some(path) = PATH.get() else { return Ok(()) };
    let f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    let mut w = std::io::BufWriter::new(f);
    for x in r.iter() {
        writeln!(w, "{} {} {}", x.hop.name(), x.tag, x.ns)?;
    }
    let dropped = DROPPED.swap(0, Ordering::Relaxed);
    if dropped > 0 {
        writeln!(w, "dropped {dropped} 0")?;
    }
    w.flush()?;
    r.clear();
    Ok(())
}

/// Reads a trace file: its records, and how many were dropped.
pub fn read(path: &Path) -> std::io::Result<(Vec<Record>, u64)> {
    let text = std::fs::read_to_string(path)?;
    parse(&text).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))
}

/// Parses a trace file's text.
pub fn parse(text: &str) -> Result<(Vec<Record>, u64), String> {
    let mut out = Vec::new();
    let mut dropped = 0;
    for (i, line) in text.lines().enumerate() {
        let mut w = line.split_ascii_whitespace();
        let (Some(h), Some(t), Some(n), None) = (w.next(), w.next(), w.next(), w.next()) else {
            return Err(format!("line {}: not `hop tag ns`", i + 1));
        };
        let num = |s: &str| s.parse::<u64>().map_err(|_| format!("line {}: {s:?} is not a number", i + 1));
        if h == "dropped" {
            dropped += num(t)?;
            continue;
        }
        let hop = Hop::from_name(h).ok_or_else(|| format!("line {}: no hop {h:?}", i + 1))?;
        out.push(Record { hop, tag: num(t)?, ns: num(n)? });
    }
    Ok((out, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(tag: u64) -> Vec<u8> {
        let mut m = tag.to_le_bytes().to_vec();
        m.extend_from_slice(&MAGIC);
        m.extend_from_slice(&[7; 48]);
        m
    }

    /// An Ethernet + IPv4 + TCP (with 12 bytes of options) frame carrying `payload`.
    fn frame_v4(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 32];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        let total = (20 + 32 + payload.len()) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[23] = 6;
        f[14 + 20 + 12] = 8 << 4;
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn only_marked_bytes_have_a_tag() {
        assert_eq!(tag_of(&marked(42)), Some(42));
        assert_eq!(tag_of(&marked(42)[..15]), None);
        let mut m = marked(42);
        m[9] ^= 1;
        assert_eq!(tag_of(&m), None);
    }

    #[test]
    fn a_frame_s_tcp_payload_is_found_behind_its_headers() {
        assert_eq!(frame_tag(&frame_v4(&marked(7))), Some(7));
        // An ACK (no payload), a short payload, UDP, ARP, a truncated frame: none.
        assert_eq!(frame_tag(&frame_v4(&[])), None);
        assert_eq!(frame_tag(&frame_v4(&marked(7)[..10])), None);
        let mut udp = frame_v4(&marked(7));
        udp[23] = 17;
        assert_eq!(frame_tag(&udp), None);
        let mut arp = frame_v4(&marked(7));
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(frame_tag(&arp), None);
        for cut in 0..70 {
            assert_eq!(frame_tag(&frame_v4(&marked(7))[..cut]), None, "cut at {cut}");
        }
        // Ethernet padding past the IP total length is not payload.
        let mut padded = frame_v4(&[]);
        padded.extend_from_slice(&marked(9));
        assert_eq!(frame_tag(&padded), None);
    }

    #[test]
    fn an_ipv6_frame_s_payload_is_found() {
        let payload = marked(11);
        let mut f = vec![0u8; 14 + 40 + 20];
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
        f[20] = 6;
        f[14 + 40 + 12] = 5 << 4;
        f.extend_from_slice(&payload);
        assert_eq!(frame_tag(&f), Some(11));
    }

    #[test]
    fn ring_bytes_are_gathered_across_the_wrap() {
        let m = marked(5);
        for split in 0..=m.len() {
            let (a, b) = m.split_at(split);
            assert_eq!(tag_of(&gather(a, b, 0)), Some(5), "split {split}");
        }
        let mut pre = vec![1u8; 30];
        pre.extend_from_slice(&m);
        let (a, b) = pre.split_at(35);
        assert_eq!(tag_of(&gather(a, b, 30)), Some(5));
        assert_eq!(gather(a, b, 100), Vec::<u8>::new());
    }

    #[test]
    fn files_parse_back_and_bad_lines_are_named() {
        let (r, d) = parse("app_write 1 100\nframe_in 1 250\ndropped 3 0\n").unwrap();
        assert_eq!(r, vec![Record { hop: Hop::AppWrite, tag: 1, ns: 100 }, Record { hop: Hop::FrameIn, tag: 1, ns: 250 }]);
        assert_eq!(d, 3);
        assert!(parse("app_write 1\n").unwrap_err().contains("line 1"));
        assert!(parse("x 1 2\n").unwrap_err().contains("no hop"));
        assert!(parse("app_wake one 2\n").unwrap_err().contains("not a number"));
        for h in Hop::ALL {
            assert_eq!(Hop::from_name(h.name()), Some(h));
        }
    }
}
