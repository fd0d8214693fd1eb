//! The benchmarks' baseline: a component called straight through wasmtime, on an engine built
//! exactly as a host builds its own (`sluice_runtime::bench_baseline`, hidden from the runtime's docs), with the same imports linked
//! (WASI and `sluice:actor`, here as stubs) but none of the host's mailboxes, scheduling or
//! supervision in between. Not part of the runtime: a baseline is the tests' business.

use std::time::{Duration, Instant};

use sluice_runtime::HostConfig;
use sluice_runtime::bench_baseline::{ComponentCache, build_engine};
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "actor-world",
    imports: { default: async | trappable },
    exports: { default: async },
});

use sluice::actor::types as wit;
use sluice::actor::{bus, host, outbox, types};

/// The `turns` import of `batched-actor-world`, linked so that a guest of that world (every
/// SDK builds one) instantiates; the baseline calls `handle` only, never `batch.run`.
mod batched {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "batched-actor-world",
        imports: { "sluice:actor/turns.next": trappable, default: async | trappable },
        exports: { default: async },
        with: {
            "sluice:actor/types": crate::raw::sluice::actor::types,
            "sluice:actor/host": crate::raw::sluice::actor::host,
            "sluice:actor/outbox": crate::raw::sluice::actor::outbox,
            "sluice:actor/bus": crate::raw::sluice::actor::bus,
        },
    });
}

impl batched::sluice::actor::turns::Host for RawState {
    fn next(
        &mut self,
        _: Option<Result<Vec<u8>, wit::ActorError>>,
    ) -> wasmtime::Result<Option<wit::Envelope>> {
        Err(wasmtime::Error::msg(
            "turns.next: the raw baseline runs no batches",
        ))
    }
}

/// A store's state: an empty WASI context and nothing else.
pub struct RawState {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for RawState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn unavailable() -> wit::ActorError {
    wit::ActorError {
        code: wit::ErrorCode::Unavailable,
        message: "UNAVAILABLE: a raw baseline instance has no host".into(),
        retry_after_ms: None,
        skipped: false,
        overload: None,
    }
}

impl types::Host for RawState {}

impl host::Host for RawState {
    async fn tell(
        &mut self,
        _: String,
        _: String,
        _: Vec<u8>,
    ) -> wasmtime::Result<Result<wit::TellReceipt, wit::ActorError>> {
        Ok(Err(unavailable()))
    }
    async fn ask(
        &mut self,
        _: String,
        _: String,
        _: Vec<u8>,
        _: u64,
    ) -> wasmtime::Result<Result<Vec<u8>, wit::ActorError>> {
        Ok(Err(unavailable()))
    }
    async fn schedule(
        &mut self,
        _: u64,
        _: String,
        _: Vec<u8>,
    ) -> wasmtime::Result<Result<(), wit::ActorError>> {
        Ok(Err(unavailable()))
    }
    async fn self_id(&mut self) -> wasmtime::Result<String> {
        Ok("Raw/0".into())
    }
    async fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(0)
    }
    async fn log(&mut self, _: wit::LogLevel, _: String) -> wasmtime::Result<()> {
        Ok(())
    }
}

impl outbox::Host for RawState {
    async fn dispatch(
        &mut self,
        _: wit::DispatchRequest,
    ) -> wasmtime::Result<Result<wit::DispatchResult, wit::ActorError>> {
        Ok(Err(unavailable()))
    }
    async fn tell_reliable(
        &mut self,
        _: String,
        _: String,
        _: Vec<u8>,
    ) -> wasmtime::Result<Result<wit::DeliveryPath, wit::ActorError>> {
        Ok(Err(unavailable()))
    }
    async fn remind(
        &mut self,
        _: String,
        _: u64,
        _: String,
        _: Vec<u8>,
    ) -> wasmtime::Result<Result<(), wit::ActorError>> {
        Ok(Err(unavailable()))
    }
    async fn cancel_reminder(
        &mut self,
        _: String,
    ) -> wasmtime::Result<Result<bool, wit::ActorError>> {
        Ok(Err(unavailable()))
    }
}

impl bus::Host for RawState {
    async fn publish(
        &mut self,
        _: String,
        _: Vec<u8>,
    ) -> wasmtime::Result<Result<(), wit::ActorError>> {
        Ok(Err(unavailable()))
    }
}

/// An engine and linker built as a host with `cfg` builds its own.
pub struct RawEngine {
    engine: Engine,
    linker: Linker<RawState>,
    cache: ComponentCache,
}

impl RawEngine {
    /// The engine (pooling allocator sized for `cfg.max_activations`, copy-on-write images,
    /// epoch interruption) and a linker with every import a guest may use.
    pub fn new(cfg: &HostConfig) -> anyhow::Result<Self> {
        let engine = build_engine(cfg)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        ActorWorld::add_to_linker::<RawState, HasSelf<RawState>>(&mut linker, |s| s)?;
        batched::sluice::actor::turns::add_to_linker::<RawState, HasSelf<RawState>>(
            &mut linker,
            |s| s,
        )?;
        let cache = ComponentCache::new(engine.clone(), cfg.cache_dir.clone());
        Ok(Self {
            engine,
            linker,
            cache,
        })
    }

    /// A store with no turn limit (the epoch deadline is far away).
    fn store(&self) -> Store<RawState> {
        let mut store = Store::new(
            &self.engine,
            RawState {
                wasi: WasiCtx::builder().build(),
                table: ResourceTable::new(),
            },
        );
        store.set_epoch_deadline(u64::MAX / 2);
        store
    }

    /// `wasm` compiled (or loaded from the cache) and pre-linked.
    pub fn component(&self, wasm: &[u8]) -> anyhow::Result<RawComponent> {
        let component = self.cache.load("raw", wasm)?;
        let pre = ActorWorldPre::new(self.linker.instantiate_pre(&component)?)?;
        Ok(RawComponent { pre })
    }

    /// Time to instantiate `wasm` `n` times, each instance dropped before the next.
    pub async fn instantiate_n(&self, wasm: &[u8], n: usize) -> anyhow::Result<Duration> {
        let c = self.component(wasm)?;
        let t0 = Instant::now();
        for _ in 0..n {
            let mut store = self.store();
            let world = c.pre.instantiate_async(&mut store).await?;
            std::hint::black_box(&world);
        }
        Ok(t0.elapsed())
    }

    /// Time to bring up `n` instances the way an activation does — instantiate,
    /// `init("{}")`, one `handle` call — keeping them all alive (each in a fresh pool slot).
    pub async fn activate_n(&self, wasm: &[u8], n: usize) -> anyhow::Result<Duration> {
        let times = self.component(wasm)?.activate_batch(self, n).await?;
        Ok(times.iter().sum())
    }

    /// Where an activation's time goes, per phase, averaged over `n` activations whose
    /// instances are dropped before the next one: store creation, instantiation,
    /// `init("{}")`, the first `handle` call and a second one.
    pub async fn activation_phases(&self, wasm: &[u8], n: usize) -> anyhow::Result<[Duration; 5]> {
        let c = self.component(wasm)?;
        let mut sum = [Duration::ZERO; 5];
        for _ in 0..n {
            let t = Instant::now();
            let mut store = self.store();
            let t1 = Instant::now();
            let world = c.pre.instantiate_async(&mut store).await?;
            let t2 = Instant::now();
            world
                .sluice_actor_actor()
                .call_init(&mut store, "{}")
                .await?
                .map_err(|e| anyhow::anyhow!(e.message))?;
            let t3 = Instant::now();
            let mut raw = RawInstance { store, world };
            std::hint::black_box(raw.call("echo", b"").await?);
            let t4 = Instant::now();
            std::hint::black_box(raw.call("echo", b"").await?);
            let t5 = Instant::now();
            for (s, d) in sum
                .iter_mut()
                .zip([t1 - t, t2 - t1, t3 - t2, t4 - t3, t5 - t4])
            {
                *s += d;
            }
        }
        Ok(sum.map(|d| d / n as u32))
    }
}

/// A component prepared once, for baselines that bring up many instances of it.
pub struct RawComponent {
    pre: ActorWorldPre<RawState>,
}

impl RawComponent {
    /// A fresh store, an instance in it, and `init("{}")` run.
    pub async fn instance(&self, engine: &RawEngine) -> anyhow::Result<RawInstance> {
        let mut store = engine.store();
        let world = self.pre.instantiate_async(&mut store).await?;
        world
            .sluice_actor_actor()
            .call_init(&mut store, "{}")
            .await?
            .map_err(|e| anyhow::anyhow!(e.message))?;
        Ok(RawInstance { store, world })
    }

    /// Activation in the pattern of a host below its cap: `width` instances brought up one
    /// after another (instantiate, `init("{}")`, one `handle` call), each timed on its own
    /// and all kept alive, then dropped together so the next batch reuses their slots.
    pub async fn activate_batch(
        &self,
        engine: &RawEngine,
        width: usize,
    ) -> anyhow::Result<Vec<Duration>> {
        let mut times = Vec::with_capacity(width);
        let mut live = Vec::with_capacity(width);
        for _ in 0..width {
            let t = Instant::now();
            let mut raw = self.instance(engine).await?;
            std::hint::black_box(raw.call("echo", b"").await?);
            times.push(t.elapsed());
            live.push(raw);
        }
        Ok(times)
    }
}

/// One live instance.
pub struct RawInstance {
    store: Store<RawState>,
    world: ActorWorld,
}

impl RawInstance {
    /// Calls `handle` once.
    pub async fn call(&mut self, msg_type: &str, payload: &[u8]) -> anyhow::Result<Vec<u8>> {
        let env = wit::Envelope {
            sender: None,
            msg_type: msg_type.to_string(),
            payload: payload.to_vec(),
            principal: "system".to_string(),
            deadline_ms: None,
        };
        self.world
            .sluice_actor_actor()
            .call_handle(&mut self.store, &env)
            .await?
            .map_err(|e| anyhow::anyhow!(e.message))
    }
}
