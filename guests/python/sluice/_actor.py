"""Actor registration and the export adapter componentize-py calls."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from ._host import to_bytes
from ._wit import Err, to_wit
from .errors import Internal, SluiceError

__all__ = [
    "Abort",
    "Actor",
    "Envelope",
    "Export",
    "Handler",
    "abort",
    "actor",
    "register",
    "registered",
    "turn",
    "uncoded",
]


@dataclass
class Envelope:
    """One message as the actor receives it."""

    sender: str | None
    msg_type: str
    payload: bytes
    principal: str
    deadline_ms: int | None

    @property
    def text(self) -> str:
        """The payload decoded as UTF-8."""
        return self.payload.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The payload parsed as JSON (`None` when empty)."""
        return json.loads(self.payload) if self.payload else None


class Handler(Protocol):
    """Anything with the ``handle`` of an `Actor` (the class need not derive from it)."""

    def handle(self, env: Envelope) -> Any: ...


class Actor:
    """Base class: override ``init`` (optional) and ``handle``.

    ``handle`` may return bytes, str, None or anything JSON-serialisable. Raising a
    `SluiceError` returns that guest error to the caller; any other exception becomes
    `Internal` with the message ``INTERNAL: <the exception>``, and the instance keeps its
    state. `sluice.abort()`, ``MemoryError`` and other non-``Exception`` errors trap.
    """

    def init(self, config: str) -> None:
        self.config = config

    def handle(self, env: Envelope) -> Any:
        raise NotImplementedError("override Actor.handle")


_registered: Any | None = None


def register(actor_or_class: Any) -> Any:
    """Register the actor (a class, instantiated once, or an instance). Usable as a decorator."""
    global _registered
    _registered = (
        actor_or_class() if isinstance(actor_or_class, type) else actor_or_class
    )
    return actor_or_class


actor = register


def registered() -> Any:
    if _registered is None:
        raise RuntimeError(
            "no actor registered: call sluice.register(MyActor) in app.py"
        )
    return _registered


class Abort(BaseException):
    """Raised by `abort`: not an `Exception`, so it escapes ``handle`` and traps."""


def abort(message: str = "aborted") -> NoReturn:
    """Trap the instance on purpose (Python's panic): the caller sees ``INTERNAL`` naming a
    trap, and the supervisor restarts the instance with fresh state. ``MemoryError`` and other
    ``BaseException``s (``SystemExit``) trap the same way; a plain exception does not."""
    raise Abort(message)


def uncoded(exc: BaseException) -> Internal:
    """A plain exception as the error that crosses the boundary: ``INTERNAL: <message>``
    (the exception's type name when it has no message)."""
    detail = str(exc) or type(exc).__name__
    return Internal(f"INTERNAL: {detail}")


class Export:
    """Implements the WIT `actor` export by forwarding to the registered actor."""

    def init(self, config: str) -> None:
        try:
            registered().init(config)
        except SluiceError as e:
            raise Err(to_wit(e)) from None
        except MemoryError:
            raise
        except Exception as e:  # noqa: BLE001
            raise Err(to_wit(uncoded(e))) from None

    def handle(self, env: Any) -> bytes:
        e = Envelope(
            env.sender, env.msg_type, bytes(env.payload), env.principal, env.deadline_ms
        )
        try:
            return turn(registered(), e)
        except SluiceError as err:
            raise Err(to_wit(err)) from None


def turn(target: Handler, env: Envelope) -> bytes:
    """One turn as the caller sees it: the reply bytes, or a `SluiceError` (a plain exception
    becomes `uncoded` INTERNAL, chained to the original). ``MemoryError`` and other
    non-``Exception`` errors propagate: they trap. The export and `sluice.testing` share it."""
    try:
        return to_bytes(target.handle(env))
    except SluiceError:
        raise
    except MemoryError:
        raise  # a trap: the host reports its memory limit (RESOURCE_EXHAUSTED)
    except Exception as err:
        raise uncoded(err) from err
