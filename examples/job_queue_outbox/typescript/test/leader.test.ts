// The leader's scenarios against an in-process fake host (run: node test/run.mjs).
// Numbers differ from a real host (no concurrency, no timing); the invariants must not.
import { test, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { world } from "./fake-world.ts";

const L = "JobQueueLeader/main";
const workers = (n: number) => Array.from({ length: n }, (_, i) => `Worker/worker-${i}`);
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

beforeEach(() => world.reset());

test("thundering_herd: accepted + rejected == targets, redelivery absorbed, each task once", () => {
  const r = world.ask(L, "thundering_herd", { workers: 100, task_id: "herd-1" });
  assert.equal(r.targets, 100);
  assert.equal(r.accepted + r.rejected, 100);
  assert.ok(r.rejected > 0, "the limiter leaves some for the relay");
  assert.deepEqual(r.redelivery, { accepted: 100, rejected: 0 }, "every target is a duplicate");
  assert.equal(typeof r.wall_ms, "number");
  world.drain();
  for (const w of workers(100)) assert.deepEqual(world.ask(w, "state").tasks, { "herd-1": 1 }, w);
});

test("config_wave_deploy: every worker gets V, every download served once, C > 0", () => {
  const r = world.ask(L, "config_wave_deploy", { workers: 100, wave_size: 20, version: "2.1.0" });
  assert.deepEqual(r.waves.map((w: any) => [w.wave, w.targets]), range(5).map((i) => [i, 20]));
  assert.equal(r.total_accepted + r.total_rejected, 100);
  assert.ok(r.config_server_rejected > 0, "the two-slot config servers refused");
  world.drain();
  for (const w of workers(100)) assert.equal(world.ask(w, "state").config_version, "2.1.0");
  const served = [...world.ask("ConfigServer/cs-0", "state").served, ...world.ask("ConfigServer/cs-1", "state").served];
  assert.deepEqual(served.sort(), workers(100).sort());
  assert.deepEqual(world.dead(), []);
});

test("send_heartbeat: seq counts from 1, workers end with the last one, never backwards", () => {
  for (let s = 1; s <= 3; s++) {
    const r = world.ask(L, "send_heartbeat", { workers: 30 });
    assert.equal(r.seq, s);
    assert.equal(r.accepted + r.rejected, 30);
  }
  world.drain();
  for (const w of workers(30)) {
    const hb: number[] = world.ask(w, "state").heartbeats;
    assert.equal(hb.at(-1), 3, w);
    assert.ok(hb.every((s, i) => i === 0 || hb[i - 1] < s), `${w}: ${hb}`);
  }
});

test("heartbeat_burst: the full leader mailbox coalesces the burst to 1..8 then 50", () => {
  const r = world.ask(L, "heartbeat_burst", { count: 50 });
  assert.equal(r.sent, 50);
  assert.equal(r.accepted + r.rejected, 50);
  world.drain();
  const seqs: number[] = world.ask(L, "heartbeats").seqs;
  assert.ok(seqs.length >= 1 && seqs.length <= 10, String(seqs));
  assert.ok(seqs.every((s, i) => i === 0 || seqs[i - 1] < s), String(seqs));
  assert.equal(seqs.at(-1), 50);
});

test("telemetry_test: fast path + fallback == count, fallback used, every seq once", () => {
  const r = world.ask(L, "telemetry_test", { count: 200 });
  assert.equal(r.count, 200);
  assert.equal(r.fast_path_success + r.outbox_fallback, 200);
  assert.ok(r.outbox_fallback > 0 && r.fast_path_success > 0, JSON.stringify(r));
  assert.ok(r.burst_refused > 0);
  world.drain();
  const st = world.ask("TelemetryCollector/main", "state");
  assert.deepEqual([...st.telemetry].sort((a, b) => a - b), range(200));
  assert.equal(st.bursts, 20 * 6 - r.burst_refused);
});

test("firmware_rollout: every device gets 0..19 in order", () => {
  const r = world.ask(L, "firmware_rollout", { devices: 10, count: 20 });
  assert.deepEqual([r.targets, r.messages, r.accepted + r.rejected], [10, 200, 200]);
  world.drain();
  for (let d = 0; d < 10; d++) assert.deepEqual(world.ask(`Device/dev-${d}`, "state").firmware, range(20));
});

test("firmware_rollout offline: nothing delivered, devices ask to come back later", () => {
  world.reset({ Device: { online: false } });
  const r = world.ask(L, "firmware_rollout", { devices: 10, count: 20 });
  assert.deepEqual([r.accepted, r.rejected], [0, 200]);
  assert.equal(world.pending().length, 200);
  world.drain();
  assert.ok(world.dead().every((row) => row.lastError === "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)"));
});

test("poison: dead after 5 attempts with the worker's error; after fix a replay records it once", () => {
  assert.deepEqual(world.ask(L, "poison"), { accepted: 0, rejected: 1 });
  world.drain();
  const [dead] = world.dead();
  assert.equal(dead.receiver, "Worker/poison");
  assert.equal(dead.attempts, 5);
  assert.equal(dead.lastError, "INVALID_ARGUMENT: malformed task");
  world.ask("Worker/poison", "fix");
  Object.assign(dead, { state: "pending", attempts: 0 }); // the DLQ replay
  world.drain();
  assert.deepEqual(world.ask("Worker/poison", "state").tasks, { poison: 1 });
});

test("unknown roles and messages are INVALID_ARGUMENT guest errors, not traps", () => {
  assert.throws(() => world.ask(L, "nope"), (e: any) => e.code === "invalid-argument" && /does not handle/.test(e.message));
  assert.throws(() => world.ask("Worker/x", "dispatch", { nothing: 1 }), (e: any) => e.code === "invalid-argument");
});
