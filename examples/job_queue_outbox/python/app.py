"""The job_queue_outbox example in Python: one component, every role (see ../PROTOCOL.md).

The role comes from the actor's `init` table (`{"role": "leader" | "worker" | ...}`); each
role is a class whose `handle_<msg_type>` methods are its messages.
"""

import json

import sluice
from sluice import host

DISPATCHER_ID = "job-queue-leader"
CTX = json.dumps({"tenant": "default", "namespace": "default"}, separators=(",", ":"))
LEADER = "JobQueueLeader/main"
COLLECTOR = "TelemetryCollector/main"
HEARTBEAT_KEY = "hb-leader-worker-101"


def counts(*results: sluice.DispatchResult) -> dict[str, int]:
    """What one or more dispatches did with their targets, added up: delivered now, absorbed by
    the idempotency key, queued for the relay, or dead-lettered at once."""
    return {
        "delivered": sum(r.delivered for r in results),
        "deduplicated": sum(r.deduplicated for r in results),
        "queued": sum(r.queued for r in results),
        "dead_lettered": sum(r.dead_lettered for r in results),
    }


def is_heartbeat(msg) -> bool:
    return isinstance(msg, dict) and msg.get("type") == "heartbeat"


def busy_wait(ms: int) -> None:
    """Burn `ms` of wall time: guests have no sleep."""
    until = host.now_ms() + ms
    while host.now_ms() < until:
        pass


class Role:
    """Routes a message to `handle_<msg_type>(msg)`, `msg` being the parsed JSON payload."""

    def __init__(self, config: dict):
        self.config = config

    def handle(self, env: sluice.Envelope):
        try:
            msg = env.json()
        except ValueError:
            raise sluice.InvalidArgument("INVALID_ARGUMENT: payload is not JSON") from None
        if msg is None:
            msg = {}
        method = getattr(self, "handle_" + env.msg_type, None)
        if method is None:
            raise sluice.InvalidArgument(f"INVALID_ARGUMENT: {type(self).__name__} has no message {env.msg_type!r}")
        try:
            return method(msg)
        except (KeyError, TypeError, AttributeError) as e:
            # A payload missing a field is the caller's mistake: a guest error, not a trap.
            raise sluice.InvalidArgument(f"INVALID_ARGUMENT: bad {env.msg_type!r} payload: {e!r}") from None


class Heartbeats:
    """A list of heartbeat seqs, each recorded once."""

    def __init__(self):
        self.seqs = []
        self._seen = set()

    def record(self, msg: dict) -> None:
        seq = msg["seq"]
        if seq not in self._seen:
            self._seen.add(seq)
            self.seqs.append(seq)


class JobQueueLeader(Role):
    """Runs the scenarios; the driver asks it one message per scenario."""

    def __init__(self, config: dict):
        super().__init__(config)
        self.heartbeat_seq = 0
        self.heartbeats = Heartbeats()

    def handle_thundering_herd(self, msg):
        n, task_id = msg.get("workers", 100), msg.get("task_id", "herd-1")
        workers = [f"Worker/worker-{i}" for i in range(n)]
        payload = {"task": "thundering_herd", "priority": "high", "task_id": task_id}
        start = host.now_ms()
        first = host.outbox.dispatch(CTX, DISPATCHER_ID, workers, payload, "cast", task_id, "append")
        wall_ms = host.now_ms() - start
        # The very same dispatch again: a redelivery the idempotency key must absorb.
        again = host.outbox.dispatch(CTX, DISPATCHER_ID, workers, payload, "cast", task_id, "append")
        return {"targets": n, **counts(first), "wall_ms": wall_ms, "redelivery": counts(again)}

    def handle_config_wave_deploy(self, msg):
        n, version = msg.get("workers", 100), msg.get("version", "2.1.0")
        wave_size = max(1, msg.get("wave_size", 20))
        waves, results, server_queued = [], [], 0
        for wave, first in enumerate(range(0, n, wave_size)):
            members = range(first, min(first + wave_size, n))
            start = host.now_ms()
            result = host.outbox.dispatch(
                CTX,
                DISPATCHER_ID,
                [f"Worker/worker-{i}" for i in members],
                {"task": "config", "version": version},
                "cast",
                f"config-{version}",
                "append",
            )
            waves.append(
                {
                    "wave": wave,
                    "targets": len(members),
                    **counts(result),
                    "wall_ms": host.now_ms() - start,
                }
            )
            results.append(result)
            # Every worker of the wave downloads the firmware from the wave's two-slot config
            # server, cs-(wave mod 2): one download per dispatch, faster than it serves them.
            for i in members:
                worker = f"Worker/worker-{i}"
                download = host.outbox.dispatch(
                    CTX,
                    DISPATCHER_ID,
                    [f"ConfigServer/cs-{wave % 2}"],
                    {"download": version, "worker": worker},
                    "cast",
                    f"dl-{version}-{worker}",
                    "append",
                )
                server_queued += download.queued
        return {"waves": waves, "total": counts(*results), "config_server_queued": server_queued}

    def handle_send_heartbeat(self, msg):
        self.heartbeat_seq += 1
        seq = self.heartbeat_seq
        workers = [f"Worker/worker-{i}" for i in range(msg.get("workers", 100))]
        result = host.outbox.dispatch(
            CTX,
            DISPATCHER_ID,
            workers,
            {"type": "heartbeat", "seq": seq, "cpu": 0.42},
            "cast",
            HEARTBEAT_KEY,
            "overwrite",
        )
        return {"seq": seq, **counts(result)}

    def handle_heartbeat_burst(self, msg):
        # While this turn waits for worker-101, the heartbeats it sends pile up in our mailbox.
        reply = host.ask(
            "Worker/worker-101", "send_heartbeats", {"count": msg.get("count", 50), "to": LEADER}, timeout_ms=20_000
        )
        return json.loads(reply)

    def handle_heartbeat(self, msg):
        self.heartbeats.record(msg)
        return {"ok": True}

    def handle_dispatch(self, msg):
        if is_heartbeat(msg):
            return self.handle_heartbeat(msg)
        raise sluice.InvalidArgument("INVALID_ARGUMENT: the leader only takes heartbeats")

    def handle_heartbeats(self, msg):
        return {"seqs": self.heartbeats.seqs}

    def handle_telemetry_test(self, msg):
        count = msg.get("count", 200)
        fast, fallback, burst_refused = 0, 0, 0
        for i in range(count):
            if i % 10 == 0:
                # Keep the four-slot collector at capacity half the time.
                for j in range(6):
                    try:
                        host.tell(COLLECTOR, "process", {"type": "burst", "seq": i, "n": j})
                    except sluice.ResourceExhausted:
                        burst_refused += 1
            try:
                host.ask(COLLECTOR, "process", {"type": "telemetry", "seq": i}, timeout_ms=2000)
                fast += 1
            except sluice.SluiceError:
                host.outbox.dispatch(
                    CTX,
                    DISPATCHER_ID,
                    [COLLECTOR],
                    {"type": "telemetry", "seq": i, "cpu": 0.5, "mem": 0.8},
                    "cast",
                    f"tel-{i}",
                    "append",
                )
                fallback += 1
        return {"count": count, "fast_path_success": fast, "outbox_fallback": fallback, "burst_refused": burst_refused}

    def handle_firmware_rollout(self, msg):
        devices = [f"Device/dev-{d}" for d in range(msg.get("devices", 10))]
        count = msg.get("count", 20)
        results = [
            host.outbox.dispatch(CTX, DISPATCHER_ID, devices, {"firmware": k}, "call", f"fw-{k}", "append")
            for k in range(count)
        ]
        return {"targets": len(devices), "messages": len(devices) * count, **counts(*results)}

    def handle_poison(self, msg):
        result = host.outbox.dispatch(
            CTX,
            DISPATCHER_ID,
            ["Worker/poison"],
            {"task": "poison", "body": "{malformed"},
            "call",
            "poison-1",
            "append",
        )
        return counts(result)


class Worker(Role):
    """Executes tasks (each task_id once), holds a config version, records heartbeats."""

    def __init__(self, config: dict):
        super().__init__(config)
        self.tasks: dict[str, int] = {}
        self.config_version = None
        self.heartbeats = Heartbeats()
        self.fixed = False

    def handle_dispatch(self, msg):
        if is_heartbeat(msg):
            self.heartbeats.record(msg)
        elif msg.get("task") == "config":
            self.config_version = msg["version"]
        elif "task" in msg:
            if "body" in msg and not self.fixed:
                try:
                    json.loads(msg["body"])
                except ValueError:
                    raise sluice.InvalidArgument("INVALID_ARGUMENT: malformed task") from None
            task_id = msg.get("task_id", msg["task"])
            if task_id not in self.tasks:
                self.tasks[task_id] = 1
        else:
            raise sluice.InvalidArgument("INVALID_ARGUMENT: not a task")
        return {"ok": True}

    handle_process = handle_dispatch

    def handle_heartbeat(self, msg):
        return self.handle_dispatch(msg)

    def handle_send_heartbeats(self, msg):
        count, to = msg.get("count", 50), msg.get("to", LEADER)
        results = [
            host.outbox.dispatch(
                CTX,
                host.self_id(),
                [to],
                {"type": "heartbeat", "seq": seq, "cpu": 0.42},
                "cast",
                HEARTBEAT_KEY,
                "overwrite",
            )
            for seq in range(1, count + 1)
        ]
        return {"sent": count, **counts(*results)}

    def handle_fix(self, msg):
        self.fixed = True
        return {"ok": True}

    def handle_state(self, msg):
        return {"tasks": self.tasks, "config_version": self.config_version, "heartbeats": self.heartbeats.seqs}


class ConfigServer(Role):
    """Serves firmware downloads one at a time, `work_ms` each."""

    def __init__(self, config: dict):
        super().__init__(config)
        self.work_ms = int(config.get("work_ms", 2))
        self.served: list[str] = []

    def handle_dispatch(self, msg):
        busy_wait(self.work_ms)
        if msg["worker"] not in self.served:
            self.served.append(msg["worker"])
        return {"ok": True}

    def handle_state(self, msg):
        return {"served": self.served}


class TelemetryCollector(Role):
    """Records telemetry samples (each seq once) and counts bursts, `work_ms` per message."""

    def __init__(self, config: dict):
        super().__init__(config)
        self.work_ms = int(config.get("work_ms", 1))
        self.telemetry: list[int] = []
        self._seen: set[int] = set()
        self.bursts = 0

    def handle_process(self, msg):
        busy_wait(self.work_ms)
        if msg.get("type") == "burst":
            self.bursts += 1
        elif msg.get("type") == "telemetry":
            if msg["seq"] not in self._seen:
                self._seen.add(msg["seq"])
                self.telemetry.append(msg["seq"])
        else:
            raise sluice.InvalidArgument("INVALID_ARGUMENT: not telemetry")
        return {"ok": True}

    handle_dispatch = handle_process

    def handle_state(self, msg):
        return {"telemetry": self.telemetry, "bursts": self.bursts}


class Device(Role):
    """An offline-delivery target: fails while offline, records each firmware once in order."""

    def __init__(self, config: dict):
        super().__init__(config)
        self.online = bool(config.get("online", True))
        self.firmware: list[int] = []

    def handle_dispatch(self, msg):
        if not self.online:
            # "Come back in a second": the relay backs off at least retry_after_ms.
            raise sluice.ResourceExhausted(
                "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)", retry_after_ms=1000
            )
        if msg["firmware"] not in self.firmware:
            self.firmware.append(msg["firmware"])
        return {"ok": True}

    def handle_state(self, msg):
        return {"firmware": self.firmware}


ROLES = {
    "leader": JobQueueLeader,
    "worker": Worker,
    "config_server": ConfigServer,
    "collector": TelemetryCollector,
    "device": Device,
}


@sluice.register
class JobQueue(sluice.Actor):
    """The one exported actor: plays the role its `init` config names."""

    def __init__(self):
        self.role = None

    def init(self, config: str) -> None:
        cfg = json.loads(config or "{}")
        role = ROLES.get(cfg.get("role"))
        if role is None:
            raise sluice.InvalidArgument(f"INVALID_ARGUMENT: unknown role {cfg.get('role')!r}")
        self.role = role(cfg)

    def handle(self, env: sluice.Envelope):
        if self.role is None:
            raise sluice.Unavailable("UNAVAILABLE: actor not initialised")
        return self.role.handle(env)
