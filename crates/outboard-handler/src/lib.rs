//! Handlers: application code run on the engine, sandboxed and preempted
//! (docs/HANDLERS.md). A handler is a WebAssembly module run by wasmtime in
//! an instance of its own, with a memory cap and an epoch deadline on every
//! invocation; what it does to the outside world goes through [`HostIo`],
//! which the engine implements (the crate does no I/O of its own).

//!
//! Without the feature `jit` (on by default) the crate keeps its types and
//! refuses every load: the fuzz targets build the engine that way.

pub mod abi;
pub mod kv;
mod types;
#[cfg(feature = "jit")]
mod handler;
#[cfg(feature = "jit")]
mod host;
#[cfg(feature = "jit")]
mod runtime;
#[cfg(feature = "jit")]
mod shared;
#[cfg(not(feature = "jit"))]
mod stub;

pub use abi::{Addr, MessageKind};
#[cfg(feature = "jit")]
pub use handler::Handler;
#[cfg(feature = "jit")]
pub use runtime::Runtime;
#[cfg(feature = "jit")]
pub use shared::SHARED_SLOTS;
#[cfg(not(feature = "jit"))]
pub use stub::{Handler, Runtime, SHARED_SLOTS};
pub use types::{Attach, Fault, HandlerInfo, HandlerStats, HostIo, Input, Invoked, Limits, LoadError, Outcome, MAX_DEADLINE, MAX_KV, MAX_MEMORY, MIN_MEMORY, TICK};
