// TESTKIT `echo`: the workhorse test actor (see guests/TESTKIT.md).
import {
  CODES, DEFAULT_ASK_TIMEOUT_MS, DEFAULT_DISPATCH_MSG_TYPE, Envelope, InvalidArgument, Overloaded,
  SluiceError, decodeUtf8, host, prefix, register,
} from "@sluice/guest";

const ok = (fields: Record<string, unknown> = {}) => ({ ok: true, ...fields });

class Echo {
  config = "";
  items: string[] = [];
  envelopes: { msg_type: string; principal: string; sender: string | null }[] = [];

  init(config: string): void {
    this.config = config;
  }

  handle(env: Envelope): unknown {
    // Bus events arrive with msg-type = topic; `evt.*` topics are recorded.
    switch (env.msgType.startsWith("evt.") ? "record" : env.msgType) {
      case "init_config":
        return this.config;
      case "whoami":
        return { self_id: host.selfId(), principal: env.principal, sender: env.sender, deadline_ms: env.deadlineMs };
      case "now":
        return { now_ms: host.nowMs() };
      case "fail":
        throw new InvalidArgument("bad input");
      case "throw":
        throw new Error("plain failure");
      case "raise": {
        // Any code, raised the SDK's way: {code, detail, retry_after_ms?, skipped?}.
        const req = env.json() as { code: string; detail: string; retry_after_ms?: number; skipped?: boolean };
        const code = CODES.find((c) => c === req.code);
        if (code === undefined) throw new InvalidArgument(`INVALID_ARGUMENT: no code ${JSON.stringify(req.code)}`);
        throw new SluiceError(code, `${prefix(code)}: ${req.detail}`, {
          retryAfterMs: req.retry_after_ms ?? null,
          skipped: req.skipped ?? false,
        });
      }
      case "shed":
        throw new Overloaded("OVERLOADED: shedding load", { scope: "actor", depth: 7, limit: 5 });
      case "log":
        host.log("info", env.text);
        return ok();
      case "record":
        this.items.push(env.text);
        this.envelopes.push({ msg_type: env.msgType, principal: env.principal, sender: env.sender });
        return { count: this.items.length };
      case "recorded":
        return { items: this.items, envelopes: this.envelopes };
      case "tell": case "ask": case "schedule": case "tell_reliable": case "remind": case "cancel_reminder":
      case "dispatch": case "publish":
        try {
          return this.callHost(env.msgType, env.json() ?? {});
        } catch (e) {
          if (e instanceof SluiceError) return { ok: false, error: e.report() };
          throw e;
        }
      default:
        return env.payload;
    }
  }

  callHost(t: string, r: any): unknown {
    switch (t) {
      case "tell":
        return ok({ receipt: host.tell(r.to, r.msg_type, r.payload ?? "") });
      case "ask":
        return ok({ reply: decodeUtf8(host.ask(r.to, r.msg_type, r.payload ?? "", r.timeout_ms ?? DEFAULT_ASK_TIMEOUT_MS)) });
      case "schedule":
        host.schedule(r.delay_ms, r.msg_type, r.payload ?? "");
        return ok();
      case "tell_reliable":
        return ok({ path: host.outbox.tellReliable(r.to, r.msg_type, r.payload ?? "") });
      case "remind":
        host.outbox.remind(r.name ?? "", r.delay_ms, r.msg_type, r.payload ?? "");
        return ok();
      case "cancel_reminder":
        return ok({ cancelled: host.outbox.cancelReminder(r.name ?? "") });
      case "dispatch": {
        const res = host.outbox.dispatch(
          r.context ?? "", host.selfId(), r.targets, r.payload ?? "", r.mode ?? "cast",
          r.idempotency_key ?? "", r.conflict ?? "append", { msgType: r.msg_type ?? DEFAULT_DISPATCH_MSG_TYPE });
        return ok({
          delivered: res.delivered, deduplicated: res.deduplicated, queued: res.queued,
          dead_lettered: res.deadLettered, outcomes: res.outcomes,
        });
      }
      default:
        host.bus.publish(r.topic, r.payload ?? "");
        return ok();
    }
  }
}

export const actor = register(new Echo());
