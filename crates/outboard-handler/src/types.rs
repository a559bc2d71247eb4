//! The handler's types, with or without the runtime (feature `jit`): where
//! it attaches, its limits, what it is handed, how an invocation ends, its
//! counters, and the engine's side of its host calls ([`HostIo`]).

use crate::abi::{Addr, MessageKind};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How often the epoch advances: the granularity of invocation deadlines.
pub const TICK: Duration = Duration::from_millis(1);
/// The largest memory cap a handler may ask for.
pub const MAX_MEMORY: usize = 1 << 30;
/// The smallest (one WebAssembly page).
pub const MIN_MEMORY: usize = 64 << 10;

/// Where a handler is attached: what it must export.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Attach {
    /// A mailbox's reader upcall: `ob_message`.
    Mailbox,
    /// A TCP listener: `ob_tcp_data` (`ob_tcp_open`, `ob_tcp_close` optional).
    Tcp,
}

/// A handler's limits.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Limits {
    /// Its linear memory's cap in bytes.
    pub memory: usize,
    /// How long one invocation may run.
    pub deadline: Duration,
    /// Faults in a row that disable it (0: never).
    pub max_faults: u32,
    /// Its key-value store's cap in bytes.
    pub kv_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { memory: 16 << 20, deadline: Duration::from_millis(10), max_faults: 8, kv_bytes: 4 << 20 }
    }
}

pub const MAX_DEADLINE: Duration = Duration::from_secs(10);
pub const MAX_KV: usize = 1 << 30;

impl Limits {
    /// Refuses impossible limits, naming the range that works.
    pub fn check(&self) -> Result<(), String> {
        if !(MIN_MEMORY..=MAX_MEMORY).contains(&self.memory) {
            return Err(format!("memory cap {} bytes: must be between 64 KiB and 1 GiB", self.memory));
        }
        if self.deadline < TICK || self.deadline > MAX_DEADLINE {
            return Err(format!("deadline {:?}: must be between 1 ms and 10 s", self.deadline));
        }
        if self.kv_bytes > MAX_KV {
            return Err(format!("key-value cap {} bytes: must be at most 1 GiB", self.kv_bytes));
        }
        Ok(())
    }

    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) fn deadline_ticks(&self) -> u64 {
        (self.deadline.as_nanos() / TICK.as_nanos()).max(1) as u64
    }
}

/// Why a load was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    Limits(String),
    /// Not a valid WebAssembly module (or one this runtime cannot compile).
    Invalid(String),
    /// A valid module that does not follow the ABI: exports, imports, version.
    Abi(String),
    /// `ob_init` failed or trapped, or no instance could be made.
    Init(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Limits(m) => write!(f, "bad limits: {m}"),
            LoadError::Invalid(m) => write!(f, "not a valid module: {m}"),
            LoadError::Abi(m) => write!(f, "does not follow the handler ABI (docs/HANDLERS.md): {m}"),
            LoadError::Init(m) => write!(f, "could not start: {m}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// What arrived, for one invocation.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    Message { kind: MessageKind, from: Addr, data: &'a [u8] },
    TcpOpen { conn: u32 },
    TcpData { conn: u32, data: &'a [u8] },
    TcpClose { conn: u32 },
}

/// Why an invocation trapped.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Fault {
    /// Ran past its deadline.
    Overrun,
    /// An access outside its memory or tables.
    OutOfBounds,
    StackOverflow,
    /// Any other trap (unreachable, division by zero, bad conversion, ...).
    Trap,
    /// No instance could be made (its `ob_init` failed or trapped).
    Init,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Overrun => "overrun",
            Fault::OutOfBounds => "out-of-bounds",
            Fault::StackOverflow => "stack-overflow",
            Fault::Trap => "trap",
            Fault::Init => "init",
        }
    }
}

/// How an invocation ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// The entry point returned this.
    Returned(i32),
    /// The module exports no entry point for this input (TCP open/close are optional).
    NoEntry,
    Fault(Fault),
    /// The handler is disabled: nothing ran.
    Disabled,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Invoked {
    pub outcome: Outcome,
    /// It answered the request it was handed.
    pub replied: bool,
}

/// `outboard stat`'s counters of one handler.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct HandlerStats {
    pub invocations: u64,
    /// Entry points that returned a negative value.
    pub errors_returned: u64,
    pub overruns: u64,
    pub out_of_bounds: u64,
    pub stack_overflows: u64,
    pub traps: u64,
    pub init_failures: u64,
    /// Instances made (the first, and one after each fault).
    pub instances: u64,
    /// `memory.grow` refused at the cap.
    pub grow_refused: u64,
    /// Host calls refused for a range outside the handler's memory.
    pub bad_args: u64,
    pub logs: u64,
    pub logs_dropped: u64,
    /// Invocations refused because the handler was disabled.
    pub refused_disabled: u64,
}

/// One handler as `outboard stat` shows it.
#[derive(Clone, Default, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct HandlerInfo {
    pub name: String,
    /// `mailbox=N`, `tcp=PORT`: where the engine attached it.
    pub attached: String,
    pub module_bytes: usize,
    /// `ready`, or `disabled: why`.
    pub state: String,
    pub memory_cap: usize,
    pub deadline_us: u64,
    pub max_faults: u32,
    pub faults_in_a_row: u32,
    pub kv_keys: usize,
    pub kv_bytes: usize,
    pub stats: HandlerStats,
}

/// What the engine does for a handler: reply, send, enqueue, write to a
/// connection, the clock and the log. Errors are positive errno values.
pub trait HostIo {
    /// Answers the request being handled.
    fn reply(&mut self, data: &[u8]) -> Result<(), i32>;
    fn send(&mut self, to: Addr, data: &[u8], reliable: bool) -> Result<(), i32>;
    fn enqueue(&mut self, mailbox: u32, data: &[u8]) -> Result<(), i32>;
    /// Bytes taken (fewer than offered when the connection's buffer is full).
    fn tcp_write(&mut self, conn: u32, data: &[u8]) -> Result<usize, i32>;
    fn tcp_close(&mut self, conn: u32) -> Result<(), i32>;
    fn now_ns(&self) -> u64;
    fn log(&mut self, line: &str);
}
