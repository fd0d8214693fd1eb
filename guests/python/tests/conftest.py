"""The SDK's tests run on plain CPython against the fake host the package ships
(`sluice.testing`), with the committed bindings (`sluice/_bindings`) as the real generated
types."""

from collections.abc import Iterator

import pytest

from sluice.testing import FakeHost


@pytest.fixture
def fake() -> Iterator[FakeHost]:
    # The SDK tests' own defaults; a user's tests get FakeHost()'s.
    with FakeHost(
        self_id="Echo/1",
        now_ms=1234,
        ask_reply=b"pong",
        delivery_path="outbox",
        dispatch_result=["delivered", "not-found", "queued-at-limit"],
    ) as f:
        yield f
