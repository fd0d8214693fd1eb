"""Puts the committed componentize-py bindings (tests/bindings) on sys.path so the SDK imports
its real generated types; the import functions themselves are replaced by a fake host."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "bindings"))
sys.path.insert(0, str(HERE.parent))

from componentize_py_types import Err
from wit_world.imports import bus, host, outbox, types


class FakeHost:
    """Records calls; `fail_with` makes the next fallible call return that actor-error."""

    def __init__(self):
        self.calls = []
        self.fail_with = None
        self.ask_reply = b"pong"
        self.receipt = types.TellReceipt.QUEUED
        self.dispatch_result = types.DispatchResult(accepted=2, rejected=1)

    def _maybe_fail(self):
        if self.fail_with is not None:
            err, self.fail_with = self.fail_with, None
            raise Err(err)

    def tell(self, to, msg_type, payload):
        self.calls.append(("tell", to, msg_type, payload))
        self._maybe_fail()
        return self.receipt

    def ask(self, to, msg_type, payload, timeout_ms):
        self.calls.append(("ask", to, msg_type, payload, timeout_ms))
        self._maybe_fail()
        return self.ask_reply

    def schedule(self, delay_ms, msg_type, payload):
        self.calls.append(("schedule", delay_ms, msg_type, payload))
        self._maybe_fail()

    def self_id(self):
        return "Echo/1"

    def now_ms(self):
        return 1234

    def log(self, level, msg):
        self.calls.append(("log", level, msg))

    def dispatch(self, req):
        self.calls.append(("dispatch", req))
        self._maybe_fail()
        return self.dispatch_result

    def tell_reliable(self, to, msg_type, payload):
        self.calls.append(("tell_reliable", to, msg_type, payload))
        self._maybe_fail()
        return types.DeliveryPath.OUTBOX

    def publish(self, topic, payload):
        self.calls.append(("publish", topic, payload))
        self._maybe_fail()


@pytest.fixture
def fake(monkeypatch):
    f = FakeHost()
    for name in ("tell", "ask", "schedule", "self_id", "now_ms", "log"):
        monkeypatch.setattr(host, name, getattr(f, name))
    monkeypatch.setattr(outbox, "dispatch", f.dispatch)
    monkeypatch.setattr(outbox, "tell_reliable", f.tell_reliable)
    monkeypatch.setattr(bus, "publish", f.publish)
    return f
