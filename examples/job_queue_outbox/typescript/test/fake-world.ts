// A small in-process Sluice for the leader's unit tests: every `sluice:actor/*` import the
// guest makes lands here. Actors are instances of the real JobQueue, with bounded `error`
// mailboxes; the outbox stores one row per (receiver, key), makes one immediate attempt per
// target unless the receiver has an older pending row (FIFO), and `drain()` plays the relay.
// Turns run one at a time; a message for a busy actor waits in its mailbox, as in the host.
import type { ActorError, DispatchRequest } from "sluice:actor/types@0.1.0";
import { register } from "../../../../guests/typescript/sdk/index.ts";
import { JobQueue } from "../app.ts";

const dec = new TextDecoder();
const enc = new TextEncoder();

interface Letter { sender: string | null; msgType: string; payload: Uint8Array }
interface Actor {
  id: string;
  exp: ReturnType<typeof register>;
  capacity: number;
  mailbox: Letter[];
  busy: boolean;
}
export interface Row {
  id: number;
  receiver: string;
  key: string;
  msgType: string;
  payload: Uint8Array;
  mode: "cast" | "call";
  attempts: number;
  state: "pending" | "acked" | "dead";
  lastError: string | null;
}

/** Per actor type: mailbox capacity and `init` (the protocol's app-config). */
export const TYPES: Record<string, { capacity: number; init: Record<string, unknown> }> = {
  JobQueueLeader: { capacity: 8, init: { role: "leader" } },
  Worker: { capacity: 16, init: { role: "worker" } },
  ConfigServer: { capacity: 2, init: { role: "config_server", work_ms: 2 } },
  TelemetryCollector: { capacity: 4, init: { role: "collector", work_ms: 1 } },
  Device: { capacity: 4, init: { role: "device", online: true } },
};
const MAX_ATTEMPTS = 5;

class World {
  actors = new Map<string, Actor>();
  stack: Actor[] = [];
  rows: Row[] = [];
  clock = 0;
  /** Immediate attempts the limiter allows per dispatch (the host's AIMD initial limit). */
  limit = 10;

  reset(overrides: Record<string, Record<string, unknown>> = {}) {
    this.actors.clear();
    this.stack = [];
    this.rows = [];
    this.overrides = overrides;
  }
  overrides: Record<string, Record<string, unknown>> = {};

  actor(id: string): Actor {
    let a = this.actors.get(id);
    if (!a) {
      const type = TYPES[id.split("/")[0]];
      if (!type) throw hostError("not-found", `NOT_FOUND: no actor type for ${id}`);
      const exp = register(new JobQueue());
      exp.init(JSON.stringify({ ...type.init, ...this.overrides[id.split("/")[0]] }));
      a = { id, exp, capacity: type.capacity, mailbox: [], busy: false };
      this.actors.set(id, a);
    }
    return a;
  }

  /** Runs one turn; returns the reply or throws the guest's error record. */
  turn(a: Actor, l: Letter): Uint8Array {
    a.busy = true;
    this.stack.push(a);
    try {
      return a.exp.handle({ sender: l.sender ?? undefined, msgType: l.msgType, payload: l.payload, principal: "system" });
    } finally {
      this.stack.pop();
      a.busy = false;
    }
  }

  self(): string | null {
    return this.stack.length ? this.stack[this.stack.length - 1].id : null;
  }

  /** Runs everything queued in mailboxes of idle actors; returns whether anything ran. */
  runMailboxes(): boolean {
    let ran = false;
    for (const a of this.actors.values()) {
      while (!a.busy && a.mailbox.length) {
        const l = a.mailbox.shift()!;
        try { this.turn(a, l); } catch { /* a told message's error goes nowhere */ }
        ran = true;
      }
    }
    return ran;
  }

  /** One delivery attempt of a stored row; true when delivered. */
  attempt(row: Row): boolean {
    const a = this.actor(row.receiver);
    const letter = { sender: "job-queue-leader", msgType: row.msgType, payload: row.payload };
    if (row.mode === "cast") {
      if (a.mailbox.length >= a.capacity) return false; // MailboxFull: capacity, no attempt counted
      a.mailbox.push(letter);
      row.state = "acked";
      return true;
    }
    if (a.busy || a.mailbox.length) return false;
    row.attempts++;
    try {
      this.turn(a, letter);
      row.state = "acked";
      return true;
    } catch (e: any) {
      row.lastError = e?.message ?? String(e);
      if (row.attempts >= MAX_ATTEMPTS) row.state = "dead";
      return false;
    }
  }

  /** The relay: runs mailboxes and delivers pending rows, FIFO per receiver, until done. */
  drain(): void {
    for (let round = 0; round < 10_000; round++) {
      this.runMailboxes();
      const heads = new Map<string, Row>();
      for (const r of this.rows) if (r.state === "pending" && !heads.has(r.receiver)) heads.set(r.receiver, r);
      if (!heads.size) return;
      for (const r of heads.values()) this.attempt(r);
    }
    throw new Error("drain: the outbox never emptied");
  }

  pending(): Row[] { return this.rows.filter((r) => r.state === "pending"); }
  dead(): Row[] { return this.rows.filter((r) => r.state === "dead"); }

  /** Asks an actor from outside (the driver's side). */
  ask(id: string, msgType: string, payload: unknown = {}): any {
    const a = this.actor(id);
    const out = this.turn(a, { sender: null, msgType, payload: enc.encode(JSON.stringify(payload)) });
    return out.length ? JSON.parse(dec.decode(out)) : null;
  }
}

export const world = new World();

function hostError(code: ActorError["code"], message: string, retryAfterMs?: bigint): Error {
  const rec: ActorError = { code, message, skipped: false, retryAfterMs };
  const e = new Error(message);
  Object.defineProperty(e, "payload", { value: rec, enumerable: true });
  return e;
}

// ---- sluice:actor/host -------------------------------------------------------------------

export function tell(to: string, msgType: string, payload: Uint8Array) {
  const a = world.actor(to);
  if (a.mailbox.length >= a.capacity) throw hostError("resource-exhausted", "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=1)", 1n);
  a.mailbox.push({ sender: world.self(), msgType, payload });
  return "queued" as const;
}

export function ask(to: string, msgType: string, payload: Uint8Array, _timeoutMs: bigint): Uint8Array {
  const a = world.actor(to);
  if (a.mailbox.length >= a.capacity) {
    // Refused; meanwhile the receiver (which runs concurrently in the host) catches up.
    if (!a.busy) world.runMailboxes();
    throw hostError("resource-exhausted", "RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=1)", 1n);
  }
  if (a.busy) throw hostError("deadline-exceeded", "DEADLINE_EXCEEDED: call-timeout (skipped: the queued turn never ran)");
  // The ask waits behind what is already queued.
  while (a.mailbox.length) {
    const l = a.mailbox.shift()!;
    try { world.turn(a, l); } catch { /* ignored */ }
  }
  try {
    return world.turn(a, { sender: world.self(), msgType, payload });
  } catch (e: any) {
    throw hostError(e?.code ?? "internal", e?.message ?? String(e));
  }
}

export function schedule(_delayMs: bigint, _msgType: string, _payload: Uint8Array) {
  throw hostError("unavailable", "UNAVAILABLE: no timers in the fake world");
}
export function selfId(): string { return world.self() ?? ""; }
/** Every read advances the fake clock by 1 ms, so busy-waits end. */
export function nowMs(): bigint { return BigInt(++world.clock); }
export function log(_level: string, _msg: string) {}

// ---- sluice:actor/outbox -----------------------------------------------------------------

export function dispatch(req: DispatchRequest) {
  let accepted = 0, rejected = 0, tries = 0;
  for (const receiver of req.targets) {
    const keyed = req.idempotencyKey
      ? world.rows.filter((r) => r.receiver === receiver && r.key === req.idempotencyKey)
      : [];
    const same = keyed.find((r) => r.state === "pending") ?? keyed[0];
    if (same && req.conflict === "append") { accepted++; continue; } // duplicate
    if (same && req.conflict === "overwrite" && same.state === "pending") {
      same.payload = req.payload; // last write wins
      accepted++;
      continue;
    }
    const row: Row = {
      id: world.rows.length + 1, receiver, key: req.idempotencyKey, msgType: req.msgType,
      payload: req.payload, mode: req.mode, attempts: 0, state: "pending", lastError: null,
    };
    const older = world.rows.some((r) => r.receiver === receiver && r.state === "pending");
    world.rows.push(row);
    if (older || tries >= world.limit) { rejected++; continue; }
    tries++;
    if (world.attempt(row)) accepted++;
    else rejected++;
  }
  return { accepted, rejected };
}

export function tellReliable(to: string, msgType: string, payload: Uint8Array) {
  tell(to, msgType, payload);
  return "direct" as const;
}

// ---- sluice:actor/bus --------------------------------------------------------------------

export function publish(_topic: string, _payload: Uint8Array) {}
