"""Unit tests of every role on a fake host: `python3 -m pytest examples/job_queue_outbox/python/tests`."""

import json

import pytest
from wit_world.imports import types

import app
import sluice
from conftest import actor_error

E = types.ErrorCode
CTX = {"tenant": "default", "namespace": "default"}


def actor(role, **init):
    a = app.JobQueue()
    a.init(json.dumps({"role": role, **init}))
    return a


def send(a, msg_type, payload=None):
    body = b"" if payload is None else json.dumps(payload).encode()
    env = sluice.Envelope(None, msg_type, body, "system", None)
    return json.loads(sluice.to_bytes(a.handle(env)))


def workers(ids):
    return [f"Worker/worker-{i}" for i in ids]


def test_unknown_role_is_refused():
    with pytest.raises(sluice.InvalidArgument):
        app.JobQueue().init('{"role": "janitor"}')


def test_unknown_message_is_invalid_argument(fake):
    with pytest.raises(sluice.InvalidArgument):
        send(actor("leader"), "nope", {})


def test_thundering_herd_dispatches_twice_with_the_task_key(fake):
    fake.dispatch_result = lambda req: types.DispatchResult(accepted=40, rejected=60)
    r = send(actor("leader"), "thundering_herd", {"workers": 100, "task_id": "herd-1"})
    assert (r["targets"], r["accepted"], r["rejected"]) == (100, 40, 60)
    assert r["redelivery"] == {"accepted": 40, "rejected": 60}
    assert r["wall_ms"] >= 0
    assert len(fake.dispatches) == 2
    for req in fake.dispatches:
        assert json.loads(req.context) == CTX
        assert req.dispatcher_id == "job-queue-leader"
        assert req.targets == workers(range(100))
        assert json.loads(req.payload) == {"task": "thundering_herd", "priority": "high", "task_id": "herd-1"}
        assert (req.mode, req.idempotency_key, req.conflict) == (
            types.DispatchMode.CAST,
            "herd-1",
            types.Conflict.APPEND,
        )
        assert req.msg_type == "dispatch"


def test_config_wave_deploy_waves_and_downloads(fake):
    # Config servers refuse one download in three.
    n = iter(range(1000))
    fake.dispatch_result = lambda req: (
        types.DispatchResult(accepted=0, rejected=1)
        if req.targets[0].startswith("ConfigServer/") and next(n) % 3 == 0
        else types.DispatchResult(accepted=len(req.targets), rejected=0)
    )
    r = send(actor("leader"), "config_wave_deploy", {"workers": 50, "wave_size": 20, "version": "2.1.0"})
    assert [(w["wave"], w["targets"]) for w in r["waves"]] == [(0, 20), (1, 20), (2, 10)]
    assert (r["total_accepted"], r["total_rejected"]) == (50, 0)
    assert r["config_server_rejected"] == 17  # ceil(50 / 3)
    waves = [d for d in fake.dispatches if d.targets[0].startswith("Worker/")]
    assert [d.targets for d in waves] == [workers(range(20)), workers(range(20, 40)), workers(range(40, 50))]
    assert all(d.idempotency_key == "config-2.1.0" for d in waves)
    assert json.loads(waves[0].payload) == {"task": "config", "version": "2.1.0"}
    downloads = [d for d in fake.dispatches if d.targets[0].startswith("ConfigServer/")]
    assert len(downloads) == 50
    for i, d in enumerate(downloads):
        w = f"Worker/worker-{i}"
        # A wave's downloads all go to one server (cs-(wave mod 2)): its two slots fill.
        assert d.targets == [f"ConfigServer/cs-{(i // 20) % 2}"]
        assert json.loads(d.payload) == {"download": "2.1.0", "worker": w}
        assert (d.idempotency_key, d.conflict) == (f"dl-2.1.0-{w}", types.Conflict.APPEND)
    # Each wave's downloads follow its config dispatch.
    assert fake.dispatches.index(waves[1]) == 21


def test_send_heartbeat_counts_its_own_seq(fake):
    leader = actor("leader")
    assert send(leader, "send_heartbeat", {"workers": 3})["seq"] == 1
    r = send(leader, "send_heartbeat", {"workers": 3})
    assert r == {"seq": 2, "accepted": 3, "rejected": 0}
    req = fake.dispatches[-1]
    assert json.loads(req.payload) == {"type": "heartbeat", "seq": 2, "cpu": 0.42}
    assert (req.idempotency_key, req.conflict, req.mode) == (
        "hb-leader-worker-101",
        types.Conflict.OVERWRITE,
        types.DispatchMode.CAST,
    )
    assert req.targets == workers(range(3))


def test_heartbeat_burst_relays_worker_101_reply(fake):
    fake.ask_reply = lambda to, t, p: b'{"sent":50,"accepted":9,"rejected":41}'
    r = send(actor("leader"), "heartbeat_burst", {"count": 50})
    assert r == {"sent": 50, "accepted": 9, "rejected": 41}
    op, to, msg_type, payload, _ = fake.calls[-1]
    assert (op, to, msg_type) == ("ask", "Worker/worker-101", "send_heartbeats")
    assert json.loads(payload) == {"count": 50, "to": "JobQueueLeader/main"}


def test_leader_records_heartbeats_once_from_dispatch_or_heartbeat(fake):
    leader = actor("leader")
    for seq in (1, 2, 2, 50):
        send(leader, "dispatch", {"type": "heartbeat", "seq": seq, "cpu": 0.42})
    send(leader, "heartbeat", {"type": "heartbeat", "seq": 50})
    assert send(leader, "heartbeats", {}) == {"seqs": [1, 2, 50]}
    with pytest.raises(sluice.InvalidArgument):
        send(leader, "dispatch", {"task": "x"})


def test_worker_send_heartbeats_overwrites_one_key(fake):
    fake.me = "Worker/worker-101"
    fake.dispatch_result = lambda req: types.DispatchResult(
        accepted=int(len(fake.dispatches) <= 8), rejected=int(len(fake.dispatches) > 8)
    )
    r = send(actor("worker"), "send_heartbeats", {"count": 50, "to": "JobQueueLeader/main"})
    assert r == {"sent": 50, "accepted": 8, "rejected": 42}
    assert [json.loads(d.payload)["seq"] for d in fake.dispatches] == list(range(1, 51))
    assert all(
        d.targets == ["JobQueueLeader/main"]
        and d.idempotency_key == "hb-leader-worker-101"
        and d.conflict == types.Conflict.OVERWRITE
        for d in fake.dispatches
    )


def test_telemetry_falls_back_to_the_outbox_on_any_error(fake):
    c = "TelemetryCollector/main"
    # The first burst: two tells refused; samples 0 and 5 fail two different ways.
    fake.fail[("tell", c)] = [actor_error(E.RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED: mailbox full", 1)] * 2
    fake.fail[("ask", c)] = [
        actor_error(E.RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED: mailbox full", 1),
        actor_error(E.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED: call timed out"),
    ]
    r = send(actor("leader"), "telemetry_test", {"count": 20})
    assert r == {"count": 20, "fast_path_success": 18, "outbox_fallback": 2, "burst_refused": 2}
    tells = [x for x in fake.calls if x[0] == "tell"]
    assert len(tells) == 12  # 6 before samples 0 and 10
    assert json.loads(tells[7][3]) == {"type": "burst", "seq": 10, "n": 1}
    asks = [x for x in fake.calls if x[0] == "ask"]
    assert [json.loads(a[3]) for a in asks[:2]] == [{"type": "telemetry", "seq": 0}, {"type": "telemetry", "seq": 1}]
    assert all(a[1:3] == (c, "process") and a[4] == 2000 for a in asks)
    assert [(d.targets, d.idempotency_key, json.loads(d.payload)) for d in fake.dispatches] == [
        ([c], "tel-0", {"type": "telemetry", "seq": 0, "cpu": 0.5, "mem": 0.8}),
        ([c], "tel-1", {"type": "telemetry", "seq": 1, "cpu": 0.5, "mem": 0.8}),
    ]


def test_firmware_rollout_uses_call_mode(fake):
    fake.dispatch_result = lambda req: types.DispatchResult(accepted=4, rejected=6)
    r = send(actor("leader"), "firmware_rollout", {"devices": 10, "count": 20})
    assert r == {"targets": 10, "messages": 200, "accepted": 80, "rejected": 120}
    assert len(fake.dispatches) == 20
    d = fake.dispatches[7]
    assert d.targets == [f"Device/dev-{i}" for i in range(10)]
    assert (d.mode, d.idempotency_key, json.loads(d.payload)) == (types.DispatchMode.CALL, "fw-7", {"firmware": 7})


def test_poison_dispatch(fake):
    fake.dispatch_result = lambda req: types.DispatchResult(accepted=0, rejected=1)
    assert send(actor("leader"), "poison", {}) == {"accepted": 0, "rejected": 1}
    d = fake.dispatches[0]
    assert d.targets == ["Worker/poison"]
    assert (d.mode, d.idempotency_key) == (types.DispatchMode.CALL, "poison-1")
    assert json.loads(d.payload) == {"task": "poison", "body": "{malformed"}


def test_worker_records_tasks_config_and_heartbeats_once(fake):
    w = actor("worker")
    for _ in range(3):
        send(w, "dispatch", {"task": "thundering_herd", "priority": "high", "task_id": "herd-1"})
    send(w, "process", {"task": "build", "task_id": "t-2"})
    send(w, "dispatch", {"task": "config", "version": "2.1.0"})
    for seq in (1, 2, 2, 3):
        send(w, "dispatch", {"type": "heartbeat", "seq": seq, "cpu": 0.42})
    assert send(w, "state") == {"tasks": {"herd-1": 1, "t-2": 1}, "config_version": "2.1.0", "heartbeats": [1, 2, 3]}


def test_worker_state_starts_empty(fake):
    assert send(actor("worker"), "state", {}) == {"tasks": {}, "config_version": None, "heartbeats": []}


def test_worker_fails_a_malformed_task_until_fixed(fake):
    w = actor("worker")
    poison = {"task": "poison", "body": "{malformed"}
    with pytest.raises(sluice.InvalidArgument) as info:
        send(w, "dispatch", poison)
    assert str(info.value) == "INVALID_ARGUMENT: malformed task"
    send(w, "dispatch", {"task": "ok", "body": '{"a":1}'})
    assert send(w, "state")["tasks"] == {"ok": 1}
    send(w, "fix", {})
    send(w, "dispatch", poison)
    send(w, "dispatch", poison)
    assert send(w, "state")["tasks"] == {"ok": 1, "poison": 1}


def test_config_server_works_and_serves_each_worker_once(fake):
    cs = actor("config_server", work_ms=2)
    t0 = fake.clock
    for w in ("Worker/worker-0", "Worker/worker-2", "Worker/worker-0"):
        send(cs, "dispatch", {"download": "2.1.0", "worker": w})
    assert fake.clock - t0 >= 6  # busy 2 ms per message
    assert send(cs, "state") == {"served": ["Worker/worker-0", "Worker/worker-2"]}


def test_collector_records_each_seq_once_and_counts_bursts(fake):
    col = actor("collector", work_ms=1)
    for msg_type, msg in [
        ("process", {"type": "telemetry", "seq": 0}),
        ("process", {"type": "burst", "seq": 0, "n": 0}),
        ("dispatch", {"type": "telemetry", "seq": 1, "cpu": 0.5, "mem": 0.8}),
        ("dispatch", {"type": "telemetry", "seq": 0, "cpu": 0.5, "mem": 0.8}),
        ("process", {"type": "burst", "seq": 0, "n": 1}),
    ]:
        send(col, msg_type, msg)
    assert send(col, "state") == {"telemetry": [0, 1], "bursts": 2}


def test_device_offline_asks_to_come_back_later_online_records_in_order(fake):
    off = actor("device", online=False)
    with pytest.raises(sluice.ResourceExhausted) as info:
        send(off, "dispatch", {"firmware": 0})
    assert str(info.value) == "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)"
    assert info.value.retry_after_ms == 1000
    assert send(off, "state") == {"firmware": []}
    on = actor("device", online=True)
    for k in (0, 1, 1, 2):
        send(on, "dispatch", {"firmware": k})
    assert send(on, "state") == {"firmware": [0, 1, 2]}


def test_errors_cross_the_export_as_guest_errors(fake):
    """Through the WIT export adapter: a raised SluiceError is an Err(actor-error)."""
    from componentize_py_types import Err

    from sluice._actor import Export, register

    register(actor("device", online=False))
    env = types.Envelope(
        sender=None, msg_type="dispatch", payload=b'{"firmware":0}', principal="system", deadline_ms=None
    )
    with pytest.raises(Err) as info:
        Export().handle(env)
    assert info.value.value.code == E.RESOURCE_EXHAUSTED
    assert info.value.value.message == "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)"
    assert info.value.value.retry_after_ms == 1000


def test_a_payload_missing_a_field_is_a_guest_error_not_a_trap(fake):
    with pytest.raises(sluice.InvalidArgument):
        send(actor("config_server"), "dispatch", {"download": "2.1.0"})
    with pytest.raises(sluice.InvalidArgument):
        send(actor("device"), "dispatch", [1, 2])


def test_leader_scenarios_have_the_protocol_defaults(fake):
    leader = actor("leader")
    assert send(leader, "thundering_herd", {})["targets"] == 100
    assert len(send(leader, "config_wave_deploy", {})["waves"]) == 5
    assert json.loads(fake.dispatches[-1].payload)["download"] == "2.1.0"
