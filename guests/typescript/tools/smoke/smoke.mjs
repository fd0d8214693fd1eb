#!/usr/bin/env node
// Smoke-runs a built TESTKIT `echo` component (any language) without a Sluice host: jco
// transpiles it to JS + core wasm, its `sluice:actor/*` imports are mapped to fakehost.mjs,
// and the TESTKIT echo table is driven through the real component, compared exactly.
//
//   node --experimental-wasm-extended-const tools/smoke/smoke.mjs COMPONENT.wasm [--guest G]
//
// G is the TESTKIT guest the component is: echo (default), slow, crash or flood.
//
// (Node 20 needs the flag for the extended-const expressions Python/QuickJS components use.)
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const SDK = resolve(HERE, "../..");
const argv = process.argv.slice(2);
const gi = argv.indexOf("--guest");
const guest = gi >= 0 ? argv.splice(gi, 2)[1] : "echo";
const si = argv.indexOf("--soak");
const soak = si >= 0 ? Number(argv.splice(si, 2)[1]) : 0;
const component = resolve(argv[0] ?? "");
const name = basename(component, ".wasm").replace(/[^a-zA-Z0-9_-]/g, "_");
// Inside guests/typescript so the transpiled module resolves preview2-shim from node_modules.
// A fresh folder per run: parallel runs (e.g. cargo tests) must not share one.
mkdirSync(join(SDK, ".smoke"), { recursive: true });
const out = mkdtempSync(join(SDK, ".smoke", `${name}-`));
const fake = pathToFileURL(join(HERE, "fakehost.mjs")).href;
const map = (i) => ["--map", `sluice:actor/${i}@0.1.0=${fake}#${i}`];
const r = spawnSync(process.execPath, [
  "--import", join(SDK, "tools/preopen.mjs"), join(SDK, "node_modules/@bytecodealliance/jco/dist/jco.js"),
  "transpile", component, "-o", out, "--name", name, ...map("host"), ...map("outbox"), ...map("bus"), ...map("turns"),
], { stdio: ["ignore", "ignore", "inherit"] });
if (r.status !== 0) {
  rmSync(out, { recursive: true, force: true });
  process.exit(r.status ?? 1);
}

const { actor, batch } = await import(pathToFileURL(join(out, `${name}.js`)).href);
const te = new TextEncoder();
const td = new TextDecoder();
const env = (msgType, payload = "") =>
  ({ sender: "Caller/1", msgType, payload: te.encode(payload), principal: "alice", deadlineMs: 500n });
const err = (type, code, message, extra = {}) => JSON.stringify({ ok: false, error: {
  type, code, message, retry_after_ms: null, skipped: false, scope: null, depth: null, limit: null, ...extra } });
const call = (t, p) => {
  try {
    return td.decode(actor.handle(env(t, p)));
  } catch (e) {
    const v = e.payload ?? String(e);
    return "ERR " + JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? Number(x) : x));
  }
};
const echoCases = [
  ["echo", "hello", "hello"],
  ["anything-else", "\u00e9\u2713", "\u00e9\u2713"],
  ["init_config", "", '{"k":1}'],
  ["whoami", "", '{"self_id":"Echo/1","principal":"alice","sender":"Caller/1","deadline_ms":500}'],
  ["now", "", '{"now_ms":1234}'],
  ["fail", "", 'ERR {"code":"invalid-argument","message":"bad input","skipped":false}'],
  ["log", "hi", '{"ok":true}'],
  ["record", "a", '{"count":1}'],
  ["record", "b", '{"count":2}'],
  ["recorded", "", '{"items":["a","b"],"envelopes":[{"msg_type":"record","principal":"alice","sender":"Caller/1"},{"msg_type":"record","principal":"alice","sender":"Caller/1"}]}'],
  ["tell", '{"to":"W/1","msg_type":"x","payload":"p"}', '{"ok":true,"receipt":"queued"}'],
  ["tell", '{"to":"full","msg_type":"x","payload":"p"}',
    err("ResourceExhausted", "resource-exhausted", "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)", { retry_after_ms: 12 })],
  ["ask", '{"to":"W/1","msg_type":"x","payload":"pp","timeout_ms":100}', '{"ok":true,"reply":"pp"}'],
  ["ask", '{"to":"late","msg_type":"x","payload":"pp","timeout_ms":100}',
    err("DeadlineExceeded", "deadline-exceeded", "DEADLINE_EXCEEDED: call timed out (skipped)", { skipped: true })],
  ["ask", '{"to":"busy","msg_type":"x","payload":"pp","timeout_ms":100}',
    err("Overloaded", "overloaded", "OVERLOADED: host (depth=9, limit=8)", { scope: "host", depth: 9, limit: 8 })],
  ["ask", '{"to":"missing","msg_type":"x","payload":"pp","timeout_ms":100}',
    err("NotFound", "not-found", "NOT_FOUND: no actor type missing")],
  ["schedule", '{"delay_ms":5,"msg_type":"x","payload":"p"}', '{"ok":true}'],
  ["tell_reliable", '{"to":"W/1","msg_type":"x","payload":"p"}', '{"ok":true,"path":"direct"}'],
  ["remind", '{"name":"r1","delay_ms":5,"msg_type":"x","payload":"p"}', '{"ok":true}'],
  ["remind", '{"name":"","delay_ms":5,"msg_type":"x","payload":"p"}', '{"ok":true}'],
  ["cancel_reminder", '{"name":"r1"}', '{"ok":true,"cancelled":true}'],
  ["cancel_reminder", '{"name":"r1"}', '{"ok":true,"cancelled":false}'],
  ["remind", '{"name":"full","delay_ms":5,"msg_type":"x","payload":"p"}',
    err("ResourceExhausted", "resource-exhausted", "RESOURCE_EXHAUSTED: 100 reminders pending (max_reminders_per_actor=100)")],
  ["dispatch", '{"targets":["W/1","W/2"],"msg_type":"job","payload":"p","mode":"cast","idempotency_key":"k","conflict":"overwrite"}',
    '{"ok":true,"delivered":1,"deduplicated":0,"queued":1,"dead_lettered":0,"outcomes":["delivered","queued-at-limit"]}'],
  ["publish", '{"topic":"a.b","payload":"p"}', '{"ok":true}'],
];

const trap = "TRAP";
const cases = {
  echo: echoCases,
  slow: [["ok", "", "alive"], ["wait", "30", "30"], ["wait", "", ""]],
  crash: [["ok", "", "alive"], ["boom", "", trap], ["ok", "", trap /* instance is poisoned after a trap */]],
  flood: [
    ["flood", '{"to":"W/1","msg_type":"x","count":5}', '{"queued":5,"displaced":0,"dropped":0,"refused":0,"first_error":null,"first_error_type":null}'],
    ["flood", '{"to":"full","msg_type":"x","count":3}', '{"queued":0,"displaced":0,"dropped":0,"refused":3,"first_error":"RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)","first_error_type":"ResourceExhausted"}'],
  ],
}[guest];
if (!cases) throw new Error(`unknown guest ${guest}`);

actor.init('{"k":1}');
let passed = 0;
let failed = 0;
for (const [t, p, want] of cases) {
  const t0 = performance.now();
  let got = call(t, p);
  if (want === trap && got.startsWith("ERR ") && !got.startsWith("ERR {")) got = trap; // a wasm trap, not err(...)
  if (guest === "slow" && t === "wait" && performance.now() - t0 < Number(p || 100)) got += " (returned too early)";
  // Compare JSON structurally (key order may differ between languages).
  const same = got === want || (() => {
    try { return JSON.stringify(sortKeys(JSON.parse(got))) === JSON.stringify(sortKeys(JSON.parse(want))); } catch { return false; }
  })();
  if (same) passed++;
  else { failed++; console.log(`FAIL ${t} ${p}\n  want ${want}\n  got  ${got}`); }
}
function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}
if (guest === "echo") {
  // Batched turns: `batch.run` pulls three queued messages through `turns.next` and ends each
  // turn with what `handle` alone returns for it, an error as an `err`, in order.
  const fh = await import(fake);
  fh.batchQueue.push(env("echo", "a"), env("fail"), env("echo", "b"));
  let got;
  try {
    batch.run();
    got = JSON.stringify(fh.batchResults.map((r) => (r.tag === "ok" ? td.decode(r.val) : `${r.tag} ${r.val.code}`)));
  } catch (e) {
    got = `threw ${e}`;
  }
  const want = '["a","err invalid-argument","b"]';
  if (got === want && fh.batchQueue.length === 0) passed++;
  else { failed++; console.log(`FAIL batch.run\n  want ${want}\n  got  ${got}`); }
}
if (soak > 0) {
  // Mixed echo / ask / tell turns with 64-byte payloads: each lowers memory into the guest
  // through cabi_realloc, which is where a GC used to start and trap (Go, stock runtime).
  const p64 = "x".repeat(64);
  const ask = JSON.stringify({ to: "W/1", msg_type: "x", payload: p64, timeout_ms: 100 });
  const tell = JSON.stringify({ to: "W/1", msg_type: "x", payload: p64 });
  const t0 = performance.now();
  let i = 0;
  try {
    for (; i < soak; i++) {
      const k = i % 3;
      const r = k === 0 ? actor.handle(env("echo", p64)) : actor.handle(env(k === 1 ? "ask" : "tell", k === 1 ? ask : tell));
      if (k === 0 && r.length !== 64) throw new Error(`bad echo reply at ${i}`);
    }
    passed++;
    console.log(`soak: ${soak} turns in ${((performance.now() - t0) / 1000).toFixed(1)} s, no trap`);
  } catch (e) {
    failed++;
    console.log(`soak: FAILED at turn ${i}: ${e}`);
  }
}
rmSync(out, { recursive: true, force: true });
console.log(`${basename(component)}: ${passed} passed, ${failed} failed`);
process.exitCode = failed ? 1 : 0;
