//! One loaded handler: its compiled module, its live instance (re-made
//! after a fault), its limits, counters and state.

use crate::abi::{export, Addr, MessageKind, VERSION};
use crate::host::{self, Current, HostState};
use crate::kv::KvStore;
use crate::runtime::Runtime;
use crate::types::{Attach, Fault, HandlerInfo, HandlerStats, HostIo, Input, Invoked, Limits, LoadError, Outcome};
use wasmtime::{Engine, ExternType, InstancePre, Linker, Module, Store, Trap, TypedFunc, ValType};


struct Live {
    store: Store<HostState>,
    abi: TypedFunc<(), i32>,
    message: Option<TypedFunc<(i32, i32), i32>>,
    tcp_open: Option<TypedFunc<i32, i32>>,
    tcp_data: Option<TypedFunc<(i32, i32), i32>>,
    tcp_close: Option<TypedFunc<i32, i32>>,
}

pub struct Handler {
    name: String,
    attach: Attach,
    limits: Limits,
    module_bytes: usize,
    engine: Engine,
    pre: InstancePre<HostState>,
    live: Option<Live>,
    /// The key-value store while no instance holds it.
    kv: Option<KvStore>,
    disabled: Option<String>,
    faults_in_a_row: u32,
    last_fault: Option<Fault>,
    stats: HandlerStats,
}

fn is_i32s(ty: impl ExactSizeIterator<Item = ValType>, n: usize) -> bool {
    ty.len() == n && ty.into_iter().all(|t| matches!(t, ValType::I32))
}

/// Checks one function export's type; `Ok(false)` when it is absent.
fn check_func(module: &Module, name: &str, params: usize) -> Result<bool, LoadError> {
    match module.get_export(name) {
        None => Ok(false),
        Some(ExternType::Func(f)) if is_i32s(f.params(), params) && is_i32s(f.results(), 1) => Ok(true),
        Some(_) => Err(LoadError::Abi(format!("export `{name}` must be a function of {params} i32 parameter(s) returning i32"))),
    }
}

impl Handler {
    /// Compiles and checks `wasm`, then makes its first instance (running
    /// `ob_init` with `io`). The key-value store starts empty.
    pub fn load(rt: &Runtime, name: &str, wasm: &[u8], attach: Attach, limits: Limits, io: &mut dyn HostIo) -> Result<Handler, LoadError> {
        Handler::load_with_kv(rt, name, wasm, attach, limits, io, KvStore::new(limits.kv_bytes))
    }

    /// As [`Handler::load`], taking over `old`'s key-value store (a
    /// replacement keeps the handler's state). `old` is untouched on error.
    pub fn replace(rt: &Runtime, old: &mut Handler, wasm: &[u8], limits: Limits, io: &mut dyn HostIo) -> Result<Handler, LoadError> {
        let kv = old.kv_store().clone_with_cap(limits.kv_bytes);
        Handler::load_with_kv(rt, &old.name, wasm, old.attach, limits, io, kv)
    }

    fn load_with_kv(rt: &Runtime, name: &str, wasm: &[u8], attach: Attach, limits: Limits, io: &mut dyn HostIo, kv: KvStore) -> Result<Handler, LoadError> {
        limits.check().map_err(LoadError::Limits)?;
        let engine = rt.engine().clone();
        let module = Module::new(&engine, wasm).map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        match module.get_export(export::MEMORY) {
            Some(ExternType::Memory(_)) => {}
            _ => return Err(LoadError::Abi("it exports no memory named `memory`".into())),
        }
        match module.get_export(export::ABI) {
            Some(ExternType::Func(f)) if is_i32s(f.params(), 0) && is_i32s(f.results(), 1) => {}
            _ => return Err(LoadError::Abi("it exports no `ob_abi: () -> i32`".into())),
        }
        check_func(&module, export::INIT, 0)?;
        let has_message = check_func(&module, export::MESSAGE, 2)?;
        check_func(&module, export::TCP_OPEN, 1)?;
        let has_data = check_func(&module, export::TCP_DATA, 2)?;
        check_func(&module, export::TCP_CLOSE, 1)?;
        match attach {
            Attach::Mailbox if !has_message => return Err(LoadError::Abi("a mailbox handler must export `ob_message: (i32, i32) -> i32`".into())),
            Attach::Tcp if !has_data => return Err(LoadError::Abi("a TCP handler must export `ob_tcp_data: (i32, i32) -> i32`".into())),
            _ => {}
        }
        let mut linker = Linker::new(&engine);
        host::link(&mut linker).map_err(|e| LoadError::Init(format!("{e:#}")))?;
        let pre = linker.instantiate_pre(&module).map_err(|e| LoadError::Abi(format!("{e:#}")))?;
        let mut h = Handler {
            name: name.to_string(),
            attach,
            limits,
            module_bytes: wasm.len(),
            engine,
            pre,
            live: None,
            kv: Some(kv),
            disabled: None,
            faults_in_a_row: 0,
            last_fault: None,
            stats: HandlerStats::default(),
        };
        h.instantiate(io).map_err(LoadError::Init)?;
        // The ABI version, asked once per load.
        let mut live = h.live.take().expect("instantiated");
        let abi = live.abi.clone();
        let (version, _) = h.call(&mut live, io, None, None, &[], |s| abi.call(s, ()));
        h.live = Some(live);
        match version {
            Ok(VERSION) => Ok(h),
            Ok(v) => Err(LoadError::Abi(format!("`ob_abi` returned {v}; this engine runs ABI version {VERSION}"))),
            Err(f) => Err(LoadError::Init(format!("`ob_abi` trapped ({})", f.name()))),
        }
    }

    fn kv_store(&self) -> &KvStore {
        match (&self.live, &self.kv) {
            (Some(l), _) => &l.store.data().kv,
            (None, Some(kv)) => kv,
            (None, None) => unreachable!("the store is parked whenever no instance holds it"),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn attach(&self) -> Attach {
        self.attach
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn stats(&self) -> HandlerStats {
        let mut s = self.stats;
        if let Some(live) = &self.live {
            let c = live.store.data().counters;
            s.grow_refused += c.grow_refused;
            s.bad_args += c.bad_args;
            s.logs += c.logs;
            s.logs_dropped += c.logs_dropped;
        }
        s
    }

    pub fn disabled(&self) -> Option<&str> {
        self.disabled.as_deref()
    }

    /// Enables a disabled handler again (its fault count starts afresh).
    pub fn enable(&mut self) {
        self.disabled = None;
        self.faults_in_a_row = 0;
    }

    pub fn info(&self, attached: String) -> HandlerInfo {
        let kv = self.kv_store();
        let (kv_keys, kv_bytes) = (kv.len(), kv.used_bytes());
        HandlerInfo {
            name: self.name.clone(),
            attached,
            module_bytes: self.module_bytes,
            state: match &self.disabled {
                None => "ready".into(),
                Some(why) => format!("disabled: {why}"),
            },
            memory_cap: self.limits.memory,
            deadline_us: self.limits.deadline.as_micros() as u64,
            max_faults: self.limits.max_faults,
            faults_in_a_row: self.faults_in_a_row,
            kv_keys,
            kv_bytes,
            stats: self.stats(),
        }
    }

    /// Makes a fresh instance (the key-value store moves into it) and runs its `ob_init`.
    fn instantiate(&mut self, io: &mut dyn HostIo) -> Result<(), String> {
        let kv = self.kv.take().unwrap_or_else(|| KvStore::new(self.limits.kv_bytes));
        let mut store = Store::new(&self.engine, HostState::new(kv, self.limits.memory));
        store.limiter(|s| s as &mut dyn wasmtime::ResourceLimiter);
        store.epoch_deadline_trap();
        self.stats.instances += 1;
        let inst = match self.pre.instantiate(&mut store) {
            Ok(i) => i,
            Err(e) => {
                self.park(store);
                return Err(format!("no instance: {e:#}"));
            }
        };
        let memory = inst.get_memory(&mut store, export::MEMORY);
        store.data_mut().memory = memory;
        let init = inst.get_typed_func::<(), i32>(&mut store, export::INIT).ok();
        let abi = match inst.get_typed_func::<(), i32>(&mut store, export::ABI) {
            Ok(f) => f,
            Err(e) => {
                self.park(store);
                return Err(format!("{e:#}"));
            }
        };
        let mut live = Live {
            abi,
            message: inst.get_typed_func(&mut store, export::MESSAGE).ok(),
            tcp_open: inst.get_typed_func(&mut store, export::TCP_OPEN).ok(),
            tcp_data: inst.get_typed_func(&mut store, export::TCP_DATA).ok(),
            tcp_close: inst.get_typed_func(&mut store, export::TCP_CLOSE).ok(),
            store,
        };
        if let Some(init) = init {
            let (r, _) = self.call(&mut live, io, None, None, &[], |s| init.call(s, ()));
            match r {
                Ok(0) => {}
                Ok(v) => {
                    self.park(live.store);
                    return Err(format!("`ob_init` returned {v}"));
                }
                Err(f) => {
                    self.park(live.store);
                    return Err(format!("`ob_init` trapped ({})", f.name()));
                }
            }
        }
        self.live = Some(live);
        Ok(())
    }

    /// Keeps a discarded store's key-value store and counters.
    fn park(&mut self, mut store: Store<HostState>) {
        let st = store.data_mut();
        self.kv = Some(std::mem::take(&mut st.kv));
        self.stats.grow_refused += st.counters.grow_refused;
        self.stats.bad_args += st.counters.bad_args;
        self.stats.logs += st.counters.logs;
        self.stats.logs_dropped += st.counters.logs_dropped;
    }

    /// One call into the instance with `input` as the current input and a fresh deadline.
    fn call<R>(
        &self,
        live: &mut Live,
        io: &mut dyn HostIo,
        kind: Option<MessageKind>,
        from: Option<Addr>,
        input: &[u8],
        f: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> (Result<R, Fault>, bool) {
        let io: *mut (dyn HostIo + '_) = io;
        // SAFETY: only the lifetime is erased; `current` is cleared below,
        // before `io` and `input` can go out of scope.
        let io: *mut (dyn HostIo + 'static) = unsafe { std::mem::transmute(io) };
        live.store.data_mut().current = Some(Current { kind, from, input: input.as_ptr(), input_len: input.len(), io, replied: false });
        live.store.set_epoch_deadline(self.limits.deadline_ticks());
        let r = f(&mut live.store);
        let replied = live.store.data_mut().current.take().is_some_and(|c| c.replied);
        (r.map_err(classify), replied)
    }

    /// Runs the handler on `input`. A fault discards the instance (the next
    /// invocation makes a fresh one) and, after `max_faults` in a row,
    /// disables the handler.
    pub fn invoke(&mut self, io: &mut dyn HostIo, input: Input<'_>) -> Invoked {
        if self.disabled.is_some() {
            self.stats.refused_disabled += 1;
            return Invoked { outcome: Outcome::Disabled, replied: false };
        }
        if self.live.is_none() {
            if let Err(why) = self.instantiate(io) {
                self.stats.init_failures += 1;
                self.fault(Fault::Init, Some(why));
                return Invoked { outcome: Outcome::Fault(Fault::Init), replied: false };
            }
        }
        let mut live = self.live.take().expect("instantiated");
        self.stats.invocations += 1;
        let r = match input {
            Input::Message { kind, from, data } => {
                live.message.clone().map(|f| self.call(&mut live, io, Some(kind), Some(from), data, |s| f.call(s, (kind as i32, data.len() as i32))))
            }
            Input::TcpOpen { conn } => live.tcp_open.clone().map(|f| self.call(&mut live, io, None, None, &[], |s| f.call(s, conn as i32))),
            Input::TcpData { conn, data } => live.tcp_data.clone().map(|f| self.call(&mut live, io, None, None, data, |s| f.call(s, (conn as i32, data.len() as i32)))),
            Input::TcpClose { conn } => live.tcp_close.clone().map(|f| self.call(&mut live, io, None, None, &[], |s| f.call(s, conn as i32))),
        };
        match r {
            None => {
                self.live = Some(live);
                Invoked { outcome: Outcome::NoEntry, replied: false }
            }
            Some((Ok(v), replied)) => {
                self.live = Some(live);
                self.faults_in_a_row = 0;
                if v < 0 {
                    self.stats.errors_returned += 1;
                }
                Invoked { outcome: Outcome::Returned(v), replied }
            }
            Some((Err(f), replied)) => {
                self.park(live.store);
                self.fault(f, None);
                Invoked { outcome: Outcome::Fault(f), replied }
            }
        }
    }

    fn fault(&mut self, f: Fault, why: Option<String>) {
        match f {
            Fault::Overrun => self.stats.overruns += 1,
            Fault::OutOfBounds => self.stats.out_of_bounds += 1,
            Fault::StackOverflow => self.stats.stack_overflows += 1,
            Fault::Trap => self.stats.traps += 1,
            Fault::Init => {}
        }
        self.faults_in_a_row += 1;
        self.last_fault = Some(f);
        let max = self.limits.max_faults;
        if max > 0 && self.faults_in_a_row >= max {
            let detail = match (f, why) {
                (_, Some(w)) => w,
                (Fault::Overrun, None) => format!("overrun (deadline {} ms)", self.limits.deadline.as_millis()),
                (f, None) => f.name().to_string(),
            };
            self.disabled = Some(format!("{max} faults in a row, the last: {detail}"));
        }
    }
}

fn classify(e: wasmtime::Error) -> Fault {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => Fault::Overrun,
        Some(Trap::MemoryOutOfBounds | Trap::HeapMisaligned | Trap::TableOutOfBounds) => Fault::OutOfBounds,
        Some(Trap::StackOverflow) => Fault::StackOverflow,
        _ => Fault::Trap,
    }
}
