// TESTKIT `hog`: `ok` replies alive; anything else allocates and touches 1 MiB chunks forever.
import { type Envelope, register } from "@sluice/guest";

const MIB = 1 << 20;
const chunks: Uint8Array[] = [];

export const actor = register({
  handle(env: Envelope) {
    if (env.msgType === "ok") return "alive";
    for (;;) {
      const c = new Uint8Array(MIB);
      for (let i = 0; i < MIB; i += 4096) c[i] = 1; // touch every page
      chunks.push(c);
    }
  },
});
