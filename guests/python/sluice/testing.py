"""A fake Sluice host for unit tests: run an actor on plain CPython, in any test runner.

Inside a component, `sluice.host` calls the real host. Under `FakeHost` the same calls are
recorded and answered from the fake's fields instead, so an actor's own code runs unchanged:

    from sluice.testing import Call, FakeHost
    from app import MyActor

    def test_forward_asks_the_worker() -> None:
        with FakeHost(ask_reply=b'{"done":true}') as fake:
            actor = MyActor()
            actor.init("{}")
            assert fake.handle(actor, "forward", b'{"job":1}') == b'{"done":true}'
            assert fake.calls == [Call("ask", "Worker/1", "process", b'{"job":1}', timeout_ms=2000)]

A failure is scripted with `fail_next`: the next fallible call (tell, ask, schedule,
dispatch, tell_reliable, remind, cancel_reminder, publish) fails with that error, which reaches the actor as the same
typed `SluiceError` the real host's `actor-error` would become; `fail_on(err, op=..., to=...)`
fails the next call of that kind or to that target only.

Several actors are tested together by routing their ids to in-process instances:

    with FakeHost() as fake:
        fake.route("Worker/1", worker)  # an ask to Worker/1 runs worker's turn at once
        fake.route("Leader/1", leader)  # a tell or dispatch to Leader/1 waits in fake.queued
        fake.handle(leader, "start")  # runs as Leader/1 (host.self_id())
        assert fake.run_queued() == []  # delivers what waits (and what that sends): no error

Durable reminders (`host.outbox.remind`) are kept in `FakeHost.reminders`, pending ones only:
re-arming a name replaces its reminder and `cancel_reminder` removes it. The fake never
delivers them; a test hands one to `FakeHost.handle` itself:

    with FakeHost() as fake:
        fake.handle(actor, "start")  # arms reminder "tick"
        [r] = fake.reminders
        fake.handle(actor, r.msg_type, r.payload, sender=r.actor)

The fake is not a host: it has no mailbox bounds, no outbox (no idempotency keys, retries or
dead letters) and no timers; those are the host's, tested against a real one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import ModuleType, TracebackType
from typing import Any, Literal, Self

from ._actor import Envelope, Handler, turn
from ._host import DispatchOutcome, DispatchResult, to_bytes
from ._wit import Err, to_wit, wit_bus, wit_host, wit_outbox, wit_types
from .errors import DeadlineExceeded, SluiceError

__all__ = [
    "AskReply",
    "Call",
    "DispatchAnswer",
    "FakeHost",
    "Queued",
    "Reminder",
    "TurnError",
]

#: What a fake `ask` answers: fixed bytes, or a function of (to, msg_type, payload).
AskReply = bytes | Callable[[str, str, bytes], bytes]

#: What a fake `dispatch` answers, one outcome per target (`DispatchOutcome` or its WIT name,
#: in target order): fixed, or a function of the request. The counts are made from them.
DispatchAnswer = (
    Sequence[DispatchOutcome | str]
    | Callable[[wit_types.DispatchRequest], Sequence[DispatchOutcome | str]]
)

Op = Literal[
    "tell",
    "ask",
    "schedule",
    "dispatch",
    "tell_reliable",
    "remind",
    "cancel_reminder",
    "publish",
]

_RECEIPTS = {
    "queued": wit_types.TellReceipt.QUEUED,
    "displaced-oldest": wit_types.TellReceipt.DISPLACED_OLDEST,
    "dropped-newest": wit_types.TellReceipt.DROPPED_NEWEST,
}
_PATHS = {
    "direct": wit_types.DeliveryPath.DIRECT,
    "outbox": wit_types.DeliveryPath.OUTBOX,
}


@dataclass(frozen=True)
class Call:
    """One host call the actor made, as the host received it (payloads as bytes)."""

    #: Which import: ``tell``, ``ask``, ``schedule``, ``dispatch``, ``tell_reliable``,
    #: ``remind``, ``cancel_reminder``, ``publish``.
    op: Op
    #: The target actor id; the topic for ``publish``; empty for ``schedule``, ``dispatch``,
    #: ``remind`` and ``cancel_reminder`` (a reminder goes to the actor itself).
    to: str = ""
    msg_type: str = ""
    payload: bytes = b""
    #: ``ask``: the deadline sent (after the SDK applied ``with_`` and defaults).
    timeout_ms: int | None = None
    #: ``schedule`` and ``remind``: the delay.
    delay_ms: int | None = None
    #: ``dispatch``: the WIT request exactly as sent (mode, conflict, key, targets...).
    request: wit_types.DispatchRequest | None = None
    #: The routed actor (`FakeHost.route`) whose turn made the call; ``None`` for an actor
    #: that is not routed.
    by: str | None = None
    #: ``remind`` and ``cancel_reminder``: the reminder's name (``""``: unnamed).
    name: str | None = None


@dataclass(frozen=True)
class Queued:
    """A message to a routed actor that waits for `FakeHost.run_queued`: a ``tell``, a
    ``tell_reliable``, or one target of a ``dispatch`` (its ``msg_type``, sent by its
    dispatcher id, as the outbox delivers it)."""

    to: str
    msg_type: str
    payload: bytes
    sender: str | None


@dataclass(frozen=True)
class Reminder:
    """A pending durable reminder (``host.outbox.remind``), as the host stored it."""

    #: The id of the actor that armed it: where it will be delivered, and its sender.
    actor: str
    #: Its name; ``""`` for an unnamed one (a new one each time, never replaced or cancelled).
    name: str
    delay_ms: int
    msg_type: str
    payload: bytes
    #: When it falls due on the fake clock: ``now_ms`` when armed plus ``delay_ms``.
    due_ms: int


@dataclass(frozen=True)
class TurnError:
    """A queued message whose turn failed (`FakeHost.run_queued` returns them)."""

    to: str
    msg_type: str
    payload: bytes
    error: SluiceError


@dataclass(frozen=True)
class _Failure:
    """A scripted error and the calls it may fail (``None``: any)."""

    error: SluiceError | wit_types.ActorError
    op: Op | None = None
    to: str | None = None

    def matches(self, call: Call) -> bool:
        if self.op is not None and call.op != self.op:
            return False
        if self.to is None:
            return True
        if call.request is not None:
            return self.to in call.request.targets
        return call.to == self.to


@dataclass(frozen=True)
class _Frame:
    """A turn in progress: the actor, its routed id (``None``: not routed), its principal."""

    actor: Handler
    routed_as: str | None
    principal: str


class FakeHost:
    """Stands in for the host while installed (``with FakeHost() as fake:``, or
    `install` / `uninstall`). Every field can be changed between calls.

    Defaults: ``self_id`` ``"MyActor/1"``, ``now_ms`` 1000 (standing still unless ``tick_ms``
    moves it on every reading), ``ask`` answers ``b"{}"``, ``tell`` is ``"queued"``,
    ``tell_reliable`` goes ``"direct"``, and ``dispatch`` delivers every target unless
    ``dispatch_result`` gives the per-target outcomes (or computes them from the request).
    """

    def __init__(
        self,
        *,
        self_id: str = "MyActor/1",
        now_ms: int = 1000,
        tick_ms: int = 0,
        ask_reply: AskReply = b"{}",
        receipt: str = "queued",
        delivery_path: str = "direct",
        dispatch_result: DispatchAnswer | None = None,
    ) -> None:
        self.self_id = self_id
        self.now_ms = now_ms
        #: How far every ``host.now_ms()`` reading moves the clock on (after the reading), so a
        #: busy-wait on the clock ends; 0 keeps it still.
        self.tick_ms = tick_ms
        self.ask_reply: AskReply = ask_reply
        self.receipt = receipt
        self.delivery_path = delivery_path
        self.dispatch_result: DispatchAnswer | None = dispatch_result
        #: Fallible calls in order (log, self_id and now_ms are not recorded here).
        self.calls: list[Call] = []
        #: ``(level, message)`` per ``host.log``, the level as named in the WIT (``"warn"``).
        self.logs: list[tuple[str, str]] = []
        #: Messages to routed actors not delivered yet, oldest first (`run_queued`).
        self.queued: list[Queued] = []
        #: Pending reminders in the order they were armed (a re-armed name moves to the end,
        #: replacing its earlier one; a cancelled one is removed). Never delivered by the fake.
        self.reminders: list[Reminder] = []
        self._failures: list[_Failure] = []
        self._routes: dict[str, Handler] = {}
        self._turns: list[_Frame] = []
        self._saved: list[tuple[ModuleType, str, Any]] = []

    # -- scripting ------------------------------------------------------------------------

    def fail_next(self, *errors: SluiceError | wit_types.ActorError) -> None:
        """The next fallible calls fail with these errors, one call each, in order."""
        self._failures.extend(_Failure(e) for e in errors)

    def fail_on(
        self,
        *errors: SluiceError | wit_types.ActorError,
        op: Op | None = None,
        to: str | None = None,
    ) -> None:
        """The next calls that are ``op`` (``"tell"``, ``"ask"``...) and go ``to`` that target
        fail with these errors, one call each, in order; other calls go through. ``to`` is the
        topic for ``publish`` and any of the targets for ``dispatch``. Errors scripted by
        `fail_next` and `fail_on` are used in the order they were scripted."""
        if op is None and to is None:
            raise ValueError("fail_on needs op= or to= (fail_next fails any call)")
        self._failures.extend(_Failure(e, op, to) for e in errors)

    def route(self, actor_id: str, actor: Handler) -> None:
        """Calls to ``actor_id`` reach ``actor`` in this process: an ``ask`` runs its turn at
        once and answers with its reply or its error (``ask_reply`` is not used); a ``tell``,
        a ``tell_reliable`` and each routed target of a ``dispatch`` wait in `queued` until
        `run_queued`. While its turn runs, ``host.self_id()`` is ``actor_id``; so it is when
        the test hands ``actor`` to `handle`. An ask to an actor that is in a turn already (a
        cycle) fails with ``DEADLINE_EXCEEDED``, as it would on a host once its deadline
        passed. The call itself is still recorded and can be failed with `fail_on`."""
        self._routes[actor_id] = actor

    def run_queued(self, *, max_turns: int = 100_000) -> list[TurnError]:
        """Delivers `queued` messages, oldest first, each in a turn of its routed actor with
        principal ``system``, including the messages those turns queue, until none is left.
        Returns the ones whose turn failed (a told message's error reaches no caller)."""
        self._require_installed()
        errors: list[TurnError] = []
        for _ in range(max_turns):
            if not self.queued:
                return errors
            q = self.queued.pop(0)
            env = Envelope(q.sender, q.msg_type, q.payload, "system", None)
            try:
                self._turn(self._routes[q.to], env)
            except SluiceError as err:
                errors.append(TurnError(q.to, q.msg_type, q.payload, err))
        raise RuntimeError(
            f"run_queued: still {len(self.queued)} queued after {max_turns} turns"
        )

    def advance(self, ms: int) -> None:
        """Moves the fake clock (``host.now_ms()``) forward by ``ms``."""
        self.now_ms += ms

    def handle(
        self,
        target: Handler,
        msg_type: str,
        payload: Any = b"",
        *,
        sender: str | None = None,
        principal: str = "system",
        deadline_ms: int | None = None,
    ) -> bytes:
        """Delivers one message to ``target`` and returns the reply bytes the caller would get.

        The reply goes through the same conversion as in a component (dict -> JSON, str ->
        UTF-8). A `SluiceError` propagates as raised; any other exception becomes the
        `Internal` error the caller would see (``INTERNAL: <message>``), chained to it."""
        self._require_installed()
        env = Envelope(sender, msg_type, to_bytes(payload), principal, deadline_ms)
        return self._turn(target, env)

    # -- installing -----------------------------------------------------------------------

    def install(self) -> Self:
        """Routes the SDK's host calls to this fake until `uninstall`."""
        if self._saved:
            raise RuntimeError("this FakeHost is already installed")
        patches: list[tuple[ModuleType, str, Callable[..., Any]]] = [
            (wit_host, "tell", self._tell),
            (wit_host, "ask", self._ask),
            (wit_host, "schedule", self._schedule),
            (wit_host, "self_id", self._self_id),
            (wit_host, "now_ms", self._now_ms),
            (wit_host, "log", self._log),
            (wit_outbox, "dispatch", self._dispatch),
            (wit_outbox, "tell_reliable", self._tell_reliable),
            (wit_outbox, "remind", self._remind),
            (wit_outbox, "cancel_reminder", self._cancel_reminder),
            (wit_bus, "publish", self._publish),
        ]
        for module, name, fn in patches:
            self._saved.append((module, name, getattr(module, name)))
            setattr(module, name, fn)
        return self

    def uninstall(self) -> None:
        """Puts back whatever the SDK called before `install`."""
        while self._saved:
            module, name, previous = self._saved.pop()
            setattr(module, name, previous)

    def __enter__(self) -> Self:
        return self.install()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.uninstall()

    # -- the WIT imports ------------------------------------------------------------------

    def _require_installed(self) -> None:
        if not self._saved:
            raise RuntimeError(
                "FakeHost is not installed: use `with FakeHost() as fake:`"
            )

    def _turn(self, target: Handler, env: Envelope) -> bytes:
        """One turn of ``target``, as its routed id when it has one."""
        routed_as = next((i for i, a in self._routes.items() if a is target), None)
        self._turns.append(_Frame(target, routed_as, env.principal))
        try:
            return turn(target, env)
        finally:
            self._turns.pop()

    def _current_id(self) -> str:
        """The id of the actor whose turn is running (`self_id` outside a routed one)."""
        routed_as = self._turns[-1].routed_as if self._turns else None
        return self.self_id if routed_as is None else routed_as

    def _record(self, call: Call) -> None:
        if self._turns and self._turns[-1].routed_as is not None:
            call = replace(call, by=self._turns[-1].routed_as)
        self.calls.append(call)
        for i, failure in enumerate(self._failures):
            if failure.matches(call):
                del self._failures[i]
                err = failure.error
                raise Err(to_wit(err) if isinstance(err, SluiceError) else err)

    def _queue(
        self, to: str, msg_type: str, payload: bytes, sender: str | None
    ) -> None:
        if to in self._routes:
            self.queued.append(Queued(to, msg_type, payload, sender))

    def _tell(self, to: str, msg_type: str, payload: bytes) -> wit_types.TellReceipt:
        self._record(Call("tell", to, msg_type, bytes(payload)))
        self._queue(to, msg_type, bytes(payload), self._current_id())
        return _RECEIPTS[self.receipt]

    def _ask(self, to: str, msg_type: str, payload: bytes, timeout_ms: int) -> bytes:
        self._record(Call("ask", to, msg_type, bytes(payload), timeout_ms=timeout_ms))
        target = self._routes.get(to)
        if target is None:
            reply = self.ask_reply
            return (
                reply
                if isinstance(reply, bytes)
                else reply(to, msg_type, bytes(payload))
            )
        if any(frame.actor is target for frame in self._turns):
            msg = f"DEADLINE_EXCEEDED: {to} is in a turn already (an ask cycle)"
            raise Err(to_wit(DeadlineExceeded(msg)))
        principal = self._turns[-1].principal if self._turns else "system"
        env = Envelope(
            self._current_id(), msg_type, bytes(payload), principal, timeout_ms
        )
        try:
            return self._turn(target, env)
        except SluiceError as err:
            raise Err(to_wit(err)) from None

    def _schedule(self, delay_ms: int, msg_type: str, payload: bytes) -> None:
        self._record(Call("schedule", "", msg_type, bytes(payload), delay_ms=delay_ms))

    def _self_id(self) -> str:
        return self._current_id()

    def _now_ms(self) -> int:
        now = self.now_ms
        self.now_ms += self.tick_ms
        return now

    def _log(self, level: wit_types.LogLevel, msg: str) -> None:
        self.logs.append((level.name.lower(), msg))

    def _dispatch(self, req: wit_types.DispatchRequest) -> wit_types.DispatchResult:
        self._record(
            Call("dispatch", "", req.msg_type, bytes(req.payload), request=req)
        )
        for to in req.targets:
            self._queue(to, req.msg_type, bytes(req.payload), req.dispatcher_id)
        answer = self.dispatch_result
        if answer is None:
            outcomes: Sequence[DispatchOutcome | str] = ["delivered"] * len(req.targets)
        else:
            outcomes = answer(req) if callable(answer) else answer
        r = DispatchResult.of(outcomes)
        return wit_types.DispatchResult(
            delivered=r.delivered,
            deduplicated=r.deduplicated,
            queued=r.queued,
            dead_lettered=r.dead_lettered,
            outcomes=[wit_types.DispatchOutcome[o.name] for o in r.outcomes],
        )

    def _tell_reliable(
        self, to: str, msg_type: str, payload: bytes
    ) -> wit_types.DeliveryPath:
        self._record(Call("tell_reliable", to, msg_type, bytes(payload)))
        self._queue(to, msg_type, bytes(payload), self._current_id())
        return _PATHS[self.delivery_path]

    def _remind(self, name: str, delay_ms: int, msg_type: str, payload: bytes) -> None:
        self._record(
            Call("remind", "", msg_type, bytes(payload), delay_ms=delay_ms, name=name)
        )
        actor = self._current_id()
        if name:
            self._drop_reminder(actor, name)
        self.reminders.append(
            Reminder(
                actor, name, delay_ms, msg_type, bytes(payload), self.now_ms + delay_ms
            )
        )

    def _cancel_reminder(self, name: str) -> bool:
        self._record(Call("cancel_reminder", name=name))
        return bool(name) and self._drop_reminder(self._current_id(), name)

    def _drop_reminder(self, actor: str, name: str) -> bool:
        """Removes ``actor``'s pending reminder ``name``; whether there was one."""
        for i, r in enumerate(self.reminders):
            if r.actor == actor and r.name == name:
                del self.reminders[i]
                return True
        return False

    def _publish(self, topic: str, payload: bytes) -> None:
        self._record(Call("publish", topic, "", bytes(payload)))
