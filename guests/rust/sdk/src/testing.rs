//! A fake host for unit tests (feature `testing`): run an actor natively with `cargo test`.
//!
//! While a [`FakeHost`] is installed on the current thread, every `host::*`, `outbox::*` and
//! `bus::*` call is recorded and answered from the fake's settings instead of going to a host.
//! Each test thread has its own fake, so tests run in parallel as usual.
//!
//! ```ignore
//! use sluice_guest::testing::{Call, FakeHost};
//!
//! #[test]
//! fn forward_asks_the_worker() {
//!     let fake = FakeHost::install();
//!     fake.set_ask_reply(br#"{"done":true}"#);
//!     let mut actor = MyActor::init("{}").unwrap();
//!     assert_eq!(fake.handle(&mut actor, "forward", "{}").unwrap(), br#"{"done":true}"#);
//!     assert_eq!(fake.calls(), [Call::Ask { to: "Worker/1".into(), msg_type: "process".into(), payload: b"{}".to_vec(), timeout_ms: 2000 }]);
//! }
//! ```
//!
//! With the feature on, the SDK calls the fake on every target: enable it for tests only,
//! `sluice-guest = { path = "...", features = ["testing"] }` under `[dev-dependencies]` (Cargo
//! does not unify dev-dependency features into `cargo build`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use crate::{
    Actor, DeliveryPath, DispatchRequest, DispatchResult, Envelope, Error, LogLevel, TellReceipt,
};

/// One fallible host call the actor made, as the host received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `host::tell`.
    Tell {
        /// The target actor id.
        to: String,
        /// The message type.
        msg_type: String,
        /// The payload.
        payload: Vec<u8>,
    },
    /// `host::ask` (the deadline as sent, after `with_deadline`).
    Ask {
        /// The target actor id.
        to: String,
        /// The message type.
        msg_type: String,
        /// The payload.
        payload: Vec<u8>,
        /// The call's deadline in ms.
        timeout_ms: u64,
    },
    /// `host::schedule`.
    Schedule {
        /// The delay in ms.
        delay_ms: u64,
        /// The message type.
        msg_type: String,
        /// The payload.
        payload: Vec<u8>,
    },
    /// `outbox::Dispatch::send`, with the request exactly as sent.
    Dispatch(DispatchRequest),
    /// `outbox::tell_reliable`.
    TellReliable {
        /// The target actor id.
        to: String,
        /// The message type.
        msg_type: String,
        /// The payload.
        payload: Vec<u8>,
    },
    /// `bus::publish`.
    Publish {
        /// The topic.
        topic: String,
        /// The payload.
        payload: Vec<u8>,
    },
}

type AskFn = Box<dyn FnMut(&str, &str, &[u8]) -> Vec<u8>>;

struct State {
    self_id: String,
    now_ms: u64,
    ask_reply: AskFn,
    receipt: TellReceipt,
    delivery_path: DeliveryPath,
    dispatch_result: Option<DispatchResult>,
    calls: Vec<Call>,
    logs: Vec<(LogLevel, String)>,
    failures: VecDeque<Error>,
}

thread_local! {
    /// The fake the current thread's host calls go to (the innermost installed one).
    static CURRENT: RefCell<Option<Rc<RefCell<State>>>> = const { RefCell::new(None) };
}

/// The fake host, installed on this thread from [`FakeHost::install`] until it is dropped.
///
/// Defaults: `self_id` `MyActor/1`, `now_ms` 1000, `ask` answers `{}`, `tell` is `Queued`,
/// `tell_reliable` goes `Direct`, `dispatch` accepts every target.
pub struct FakeHost {
    state: Rc<RefCell<State>>,
    previous: Option<Rc<RefCell<State>>>,
}

impl FakeHost {
    /// Installs a fake with the defaults on the current thread; dropping it puts back the one
    /// installed before (if any).
    #[must_use = "the fake is uninstalled when dropped"]
    pub fn install() -> Self {
        let state = Rc::new(RefCell::new(State {
            self_id: "MyActor/1".into(),
            now_ms: 1000,
            ask_reply: Box::new(|_, _, _| b"{}".to_vec()),
            receipt: TellReceipt::Queued,
            delivery_path: DeliveryPath::Direct,
            dispatch_result: None,
            calls: Vec::new(),
            logs: Vec::new(),
            failures: VecDeque::new(),
        }));
        let previous = CURRENT.with(|c| c.borrow_mut().replace(state.clone()));
        Self { state, previous }
    }

    /// What `host::self_id()` returns.
    pub fn set_self_id(&self, id: &str) {
        self.state.borrow_mut().self_id = id.to_string();
    }

    /// What `host::now_ms()` returns.
    pub fn set_now_ms(&self, ms: u64) {
        self.state.borrow_mut().now_ms = ms;
    }

    /// Moves the fake clock forward.
    pub fn advance(&self, ms: u64) {
        self.state.borrow_mut().now_ms += ms;
    }

    /// What every `host::ask` answers.
    pub fn set_ask_reply(&self, reply: impl AsRef<[u8]>) {
        let reply = reply.as_ref().to_vec();
        self.state.borrow_mut().ask_reply = Box::new(move |_, _, _| reply.clone());
    }

    /// Answers `host::ask` with `f(to, msg_type, payload)`.
    pub fn reply_to_ask(&self, f: impl FnMut(&str, &str, &[u8]) -> Vec<u8> + 'static) {
        self.state.borrow_mut().ask_reply = Box::new(f);
    }

    /// What `host::tell` returns.
    pub fn set_receipt(&self, receipt: TellReceipt) {
        self.state.borrow_mut().receipt = receipt;
    }

    /// Where `outbox::tell_reliable` says the message went.
    pub fn set_delivery_path(&self, path: DeliveryPath) {
        self.state.borrow_mut().delivery_path = path;
    }

    /// What `Dispatch::send` returns (default: every target accepted).
    pub fn set_dispatch_result(&self, accepted: u32, rejected: u32) {
        self.state.borrow_mut().dispatch_result = Some(DispatchResult { accepted, rejected });
    }

    /// The next fallible call fails with `err` (queued: one error per call, in order). The
    /// actor sees it exactly as a host's `actor-error`.
    pub fn fail_next(&self, err: Error) {
        self.state.borrow_mut().failures.push_back(err);
    }

    /// The fallible calls so far, in order (`log`, `self_id`, `now_ms` are not recorded here).
    pub fn calls(&self) -> Vec<Call> {
        self.state.borrow().calls.clone()
    }

    /// Every `host::log` so far.
    pub fn logs(&self) -> Vec<(LogLevel, String)> {
        self.state.borrow().logs.clone()
    }

    /// Delivers `msg_type` with `payload` to `actor` as principal `system` with no sender and
    /// no deadline; see [`FakeHost::deliver`] for a full envelope.
    pub fn handle<A: Actor>(
        &self,
        actor: &mut A,
        msg_type: &str,
        payload: impl AsRef<[u8]>,
    ) -> Result<Vec<u8>, Error> {
        self.deliver(
            actor,
            Envelope {
                sender: None,
                msg_type: msg_type.to_string(),
                payload: payload.as_ref().to_vec(),
                principal: "system".into(),
                deadline_ms: None,
            },
        )
    }

    /// Delivers one envelope to `actor` and returns what the caller would get.
    pub fn deliver<A: Actor>(&self, actor: &mut A, env: Envelope) -> Result<Vec<u8>, Error> {
        assert!(
            CURRENT.with(|c| c
                .borrow()
                .as_ref()
                .is_some_and(|s| Rc::ptr_eq(s, &self.state))),
            "this FakeHost is not the one installed on this thread"
        );
        actor.handle(env)
    }
}

impl Drop for FakeHost {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// The WIT import functions, with the generated bindings' signatures, answered by the fake.
pub(crate) mod imports {
    use super::{CURRENT, Call, State};
    use crate::bindings::sluice::actor::types::ActorError;
    use crate::{DeliveryPath, DispatchRequest, DispatchResult, LogLevel, TellReceipt};

    fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
        let state = CURRENT
            .with(|c| c.borrow().clone())
            .expect("a host call outside a component needs a fake host: `let fake = sluice_guest::testing::FakeHost::install();`");
        let mut s = state.borrow_mut();
        f(&mut s)
    }

    /// Records `call`, then fails it if an error was scripted.
    fn record(s: &mut State, call: Call) -> Result<(), ActorError> {
        s.calls.push(call);
        s.failures.pop_front().map_or(Ok(()), |e| Err(e.into()))
    }

    pub fn tell(to: &str, msg_type: &str, payload: &[u8]) -> Result<TellReceipt, ActorError> {
        with(|s| {
            record(
                s,
                Call::Tell {
                    to: to.into(),
                    msg_type: msg_type.into(),
                    payload: payload.to_vec(),
                },
            )?;
            Ok(s.receipt)
        })
    }

    pub fn ask(
        to: &str,
        msg_type: &str,
        payload: &[u8],
        timeout_ms: u64,
    ) -> Result<Vec<u8>, ActorError> {
        with(|s| {
            record(
                s,
                Call::Ask {
                    to: to.into(),
                    msg_type: msg_type.into(),
                    payload: payload.to_vec(),
                    timeout_ms,
                },
            )?;
            Ok((s.ask_reply)(to, msg_type, payload))
        })
    }

    pub fn schedule(delay_ms: u64, msg_type: &str, payload: &[u8]) -> Result<(), ActorError> {
        with(|s| {
            record(
                s,
                Call::Schedule {
                    delay_ms,
                    msg_type: msg_type.into(),
                    payload: payload.to_vec(),
                },
            )
        })
    }

    pub fn self_id() -> String {
        with(|s| s.self_id.clone())
    }

    pub fn now_ms() -> u64 {
        with(|s| s.now_ms)
    }

    pub fn log(level: LogLevel, msg: &str) {
        with(|s| s.logs.push((level, msg.to_string())));
    }

    pub fn dispatch(req: &DispatchRequest) -> Result<DispatchResult, ActorError> {
        with(|s| {
            record(s, Call::Dispatch(req.clone()))?;
            Ok(s.dispatch_result.unwrap_or(DispatchResult {
                accepted: req.targets.len() as u32,
                rejected: 0,
            }))
        })
    }

    pub fn tell_reliable(
        to: &str,
        msg_type: &str,
        payload: &[u8],
    ) -> Result<DeliveryPath, ActorError> {
        with(|s| {
            record(
                s,
                Call::TellReliable {
                    to: to.into(),
                    msg_type: msg_type.into(),
                    payload: payload.to_vec(),
                },
            )?;
            Ok(s.delivery_path)
        })
    }

    pub fn publish(topic: &str, payload: &[u8]) -> Result<(), ActorError> {
        with(|s| {
            record(
                s,
                Call::Publish {
                    topic: topic.into(),
                    payload: payload.to_vec(),
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorCode, OverloadInfo, OverloadScope, bus, host, outbox};

    #[test]
    fn host_calls_are_recorded_and_answered_from_the_settings() {
        let fake = FakeHost::install();
        fake.set_self_id("Echo/1");
        fake.set_now_ms(1234);
        fake.advance(6);
        fake.reply_to_ask(|to, _, payload| [to.as_bytes(), payload].concat());
        assert_eq!(
            (host::self_id(), host::now_ms()),
            ("Echo/1".to_string(), 1240)
        );
        assert_eq!(host::tell("W/1", "job", "1").unwrap(), TellReceipt::Queued);
        assert_eq!(
            host::with_deadline(std::time::Duration::from_millis(250))
                .ask("W/7", "p", "!", 5000)
                .unwrap(),
            b"W/7!"
        );
        host::schedule(50, "tick", "t").unwrap();
        assert_eq!(
            outbox::tell_reliable("W/1", "job", "2").unwrap(),
            DeliveryPath::Direct
        );
        let sent = outbox::Dispatch::new(&["W/1", "W/2"], "hb", "3")
            .idempotency_key("k", crate::Conflict::Overwrite)
            .send()
            .unwrap();
        assert_eq!((sent.accepted, sent.rejected), (2, 0));
        bus::publish("a.b", "4").unwrap();
        host::log(LogLevel::Warn, "careful");
        let calls = fake.calls();
        assert_eq!(
            calls[..3],
            [
                Call::Tell {
                    to: "W/1".into(),
                    msg_type: "job".into(),
                    payload: b"1".to_vec()
                },
                Call::Ask {
                    to: "W/7".into(),
                    msg_type: "p".into(),
                    payload: b"!".to_vec(),
                    timeout_ms: 250
                },
                Call::Schedule {
                    delay_ms: 50,
                    msg_type: "tick".into(),
                    payload: b"t".to_vec()
                },
            ]
        );
        assert!(
            matches!(&calls[4], Call::Dispatch(r) if r.idempotency_key == "k" && r.conflict == crate::Conflict::Overwrite)
        );
        assert_eq!(
            calls[5],
            Call::Publish {
                topic: "a.b".into(),
                payload: b"4".to_vec()
            }
        );
        assert_eq!(fake.logs(), [(LogLevel::Warn, "careful".to_string())]);
    }

    #[test]
    fn scripted_errors_reach_the_caller_whole_one_call_each() {
        let fake = FakeHost::install();
        let overloaded = Error {
            overload: Some(OverloadInfo {
                scope: OverloadScope::Actor,
                depth: 7,
                limit: 5,
            }),
            ..Error::new(ErrorCode::Overloaded, "OVERLOADED: busy")
        };
        fake.fail_next(overloaded.clone());
        fake.fail_next(Error {
            retry_after_ms: Some(3),
            ..Error::new(ErrorCode::ResourceExhausted, "RESOURCE_EXHAUSTED: full")
        });
        assert_eq!(host::ask("W/1", "p", "", 10).unwrap_err(), overloaded);
        assert_eq!(bus::publish("t", "").unwrap_err().retry_after_ms, Some(3));
        assert_eq!(host::ask("W/1", "p", "", 10).unwrap(), b"{}");
        assert_eq!(fake.calls().len(), 3);
    }

    #[test]
    fn a_nested_fake_restores_the_outer_one_and_none_installed_panics() {
        let outer = FakeHost::install();
        outer.set_now_ms(1);
        {
            let inner = FakeHost::install();
            inner.set_now_ms(2);
            assert_eq!(host::now_ms(), 2);
        }
        assert_eq!(host::now_ms(), 1);
        drop(outer);
        let err = std::panic::catch_unwind(host::now_ms).unwrap_err();
        let msg = err
            .downcast_ref::<String>()
            .map(String::as_str)
            .or(err.downcast_ref::<&str>().copied());
        assert!(
            msg.is_some_and(|m| m.contains("needs a fake host")),
            "{msg:?}"
        );
    }

    #[test]
    fn handle_delivers_to_the_actor() {
        struct Clock;
        impl Actor for Clock {
            fn init(_: &str) -> Result<Self, Error> {
                Ok(Clock)
            }
            fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
                host::log(LogLevel::Info, &env.msg_type);
                Ok(format!("{}@{}", env.principal, host::now_ms()).into_bytes())
            }
        }
        let fake = FakeHost::install();
        assert_eq!(fake.handle(&mut Clock, "tick", "").unwrap(), b"system@1000");
        assert_eq!(fake.logs(), [(LogLevel::Info, "tick".to_string())]);
    }
}
