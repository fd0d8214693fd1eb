"""`host`: the idiomatic face of the WIT imports (`host`, `outbox`, `bus`)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from . import _wit
from ._wit import call, wit_bus, wit_host, wit_outbox, wit_types
from .errors import InvalidArgument

__all__ = [
    "DEFAULT_ASK_TIMEOUT_MS",
    "DEFAULT_DISPATCH_MSG_TYPE",
    "Call",
    "DispatchOutcome",
    "DispatchResult",
    "host",
    "to_bytes",
]

#: `ask` deadline when the caller gives none (the host may tighten it further).
DEFAULT_ASK_TIMEOUT_MS = 5000
#: The msg-type receivers see for `outbox.dispatch` when the caller gives none.
DEFAULT_DISPATCH_MSG_TYPE = "dispatch"

_RECEIPTS = {
    wit_types.TellReceipt.QUEUED: "queued",
    wit_types.TellReceipt.DISPLACED_OLDEST: "displaced-oldest",
    wit_types.TellReceipt.DROPPED_NEWEST: "dropped-newest",
}
_PATHS = {
    wit_types.DeliveryPath.DIRECT: "direct",
    wit_types.DeliveryPath.OUTBOX: "outbox",
}
_MODES = {
    "": wit_types.DispatchMode.CAST,
    "cast": wit_types.DispatchMode.CAST,
    "call": wit_types.DispatchMode.CALL,
}
_CONFLICTS = {
    "": wit_types.Conflict.APPEND,
    "append": wit_types.Conflict.APPEND,
    "overwrite": wit_types.Conflict.OVERWRITE,
}


class DispatchOutcome(StrEnum):
    """What ``outbox.dispatch`` did with one target (the WIT ``dispatch-outcome``; each value
    is its WIT name, so ``outcome == "not-found"`` holds). Only ``DELIVERED`` means the receiver
    has it now; every ``QUEUED_*`` target is stored and the relay delivers it (nothing to
    resend); ``NOT_FOUND``, ``EXPIRED`` and ``DEAD_LETTERED`` targets are in the dead-letter queue.
    """

    #: Delivered by the immediate attempt (in the mailbox; for a call, handled).
    DELIVERED = "delivered"
    #: Absorbed by its idempotency key; nothing more happens for this target.
    DEDUPLICATED = "deduplicated"
    #: Left for the relay behind an earlier pending message to the same receiver, in order.
    QUEUED_BEHIND_PENDING = "queued-behind-pending"
    #: Left for the relay: its concurrency limit for the receiver's type had no free permit.
    QUEUED_AT_LIMIT = "queued-at-limit"
    #: Left for the relay: the receiver refused for capacity.
    QUEUED_REFUSED = "queued-refused"
    #: Left for the relay: the attempt failed in a way that may pass.
    QUEUED_FAILED = "queued-failed"
    #: Left for the relay: the turn's deadline passed before or during the attempt.
    QUEUED_OUT_OF_TIME = "queued-out-of-time"
    #: Dead-lettered at once: no actor type of the receiver's name.
    NOT_FOUND = "not-found"
    #: Dead-lettered at once: its ttl had passed.
    EXPIRED = "expired"
    #: Dead-lettered at once for another permanent failure.
    DEAD_LETTERED = "dead-lettered"

    @property
    def queued(self) -> bool:
        """Left in the outbox for the relay."""
        return self.value.startswith("queued-")

    @property
    def dead_lettered(self) -> bool:
        """In the dead-letter queue at once."""
        return self in (
            DispatchOutcome.NOT_FOUND,
            DispatchOutcome.EXPIRED,
            DispatchOutcome.DEAD_LETTERED,
        )


@dataclass(frozen=True)
class DispatchResult:
    """What ``outbox.dispatch`` did: counts by kind and one outcome per target, in the order of
    the targets. The four counts add up to the number of targets."""

    #: Targets delivered by the immediate attempt.
    delivered: int
    #: Targets absorbed by their idempotency key.
    deduplicated: int
    #: Targets left in the outbox for the relay (every ``QUEUED_*`` outcome).
    queued: int
    #: Targets dead-lettered at once (``NOT_FOUND``, ``EXPIRED``, ``DEAD_LETTERED``).
    dead_lettered: int
    outcomes: tuple[DispatchOutcome, ...]

    @classmethod
    def of(cls, outcomes: Iterable[DispatchOutcome | str]) -> DispatchResult:
        """The result with these outcomes (or their WIT names) and the counts they add up to."""
        out = tuple(DispatchOutcome(o) for o in outcomes)
        return cls(
            delivered=out.count(DispatchOutcome.DELIVERED),
            deduplicated=out.count(DispatchOutcome.DEDUPLICATED),
            queued=sum(o.queued for o in out),
            dead_lettered=sum(o.dead_lettered for o in out),
            outcomes=out,
        )


#: The generated enum's cases by name (DELIVERED, ...) are DispatchOutcome's.
_OUTCOMES = {w: DispatchOutcome[w.name] for w in wit_types.DispatchOutcome}

_LEVELS = {
    "trace": wit_types.LogLevel.TRACE,
    "debug": wit_types.LogLevel.DEBUG,
    "info": wit_types.LogLevel.INFO,
    "warn": wit_types.LogLevel.WARN,
    "warning": wit_types.LogLevel.WARN,
    "error": wit_types.LogLevel.ERROR,
}


def to_bytes(payload: Any) -> bytes:
    """bytes pass through, str is UTF-8 encoded, None is empty, anything else becomes JSON."""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode()
    if payload is None:
        return b""
    return json.dumps(payload, separators=(",", ":")).encode()


def _enum(table: dict[str, Any], value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value  # already a generated enum value
    try:
        return table[value.lower()]
    except KeyError:
        raise InvalidArgument(f"INVALID_ARGUMENT: unknown {what} {value!r}") from None


def _budget_ms(value: Any, what: str) -> int:
    """A per-call budget: a positive finite number of milliseconds (fractions round up),
    else `InvalidArgument` — raised before anything is sent."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidArgument(
            f"INVALID_ARGUMENT: {what} must be a positive finite number of milliseconds, got {value!r}"
        )
    return max(1, math.ceil(value))


class Call:
    """Calls made with a tighter deadline: ``host.with_(deadline_ms=250).ask(...)``.

    The deadline only tightens: the host keeps the earlier of the turn's own deadline and
    now + ``deadline_ms``. (``with`` is a Python keyword, hence ``with_``.)"""

    def __init__(self, deadline_ms: int) -> None:
        self.deadline_ms = deadline_ms

    def ask(
        self,
        to: str,
        msg_type: str,
        payload: Any = b"",
        timeout_ms: float | None = None,
    ) -> bytes:
        """`Host.ask` within this deadline (and ``timeout_ms`` when also given)."""
        ms = self.deadline_ms
        if timeout_ms is not None:
            ms = min(ms, _budget_ms(timeout_ms, "timeout_ms"))
        return call(wit_host.ask, to, msg_type, to_bytes(payload), ms)


class Outbox:
    """The durable outbox (`sluice:actor/outbox`)."""

    def dispatch(
        self,
        ctx: str,
        dispatcher_id: str,
        targets: Iterable[str],
        payload: Any,
        mode: str = "cast",
        idempotency_key: str = "",
        conflict: str = "append",
        *,
        msg_type: str = DEFAULT_DISPATCH_MSG_TYPE,
        sequence_number: int | None = None,
        ttl_ms: int | None = None,
    ) -> DispatchResult:
        """Durable fan-out; returns what happened to each target (`DispatchResult`)."""
        req = wit_types.DispatchRequest(
            context=ctx or "",
            dispatcher_id=dispatcher_id,
            msg_type=msg_type,
            targets=list(targets),
            payload=to_bytes(payload),
            mode=_enum(_MODES, mode, "dispatch mode"),
            idempotency_key=idempotency_key or "",
            conflict=_enum(_CONFLICTS, conflict, "conflict policy"),
            sequence_number=sequence_number,
            ttl_ms=ttl_ms,
        )
        res = call(wit_outbox.dispatch, req)
        return DispatchResult(
            delivered=res.delivered,
            deduplicated=res.deduplicated,
            queued=res.queued,
            dead_lettered=res.dead_lettered,
            outcomes=tuple(_OUTCOMES[o] for o in res.outcomes),
        )

    def tell_reliable(self, to: str, msg_type: str, payload: Any = b"") -> str:
        """Direct tell first, outbox on any failure; returns ``"direct"`` or ``"outbox"``."""
        return _PATHS[call(wit_outbox.tell_reliable, to, msg_type, to_bytes(payload))]

    def remind(
        self, name: str, delay_ms: int, msg_type: str, payload: Any = b""
    ) -> None:
        """A durable reminder: deliver ``msg_type`` to this actor itself (sender: its own id)
        once ``delay_ms`` has passed. Unlike `Host.schedule` (in memory, lost with the host),
        it is stored in the outbox before this returns and survives a host crash or restart; at
        least once, so after a crash it may arrive twice. Arming a non-empty ``name`` (at most
        256 bytes) again replaces the pending one; an empty name arms a new one each time.
        Raises `ResourceExhausted` when this actor already has ``max_reminders_per_actor``
        pending, `Unavailable` on a host without an outbox."""
        call(wit_outbox.remind, name, int(delay_ms), msg_type, to_bytes(payload))

    def cancel_reminder(self, name: str) -> bool:
        """Cancels this actor's pending reminder ``name``; ``True`` when one was pending,
        ``False`` when none was (never armed, cancelled already, or being delivered)."""
        return call(wit_outbox.cancel_reminder, name)


class Bus:
    """Pub/sub between actors (`sluice:actor/bus`)."""

    def publish(self, topic: str, payload: Any = b"") -> None:
        call(wit_bus.publish, topic, to_bytes(payload))


class Host:
    """Messaging and clocks (`sluice:actor/host`), plus ``outbox`` and ``bus``."""

    def __init__(self) -> None:
        self.outbox = Outbox()
        self.bus = Bus()

    def tell(self, to: str, msg_type: str, payload: Any = b"") -> str:
        """Fire and forget; returns ``"queued"``, ``"displaced-oldest"`` or ``"dropped-newest"``."""
        return _RECEIPTS[call(wit_host.tell, to, msg_type, to_bytes(payload))]

    def ask(
        self,
        to: str,
        msg_type: str,
        payload: Any = b"",
        timeout_ms: int = DEFAULT_ASK_TIMEOUT_MS,
    ) -> bytes:
        """Request and reply; returns the reply payload or raises a typed `SluiceError`.
        ``timeout_ms`` must be a positive finite number (else `InvalidArgument`, unsent)."""
        ms = _budget_ms(timeout_ms, "timeout_ms")
        return call(wit_host.ask, to, msg_type, to_bytes(payload), ms)

    def with_(self, *, deadline_ms: float) -> Call:
        """Calls with a per-call deadline that only tightens the inherited one:
        ``host.with_(deadline_ms=250).ask(worker, "process", job)``. A deadline that is not
        a positive finite number raises `InvalidArgument` here, before anything is sent."""
        return Call(_budget_ms(deadline_ms, "deadline_ms"))

    def schedule(self, delay_ms: int, msg_type: str, payload: Any = b"") -> None:
        """Deliver ``msg_type`` to this actor itself after ``delay_ms``."""
        call(wit_host.schedule, int(delay_ms), msg_type, to_bytes(payload))

    def self_id(self) -> str:
        return wit_host.self_id()

    def now_ms(self) -> int:
        return wit_host.now_ms()

    def log(self, level: str, msg: str | None = None) -> None:
        """``log("info", "text")``; ``log("text")`` logs at info."""
        if msg is None:
            level, msg = "info", level
        wit_host.log(_enum(_LEVELS, level, "log level"), str(msg))


host = Host()
_ = _wit  # keep the eager import visible
