#!/usr/bin/env python3
# The load and the checker of bench/soak (run that, not this): producers
# pushing at a fixed offered rate over HTTP, consumer groups popping and
# acknowledging with nacks and abandoned leases, and an exact model of what
# each group must complete.  Standard library only.
#
# Producers (open loop).  Each producer thread has a schedule: request k is
# due at start + k / (its share of the rate); it sends when due, or at once
# when behind, and a request's latency counts from when it was due, so a
# slow broker shows as latency rather than as a lower offered rate
# (coordinated omission).  Item i of a producer goes to partition p<i mod P>
# as transactionId "s-<producer>-<partition>-<n>", n counting that
# producer's items of that partition from 0.  A request not answered with a
# verdict for every item (a connection error, a 5xx) is sent again as it
# was: its transactionIds make that safe, and an item stored the first time
# is answered "duplicate" naming the original.  An item counts as stored
# when answered "queued" or "duplicate"; anything else is an error.
#
# Consumers.  Each group's threads pop (wait=true) and go through each
# partition's messages in order: the first delivery of one message in
# NACK_EVERY is acknowledged "failed" (redelivered at once), the rest of
# that partition's batch is left for the redelivery; the first delivery of
# one in ABANDON_EVERY is not acknowledged at all, nor anything after it in
# the batch, so its lease expires (leaseTime) and the batch comes back;
# everything else is acknowledged "completed" in one ack batch.
#
# The model.  For every (group, partition, producer), a delivery must be
# n = the last completed + 1 (or the next after one delivered before it in
# the same answer), and a completion (an ack item answered success and not
# noop) must be n = the last completed + 1:
# a message completed twice, out of order or after a gap is a violation.
# A delivery of n at or below the last completed is a duplicate delivery.
# At the end (producers stop, consumers drain), every group must have
# completed exactly the items stored: anything short is loss.
#
# Every SAMPLE seconds one row: offered and stored msg/s, push p50/p99/max
# from due time, ack p99, completions/s per group, backlog, each broker
# worker's private memory (RssAnon), the log tables' size, what retention
# removed, lease expiries, violations so far.  Rows go to stdout as a
# Markdown table and to --json for bench/soak's plot.
import argparse
import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time


def parse_args():
    a = argparse.ArgumentParser()
    a.add_argument("--plot", help="draw the rows of --json as this SVG and exit")
    a.add_argument("--port", type=int)
    a.add_argument("--seconds", type=float, default=1800)
    a.add_argument("--rate", type=float, default=1000, help="messages/s offered")
    a.add_argument("--items", type=int, default=10, help="items per push request")
    a.add_argument("--partitions", type=int, default=50)
    a.add_argument("--producers", type=int, default=8)
    a.add_argument("--groups", type=int, default=2)
    a.add_argument("--consumers", type=int, default=4, help="per group")
    a.add_argument("--batch", type=int, default=50)
    a.add_argument("--nack-every", type=int, default=200)
    a.add_argument("--abandon-every", type=int, default=500)
    a.add_argument("--drain", type=float, default=180, help="seconds to finish after the producers stop")
    a.add_argument("--sample", type=float, default=60)
    a.add_argument("--postmaster", type=int)
    a.add_argument("--psql", help="a psql command line, run by the shell")
    a.add_argument("--json", required=True)
    return a.parse_args()


ARGS = parse_args()
QUEUE = "soak"
LOCK = threading.Lock()
STOP_PRODUCING = threading.Event()
STOP_CONSUMING = threading.Event()


class Window:
    """Latencies (ms) and counts since the last sample."""

    def __init__(self):
        self.push, self.ack = [], []
        self.stored = 0
        self.completed = {}

    @staticmethod
    def pct(xs, p):
        if not xs:
            return 0.0
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(p * len(xs)))]


WIN = Window()
TOTAL = {"stored": 0, "push_errors": 0, "bad_verdicts": 0, "resent": 0, "pops": 0, "delivered": 0,
         "nacks": 0, "abandoned": 0, "ack_refused": 0, "noop": 0, "dup_deliveries": 0,
         "violations": 0, "completed": 0}
PRODUCED = {}        # (partition, producer) -> items stored
LAST = {}            # (group, partition, producer) -> last completed n
DECIDED = set()      # (group, txn) whose first delivery was nacked or abandoned
VIOLATIONS = []      # the first few, for the report


def violation(text):
    TOTAL["violations"] += 1
    if len(VIOLATIONS) < 20:
        VIOLATIONS.append(text)


def connect():
    return http.client.HTTPConnection("127.0.0.1", ARGS.port, timeout=30)


def request(conn, method, path, body=None):
    """(status, body) or None on a connection failure; reconnects next time."""
    try:
        conn.request(method, path, body=body,
                     headers={"Content-Type": "application/json"} if body is not None else {})
        r = conn.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException):
        conn.close()
        return None


# ---------------------------------------------------------------- producers

def producer(k):
    conn = connect()
    share = ARGS.rate / ARGS.items / ARGS.producers      # requests/s of this producer
    start = time.monotonic()
    counters = [0] * ARGS.partitions
    item = 0
    req = 0
    while not STOP_PRODUCING.is_set():
        due = start + req / share
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        req += 1
        keys = []
        items = []
        for _ in range(ARGS.items):
            p = item % ARGS.partitions
            item += 1
            txn = "s-%d-%d-%d" % (k, p, counters[p])
            counters[p] += 1
            keys.append((p, txn))
            items.append({"queue": QUEUE, "partition": "p%d" % p, "transactionId": txn,
                          "payload": {"producer": k, "partition": p, "pad": "x" * 200}})
        body = json.dumps({"items": items})
        while True:
            answer = request(conn, "POST", "/api/v1/push", body)
            verdicts = None
            if answer is not None and answer[0] in (200, 201):
                try:
                    verdicts = json.loads(answer[1])
                except ValueError:
                    verdicts = None
            if verdicts is not None and len(verdicts) == len(items):
                break
            with LOCK:
                TOTAL["push_errors"] += 1
                TOTAL["resent"] += 1
            if STOP_CONSUMING.is_set():
                return
            time.sleep(0.2)
        latency = (time.monotonic() - due) * 1000
        with LOCK:
            WIN.push.append(latency)
            for (p, txn), v in zip(keys, verdicts):
                if v.get("status") in ("queued", "duplicate"):
                    PRODUCED[(p, k)] = PRODUCED.get((p, k), 0) + 1
                    WIN.stored += 1
                    TOTAL["stored"] += 1
                else:
                    TOTAL["bad_verdicts"] += 1
                    violation("push %s answered %r" % (txn, v))


# ---------------------------------------------------------------- consumers

def split_txn(txn):
    m = re.fullmatch(r"s-(\d+)-(\d+)-(\d+)", txn)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def choose(group, txn, every, salt):
    h = int.from_bytes(hashlib.blake2b((salt + txn).encode(), digest_size=8).digest(), "little")
    return every > 0 and h % every == 0 and (group, txn) not in DECIDED


def plan_acks(group, messages):
    """The ack items for one pop's messages, partition by partition, in order."""
    runs = {}
    for m in messages:
        runs.setdefault(m["partitionId"], []).append(m)
    acks = []
    for pid, run in runs.items():
        expect = {}
        for m in run:
            txn = m["transactionId"]
            parsed = split_txn(txn)
            if parsed is None:
                violation("delivered a message that is not the soak's: %s" % txn)
                continue
            k, p, n = parsed
            key = (group, p, k)
            with LOCK:
                TOTAL["delivered"] += 1
                last = LAST.get(key, -1)
                want = expect.get(key, last + 1)
                if n <= last:
                    TOTAL["dup_deliveries"] += 1
                    violation("%s: %s delivered again after it was completed" % (group, txn))
                elif n != want:
                    violation("%s: %s delivered where n=%d was due" % (group, txn, want))
                expect[key] = n + 1
                nack = choose(group, txn, ARGS.nack_every, "nack")
                abandon = not nack and choose(group, txn, ARGS.abandon_every, "abandon")
                if nack or abandon:
                    DECIDED.add((group, txn))
            if abandon:
                with LOCK:
                    TOTAL["abandoned"] += 1
                break
            item = {"transactionId": txn, "partitionId": pid, "leaseId": m.get("leaseId", "")}
            if nack:
                item["status"] = "failed"
                item["error"] = "soak nack"
                acks.append((item, None))
                with LOCK:
                    TOTAL["nacks"] += 1
                break
            item["status"] = "completed"
            acks.append((item, key + (n,)))
    return acks


def record_acks(group, acks, answer):
    for (item, done), v in zip(acks, answer):
        if done is None:
            continue
        g, p, k, n = done
        with LOCK:
            if not v.get("success"):
                TOTAL["ack_refused"] += 1       # a lease that expired meanwhile: redelivered
                continue
            if v.get("noop"):
                TOTAL["noop"] += 1
                continue
            key = (g, p, k)
            last = LAST.get(key, -1)
            if n != last + 1:
                violation("%s: %s completed after n=%d" % (g, item["transactionId"], last))
            LAST[key] = max(last, n)
            TOTAL["completed"] += 1
            WIN.completed[g] = WIN.completed.get(g, 0) + 1


PARTITION_LOCKS = {}


def partition_lock(group, pid):
    """One client-side lock per (group, partition).  The broker leases a
    partition to one consumer at a time, but the next consumer's pop can be
    answered before the previous one has read its ack's answer: the lock
    makes the model see the partition's deliveries in the broker's order."""
    with LOCK:
        return PARTITION_LOCKS.setdefault((group, pid), threading.Lock())


def consume_once(conn, group, messages):
    acks = plan_acks(group, messages)
    if not acks:
        return True
    body = json.dumps({"consumerGroup": group, "acknowledgments": [a for a, _ in acks]})
    t0 = time.monotonic()
    while True:
        answer = request(conn, "POST", "/api/v1/ack/batch", body)
        if answer is not None and answer[0] == 200:
            break
        if STOP_CONSUMING.is_set():
            return False
        time.sleep(0.2)             # sent again: what was applied answers noop
    with LOCK:
        WIN.ack.append((time.monotonic() - t0) * 1000)
    record_acks(group, acks, json.loads(answer[1]))
    return True


def consumer(group):
    conn = connect()
    path = "/api/v1/pop/queue/%s?batch=%d&wait=true&timeout=1000&consumerGroup=%s" % (
        QUEUE, ARGS.batch, group)
    while not STOP_CONSUMING.is_set():
        answer = request(conn, "GET", path)
        if answer is None or answer[0] != 200:
            if answer is None or answer[0] >= 500:
                time.sleep(0.2)
            continue
        with LOCK:
            TOTAL["pops"] += 1
        messages = json.loads(answer[1]).get("messages", [])
        locks = [partition_lock(group, pid) for pid in sorted({m["partitionId"] for m in messages})]
        for lock in locks:
            lock.acquire()
        try:
            if not consume_once(conn, group, messages):
                return
        finally:
            for lock in locks:
                lock.release()


# ---------------------------------------------------------------- sampling

def worker_memory():
    """Private memory (RssAnon, MB) of each broker process, by title."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != ARGS.postmaster:
                continue
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                title = f.read().split(b"\0")[0].decode(errors="replace")
            m = re.match(r"postgres: (?:[^:]+: )?(queen \w+ ?\d*)", title)
            if not m:
                continue
            with open("/proc/%s/status" % pid) as f:
                anon = int(re.search(r"RssAnon:\s+(\d+)", f.read()).group(1))
            out[m.group(1).strip()] = round(anon / 1024, 1)
        except (OSError, AttributeError, IndexError, ValueError):
            continue
    return out


SQL = """SELECT round(pg_total_relation_size('queen.log_segments') / 1048576.0, 1),
       round(pg_total_relation_size('queen.log_txns') / 1048576.0, 1),
       round(pg_total_relation_size('queen.log_dedup') / 1048576.0, 1),
       (SELECT coalesce(sum(last_offset - log_start + 1), 0) FROM queen.log_partitions),
       %s"""


def sample(t0, last_t, rows):
    now = time.monotonic()
    with LOCK:
        win = WIN.__dict__.copy()
        WIN.__init__()
        totals = dict(TOTAL)
    span = now - last_t
    depth = " + ".join("queen.depth('soak', 'g%d')" % (i + 1) for i in range(ARGS.groups))
    sizes = subprocess.run(ARGS.psql + " -At -F ' ' -c \"%s\"" % (SQL % depth).replace("\n", " "),
                           shell=True, capture_output=True, text=True).stdout.split()
    if len(sizes) != 5:
        sizes = [None] * 5
    metrics = {}
    answer = request(connect(), "GET", "/metrics/prometheus")
    if answer is not None:
        for line in answer[1].decode().splitlines():
            parts = line.split()
            if len(parts) == 2 and not line.startswith("#"):
                metrics[parts[0]] = float(parts[1])
    mem = worker_memory()
    row = {
        "after": round(now - t0),
        "stored_per_s": round(win["stored"] / span),
        "push_p50": round(Window.pct(win["push"], 0.5), 1),
        "push_p99": round(Window.pct(win["push"], 0.99), 1),
        "push_max": round(max(win["push"], default=0), 1),
        "ack_p99": round(Window.pct(win["ack"], 0.99), 1),
        "completed_per_s": {g: round(c / span) for g, c in sorted(win["completed"].items())},
        "log_segments_mb": sizes[0] and float(sizes[0]),
        "log_txns_mb": sizes[1] and float(sizes[1]),
        "log_dedup_mb": sizes[2] and float(sizes[2]),
        "retained": sizes[3] and int(sizes[3]),
        "backlog": sizes[4] and int(sizes[4]),
        "retention_removed": int(sum(v for k, v in metrics.items()
                                     if k.startswith("queen_retention_messages_deleted_total"))),
        "lease_expiries": int(metrics.get("queen_lease_expiries_total", 0)),
        "memory_mb": mem,
        "violations": totals["violations"],
    }
    rows.append(row)
    kinds = {}
    for name, mb in mem.items():
        kind = name.rsplit(" ", 1)[0] if name[-1].isdigit() else name
        kinds[kind] = max(kinds.get(kind, 0), mb)
    print("| %d s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |" % (
        row["after"], row["stored_per_s"], row["push_p50"], row["push_p99"], row["push_max"],
        row["ack_p99"], " / ".join(str(v) for v in row["completed_per_s"].values()) or "0",
        row["backlog"], row["retained"], " / ".join("%s" % kinds.get(k, "-") for k in ("queen listener", "queen shard",
                                                                      "queen maintenance")),
        row["log_segments_mb"], row["log_txns_mb"], row["log_dedup_mb"], row["retention_removed"],
        row["lease_expiries"], row["violations"]), flush=True)
    return now


# ---------------------------------------------------------------- the plot

PANELS = [
    ("private memory of the broker's processes (RssAnon, MB)",
     lambda r: {k: v for k, v in r["memory_mb"].items()}),
    ("log tables on disk (MB)",
     lambda r: {"log_segments": r["log_segments_mb"], "log_txns": r["log_txns_mb"],
                "log_dedup": r["log_dedup_mb"]}),
    ("push latency from its due time (ms)",
     lambda r: {"p50": r["push_p50"], "p99": r["push_p99"]}),
]
COLOURS = ["#c0392b", "#2471a3", "#229954", "#b9770e", "#7d3c98", "#17a589", "#566573", "#d35400"]


def plot(rows, out):
    W, PH, L, R, T, GAP = 800, 190, 70, 190, 30, 55
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">'
           % (W, T + len(PANELS) * (PH + GAP))]
    xmax = max(r["after"] for r in rows) or 1
    for i, (title, series_of) in enumerate(PANELS):
        y0 = T + i * (PH + GAP)
        series = {}
        for r in rows:
            for name, v in series_of(r).items():
                if v is not None:
                    series.setdefault(name, []).append((r["after"], v))
        ymax = max((v for pts in series.values() for _, v in pts), default=1) * 1.15 or 1
        sx = lambda x: L + (W - L - R) * x / xmax
        sy = lambda y: y0 + PH - PH * y / ymax
        svg.append('<text x="%d" y="%d" font-size="13">%s</text>' % (L, y0 - 8, title))
        svg.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (L, y0 + PH, W - R, y0 + PH))
        svg.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (L, y0, L, y0 + PH))
        for k in range(5):
            y = ymax * k / 4
            svg.append('<text x="%d" y="%.1f" text-anchor="end" font-size="11">%.4g</text>' % (L - 6, sy(y) + 4, y))
        for k in range(0, xmax + 1, 300 if xmax > 600 else 60):
            svg.append('<text x="%.1f" y="%d" text-anchor="middle" font-size="11">%d s</text>' % (sx(k), y0 + PH + 14, k))
        for j, (name, pts) in enumerate(sorted(series.items())):
            c = COLOURS[j % len(COLOURS)]
            svg.append('<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>'
                       % (c, " ".join("%.1f,%.1f" % (sx(x), sy(y)) for x, y in pts)))
            svg.append('<text x="%d" y="%d" font-size="11" fill="%s">%s</text>' % (W - R + 8, y0 + 12 + 14 * j, c, name))
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


def main():
    if ARGS.plot:
        with open(ARGS.json) as f:
            plot(json.load(f)["rows"], ARGS.plot)
        return
    groups = ["g%d" % (i + 1) for i in range(ARGS.groups)]
    print("offered %.0f msg/s: %d producers, %d items a request over %d partitions; %d groups x %d "
          "consumers (pop %d, wait); a nack in %d first deliveries, an abandoned lease in %d"
          % (ARGS.rate, ARGS.producers, ARGS.items, ARGS.partitions, ARGS.groups, ARGS.consumers,
             ARGS.batch, ARGS.nack_every, ARGS.abandon_every))
    print()
    print("| after | stored msg/s | push p50 ms | push p99 ms | push max ms | ack p99 ms | completed msg/s "
          "by group | backlog (all groups) | retained messages | RssAnon MB: listener / shard / maintenance (largest) | log_segments MB "
          "| log_txns MB | log_dedup MB | retention removed | lease expiries | violations |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    threads = [threading.Thread(target=consumer, args=(g,), daemon=True)
               for g in groups for _ in range(ARGS.consumers)]
    threads += [threading.Thread(target=producer, args=(k,), daemon=True) for k in range(ARGS.producers)]
    for t in threads:
        t.start()
    t0 = last = time.monotonic()
    rows = []
    while time.monotonic() - t0 < ARGS.seconds:
        time.sleep(max(0.0, min(ARGS.sample, ARGS.seconds - (time.monotonic() - t0))))
        last = sample(t0, last, rows)
    STOP_PRODUCING.set()
    for t in threads[-ARGS.producers:]:
        t.join()
    # drain: until every group completed everything stored, or the deadline
    deadline = time.monotonic() + ARGS.drain
    while time.monotonic() < deadline:
        with LOCK:
            missing = sum(max(0, n - 1 - LAST.get((g, p, k), -1))
                          for (p, k), n in PRODUCED.items() for g in groups)
        if missing == 0:
            break
        time.sleep(1)
    STOP_CONSUMING.set()
    with LOCK:
        lost = sum(max(0, n - 1 - LAST.get((g, p, k), -1)) for (p, k), n in PRODUCED.items() for g in groups)
        extra = sum(1 for (g, p, k), last in LAST.items() if last >= PRODUCED.get((p, k), 0))
        totals = dict(TOTAL)
    with open(ARGS.json, "w") as f:
        json.dump({"rows": rows, "totals": totals, "lost": lost, "extra": extra,
                   "violations": VIOLATIONS}, f)
    print()
    print("stored %d messages; %d groups completed %d (each must complete every stored one once); "
          "%d pops, %d deliveries, %d nacks, %d leases abandoned, %d acks refused (lease gone, "
          "redelivered), %d noop; %d pushes sent again after an error"
          % (totals["stored"], len(groups), totals["completed"], totals["pops"], totals["delivered"],
             totals["nacks"], totals["abandoned"], totals["ack_refused"], totals["noop"], totals["resent"]))
    print("loss: %d, completed beyond what was stored: %d, duplicate deliveries: %d, order and exactly-once "
          "violations: %d, push items not stored: %d"
          % (lost, extra, totals["dup_deliveries"], totals["violations"], totals["bad_verdicts"]))
    for v in VIOLATIONS:
        print("  " + v)
    sys.exit(0 if lost == 0 and extra == 0 and totals["violations"] == 0 else 1)


if __name__ == "__main__":
    main()
