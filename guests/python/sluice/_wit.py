"""The only module that touches the generated bindings (`wit_world`).

The imports are eager, at module top level: componentize-py resolves them when it
pre-initialises the component, and a lazy import inside a call would fail there.

Inside a component the bindings are the ones componentize-py generated for the build. On plain
CPython (an editor, a type checker, unit tests with `sluice.testing`) there are none, so the
package falls back to its committed copy of the same generated code, `sluice/_bindings`. That
folder is appended to ``sys.path``, never prepended, so generated bindings always win; its
import functions raise ``NotImplementedError`` until a fake host replaces them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

try:
    import componentize_py_types  # noqa: F401  probe only: the bindings of a component
except (
    ModuleNotFoundError
):  # plain CPython: the committed copy (see the module docstring)
    sys.path.append(str(Path(__file__).resolve().parent / "_bindings"))

from componentize_py_types import Err, Ok
from wit_world.imports import bus as wit_bus
from wit_world.imports import host as wit_host
from wit_world.imports import outbox as wit_outbox
from wit_world.imports import turns as wit_turns
from wit_world.imports import types as wit_types

from .errors import CODES, Internal, SluiceError

__all__ = [
    "Err",
    "Ok",
    "call",
    "from_wit",
    "to_wit",
    "wit_bus",
    "wit_host",
    "wit_outbox",
    "wit_turns",
    "wit_types",
]

P = ParamSpec("P")
R = TypeVar("R")

_CODE_TO_NAME = {
    wit_types.ErrorCode.RESOURCE_EXHAUSTED: "resource-exhausted",
    wit_types.ErrorCode.DEADLINE_EXCEEDED: "deadline-exceeded",
    wit_types.ErrorCode.OVERLOADED: "overloaded",
    wit_types.ErrorCode.NOT_FOUND: "not-found",
    wit_types.ErrorCode.INVALID_ARGUMENT: "invalid-argument",
    wit_types.ErrorCode.UNAVAILABLE: "unavailable",
    wit_types.ErrorCode.INTERNAL: "internal",
}
_NAME_TO_CODE = {v: k for k, v in _CODE_TO_NAME.items()}
_SCOPES = {wit_types.OverloadScope.ACTOR: "actor", wit_types.OverloadScope.HOST: "host"}
_SCOPE_TO_WIT = {v: k for k, v in _SCOPES.items()}


def from_wit(e: Any) -> SluiceError:
    """WIT `actor-error` -> the typed SDK error, keeping every field."""
    cls = CODES.get(_CODE_TO_NAME.get(e.code, "internal"), Internal)
    ov = e.overload
    return cls(
        e.message,
        retry_after_ms=e.retry_after_ms,
        skipped=bool(e.skipped),
        scope=_SCOPES.get(ov.scope) if ov is not None else None,
        depth=ov.depth if ov is not None else None,
        limit=ov.limit if ov is not None else None,
    )


def to_wit(err: SluiceError) -> Any:
    """The typed SDK error -> WIT `actor-error`, keeping every field."""
    overload = None
    if err.scope is not None or err.depth is not None or err.limit is not None:
        overload = wit_types.OverloadInfo(
            scope=_SCOPE_TO_WIT.get(
                err.scope or "actor", wit_types.OverloadScope.ACTOR
            ),
            depth=int(err.depth or 0),
            limit=int(err.limit or 0),
        )
    return wit_types.ActorError(
        code=_NAME_TO_CODE.get(err.code, wit_types.ErrorCode.INTERNAL),
        message=err.message,
        retry_after_ms=err.retry_after_ms,
        skipped=bool(err.skipped),
        overload=overload,
    )


def call(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Call a fallible import, turning `Err(actor-error)` into the typed SDK error."""
    try:
        return fn(*args, **kwargs)
    except Err as e:
        raise from_wit(e.value) from None
