#!/usr/bin/env python3
"""Drives every leader scenario of ../../PROTOCOL.md over HTTP against a running host and
checks the invariants by asking the other actors for `state` (outbox depth and DLQ read from
the SQLite file). The Rust driver (examples/job_queue_outbox/driver) is the real check; this
is the quick one used while writing the TypeScript guest.

    sluice run APP --listen 127.0.0.1:7611 --admin-listen 127.0.0.1:7612 &
    python3 e2e.py 127.0.0.1:7611 APP/.sluice/outbox.db [herd,wave,hb,burst,tel,fw,poison]
"""

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


INGRESS, DB = sys.argv[1], sys.argv[2]
A = f"http://{INGRESS}/actors"


def ask(actor, msg, body=None):
    req = urllib.request.Request(f"{A}/{actor}/ask/{msg}", data=json.dumps(body or {}).encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return {"http_error": e.code, "body": e.read().decode()}


def q(sql, *a):
    c = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    try:
        return c.execute(sql, a).fetchall()
    finally:
        c.close()


def pending():
    return q("select count(*) from outbox_messages where acked=0 and dead_lettered=0")[0][0]


def dead():
    return q("select receiver, delivery_count, dead_reason, last_error from outbox_messages where dead_lettered=1")


def wait_drained(limit=60):
    t0 = time.time()
    while pending() and time.time() - t0 < limit:
        time.sleep(0.05)
    return pending(), round(time.time() - t0, 2)


failed: list[str] = []


def check(name, ok, detail=""):
    print(("PASS" if ok else "FAIL"), name, detail)
    if not ok:
        failed.append(name)


L = "JobQueueLeader/main"
N = 100
which = sys.argv[3].split(",") if len(sys.argv) > 3 else ["herd", "wave", "hb", "burst", "tel", "fw", "poison"]

if "herd" in which:
    r = ask(L, "thundering_herd", {"workers": N, "task_id": "herd-1"})
    print("thundering_herd", r)
    check("herd counts add up to targets", total(r) == r["targets"] == N)
    print(" drained", wait_drained())
    missed = [i for i in range(N) if ask(f"Worker/worker-{i}", "state")["tasks"].get("herd-1") != 1]
    check("herd every worker processed herd-1 exactly once", not missed, missed[:5])

if "wave" in which:
    r = ask(L, "config_wave_deploy", {"workers": N, "wave_size": 20, "version": "2.1.0"})
    print("config_wave_deploy", r)
    print(" drained", wait_drained())
    stale = [i for i in range(N) if ask(f"Worker/worker-{i}", "state")["config_version"] != "2.1.0"]
    check("wave every worker config_version 2.1.0", not stale, stale[:5])
    served = ask("ConfigServer/cs-0", "state")["served"] + ask("ConfigServer/cs-1", "state")["served"]
    check(
        "wave downloads served once per worker",
        sorted(served) == sorted(f"Worker/worker-{i}" for i in range(N)),
        f"{len(served)} served",
    )
    check("wave C > 0", r["config_server_queued"] > 0, r["config_server_queued"])
    check("wave DLQ empty", not dead(), dead()[:3])

if "hb" in which:
    for _ in range(3):
        r = ask(L, "send_heartbeat", {"workers": N})
        print("send_heartbeat", r)
    S = r["seq"]
    print(" drained", wait_drained())
    backwards = []
    for i in range(N):
        h = ask(f"Worker/worker-{i}", "state")["heartbeats"]
        if not h or h[-1] != S or any(a >= b for a, b in itertools.pairwise(h)):
            backwards.append((i, h))
    check(f"heartbeat every worker ends with {S}, never backwards", not backwards, backwards[:3])

if "burst" in which:
    r = ask(L, "heartbeat_burst", {"count": 50})
    print("heartbeat_burst", r)
    print(" drained", wait_drained())
    s = ask(L, "heartbeats")["seqs"]
    print(" leader seqs", s)
    check(
        "burst 1<=len<=10, increasing, last 50",
        1 <= len(s) <= 10 and all(a < b for a, b in itertools.pairwise(s)) and s[-1] == 50,
    )

if "tel" in which:
    r = ask(L, "telemetry_test", {"count": 200})
    print("telemetry_test", r)
    print(" drained", wait_drained())
    st = ask("TelemetryCollector/main", "state")
    check(
        "telemetry f+o==count, o>0", r["fast_path_success"] + r["outbox_fallback"] == 200 and r["outbox_fallback"] > 0
    )
    check(
        "telemetry every seq once",
        sorted(st["telemetry"]) == list(range(200)),
        f"{len(st['telemetry'])} seqs, bursts={st['bursts']}",
    )

if "fw" in which:
    r = ask(L, "firmware_rollout", {"devices": 10, "count": 20})
    print("firmware_rollout", r)
    print(" drained", wait_drained())
    wrong = [(d, f) for d in range(10) if (f := ask(f"Device/dev-{d}", "state")["firmware"]) != list(range(20))]
    check("firmware every device [0..19] in order", not wrong, wrong[:2])

if "poison" in which:
    r = ask(L, "poison", {})
    print("poison", r)
    time.sleep(3)
    print(" dead", dead())
sys.exit(1 if failed else 0)
