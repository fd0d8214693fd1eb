//! The one wasmtime `Engine` of a host (built the same way for every host and for the
//! benchmarks' raw baseline, which reaches it through the hidden `bench_baseline` module),
//! its epoch ticker, and the on-disk component cache.

mod cache;

pub use cache::ComponentCache;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::config::{HostConfig, MAX_MEMORY_LIMIT_MB};
use crate::error::HostError;

/// How often the epoch advances; the granularity of turn interruption and of yielding.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Hard per-memory ceiling of the pool; a child's `memory_limit_mb` may only lower it.
const POOL_MAX_MEMORY: usize = (MAX_MEMORY_LIMIT_MB as usize) << 20;

/// Bytes of a freed linear memory kept resident for the slot's next activation.
const KEEP_RESIDENT: usize = 1 << 20;

/// Builds the engine: pooling allocator sized for `max_activations`, copy-on-write memory
/// images, epoch interruption. Fails [`HostError::Engine`] when the pool's address space
/// cannot be reserved.
pub fn build_engine(cfg: &HostConfig) -> Result<Engine, HostError> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.memory_init_cow(true);
    let n = cfg.max_activations + 16;
    let mut pool = PoolingAllocationConfig::default();
    // Core-instance slots are only counted (no memory behind them), so every component may
    // use its per-component maximum: a Python actor holds ~14, and `max_activations` must
    // mean actors of any language. Memory and table slots reserve address space; every
    // toolchain here uses 1 memory and 2 tables per component, so 2 and 4 leave room.
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(50))
        .total_memories(n.saturating_mul(2))
        .total_tables(n.saturating_mul(4))
        .total_stacks(n)
        .max_core_instances_per_component(50)
        .max_memories_per_component(8)
        .max_tables_per_component(16)
        .table_elements(100_000)
        .max_memory_size(POOL_MAX_MEMORY)
        .max_component_instance_size(1 << 20)
        .max_core_instance_size(1 << 20)
        // A deactivated actor's slot is reset by zeroing only its resident pages (found with
        // PAGEMAP_SCAN where the kernel has it) instead of unmapping them, so the next
        // activation in that slot does not fault its stack and heap back in.
        .pagemap_scan(wasmtime::Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).map_err(|e| HostError::Engine {
        max_activations: cfg.max_activations,
        reason: format!("{e:#}"),
    })
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own until dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    /// Starts ticking `engine`.
    pub fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("sluice-epoch".into())
            .spawn(move || {
                // Relaxed: the flag only ends the loop; nothing else is published through it.
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                    crate::clock::tick();
                }
            })
            .expect("spawn epoch thread");
        Self { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
