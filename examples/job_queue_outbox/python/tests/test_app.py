"""Unit tests of every role on the SDK's fake host (`sluice.testing.FakeHost`):
`python3 -m pytest examples/job_queue_outbox/python/tests`.

Each role is tested alone with scripted host answers, and the leader with its worker through
the fake's routing. Limits, idempotency keys, retries and dead letters are the host's: the
driver (`cargo test -p sluice-tests --test job_queue_outbox python`) checks them on a real one.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest

import app
import sluice
from sluice.testing import FakeHost

CTX = {"tenant": "default", "namespace": "default"}
LEADER = "JobQueueLeader/main"


@pytest.fixture
def fake() -> Iterator[FakeHost]:
    # Every clock reading moves the clock 1 ms on, so the roles' busy-waits end.
    with FakeHost(self_id=LEADER, tick_ms=1) as f:
        yield f


def actor(role: str, **init: object) -> app.JobQueue:
    a = app.JobQueue()
    a.init(json.dumps({"role": role, **init}))
    return a


def send(fake: FakeHost, a: app.JobQueue, msg_type: str, payload: object = None) -> Any:
    body = b"" if payload is None else json.dumps(payload).encode()
    return json.loads(fake.handle(a, msg_type, body))


def dispatches(fake: FakeHost) -> list[Any]:
    """The WIT requests of every dispatch so far, in order."""
    return [c.request for c in fake.calls if c.op == "dispatch"]


def workers(ids: range) -> list[str]:
    return [f"Worker/worker-{i}" for i in ids]


def test_unknown_role_is_refused() -> None:
    with pytest.raises(sluice.InvalidArgument):
        app.JobQueue().init('{"role": "janitor"}')


def test_unknown_message_is_invalid_argument(fake: FakeHost) -> None:
    with pytest.raises(sluice.InvalidArgument):
        send(fake, actor("leader"), "nope", {})


def test_thundering_herd_dispatches_twice_with_the_task_key(fake: FakeHost) -> None:
    # The first dispatch delivers 40 and queues 60 at the relay's limit; the second is absorbed.
    fake.dispatch_result = lambda req: (
        ["delivered"] * 40 + ["queued-at-limit"] * 60 if len(dispatches(fake)) == 1 else ["deduplicated"] * 100
    )
    r = send(fake, actor("leader"), "thundering_herd", {"workers": 100, "task_id": "herd-1"})
    assert (r["targets"], r["delivered"], r["queued"], r["deduplicated"]) == (100, 40, 60, 0)
    assert r["redelivery"] == {"delivered": 0, "deduplicated": 100, "queued": 0, "dead_lettered": 0}
    assert r["wall_ms"] >= 0
    assert len(dispatches(fake)) == 2
    for req in dispatches(fake):
        assert json.loads(req.context) == CTX
        assert req.dispatcher_id == "job-queue-leader"
        assert req.targets == workers(range(100))
        assert json.loads(req.payload) == {"task": "thundering_herd", "priority": "high", "task_id": "herd-1"}
        assert (req.mode.name, req.idempotency_key, req.conflict.name) == ("CAST", "herd-1", "APPEND")
        assert req.msg_type == "dispatch"


def test_config_wave_deploy_waves_and_downloads(fake: FakeHost) -> None:
    # Config servers refuse one download in three.
    n = iter(range(1000))
    fake.dispatch_result = lambda req: (
        ["queued-refused"]
        if req.targets[0].startswith("ConfigServer/") and next(n) % 3 == 0
        else ["delivered"] * len(req.targets)
    )
    r = send(fake, actor("leader"), "config_wave_deploy", {"workers": 50, "wave_size": 20, "version": "2.1.0"})
    assert [(w["wave"], w["targets"]) for w in r["waves"]] == [(0, 20), (1, 20), (2, 10)]
    assert r["total"] == {"delivered": 50, "deduplicated": 0, "queued": 0, "dead_lettered": 0}
    assert r["config_server_queued"] == 17  # ceil(50 / 3)
    waves = [d for d in dispatches(fake) if d.targets[0].startswith("Worker/")]
    assert [d.targets for d in waves] == [workers(range(20)), workers(range(20, 40)), workers(range(40, 50))]
    assert all(d.idempotency_key == "config-2.1.0" for d in waves)
    assert json.loads(waves[0].payload) == {"task": "config", "version": "2.1.0"}
    downloads = [d for d in dispatches(fake) if d.targets[0].startswith("ConfigServer/")]
    assert len(downloads) == 50
    for i, d in enumerate(downloads):
        w = f"Worker/worker-{i}"
        # A wave's downloads all go to one server (cs-(wave mod 2)): its two slots fill.
        assert d.targets == [f"ConfigServer/cs-{(i // 20) % 2}"]
        assert json.loads(d.payload) == {"download": "2.1.0", "worker": w}
        assert (d.idempotency_key, d.conflict.name) == (f"dl-2.1.0-{w}", "APPEND")
    # Each wave's downloads follow its config dispatch.
    assert dispatches(fake).index(waves[1]) == 21


def test_send_heartbeat_counts_its_own_seq(fake: FakeHost) -> None:
    leader = actor("leader")
    assert send(fake, leader, "send_heartbeat", {"workers": 3})["seq"] == 1
    r = send(fake, leader, "send_heartbeat", {"workers": 3})
    assert r == {"seq": 2, "delivered": 3, "deduplicated": 0, "queued": 0, "dead_lettered": 0}
    req = dispatches(fake)[-1]
    assert json.loads(req.payload) == {"type": "heartbeat", "seq": 2, "cpu": 0.42}
    assert (req.idempotency_key, req.conflict.name, req.mode.name) == ("hb-leader-worker-101", "OVERWRITE", "CAST")
    assert req.targets == workers(range(3))


def test_heartbeat_burst_relays_worker_101_reply(fake: FakeHost) -> None:
    fake.ask_reply = b'{"sent":50,"delivered":9,"deduplicated":41,"queued":0,"dead_lettered":0}'
    r = send(fake, actor("leader"), "heartbeat_burst", {"count": 50})
    assert r == {"sent": 50, "delivered": 9, "deduplicated": 41, "queued": 0, "dead_lettered": 0}
    ask = fake.calls[-1]
    assert (ask.op, ask.to, ask.msg_type, ask.timeout_ms) == ("ask", "Worker/worker-101", "send_heartbeats", 20_000)
    assert json.loads(ask.payload) == {"count": 50, "to": LEADER}


def test_heartbeat_burst_with_worker_101_routed_reaches_the_leader_after_its_turn(fake: FakeHost) -> None:
    leader, worker = actor("leader"), actor("worker")
    fake.route(LEADER, leader)
    fake.route("Worker/worker-101", worker)
    r = send(fake, leader, "heartbeat_burst", {"count": 5})
    assert r == {"sent": 5, "delivered": 5, "deduplicated": 0, "queued": 0, "dead_lettered": 0}
    # The worker's heartbeats wait for the leader while its turn runs, then arrive in order.
    assert [json.loads(q.payload)["seq"] for q in fake.queued if q.to == LEADER] == [1, 2, 3, 4, 5]
    assert {(q.sender, q.msg_type) for q in fake.queued} == {("Worker/worker-101", "dispatch")}
    assert [c.by for c in fake.calls] == [LEADER] + ["Worker/worker-101"] * 5
    assert fake.run_queued() == []
    assert send(fake, leader, "heartbeats", {}) == {"seqs": [1, 2, 3, 4, 5]}


def test_leader_records_heartbeats_once_from_dispatch_or_heartbeat(fake: FakeHost) -> None:
    leader = actor("leader")
    for seq in (1, 2, 2, 50):
        send(fake, leader, "dispatch", {"type": "heartbeat", "seq": seq, "cpu": 0.42})
    send(fake, leader, "heartbeat", {"type": "heartbeat", "seq": 50})
    assert send(fake, leader, "heartbeats", {}) == {"seqs": [1, 2, 50]}
    with pytest.raises(sluice.InvalidArgument):
        send(fake, leader, "dispatch", {"task": "x"})


def test_worker_send_heartbeats_overwrites_one_key(fake: FakeHost) -> None:
    fake.self_id = "Worker/worker-101"
    # The leader's mailbox takes the first 8 heartbeats, then refuses.
    fake.dispatch_result = lambda req: ["delivered"] if len(dispatches(fake)) <= 8 else ["queued-refused"]
    r = send(fake, actor("worker"), "send_heartbeats", {"count": 50, "to": LEADER})
    assert r == {"sent": 50, "delivered": 8, "deduplicated": 0, "queued": 42, "dead_lettered": 0}
    assert [json.loads(d.payload)["seq"] for d in dispatches(fake)] == list(range(1, 51))
    assert all(
        d.targets == [LEADER]
        and d.dispatcher_id == "Worker/worker-101"
        and d.idempotency_key == "hb-leader-worker-101"
        and d.conflict.name == "OVERWRITE"
        for d in dispatches(fake)
    )


def test_telemetry_falls_back_to_the_outbox_on_any_error(fake: FakeHost) -> None:
    c = "TelemetryCollector/main"
    full = sluice.ResourceExhausted("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=1)", retry_after_ms=1)
    # The first burst: two tells refused; samples 0 and 1 fail two different ways.
    fake.fail_on(full, full, op="tell", to=c)
    fake.fail_on(full, sluice.DeadlineExceeded("DEADLINE_EXCEEDED: call timed out"), op="ask", to=c)
    r = send(fake, actor("leader"), "telemetry_test", {"count": 20})
    assert r == {"count": 20, "fast_path_success": 18, "outbox_fallback": 2, "burst_refused": 2}
    tells = [x for x in fake.calls if x.op == "tell"]
    assert len(tells) == 12  # 6 before samples 0 and 10
    assert json.loads(tells[7].payload) == {"type": "burst", "seq": 10, "n": 1}
    asks = [x for x in fake.calls if x.op == "ask"]
    assert [json.loads(a.payload) for a in asks[:2]] == [
        {"type": "telemetry", "seq": 0},
        {"type": "telemetry", "seq": 1},
    ]
    assert all((a.to, a.msg_type, a.timeout_ms) == (c, "process", 2000) for a in asks)
    assert [(d.targets, d.idempotency_key, json.loads(d.payload)) for d in dispatches(fake)] == [
        ([c], "tel-0", {"type": "telemetry", "seq": 0, "cpu": 0.5, "mem": 0.8}),
        ([c], "tel-1", {"type": "telemetry", "seq": 1, "cpu": 0.5, "mem": 0.8}),
    ]


def test_firmware_rollout_uses_call_mode(fake: FakeHost) -> None:
    fake.dispatch_result = ["delivered"] * 4 + ["queued-failed"] * 6
    r = send(fake, actor("leader"), "firmware_rollout", {"devices": 10, "count": 20})
    assert r == {
        "targets": 10,
        "messages": 200,
        "delivered": 80,
        "deduplicated": 0,
        "queued": 120,
        "dead_lettered": 0,
    }
    assert len(dispatches(fake)) == 20
    d = dispatches(fake)[7]
    assert d.targets == [f"Device/dev-{i}" for i in range(10)]
    assert (d.mode.name, d.idempotency_key, json.loads(d.payload)) == ("CALL", "fw-7", {"firmware": 7})


def test_poison_dispatch(fake: FakeHost) -> None:
    fake.dispatch_result = ["queued-failed"]
    assert send(fake, actor("leader"), "poison", {}) == {
        "delivered": 0,
        "deduplicated": 0,
        "queued": 1,
        "dead_lettered": 0,
    }
    d = dispatches(fake)[0]
    assert d.targets == ["Worker/poison"]
    assert (d.mode.name, d.idempotency_key) == ("CALL", "poison-1")
    assert json.loads(d.payload) == {"task": "poison", "body": "{malformed"}


def test_worker_records_tasks_config_and_heartbeats_once(fake: FakeHost) -> None:
    w = actor("worker")
    for _ in range(3):
        send(fake, w, "dispatch", {"task": "thundering_herd", "priority": "high", "task_id": "herd-1"})
    send(fake, w, "process", {"task": "build", "task_id": "t-2"})
    send(fake, w, "dispatch", {"task": "config", "version": "2.1.0"})
    for seq in (1, 2, 2, 3):
        send(fake, w, "dispatch", {"type": "heartbeat", "seq": seq, "cpu": 0.42})
    assert send(fake, w, "state") == {
        "tasks": {"herd-1": 1, "t-2": 1},
        "config_version": "2.1.0",
        "heartbeats": [1, 2, 3],
    }


def test_worker_state_starts_empty(fake: FakeHost) -> None:
    assert send(fake, actor("worker"), "state", {}) == {"tasks": {}, "config_version": None, "heartbeats": []}


def test_worker_fails_a_malformed_task_until_fixed(fake: FakeHost) -> None:
    w = actor("worker")
    poison = {"task": "poison", "body": "{malformed"}
    with pytest.raises(sluice.InvalidArgument) as info:
        send(fake, w, "dispatch", poison)
    assert str(info.value) == "INVALID_ARGUMENT: malformed task"
    send(fake, w, "dispatch", {"task": "ok", "body": '{"a":1}'})
    assert send(fake, w, "state")["tasks"] == {"ok": 1}
    send(fake, w, "fix", {})
    send(fake, w, "dispatch", poison)
    send(fake, w, "dispatch", poison)
    assert send(fake, w, "state")["tasks"] == {"ok": 1, "poison": 1}


def test_config_server_works_and_serves_each_worker_once(fake: FakeHost) -> None:
    cs = actor("config_server", work_ms=2)
    t0 = fake.now_ms
    for w in ("Worker/worker-0", "Worker/worker-2", "Worker/worker-0"):
        send(fake, cs, "dispatch", {"download": "2.1.0", "worker": w})
    assert fake.now_ms - t0 >= 6  # busy 2 ms per message
    assert send(fake, cs, "state") == {"served": ["Worker/worker-0", "Worker/worker-2"]}


def test_collector_records_each_seq_once_and_counts_bursts(fake: FakeHost) -> None:
    col = actor("collector", work_ms=1)
    for msg_type, msg in [
        ("process", {"type": "telemetry", "seq": 0}),
        ("process", {"type": "burst", "seq": 0, "n": 0}),
        ("dispatch", {"type": "telemetry", "seq": 1, "cpu": 0.5, "mem": 0.8}),
        ("dispatch", {"type": "telemetry", "seq": 0, "cpu": 0.5, "mem": 0.8}),
        ("process", {"type": "burst", "seq": 0, "n": 1}),
    ]:
        send(fake, col, msg_type, msg)
    assert send(fake, col, "state") == {"telemetry": [0, 1], "bursts": 2}


def test_device_offline_asks_to_come_back_later_online_records_in_order(fake: FakeHost) -> None:
    off = actor("device", online=False)
    with pytest.raises(sluice.ResourceExhausted) as info:
        send(fake, off, "dispatch", {"firmware": 0})
    assert str(info.value) == "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)"
    assert info.value.retry_after_ms == 1000
    assert send(fake, off, "state") == {"firmware": []}
    on = actor("device", online=True)
    for k in (0, 1, 1, 2):
        send(fake, on, "dispatch", {"firmware": k})
    assert send(fake, on, "state") == {"firmware": [0, 1, 2]}


def test_errors_cross_the_export_as_guest_errors(fake: FakeHost) -> None:
    """Through the WIT export adapter: a raised SluiceError is an Err(actor-error)."""
    from componentize_py_types import Err
    from wit_world.imports import types

    from sluice._actor import Export, register

    register(actor("device", online=False))
    env = types.Envelope(
        sender=None, msg_type="dispatch", payload=b'{"firmware":0}', principal="system", deadline_ms=None
    )
    with pytest.raises(Err) as info:
        Export().handle(env)
    assert info.value.value.code == types.ErrorCode.RESOURCE_EXHAUSTED
    assert info.value.value.message == "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)"
    assert info.value.value.retry_after_ms == 1000


def test_a_payload_missing_a_field_is_a_guest_error_not_a_trap(fake: FakeHost) -> None:
    with pytest.raises(sluice.InvalidArgument):
        send(fake, actor("config_server"), "dispatch", {"download": "2.1.0"})
    with pytest.raises(sluice.InvalidArgument):
        send(fake, actor("device"), "dispatch", [1, 2])


def test_leader_scenarios_have_the_protocol_defaults(fake: FakeHost) -> None:
    leader = actor("leader")
    assert send(fake, leader, "thundering_herd", {})["targets"] == 100
    assert len(send(fake, leader, "config_wave_deploy", {})["waves"]) == 5
    assert json.loads(dispatches(fake)[-1].payload)["download"] == "2.1.0"
