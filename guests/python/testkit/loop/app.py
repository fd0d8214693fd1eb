"""TESTKIT `loop`: `ok` replies alive; anything else spins forever without calling the host."""

import sluice


@sluice.register
class Loop(sluice.Actor):
    def handle(self, env):
        if env.msg_type == "ok":
            return "alive"
        n = 0
        while True:
            n += 1
