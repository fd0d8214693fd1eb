// Unit tests of the actor in Node's own test runner, without a host: `npm test`.
// `FakeHost` (@sluice/guest/testing) stands in for the host: it records the host calls the
// actor makes (`fake.calls`, `fake.logs`), answers them from its fields, and fails the next one
// on demand (`fake.failNext`).
import { afterEach, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgument, ResourceExhausted, encodeUtf8 } from "@sluice/guest";
import { FakeHost } from "@sluice/guest/testing";
import { MyActor } from "./app.ts";

let fake: FakeHost;
beforeEach(() => {
  fake = new FakeHost({ nowMs: 42 }).install();
});
afterEach(() => fake.uninstall());

test("ping counts and reads the host clock", () => {
  const actor = new MyActor();
  assert.equal(fake.text(actor, "ping"), '{"pong":1,"at":42,"me":"MyActor/1"}');
  assert.equal(fake.text(actor, "ping"), '{"pong":2,"at":42,"me":"MyActor/1"}');
});

test("forward asks the worker and reports a full mailbox", () => {
  const actor = new MyActor();
  fake.askReply = '{"done":true}';
  assert.equal(fake.text(actor, "forward", '{"job":1}'), '{"done":true}');
  assert.deepEqual(fake.calls, [
    { op: "ask", to: "Worker/1", msgType: "process", payload: encodeUtf8('{"job":1}'), timeoutMs: 2000 },
  ]);

  fake.failNext(new ResourceExhausted("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=7)", { retryAfterMs: 7 }));
  assert.equal(fake.text(actor, "forward", "{}"), '{"busy":true,"retry_after_ms":7}');
});

test("unknown types are invalid-argument", () => {
  assert.throws(() => fake.handle(new MyActor(), "nope"), (e: unknown) =>
    e instanceof InvalidArgument && e.message === "INVALID_ARGUMENT: unknown msg-type nope");
});
