"""Sluice guest SDK for Python: write an actor, build it with `sluice build`.

    import sluice
    from sluice import host

    @sluice.register
    class Echo(sluice.Actor):
        def handle(self, env):
            return env.payload
"""

from ._actor import Abort, Actor, Envelope, abort, actor, register
from ._host import DEFAULT_ASK_TIMEOUT_MS, DEFAULT_DISPATCH_MSG_TYPE, host, to_bytes
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
    "Actor", "Envelope", "actor", "register", "abort", "Abort", "host", "to_bytes",
    "DEFAULT_ASK_TIMEOUT_MS", "DEFAULT_DISPATCH_MSG_TYPE",
    "SluiceError", "ResourceExhausted", "DeadlineExceeded", "Overloaded", "NotFound",
    "InvalidArgument", "Unavailable", "Internal",
]
