//! Baselines for benchmarks: a component called directly through wasmtime, with none of the
//! host's mailbox, scheduling or supervision in between. Not part of the stable API.

use std::time::Duration;

use wasmtime::Store;

use crate::bindings::{ActorWorld, ActorWorldPre, wit};
use crate::host::Host;
use crate::registry::ActorId;
use crate::state::StoreState;

/// One instance of a component in a store of its own, on the host's engine and linker.
pub struct RawInstance {
    store: Store<StoreState>,
    world: ActorWorld,
}

impl RawInstance {
    /// Compiles (or loads from cache) and instantiates `wasm`, then runs `init("{}")`.
    pub async fn new(host: &Host, wasm: &[u8]) -> anyhow::Result<Self> {
        Self::start(host, &prepare(host, wasm)?).await
    }

    /// A fresh store, an instance of `pre` in it, and `init("{}")` run.
    async fn start(host: &Host, pre: &ActorWorldPre<StoreState>) -> anyhow::Result<Self> {
        let mut store = raw_store(host)?;
        let world = pre.instantiate_async(&mut store).await?;
        world
            .sluice_actor_actor()
            .call_init(&mut store, "{}")
            .await?
            .map_err(|e| anyhow::anyhow!(e.message))?;
        Ok(Self { store, world })
    }

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

/// The component of `wasm` (compiled or loaded from the host's cache), ready to instantiate.
fn prepare(host: &Host, wasm: &[u8]) -> anyhow::Result<ActorWorldPre<StoreState>> {
    let inner = host.inner();
    let component = inner.cache().load("raw", wasm)?;
    Ok(ActorWorldPre::new(
        inner.linker().instantiate_pre(&component)?,
    )?)
}

/// A store on the host's engine with no turn limit and the default memory ceiling.
fn raw_store(host: &Host) -> anyhow::Result<Store<StoreState>> {
    let inner = host.inner();
    let state = StoreState::new(
        inner.clone(),
        ActorId::parse("Raw/0")?,
        Default::default(),
        128 << 20,
        Duration::from_secs(3600),
    );
    let mut store = Store::new(&inner.engine, state);
    store.set_epoch_deadline(u64::MAX / 2);
    Ok(store)
}

/// Time to instantiate `wasm` `n` times (each instance dropped before the next), for the
/// activation benchmark's baseline.
pub async fn instantiate_n(host: &Host, wasm: &[u8], n: usize) -> anyhow::Result<Duration> {
    let pre = prepare(host, wasm)?;
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        let mut store = raw_store(host)?;
        let world = pre.instantiate_async(&mut store).await?;
        std::hint::black_box(&world);
    }
    Ok(t0.elapsed())
}

/// Time to bring up `n` instances the way an activation does — instantiate, `init("{}")`,
/// one `handle` call — keeping them all alive (so each lands in a fresh pool slot and pays
/// its first-touch page faults), for the activation benchmark's like-for-like baseline.
pub async fn activate_n(host: &Host, wasm: &[u8], n: usize) -> anyhow::Result<Duration> {
    let times = RawComponent::new(host, wasm)?
        .activate_batch(host, n)
        .await?;
    Ok(times.iter().sum())
}

/// Where an activation's time goes, per phase, averaged over `n` activations whose instances
/// are dropped before the next one (so each reuses a warm pool slot): store creation,
/// instantiation, `init("{}")`, the first `handle` call and a second one.
pub async fn activation_phases(
    host: &Host,
    wasm: &[u8],
    n: usize,
) -> anyhow::Result<[Duration; 5]> {
    let pre = prepare(host, wasm)?;
    let mut sum = [Duration::ZERO; 5];
    for _ in 0..n {
        let t = std::time::Instant::now();
        let mut store = raw_store(host)?;
        let t1 = std::time::Instant::now();
        let world = pre.instantiate_async(&mut store).await?;
        let t2 = std::time::Instant::now();
        world
            .sluice_actor_actor()
            .call_init(&mut store, "{}")
            .await?
            .map_err(|e| anyhow::anyhow!(e.message))?;
        let t3 = std::time::Instant::now();
        let mut raw = RawInstance { store, world };
        std::hint::black_box(raw.call("echo", b"").await?);
        let t4 = std::time::Instant::now();
        std::hint::black_box(raw.call("echo", b"").await?);
        let t5 = std::time::Instant::now();
        for (s, d) in sum
            .iter_mut()
            .zip([t1 - t, t2 - t1, t3 - t2, t4 - t3, t5 - t4])
        {
            *s += d;
        }
    }
    Ok(sum.map(|d| d / n as u32))
}

/// A component prepared once, for baselines that bring up many instances of it.
pub struct RawComponent {
    pre: ActorWorldPre<StoreState>,
}

impl RawComponent {
    /// Compiles (or loads from cache) `wasm` for `host`'s engine.
    pub fn new(host: &Host, wasm: &[u8]) -> anyhow::Result<Self> {
        Ok(Self {
            pre: prepare(host, wasm)?,
        })
    }

    /// Activation in the pattern of a host below its cap: `width` instances brought up one
    /// after another (instantiate, `init("{}")`, one `handle` call), each timed on its own
    /// and all kept alive, then dropped together so the next batch reuses their slots.
    pub async fn activate_batch(&self, host: &Host, width: usize) -> anyhow::Result<Vec<Duration>> {
        let mut times = Vec::with_capacity(width);
        let mut live = Vec::with_capacity(width);
        for _ in 0..width {
            let t = std::time::Instant::now();
            let mut raw = RawInstance::start(host, &self.pre).await?;
            std::hint::black_box(raw.call("echo", b"").await?);
            times.push(t.elapsed());
            live.push(raw);
        }
        Ok(times)
    }

    /// One live instance, for the cost of a call to subtract from an activation.
    pub async fn instance(&self, host: &Host) -> anyhow::Result<RawInstance> {
        RawInstance::start(host, &self.pre).await
    }
}
