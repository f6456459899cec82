#!/usr/bin/env python3
"""Peer driver: redis-py's Lock (Debian python3-redis) in dlock-bench's scenarios 2 and 3.

Prints one JSON document on stdout (fields: bench/peers/README.md); dlock-bench
--peer-results merges it into its table, judged by the same targets as dlock.

  2 uncontended  acquire+release pairs/s on distinct keys, N threads sharing one redis.Redis
                 (its connection pool), Lock with its defaults
  3 contended    8 workers in >= 2 processes (os.fork, each its own redis.Redis after the fork),
                 one key, each holding 1 ms then asking again

Handoff latency is measured as in dlock-bench: release issued -> the next worker's acquire
returning, both on CLOCK_MONOTONIC (time.monotonic_ns, comparable across processes). Each worker
logs (acquired, release issued) pairs; the parent merges them in time order (the lock makes the
intervals disjoint), so consecutive entries of different workers are a handoff.

Defaults: Lock(timeout=None, sleep=0.1, blocking=True). `--sleep S` runs the contended scenario
with another polling interval (the setting redis-py documents for how often a blocked acquire
retries); the library is otherwise untouched.
"""
import argparse
import json
import mmap
import os
import re
import struct
import sys
import tempfile
import threading
import time

try:
    import redis
    import redis.lock
except ImportError:  # reported as a skipped peer, not a crash
    redis = None


def now_ns():
    return time.monotonic_ns()


def commandstats(r):
    out = {}
    for name, v in r.info("commandstats").items():
        if isinstance(v, dict) and "calls" in v:
            out[name.removeprefix("cmdstat_")] = int(v["calls"])
    return out


def delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in after if after[k] > before.get(k, 0)}


def script_commands():
    """The command names the Lock's own Lua scripts call (read from the installed library)."""
    names = set()
    for attr in ("LUA_RELEASE_SCRIPT", "LUA_EXTEND_SCRIPT", "LUA_REACQUIRE_SCRIPT"):
        names.update(n.lower() for n in re.findall(r"redis\.p?call\(\s*['\"](\w+)['\"]", getattr(redis.lock.Lock, attr, "")))
    return sorted(names)


def quantile(sorted_values, q):
    if not sorted_values:
        return 0.0
    import math
    i = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


# --- scenario 2 ---------------------------------------------------------------------------


def uncontended(url, threads, warmup, duration):
    client = redis.Redis.from_url(url)
    admin = redis.Redis.from_url(url)
    counts = [0] * threads
    stop = threading.Event()
    errors = [0]

    def worker(i):
        lock = client.lock("bench:py:u:%d" % i)  # defaults
        while not stop.is_set():
            try:
                lock.acquire()
                lock.release()
                counts[i] += 1
            except redis.exceptions.RedisError as e:
                errors[0] += 1
                print("redis-py uncontended: %s" % e, file=sys.stderr)
                time.sleep(0.01)

    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    time.sleep(warmup)
    before = commandstats(admin)
    c0, t0 = sum(counts), now_ns()
    time.sleep(duration)
    c1, t1 = sum(counts), now_ns()
    after = commandstats(admin)
    stop.set()
    for t in pool:
        t.join()
    pairs = c1 - c0
    return {"pairs_per_second": pairs / ((t1 - t0) / 1e9), "pairs": pairs, "errors": errors[0],
            "commands": delta(before, after)}


# --- scenario 3 ---------------------------------------------------------------------------

GO, STOP = 0, 4  # offsets of int32 flags in the shared page


def contended_child(url, proc, processes, workers, hold_us, sleep_s, flags, logdir):
    client = redis.Redis.from_url(url)  # after fork: this process's own client
    logs = {}

    def worker(w):
        lock = client.lock("bench:py:contended", sleep=sleep_s)
        log = logs.setdefault(w, [])
        errors = 0
        while struct.unpack_from("i", flags, GO)[0] == 0:
            time.sleep(0.0002)
        while struct.unpack_from("i", flags, STOP)[0] == 0:
            try:
                lock.acquire()
            except redis.exceptions.RedisError:
                errors += 1
                time.sleep(0.01)
                continue
            acquired = now_ns()
            time.sleep(hold_us / 1e6)
            released = now_ns()
            log.append((acquired, released))
            try:
                lock.release()
            except redis.exceptions.RedisError:
                errors += 1
        logs[w] = log
        logs[("errors", w)] = errors

    mine = [w for w in range(workers) if w % processes == proc]
    threads = [threading.Thread(target=worker, args=(w,)) for w in mine]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(os.path.join(logdir, "p%d.json" % proc), "w") as f:
        json.dump({"logs": {str(w): logs[w] for w in mine}, "errors": sum(logs[("errors", w)] for w in mine)}, f)


def contended(url, processes, workers, hold_us, sleep_s, warmup, duration):
    admin = redis.Redis.from_url(url)
    admin.delete("bench:py:contended")
    flags = mmap.mmap(-1, mmap.PAGESIZE)  # anonymous, MAP_SHARED: seen by the forked children
    logdir = tempfile.mkdtemp(prefix="dlock-bench-py.")
    sys.stdout.flush()
    sys.stderr.flush()
    pids = []
    for p in range(processes):
        pid = os.fork()
        if pid == 0:
            rc = 0
            try:
                contended_child(url, p, processes, workers, hold_us, sleep_s, flags, logdir)
            except BaseException as e:  # noqa: BLE001 - a child must always _exit
                print("redis-py contended worker process: %r" % e, file=sys.stderr)
                rc = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        pids.append(pid)
    time.sleep(0.3)  # connections up
    struct.pack_into("i", flags, GO, 1)
    time.sleep(warmup)
    before = commandstats(admin)
    t0 = now_ns()
    time.sleep(duration)
    t1 = now_ns()
    after = commandstats(admin)
    struct.pack_into("i", flags, STOP, 1)
    deadline = time.monotonic() + 30 + sleep_s * workers
    for pid in pids:
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                break
            time.sleep(0.01)
    events, errors = [], 0
    for p in range(processes):
        path = os.path.join(logdir, "p%d.json" % p)
        if not os.path.exists(path):
            raise RuntimeError("contended worker process %d left no results" % p)
        with open(path) as f:
            doc = json.load(f)
        errors += doc["errors"]
        for w, log in doc["logs"].items():
            events.extend((a, r, int(w)) for a, r in log)
        os.unlink(path)
    os.rmdir(logdir)
    return summarize_contended(events, workers, t0, t1, before, after, errors)


def summarize_contended(events, workers, t0, t1, before, after, errors):
    events.sort()
    per_worker = [0] * workers
    held = 0
    handoffs = []
    overlaps = 0
    for i, (acq, rel, w) in enumerate(events):
        if not t0 <= acq <= t1:
            continue
        per_worker[w] += 1
        held += rel - acq
        if i > 0:
            pacq, prel, pw = events[i - 1]
            if prel > acq:
                overlaps += 1  # two holders at once: would be a safety violation
            elif pw != w:
                handoffs.append((acq - prel) / 1e3)
    handoffs.sort()
    n = sum(per_worker)
    return {
        "acquisitions_per_second": n / ((t1 - t0) / 1e9),
        "acquisitions": n,
        "utilisation": held / (t1 - t0),
        "handoff_p50_us": quantile(handoffs, 0.5),
        "handoff_p99_us": quantile(handoffs, 0.99),
        "handoff_max_us": handoffs[-1] if handoffs else 0,
        "fairness": (min(per_worker) / max(per_worker)) if max(per_worker) else 0,
        "per_worker": per_worker,
        "overlaps": overlaps,
        "errors": errors,
        "commands": delta(before, after),
        "handoff_samples_us": handoffs,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--redis", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=float)
    ap.add_argument("--duration", type=float)
    ap.add_argument("--contended-seconds", type=float)
    ap.add_argument("--threads", default="1,8,64")
    ap.add_argument("--contended-processes", default="2")
    ap.add_argument("--contended-workers", type=int, default=8)
    ap.add_argument("--hold-us", type=int, default=1000)
    ap.add_argument("--sleep", type=float, help="Lock(sleep=...) for the contended scenario (default: the library's)")
    ap.add_argument("--no-uncontended", action="store_true")
    ap.add_argument("--samples", help="write the contended handoff latencies (us, one per line) here")
    a = ap.parse_args()
    warmup = a.warmup if a.warmup is not None else (0.2 if a.quick else 0.5)
    duration = a.duration if a.duration is not None else (1.0 if a.quick else 3.0)
    cdur = a.contended_seconds if a.contended_seconds is not None else (2.0 if a.quick else 5.0)

    custom_sleep = a.sleep is not None
    doc = {"library": "redis-py Lock" + (" (sleep=%g s)" % a.sleep if custom_sleep else ""),
           "slug": "redis-py" + ("-sleep%dus" % round(a.sleep * 1e6) if custom_sleep else ""),
           "callers_word": "thread"}
    if redis is None:
        doc["skipped"] = "python3-redis is not installed (scripts/install-deps bench installs it)"
        print(json.dumps(doc))
        return 0
    default_sleep = redis.lock.Lock.__init__.__defaults__[1]
    sleep_s = a.sleep if custom_sleep else default_sleep
    doc.update({
        "version": redis.__version__,
        "settings": "Lock defaults: timeout=None, sleep=%g s, blocking=True; %s" % (
            sleep_s if custom_sleep else default_sleep,
            "contended with sleep=%g s" % sleep_s if custom_sleep else "one redis.Redis (connection pool) per process"),
        "script_commands": script_commands(),
        "uncontended": [],
        "contended": [],
    })
    if not a.no_uncontended:
        for t in [int(x) for x in a.threads.split(",")]:
            runs = []
            for r in range(a.repeats):
                res = uncontended(a.redis, t, warmup, duration)
                print("  %s uncontended %d threads: %.0f pairs/s" % (doc["library"], t, res["pairs_per_second"]),
                      file=sys.stderr)
                runs.append(res)
            doc["uncontended"].append({"callers": t, "runs": runs})
    samples = []
    for p in [int(x) for x in a.contended_processes.split(",")]:
        runs = []
        for r in range(a.repeats):
            res = contended(a.redis, p, a.contended_workers, a.hold_us, sleep_s, warmup, cdur)
            samples.extend(res.pop("handoff_samples_us"))
            print("  %s contended %d processes: %.0f acq/s, util %.1f%%, p50 %.0f us, p99 %.0f us, fairness %.2f"
                  % (doc["library"], p, res["acquisitions_per_second"], 100 * res["utilisation"],
                     res["handoff_p50_us"], res["handoff_p99_us"], res["fairness"]), file=sys.stderr)
            runs.append(res)
        doc["contended"].append({"processes": p, "workers": a.contended_workers, "runs": runs})
    if a.samples:
        with open(a.samples, "w") as f:
            f.writelines("%.1f\n" % s for s in samples)
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
