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
//! A failure is scripted with [`FakeHost::fail_next`] (the next fallible call fails) or
//! [`FakeHost::fail_on`] (the next call of that kind or to that target fails).
//!
//! Several actors are tested together by routing their ids to in-process instances:
//!
//! ```ignore
//! let worker = Rc::new(RefCell::new(Worker::init("{}")?));
//! let leader = Rc::new(RefCell::new(Leader::init("{}")?));
//! fake.route("Worker/1", worker.clone()); // an ask to Worker/1 runs worker's turn at once
//! fake.route("Leader/1", leader.clone()); // a tell or dispatch to Leader/1 waits in fake.queued()
//! fake.handle(&mut *leader.borrow_mut(), "start", "")?; // runs as Leader/1 (host::self_id())
//! assert_eq!(fake.run_queued(), []); // delivers what waits (and what that sends): no error
//! ```
//!
//! The fake is not a host: it has no mailbox bounds, no outbox (no idempotency keys, retries or
//! dead letters) and no timers; those are the host's, tested against a real one.
//!
//! With the feature on, the SDK calls the fake on every target: enable it for tests only,
//! `sluice-guest = { path = "...", features = ["testing"] }` under `[dev-dependencies]` (Cargo
//! does not unify dev-dependency features into `cargo build`).

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use crate::{
    Actor, DeliveryPath, DispatchOutcome, DispatchRequest, DispatchResult, Envelope, Error,
    LogLevel, TellReceipt,
};

/// How many turns [`FakeHost::run_queued`] runs before it gives up: actors that keep telling
/// each other never run dry.
const MAX_QUEUED_TURNS: usize = 100_000;

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
    /// `outbox::remind`.
    Remind {
        /// The reminder's name (`""`: anonymous).
        name: String,
        /// The delay in ms.
        delay_ms: u64,
        /// The message type.
        msg_type: String,
        /// The payload.
        payload: Vec<u8>,
    },
    /// `outbox::cancel_reminder`.
    CancelReminder {
        /// The reminder's name.
        name: String,
    },
}

/// Which host import a [`Call`] went through; [`FakeHost::fail_on`] fails calls by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `host::tell`.
    Tell,
    /// `host::ask`.
    Ask,
    /// `host::schedule`.
    Schedule,
    /// `outbox::Dispatch::send`.
    Dispatch,
    /// `outbox::tell_reliable`.
    TellReliable,
    /// `bus::publish`.
    Publish,
    /// `outbox::remind`.
    Remind,
    /// `outbox::cancel_reminder`.
    CancelReminder,
}

impl Call {
    /// Which import the call went through.
    pub fn op(&self) -> Op {
        match self {
            Call::Tell { .. } => Op::Tell,
            Call::Ask { .. } => Op::Ask,
            Call::Schedule { .. } => Op::Schedule,
            Call::Dispatch(_) => Op::Dispatch,
            Call::TellReliable { .. } => Op::TellReliable,
            Call::Publish { .. } => Op::Publish,
            Call::Remind { .. } => Op::Remind,
            Call::CancelReminder { .. } => Op::CancelReminder,
        }
    }

    /// Whether the call goes to `to`: its target, a publish's topic, any of a dispatch's
    /// targets (a schedule or a reminder goes to no one).
    fn goes_to(&self, to: &str) -> bool {
        match self {
            Call::Tell { to: t, .. }
            | Call::Ask { to: t, .. }
            | Call::TellReliable { to: t, .. } => t == to,
            Call::Publish { topic, .. } => topic == to,
            Call::Dispatch(req) => req.targets.iter().any(|t| t == to),
            Call::Schedule { .. } | Call::Remind { .. } | Call::CancelReminder { .. } => false,
        }
    }
}

/// A durable reminder an actor armed, as [`FakeHost::reminders`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reminder {
    /// The actor that armed it (and that it goes to).
    pub actor: String,
    /// Its name (`""`: anonymous).
    pub name: String,
    /// The delay in ms.
    pub delay_ms: u64,
    /// When it is due on the fake clock: `now_ms` at arming plus the delay.
    pub due_ms: u64,
    /// The message type.
    pub msg_type: String,
    /// The payload.
    pub payload: Vec<u8>,
}

/// A message to a routed actor that waits for [`FakeHost::run_queued`]: a `tell`, a
/// `tell_reliable`, or one target of a dispatch (its `msg_type`, sent by its dispatcher id, as
/// the outbox delivers it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The routed actor it goes to.
    pub to: String,
    /// The message type.
    pub msg_type: String,
    /// The payload.
    pub payload: Vec<u8>,
    /// The sender its envelope names.
    pub sender: Option<String>,
}

/// A queued message whose turn failed ([`FakeHost::run_queued`] returns them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnError {
    /// The routed actor whose turn failed.
    pub to: String,
    /// The message type.
    pub msg_type: String,
    /// The payload.
    pub payload: Vec<u8>,
    /// What the turn returned.
    pub error: Error,
}

type AskFn = Rc<RefCell<dyn FnMut(&str, &str, &[u8]) -> Vec<u8>>>;
type DispatchFn = Rc<RefCell<dyn FnMut(&DispatchRequest) -> DispatchResult>>;

/// Which actor a turn runs: its type and address, so `deliver(&mut a)` can tell a routed actor.
type ActorKey = (TypeId, *const ());

fn key_of<A: Actor>(actor: *const A) -> ActorKey {
    (TypeId::of::<A>(), actor.cast())
}

/// An actor routed to an id: the test keeps the other `Rc` and reads the actor's state after.
trait Routed {
    fn key(&self) -> ActorKey;
    fn turn(&self, id: &str, env: Envelope) -> Result<Vec<u8>, Error>;
}

impl<A: Actor> Routed for RefCell<A> {
    fn key(&self) -> ActorKey {
        key_of::<A>(self.as_ptr())
    }

    fn turn(&self, id: &str, env: Envelope) -> Result<Vec<u8>, Error> {
        // In a turn already is a cycle, caught before this; borrowed here means the test holds it.
        let mut actor = self.try_borrow_mut().unwrap_or_else(|_| {
            panic!("the test holds a borrow of the actor routed to {id} while a message reaches it")
        });
        actor.handle(env)
    }
}

/// A scripted error and the calls it may fail (`None`: any).
struct Failure {
    error: Error,
    op: Option<Op>,
    to: Option<String>,
}

impl Failure {
    fn matches(&self, call: &Call) -> bool {
        self.op.is_none_or(|op| call.op() == op)
            && self.to.as_deref().is_none_or(|to| call.goes_to(to))
    }
}

/// A turn in progress: its actor, its routed id (`None`: not routed), its principal.
struct Frame {
    key: ActorKey,
    routed_as: Option<String>,
    principal: String,
}

struct State {
    self_id: String,
    now_ms: u64,
    tick_ms: u64,
    ask_reply: AskFn,
    receipt: TellReceipt,
    delivery_path: DeliveryPath,
    /// `None`: every target delivered.
    dispatch_result: Option<DispatchFn>,
    /// Each call with the routed id whose turn made it.
    calls: Vec<(Call, Option<String>)>,
    logs: Vec<(LogLevel, String)>,
    failures: VecDeque<Failure>,
    /// In the order routed; an id routed again keeps its place.
    routes: Vec<(String, Rc<dyn Routed>)>,
    /// The turns in progress, innermost last.
    turns: Vec<Frame>,
    queued: VecDeque<Queued>,
    /// Reminders armed and not cancelled, in the order armed (a re-armed name moves last).
    reminders: Vec<Reminder>,
}

impl State {
    /// The id of the actor whose turn is running (`self_id` outside a routed one).
    fn current_id(&self) -> String {
        self.turns
            .last()
            .and_then(|f| f.routed_as.clone())
            .unwrap_or_else(|| self.self_id.clone())
    }

    fn routed(&self, id: &str) -> Option<Rc<dyn Routed>> {
        self.routes
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, a)| a.clone())
    }

    fn enqueue(&mut self, to: &str, msg_type: &str, payload: &[u8], sender: Option<String>) {
        if self.routed(to).is_some() {
            self.queued.push_back(Queued {
                to: to.into(),
                msg_type: msg_type.into(),
                payload: payload.to_vec(),
                sender,
            });
        }
    }
}

thread_local! {
    /// The fake the current thread's host calls go to (the innermost installed one).
    static CURRENT: RefCell<Option<Rc<RefCell<State>>>> = const { RefCell::new(None) };
}

/// Runs `f` as one turn of the actor `key` (as `routed_as`), with `state` not borrowed, so
/// the turn's own host calls reach the fake.
fn run_turn(
    state: &RefCell<State>,
    key: ActorKey,
    routed_as: Option<String>,
    env: Envelope,
    f: impl FnOnce(Envelope) -> Result<Vec<u8>, Error>,
) -> Result<Vec<u8>, Error> {
    /// Pops the turn's frame also when the turn panics (a test may catch the panic).
    struct Pop<'a>(&'a RefCell<State>);
    impl Drop for Pop<'_> {
        fn drop(&mut self) {
            if let Ok(mut s) = self.0.try_borrow_mut() {
                s.turns.pop();
            }
        }
    }
    state.borrow_mut().turns.push(Frame {
        key,
        routed_as,
        principal: env.principal.clone(),
    });
    let _pop = Pop(state);
    f(env)
}

/// The fake host, installed on this thread from [`FakeHost::install`] until it is dropped.
///
/// Defaults: `self_id` `MyActor/1`, `now_ms` 1000 (standing still unless [`set_tick_ms`]
/// moves it on every reading), `ask` answers `{}`, `tell` is `Queued`, `tell_reliable` goes
/// `Direct`, `dispatch` accepts every target.
///
/// [`set_tick_ms`]: FakeHost::set_tick_ms
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
            tick_ms: 0,
            ask_reply: Rc::new(RefCell::new(|_: &str, _: &str, _: &[u8]| b"{}".to_vec())),
            receipt: TellReceipt::Queued,
            delivery_path: DeliveryPath::Direct,
            dispatch_result: None,
            calls: Vec::new(),
            logs: Vec::new(),
            failures: VecDeque::new(),
            routes: Vec::new(),
            turns: Vec::new(),
            queued: VecDeque::new(),
            reminders: Vec::new(),
        }));
        let previous = CURRENT.with(|c| c.borrow_mut().replace(state.clone()));
        Self { state, previous }
    }

    /// What `host::self_id()` returns outside the turn of a routed actor.
    pub fn set_self_id(&self, id: &str) {
        self.state.borrow_mut().self_id = id.to_string();
    }

    /// What `host::now_ms()` returns.
    pub fn set_now_ms(&self, ms: u64) {
        self.state.borrow_mut().now_ms = ms;
    }

    /// How far every `host::now_ms()` reading moves the clock on (after the reading), so a
    /// busy-wait on the clock ends; 0 (the default) keeps it still.
    pub fn set_tick_ms(&self, ms: u64) {
        self.state.borrow_mut().tick_ms = ms;
    }

    /// Moves the fake clock forward.
    pub fn advance(&self, ms: u64) {
        self.state.borrow_mut().now_ms += ms;
    }

    /// What every `host::ask` to an id not routed answers.
    pub fn set_ask_reply(&self, reply: impl AsRef<[u8]>) {
        let reply = reply.as_ref().to_vec();
        self.reply_to_ask(move |_, _, _| reply.clone());
    }

    /// Answers `host::ask` to an id not routed with `f(to, msg_type, payload)`.
    pub fn reply_to_ask(&self, f: impl FnMut(&str, &str, &[u8]) -> Vec<u8> + 'static) {
        self.state.borrow_mut().ask_reply = Rc::new(RefCell::new(f));
    }

    /// What `host::tell` returns.
    pub fn set_receipt(&self, receipt: TellReceipt) {
        self.state.borrow_mut().receipt = receipt;
    }

    /// Where `outbox::tell_reliable` says the message went.
    pub fn set_delivery_path(&self, path: DeliveryPath) {
        self.state.borrow_mut().delivery_path = path;
    }

    /// The per-target outcomes `Dispatch::send` returns, with the counts they add up to
    /// (default: every target delivered).
    pub fn set_dispatch_outcomes(&self, outcomes: &[DispatchOutcome]) {
        let outcomes = outcomes.to_vec();
        self.set_dispatch_result_fn(move |_| DispatchResult::from_outcomes(outcomes.clone()));
    }

    /// Answers each `Dispatch::send` with `f(request)` (`DispatchResult::from_outcomes` makes
    /// one from per-target outcomes).
    pub fn set_dispatch_result_fn(
        &self,
        f: impl FnMut(&DispatchRequest) -> DispatchResult + 'static,
    ) {
        self.state.borrow_mut().dispatch_result = Some(Rc::new(RefCell::new(f)));
    }

    /// The reminders pending (armed through `outbox::remind`, not cancelled), in the order
    /// armed; arming a name again replaces that one (it moves last). The fake never delivers
    /// them: a test hands one to its actor (`fake.handle(.., &r.msg_type, &r.payload)`).
    pub fn reminders(&self) -> Vec<Reminder> {
        self.state.borrow().reminders.clone()
    }

    /// The next fallible call fails with `err` (queued: one error per call, in order). The
    /// actor sees it exactly as a host's `actor-error`.
    pub fn fail_next(&self, err: Error) {
        self.state.borrow_mut().failures.push_back(Failure {
            error: err,
            op: None,
            to: None,
        });
    }

    /// The next call that is `op` (`None`: any) and goes to `to` (`None`: anywhere) fails
    /// with `err`; other calls go through. `to` is the topic of a publish and any of the
    /// targets of a dispatch. Call it again to fail more calls: errors scripted by
    /// `fail_next` and `fail_on` are used in the order they were scripted.
    ///
    /// `fake.fail_on(Op::Tell, "Collector/1", err)`, `fake.fail_on(Op::Ask, None, err)`,
    /// `fake.fail_on(None, "Worker/2", err)`.
    ///
    /// # Panics
    /// When `op` and `to` are both `None` (`fail_next` fails any call).
    pub fn fail_on<'a>(
        &self,
        op: impl Into<Option<Op>>,
        to: impl Into<Option<&'a str>>,
        err: Error,
    ) {
        let (op, to) = (op.into(), to.into());
        assert!(
            op.is_some() || to.is_some(),
            "fail_on needs an op or a target (fail_next fails any call)"
        );
        self.state.borrow_mut().failures.push_back(Failure {
            error: err,
            op,
            to: to.map(str::to_string),
        });
    }

    /// Calls to `id` reach `actor` in this process: an ask runs its turn at once and answers
    /// with its reply or its error (the ask reply is not used); a tell, a `tell_reliable` and
    /// each routed target of a dispatch wait in [`queued`] until [`run_queued`]. While its
    /// turn runs, `host::self_id()` is `id` and the calls it makes are recorded as its
    /// ([`calls_by`]); so it is when the test hands the actor to [`handle`]
    /// (`fake.handle(&mut *actor.borrow_mut(), ..)`). An ask to an actor that is in a turn
    /// already (a cycle) fails `DEADLINE_EXCEEDED`, as it would on a host once its deadline
    /// passed; the call itself is still recorded and can be failed with [`fail_on`]. Routing
    /// an id again replaces its actor.
    ///
    /// The test keeps a clone of `actor` to read its state between turns; it must not hold a
    /// borrow of it while a message reaches it (that panics).
    ///
    /// [`queued`]: FakeHost::queued
    /// [`run_queued`]: FakeHost::run_queued
    /// [`calls_by`]: FakeHost::calls_by
    /// [`handle`]: FakeHost::handle
    /// [`fail_on`]: FakeHost::fail_on
    pub fn route<A: Actor>(&self, id: &str, actor: Rc<RefCell<A>>) {
        let mut s = self.state.borrow_mut();
        match s.routes.iter_mut().find(|(i, _)| i == id) {
            Some((_, a)) => *a = actor,
            None => s.routes.push((id.to_string(), actor)),
        }
    }

    /// Delivers the [`queued`](FakeHost::queued) messages, oldest first, each in a turn of its
    /// routed actor with principal `system` and no deadline, including the messages those
    /// turns queue, until none is left. Returns the ones whose turn failed (a told message's
    /// error reaches no caller).
    ///
    /// # Panics
    /// After 100,000 turns with messages still queued.
    pub fn run_queued(&self) -> Vec<TurnError> {
        self.assert_installed();
        let mut errors = Vec::new();
        for _ in 0..MAX_QUEUED_TURNS {
            let Some((q, actor)) = ({
                let mut s = self.state.borrow_mut();
                s.queued.pop_front().map(|q| {
                    let actor = s
                        .routed(&q.to)
                        .expect("only messages to routed ids are queued");
                    (q, actor)
                })
            }) else {
                return errors;
            };
            let env = Envelope {
                sender: q.sender.clone(),
                msg_type: q.msg_type.clone(),
                payload: q.payload.clone(),
                principal: "system".into(),
                deadline_ms: None,
            };
            let to = q.to.clone();
            let turn = run_turn(&self.state, actor.key(), Some(to.clone()), env, |env| {
                actor.turn(&to, env)
            });
            if let Err(error) = turn {
                errors.push(TurnError {
                    to: q.to,
                    msg_type: q.msg_type,
                    payload: q.payload,
                    error,
                });
            }
        }
        panic!(
            "run_queued: still {} queued after {MAX_QUEUED_TURNS} turns",
            self.state.borrow().queued.len()
        );
    }

    /// The messages to routed actors not delivered yet, oldest first.
    pub fn queued(&self) -> Vec<Queued> {
        self.state.borrow().queued.iter().cloned().collect()
    }

    /// The fallible calls so far, in order (`log`, `self_id`, `now_ms` are not recorded here).
    pub fn calls(&self) -> Vec<Call> {
        self.state
            .borrow()
            .calls
            .iter()
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// The calls made in turns of the actor routed to `id` ([`FakeHost::route`]), in order.
    pub fn calls_by(&self, id: &str) -> Vec<Call> {
        self.state
            .borrow()
            .calls
            .iter()
            .filter(|(_, by)| by.as_deref() == Some(id))
            .map(|(c, _)| c.clone())
            .collect()
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

    /// Delivers one envelope to `actor` and returns what the caller would get. An actor routed
    /// with [`FakeHost::route`] runs as its id.
    pub fn deliver<A: Actor>(&self, actor: &mut A, env: Envelope) -> Result<Vec<u8>, Error> {
        self.assert_installed();
        let key = key_of::<A>(actor);
        let routed_as = self
            .state
            .borrow()
            .routes
            .iter()
            .find(|(_, a)| a.key() == key)
            .map(|(id, _)| id.clone());
        run_turn(&self.state, key, routed_as, env, |env| actor.handle(env))
    }

    fn assert_installed(&self) {
        assert!(
            CURRENT.with(|c| c
                .borrow()
                .as_ref()
                .is_some_and(|s| Rc::ptr_eq(s, &self.state))),
            "this FakeHost is not the one installed on this thread"
        );
    }
}

impl Drop for FakeHost {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// The WIT import functions, with the generated bindings' signatures, answered by the fake.
///
/// No borrow of the fake's state is held while code of the test runs (an ask reply or
/// dispatch answer function, a routed actor's turn): that code may call the host again.
pub(crate) mod imports {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::{CURRENT, Call, Reminder, State, run_turn};
    use crate::bindings::sluice::actor::types::ActorError;
    use crate::{
        DeliveryPath, DispatchRequest, DispatchResult, Envelope, Error, ErrorCode, LogLevel,
        TellReceipt,
    };

    fn current() -> Rc<RefCell<State>> {
        CURRENT
            .with(|c| c.borrow().clone())
            .expect("a host call outside a component needs a fake host: `let fake = sluice_guest::testing::FakeHost::install();`")
    }

    fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
        let state = current();
        let mut s = state.borrow_mut();
        f(&mut s)
    }

    /// Records `call` (made by the running routed actor, if any), then fails it if an error
    /// scripted for it is waiting.
    fn record(s: &mut State, call: Call) -> Result<(), ActorError> {
        let by = s.turns.last().and_then(|f| f.routed_as.clone());
        let failure = s.failures.iter().position(|f| f.matches(&call));
        s.calls.push((call, by));
        match failure.and_then(|i| s.failures.remove(i)) {
            Some(f) => Err(f.error.into()),
            None => Ok(()),
        }
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
            let sender = s.current_id();
            s.enqueue(to, msg_type, payload, Some(sender));
            Ok(s.receipt)
        })
    }

    pub fn ask(
        to: &str,
        msg_type: &str,
        payload: &[u8],
        timeout_ms: u64,
    ) -> Result<Vec<u8>, ActorError> {
        let state = current();
        let (routed, env) = {
            let mut s = state.borrow_mut();
            record(
                &mut s,
                Call::Ask {
                    to: to.into(),
                    msg_type: msg_type.into(),
                    payload: payload.to_vec(),
                    timeout_ms,
                },
            )?;
            let Some(routed) = s.routed(to) else {
                let reply = s.ask_reply.clone();
                drop(s);
                let mut reply = reply.borrow_mut();
                return Ok((*reply)(to, msg_type, payload));
            };
            if s.turns.iter().any(|f| f.key == routed.key()) {
                let detail = format!("{to} is in a turn already (an ask cycle)");
                return Err(Error::canonical(ErrorCode::DeadlineExceeded, detail).into());
            }
            let principal = s
                .turns
                .last()
                .map_or_else(|| "system".to_string(), |f| f.principal.clone());
            let env = Envelope {
                sender: Some(s.current_id()),
                msg_type: msg_type.into(),
                payload: payload.to_vec(),
                principal,
                deadline_ms: Some(timeout_ms),
            };
            (routed, env)
        };
        run_turn(&state, routed.key(), Some(to.into()), env, |env| {
            routed.turn(to, env)
        })
        .map_err(Into::into)
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
        with(|s| s.current_id())
    }

    pub fn now_ms() -> u64 {
        with(|s| {
            let now = s.now_ms;
            s.now_ms += s.tick_ms;
            now
        })
    }

    pub fn log(level: LogLevel, msg: &str) {
        with(|s| s.logs.push((level, msg.to_string())));
    }

    pub fn dispatch(req: &DispatchRequest) -> Result<DispatchResult, ActorError> {
        let answer = with(|s| {
            record(s, Call::Dispatch(req.clone()))?;
            for to in &req.targets {
                let sender = Some(req.dispatcher_id.clone());
                s.enqueue(to, &req.msg_type, &req.payload, sender);
            }
            Ok::<_, ActorError>(s.dispatch_result.clone())
        })?;
        Ok(match answer {
            Some(f) => (*f.borrow_mut())(req),
            None => DispatchResult::from_outcomes(
                req.targets
                    .iter()
                    .map(|_| crate::DispatchOutcome::Delivered),
            ),
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
            let sender = s.current_id();
            s.enqueue(to, msg_type, payload, Some(sender));
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

    pub fn remind(
        name: &str,
        delay_ms: u64,
        msg_type: &str,
        payload: &[u8],
    ) -> Result<(), ActorError> {
        with(|s| {
            record(
                s,
                Call::Remind {
                    name: name.into(),
                    delay_ms,
                    msg_type: msg_type.into(),
                    payload: payload.to_vec(),
                },
            )?;
            let actor = s.current_id();
            if !name.is_empty() {
                s.reminders.retain(|r| r.actor != actor || r.name != name);
            }
            let due_ms = s.now_ms.saturating_add(delay_ms);
            s.reminders.push(Reminder {
                actor,
                name: name.into(),
                delay_ms,
                due_ms,
                msg_type: msg_type.into(),
                payload: payload.to_vec(),
            });
            Ok(())
        })
    }

    pub fn cancel_reminder(name: &str) -> Result<bool, ActorError> {
        with(|s| {
            record(s, Call::CancelReminder { name: name.into() })?;
            let actor = s.current_id();
            let before = s.reminders.len();
            if !name.is_empty() {
                s.reminders.retain(|r| r.actor != actor || r.name != name);
            }
            Ok(s.reminders.len() < before)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorCode, OverloadInfo, OverloadScope, bus, host, outbox};

    #[test]
    fn reminders_are_kept_per_actor_and_name_until_cancelled() {
        let fake = FakeHost::install();
        fake.set_self_id("Clock/1");
        fake.set_now_ms(500);
        outbox::remind("tick", 100, "tick", "1").unwrap();
        outbox::remind("", 50, "once", "a").unwrap();
        outbox::remind("", 50, "once", "b").unwrap();
        // Re-arming a name replaces it (and moves it last).
        outbox::remind("tick", 300, "tick", "2").unwrap();
        let pending: Vec<(String, u64, Vec<u8>)> = fake
            .reminders()
            .into_iter()
            .map(|r| (r.name, r.due_ms, r.payload))
            .collect();
        assert_eq!(
            pending,
            [
                (String::new(), 550, b"a".to_vec()),
                (String::new(), 550, b"b".to_vec()),
                ("tick".to_string(), 800, b"2".to_vec()),
            ]
        );
        assert!(fake.reminders().iter().all(|r| r.actor == "Clock/1"));
        // Another actor's name is its own.
        fake.set_self_id("Clock/2");
        assert!(!outbox::cancel_reminder("tick").unwrap());
        fake.set_self_id("Clock/1");
        assert!(outbox::cancel_reminder("tick").unwrap());
        assert!(!outbox::cancel_reminder("tick").unwrap());
        assert!(!outbox::cancel_reminder("").unwrap());
        assert_eq!(fake.reminders().len(), 2);
        // A failed arm stores nothing.
        fake.fail_on(
            Op::Remind,
            None,
            Error::canonical(
                ErrorCode::ResourceExhausted,
                "1024 reminders already pending",
            ),
        );
        let err = outbox::remind("late", 1, "x", "").unwrap_err();
        assert_eq!(err.code, ErrorCode::ResourceExhausted);
        assert_eq!(fake.reminders().len(), 2);
        assert_eq!(
            fake.calls().last().map(Call::op),
            Some(Op::Remind),
            "the failed call is recorded"
        );
    }

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
        assert_eq!(
            sent,
            DispatchResult::from_outcomes([DispatchOutcome::Delivered; 2])
        );
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

    fn full() -> Error {
        Error {
            retry_after_ms: Some(1),
            ..Error::new(ErrorCode::ResourceExhausted, "RESOURCE_EXHAUSTED: full")
        }
    }

    #[test]
    fn fail_on_fails_only_the_calls_it_names_in_script_order() {
        let fake = FakeHost::install();
        let late = Error::canonical(ErrorCode::DeadlineExceeded, "call timed out");
        fake.fail_on(Op::Tell, "C/1", full());
        fake.fail_on(Op::Tell, "C/1", full());
        fake.fail_on(Op::Ask, None, late.clone());
        fake.fail_on(None, "W/2", full()); // a dispatch naming W/2 among its targets
        let refused = std::panic::catch_unwind(|| {
            FakeHost::install().fail_on(None, None, full());
        });
        assert!(refused.is_err(), "fail_on needs an op or a target");
        let dispatch = |targets: &[&str]| outbox::Dispatch::new(targets, "d", "").send();
        assert_eq!(host::tell("C/2", "x", "").unwrap(), TellReceipt::Queued);
        assert_eq!(host::tell("C/1", "x", "").unwrap_err(), full());
        assert_eq!(dispatch(&["W/1"]).unwrap().delivered, 1);
        assert_eq!(dispatch(&["W/1", "W/2"]).unwrap_err(), full());
        assert_eq!(host::tell("C/1", "x", "").unwrap_err(), full());
        assert_eq!(host::tell("C/1", "x", "").unwrap(), TellReceipt::Queued);
        assert_eq!(host::ask("C/1", "x", "", 10).unwrap_err(), late);
        assert_eq!(host::ask("C/1", "x", "", 10).unwrap(), b"{}");
        assert_eq!(fake.calls().len(), 8, "a failed call is recorded too");
        // fail_next and fail_on errors are used in the order they were scripted.
        fake.fail_on(Op::Publish, None, late.clone());
        fake.fail_next(full());
        assert_eq!(bus::publish("a.b", "").unwrap_err(), late);
        assert_eq!(host::schedule(1, "t", "").unwrap_err(), full());
        let ops: Vec<Op> = fake.calls().iter().map(Call::op).collect();
        assert_eq!(ops[8..], [Op::Publish, Op::Schedule]);
    }

    #[test]
    fn dispatch_result_and_clock_can_be_functions_of_the_call() {
        let fake = FakeHost::install();
        fake.set_dispatch_result_fn(|req| {
            DispatchResult::from_outcomes(req.targets.iter().map(|t| {
                if t.starts_with("Nope/") {
                    DispatchOutcome::NotFound
                } else {
                    DispatchOutcome::Delivered
                }
            }))
        });
        fake.set_tick_ms(2);
        let sent = outbox::Dispatch::new(&["W/1", "Nope/2", "W/3"], "d", "")
            .send()
            .unwrap();
        assert_eq!((sent.delivered, sent.dead_lettered), (2, 1));
        assert_eq!(
            sent.outcomes,
            [
                DispatchOutcome::Delivered,
                DispatchOutcome::NotFound,
                DispatchOutcome::Delivered
            ]
        );
        assert_eq!((host::now_ms(), host::now_ms()), (1000, 1002));
        fake.set_tick_ms(0);
        assert_eq!((host::now_ms(), host::now_ms()), (1004, 1004));
        fake.set_dispatch_outcomes(&[DispatchOutcome::QueuedRefused]);
        let sent = outbox::Dispatch::new(&["W/1"], "d", "").send().unwrap();
        assert_eq!(
            (sent.delivered, sent.queued, sent.outcomes[0].name()),
            (0, 1, "queued-refused")
        );
    }

    #[derive(Default)]
    struct Worker {
        got: Vec<(Option<String>, String, Vec<u8>)>,
    }

    impl Actor for Worker {
        fn init(_: &str) -> Result<Self, Error> {
            Ok(Self::default())
        }
        fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
            self.got.push((
                env.sender.clone(),
                env.msg_type.clone(),
                env.payload.clone(),
            ));
            match env.msg_type.as_str() {
                "bad" => return Err(Error::invalid_argument("INVALID_ARGUMENT: bad")),
                "report" => {
                    host::tell("Leader/1", "done", host::self_id())?;
                }
                _ => {}
            }
            let deadline = env.deadline_ms.map_or("none".into(), |d| d.to_string());
            Ok(format!("{} {deadline} {}", host::self_id(), env.principal).into_bytes())
        }
    }

    #[derive(Default)]
    struct Leader {
        done: Vec<String>,
    }

    impl Actor for Leader {
        fn init(_: &str) -> Result<Self, Error> {
            Ok(Self::default())
        }
        fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
            if env.msg_type == "done" {
                self.done.push(String::from_utf8(env.payload).unwrap());
                return Ok(Vec::new());
            }
            let reply = host::ask("Worker/1", "work", r#"{"n":1}"#, 300)?;
            host::tell("Worker/1", "report", "{}")?;
            outbox::Dispatch::new(&["Worker/1", "Elsewhere/1"], "dispatch", r#"{"t":1}"#)
                .context("", "Leader/1")
                .idempotency_key("k", crate::Conflict::Append)
                .send()?;
            let bad = host::ask("Worker/1", "bad", "{}", 1000).unwrap_err();
            assert_eq!(bad, Error::invalid_argument("INVALID_ARGUMENT: bad"));
            Ok(reply)
        }
    }

    #[test]
    fn route_runs_a_routed_ask_at_once_and_queues_tells_and_dispatches() {
        let fake = FakeHost::install();
        let worker = Rc::new(RefCell::new(Worker::default()));
        let leader = Rc::new(RefCell::new(Leader::default()));
        fake.route("Worker/1", worker.clone());
        fake.route("Leader/1", leader.clone());
        let env = Envelope {
            sender: None,
            msg_type: "start".into(),
            payload: Vec::new(),
            principal: "alice".into(),
            deadline_ms: None,
        };
        let reply = fake.deliver(&mut *leader.borrow_mut(), env).unwrap();
        assert_eq!(
            reply, b"Worker/1 300 alice",
            "the ask's deadline, the asker's principal"
        );
        let from_leader = |t: &str, p: &str| (Some("Leader/1".to_string()), t.into(), p.into());
        assert_eq!(
            worker.borrow().got,
            [from_leader("work", r#"{"n":1}"#), from_leader("bad", "{}")]
        );
        let queued = |t: &str, p: &[u8]| Queued {
            to: "Worker/1".into(),
            msg_type: t.into(),
            payload: p.to_vec(),
            sender: Some("Leader/1".into()),
        };
        assert_eq!(
            fake.queued(),
            [queued("report", b"{}"), queued("dispatch", br#"{"t":1}"#)]
        );
        assert_eq!(fake.calls_by("Leader/1"), fake.calls());
        assert_eq!(fake.calls().len(), 4);

        assert_eq!(fake.run_queued(), []);
        assert!(fake.queued().is_empty());
        assert_eq!(
            worker.borrow().got[2..],
            [
                from_leader("report", "{}"),
                from_leader("dispatch", r#"{"t":1}"#)
            ]
        );
        assert_eq!(leader.borrow().done, ["Worker/1"]);
        let done = Call::Tell {
            to: "Leader/1".into(),
            msg_type: "done".into(),
            payload: b"Worker/1".to_vec(),
        };
        assert_eq!(fake.calls_by("Worker/1"), [done]);

        // A queued turn's error comes back from run_queued; an ask cycle is DEADLINE_EXCEEDED.
        host::tell("Worker/1", "bad", "{}").unwrap();
        let failed = fake.run_queued();
        assert_eq!(
            failed,
            [TurnError {
                to: "Worker/1".into(),
                msg_type: "bad".into(),
                payload: b"{}".to_vec(),
                error: Error::invalid_argument("INVALID_ARGUMENT: bad"),
            }]
        );
        let last = worker.borrow().got.last().cloned().unwrap();
        assert_eq!(
            last.0.as_deref(),
            Some("MyActor/1"),
            "sent from outside a turn"
        );

        struct Cycle;
        impl Actor for Cycle {
            fn init(_: &str) -> Result<Self, Error> {
                Ok(Cycle)
            }
            fn handle(&mut self, _: Envelope) -> Result<Vec<u8>, Error> {
                host::ask("Cycle/1", "again", "", 100)
            }
        }
        fake.route("Cycle/1", Rc::new(RefCell::new(Cycle)));
        let e = host::ask("Cycle/1", "go", "", 100).unwrap_err();
        assert_eq!(e.code, ErrorCode::DeadlineExceeded);
        assert!(e.message.contains("in a turn already"), "{}", e.message);
        assert_eq!(
            host::self_id(),
            "MyActor/1",
            "outside a turn the fake is itself again"
        );
    }
}
