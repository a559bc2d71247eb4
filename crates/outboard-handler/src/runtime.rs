//! The wasmtime engine the handlers share: Cranelift, the pooling instance
//! allocator, epoch interruption, and the ticker thread that advances the
//! epoch every [`TICK`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use crate::types::{MAX_MEMORY, TICK};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

/// The shared compiler and instance pool; dropping it stops the ticker.
pub struct Runtime {
    engine: Engine,
    ticker: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Runtime {
    /// `slots`: instances alive at once (every loaded handler has one, and a
    /// replacement briefly a second).
    pub fn new(slots: u32) -> Result<Runtime, String> {
        Runtime::build(slots, true)
    }

    /// As [`Runtime::new`] but with no epoch interruption: the compiled code
    /// has no deadline checks and no ticker runs, so **no deadline is
    /// enforced** (a handler that loops forever runs forever). For measuring
    /// what the checks cost (`outboard bench handlers`) only; the engine
    /// never uses it. Handlers load and run on it as on any runtime (the
    /// deadline that `Handler` sets on every invocation is then never looked at).
    pub fn without_epochs(slots: u32) -> Result<Runtime, String> {
        Runtime::build(slots, false)
    }

    fn build(slots: u32, epochs: bool) -> Result<Runtime, String> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_core_instances(slots)
            .total_memories(slots)
            .total_tables(slots)
            .max_memories_per_module(1)
            .max_memory_size(MAX_MEMORY);
        let mut cfg = Config::new();
        cfg.epoch_interruption(epochs)
            .cranelift_opt_level(OptLevel::Speed)
            .wasm_backtrace(false)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&cfg).map_err(|e| format!("handler runtime: {e:#}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        if !epochs {
            return Ok(Runtime { engine, ticker: None, stop });
        }
        let (e, s) = (engine.clone(), stop.clone());
        let ticker = std::thread::Builder::new()
            .name("handler-epoch".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    e.increment_epoch();
                }
            })
            .map_err(|e| format!("handler runtime: epoch ticker: {e}"))?;
        Ok(Runtime { engine, ticker: Some(ticker), stop })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
