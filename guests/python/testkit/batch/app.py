"""TESTKIT `batch`: what the tests of batched turns queue behind a held turn.

`seq` numbers the turns this instance ran, so order and once-only delivery show in the
replies; `spin`, `trap` and `forever` fail one turn of a batch in each way. `hold` and `spin`
both poll the clock.
"""

import time

import sluice


def busy(env: sluice.Envelope) -> bytes:
    text = env.text.strip()
    until = time.monotonic() + (int(text) if text.isdigit() else 0) / 1000
    while time.monotonic() < until:
        pass
    return env.payload


@sluice.register
class Batch(sluice.Actor):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def handle(self, env: sluice.Envelope) -> bytes | str:
        op = env.msg_type
        if op in ("hold", "spin"):
            return busy(env)
        if op == "seq":
            self.seen.append(env.text)
            return f"{len(self.seen)}:{env.text}"
        if op == "seen":
            return ",".join(self.seen)
        if op == "trap":
            sluice.abort("trap requested")
        if op == "forever":
            n = 0
            while True:
                n += 1
        raise sluice.InvalidArgument(f"unknown op {op}")
