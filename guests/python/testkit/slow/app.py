"""TESTKIT `slow`: sleeps `payload` ms (default 100), then replies the payload."""

import time

import sluice


@sluice.register
class Slow(sluice.Actor):
    def handle(self, env):
        if env.msg_type == "ok":
            return "alive"
        text = env.text.strip()
        ms = int(text) if text.isdigit() else 100
        time.sleep(ms / 1000)
        return env.payload
