//! Without the runtime (feature `jit` off): the same names, and every load
//! refused with why. The engine builds this way for the fuzz targets, which
//! exercise the board's handler commands but need no WebAssembly compiler.

use crate::types::{Attach, HandlerInfo, HandlerStats, HostIo, Input, Invoked, Limits, LoadError};
use std::convert::Infallible;
use std::sync::Arc;

const WHY: &str = "this build has no handler runtime (outboard-handler's feature `jit`)";

/// Never made: [`Runtime::new`] and [`Runtime::shared`] refuse.
pub struct Runtime {
    never: Infallible,
}

/// Instances alive at once in a process (as with the runtime).
pub const SHARED_SLOTS: u32 = 256;

impl Runtime {
    pub fn new(_slots: u32) -> Result<Runtime, String> {
        Err(WHY.into())
    }
    pub fn without_epochs(_slots: u32) -> Result<Runtime, String> {
        Err(WHY.into())
    }
    pub fn shared() -> Result<Arc<Runtime>, String> {
        Err(WHY.into())
    }
}

/// Never made: loading needs a [`Runtime`].
pub struct Handler {
    never: Infallible,
    _rt: Option<Runtime>,
}

impl Handler {
    pub fn load(rt: &Runtime, _name: &str, _wasm: &[u8], _attach: Attach, _limits: Limits, _io: &mut dyn HostIo) -> Result<Handler, LoadError> {
        match rt.never {}
    }
    pub fn replace(rt: &Runtime, _old: &mut Handler, _wasm: &[u8], _limits: Limits, _io: &mut dyn HostIo) -> Result<Handler, LoadError> {
        match rt.never {}
    }
    pub fn name(&self) -> &str {
        match self.never {}
    }
    pub fn attach(&self) -> Attach {
        match self.never {}
    }
    pub fn limits(&self) -> Limits {
        match self.never {}
    }
    pub fn stats(&self) -> HandlerStats {
        match self.never {}
    }
    pub fn disabled(&self) -> Option<&str> {
        match self.never {}
    }
    pub fn enable(&mut self) {
        match self.never {}
    }
    pub fn info(&self, _attached: String) -> HandlerInfo {
        match self.never {}
    }
    pub fn invoke(&mut self, _io: &mut dyn HostIo, _input: Input<'_>) -> Invoked {
        match self.never {}
    }
}
