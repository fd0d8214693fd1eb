/// <reference path="../../types/generated/actor-world.d.ts" />
/**
 * The `sluice:actor/host`, `outbox` and `bus` imports for code running outside a component: the
 * test hooks (`@sluice/guest/testing/register`) resolve every `sluice:actor/*` import here. Each
 * function forwards to the installed `FakeHost`; with none installed it throws.
 */

type Host = typeof import("sluice:actor/host@0.1.0");
type Outbox = typeof import("sluice:actor/outbox@0.1.0");
type Bus = typeof import("sluice:actor/bus@0.1.0");

/** Every WIT import function, as one object (what a fake host implements). */
export type WitImports = Pick<Host, "tell" | "ask" | "schedule" | "selfId" | "nowMs" | "log">
  & Pick<Outbox, "dispatch" | "tellReliable" | "remind" | "cancelReminder">
  & Pick<Bus, "publish">;

let current: WitImports | null = null;

/** Installs `next` (or none) as what the imports forward to; returns the one it replaces. */
export function setImports(next: WitImports | null): WitImports | null {
  const previous = current;
  current = next;
  return previous;
}

function target(): WitImports {
  if (current === null) {
    throw new Error("no fake host installed: call `new FakeHost().install()` (@sluice/guest/testing) first");
  }
  return current;
}

export const tell: Host["tell"] = (to, msgType, payload) => target().tell(to, msgType, payload);
export const ask: Host["ask"] = (to, msgType, payload, timeoutMs) => target().ask(to, msgType, payload, timeoutMs);
export const schedule: Host["schedule"] = (delayMs, msgType, payload) => target().schedule(delayMs, msgType, payload);
export const selfId: Host["selfId"] = () => target().selfId();
export const nowMs: Host["nowMs"] = () => target().nowMs();
export const log: Host["log"] = (level, msg) => target().log(level, msg);
export const dispatch: Outbox["dispatch"] = (req) => target().dispatch(req);
export const tellReliable: Outbox["tellReliable"] = (to, msgType, payload) => target().tellReliable(to, msgType, payload);
export const remind: Outbox["remind"] = (name, delayMs, msgType, payload) => target().remind(name, delayMs, msgType, payload);
export const cancelReminder: Outbox["cancelReminder"] = (name) => target().cancelReminder(name);
export const publish: Bus["publish"] = (topic, payload) => target().publish(topic, payload);
