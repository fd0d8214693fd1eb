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
dispatch, tell_reliable, publish) fails with that error, which reaches the actor as the same
typed `SluiceError` the real host's `actor-error` would become.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any, Literal, Self

from ._actor import Envelope, Handler, turn
from ._host import to_bytes
from ._wit import Err, to_wit, wit_bus, wit_host, wit_outbox, wit_types
from .errors import SluiceError

__all__ = ["AskReply", "Call", "FakeHost"]

#: What a fake `ask` answers: fixed bytes, or a function of (to, msg_type, payload).
AskReply = bytes | Callable[[str, str, bytes], bytes]

Op = Literal["tell", "ask", "schedule", "dispatch", "tell_reliable", "publish"]

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

    #: Which import: ``tell``, ``ask``, ``schedule``, ``dispatch``, ``tell_reliable``, ``publish``.
    op: Op
    #: The target actor id; the topic for ``publish``; empty for ``schedule`` and ``dispatch``.
    to: str = ""
    msg_type: str = ""
    payload: bytes = b""
    #: ``ask``: the deadline sent (after the SDK applied ``with_`` and defaults).
    timeout_ms: int | None = None
    #: ``schedule``: the delay.
    delay_ms: int | None = None
    #: ``dispatch``: the WIT request exactly as sent (mode, conflict, key, targets...).
    request: wit_types.DispatchRequest | None = None


class FakeHost:
    """Stands in for the host while installed (``with FakeHost() as fake:``, or
    `install` / `uninstall`). Every field can be changed between calls.

    Defaults: ``self_id`` ``"MyActor/1"``, ``now_ms`` 1000, ``ask`` answers ``b"{}"``, ``tell``
    is ``"queued"``, ``tell_reliable`` goes ``"direct"``, and ``dispatch`` accepts every
    target unless ``dispatch_result`` says ``(accepted, rejected)``.
    """

    def __init__(
        self,
        *,
        self_id: str = "MyActor/1",
        now_ms: int = 1000,
        ask_reply: AskReply = b"{}",
        receipt: str = "queued",
        delivery_path: str = "direct",
        dispatch_result: tuple[int, int] | None = None,
    ) -> None:
        self.self_id = self_id
        self.now_ms = now_ms
        self.ask_reply: AskReply = ask_reply
        self.receipt = receipt
        self.delivery_path = delivery_path
        self.dispatch_result = dispatch_result
        #: Fallible calls in order (log, self_id and now_ms are not recorded here).
        self.calls: list[Call] = []
        #: ``(level, message)`` per ``host.log``, the level as named in the WIT (``"warn"``).
        self.logs: list[tuple[str, str]] = []
        self._failures: list[SluiceError | wit_types.ActorError] = []
        self._saved: list[tuple[ModuleType, str, Any]] = []

    # -- scripting ------------------------------------------------------------------------

    def fail_next(self, *errors: SluiceError | wit_types.ActorError) -> None:
        """The next fallible calls fail with these errors, one call each, in order."""
        self._failures.extend(errors)

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
        return turn(target, env)

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

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        if self._failures:
            err = self._failures.pop(0)
            raise Err(to_wit(err) if isinstance(err, SluiceError) else err)

    def _tell(self, to: str, msg_type: str, payload: bytes) -> wit_types.TellReceipt:
        self._record(Call("tell", to, msg_type, bytes(payload)))
        return _RECEIPTS[self.receipt]

    def _ask(self, to: str, msg_type: str, payload: bytes, timeout_ms: int) -> bytes:
        self._record(Call("ask", to, msg_type, bytes(payload), timeout_ms=timeout_ms))
        reply = self.ask_reply
        return (
            reply if isinstance(reply, bytes) else reply(to, msg_type, bytes(payload))
        )

    def _schedule(self, delay_ms: int, msg_type: str, payload: bytes) -> None:
        self._record(Call("schedule", "", msg_type, bytes(payload), delay_ms=delay_ms))

    def _self_id(self) -> str:
        return self.self_id

    def _now_ms(self) -> int:
        return self.now_ms

    def _log(self, level: wit_types.LogLevel, msg: str) -> None:
        self.logs.append((level.name.lower(), msg))

    def _dispatch(self, req: wit_types.DispatchRequest) -> wit_types.DispatchResult:
        self._record(
            Call("dispatch", "", req.msg_type, bytes(req.payload), request=req)
        )
        accepted, rejected = self.dispatch_result or (len(req.targets), 0)
        return wit_types.DispatchResult(accepted=accepted, rejected=rejected)

    def _tell_reliable(
        self, to: str, msg_type: str, payload: bytes
    ) -> wit_types.DeliveryPath:
        self._record(Call("tell_reliable", to, msg_type, bytes(payload)))
        return _PATHS[self.delivery_path]

    def _publish(self, topic: str, payload: bytes) -> None:
        self._record(Call("publish", topic, "", bytes(payload)))
