"""TESTKIT `flood`: tells `count` messages to `to` as fast as it can and counts the outcomes."""

import sluice
from sluice import host

_KEYS = {
    "queued": "queued",
    "displaced-oldest": "displaced",
    "dropped-newest": "dropped",
}


@sluice.register
class Flood(sluice.Actor):
    def handle(self, env):
        if env.msg_type != "flood":
            return env.payload
        req = env.json()
        counts = {"queued": 0, "displaced": 0, "dropped": 0, "refused": 0}
        first_error = first_error_type = None
        for i in range(int(req["count"])):
            try:
                counts[_KEYS[host.tell(req["to"], req["msg_type"], str(i))]] += 1
            except sluice.SluiceError as e:
                counts["refused"] += 1
                if first_error is None:
                    first_error, first_error_type = e.message, type(e).__name__
        return {
            **counts,
            "first_error": first_error,
            "first_error_type": first_error_type,
        }
