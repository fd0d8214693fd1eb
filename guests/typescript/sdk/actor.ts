/** Actor registration: turns an `Actor` into the WIT `actor` export. */
import type { ActorError, Envelope as WitEnvelope } from "sluice:actor/types@0.1.0";
import { SluiceError, toWit } from "./errors.ts";
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

/**
 * Register the actor: `export const actor = register(new MyActor())`. A `SluiceError` thrown
 * from `init`/`handle` becomes a guest error; anything else thrown traps the instance.
 */
export function register(a: Actor): ActorExport {
  return {
    init(config: string): void {
      try {
        a.init?.(config);
      } catch (e) {
        if (e instanceof SluiceError) guestError(e);
        throw e;
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
        if (err instanceof SluiceError) guestError(err);
        throw err;
      }
    },
  };
}
