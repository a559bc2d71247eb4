//! The engine's functions a handler imports (module `outboard`), and the
//! per-store state they work on. Every pointer and length from the handler
//! is checked against its memory before a byte is copied.

use crate::abi::{errno, Addr, MessageKind, ADDR_LEN, IMPORT_MODULE};
use crate::kv::{KvError, KvStore};
use crate::types::HostIo;
use std::ops::Range;
use wasmtime::{Caller, Linker, Memory, ResourceLimiter};

/// The invocation in progress: its input and the engine's side. Raw
/// pointers, set by `Handler::invoke` for the length of one synchronous
/// call into the instance on the calling thread and cleared after it.
pub(crate) struct Current {
    pub kind: Option<MessageKind>,
    pub from: Option<Addr>,
    pub input: *const u8,
    pub input_len: usize,
    pub io: *mut (dyn HostIo + 'static),
    pub replied: bool,
}

impl Current {
    fn input(&self) -> &[u8] {
        // SAFETY: `invoke` keeps the slice borrowed for as long as this is set.
        unsafe { std::slice::from_raw_parts(self.input, self.input_len) }
    }
    #[allow(clippy::mut_from_ref)]
    fn io(&self) -> &mut dyn HostIo {
        // SAFETY: `invoke` holds the `&mut dyn HostIo` for as long as this is set.
        unsafe { &mut *self.io }
    }
}

/// Counters the host functions keep.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct HostCounters {
    pub grow_refused: u64,
    pub bad_args: u64,
    pub logs: u64,
    pub logs_dropped: u64,
}

/// Log lines at once, then per second.
const LOG_BURST: u32 = 20;
const LOG_PER_S: u64 = 10;
pub const LOG_LINE_MAX: usize = 256;

pub(crate) struct HostState {
    pub current: Option<Current>,
    pub memory: Option<Memory>,
    pub kv: KvStore,
    pub memory_cap: usize,
    pub counters: HostCounters,
    log_tokens: u32,
    log_refill_ns: u64,
}

// SAFETY: the raw pointers in `current` are set only during a synchronous
// call on the thread that owns the handler and are cleared before it returns.
unsafe impl Send for HostState {}

impl HostState {
    pub fn new(kv: KvStore, memory_cap: usize) -> HostState {
        HostState { current: None, memory: None, kv, memory_cap, counters: HostCounters::default(), log_tokens: LOG_BURST, log_refill_ns: 0 }
    }

    fn take_log_token(&mut self, now: u64) -> bool {
        let per = 1_000_000_000 / LOG_PER_S;
        if now >= self.log_refill_ns.saturating_add(per) {
            let add = ((now - self.log_refill_ns) / per).min(LOG_BURST as u64) as u32;
            self.log_tokens = (self.log_tokens + add).min(LOG_BURST);
            self.log_refill_ns = now;
        }
        if self.log_tokens == 0 {
            return false;
        }
        self.log_tokens -= 1;
        true
    }
}

impl ResourceLimiter for HostState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.counters.grow_refused += 1;
            return Ok(false);
        }
        Ok(true)
    }
    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 65536)
    }
}

/// `ptr..ptr+len` when it lies inside a memory of `size` bytes.
fn span(size: usize, ptr: i32, len: i32) -> Option<Range<usize>> {
    let (p, l) = (ptr as u32 as usize, len as u32 as usize);
    let end = p.checked_add(l)?;
    (end <= size).then_some(p..end)
}

type Cx<'a> = Caller<'a, HostState>;

/// The handler's memory and state, or `-EFAULT` when the instance exports none yet.
macro_rules! parts {
    ($c:expr) => {{
        let Some(mem) = $c.data().memory else { return -errno::EFAULT };
        mem.data_and_store_mut(&mut $c)
    }};
}

/// The handler's bytes at `ptr..ptr+len`, or return `-EFAULT` (counted).
macro_rules! bytes {
    ($data:expr, $st:expr, $ptr:expr, $len:expr) => {{
        match span($data.len(), $ptr, $len) {
            Some(r) => &$data[r],
            None => {
                $st.counters.bad_args += 1;
                return -errno::EFAULT;
            }
        }
    }};
}

fn result(r: Result<(), i32>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => -e,
    }
}

/// Adds every import of ABI version 1 to `linker`.
pub(crate) fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let m = IMPORT_MODULE;
    linker.func_wrap(m, "input_read", |mut c: Cx<'_>, off: i32, dst: i32, len: i32| -> i32 {
        let (data, st) = parts!(c);
        let Some(cur) = st.current.as_ref() else { return -errno::EINVAL };
        let input = cur.input();
        let off = (off as u32 as usize).min(input.len());
        let n = (len as u32 as usize).min(input.len() - off);
        match span(data.len(), dst, n as i32) {
            Some(r) => {
                data[r].copy_from_slice(&input[off..off + n]);
                n as i32
            }
            None => {
                st.counters.bad_args += 1;
                -errno::EFAULT
            }
        }
    })?;
    linker.func_wrap(m, "msg_from", |mut c: Cx<'_>, dst: i32| -> i32 {
        let (data, st) = parts!(c);
        let Some(from) = st.current.as_ref().and_then(|c| c.from) else { return -errno::EINVAL };
        match span(data.len(), dst, ADDR_LEN as i32) {
            Some(r) => {
                data[r].copy_from_slice(&from.encode());
                ADDR_LEN as i32
            }
            None => {
                st.counters.bad_args += 1;
                -errno::EFAULT
            }
        }
    })?;
    linker.func_wrap(m, "reply", |mut c: Cx<'_>, ptr: i32, len: i32| -> i32 {
        let (data, st) = parts!(c);
        let b = bytes!(data, st, ptr, len);
        let Some(cur) = st.current.as_mut() else { return -errno::EINVAL };
        if cur.kind != Some(MessageKind::Request) {
            return -errno::EINVAL;
        }
        if cur.replied {
            return -errno::EALREADY;
        }
        let r = cur.io().reply(b);
        cur.replied |= r.is_ok();
        result(r)
    })?;
    linker.func_wrap(m, "send", |mut c: Cx<'_>, addr: i32, ptr: i32, len: i32, flags: i32| -> i32 {
        let (data, st) = parts!(c);
        let a: [u8; ADDR_LEN] = bytes!(data, st, addr, ADDR_LEN as i32).try_into().expect("span of ADDR_LEN");
        let Some(to) = Addr::decode(&a) else { return -errno::EINVAL };
        if flags & !1 != 0 {
            return -errno::EINVAL;
        }
        let b = bytes!(data, st, ptr, len);
        let Some(cur) = st.current.as_ref() else { return -errno::EINVAL };
        result(cur.io().send(to, b, flags & 1 != 0))
    })?;
    linker.func_wrap(m, "enqueue", |mut c: Cx<'_>, mailbox: i32, ptr: i32, len: i32| -> i32 {
        let (data, st) = parts!(c);
        let b = bytes!(data, st, ptr, len);
        let Some(cur) = st.current.as_ref() else { return -errno::EINVAL };
        result(cur.io().enqueue(mailbox as u32, b))
    })?;
    linker.func_wrap(m, "tcp_write", |mut c: Cx<'_>, conn: i32, ptr: i32, len: i32| -> i32 {
        let (data, st) = parts!(c);
        let b = bytes!(data, st, ptr, len);
        let Some(cur) = st.current.as_ref() else { return -errno::EINVAL };
        match cur.io().tcp_write(conn as u32, b) {
            Ok(n) => n.min(i32::MAX as usize) as i32,
            Err(e) => -e,
        }
    })?;
    linker.func_wrap(m, "tcp_close", |c: Cx<'_>, conn: i32| -> i32 {
        let Some(cur) = c.data().current.as_ref() else { return -errno::EINVAL };
        result(cur.io().tcp_close(conn as u32))
    })?;
    linker.func_wrap(m, "now_ns", |c: Cx<'_>| -> i64 {
        c.data().current.as_ref().map_or(0, |cur| cur.io().now_ns() as i64)
    })?;
    linker.func_wrap(m, "kv_get", |mut c: Cx<'_>, key: i32, key_len: i32, dst: i32, cap: i32| -> i32 {
        let (data, st) = parts!(c);
        let Some(kr) = span(data.len(), key, key_len) else {
            st.counters.bad_args += 1;
            return -errno::EFAULT;
        };
        let Some(dr) = span(data.len(), dst, cap) else {
            st.counters.bad_args += 1;
            return -errno::EFAULT;
        };
        let Some(v) = st.kv.get(&data[kr]) else { return -errno::ENOENT };
        let n = v.len().min(dr.len());
        let v = v.to_vec(); // the key and the destination may overlap the same memory
        data[dr.start..dr.start + n].copy_from_slice(&v[..n]);
        v.len() as i32
    })?;
    linker.func_wrap(m, "kv_put", |mut c: Cx<'_>, key: i32, key_len: i32, val: i32, val_len: i32| -> i32 {
        let (data, st) = parts!(c);
        let k = bytes!(data, st, key, key_len);
        let v = bytes!(data, st, val, val_len);
        match st.kv.put(k, v) {
            Ok(()) => 0,
            Err(KvError::Invalid) => -errno::EINVAL,
            Err(KvError::Full) => -errno::ENOSPC,
        }
    })?;
    linker.func_wrap(m, "kv_del", |mut c: Cx<'_>, key: i32, key_len: i32| -> i32 {
        let (data, st) = parts!(c);
        let k = bytes!(data, st, key, key_len);
        if st.kv.delete(k) { 0 } else { -errno::ENOENT }
    })?;
    linker.func_wrap(m, "log", |mut c: Cx<'_>, ptr: i32, len: i32| -> i32 {
        let (data, st) = parts!(c);
        let b = bytes!(data, st, ptr, len);
        let Some(now) = st.current.as_ref().map(|c| c.io().now_ns()) else { return -errno::EINVAL };
        if !st.take_log_token(now) {
            st.counters.logs_dropped += 1;
            return -errno::EAGAIN;
        }
        st.counters.logs += 1;
        let line = String::from_utf8_lossy(&b[..b.len().min(LOG_LINE_MAX)]);
        if let Some(cur) = st.current.as_ref() {
            cur.io().log(line.trim_end());
        }
        0
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::span;

    #[test]
    fn spans_stay_inside_the_memory() {
        assert_eq!(span(100, 0, 100), Some(0..100));
        assert_eq!(span(100, 1, 100), None);
        assert_eq!(span(100, -1, 1), None, "a negative pointer is a large offset");
        assert_eq!(span(100, 50, -1), None, "a negative length is a large length");
        assert_eq!(span(100, 100, 0), Some(100..100));
    }
}
