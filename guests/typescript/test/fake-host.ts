// A fake of the `sluice:actor/*` imports for unit tests: records calls, fails on demand the
// way componentize-js does (an Error whose own `payload` is the `actor-error` record).
import type { ActorError, DispatchRequest } from "sluice:actor/types@0.1.0";

export const state = {
  calls: [] as unknown[][],
  failWith: null as ActorError | null,
  askReply: new Uint8Array([112, 111, 110, 103]),
  reset() {
    this.calls = [];
    this.failWith = null;
  },
};

function maybeFail(): void {
  if (state.failWith) {
    const rec = state.failWith;
    state.failWith = null;
    const e = new Error(`${rec.message} (see error.payload)`);
    Object.defineProperty(e, "payload", { value: rec, enumerable: true });
    throw e;
  }
}

export function tell(to: string, msgType: string, payload: Uint8Array) {
  state.calls.push(["tell", to, msgType, payload]);
  maybeFail();
  return "queued" as const;
}
export function ask(to: string, msgType: string, payload: Uint8Array, timeoutMs: bigint) {
  state.calls.push(["ask", to, msgType, payload, timeoutMs]);
  maybeFail();
  return state.askReply;
}
export function schedule(delayMs: bigint, msgType: string, payload: Uint8Array) {
  state.calls.push(["schedule", delayMs, msgType, payload]);
  maybeFail();
}
export function selfId() { return "Echo/1"; }
export function nowMs() { return 1234n; }
export function log(level: string, msg: string) { state.calls.push(["log", level, msg]); }
export function dispatch(req: DispatchRequest) {
  state.calls.push(["dispatch", req]);
  maybeFail();
  return { accepted: 2, rejected: 1 };
}
export function tellReliable(to: string, msgType: string, payload: Uint8Array) {
  state.calls.push(["tellReliable", to, msgType, payload]);
  maybeFail();
  return "outbox" as const;
}
export function publish(topic: string, payload: Uint8Array) {
  state.calls.push(["publish", topic, payload]);
  maybeFail();
}
