"""TESTKIT `echo`: the workhorse test actor (see guests/TESTKIT.md)."""

import sluice
from sluice import host


def ok(**fields):
    return {"ok": True, **fields}


def report(err: sluice.SluiceError):
    return {"ok": False, "error": err.report()}


@sluice.register
class Echo(sluice.Actor):
    def __init__(self):
        self.config = ""
        self.items = []
        self.envelopes = []

    def init(self, config):
        self.config = config

    def handle(self, env):
        t = env.msg_type
        if t == "init_config":
            return self.config
        if t == "whoami":
            return {
                "self_id": host.self_id(),
                "principal": env.principal,
                "sender": env.sender,
                "deadline_ms": env.deadline_ms,
            }
        if t == "now":
            return {"now_ms": host.now_ms()}
        if t == "fail":
            raise sluice.InvalidArgument("bad input")
        if t == "throw":
            raise ValueError("plain failure")
        if t == "raise":
            # Any code, raised the SDK's way: {code, detail, retry_after_ms?, skipped?}.
            req = env.json()
            cls = sluice.errors.CODES[req["code"]]
            raise cls(
                f"{sluice.errors.prefix(req['code'])}: {req['detail']}",
                retry_after_ms=req.get("retry_after_ms"),
                skipped=req.get("skipped", False),
            )
        if t == "shed":
            raise sluice.Overloaded(
                "OVERLOADED: shedding load", scope="actor", depth=7, limit=5
            )
        if t == "log":
            host.log("info", env.text)
            return ok()
        # Bus events arrive with msg-type = topic; `evt.*` topics are recorded.
        if t == "record" or t.startswith("evt."):
            self.items.append(env.text)
            self.envelopes.append(
                {"msg_type": t, "principal": env.principal, "sender": env.sender}
            )
            return {"count": len(self.items)}
        if t == "recorded":
            return {"items": self.items, "envelopes": self.envelopes}
        if t in (
            "tell",
            "ask",
            "schedule",
            "tell_reliable",
            "remind",
            "cancel_reminder",
            "dispatch",
            "publish",
        ):
            req = env.json() or {}
            try:
                return self.call_host(t, req)
            except sluice.SluiceError as e:
                return report(e)
        return env.payload

    def call_host(self, t, r):
        if t == "tell":
            return ok(receipt=host.tell(r["to"], r["msg_type"], r.get("payload", "")))
        if t == "ask":
            reply = host.ask(
                r["to"],
                r["msg_type"],
                r.get("payload", ""),
                timeout_ms=r.get("timeout_ms", sluice.DEFAULT_ASK_TIMEOUT_MS),
            )
            return ok(reply=reply.decode("utf-8", errors="replace"))
        if t == "schedule":
            host.schedule(r["delay_ms"], r["msg_type"], r.get("payload", ""))
            return ok()
        if t == "tell_reliable":
            return ok(
                path=host.outbox.tell_reliable(
                    r["to"], r["msg_type"], r.get("payload", "")
                )
            )
        if t == "remind":
            host.outbox.remind(
                r.get("name", ""), r["delay_ms"], r["msg_type"], r.get("payload", "")
            )
            return ok()
        if t == "cancel_reminder":
            return ok(cancelled=host.outbox.cancel_reminder(r.get("name", "")))
        if t == "dispatch":
            res = host.outbox.dispatch(
                r.get("context", ""),
                host.self_id(),
                r["targets"],
                r.get("payload", ""),
                r.get("mode", "cast"),
                r.get("idempotency_key", ""),
                r.get("conflict", "append"),
                msg_type=r.get("msg_type", sluice.DEFAULT_DISPATCH_MSG_TYPE),
            )
            return ok(
                delivered=res.delivered,
                deduplicated=res.deduplicated,
                queued=res.queued,
                dead_lettered=res.dead_lettered,
                outcomes=list(res.outcomes),
            )
        host.bus.publish(r["topic"], r.get("payload", ""))
        return ok()
