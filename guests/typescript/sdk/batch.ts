/// <reference path="../types/generated/batched-actor-world.d.ts" />
/**
 * Batched turns: the WIT `batch` export. When messages queue up, the host calls `run` once and
 * hands them over one at a time through `turns.next`; each still runs through the actor's own
 * `handle`, in order, and its reply leaves as soon as its turn ends (the next `next` call).
 *
 * `sluice build` adds `export const batch = batchOf(actor)` beside the user's `actor` export,
 * so an actor never writes this itself.
 */
import { next } from "sluice:actor/turns@0.1.0";
import type { ActorError } from "sluice:actor/types@0.1.0";
import type { ActorExport } from "./actor.ts";

/** The shape jco expects for the WIT `batch` export. */
export interface BatchExport {
  run(): void;
}

type Done = { tag: "ok"; val: Uint8Array } | { tag: "err"; val: ActorError };

/**
 * The guest error `register`'s `handle` threw (a record carried in `payload`), or `null` for
 * anything else: `abort()` and out-of-memory, which must trap this turn as they do one alone.
 */
function guestErrorOf(e: unknown): ActorError | null {
  const p = (e as { payload?: unknown } | null)?.payload as Partial<ActorError> | undefined;
  return p && typeof p === "object" && typeof p.code === "string" && typeof p.message === "string"
    ? (p as ActorError)
    : null;
}

/** The `batch` export for an `actor` export made by `register`. */
export function batchOf(actor: ActorExport): BatchExport {
  return {
    run(): void {
      let done: Done | undefined = undefined;
      for (;;) {
        const env = next(done);
        if (env === undefined || env === null) return;
        try {
          done = { tag: "ok", val: actor.handle(env) };
        } catch (e) {
          const err = guestErrorOf(e);
          if (err === null) throw e;
          done = { tag: "err", val: err };
        }
      }
    },
  };
}
