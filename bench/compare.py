#!/usr/bin/env python3
"""Prints cowkv/lmdb ratios per workload from engine_bench JSON output.

Usage: python3 bench/compare.py /tmp/bench.json   (or: ... | python3 bench/compare.py)

Pairs BM_<Workload>/cowkv with BM_<Workload>/lmdb. Throughput workloads compare
items_per_second (ratio > 1: cowkv faster); SmallCommit compares p50/p99
latency (ratio < 1: cowkv faster) and shows cowkv's flushes_per_commit. With
--benchmark_repetitions the "mean" aggregate is used. Exit status 1 when a
target is missed or a benchmark reported an error.
"""
import json
import sys

# workload -> (metric, minimum cowkv/lmdb ratio)
THROUGHPUT_TARGETS = {
    "FillSeq": None,
    "FillRandom": 1.0,
    "ReadRandom": 0.7,
    "Scan": 0.7,
}
MAX_FLUSHES_PER_COMMIT = 2.0


def load(stream):
    """-> {workload: {system: run dict}}, [error strings]"""
    data = json.load(stream)
    runs, errors = {}, []
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        parts = name.split("/")
        if len(parts) < 2 or not parts[0].startswith("BM_"):
            continue
        workload, system = parts[0][3:], parts[1]
        if b.get("error_occurred"):
            errors.append("%s: %s" % (name, b.get("error_message", "?")))
            continue
        is_agg = b.get("run_type") == "aggregate"
        if is_agg and b.get("aggregate_name") != "mean":
            continue
        slot = runs.setdefault(workload, {})
        # Prefer the mean aggregate; otherwise keep the last iteration run.
        if is_agg or not slot.get(system, {}).get("run_type") == "aggregate":
            slot[system] = b
    return data.get("context", {}), runs, errors


def fmt(x):
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return "%.3g%s" % (x / div, unit)
    return "%.3g" % x


def main():
    stream = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin
    context, runs, errors = load(stream)
    ok = not errors
    print("num=%s  key_bytes=%s  value_bytes=%s  lmdb_read_txn=%s" % (
        context.get("num", "?"), context.get("key_bytes", "?"),
        context.get("value_bytes", "?"), context.get("lmdb_read_txn", "?")))
    print("%-12s %14s %14s %8s  %s" % ("workload", "cowkv", "lmdb", "ratio", "target"))
    for workload, target in THROUGHPUT_TARGETS.items():
        c, l = runs.get(workload, {}).get("cowkv"), runs.get(workload, {}).get("lmdb")
        if not c or not l:
            print("%-12s missing %s" % (workload, "cowkv" if not c else "lmdb"))
            continue
        cv, lv = c["items_per_second"], l["items_per_second"]
        ratio = cv / lv
        verdict = ""
        if target is not None:
            met = ratio >= target
            ok &= met
            verdict = ">= %.1fx %s" % (target, "PASS" if met else "FAIL")
        print("%-12s %12s/s %12s/s %7.2fx  %s" % (workload, fmt(cv), fmt(lv), ratio, verdict))

    sc = runs.get("SmallCommit", {})
    c, l = sc.get("cowkv"), sc.get("lmdb")
    if c and l:
        for key in ("p50_us", "p99_us"):
            print("%-12s %12.0fus %12.0fus %7.2fx  (latency: lower is better)" % (
                "Commit " + key[:3], c[key], l[key], c[key] / l[key]))
        fpc = c.get("flushes_per_commit")
        if fpc is not None:
            met = fpc <= MAX_FLUSHES_PER_COMMIT
            ok &= met
            print("%-12s flushes_per_commit=%.2f  <= %g %s" % (
                "Commit", fpc, MAX_FLUSHES_PER_COMMIT, "PASS" if met else "FAIL"))
    else:
        print("SmallCommit  missing")
    dev = runs.get("Fdatasync", {}).get("device")
    if dev:
        print("%-12s p50=%.0fus p99=%.0fus (4 KiB pwrite + fdatasync)" % (
            "Fdatasync", dev["p50_us"], dev["p99_us"]))
    for e in errors:
        print("ERROR " + e)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
