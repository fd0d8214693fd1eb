"""Runs app.py on plain CPython: the SDK's committed bindings (guests/python/sluice/_bindings)
give the real generated types; the WIT import functions are replaced by a fake host."""

import sys
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1]
REPO = APP.parents[2]
for p in (REPO / "guests" / "python" / "sluice" / "_bindings", REPO / "guests" / "python", APP):
    sys.path.insert(0, str(p))

from componentize_py_types import Err
from wit_world.imports import host, outbox, types


class FakeHost:
    """Records every call. `dispatch_result(req)` and `ask_reply(to, msg_type, payload)` are
    overridable; `fail[(op, to)]` is a list of actor-errors the next such calls return."""

    def __init__(self):
        self.calls = []
        self.dispatches = []
        self.clock = 1_000
        self.me = "JobQueueLeader/main"
        self.fail = {}
        self.ask_reply = lambda to, msg_type, payload: b"{}"
        self.dispatch_result = lambda req: types.DispatchResult(accepted=len(req.targets), rejected=0)

    def _maybe_fail(self, op, to):
        errs = self.fail.get((op, to))
        if errs:
            raise Err(errs.pop(0))

    def tell(self, to, msg_type, payload):
        self.calls.append(("tell", to, msg_type, payload))
        self._maybe_fail("tell", to)
        return types.TellReceipt.QUEUED

    def ask(self, to, msg_type, payload, timeout_ms):
        self.calls.append(("ask", to, msg_type, payload, timeout_ms))
        self._maybe_fail("ask", to)
        return self.ask_reply(to, msg_type, payload)

    def now_ms(self):
        self.clock += 1  # every reading advances the clock, so busy-waits terminate
        return self.clock

    def self_id(self):
        return self.me

    def log(self, level, msg):
        pass

    def dispatch(self, req):
        self.dispatches.append(req)
        self._maybe_fail("dispatch", req.targets[0] if req.targets else "")
        return self.dispatch_result(req)


def actor_error(code, message, retry=None):
    return types.ActorError(code=code, message=message, retry_after_ms=retry, skipped=False, overload=None)


@pytest.fixture
def fake(monkeypatch):
    f = FakeHost()
    for name in ("tell", "ask", "self_id", "now_ms", "log"):
        monkeypatch.setattr(host, name, getattr(f, name))
    monkeypatch.setattr(outbox, "dispatch", f.dispatch)
    return f
