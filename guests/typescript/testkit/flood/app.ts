// TESTKIT `flood`: tells `count` messages to `to` as fast as it can and counts the outcomes.
import { type Envelope, SluiceError, host, register } from "@sluice/guest";

export const actor = register({
  handle(env: Envelope) {
    if (env.msgType !== "flood") return env.payload;
    const req = env.json<{ to: string; msg_type: string; count: number }>();
    const counts = { queued: 0, displaced: 0, dropped: 0, refused: 0 };
    let firstError: string | null = null;
    let firstErrorType: string | null = null;
    for (let i = 0; i < req.count; i++) {
      try {
        const r = host.tell(req.to, req.msg_type, String(i));
        if (r === "queued") counts.queued++;
        else if (r === "displaced-oldest") counts.displaced++;
        else counts.dropped++;
      } catch (e) {
        if (!(e instanceof SluiceError)) throw e;
        counts.refused++;
        if (firstError === null) { firstError = e.message; firstErrorType = e.type; }
      }
    }
    return { ...counts, first_error: firstError, first_error_type: firstErrorType };
  },
});
