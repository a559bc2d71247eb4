//! Handlers: application code run on the engine, sandboxed and preempted
//! (docs/HANDLERS.md). A handler is a WebAssembly module run by wasmtime in
//! an instance of its own, with a memory cap and an epoch deadline on every
//! invocation; what it does to the outside world goes through [`HostIo`],
//! which the engine implements (the crate does no I/O of its own).

pub mod abi;
mod handler;
mod host;
pub mod kv;
mod runtime;
mod shared;

pub use abi::{Addr, MessageKind};
pub use handler::{Attach, Fault, Handler, HandlerInfo, HandlerStats, Input, Invoked, Limits, LoadError, Outcome, MAX_DEADLINE, MAX_KV};
pub use host::HostIo;
pub use runtime::{Runtime, MAX_MEMORY, MIN_MEMORY, TICK};
pub use shared::SHARED_SLOTS;
