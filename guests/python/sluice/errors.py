"""Typed Sluice errors and their lossless mapping to and from the WIT `actor-error` record."""

from __future__ import annotations

from typing import Any

__all__ = [
    "CODES",
    "DeadlineExceeded",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "Overloaded",
    "ResourceExhausted",
    "SluiceError",
    "Unavailable",
    "prefix",
]


def prefix(code: str) -> str:
    """The canonical message prefix of a WIT code: ``prefix("not-found") == "NOT_FOUND"``.

    Every message reads ``PREFIX: detail`` (``wit/errors.json``).
    """
    return code.replace("-", "_").upper()


class SluiceError(Exception):
    """Base of every error that crosses the guest/host boundary.

    ``str(err)`` is exactly the canonical message the host sent (or the one the guest gave),
    e.g. ``RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)``.
    """

    #: The WIT `error-code` case name, e.g. ``"resource-exhausted"``.
    code: str = "internal"

    def __init__(
        self,
        message: str = "",
        *,
        retry_after_ms: int | None = None,
        skipped: bool = False,
        scope: str | None = None,
        depth: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_ms = retry_after_ms
        self.skipped = skipped
        self.scope = scope
        self.depth = depth
        self.limit = limit

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def report(self) -> dict[str, Any]:
        """The error as the TESTKIT error report's ``error`` object."""
        return {
            "type": type(self).__name__,
            "code": self.code,
            "message": self.message,
            "retry_after_ms": self.retry_after_ms,
            "skipped": self.skipped,
            "scope": self.scope,
            "depth": self.depth,
            "limit": self.limit,
        }


class ResourceExhausted(SluiceError):
    """The receiver has no room (full mailbox, rate or memory limit); see ``retry_after_ms``."""

    code = "resource-exhausted"


class DeadlineExceeded(SluiceError):
    """The call's deadline passed; ``skipped`` is true when the turn never ran."""

    code = "deadline-exceeded"


class Overloaded(SluiceError):
    """An admission cap refused the call; ``scope`` (``actor``/``host``), ``depth``, ``limit``."""

    code = "overloaded"


class NotFound(SluiceError):
    """No such actor type or module on this host."""

    code = "not-found"


class InvalidArgument(SluiceError):
    """The request itself is wrong (oversize payload, bad topic, bad deadline)."""

    code = "invalid-argument"


class Unavailable(SluiceError):
    """The actor or a subsystem cannot serve now."""

    code = "unavailable"


class Internal(SluiceError):
    """The callee failed (a trap, or an error raised without a code of its own)."""

    code = "internal"


#: WIT error-code name -> SDK class, in the WIT `error-code` order (``wit/errors.json``).
CODES = {
    cls.code: cls
    for cls in (
        ResourceExhausted,
        DeadlineExceeded,
        Overloaded,
        NotFound,
        InvalidArgument,
        Unavailable,
        Internal,
    )
}
