"""TESTKIT `crash`: `ok` replies alive; anything else raises an uncaught exception (a trap)."""

import sluice


@sluice.register
class Crash(sluice.Actor):
    def handle(self, env):
        if env.msg_type == "ok":
            return "alive"
        raise RuntimeError(f"crash requested by {env.msg_type!r}")
