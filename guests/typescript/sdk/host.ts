/** `host`: the idiomatic face of the WIT imports (`host`, `outbox`, `bus`). */
import * as witHost from "sluice:actor/host@0.1.0";
import * as witOutbox from "sluice:actor/outbox@0.1.0";
import * as witBus from "sluice:actor/bus@0.1.0";
import type {
  Conflict, DeliveryPath, DispatchMode, DispatchOutcome, LogLevel, TellReceipt,
} from "sluice:actor/types@0.1.0";
import { InvalidArgument, fromThrown } from "./errors.ts";
import { encodeUtf8 } from "./utf8.ts";
import { u64 } from "./u64.ts";

const LOG_LEVELS: readonly string[] = ["trace", "debug", "info", "warn", "error"] satisfies LogLevel[];

function isLogLevel(s: string): s is LogLevel {
  return LOG_LEVELS.includes(s);
}

/** What a payload may be: bytes, text, or anything JSON-serialisable. */
export type Payload = unknown;

/** `ask` deadline when the caller gives none (the host may tighten it further). */
export const DEFAULT_ASK_TIMEOUT_MS = 5000;
/** The msg-type receivers see for `outbox.dispatch` when the caller gives none. */
export const DEFAULT_DISPATCH_MSG_TYPE = "dispatch";

/** Bytes pass through, strings are UTF-8 encoded, null/undefined is empty, the rest is JSON. */
export function toBytes(p: Payload): Uint8Array {
  if (p instanceof Uint8Array) return p;
  // Byte arrays lifted by the component glue may come from another realm: test structurally.
  if (ArrayBuffer.isView(p)) return new Uint8Array(p.buffer, p.byteOffset, p.byteLength);
  if (p instanceof ArrayBuffer) return new Uint8Array(p);
  if (typeof p === "string") return encodeUtf8(p);
  if (p === null || p === undefined) return new Uint8Array(0);
  return encodeUtf8(JSON.stringify(p));
}

function call<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw fromThrown(e);
  }
}

/**
 * A per-call budget: a positive finite number of milliseconds (fractions round up), else
 * `InvalidArgument` — thrown before anything is sent.
 */
function budgetMs(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new InvalidArgument(
      `INVALID_ARGUMENT: ${what} must be a positive finite number of milliseconds, got ${String(value)}`);
  }
  return Math.max(1, Math.ceil(value));
}

/** Options of `host.with(...)`. */
export interface CallOptions {
  /** Budget for calls made through the returned handle; only tightens the inherited one. */
  deadlineMs: number;
}

/** Calls made with a tighter deadline: `host.with({ deadlineMs: 250 }).ask(...)`. */
export class Call {
  constructor(readonly deadlineMs: number) {}
  /** `host.ask` within this deadline (and `timeoutMs` when also given). */
  ask(to: string, msgType: string, payload: Payload = "", timeoutMs?: number): Uint8Array {
    const ms = timeoutMs === undefined ? this.deadlineMs : Math.min(this.deadlineMs, budgetMs(timeoutMs, "timeoutMs"));
    return call(() => witHost.ask(to, msgType, toBytes(payload), u64(ms)));
  }
}

/** Options of `outbox.dispatch` beyond the seed's positional arguments. */
export interface DispatchOptions {
  msgType?: string;
  sequenceNumber?: number;
  ttlMs?: number;
}

export type { DispatchOutcome };

/** What `outbox.dispatch` did: counts by kind and one outcome per target, in the order of the
 * targets (WIT `dispatch-result`). The four counts add up to the number of targets. Only
 * `"delivered"` means the receiver has it now; every `"queued-*"` target is stored and the relay
 * delivers it (nothing to resend); `"not-found"`, `"expired"` and `"dead-lettered"` targets are
 * in the dead-letter queue. */
export interface DispatchResult {
  /** Targets delivered by the immediate attempt. */
  readonly delivered: number;
  /** Targets absorbed by their idempotency key. */
  readonly deduplicated: number;
  /** Targets left in the outbox for the relay (every `"queued-*"` outcome). */
  readonly queued: number;
  /** Targets dead-lettered at once (`"not-found"`, `"expired"`, `"dead-lettered"`). */
  readonly deadLettered: number;
  readonly outcomes: readonly DispatchOutcome[];
}

/** The result with these per-target outcomes and the counts they add up to. */
export function dispatchResultOf(outcomes: readonly DispatchOutcome[]): DispatchResult {
  const count = (p: (o: DispatchOutcome) => boolean) => outcomes.filter(p).length;
  return {
    delivered: count((o) => o === "delivered"),
    deduplicated: count((o) => o === "deduplicated"),
    queued: count((o) => o.startsWith("queued-")),
    deadLettered: count((o) => o === "not-found" || o === "expired" || o === "dead-lettered"),
    outcomes: [...outcomes],
  };
}

/** The durable outbox (`sluice:actor/outbox`). */
export const outbox = {
  /** Durable fan-out; returns what happened to each target (`DispatchResult`). */
  dispatch(
    ctx: string, dispatcherId: string, targets: string[], payload: Payload,
    mode: DispatchMode | "" = "cast", idempotencyKey = "", conflict: Conflict | "" = "append",
    opts: DispatchOptions = {},
  ): DispatchResult {
    const res = call(() => witOutbox.dispatch({
      context: ctx ?? "",
      dispatcherId,
      msgType: opts.msgType ?? DEFAULT_DISPATCH_MSG_TYPE,
      targets: [...targets],
      payload: toBytes(payload),
      mode: mode || "cast",
      idempotencyKey: idempotencyKey ?? "",
      conflict: conflict || "append",
      sequenceNumber: opts.sequenceNumber === undefined ? undefined : u64(opts.sequenceNumber),
      ttlMs: opts.ttlMs === undefined ? undefined : u64(opts.ttlMs),
    }));
    return {
      delivered: res.delivered, deduplicated: res.deduplicated, queued: res.queued,
      deadLettered: res.deadLettered, outcomes: res.outcomes,
    };
  },
  /** Direct tell first, outbox on any failure. */
  tellReliable(to: string, msgType: string, payload: Payload = ""): DeliveryPath {
    return call(() => witOutbox.tellReliable(to, msgType, toBytes(payload)));
  },
  /**
   * A durable reminder: `msgType` with `payload`, delivered to this actor itself (sender = its
   * own id) once `delayMs` has passed. Stored in the outbox before this returns, it outlives a
   * host crash or restart (unlike `host.schedule`, which is in memory). At least once: after a
   * crash it may arrive twice. A non-empty `name` (at most 256 bytes) names it for this actor
   * and arming that name again replaces the pending one; `""` arms a new one each time. Throws
   * `ResourceExhausted` when this actor has `max_reminders_per_actor` pending, `Unavailable` on
   * a host without an outbox, `InvalidArgument` for a bad msg-type, payload or name.
   */
  remind(name: string, delayMs: number, msgType: string, payload: Payload = ""): void {
    call(() => witOutbox.remind(name ?? "", u64(delayMs), msgType, toBytes(payload)));
  },
  /** Cancels this actor's pending reminder `name`: true when one was pending, false when none
   * was (never armed, cancelled already, or being delivered now). */
  cancelReminder(name: string): boolean {
    return call(() => witOutbox.cancelReminder(name ?? ""));
  },
};

/** Pub/sub between actors (`sluice:actor/bus`). */
export const bus = {
  publish(topic: string, payload: Payload = ""): void {
    call(() => witBus.publish(topic, toBytes(payload)));
  },
};

/** Messaging and clocks (`sluice:actor/host`), plus `outbox` and `bus`. */
export const host = {
  outbox,
  bus,
  /** Fire and forget; throws a typed `SluiceError` when refused. */
  tell(to: string, msgType: string, payload: Payload = ""): TellReceipt {
    return call(() => witHost.tell(to, msgType, toBytes(payload)));
  },
  /**
   * Request and reply; returns the reply bytes or throws a typed `SluiceError`. `timeoutMs`
   * must be a positive finite number (else `InvalidArgument`, nothing sent).
   */
  ask(to: string, msgType: string, payload: Payload = "", timeoutMs: number = DEFAULT_ASK_TIMEOUT_MS): Uint8Array {
    const ms = budgetMs(timeoutMs, "timeoutMs");
    return call(() => witHost.ask(to, msgType, toBytes(payload), u64(ms)));
  },
  /**
   * Calls with a per-call deadline that only tightens the inherited one:
   * `host.with({ deadlineMs: 250 }).ask(worker, "process", job)`. A deadline that is not a
   * positive finite number throws `InvalidArgument` here, before anything is sent.
   */
  with(opts: CallOptions): Call {
    return new Call(budgetMs(opts?.deadlineMs, "deadlineMs"));
  },
  /** Deliver `msgType` to this actor itself after `delayMs`. */
  schedule(delayMs: number, msgType: string, payload: Payload = ""): void {
    call(() => witHost.schedule(u64(delayMs), msgType, toBytes(payload)));
  },
  selfId(): string {
    return witHost.selfId();
  },
  nowMs(): number {
    return Number(witHost.nowMs());
  },
  /**
   * `log("info", "text")`; `log("text")` logs at info. A level that is not one of
   * `trace | debug | info | warn | error` throws `InvalidArgument`.
   */
  log(levelOrMsg: LogLevel | string, msg?: string): void {
    if (msg === undefined) {
      witHost.log("info", String(levelOrMsg));
      return;
    }
    if (!isLogLevel(levelOrMsg)) {
      throw new InvalidArgument(`INVALID_ARGUMENT: unknown log level ${JSON.stringify(levelOrMsg)}`);
    }
    witHost.log(levelOrMsg, String(msg));
  },
};
