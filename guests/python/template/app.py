"""A Sluice actor in Python. Build: sluice build . (or see guests/python/README.md)."""

import sluice
from sluice import host


@sluice.register
class MyActor(sluice.Actor):
    def init(self, config: str) -> None:
        # `config` is the actor's `init` table from app-config.toml, as JSON.
        self.count = 0

    def handle(self, env: sluice.Envelope) -> object:
        self.count += 1
        if env.msg_type == "ping":
            return {"pong": self.count, "at": host.now_ms(), "me": host.self_id()}
        if env.msg_type == "forward":
            try:
                reply = host.ask("Worker/1", "process", env.json(), timeout_ms=2000)
            except sluice.ResourceExhausted as e:
                return {"busy": True, "retry_after_ms": e.retry_after_ms}
            return reply
        # Errors read `CODE: detail` (wit/errors.json); any other exception is INTERNAL.
        raise sluice.InvalidArgument(
            f"INVALID_ARGUMENT: unknown msg-type {env.msg_type!r}"
        )
