"""TESTKIT `crash`: `ok` replies alive; anything else aborts (a trap: a plain exception would
be an INTERNAL error value instead)."""

import sluice


@sluice.register
class Crash(sluice.Actor):
    def handle(self, env):
        if env.msg_type == "ok":
            return "alive"
        sluice.abort(f"crash requested by {env.msg_type!r}")
