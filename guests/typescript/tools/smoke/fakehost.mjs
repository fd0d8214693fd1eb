// The fake Sluice host the smoke runner maps the component's `sluice:actor/*` imports to.
// Targets named full/late/busy/missing fail the way a real host would.
export const calls = [];
function err(rec) { const e = new Error(rec.message); Object.defineProperty(e, "payload", { value: rec, enumerable: true }); return e; }
function fail(to) {
  if (to === "full") throw err({ code: "resource-exhausted", message: "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)", retryAfterMs: 12n, skipped: false });
  if (to === "late") throw err({ code: "deadline-exceeded", message: "DEADLINE_EXCEEDED: call timed out (skipped)", skipped: true });
  if (to === "busy") throw err({ code: "overloaded", message: "OVERLOADED: host (depth=9, limit=8)", skipped: false, overload: { scope: "host", depth: 9n, limit: 8n } });
  if (to === "missing") throw err({ code: "not-found", message: "NOT_FOUND: no actor type missing", skipped: false });
}
export const host = {
  tell(to, t, p) { calls.push(["tell", to]); fail(to); return "queued"; },
  ask(to, t, p, ms) { fail(to); return p; },
  schedule(d, t, p) {},
  selfId() { return "Echo/1"; },
  nowMs() { return 1234n; },
  log(l, m) { calls.push(["log", l, m]); },
};
const reminders = new Set();
export const outbox = {
  dispatch(req) {
    fail(req.targets[0]);
    // The first target delivered, the rest queued at the limit: the list lifts in order.
    const outcomes = req.targets.map((_, i) => (i === 0 ? "delivered" : "queued-at-limit"));
    return { delivered: 1, deduplicated: 0, queued: outcomes.length - 1, deadLettered: 0, outcomes };
  },
  tellReliable(to, t, p) { fail(to); return "direct"; },
  // Reminders by name (the fake keeps only the names: one pending per name); a name of "full"
  // fails the way a host at max_reminders_per_actor does.
  remind(name, d, t, p) {
    if (name === "full") throw err({ code: "resource-exhausted", message: "RESOURCE_EXHAUSTED: 100 reminders pending (max_reminders_per_actor=100)", skipped: false });
    if (name !== "") reminders.add(name);
  },
  cancelReminder(name) { return reminders.delete(name); },
};
export const bus = { publish(topic, p) { fail(topic); } };
// `turns.next` over a queue the smoke runner fills: each call records the ended turn's result
// (none on the first) and hands out the next envelope, or none when the queue is empty.
export const batchQueue = [];
export const batchResults = [];
export const turns = {
  next(done) {
    if (done !== undefined) batchResults.push(done);
    return batchQueue.shift();
  },
};
