"""TESTKIT `hog`: `ok` replies alive; anything else keeps allocating 1 MiB chunks forever."""

import sluice

MIB = 1 << 20


@sluice.register
class Hog(sluice.Actor):
    def __init__(self):
        self.chunks = []

    def handle(self, env):
        if env.msg_type == "ok":
            return "alive"
        while True:
            chunk = bytearray(MIB)
            for i in range(0, MIB, 4096):  # touch every page
                chunk[i] = 1
            self.chunks.append(chunk)
