// TESTKIT `slow`: waits `payload` ms (default 100), then replies the payload. JavaScript has no
// blocking sleep, so this polls the WASI monotonic clock (performance.now / Date.now).
import { type Envelope, register } from "@sluice/guest";

const perf = (globalThis as any).performance as { now(): number } | undefined;
const now = (): number => (perf ? perf.now() : Date.now());

export const actor = register({
  handle(env: Envelope) {
    if (env.msgType === "ok") return "alive";
    const text = env.text.trim();
    const ms = /^\d+$/.test(text) ? Number(text) : 100;
    const until = now() + ms;
    while (now() < until) { /* wait */ }
    return env.payload;
  },
});
