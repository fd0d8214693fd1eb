"""Unit tests of the Python SDK against the real generated types and a fake host."""

from typing import Any

import pytest
from componentize_py_types import Err
from wit_world.imports import types

import sluice
from sluice import host
from sluice._actor import Export, register
from sluice.testing import Call, FakeHost, Queued, Reminder, TurnError

E = types.ErrorCode


def actor_error(code, message, retry=None, skipped=False, overload=None):
    return types.ActorError(
        code=code,
        message=message,
        retry_after_ms=retry,
        skipped=skipped,
        overload=overload,
    )


def test_full_mailbox_raises_resource_exhausted_with_exact_message(fake):
    msg = "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)"
    fake.fail_next(actor_error(E.RESOURCE_EXHAUSTED, msg, retry=12))
    with pytest.raises(sluice.ResourceExhausted) as info:
        host.tell("Worker/1", "job", b"x")
    assert str(info.value) == msg
    assert info.value.retry_after_ms == 12
    assert isinstance(info.value, sluice.SluiceError)


def test_deadline_exceeded_keeps_skipped(fake):
    fake.fail_next(
        actor_error(
            E.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED: call timed out", skipped=True
        )
    )
    with pytest.raises(sluice.DeadlineExceeded) as info:
        host.ask("Slow/1", "work", {"n": 1}, timeout_ms=10)
    assert info.value.skipped is True
    assert fake.calls[-1] == Call("ask", "Slow/1", "work", b'{"n":1}', timeout_ms=10)


def test_overloaded_keeps_scope_depth_limit(fake):
    ov = types.OverloadInfo(scope=types.OverloadScope.HOST, depth=9, limit=8)
    fake.fail_next(
        actor_error(
            E.OVERLOADED, "OVERLOADED: host busy (depth=9, limit=8)", overload=ov
        )
    )
    with pytest.raises(sluice.Overloaded) as info:
        host.ask("A/1", "x")
    e = info.value
    assert (e.scope, e.depth, e.limit) == ("host", 9, 8)
    assert e.report() == {
        "type": "Overloaded",
        "code": "overloaded",
        "message": "OVERLOADED: host busy (depth=9, limit=8)",
        "retry_after_ms": None,
        "skipped": False,
        "scope": "host",
        "depth": 9,
        "limit": 8,
    }


@pytest.mark.parametrize(
    "code,cls",
    [
        (E.NOT_FOUND, sluice.NotFound),
        (E.INVALID_ARGUMENT, sluice.InvalidArgument),
        (E.UNAVAILABLE, sluice.Unavailable),
        (E.INTERNAL, sluice.Internal),
    ],
)
def test_every_code_maps_to_its_class(fake, code, cls):
    fake.fail_next(actor_error(code, "m"))
    with pytest.raises(cls):
        host.bus.publish("a.b", "x")


def test_dispatch_seed_call_shape_returns_counts_and_outcomes_in_target_order(fake):
    res = host.outbox.dispatch(
        '{"tenant":"default"}',
        "Leader/1",
        ["W/1", "W/2", "W/3"],
        b"hb",
        "cast",
        "hb-key",
        "overwrite",
    )
    assert res == sluice.DispatchResult(1, 0, 1, 1, res.outcomes)
    assert res.outcomes == (
        sluice.DispatchOutcome.DELIVERED,
        sluice.DispatchOutcome.NOT_FOUND,
        sluice.DispatchOutcome.QUEUED_AT_LIMIT,
    )
    assert (
        res.outcomes[1] == "not-found"
        and res.outcomes[2].queued
        and res.outcomes[1].dead_lettered
    )
    req = fake.calls[-1].request
    assert req is not None
    assert req.conflict == types.Conflict.OVERWRITE
    assert req.mode == types.DispatchMode.CAST
    assert req.idempotency_key == "hb-key"
    assert req.msg_type == sluice.DEFAULT_DISPATCH_MSG_TYPE
    assert req.targets == ["W/1", "W/2", "W/3"]


def test_tell_and_tell_reliable_return_names(fake):
    assert host.tell("A/1", "t", "x") == "queued"
    assert host.outbox.tell_reliable("A/1", "t", "x") == "outbox"
    assert fake.calls == [
        Call("tell", "A/1", "t", b"x"),
        Call("tell_reliable", "A/1", "t", b"x"),
    ]


def test_remind_and_cancel_reminder_call_shape_and_pending_reminders(fake):
    host.outbox.remind("tick", 500, "tick", {"n": 1})
    assert fake.calls == [
        Call("remind", "", "tick", b'{"n":1}', delay_ms=500, name="tick")
    ]
    assert fake.reminders == [
        Reminder("Echo/1", "tick", 500, "tick", b'{"n":1}', due_ms=1734)
    ]
    # Unnamed: a new one each time. Named: arming the name again replaces the pending one.
    host.outbox.remind("", 10, "poll")
    host.outbox.remind("", 20, "poll", "again")
    fake.advance(100)
    host.outbox.remind("tick", 50, "tock", b"2")
    assert fake.reminders == [
        Reminder("Echo/1", "", 10, "poll", b"", due_ms=1244),
        Reminder("Echo/1", "", 20, "poll", b"again", due_ms=1254),
        Reminder("Echo/1", "tick", 50, "tock", b"2", due_ms=1384),
    ]
    # Cancel: True while one is pending, then False; an empty name matches no reminder.
    assert host.outbox.cancel_reminder("tick") is True
    assert host.outbox.cancel_reminder("tick") is False
    assert host.outbox.cancel_reminder("") is False
    assert host.outbox.cancel_reminder("never") is False
    assert [r.msg_type for r in fake.reminders] == ["poll", "poll"]
    assert fake.calls[-4:] == [
        Call("cancel_reminder", name="tick"),
        Call("cancel_reminder", name="tick"),
        Call("cancel_reminder", name=""),
        Call("cancel_reminder", name="never"),
    ]


def test_reminder_errors_arrive_typed_and_a_failed_remind_stores_nothing(fake):
    fake.fail_on(
        sluice.ResourceExhausted("RESOURCE_EXHAUSTED: too many reminders"),
        op="remind",
    )
    fake.fail_on(sluice.Unavailable("UNAVAILABLE: no outbox"), op="cancel_reminder")
    host.tell("A/1", "t")
    with pytest.raises(sluice.ResourceExhausted) as full:
        host.outbox.remind("tick", 5, "tick")
    assert str(full.value) == "RESOURCE_EXHAUSTED: too many reminders"
    assert fake.reminders == []
    host.outbox.remind("tick", 5, "tick")
    with pytest.raises(sluice.Unavailable):
        host.outbox.cancel_reminder("tick")
    assert host.outbox.cancel_reminder("tick") is True
    fake.fail_next(actor_error(E.INVALID_ARGUMENT, "INVALID_ARGUMENT: name too long"))
    with pytest.raises(sluice.InvalidArgument):
        host.outbox.remind("x" * 257, 5, "tick")
    assert [c.op for c in fake.calls] == ["tell"] + ["remind", "remind"] + [
        "cancel_reminder",
        "cancel_reminder",
        "remind",
    ]


def test_fake_host_keeps_reminders_per_actor_and_never_delivers_them():
    class Ticker(sluice.Actor):
        def __init__(self):
            self.ticks = []

        def handle(self, env):
            if env.msg_type == "start":
                host.outbox.remind("tick", 1000, "tick", {"from": host.self_id()})
                return None
            if env.msg_type == "stop":
                return {"cancelled": host.outbox.cancel_reminder("tick")}
            self.ticks.append((env.sender, env.json()))
            return None

    a, b = Ticker(), Ticker()
    with FakeHost() as fake:
        fake.route("Ticker/a", a)
        fake.route("Ticker/b", b)
        fake.handle(a, "start")
        fake.handle(b, "start")
        fake.handle(a, "start")  # re-armed: replaces a's, not b's
        assert [(r.actor, r.name) for r in fake.reminders] == [
            ("Ticker/b", "tick"),
            ("Ticker/a", "tick"),
        ]
        assert [c.by for c in fake.calls] == ["Ticker/a", "Ticker/b", "Ticker/a"]
        assert fake.queued == [] and fake.run_queued() == []
        # The fake never delivers a reminder; the test hands it to the actor, as the host would.
        r = fake.reminders[1]
        fake.handle(a, r.msg_type, r.payload, sender=r.actor)
        assert a.ticks == [("Ticker/a", {"from": "Ticker/a"})]
        assert fake.handle(a, "stop") == b'{"cancelled":true}'
        assert fake.handle(a, "stop") == b'{"cancelled":false}'
        assert [r.actor for r in fake.reminders] == ["Ticker/b"]


def test_log_levels(fake):
    host.log("warn", "careful")
    host.log("plain")
    assert fake.logs == [("warn", "careful"), ("info", "plain")]
    assert fake.calls == []


def test_handle_raising_sluice_error_returns_guest_error_not_trap(fake):
    class A(sluice.Actor):
        def handle(self, env):
            raise sluice.ResourceExhausted(
                "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=5)", retry_after_ms=5
            )

    register(A)
    env = types.Envelope(
        sender=None, msg_type="x", payload=b"", principal="system", deadline_ms=None
    )
    with pytest.raises(Err) as info:
        Export().handle(env)
    got = info.value.value
    assert got.code == E.RESOURCE_EXHAUSTED
    assert got.message == "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=5)"
    assert got.retry_after_ms == 5


def test_handle_plain_exception_becomes_internal_and_keeps_state(fake):
    class A(sluice.Actor):
        def __init__(self):
            self.n = 0

        def handle(self, env):
            self.n += 1
            if env.msg_type == "boom":
                raise RuntimeError("boom")
            if env.msg_type == "bare":
                raise KeyError
            return {"n": self.n}

    register(A)

    def env(t):
        return types.Envelope(
            sender=None, msg_type=t, payload=b"", principal="p", deadline_ms=None
        )

    with pytest.raises(Err) as exc:
        Export().handle(env("boom"))
    got = exc.value.value
    assert got.code == types.ErrorCode.INTERNAL
    assert got.message == "INTERNAL: boom"
    assert got.retry_after_ms is None
    with pytest.raises(Err) as exc:
        Export().handle(env("bare"))
    assert exc.value.value.message == "INTERNAL: KeyError"
    assert Export().handle(env("x")) == b'{"n":3}'


def test_abort_and_memory_error_propagate_as_traps(fake):
    class A(sluice.Actor):
        def handle(self, env):
            if env.msg_type == "oom":
                raise MemoryError()
            sluice.abort("on purpose")

    register(A)
    for t, exc in (("abort", sluice.Abort), ("oom", MemoryError)):
        e = types.Envelope(
            sender=None, msg_type=t, payload=b"", principal="p", deadline_ms=None
        )
        with pytest.raises(exc):
            Export().handle(e)


def test_handle_reply_conversions(fake):
    @sluice.register
    class A(sluice.Actor):
        def handle(self, env):
            return (
                {"echo": env.json(), "sender": env.sender}
                if env.msg_type == "j"
                else env.text
            )

    env = types.Envelope(
        sender="B/1", msg_type="j", payload=b'{"a":1}', principal="p", deadline_ms=7
    )
    assert Export().handle(env) == b'{"echo":{"a":1},"sender":"B/1"}'
    env.msg_type = "t"
    assert Export().handle(env) == b'{"a":1}'


def test_error_round_trip_is_lossless():
    from sluice._wit import from_wit, to_wit

    ov = types.OverloadInfo(scope=types.OverloadScope.ACTOR, depth=3, limit=2)
    for rec in [
        actor_error(E.OVERLOADED, "o", overload=ov),
        actor_error(E.RESOURCE_EXHAUSTED, "r", retry=1),
        actor_error(E.DEADLINE_EXCEEDED, "d", skipped=True),
        actor_error(E.INTERNAL, "i"),
    ]:
        assert to_wit(from_wit(rec)) == rec


# The committed bindings' freshness: host/build/tests/bindings_fresh.rs (run in CI).


def test_with_deadline_tightens_ask_and_refuses_bad_budgets_before_sending(fake):
    assert host.with_(deadline_ms=250).ask("W/1", "process", b"x") == b"pong"
    assert fake.calls[-1] == Call("ask", "W/1", "process", b"x", timeout_ms=250)
    # An explicit timeout can only tighten further; fractions round up.
    host.with_(deadline_ms=250).ask("W/1", "process", b"x", timeout_ms=99.2)
    assert fake.calls[-1].timeout_ms == 100
    host.with_(deadline_ms=250).ask("W/1", "process", b"x", timeout_ms=5000)
    assert fake.calls[-1].timeout_ms == 250
    sent = len(fake.calls)
    # Deliberately ill-typed: what an untyped caller may pass.
    bad_budgets: tuple[Any, ...] = (
        0,
        -5,
        float("nan"),
        float("inf"),
        "250",
        None,
        True,
    )
    for bad in bad_budgets:
        with pytest.raises(sluice.InvalidArgument) as e:
            host.with_(deadline_ms=bad).ask("W/1", "process", b"x")
        assert "positive finite" in str(e.value)
        with pytest.raises(sluice.InvalidArgument):
            host.ask("W/1", "process", b"x", timeout_ms=bad)
    assert len(fake.calls) == sent, "nothing was sent for an invalid budget"


def test_fake_host_handle_runs_a_turn_as_the_caller_sees_it():
    class A(sluice.Actor):
        def handle(self, env):
            if env.msg_type == "boom":
                raise KeyError("k")
            host.log("info", f"from {env.sender}")
            return {"me": host.self_id(), "at": host.now_ms(), "got": env.json()}

    with FakeHost() as fake:
        fake.advance(5)
        assert (
            fake.handle(A(), "j", {"a": 1}, sender="B/1")
            == b'{"me":"MyActor/1","at":1005,"got":{"a":1}}'
        )
        assert fake.logs == [("info", "from B/1")]
        with pytest.raises(sluice.Internal) as info:
            fake.handle(A(), "boom")
        assert str(info.value) == "INTERNAL: 'k'"
        assert isinstance(info.value.__cause__, KeyError)


def test_fake_host_scripted_errors_arrive_typed_one_call_each():
    with FakeHost() as fake:
        fake.fail_next(
            sluice.Overloaded("OVERLOADED: busy", scope="actor", depth=7, limit=5),
            sluice.ResourceExhausted("RESOURCE_EXHAUSTED: full", retry_after_ms=3),
        )
        with pytest.raises(sluice.Overloaded) as ov:
            host.tell("W/1", "job", b"1")
        assert (ov.value.scope, ov.value.depth, ov.value.limit) == ("actor", 7, 5)
        with pytest.raises(sluice.ResourceExhausted) as re:
            host.outbox.tell_reliable("W/1", "job", b"2")
        assert re.value.retry_after_ms == 3
        assert host.outbox.dispatch(
            "", "D/1", ["W/1", "W/2"], b"3"
        ) == sluice.DispatchResult.of(["delivered"] * 2)
        assert [c.op for c in fake.calls] == ["tell", "tell_reliable", "dispatch"]


def test_fake_host_uninstalls_and_refuses_handle_when_not_installed():
    fake = FakeHost(ask_reply=lambda to, msg_type, payload: to.encode() + payload)
    with fake:
        assert host.ask("W/7", "p", b"!") == b"W/7!"
        host.schedule(50, "tick", "t")
        assert fake.calls[-1] == Call("schedule", "", "tick", b"t", delay_ms=50)
    with pytest.raises(NotImplementedError):
        host.now_ms()
    # The committed bindings have the reminder imports (and uninstall put them back).
    with pytest.raises(NotImplementedError):
        host.outbox.remind("tick", 1, "tick")
    with pytest.raises(NotImplementedError):
        host.outbox.cancel_reminder("tick")
    with pytest.raises(RuntimeError, match="not installed"):
        fake.handle(sluice.Actor(), "x")


def test_fake_host_fail_on_fails_only_the_calls_it_names_in_script_order():
    full = sluice.ResourceExhausted("RESOURCE_EXHAUSTED: full", retry_after_ms=1)
    late = sluice.DeadlineExceeded("DEADLINE_EXCEEDED: call timed out")
    with FakeHost() as fake:
        fake.fail_on(full, full, op="tell", to="C/1")
        fake.fail_on(late, op="ask")
        fake.fail_on(full, to="W/2")  # a dispatch naming W/2 among its targets
        with pytest.raises(ValueError, match="op= or to="):
            fake.fail_on(full)
        assert host.tell("C/2", "x") == "queued"
        with pytest.raises(sluice.ResourceExhausted):
            host.tell("C/1", "x")
        assert host.outbox.dispatch("", "D/1", ["W/1"], b"").delivered == 1
        with pytest.raises(sluice.ResourceExhausted):
            host.outbox.dispatch("", "D/1", ["W/1", "W/2"], b"")
        with pytest.raises(sluice.ResourceExhausted):
            host.tell("C/1", "x")
        assert host.tell("C/1", "x") == "queued"
        with pytest.raises(sluice.DeadlineExceeded):
            host.ask("C/1", "x")
        assert host.ask("C/1", "x") == b"{}"
        assert len(fake.calls) == 8, "a failed call is recorded too"


def test_fake_host_dispatch_result_and_clock_can_be_functions_of_the_call():
    with FakeHost(
        dispatch_result=lambda req: [
            "not-found" if t.startswith("Nope/") else "delivered" for t in req.targets
        ],
        tick_ms=2,
    ) as fake:
        res = host.outbox.dispatch("", "D/1", ["W/1", "Nope/2", "W/3"], b"")
        assert (res.delivered, res.dead_lettered) == (2, 1)
        assert res.outcomes == ("delivered", "not-found", "delivered")
        assert (host.now_ms(), host.now_ms(), fake.now_ms) == (1000, 1002, 1004)
        fake.dispatch_result = [sluice.DispatchOutcome.QUEUED_REFUSED]
        res = host.outbox.dispatch("", "D/1", ["W/1"], b"")
        assert res == sluice.DispatchResult(
            0, 0, 1, 0, (sluice.DispatchOutcome.QUEUED_REFUSED,)
        )


def test_fake_host_routes_asks_at_once_and_queues_tells_and_dispatches():
    class Worker(sluice.Actor):
        def __init__(self):
            self.got = []

        def handle(self, env):
            self.got.append((env.sender, env.msg_type, env.json()))
            if env.msg_type == "bad":
                raise sluice.InvalidArgument("INVALID_ARGUMENT: bad")
            if env.msg_type == "report":
                host.tell("Leader/1", "done", {"by": host.self_id()})
            return {"me": host.self_id(), "deadline": env.deadline_ms}

    class Leader(sluice.Actor):
        def __init__(self):
            self.done = []

        def handle(self, env):
            if env.msg_type == "done":
                self.done.append(env.json()["by"])
                return None
            reply = host.ask("Worker/1", "work", {"n": 1}, timeout_ms=300)
            host.tell("Worker/1", "report", {})
            host.outbox.dispatch(
                "",
                "Leader/1",
                ["Worker/1", "Elsewhere/1"],
                b'{"t":1}',
                "cast",
                "k",
                "append",
            )
            with pytest.raises(sluice.InvalidArgument) as bad:
                host.ask("Worker/1", "bad", {})
            assert str(bad.value) == "INVALID_ARGUMENT: bad"
            return reply

    worker, leader = Worker(), Leader()
    with FakeHost() as fake:
        fake.route("Worker/1", worker)
        fake.route("Leader/1", leader)
        assert fake.handle(leader, "start") == b'{"me":"Worker/1","deadline":300}'
        assert worker.got == [("Leader/1", "work", {"n": 1}), ("Leader/1", "bad", {})]
        assert fake.queued == [
            Queued("Worker/1", "report", b"{}", "Leader/1"),
            Queued("Worker/1", "dispatch", b'{"t":1}', "Leader/1"),
        ]
        assert [c.by for c in fake.calls] == ["Leader/1"] * 4
        assert fake.run_queued() == []
        assert worker.got[2:] == [
            ("Leader/1", "report", {}),
            ("Leader/1", "dispatch", {"t": 1}),
        ]
        assert leader.done == ["Worker/1"]
        assert fake.calls[-1] == Call(
            "tell", "Leader/1", "done", b'{"by":"Worker/1"}', by="Worker/1"
        )
        # A queued turn's error comes back from run_queued; an ask cycle is DEADLINE_EXCEEDED.
        host.tell("Worker/1", "bad", {})
        [failed] = fake.run_queued()
        assert (failed.to, failed.msg_type, str(failed.error)) == (
            "Worker/1",
            "bad",
            "INVALID_ARGUMENT: bad",
        )
        assert isinstance(failed, TurnError) and isinstance(
            failed.error, sluice.InvalidArgument
        )

        class Cycle(sluice.Actor):
            def handle(self, env):
                return host.ask("Cycle/1", "again", b"")

        fake.route("Cycle/1", Cycle())
        with pytest.raises(sluice.DeadlineExceeded, match="in a turn already"):
            host.ask("Cycle/1", "go", b"")
