// TESTKIT `batch`: what the tests of batched turns queue behind a held turn. `seq` numbers the
// turns this instance ran, so order and once-only delivery show in the replies; `spin`, `trap`
// and `forever` fail one turn of a batch in each way. JavaScript has no blocking sleep, so
// `hold` and `spin` both poll the clock.
import { type Envelope, InvalidArgument, abort, register } from "@sluice/guest";

const perf = (globalThis as any).performance as { now(): number } | undefined;
const now = (): number => (perf ? perf.now() : Date.now());
const seen: string[] = [];

function busy(env: Envelope): Uint8Array {
  const text = env.text.trim();
  const until = now() + (/^\d+$/.test(text) ? Number(text) : 0);
  while (now() < until) { /* wait */ }
  return env.payload;
}

export const actor = register({
  handle(env: Envelope) {
    switch (env.msgType) {
      case "hold":
      case "spin":
        return busy(env);
      case "seq":
        seen.push(env.text);
        return `${seen.length}:${env.text}`;
      case "seen":
        return seen.join(",");
      case "trap":
        return abort("trap requested");
      case "forever":
        for (;;) { /* until the host interrupts it */ }
      default:
        throw new InvalidArgument(`unknown op ${env.msgType}`);
    }
  },
});
