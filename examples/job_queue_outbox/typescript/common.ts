// What every role shares: the protocol's constants, payload parsing, the busy-wait.
import { type DispatchResult, type Envelope, InvalidArgument, encodeUtf8, host } from "@sluice/guest";

/** Who dispatches (recorded with each outbox message and used as its sender). */
export const DISPATCHER_ID = "job-queue-leader";
/** The outbox context: tenant and namespace. */
export const ctx = JSON.stringify({ tenant: "default", namespace: "default" });
/** The seed's heartbeat key: every heartbeat overwrites the pending one. */
export const KEY = "hb-leader-worker-101";

/** What one or more dispatches did with their targets, added up: delivered now, absorbed by the
 * idempotency key, queued for the relay, or dead-lettered at once. */
export interface DispatchCounts {
  delivered: number;
  deduplicated: number;
  queued: number;
  dead_lettered: number;
}

/** The counts of `results`, added up. */
export function countsOf(...results: DispatchResult[]): DispatchCounts {
  const c: DispatchCounts = { delivered: 0, deduplicated: 0, queued: 0, dead_lettered: 0 };
  for (const r of results) {
    c.delivered += r.delivered;
    c.deduplicated += r.deduplicated;
    c.queued += r.queued;
    c.dead_lettered += r.deadLettered;
  }
  return c;
}

/** One role of the job queue: handles the messages of its actor type. */
export interface Role {
  handle(env: Envelope): unknown;
}

/** The payload as a JSON object (`{}` when empty); anything else is `INVALID_ARGUMENT`. */
export function payloadOf<T extends object = Record<string, any>>(env: Envelope): Partial<T> {
  let v: unknown;
  try {
    v = env.json();
  } catch {
    throw new InvalidArgument(`INVALID_ARGUMENT: ${env.msgType} payload is not JSON`);
  }
  if (v === null) return {};
  if (typeof v !== "object" || Array.isArray(v)) {
    throw new InvalidArgument(`INVALID_ARGUMENT: ${env.msgType} payload is not a JSON object`);
  }
  return v as Partial<T>;
}

/** JSON to UTF-8 bytes, the way the seed builds `payloadBytes`. */
export function jsonBytes(v: unknown): Uint8Array {
  return encodeUtf8(JSON.stringify(v));
}

/** The error for a msg-type a role does not handle. */
export function unknownMessage(role: string, env: Envelope): InvalidArgument {
  return new InvalidArgument(`INVALID_ARGUMENT: ${role} does not handle msg-type ${JSON.stringify(env.msgType)}`);
}

/** Burns `ms` milliseconds of the turn: guests have no sleep, so this spins on `now_ms()`. */
export function busy(ms: number): void {
  if (ms <= 0) return;
  const until = host.nowMs() + ms;
  while (host.nowMs() < until) { /* work */ }
}

/** `Worker/worker-0` … `Worker/worker-(n-1)`. */
export function workerIds(n: number, from = 0): string[] {
  return Array.from({ length: Math.max(0, n - from) }, (_, i) => `Worker/worker-${from + i}`);
}

/** Ids recorded once each, in arrival order. */
export class SeenList<T> {
  readonly items: T[] = [];
  private readonly seen = new Set<T>();

  /** Records `id` unless it was seen before; returns whether it was new. */
  record(id: T): boolean {
    if (this.seen.has(id)) return false;
    this.seen.add(id);
    this.items.push(id);
    return true;
  }
}
