"""Sluice guest SDK for Python: write an actor, build it with `sluice build`.

import sluice
from sluice import host

@sluice.register
class Echo(sluice.Actor):
    def handle(self, env):
        return env.payload
"""

from ._actor import Abort, Actor, Envelope, abort, actor, register
from ._host import (
    DEFAULT_ASK_TIMEOUT_MS,
    DEFAULT_DISPATCH_MSG_TYPE,
    DispatchOutcome,
    DispatchResult,
    host,
    to_bytes,
)
from .errors import (
    DeadlineExceeded,
    Internal,
    InvalidArgument,
    NotFound,
    Overloaded,
    ResourceExhausted,
    SluiceError,
    Unavailable,
)

__all__ = [
    "DEFAULT_ASK_TIMEOUT_MS",
    "DEFAULT_DISPATCH_MSG_TYPE",
    "Abort",
    "Actor",
    "DeadlineExceeded",
    "DispatchOutcome",
    "DispatchResult",
    "Envelope",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "Overloaded",
    "ResourceExhausted",
    "SluiceError",
    "Unavailable",
    "abort",
    "actor",
    "host",
    "register",
    "to_bytes",
]
