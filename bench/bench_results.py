#!/usr/bin/env python3
"""Reading benchmark results: one place for compare.py and plots.py.

Two inputs are accepted everywhere:
  - a combined results file written by tools/bench.sh (format FORMAT):
      {"format": "cowkv-bench-results/1", "git_commit": ..., "git_dirty": ...,
       "date": ..., "repetitions": R, "quick": bool,
       "runs": [{"binary": "kv_bench", "args": [...], "exit_code": 0,
                 "context": {...}, "benchmarks": [{..., "binary": "kv_bench"}]}]}
  - plain google-benchmark JSON (--benchmark_format=json) of one binary,
    wrapped on load as a combined file with one run (the binary named from
    the context's "executable").

Benchmark names are BM_<Workload>/<system>[/<rest>] (bench/README.md):
system is cowkv, a peer (lmdb, rocksdb, etcd), cowkv_<variant> (an
optimisation switched off) or device; rest is e.g. "threads:8", "10000" or
"clients:8/conns:1". A group is one (binary, workload, rest): the systems in
it measured the same thing in the same run.

Repetitions: a value is the median over a benchmark's repetitions (its
"iteration" runs); when the file holds only aggregates
(--benchmark_report_aggregates_only) the "median" aggregate, else the "mean".

`python3 bench/bench_results.py combine ...` is how tools/bench.sh writes
the combined file (see combine_main).
"""
import json
import os
import statistics
import sys

FORMAT = "cowkv-bench-results/1"

# google-benchmark's own context keys and per-run paths: not part of what a
# run measured, so never compared between a run and the baseline.
VOLATILE_CONTEXT = {
    "date", "host_name", "executable", "num_cpus", "mhz_per_cpu",
    "cpu_scaling_enabled", "caches", "load_avg", "library_build_type",
    "json_schema_version", "files_dir", "latency_dump",
}

_TIME_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def wrap_plain(data, binary=None):
    """A plain google-benchmark JSON document as a combined results dict."""
    context = data.get("context", {})
    if binary is None:
        binary = os.path.basename(context.get("executable", "")) or "unknown"
    benchmarks = [dict(b, binary=binary) for b in data.get("benchmarks", [])]
    return {
        "format": FORMAT,
        "git_commit": None,
        "date": context.get("date"),
        "quick": False,
        "runs": [{"binary": binary, "context": context, "benchmarks": benchmarks}],
    }


def load(path_or_stream):
    """The results in `path_or_stream` (a path, "-" or a file object) as a
    combined results dict."""
    if hasattr(path_or_stream, "read"):
        data = json.load(path_or_stream)
    elif path_or_stream == "-":
        data = json.load(sys.stdin)
    else:
        with open(path_or_stream, encoding="utf-8") as f:
            data = json.load(f)
    if data.get("format") == FORMAT:
        return data
    if "benchmarks" in data:
        return wrap_plain(data)
    raise ValueError("not benchmark results: neither %s nor google-benchmark JSON" % FORMAT)


def parse_name(name):
    """BM_<Workload>/<system>[/<rest>] -> (workload, system, rest) or None."""
    parts = name.split("/")
    if len(parts) < 2 or not parts[0].startswith("BM_") or len(parts[0]) == 3:
        return None
    return parts[0][3:], parts[1], "/".join(parts[2:])


def group_label(workload, rest, system="*"):
    """How a group (or one benchmark of it) is printed: BM_W/<system>[/rest]."""
    return "BM_%s/%s%s" % (workload, system, "/" + rest if rest else "")


class Bench:
    """Every run of one benchmark (one system in one group) in a results file."""

    def __init__(self):
        self.iterations = []  # run_type "iteration": one per repetition
        self.aggregates = {}  # aggregate_name -> run
        self.errors = []      # error messages

    def runs(self):
        """The runs a median is taken over (see the module doc)."""
        if self.iterations:
            return self.iterations
        for agg in ("median", "mean"):
            if agg in self.aggregates:
                return [self.aggregates[agg]]
        return []

    def values(self, metric):
        """`metric` of every repetition that reports it."""
        out = []
        for run in self.runs():
            v = metric_value(run, metric)
            if v is not None:
                out.append(v)
        return out

    def median(self, metric):
        vs = self.values(metric)
        return statistics.median(vs) if vs else None

    def has(self, metric):
        return bool(self.values(metric))


def metric_value(run, metric):
    """A counter of one run, or "real_time" / "cpu_time" in seconds."""
    if metric in ("real_time", "cpu_time"):
        if metric not in run:
            return None
        return float(run[metric]) * _TIME_UNIT_SECONDS.get(run.get("time_unit", "ns"), 1e-9)
    v = run.get(metric)
    return float(v) if isinstance(v, (int, float)) else None


def collect(results):
    """{(binary, workload, rest): {system: Bench}} of every BM_ name."""
    groups = {}
    for run in results.get("runs", []):
        for b in run.get("benchmarks", []):
            binary = b.get("binary", run.get("binary", "unknown"))
            name = b.get("run_name", b.get("name", ""))
            parsed = parse_name(name)
            if parsed is None:
                continue
            workload, system, rest = parsed
            bench = groups.setdefault((binary, workload, rest), {}).setdefault(system, Bench())
            if b.get("error_occurred"):
                bench.errors.append(b.get("error_message", "?"))
            elif b.get("run_type") == "aggregate":
                bench.aggregates[b.get("aggregate_name", "?")] = b
            else:
                bench.iterations.append(b)
    return groups


def errors(results):
    """["binary BM_...: message"] for every benchmark that reported an error
    and every binary that did not exit cleanly."""
    out = []
    for run in results.get("runs", []):
        if run.get("exit_code", 0) != 0:
            out.append("%s: exited with status %s" % (run.get("binary"), run.get("exit_code")))
        if run.get("error"):
            out.append("%s: %s" % (run.get("binary"), run["error"]))
    for (binary, workload, rest), systems in sorted(collect(results).items()):
        for system, bench in sorted(systems.items()):
            for e in bench.errors:
                out.append("%s %s: %s" % (binary, group_label(workload, rest, system), e))
    return out


def contexts(results):
    """{binary: context dict} of every run."""
    return {run.get("binary", "unknown"): run.get("context", {}) for run in results.get("runs", [])}


def measured_context(context):
    """The context keys that describe what was measured (not where or when)."""
    return {k: v for k, v in context.items() if k not in VOLATILE_CONTEXT}


def describe(results):
    """One line naming a results file's commit, date and kind of run."""
    commit = results.get("git_commit") or "unknown commit"
    if results.get("git_dirty"):
        commit += " (uncommitted changes)"
    kind = "QUICK smoke run" if results.get("quick") else "full run"
    return "%s, %s, %s, %s repetition(s)" % (commit, results.get("date") or "unknown date", kind,
                                             results.get("repetitions", "?"))


# ---- combine: what tools/bench.sh calls ----------------------------------------------

def combine(meta, parts):
    """The combined results dict. `parts`: [(binary, args, exit_code, json
    path)]; a part whose file is empty or not JSON gets an "error" instead of
    benchmarks."""
    out = dict(meta)
    out["format"] = FORMAT
    out["runs"] = []
    for binary, args, exit_code, path in parts:
        run = {"binary": binary, "args": args, "exit_code": exit_code, "context": {}, "benchmarks": []}
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            run["context"] = data.get("context", {})
            run["benchmarks"] = [dict(b, binary=binary) for b in data.get("benchmarks", [])]
        except (OSError, ValueError) as e:
            run["error"] = "no JSON output (%s)" % e
        out["runs"].append(run)
    return out


def combine_main(argv):
    """combine --out FILE --meta KEY=JSON... --part BINARY EXIT_CODE JSON_FILE ARGS_JSON ..."""
    meta, parts, out = {}, [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--out":
            out = argv[i + 1]
            i += 2
        elif a == "--meta":
            key, _, value = argv[i + 1].partition("=")
            meta[key] = json.loads(value)
            i += 2
        elif a == "--part":
            binary, code, path, args = argv[i + 1:i + 5]
            parts.append((binary, json.loads(args), int(code), path))
            i += 5
        else:
            raise SystemExit("bench_results combine: unknown argument %r" % a)
    if out is None:
        raise SystemExit("bench_results combine: --out is required")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(combine(meta, parts), f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "combine":
        sys.exit(combine_main(sys.argv[2:]))
    sys.exit(__doc__)
