"""Unit tests of the actor on plain CPython: `python3 -m pytest`.

`sluice.testing.FakeHost` stands in for the host: it records every host call the actor makes
(`fake.calls`, `fake.logs`), answers them from its fields, and fails the next one on demand.
"""

import pytest
import sluice
from sluice.testing import Call, FakeHost

from app import MyActor


def test_ping_counts_and_reads_the_host_clock() -> None:
    with FakeHost(now_ms=42) as fake:
        actor = MyActor()
        actor.init("{}")
        assert fake.handle(actor, "ping") == b'{"pong":1,"at":42,"me":"MyActor/1"}'
        assert fake.handle(actor, "ping") == b'{"pong":2,"at":42,"me":"MyActor/1"}'


def test_forward_asks_the_worker_and_reports_a_full_mailbox() -> None:
    with FakeHost(ask_reply=b'{"done":true}') as fake:
        actor = MyActor()
        actor.init("{}")
        assert fake.handle(actor, "forward", b'{"job":1}') == b'{"done":true}'
        assert fake.calls == [
            Call("ask", "Worker/1", "process", b'{"job":1}', timeout_ms=2000)
        ]

        fake.fail_next(
            sluice.ResourceExhausted(
                "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=7)", retry_after_ms=7
            )
        )
        assert (
            fake.handle(actor, "forward", b"{}") == b'{"busy":true,"retry_after_ms":7}'
        )


def test_unknown_types_are_invalid_argument() -> None:
    with FakeHost() as fake:
        actor = MyActor()
        actor.init("{}")
        with pytest.raises(sluice.InvalidArgument) as e:
            fake.handle(actor, "nope")
        assert str(e.value) == "INVALID_ARGUMENT: unknown msg-type 'nope'"
