// Unit tests of the TypeScript SDK against a fake host (run: npm test).
import { test, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import {
  DeadlineExceeded, Envelope, InvalidArgument, NotFound, Overloaded, ResourceExhausted, SluiceError,
  Unavailable, Internal, decodeUtf8, dispatchResultOf, encodeUtf8, fromWit, host, register, toWit, abort,
  Abort,
} from "../sdk/index.ts";
import { decodeUtf8Js, encodeUtf8Js } from "../sdk/utf8.ts";
import { FakeHost } from "../sdk/testing/index.ts";
import { setImports } from "../sdk/testing/imports.ts";

// The SDK tests' own answers; a user's tests get FakeHost's defaults.
let fake: FakeHost;
beforeEach(() => {
  fake = new FakeHost({
    selfId: "Echo/1", nowMs: 1234, askReply: "pong", deliveryPath: "outbox", dispatchResult: ["delivered", "not-found", "queued-at-limit"],
  }).install();
});
afterEach(() => fake.uninstall());

test("full mailbox reaches guest code as ResourceExhausted with the exact message", () => {
  const msg = "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)";
  fake.failNext({ code: "resource-exhausted", message: msg, retryAfterMs: 12n, skipped: false });
  assert.throws(() => host.tell("Worker/1", "job", "x"), (e: unknown) => {
    assert.ok(e instanceof ResourceExhausted && e instanceof SluiceError);
    assert.equal(e.message, msg);
    assert.equal(String(e), msg);
    assert.equal(e.retryAfterMs, 12);
    assert.equal(e.type, "ResourceExhausted");
    return true;
  });
});

test("deadline keeps skipped, overload keeps scope/depth/limit", () => {
  fake.failNext({ code: "deadline-exceeded", message: "d", skipped: true });
  assert.throws(() => host.ask("S/1", "w", { n: 1 }, 10), (e: unknown) => e instanceof DeadlineExceeded && e.skipped);
  assert.deepEqual(fake.calls[0], { op: "ask", to: "S/1", msgType: "w", payload: encodeUtf8('{"n":1}'), timeoutMs: 10 });
  fake.failNext({ code: "overloaded", message: "o", skipped: false, overload: { scope: "host", depth: 9n, limit: 8n } });
  assert.throws(() => host.ask("A/1", "x"), (e: unknown) => {
    assert.ok(e instanceof Overloaded);
    assert.deepEqual(e.report(), {
      type: "Overloaded", code: "overloaded", message: "o", retry_after_ms: null, skipped: false,
      scope: "host", depth: 9, limit: 8,
    });
    return true;
  });
});

test("every code maps to its class", () => {
  const cases: [string, Function][] = [
    ["not-found", NotFound], ["invalid-argument", InvalidArgument], ["unavailable", Unavailable], ["internal", Internal],
  ];
  for (const [code, cls] of cases) {
    fake.failNext({ code: code as any, message: "m", skipped: false });
    assert.throws(() => host.bus.publish("a.b", "x"), (e: unknown) => e instanceof cls);
  }
});

test("dispatch has the seed's call shape and returns counts and outcomes in target order", () => {
  const res = host.outbox.dispatch("{}", "Leader/1", ["W/1", "W/2", "W/3"], encodeUtf8("hb"), "cast", "hb-key", "overwrite");
  assert.deepEqual([res.delivered, res.deduplicated, res.queued, res.deadLettered], [1, 0, 1, 1]);
  assert.deepEqual(res.outcomes, ["delivered", "not-found", "queued-at-limit"]);
  const req = fake.calls[0]?.request;
  assert.ok(req);
  assert.equal(req.conflict, "overwrite");
  assert.equal(req.idempotencyKey, "hb-key");
  assert.equal(req.msgType, "dispatch");
  assert.deepEqual(req.targets, ["W/1", "W/2", "W/3"]);
});

test("nowMs is a number, tellReliable a path", () => {
  assert.equal(host.nowMs(), 1234);
  assert.equal(host.outbox.tellReliable("A/1", "t", "x"), "outbox");
});

test("remind crosses as the WIT call (u64 delay, payload bytes); cancelReminder returns its bool", () => {
  // The installed fake's imports, with these two as they are called.
  const installed = setImports(null);
  assert.ok(installed);
  const seen: unknown[][] = [];
  setImports({ ...installed, remind: (...args) => void seen.push(args), cancelReminder: (name) => name === "yes" });
  try {
    host.outbox.remind("tick", 250, "tick", { n: 1 });
    host.outbox.remind("", 0, "once");
    assert.deepEqual(seen, [["tick", 250n, "tick", encodeUtf8('{"n":1}')], ["", 0n, "once", new Uint8Array(0)]]);
    assert.equal(host.outbox.cancelReminder("yes"), true);
    assert.equal(host.outbox.cancelReminder("no"), false);
  } finally {
    setImports(installed);
  }
});

test("FakeHost keeps reminders per actor and name: re-arming replaces, cancel is true once", () => {
  fake.advance(16); // nowMs 1250
  host.outbox.remind("tick", 250, "tick", { n: 1 });
  assert.deepEqual(fake.calls.at(-1),
    { op: "remind", to: "", msgType: "tick", payload: encodeUtf8('{"n":1}'), delayMs: 250, name: "tick" });
  assert.deepEqual(fake.reminders, [
    { actorId: "Echo/1", name: "tick", delayMs: 250, dueMs: 1500, msgType: "tick", payload: encodeUtf8('{"n":1}') },
  ]);
  host.outbox.remind("", 10, "once", "a");
  host.outbox.remind("", 10, "once", "b");
  host.outbox.remind("tick", 1000, "tick", { n: 2 });   // replaces the pending "tick", goes last
  assert.deepEqual(fake.reminders.map((r) => [r.name, r.delayMs, decodeUtf8(r.payload)]),
    [["", 10, "a"], ["", 10, "b"], ["tick", 1000, '{"n":2}']]);
  assert.equal(host.outbox.cancelReminder("tick"), true);
  assert.equal(host.outbox.cancelReminder("tick"), false);
  assert.equal(host.outbox.cancelReminder(""), false, "an unnamed reminder cannot be cancelled");
  assert.deepEqual(fake.reminders.map((r) => r.payload), [encodeUtf8("a"), encodeUtf8("b")]);
  assert.deepEqual(fake.calls.map((c) => [c.op, c.name]), [
    ["remind", "tick"], ["remind", ""], ["remind", ""], ["remind", "tick"],
    ["cancelReminder", "tick"], ["cancelReminder", "tick"], ["cancelReminder", ""],
  ]);
  // A routed actor's reminders are its own: the same name does not replace or cancel another's.
  const timer = { handle: (env: Envelope) => (env.msgType === "arm" ? host.outbox.remind("a", 5, "fire") : host.outbox.cancelReminder("a")) };
  fake.route("Timer/1", timer);
  host.outbox.remind("a", 5, "mine");
  fake.handle(timer, "arm");
  assert.deepEqual(fake.reminders.slice(2).map((r) => [r.actorId, r.name, r.msgType]),
    [["Echo/1", "a", "mine"], ["Timer/1", "a", "fire"]]);
  assert.equal(fake.text(timer, "cancel"), "true");
  assert.equal(fake.text(timer, "cancel"), "false");
  assert.deepEqual(fake.reminders.slice(2).map((r) => r.actorId), ["Echo/1"]);
  assert.equal(fake.calls.at(-1)?.by, "Timer/1");
});

test("FakeHost fails remind and cancelReminder as scripted, typed; a failed remind keeps nothing", () => {
  fake.failNext({ code: "resource-exhausted", message: "RESOURCE_EXHAUSTED: 100 reminders pending", skipped: false });
  assert.throws(() => host.outbox.remind("tick", 5, "tick"),
    (e: unknown) => e instanceof ResourceExhausted && e.message === "RESOURCE_EXHAUSTED: 100 reminders pending");
  assert.deepEqual(fake.reminders, []);
  host.outbox.remind("tick", 5, "tick");
  fake.failOn({ op: "cancelReminder" }, new Unavailable("UNAVAILABLE: no outbox"));
  fake.failOn({ op: "remind" }, new InvalidArgument("INVALID_ARGUMENT: name over 256 bytes"));
  assert.throws(() => host.outbox.cancelReminder("tick"), Unavailable);
  assert.throws(() => host.outbox.remind("x".repeat(257), 5, "tick"), InvalidArgument);
  assert.equal(host.outbox.cancelReminder("tick"), true);
  assert.deepEqual(fake.calls.map((c) => c.op), ["remind", "remind", "cancelReminder", "remind", "cancelReminder"]);
});

test("a SluiceError thrown by handle becomes err(actor-error), a plain Error err(internal)", () => {
  const exp = register({
    handle(env: Envelope) {
      if (env.msgType === "fail") throw new InvalidArgument("bad input");
      if (env.msgType === "crash") throw new Error("boom");
      return { got: env.json(), sender: env.sender };
    },
  });
  const env = (msgType: string) => ({ msgType, payload: encodeUtf8('{"a":1}'), principal: "p", sender: "B/1" });
  assert.equal(decodeUtf8(exp.handle(env("x"))), '{"got":{"a":1},"sender":"B/1"}');
  try {
    exp.handle(env("fail"));
    assert.fail("no throw");
  } catch (thrown: any) {
    assert.ok(!(thrown instanceof Error), "must not be an Error (componentize-js would trap)");
    assert.equal(thrown.payload.code, "invalid-argument");
    assert.equal(thrown.payload.message, "bad input");
    assert.equal(thrown.code, "invalid-argument");
  }
  // A plain Error is INTERNAL with its message, as a value: the instance (and its state) lives.
  try {
    exp.handle(env("crash"));
    assert.fail("no throw");
  } catch (thrown: any) {
    assert.ok(!(thrown instanceof Error), "must not be an Error (componentize-js would trap)");
    assert.deepEqual(thrown.payload, { code: "internal", message: "INTERNAL: boom", skipped: false });
  }
});

test("a plain throw keeps state; abort() and out-of-memory still trap", () => {
  let n = 0;
  const exp = register({
    handle(env: Envelope) {
      n++;
      if (env.msgType === "throw-string") throw "just a string";
      if (env.msgType === "abort") abort("on purpose");
      if (env.msgType === "oom") throw new RangeError("out of memory");
      if (env.msgType === "oom-bare") throw "out of memory";
      return { n };
    },
  });
  const env = (msgType: string) => ({ msgType, payload: new Uint8Array(), principal: "p" });
  assert.throws(() => exp.handle(env("throw-string")), (t: any) => t.payload?.message === "INTERNAL: just a string");
  assert.throws(() => exp.handle(env("abort")), (t: unknown) => t instanceof Abort && t.message === "on purpose");
  assert.throws(() => exp.handle(env("oom")), RangeError);
  assert.throws(() => exp.handle(env("oom-bare")), (t: unknown) => t === "out of memory");
  assert.equal(decodeUtf8(exp.handle(env("x"))), '{"n":5}');
});

test("log takes a checked level", () => {
  host.log("hello");
  host.log("warn", "careful");
  assert.throws(() => host.log("loud", "x"), (e: unknown) => e instanceof InvalidArgument
    && e.message === 'INVALID_ARGUMENT: unknown log level "loud"');
  assert.deepEqual(fake.logs, [["info", "hello"], ["warn", "careful"]]);
  assert.deepEqual(fake.calls, []);
});

test("error mapping is lossless both ways", () => {
  const recs = [
    { code: "overloaded", message: "o", skipped: false, overload: { scope: "actor", depth: 3n, limit: 2n } },
    { code: "resource-exhausted", message: "r", retryAfterMs: 1n, skipped: false },
    { code: "deadline-exceeded", message: "d", skipped: true },
  ];
  for (const r of recs) assert.deepEqual(toWit(fromWit(r as any)), r);
});

test("encodeUtf8/decodeUtf8 round-trip text (the codec itself: utf8.test.ts)", () => {
  const s = "héllo ✓ 𝄞 \u0000 end";
  assert.deepEqual(encodeUtf8Js(s), new TextEncoder().encode(s));
  assert.equal(decodeUtf8Js(new TextEncoder().encode(s)), s);
  assert.equal(decodeUtf8(encodeUtf8(s)), s);
});

test("host.with({deadlineMs}) tightens ask; bad budgets throw InvalidArgument before sending", () => {
  host.with({ deadlineMs: 250 }).ask("W/1", "process", "x");
  assert.deepEqual(fake.calls.at(-1), { op: "ask", to: "W/1", msgType: "process", payload: encodeUtf8("x"), timeoutMs: 250 });
  host.with({ deadlineMs: 250 }).ask("W/1", "process", "x", 99.2);
  assert.equal(fake.calls.at(-1)?.timeoutMs, 100);
  host.with({ deadlineMs: 250 }).ask("W/1", "process", "x", 5000);
  assert.equal(fake.calls.at(-1)?.timeoutMs, 250);
  const sent = fake.calls.length;
  for (const bad of [0, -5, NaN, Infinity, "250", null, undefined]) {
    assert.throws(() => host.with({ deadlineMs: bad as number }).ask("W/1", "p"),
      (e: unknown) => e instanceof InvalidArgument && /positive finite/.test(e.message));
    if (bad !== undefined) {
      assert.throws(() => host.ask("W/1", "p", "", bad as number), (e: unknown) => e instanceof InvalidArgument);
    }
  }
  assert.equal(fake.calls.length, sent, "nothing was sent for an invalid budget");
});

test("FakeHost.handle runs a turn as the caller sees it; a plain throw arrives as Internal", () => {
  const actor = {
    handle(env: Envelope) {
      if (env.msgType === "boom") throw new RangeError("nope");
      host.log("info", `from ${env.sender}`);
      return { me: host.selfId(), at: host.nowMs(), got: env.json() };
    },
  };
  fake.advance(6);
  assert.equal(fake.text(actor, "j", { a: 1 }, { sender: "B/1" }), '{"me":"Echo/1","at":1240,"got":{"a":1}}');
  assert.deepEqual(fake.logs, [["info", "from B/1"]]);
  assert.throws(() => fake.handle(actor, "boom"), (e: unknown) =>
    e instanceof Internal && e.message === "INTERNAL: nope" && (e as { cause?: unknown }).cause instanceof RangeError);
});

test("FakeHost scripted errors arrive typed, one call each; uninstalled, the imports refuse", () => {
  const f = new FakeHost({ askReply: (to, _t, p) => `${to}:${decodeUtf8(p)}` });
  fake.uninstall();
  f.install();
  try {
    f.failNext(new Overloaded("OVERLOADED: busy", { scope: "actor", depth: 7, limit: 5 }),
      new ResourceExhausted("RESOURCE_EXHAUSTED: full", { retryAfterMs: 3 }));
    assert.throws(() => host.tell("W/1", "job", "1"), (e: unknown) => e instanceof Overloaded && e.depth === 7);
    assert.throws(() => host.outbox.tellReliable("W/1", "job", "2"),
      (e: unknown) => e instanceof ResourceExhausted && e.retryAfterMs === 3);
    assert.deepEqual(host.outbox.dispatch("", "D/1", ["W/1", "W/2"], "3"), dispatchResultOf(["delivered", "delivered"]));
    assert.equal(decodeUtf8(host.ask("W/7", "p", "!")), "W/7:!");
    host.schedule(50, "tick", "t");
    assert.deepEqual(f.calls.map((c) => c.op), ["tell", "tellReliable", "dispatch", "ask", "schedule"]);
    assert.equal(f.calls.at(-1)?.delayMs, 50);
  } finally {
    f.uninstall();
  }
  assert.throws(() => host.nowMs(), /no fake host installed/);
  fake.install();
});

test("FakeHost.failOn fails only the calls it names, in script order", () => {
  const full = new ResourceExhausted("RESOURCE_EXHAUSTED: full", { retryAfterMs: 1 });
  const late = new DeadlineExceeded("DEADLINE_EXCEEDED: call timed out");
  const f = new FakeHost();
  fake.uninstall();
  f.install();
  try {
    f.failOn({ op: "tell", to: "C/1" }, full, full);
    f.failOn({ op: "ask" }, late);
    f.failOn({ to: "W/2" }, full); // a dispatch naming W/2 among its targets
    assert.throws(() => f.failOn({}, full), /op or to/);
    assert.equal(host.tell("C/2", "x"), "queued");
    assert.throws(() => host.tell("C/1", "x"), ResourceExhausted);
    assert.equal(host.outbox.dispatch("", "D/1", ["W/1"], "").delivered, 1);
    assert.throws(() => host.outbox.dispatch("", "D/1", ["W/1", "W/2"], ""), ResourceExhausted);
    assert.throws(() => host.tell("C/1", "x"), ResourceExhausted);
    assert.equal(host.tell("C/1", "x"), "queued");
    assert.throws(() => host.ask("C/1", "x"), DeadlineExceeded);
    assert.equal(decodeUtf8(host.ask("C/1", "x")), "{}");
    assert.equal(f.calls.length, 8, "a failed call is recorded too");
  } finally {
    f.uninstall();
    fake.install();
  }
});

test("FakeHost dispatchResult and clock can be functions of the call", () => {
  fake.dispatchResult = (req) => req.targets.map((t) => (t.startsWith("Nope/") ? "not-found" : "delivered"));
  fake.tickMs = 2;
  const res = host.outbox.dispatch("", "D/1", ["W/1", "Nope/2", "W/3"], "");
  assert.deepEqual([res.delivered, res.deadLettered, res.outcomes], [2, 1, ["delivered", "not-found", "delivered"]]);
  assert.deepEqual([host.nowMs(), host.nowMs(), fake.nowMs], [1234, 1236, 1238]);
  fake.dispatchResult = ["queued-refused"];
  assert.deepEqual(host.outbox.dispatch("", "D/1", ["W/1"], ""),
    { delivered: 0, deduplicated: 0, queued: 1, deadLettered: 0, outcomes: ["queued-refused"] });
});

test("FakeHost.route runs a routed ask at once and queues tells and dispatches for runQueued", () => {
  const got: [string | null, string, unknown][] = [];
  const worker = {
    handle(env: Envelope) {
      got.push([env.sender, env.msgType, env.json()]);
      if (env.msgType === "bad") throw new InvalidArgument("INVALID_ARGUMENT: bad");
      if (env.msgType === "report") host.tell("Leader/1", "done", { by: host.selfId() });
      return { me: host.selfId(), deadline: env.deadlineMs };
    },
  };
  const done: string[] = [];
  const leader = {
    handle(env: Envelope) {
      if (env.msgType === "done") {
        done.push(env.json().by);
        return null;
      }
      const reply = host.ask("Worker/1", "work", { n: 1 }, 300);
      host.tell("Worker/1", "report", {});
      host.outbox.dispatch("", "Leader/1", ["Worker/1", "Elsewhere/1"], '{"t":1}', "cast", "k", "append");
      assert.throws(() => host.ask("Worker/1", "bad", {}),
        (e: unknown) => e instanceof InvalidArgument && e.message === "INVALID_ARGUMENT: bad");
      return reply;
    },
  };
  fake.route("Worker/1", worker);
  fake.route("Leader/1", leader);
  assert.equal(fake.text(leader, "start"), '{"me":"Worker/1","deadline":300}');
  assert.deepEqual(got, [["Leader/1", "work", { n: 1 }], ["Leader/1", "bad", {}]]);
  assert.deepEqual(fake.queued, [
    { to: "Worker/1", msgType: "report", payload: encodeUtf8("{}"), sender: "Leader/1" },
    { to: "Worker/1", msgType: "dispatch", payload: encodeUtf8('{"t":1}'), sender: "Leader/1" },
  ]);
  assert.deepEqual(fake.calls.map((c) => c.by), Array(4).fill("Leader/1"));
  assert.deepEqual(fake.runQueued(), []);
  assert.deepEqual(got.slice(2), [["Leader/1", "report", {}], ["Leader/1", "dispatch", { t: 1 }]]);
  assert.deepEqual(done, ["Worker/1"]);
  assert.deepEqual(fake.calls.at(-1),
    { op: "tell", to: "Leader/1", msgType: "done", payload: encodeUtf8('{"by":"Worker/1"}'), by: "Worker/1" });
  // A queued turn's error comes back from runQueued; an ask cycle is DEADLINE_EXCEEDED.
  host.tell("Worker/1", "bad", {});
  const [failed, ...rest] = fake.runQueued();
  assert.deepEqual(rest, []);
  assert.deepEqual([failed?.to, failed?.msgType, failed?.error.message], ["Worker/1", "bad", "INVALID_ARGUMENT: bad"]);
  assert.ok(failed?.error instanceof InvalidArgument);
  fake.route("Cycle/1", { handle: () => host.ask("Cycle/1", "again") });
  assert.throws(() => host.ask("Cycle/1", "go"),
    (e: unknown) => e instanceof DeadlineExceeded && /in a turn already/.test(e.message));
});
