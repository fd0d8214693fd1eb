/**
 * Typed Sluice errors and their lossless mapping to and from the WIT `actor-error` record.
 * `err.message` is exactly the canonical message, e.g.
 * `RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)`.
 */
import type { ActorError, ErrorCode, OverloadScope } from "sluice:actor/types@0.1.0";
import { u64 } from "./u64.ts";

/** Optional details an error carries (all lossless to and from the WIT record). */
export interface ErrorDetails {
  retryAfterMs?: number | null;
  skipped?: boolean;
  scope?: OverloadScope | null;
  depth?: number | null;
  limit?: number | null;
}

/** Base class of every error that crosses the guest/host boundary. */
export class SluiceError extends Error {
  /** The WIT `error-code` case name. */
  readonly code: ErrorCode;
  readonly retryAfterMs: number | null;
  readonly skipped: boolean;
  readonly scope: OverloadScope | null;
  readonly depth: number | null;
  readonly limit: number | null;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}) {
    super(message);
    this.code = code;
    this.retryAfterMs = details.retryAfterMs ?? null;
    this.skipped = details.skipped ?? false;
    this.scope = details.scope ?? null;
    this.depth = details.depth ?? null;
    this.limit = details.limit ?? null;
  }

  /** The SDK class name (`ResourceExhausted`, ...), stable under minification. */
  get type(): string {
    return CLASS_NAMES[this.code];
  }

  override toString(): string {
    return this.message;
  }

  /** The error as the TESTKIT error report's `error` object. */
  report(): Record<string, unknown> {
    return {
      type: this.type,
      code: this.code,
      message: this.message,
      retry_after_ms: this.retryAfterMs,
      skipped: this.skipped,
      scope: this.scope,
      depth: this.depth,
      limit: this.limit,
    };
  }
}

/** The receiver has no room (full mailbox, rate or memory limit); see `retryAfterMs`. */
export class ResourceExhausted extends SluiceError {
  constructor(message: string, details: ErrorDetails = {}) { super("resource-exhausted", message, details); }
}
/** The call's deadline passed; `skipped` is true when the turn never ran. */
export class DeadlineExceeded extends SluiceError {
  constructor(message: string, details: ErrorDetails = {}) { super("deadline-exceeded", message, details); }
}
/** An admission cap refused the call; `scope`, `depth`, `limit` say which and why. */
export class Overloaded extends SluiceError {
  constructor(message: string, details: ErrorDetails = {}) { super("overloaded", message, details); }
}
/** No such actor type or module on this host. */
export class NotFound extends SluiceError {
  constructor(message: string, details: ErrorDetails = {}) { super("not-found", message, details); }
}
/** The request itself is wrong (oversize payload, bad topic, bad deadline). */
export class InvalidArgument extends SluiceError {
  constructor(message: string, details: ErrorDetails = {}) { super("invalid-argument", message, details); }
}
/** The actor or a subsystem cannot serve now. */
export class Unavailable extends SluiceError {
  constructor(message: string, details: ErrorDetails = {}) { super("unavailable", message, details); }
}
/** The callee failed: a trap, or an error raised without a code of its own. */
export class Internal extends SluiceError {
  constructor(message: string, details: ErrorDetails = {}) { super("internal", message, details); }
}

const CLASS_NAMES: Record<ErrorCode, string> = {
  "resource-exhausted": "ResourceExhausted",
  "deadline-exceeded": "DeadlineExceeded",
  "overloaded": "Overloaded",
  "not-found": "NotFound",
  "invalid-argument": "InvalidArgument",
  "unavailable": "Unavailable",
  "internal": "Internal",
};

const CLASSES: Record<ErrorCode, new (message: string, details?: ErrorDetails) => SluiceError> = {
  "resource-exhausted": ResourceExhausted,
  "deadline-exceeded": DeadlineExceeded,
  "overloaded": Overloaded,
  "not-found": NotFound,
  "invalid-argument": InvalidArgument,
  "unavailable": Unavailable,
  "internal": Internal,
};

/** Every code, in the WIT `error-code` order (the rows of `wit/errors.json`). */
export const CODES: readonly ErrorCode[] = Object.keys(CLASSES) as ErrorCode[];

/** The canonical message prefix of a code: `prefix("not-found") === "NOT_FOUND"`. */
export function prefix(code: ErrorCode): string {
  return code.replace(/-/g, "_").toUpperCase();
}

const num = (v: bigint | number | undefined | null): number | null =>
  v === undefined || v === null ? null : Number(v);

/** WIT `actor-error` -> the typed SDK error, keeping every field. */
export function fromWit(e: ActorError): SluiceError {
  const cls = CLASSES[e.code] ?? Internal;
  return new cls(e.message, {
    retryAfterMs: num(e.retryAfterMs),
    skipped: !!e.skipped,
    scope: e.overload?.scope ?? null,
    depth: num(e.overload?.depth),
    limit: num(e.overload?.limit),
  });
}

/** The typed SDK error -> WIT `actor-error`, keeping every field. */
export function toWit(e: SluiceError): ActorError {
  const out: ActorError = { code: e.code, message: e.message, skipped: e.skipped };
  if (e.retryAfterMs !== null) out.retryAfterMs = u64(e.retryAfterMs);
  if (e.scope !== null || e.depth !== null || e.limit !== null) {
    out.overload = { scope: e.scope ?? "actor", depth: u64(e.depth ?? 0), limit: u64(e.limit ?? 0) };
  }
  return out;
}

/** Whatever a failed import threw -> the typed SDK error. */
export function fromThrown(thrown: unknown): unknown {
  // componentize-js throws an Error whose own `payload` holds the `err` value; accept the bare
  // record too.
  const p = (thrown as { payload?: unknown } | null)?.payload ?? thrown;
  if (p && typeof p === "object" && "code" in p && "message" in p && !(p instanceof SluiceError)) {
    return fromWit(p as ActorError);
  }
  return thrown;
}
