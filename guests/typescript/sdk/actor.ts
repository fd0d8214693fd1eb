/** Actor registration: turns an `Actor` into the WIT `actor` export. */
import type { ActorError, Envelope as WitEnvelope } from "sluice:actor/types@0.1.0";
import { Internal, SluiceError, toWit } from "./errors.ts";
import { type Payload, toBytes } from "./host.ts";
import { decodeUtf8 } from "./utf8.ts";

/** One message as the actor receives it. */
export class Envelope {
  constructor(
    readonly sender: string | null,
    readonly msgType: string,
    readonly payload: Uint8Array,
    readonly principal: string,
    readonly deadlineMs: number | null,
  ) {}

  /** The payload decoded as UTF-8. */
  get text(): string {
    return decodeUtf8(this.payload);
  }

  /** The payload parsed as JSON (`null` when empty). */
  json<T = any>(): T {
    return (this.payload.length ? JSON.parse(this.text) : null) as T;
  }
}

/** What an actor implements. `handle` may return bytes, a string, or a JSON-able value. */
export interface Actor {
  init?(config: string): void;
  handle(env: Envelope): Payload;
}

/** The shape jco expects for the WIT `actor` export. */
export interface ActorExport {
  init(config: string): void;
  handle(env: WitEnvelope): Uint8Array;
}

/** What the SDK throws so componentize-js returns `err(actor-error)` instead of trapping. */
function guestError(e: SluiceError): never {
  const rec: ActorError = toWit(e);
  // componentize-js takes the `err` value from the thrown value's own `payload` property; the
  // record's own fields are there too, so a binding that lowers the thrown value itself works.
  throw Object.assign({}, rec, { payload: rec });
}

/** Thrown by `abort`: `register` lets it escape, and componentize-js traps on it. */
export class Abort extends Error {
  override name = "Abort";
}

/**
 * Trap the instance on purpose (the TypeScript panic): the caller sees `INTERNAL` naming a
 * trap, and the supervisor restarts the instance with fresh state.
 */
export function abort(message = "aborted"): never {
  throw new Abort(message);
}

/**
 * The runtime's own out-of-memory error (QuickJS throws it as an `InternalError`, or as a bare
 * value when it cannot allocate even that): it traps, and the host reports its memory limit.
 */
function isOutOfMemory(e: unknown): boolean {
  const m = typeof e === "string" ? e : (e as { message?: unknown } | null)?.message;
  return typeof m === "string" && /out of memory|allocation failed/i.test(m);
}

/** A thrown value that is not a `SluiceError`, as the error that crosses the boundary. */
export function uncoded(e: unknown): Internal {
  const detail = e instanceof Error ? (e.message || e.name) : String(e);
  return new Internal(`INTERNAL: ${detail}`);
}

/** Any thrown value -> a guest error (never returns), unless it must trap: `abort`, OOM. */
function raise(e: unknown): never {
  if (e instanceof SluiceError) guestError(e);
  if (e instanceof Abort || isOutOfMemory(e)) throw e;
  guestError(uncoded(e));
}

/**
 * Register the actor: `export const actor = register(new MyActor())`. A `SluiceError` thrown
 * from `init`/`handle` becomes that guest error; anything else thrown becomes `Internal` with
 * the message `INTERNAL: <its message>`, and the instance keeps its state. `abort()` and the
 * runtime's out-of-memory error trap the instance.
 */
export function register(a: Actor): ActorExport {
  return {
    init(config: string): void {
      try {
        a.init?.(config);
      } catch (e) {
        raise(e);
      }
    },
    handle(env: WitEnvelope): Uint8Array {
      const e = new Envelope(
        env.sender ?? null, env.msgType, env.payload, env.principal,
        env.deadlineMs === undefined || env.deadlineMs === null ? null : Number(env.deadlineMs),
      );
      try {
        return toBytes(a.handle(e));
      } catch (err) {
        raise(err);
      }
    },
  };
}
