"""Drive every leader scenario of PROTOCOL.md over HTTP against a running `sluice run` and
check the invariants by asking the other actors for their state (plain CPython, stdlib only).

    python3 tests/e2e.py --ingress http://127.0.0.1:7400 --admin http://127.0.0.1:7401 \
        --db APP/.sluice/outbox.db
"""

import argparse
import itertools
import json
import sqlite3
import sys
import time
import urllib.error
import urllib.request


def total(r: dict) -> int:
    """Targets a dispatch reply accounts for: its four counts add up to them."""
    return r["delivered"] + r["deduplicated"] + r["queued"] + r["dead_lettered"]


ARGS = argparse.Namespace()  # main() parses the command line into it


def post(url, body=None):
    data = json.dumps(body if body is not None else {}).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{url}: HTTP {e.code}: {e.read().decode()}") from None


def ask(actor, msg_type, body=None):
    return post(f"{ARGS.ingress}/actors/{actor}/ask/{msg_type}", body)


def admin_get(path):
    with urllib.request.urlopen(f"{ARGS.admin}{path}", timeout=30) as r:
        return json.loads(r.read())


def pending():
    con = sqlite3.connect(f"file:{ARGS.db}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute("SELECT count(*) FROM outbox_messages WHERE acked = 0 AND dead_lettered = 0").fetchone()[0]
    finally:
        con.close()


def drain(timeout_s=120):
    t0 = time.time()
    while (n := pending()) > 0:
        if time.time() - t0 > timeout_s:
            raise AssertionError(f"outbox still holds {n} messages after {timeout_s} s")
        time.sleep(0.05)
    return round(time.time() - t0, 2)


def dead_letters(receiver=None):
    q = f"?receiver={receiver}" if receiver else ""
    return admin_get(f"/admin/dlq{q}")["dead_letters"]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def workers(n):
    return [f"Worker/worker-{i}" for i in range(n)]


def thundering_herd(n):
    r = ask("JobQueueLeader/main", "thundering_herd", {"workers": n, "task_id": "herd-1"})
    check(r["targets"] == n and total(r) == n, f"herd reply {r}")
    r["drain_s"] = drain()
    for w in workers(n):
        s = ask(w, "state")
        check(s["tasks"].get("herd-1") == 1, f"{w} tasks {s['tasks']}")
    return r


def config_wave_deploy(n):
    r = ask("JobQueueLeader/main", "config_wave_deploy", {"workers": n, "wave_size": 20, "version": "2.1.0"})
    check(sum(w["targets"] for w in r["waves"]) == n, f"waves {r['waves']}")
    check(r["config_server_queued"] > 0, f"no backpressure: {r}")
    r["drain_s"] = drain()
    for w in workers(n):
        v = ask(w, "state")["config_version"]
        check(v == "2.1.0", f"{w} config_version {v}")
    served = ask("ConfigServer/cs-0", "state")["served"] + ask("ConfigServer/cs-1", "state")["served"]
    check(sorted(served) == sorted(workers(n)), f"served {served}")
    check(dead_letters() == [], "DLQ not empty after the config wave")
    r["served"] = len(served)
    return r


def send_heartbeat(n, times=3):
    replies = [ask("JobQueueLeader/main", "send_heartbeat", {"workers": n}) for _ in range(times)]
    last = replies[-1]["seq"]
    drain()
    for w in workers(n):
        hb = ask(w, "state")["heartbeats"]
        check(hb and hb[-1] == last and hb == sorted(hb), f"{w} heartbeats {hb}, want ... {last}")
    return replies


def heartbeat_burst():
    r = ask("JobQueueLeader/main", "heartbeat_burst", {"count": 50})
    check(r["sent"] == 50 and total(r) == 50, f"burst reply {r}")
    drain()
    seqs = ask("JobQueueLeader/main", "heartbeats")["seqs"]
    check(1 <= len(seqs) <= 10, f"leader processed {len(seqs)} heartbeats: {seqs}")
    check(all(a < b for a, b in itertools.pairwise(seqs)), f"not strictly increasing: {seqs}")
    check(seqs[-1] == 50, f"last heartbeat {seqs[-1]}")
    r["seqs"] = seqs
    return r


def telemetry_test(count=200):
    r = ask("JobQueueLeader/main", "telemetry_test", {"count": count})
    check(r["fast_path_success"] + r["outbox_fallback"] == count, f"telemetry reply {r}")
    check(r["outbox_fallback"] > 0, f"no fallback: {r}")
    drain()
    s = ask("TelemetryCollector/main", "state")
    check(sorted(s["telemetry"]) == list(range(count)), f"collector holds {len(s['telemetry'])}")
    r["collected"], r["bursts"] = len(s["telemetry"]), s["bursts"]
    return r


def firmware_rollout(devices=10, count=20):
    r = ask("JobQueueLeader/main", "firmware_rollout", {"devices": devices, "count": count})
    check(total(r) == devices * count, f"rollout reply {r}")
    r["drain_s"] = drain()
    for d in range(devices):
        fw = ask(f"Device/dev-{d}", "state")["firmware"]
        check(fw == list(range(count)), f"dev-{d} firmware {fw}")
    check(dead_letters() == [], "DLQ not empty after the rollout")
    return r


def poison():
    r = ask("JobQueueLeader/main", "poison")
    t0 = time.time()
    while not (dl := dead_letters("Worker/poison")):
        check(time.time() - t0 < 60, "poison message never reached the DLQ")
        time.sleep(0.05)
    check(dl[0]["attempts"] == 5, f"dead letter {dl[0]}")
    check(ask("Worker/poison", "state")["tasks"] == {}, "poison recorded before the fix")
    ask("Worker/poison", "fix")
    post(f"{ARGS.admin}/admin/dlq/replay", {"receiver": "Worker/poison"})
    drain()
    tasks = ask("Worker/poison", "state")["tasks"]
    check(tasks == {"poison": 1}, f"poison worker tasks {tasks}")
    check(dead_letters() == [], "DLQ not empty after the replay")
    r["dead_letter"] = {k: dl[0].get(k) for k in ("attempts", "last_error")}
    return r


SCENARIOS = {
    "thundering_herd": lambda: thundering_herd(ARGS.workers),
    "config_wave_deploy": lambda: config_wave_deploy(ARGS.workers),
    "send_heartbeat": lambda: send_heartbeat(ARGS.workers),
    "heartbeat_burst": heartbeat_burst,
    "telemetry_test": telemetry_test,
    "firmware_rollout": firmware_rollout,
    "poison": poison,
}


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--ingress", default="http://127.0.0.1:7400")
    p.add_argument("--admin", default="http://127.0.0.1:7401")
    p.add_argument("--db", required=True)
    p.add_argument("--workers", type=int, default=100)
    p.add_argument("only", nargs="*")
    ARGS = p.parse_args()
    failed = 0
    for name, run in SCENARIOS.items():
        if ARGS.only and name not in ARGS.only:
            continue
        t0 = time.time()
        try:
            out = run()
            print(f"PASS {name} ({time.time() - t0:.1f} s): {json.dumps(out)}", flush=True)
        except Exception as e:  # noqa: BLE001 - report and go on
            failed += 1
            print(f"FAIL {name} ({time.time() - t0:.1f} s): {e}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
