// TESTKIT `crash`: `ok` replies alive; anything else aborts (a trap: a plain thrown Error would
// be an INTERNAL error value instead).
import { type Envelope, abort, register } from "@sluice/guest";

export const actor = register({
  handle(env: Envelope) {
    if (env.msgType === "ok") return "alive";
    abort(`crash requested by ${env.msgType}`);
  },
});
