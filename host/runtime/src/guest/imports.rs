//! The `sluice:actor` imports: `host`, `outbox` and `bus`, as a guest calls them from a turn.
//! A guest-handleable failure is an `actor-error` value, never a trap.

use std::time::{Duration, Instant};

use sluice_flow::deadline;
use wasmtime::Result as WtResult;

use super::StoreState;
use super::convert::from_wit;
use super::convert::{delivery_path, receipt, to_wit};
use crate::bindings::batched::sluice::actor::turns;
use crate::bindings::sluice::actor::{bus, host, outbox, types};
use crate::bindings::wit;
use crate::error::ActorError;

/// The guest-facing result of a host call.
type Guest<T> = WtResult<Result<T, wit::ActorError>>;

impl types::Host for StoreState {}

impl host::Host for StoreState {
    async fn tell(
        &mut self,
        to: String,
        msg_type: String,
        payload: Vec<u8>,
    ) -> Guest<wit::TellReceipt> {
        let host = match self.host() {
            Ok(h) => h,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        if let Err(e) = host.check_ipc(&self.self_id, &self.turn.principal, payload.len()) {
            return Ok(Err(to_wit(e)));
        }
        let opts = self.inside_turn();
        Ok(host
            .tell(&to, msg_type, payload, opts)
            .await
            .map(receipt)
            .map_err(to_wit))
    }

    async fn ask(
        &mut self,
        to: String,
        msg_type: String,
        payload: Vec<u8>,
        timeout_ms: u64,
    ) -> Guest<Vec<u8>> {
        if timeout_ms == 0 {
            return Ok(Err(to_wit(ActorError::invalid_argument(
                "ask timeout-ms must be a positive number of milliseconds",
            ))));
        }
        let host = match self.host() {
            Ok(h) => h,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        // A per-call deadline only tightens the inherited one.
        let t0 = Instant::now();
        let mut opts = self.inside_turn();
        opts.deadline = Some(deadline::tighten(
            opts.deadline,
            t0,
            Duration::from_millis(timeout_ms),
        ));
        let r = host.ask(&to, msg_type, payload, opts).await;
        self.turn.waited += t0.elapsed();
        Ok(r.map_err(to_wit))
    }

    async fn schedule(&mut self, delay_ms: u64, msg_type: String, payload: Vec<u8>) -> Guest<()> {
        let principal = self.turn.principal.clone();
        Ok(self
            .host()
            .and_then(|h| {
                h.schedule(
                    &self.self_id,
                    Duration::from_millis(delay_ms),
                    msg_type,
                    payload,
                    principal,
                    self.turn.trace,
                )
            })
            .map_err(to_wit))
    }

    async fn self_id(&mut self) -> WtResult<String> {
        Ok(self.self_id.to_string())
    }

    async fn now_ms(&mut self) -> WtResult<u64> {
        Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0))
    }

    async fn log(&mut self, level: wit::LogLevel, msg: String) -> WtResult<()> {
        let actor = self.self_id.as_str();
        // A batched turn's lines belong to its own span (a single turn's call is instrumented
        // with its span instead, and this one is then disabled).
        let _in_turn = self.turn.span.enter();
        match level {
            wit::LogLevel::Trace => tracing::trace!(target: "sluice::guest", actor, "{msg}"),
            wit::LogLevel::Debug => tracing::debug!(target: "sluice::guest", actor, "{msg}"),
            wit::LogLevel::Info => tracing::info!(target: "sluice::guest", actor, "{msg}"),
            wit::LogLevel::Warn => tracing::warn!(target: "sluice::guest", actor, "{msg}"),
            wit::LogLevel::Error => tracing::error!(target: "sluice::guest", actor, "{msg}"),
        }
        Ok(())
    }
}

impl outbox::Host for StoreState {
    async fn dispatch(&mut self, req: wit::DispatchRequest) -> Guest<wit::DispatchResult> {
        let host = match self.host() {
            Ok(h) => h,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        let t0 = Instant::now();
        let r = host
            .dispatch(
                req,
                &self.self_id,
                &self.turn.principal,
                self.turn.deadline,
                self.turn.trace,
            )
            .await;
        self.turn.waited += t0.elapsed();
        Ok(r.map_err(to_wit))
    }

    async fn tell_reliable(
        &mut self,
        to: String,
        msg_type: String,
        payload: Vec<u8>,
    ) -> Guest<wit::DeliveryPath> {
        let host = match self.host() {
            Ok(h) => h,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        if let Err(e) = host.check_ipc(&self.self_id, &self.turn.principal, payload.len()) {
            return Ok(Err(to_wit(e)));
        }
        let opts = self.inside_turn();
        let t0 = Instant::now();
        let r = host.tell_reliable(&to, msg_type, payload, opts).await;
        self.turn.waited += t0.elapsed();
        Ok(r.map(delivery_path).map_err(to_wit))
    }

    async fn remind(
        &mut self,
        name: String,
        delay_ms: u64,
        msg_type: String,
        payload: Vec<u8>,
    ) -> Guest<()> {
        let host = match self.host() {
            Ok(h) => h,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        // A reminder is a send to itself, later: charged like one now.
        if let Err(e) = host.check_ipc(&self.self_id, &self.turn.principal, payload.len()) {
            return Ok(Err(to_wit(e)));
        }
        let t0 = Instant::now();
        let r = host
            .remind(
                &self.self_id,
                &name,
                delay_ms,
                msg_type,
                payload,
                &self.turn.principal,
                self.turn.trace,
            )
            .await;
        self.turn.waited += t0.elapsed();
        Ok(r.map_err(to_wit))
    }

    async fn cancel_reminder(&mut self, name: String) -> Guest<bool> {
        let host = match self.host() {
            Ok(h) => h,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        let t0 = Instant::now();
        let r = host.cancel_reminder(&self.self_id, &name).await;
        self.turn.waited += t0.elapsed();
        Ok(r.map_err(to_wit))
    }
}

impl bus::Host for StoreState {
    async fn publish(&mut self, topic: String, payload: Vec<u8>) -> Guest<()> {
        Ok(self
            .host()
            .and_then(|h| {
                h.publish(
                    &self.self_id,
                    &self.turn.principal,
                    &topic,
                    payload,
                    self.turn.trace,
                )
            })
            .map_err(to_wit))
    }
}

impl turns::Host for StoreState {
    fn next(
        &mut self,
        done: Option<Result<Vec<u8>, wit::ActorError>>,
    ) -> WtResult<Option<wit::Envelope>> {
        let Some(feed) = self.feed.as_mut() else {
            return Err(wasmtime::Error::msg(
                "turns.next called outside batch.run (the host runs this guest one call per message)",
            ));
        };
        feed.next(done.map(|r| r.map_err(from_wit)), &mut self.turn)
            .map_err(wasmtime::Error::msg)
    }
}
