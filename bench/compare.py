#!/usr/bin/env python3
"""Benchmark ratios: engine_bench's targets, and regressions against a baseline.

Two modes.

1. engine_bench targets (the original mode, unchanged):
     python3 bench/compare.py /tmp/bench.json   (or: ... | python3 bench/compare.py)
   Pairs BM_<Workload>/cowkv with BM_<Workload>/lmdb. Throughput workloads
   compare items_per_second (ratio > 1: cowkv faster); SmallCommit compares
   p50/p99 latency (ratio < 1: cowkv faster) and shows cowkv's
   flushes_per_commit. With --benchmark_repetitions the "mean" aggregate is
   used. Exit status 1 when a target is missed or a benchmark reported an
   error. Given a combined file from tools/bench.sh it reads the engine_bench
   part.

2. Regressions against bench/baseline.json (tools/bench.sh's combined file,
   or one binary's google-benchmark JSON):
     python3 bench/compare.py --check bench-results.json [--threshold 15]
     python3 bench/compare.py --update-baseline bench-results.json
   For every group BM_<Workload>/*[/rest] of a binary, the ratio cowkv/peer
   of the medians over repetitions, from the same run, for every other
   system of the group (lmdb, rocksdb, etcd, or cowkv_<variant>: then the
   ratio says what the optimisation is worth). Metrics: items_per_second
   (or bytes_per_second when a benchmark reports no items; or real_time,
   lower is better, when it reports neither), and the latency counters
   present on both sides: p50_us, p99_us, p99_stall_us, server_cpu_us_per_op,
   server_rss_mib (lower is better). Each ratio is compared with the
   baseline's; every one that moved by more than the threshold is printed,
   as regressed or improved. Exit status 1 if any regressed by more than the
   threshold or any benchmark reported an error. Baseline ratios the run did
   not produce are listed as missing (with why: group not run, cowkv or the
   peer absent, metric absent) without failing; --require-all makes them fail.
   --update-baseline rewrites the baseline (--baseline FILE) with every ratio
   of the results file (--merge keeps the entries the file does not cover;
   a --quick run is refused unless --allow-quick).
"""
import argparse
import json
import os
import sys

import bench_results

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
    if data.get("format") == bench_results.FORMAT:  # tools/bench.sh: its engine_bench part
        part = [r for r in data.get("runs", []) if r.get("binary") == "engine_bench"]
        data = part[0] if part else {}
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


def targets_main(argv):
    stream = open(argv[0]) if argv else sys.stdin
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




# ---- Mode 2: ratios against bench/baseline.json --------------------------------------

BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline.json")
DEFAULT_THRESHOLD_PCT = 15.0
THROUGHPUT = ("items_per_second", "bytes_per_second")  # the first both sides report
LATENCY = ("p50_us", "p99_us", "p99_stall_us", "server_cpu_us_per_op", "server_rss_mib")
NOT_PEERS = ("cowkv", "device")  # BM_Fdatasync/device has no cowkv to pair with


class Ratio:
    """cowkv/peer of one metric in one group, from the same run."""

    def __init__(self, binary, workload, rest, peer, metric, cowkv, other):
        self.binary, self.workload, self.rest = binary, workload, rest
        self.peer, self.metric = peer, metric
        self.cowkv, self.other = cowkv, other
        self.value = cowkv / other
        self.higher_is_better = metric in THROUGHPUT

    @property
    def key(self):
        return ratio_key(self.binary, self.workload, self.rest, self.peer, self.metric)


def ratio_key(binary, workload, rest, peer, metric):
    """The baseline's key: "<binary> BM_<Workload>/*[/rest] <peer> <metric>"."""
    return "%s %s %s %s" % (binary, bench_results.group_label(workload, rest), peer, metric)


def parse_key(key):
    """ratio_key's inverse: (binary, workload, rest, peer, metric) or None."""
    parts = key.split(" ")
    if len(parts) != 4:
        return None
    parsed = bench_results.parse_name(parts[1])
    if parsed is None or parsed[1] != "*":
        return None
    return parts[0], parsed[0], parsed[2], parts[2], parts[3]


def pair_metrics(cowkv, other):
    """The metrics a ratio is taken of: those both Bench objects report,
    one throughput (or time) metric first, then the latency counters."""
    out = []

    def both(m):
        return cowkv.has(m) and other.has(m)

    throughput = [m for m in THROUGHPUT if both(m)]
    if throughput:
        out.append(throughput[0])
    elif both("real_time"):
        out.append("real_time")
    out.extend(m for m in LATENCY if both(m))
    return out


def ratios(results):
    """{key: Ratio} for every cowkv/peer pair and metric of the results."""
    out = {}
    for (binary, workload, rest), systems in bench_results.collect(results).items():
        cowkv = systems.get("cowkv")
        if cowkv is None or cowkv.errors:
            continue
        for peer, other in systems.items():
            if peer in NOT_PEERS or other.errors:
                continue
            for metric in pair_metrics(cowkv, other):
                c, o = cowkv.median(metric), other.median(metric)
                if o:  # a zero peer value gives no ratio
                    r = Ratio(binary, workload, rest, peer, metric, c, o)
                    out[r.key] = r
    return out


def why_missing(key, groups):
    """Why the results have no ratio for a baseline key."""
    parsed = parse_key(key)
    if parsed is None:
        return "malformed key"
    binary, workload, rest, peer, metric = parsed
    systems = groups.get((binary, workload, rest))
    if systems is None:
        return "not run"
    for system in ("cowkv", peer):
        if system not in systems:
            return "%s missing from the run" % system
        if systems[system].errors:
            return "%s reported an error" % system
    return "%s not reported by both" % metric


def load_baseline(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def context_warnings(baseline, results):
    """Lines naming each context value (e.g. num) that differs from the
    baseline's: ratios depend on the data size, so such a comparison is
    only indicative."""
    out = []
    have = bench_results.contexts(results)
    for binary, want in sorted(baseline.get("context", {}).items()):
        if binary not in have:
            continue
        for k, v in sorted(want.items()):
            got = have[binary].get(k)
            if got is not None and str(got) != str(v):
                out.append("warning: %s %s=%s in this run, %s in the baseline: ratios depend on it"
                           % (binary, k, got, v))
    return out


def classify(ratio, base, threshold):
    """'regressed', 'improved' or None (moved by no more than threshold, a
    fraction). Throughput ratios regress when they fall, latency and time
    ratios when they rise."""
    change = ratio.value / base - 1
    if abs(change) <= threshold:
        return None
    worse = change < 0 if ratio.higher_is_better else change > 0
    return "regressed" if worse else "improved"


def check(results, baseline, threshold, verbose=False, require_all=False, out=None):
    """Prints the comparison (to `out`, default stdout); returns the exit
    status (0 or 1). `threshold` is a fraction (0.15 = 15 %)."""
    out = out or sys.stdout
    current = ratios(results)
    base = baseline.get("ratios", {})
    groups = bench_results.collect(results)
    print("results: %s" % bench_results.describe(results), file=out)
    print("baseline: %s" % baseline.get("comment", "(no comment)"), file=out)
    if results.get("quick"):
        print("warning: a tools/bench.sh --quick run: small data, so its ratios are not those of a "
              "full run and moves against the baseline say little", file=out)
    for line in context_warnings(baseline, results):
        print(line, file=out)
    moved = {"regressed": [], "improved": []}
    steady, missing = [], []
    for key in sorted(base):
        b = base[key]["ratio"]
        r = current.get(key)
        if r is None:
            missing.append("  %s: %s" % (key, why_missing(key, groups)))
            continue
        verdict = classify(r, b, threshold)
        line = "  %s: %.4g -> %.4g (%+.0f%%; %s is better)" % (
            key, b, r.value, (r.value / b - 1) * 100, "higher" if r.higher_is_better else "lower")
        (moved[verdict] if verdict else steady).append(line)
    new = sorted(k for k in current if k not in base)
    print("%d ratio(s) compared, threshold %.0f%%: %d regressed, %d improved, %d within it"
          % (len(base) - len(missing), threshold * 100, len(moved["regressed"]),
             len(moved["improved"]), len(steady)), file=out)
    sections = [("REGRESSED", moved["regressed"]), ("improved", moved["improved"])]
    if verbose:
        sections.append(("within the threshold", steady))
    sections.append(("missing from this run (baseline ratios without a value)", missing))
    for title, lines in sections:
        if lines:
            print(title + ":", file=out)
            for line in lines:
                print(line, file=out)
    if new:
        print("%d ratio(s) not in the baseline%s" % (len(new), ":" if verbose else " (--verbose lists them)"),
              file=out)
        if verbose:
            for k in new:
                print("  %s: %.4g" % (k, current[k].value), file=out)
    errs = bench_results.errors(results)
    for e in errs:
        print("ERROR " + e, file=out)
    failed = bool(moved["regressed"]) or bool(errs) or (require_all and bool(missing))
    return 1 if failed else 0


def update_baseline(results, results_name, path, merge=False, out=None):
    """Rewrites the baseline at `path` with every ratio of `results`."""
    out = out or sys.stdout
    current = ratios(results)
    old = {}
    if merge and os.path.exists(path):
        old = load_baseline(path)
    source = "%s: %s" % (results_name, bench_results.describe(results))
    entries = dict(old.get("ratios", {})) if merge else {}
    for key, r in current.items():
        entries[key] = {"ratio": round(r.value, 6), "source": source}
    context = dict(old.get("context", {})) if merge else {}
    for binary, ctx in bench_results.contexts(results).items():
        context[binary] = bench_results.measured_context(ctx)
    doc = {
        "comment": ("cowkv/peer ratios (medians over repetitions, same run) that "
                    "bench/compare.py --check compares a run with; written by "
                    "--update-baseline%s from %s" % (" --merge" if merge else "", source)),
        "context": context,
        "ratios": dict(sorted(entries.items())),
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote %s: %d ratio(s) (%d from %s)" % (path, len(entries), len(current), results_name),
          file=out)
    return 0


def baseline_main(argv):
    ap = argparse.ArgumentParser(prog="compare.py", description="Ratios against bench/baseline.json.")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", metavar="RESULTS", help="compare RESULTS with the baseline")
    mode.add_argument("--update-baseline", metavar="RESULTS", help="rewrite the baseline from RESULTS")
    ap.add_argument("--baseline", default=BASELINE, help="baseline file (default: bench/baseline.json)")
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT,
                    help="percent a ratio may move before it is reported (default 15)")
    ap.add_argument("--verbose", action="store_true", help="also list ratios within the threshold")
    ap.add_argument("--require-all", action="store_true",
                    help="fail when a baseline ratio is missing from the run")
    ap.add_argument("--merge", action="store_true",
                    help="with --update-baseline: keep entries the results do not cover")
    ap.add_argument("--allow-quick", action="store_true",
                    help="with --update-baseline: accept a tools/bench.sh --quick run")
    args = ap.parse_args(argv)
    if args.threshold < 0:
        ap.error("--threshold must be >= 0")
    path = args.check or args.update_baseline
    results = bench_results.load(path)
    if args.check:
        return check(results, load_baseline(args.baseline), args.threshold / 100, args.verbose,
                     args.require_all)
    if results.get("quick") and not args.allow_quick:
        print("compare.py: %s is a --quick smoke run; its ratios are not a baseline "
              "(--allow-quick to write it anyway)" % path, file=sys.stderr)
        return 2
    return update_baseline(results, path, args.baseline, args.merge)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if any(a.startswith(("--check", "--update-baseline")) for a in argv):
        return baseline_main(argv)
    return targets_main(argv)


if __name__ == "__main__":
    sys.exit(main())
