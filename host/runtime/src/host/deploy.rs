//! Deploy without restart: a module compiled (or loaded from the cache) and linked into a new
//! version of its actor type. Turns in progress finish on the old code; later turns and new
//! activations use the new one; nothing queued is lost. Deploying the same spec and the same
//! module bytes again changes nothing and keeps the version.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::inner::HostInner;
use crate::actor::cell::InboxState;
use crate::actor::module::ModuleVersion;
use crate::bindings::ActorWorldPre;
use crate::bindings::batched::BatchedActorWorldPre;
use crate::config::ChildSpec;
use crate::error::LoadError;
use crate::id::ActorId;

/// What a deploy did: the version now serving, and how it got there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deployed {
    /// The type's version after the deploy.
    pub version: u64,
    /// The spec and module bytes were those of the version already serving: nothing was
    /// compiled or replaced, and running actors keep their state.
    pub unchanged: bool,
    /// The machine code came from the compile cache instead of being compiled now.
    pub cached: bool,
    /// Time spent compiling (or loading the cached machine code).
    pub compile_time: Duration,
}

/// A content hash of what a deploy installs: the spec (as JSON) and the module bytes.
fn fingerprint(spec: &ChildSpec, bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    // A spec always serialises (plain data); an empty string would only make a mismatch.
    h.update(serde_json::to_vec(spec).unwrap_or_default());
    h.update([0]);
    h.update(bytes);
    h.finalize().into()
}

impl HostInner {
    pub(crate) async fn deploy(
        &self,
        spec: ChildSpec,
        bytes: Vec<u8>,
    ) -> Result<Deployed, LoadError> {
        spec.validate()?;
        let strategy = spec.strategy()?;
        let name = spec.actor_type.clone();
        let print = fingerprint(&spec, &bytes);
        if let Some(version) = self.unchanged_version(&name, &print) {
            tracing::info!(actor_type = %name, version, "module unchanged, version kept");
            return Ok(Deployed {
                version,
                unchanged: true,
                cached: true,
                compile_time: Duration::ZERO,
            });
        }
        self.check_eager_fit(&spec)?;
        let cache = self.cache.clone();
        let n = name.clone();
        let started = Instant::now();
        let (component, cached) =
            tokio::task::spawn_blocking(move || cache.load_reporting(&n, &bytes))
                .await
                .map_err(|e| LoadError::Config(format!("compile task failed: {e}")))??;
        let compile_time = started.elapsed();
        let link = |e: wasmtime::Error| LoadError::Link {
            name: name.clone(),
            reason: format!("{e:#}"),
        };
        let pre = self.linker.instantiate_pre(&component).map_err(link)?;
        let config = &self.env.config;
        // A guest of `batched-actor-world` (it exports `batch`) runs queued messages in one
        // call; any other is a guest of `actor-world`, one call per message.
        let batched = (config.max_batch_turns > 1)
            .then(|| BatchedActorWorldPre::new(pre.clone()).ok())
            .flatten();
        let pre = ActorWorldPre::new(pre).map_err(link)?;
        let memory_mb = spec.memory_limit_mb.unwrap_or(config.memory_limit_mb);
        let module = ModuleVersion {
            version: 1,
            pre,
            batched,
            strategy,
            init_json: spec.init_json(),
            memory_limit: (memory_mb as usize) << 20,
            wasi: Arc::new(spec.wasi.clone()),
            spec: spec.clone(),
        };
        let local = self.local();
        let (entry, version) = local.registry.insert_or_replace(&name, module);
        let cap = spec.max_queued.unwrap_or(config.max_queued_per_actor);
        entry.ty.max_queued.store(cap, Ordering::Relaxed);
        entry
            .ty
            .max_activations
            .store(spec.max_activations.unwrap_or(0), Ordering::Relaxed);
        local.admission.note_type_cap(cap);
        // A stopped actor gets a fresh start with new code; live ones take the new mailbox
        // bounds now rather than at their next activation (nothing queued is dropped).
        entry.retain(|c| {
            let mut inbox = c.inbox.lock();
            inbox.mb.set_limits(spec.mailbox_capacity, strategy);
            inbox.state != InboxState::Stopped
        });
        // Where the activation hooks place supervised instances (a cluster), they start them.
        let placed = local
            .env
            .activations()
            .is_some_and(|h| h.places_supervised());
        for key in spec.eager_keys().into_iter().filter(|_| !placed) {
            let id = ActorId::new(&name, &key).map_err(|e| LoadError::Config(e.to_string()))?;
            local.cell(&entry, &id, true).map_err(|e| {
                LoadError::Config(format!(
                    "cannot start supervised instance {id}: {e} (count must fit max_activations)"
                ))
            })?;
        }
        self.deployed.lock().insert(name.clone(), (print, version));
        tracing::info!(actor_type = %name, version, cached, compile_ms = compile_time.as_millis() as u64, "module deployed");
        Ok(Deployed {
            version,
            unchanged: false,
            cached,
            compile_time,
        })
    }

    /// The serving version of `name` when its last deploy had this fingerprint.
    fn unchanged_version(&self, name: &str, print: &[u8; 32]) -> Option<u64> {
        let (last, version) = *self.deployed.lock().get(name)?;
        let serving = self.local().registry.get(name)?.ty.current_version();
        (last == *print && serving == version).then_some(version)
    }

    /// Supervised instances are never evicted: a type's must fit beside every other type's
    /// under `max_activations`, or the deploy is refused (and the running version, if any,
    /// keeps serving) instead of taking every slot from everyone else.
    fn check_eager_fit(&self, spec: &ChildSpec) -> Result<(), LoadError> {
        let eager = spec.eager_keys().len();
        if eager == 0 {
            return Ok(());
        }
        let others: usize = self
            .local()
            .registry
            .all()
            .iter()
            .filter(|t| *t.ty.name != *spec.actor_type)
            .map(|t| t.ty.current().spec.eager_keys().len())
            .sum();
        let cap = self.env.config.max_activations as usize;
        if others + eager > cap {
            return Err(LoadError::Config(format!(
                "{}: {eager} supervised instances (count/keys) do not fit host.max_activations={cap}: other types' supervised instances already hold {others}",
                spec.name
            )));
        }
        Ok(())
    }
}
