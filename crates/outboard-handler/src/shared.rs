//! The process's one handler runtime: every shard's handlers share its
//! compiler, instance pool and epoch ticker (one ticker thread per process,
//! started by the first handler loaded, never by an engine without handlers).

use crate::runtime::Runtime;
use std::sync::{Arc, Mutex};

/// Instances alive at once in a process: each handler has one (per shard for
/// TCP handlers), and a replacement briefly a second.
pub const SHARED_SLOTS: u32 = 256;

static SHARED: Mutex<Option<Arc<Runtime>>> = Mutex::new(None);

impl Runtime {
    /// The process's runtime, made on first use.
    pub fn shared() -> Result<Arc<Runtime>, String> {
        let mut g = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rt) = g.as_ref() {
            return Ok(rt.clone());
        }
        let rt = Arc::new(Runtime::new(SHARED_SLOTS)?);
        *g = Some(rt.clone());
        Ok(rt)
    }
}
