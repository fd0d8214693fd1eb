// TESTKIT `loop`: `ok` replies alive; anything else spins forever without calling the host.
import { type Envelope, register } from "@sluice/guest";

export const actor = register({
  handle(env: Envelope) {
    if (env.msgType === "ok") return "alive";
    let n = 0;
    for (;;) n = (n + 1) | 0;
  },
});
