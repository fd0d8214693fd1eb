// TESTKIT `crash`: `ok` replies alive; anything else throws an uncaught Error (a trap).
import { type Envelope, register } from "@sluice/guest";

export const actor = register({
  handle(env: Envelope) {
    if (env.msgType === "ok") return "alive";
    throw new Error(`crash requested by ${env.msgType}`);
  },
});
