// The leader's scenarios on the SDK's fake host (`FakeHost` from @sluice/guest/testing), with
// every actor they reach routed to an in-process JobQueue playing its role (run: node
// test/run.mjs). The fake delivers every queued message and has no outbox: the host's limits,
// idempotency keys, coalescing, retries and dead letters are checked by the driver against a
// real host (`cargo test -p sluice-tests --test job_queue_outbox typescript`). Here the
// scripted dispatch answers stand in for the host's, and the actors' own invariants must hold.
import { afterEach, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { DeadlineExceeded, InvalidArgument, ResourceExhausted } from "@sluice/guest";
import { FakeHost } from "@sluice/guest/testing";
import type { DispatchOutcome, DispatchRequest } from "sluice:actor/types@0.1.0";
import { type Config, JobQueue } from "../app.ts";

const L = "JobQueueLeader/main";
const COLLECTOR = "TelemetryCollector/main";
/** Per actor type, its `init` table (app-config.toml). */
const INIT: Record<string, Config> = {
  JobQueueLeader: { role: "leader" },
  Worker: { role: "worker" },
  ConfigServer: { role: "config_server", work_ms: 2 },
  TelemetryCollector: { role: "collector", work_ms: 1 },
  Device: { role: "device", online: true },
};
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const workers = (n: number) => range(n).map((i) => `Worker/worker-${i}`);

let fake: FakeHost;
beforeEach(() => {
  // Every clock reading moves the clock 1 ms on, so the roles' busy-waits end.
  fake = new FakeHost({ selfId: L, tickMs: 1 }).install();
});
afterEach(() => fake.uninstall());

/** A JobQueue with `id`'s role (its type's init, then `init`), routed as `id`. */
function spawn(id: string, init: Config = {}): JobQueue {
  const a = new JobQueue();
  a.init(JSON.stringify({ ...INIT[id.split("/")[0] ?? ""], ...init }));
  fake.route(id, a);
  return a;
}

/** One message to `a`, its JSON reply (what the driver's ask gets). */
function ask(a: JobQueue, msgType: string, payload: unknown = {}): any {
  return JSON.parse(fake.text(a, msgType, payload));
}

/** The four counts of a reply, added up: every target accounted for. */
const total = (r: any) => r.delivered + r.deduplicated + r.queued + r.dead_lettered;
/** `n` times the same outcome. */
const times = (n: number, o: DispatchOutcome): DispatchOutcome[] => Array(n).fill(o);

/** The WIT requests of every dispatch so far. */
function dispatches(): DispatchRequest[] {
  return fake.calls.flatMap((c) => (c.request ? [c.request] : []));
}

test("thundering_herd: the counts add up to the targets, the redelivery has the same key, each task once", () => {
  const leader = spawn(L);
  const ws = workers(100).map((w) => spawn(w));
  // The host's limiter takes 10 at once (the relay the rest); the redelivery is all duplicates.
  let n = 0;
  fake.dispatchResult = (req) => (n++ === 0
    ? [...times(10, "delivered"), ...times(req.targets.length - 10, "queued-at-limit")]
    : times(req.targets.length, "deduplicated"));
  const r = ask(leader, "thundering_herd", { workers: 100, task_id: "herd-1" });
  assert.equal(r.targets, 100);
  assert.deepEqual([r.delivered, r.deduplicated, r.queued, r.dead_lettered], [10, 0, 90, 0]);
  assert.deepEqual(r.redelivery, { delivered: 0, deduplicated: 100, queued: 0, dead_lettered: 0 });
  assert.equal(typeof r.wall_ms, "number");
  const [first, again] = dispatches();
  assert.deepEqual(again, first, "the very same dispatch again");
  assert.deepEqual([first?.targets, first?.idempotencyKey, first?.conflict, first?.mode],
    [workers(100), "herd-1", "append", "cast"]);
  // The fake delivers both; each worker records the task once.
  assert.deepEqual(fake.runQueued(), []);
  for (const [i, w] of ws.entries()) assert.deepEqual(ask(w, "state").tasks, { "herd-1": 1 }, `worker-${i}`);
});

test("config_wave_deploy: every worker gets V, every download served once, C > 0", () => {
  const leader = spawn(L);
  const ws = workers(100).map((w) => spawn(w));
  const servers = [spawn("ConfigServer/cs-0"), spawn("ConfigServer/cs-1")];
  // The two-slot config servers refuse one download in three (the relay delivers it later).
  let k = 0;
  fake.dispatchResult = (req) =>
    req.targets[0]?.startsWith("ConfigServer/") && k++ % 3 === 0 ? ["queued-refused"] : times(req.targets.length, "delivered");
  const r = ask(leader, "config_wave_deploy", { workers: 100, wave_size: 20, version: "2.1.0" });
  assert.deepEqual(r.waves.map((w: any) => [w.wave, w.targets]), range(5).map((i) => [i, 20]));
  assert.deepEqual(r.total, { delivered: 100, deduplicated: 0, queued: 0, dead_lettered: 0 });
  assert.equal(r.config_server_queued, 34, "ceil(100 / 3)");
  assert.deepEqual(fake.runQueued(), []);
  for (const w of ws) assert.equal(ask(w, "state").config_version, "2.1.0");
  const served: string[] = servers.flatMap((s) => ask(s, "state").served);
  assert.deepEqual(served.sort(), workers(100).sort());
});

test("send_heartbeat: seq counts from 1, workers end with the last one, never backwards", () => {
  const leader = spawn(L);
  const ws = workers(30).map((w) => spawn(w));
  for (let s = 1; s <= 3; s++) {
    const r = ask(leader, "send_heartbeat", { workers: 30 });
    assert.equal(r.seq, s);
    assert.equal(total(r), 30);
  }
  // One key, overwrite: what lets the host keep only the newest pending heartbeat per worker.
  assert.ok(dispatches().every((d) => d.idempotencyKey === "hb-leader-worker-101" && d.conflict === "overwrite"));
  assert.deepEqual(fake.runQueued(), []);
  for (const [i, w] of ws.entries()) {
    const hb: number[] = ask(w, "state").heartbeats;
    assert.equal(hb.at(-1), 3, `worker-${i}`);
    assert.ok(hb.every((s, j) => j === 0 || hb[j - 1]! < s), `worker-${i}: ${hb}`);
  }
});

test("heartbeat_burst: worker-101's heartbeats wait for the leader's turn, then arrive in order", () => {
  const leader = spawn(L);
  spawn("Worker/worker-101");
  const r = ask(leader, "heartbeat_burst", { count: 50 });
  assert.equal(r.sent, 50);
  assert.equal(total(r), 50);
  // While the leader's turn waited for the worker, the burst piled up for the leader.
  assert.deepEqual(fake.queued.map((q) => [q.to, q.sender]), Array(50).fill([L, "Worker/worker-101"]));
  assert.ok(dispatches().every((d) =>
    d.targets.length === 1 && d.targets[0] === L && d.idempotencyKey === "hb-leader-worker-101" && d.conflict === "overwrite"));
  assert.deepEqual(fake.runQueued(), []);
  const seqs: number[] = ask(leader, "heartbeats").seqs;
  assert.ok(seqs.every((s, i) => i === 0 || seqs[i - 1]! < s), String(seqs));
  assert.equal(seqs.at(-1), 50);
});

test("telemetry_test: fast path + fallback == count, fallback used, every seq once", () => {
  const leader = spawn(L);
  const collector = spawn(COLLECTOR);
  const full = new ResourceExhausted("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=1)", { retryAfterMs: 1 });
  // Two burst tells refused; two samples' asks fail, two different ways.
  fake.failOn({ op: "tell", to: COLLECTOR }, full, full);
  fake.failOn({ op: "ask", to: COLLECTOR }, full, new DeadlineExceeded("DEADLINE_EXCEEDED: call timed out"));
  const r = ask(leader, "telemetry_test", { count: 200 });
  assert.deepEqual(r, { count: 200, fast_path_success: 198, outbox_fallback: 2, burst_refused: 2 });
  assert.deepEqual(dispatches().map((d) => [d.targets, d.idempotencyKey]), [[[COLLECTOR], "tel-0"], [[COLLECTOR], "tel-1"]]);
  assert.deepEqual(fake.runQueued(), []);
  const st = ask(collector, "state");
  assert.deepEqual([...st.telemetry].sort((a, b) => a - b), range(200));
  assert.equal(st.bursts, 20 * 6 - r.burst_refused);
});

test("firmware_rollout: every device gets 0..19 in order", () => {
  const leader = spawn(L);
  const devices = range(10).map((d) => spawn(`Device/dev-${d}`));
  const r = ask(leader, "firmware_rollout", { devices: 10, count: 20 });
  assert.deepEqual([r.targets, r.messages, total(r)], [10, 200, 200]);
  assert.ok(dispatches().every((d, k) => d.mode === "call" && d.idempotencyKey === `fw-${k}`));
  assert.deepEqual(fake.runQueued(), []);
  for (const d of devices) assert.deepEqual(ask(d, "state").firmware, range(20));
});

test("firmware_rollout offline: nothing delivered, devices ask to come back later", () => {
  const leader = spawn(L);
  const devices = range(10).map((d) => spawn(`Device/dev-${d}`, { online: false }));
  // Every call-mode attempt fails: the host keeps all 200 for the relay.
  fake.dispatchResult = (req) => times(req.targets.length, "queued-refused");
  const r = ask(leader, "firmware_rollout", { devices: 10, count: 20 });
  assert.deepEqual([r.delivered, r.queued], [0, 200]);
  assert.equal(fake.queued.length, 200);
  const failed = fake.runQueued();
  assert.equal(failed.length, 200);
  assert.ok(failed.every(({ error }) => error instanceof ResourceExhausted && error.retryAfterMs === 1000
    && error.message === "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)"));
  for (const d of devices) assert.deepEqual(ask(d, "state").firmware, []);
});

test("poison: the worker fails it with its error; after fix a replay records it once", () => {
  const leader = spawn(L);
  const worker = spawn("Worker/poison");
  fake.dispatchResult = ["queued-failed"];
  assert.deepEqual(ask(leader, "poison"), { delivered: 0, deduplicated: 0, queued: 1, dead_lettered: 0 });
  const [d] = dispatches();
  assert.deepEqual([d?.targets, d?.mode, d?.idempotencyKey], [["Worker/poison"], "call", "poison-1"]);
  const [failed, ...rest] = fake.runQueued();
  assert.deepEqual(rest, []);
  assert.equal(failed?.to, "Worker/poison");
  assert.ok(failed?.error instanceof InvalidArgument);
  assert.equal(failed.error.message, "INVALID_ARGUMENT: malformed task");
  ask(worker, "fix");
  for (let i = 0; i < 2; i++) fake.handle(worker, failed.msgType, failed.payload, { sender: "job-queue-leader" }); // the DLQ replay, twice
  assert.deepEqual(ask(worker, "state").tasks, { poison: 1 });
});

test("unknown roles and messages are INVALID_ARGUMENT guest errors, not traps", () => {
  assert.throws(() => new JobQueue().init('{"role":"janitor"}'), InvalidArgument);
  assert.throws(() => fake.handle(spawn(L), "nope"),
    (e: unknown) => e instanceof InvalidArgument && /does not handle/.test(e.message));
  assert.throws(() => fake.handle(spawn("Worker/x"), "dispatch", { nothing: 1 }), InvalidArgument);
});
