#!/usr/bin/env python3
"""Pictures of a benchmark run, drawn from its results file and nothing else.

Usage:
  python3 bench/plots.py RESULTS.json [--latency-dump FILE] [--out-dir docs/img]

RESULTS is tools/bench.sh's combined file (or one binary's google-benchmark
JSON). Each plot is drawn only from the benchmarks it names; when they are
not in the file the plot is skipped with a message (exit status 0 as long as
the file could be read). Bars and points are medians over repetitions; the
whiskers span the smallest to the largest repetition. Every picture carries
the run's commit and date, and a --quick run is stamped as such.

  durable_put_latency.png  kv_bench BM_DurablePut/{cowkv,rocksdb,lmdb}/threads:N:
                           p50_us and p99_us per thread count, with the
                           device's BM_Fdatasync/device p50/p99 as a line.
  durable_put_cdf.png      only with --latency-dump (kv_bench --latency_dump):
                           the CDF of every durable put's latency, per thread
                           count, all repetitions pooled.
  grpc_<workload>.png      grpc_bench BM_Grpc<Workload>/{cowkv,etcd}/clients:C/conns:K:
                           items_per_second, p99_us (and server_cpu_us_per_op
                           when reported) against C, a line per system and K.
  seed000_fsync.png        seeds_bench BM_Seed000DirFsync/{cowkv,cowkv_no_dir_index_offset}:
                           the mean/p50/p90/p95/p99/max directory fsync.
  seed001_stalls.png       engine_bench BM_StreamWrite{Inline,}/{cowkv,cowkv_bytes_throttle}:
                           p50/p99/p99.9/max writer stall and the throughput.

matplotlib: Debian's python3-matplotlib (tools/setup.sh installs it). When
the python3 running this cannot import it and /usr/bin/python3 is another
interpreter, the script re-runs itself under /usr/bin/python3.
"""
import argparse
import collections
import os
import sys

import bench_results

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "img")
COLORS = {"cowkv": "#1f77b4", "rocksdb": "#ff7f0e", "lmdb": "#2ca02c", "etcd": "#d62728"}
VARIANT_COLOR = "#9467bd"


def pyplot():
    """matplotlib.pyplot with the file-only backend (see the module doc)."""
    try:
        import matplotlib
    except ImportError:
        debian = "/usr/bin/python3"
        if (not os.environ.get("COWKV_PLOTS_REEXEC") and os.path.exists(debian)
                and os.path.realpath(sys.executable) != os.path.realpath(debian)):
            os.environ["COWKV_PLOTS_REEXEC"] = "1"
            print("plots.py: no matplotlib in %s; running under %s" % (sys.executable, debian),
                  file=sys.stderr)
            os.execv(debian, [debian, os.path.abspath(__file__)] + sys.argv[1:])
        sys.exit("plots.py: needs matplotlib: apt-get install python3-matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def color(system):
    return COLORS.get(system, VARIANT_COLOR)


def spread(bench, metric):
    """(median, lower error, upper error) over the repetitions, or None."""
    vs = bench.values(metric) if bench is not None else []
    if not vs:
        return None
    med = bench.median(metric)
    return med, med - min(vs), max(vs) - med


def stamp(fig, results, source):
    """The run a picture comes from, at its foot."""
    fig.text(0.01, 0.005, "%s: %s" % (os.path.basename(source), bench_results.describe(results)),
             fontsize=7, color="#555555", ha="left", va="bottom")
    if results.get("quick"):
        fig.text(0.01, 0.03, "QUICK SMOKE RUN: small data, not a measurement", fontsize=8,
                 color="#c00000", ha="left", va="bottom", weight="bold")


def bar_groups(ax, categories, series, metric_of, log=True):
    """Grouped bars: one group per category, one bar per series name.
    metric_of(category, series) -> spread() or None (the bar is left out)."""
    width = 0.8 / max(1, len(series))
    for i, name in enumerate(series):
        xs, ys, lo, hi = [], [], [], []
        for j, cat in enumerate(categories):
            s = metric_of(cat, name)
            if s is None:
                continue
            xs.append(j - 0.4 + width * (i + 0.5))
            ys.append(s[0])
            lo.append(s[1])
            hi.append(s[2])
        if not xs:
            continue
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=name, color=color(name),
               alpha=0.9 if name == series[0] else 0.75)
        for x, y in zip(xs, ys):
            ax.annotate(fmt(y), (x, y), textcoords="offset points", xytext=(0, 2), ha="center",
                        fontsize=6)
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels(categories)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3, which="both")


def fmt(v):
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return "%.3g%s" % (v / div, unit)
    return "%.3g" % v


def save(plt, fig, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---- (a) durable puts ----------------------------------------------------------------

def durable_put_latency(plt, groups, results, source, out_dir):
    threads = sorted(int(rest.split(":")[1]) for (b, w, rest) in groups
                     if b == "kv_bench" and w == "DurablePut" and rest.startswith("threads:"))
    if not threads:
        return None, "no kv_bench BM_DurablePut results"
    systems = [s for s in ("cowkv", "rocksdb", "lmdb")
               if any(s in groups[("kv_bench", "DurablePut", "threads:%d" % t)] for t in threads)]
    device = groups.get(("kv_bench", "Fdatasync", ""), {}).get("device")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    for ax, metric in zip(axes, ("p50_us", "p99_us")):
        bar_groups(ax, ["%d thread%s" % (t, "s" if t > 1 else "") for t in threads], systems,
                   lambda cat, s: spread(groups[("kv_bench", "DurablePut",
                                                 "threads:" + cat.split()[0])].get(s), metric))
        d = spread(device, metric)
        if d is not None:
            ax.axhline(d[0], color="black", linestyle="--", linewidth=1,
                       label="device: 4 KiB write + fdatasync %s" % metric[:3])
        ax.set_title("durable put latency, %s" % metric[:3])
        ax.set_ylabel("µs per put (log scale; lower is better)")
        ax.legend(fontsize=7)
    fig.suptitle("kv_bench BM_DurablePut: one single-key durable put per operation, all threads' "
                 "latencies merged", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    stamp(fig, results, source)
    return save(plt, fig, out_dir, "durable_put_latency.png"), None


def read_latency_dump(path):
    """{benchmark name: [latency_us]} of a kv_bench --latency_dump file, all
    repetitions pooled."""
    out = collections.defaultdict(list)
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, _, us = line.rstrip("\n").split("\t")
            out[name].append(float(us))
    return out


def durable_put_cdf(plt, dump_path, results, source, out_dir):
    if dump_path is None:
        return None, "no --latency-dump given (kv_bench --latency_dump=FILE, or tools/bench.sh --latency-dump FILE)"
    dump = read_latency_dump(dump_path)
    by_threads = collections.defaultdict(dict)
    for name, lat in dump.items():
        parsed = bench_results.parse_name(name)
        if parsed and parsed[0] == "DurablePut" and parsed[2].startswith("threads:"):
            by_threads[int(parsed[2].split(":")[1])][parsed[1]] = sorted(lat)
    if not by_threads:
        return None, "%s holds no BM_DurablePut latencies" % dump_path
    threads = sorted(by_threads)
    fig, axes = plt.subplots(1, len(threads), figsize=(4.2 * len(threads), 4.2), squeeze=False)
    for ax, t in zip(axes[0], threads):
        for system in ("cowkv", "rocksdb", "lmdb"):
            lat = by_threads[t].get(system)
            if not lat:
                continue
            n = len(lat)
            ax.plot(lat, [(i + 1) / n for i in range(n)], label="%s (%d puts)" % (system, n),
                    color=color(system), linewidth=1.3)
        for q in (0.5, 0.99):
            ax.axhline(q, color="#888888", linewidth=0.6, linestyle=":")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.0)
        ax.set_xlabel("latency, µs (log scale)")
        ax.set_ylabel("fraction of puts at or below")
        ax.set_title("%d thread%s" % (t, "s" if t > 1 else ""))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("kv_bench BM_DurablePut: CDF of every durable put (%s; repetitions pooled)"
                 % os.path.basename(dump_path), fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.94))
    stamp(fig, results, source)
    return save(plt, fig, out_dir, "durable_put_cdf.png"), None


# ---- (b) gRPC ------------------------------------------------------------------------

def parse_grpc_rest(rest):
    """"clients:C/conns:K" -> (C, K) or None."""
    fields = dict(p.split(":", 1) for p in rest.split("/") if ":" in p)
    try:
        return int(fields["clients"]), int(fields["conns"])
    except (KeyError, ValueError):
        return None


def grpc_plots(plt, groups, results, source, out_dir):
    """One picture per BM_Grpc<Workload>: [(path, None)] or [(None, why)]."""
    series = collections.defaultdict(lambda: collections.defaultdict(dict))  # workload -> (sys, K) -> C -> Bench
    for (binary, workload, rest), systems in groups.items():
        ck = parse_grpc_rest(rest) if workload.startswith("Grpc") else None
        if ck is None:
            continue
        for system, bench in systems.items():
            if not bench.errors:
                series[workload][(system, ck[1])][ck[0]] = bench
    if not series:
        return [(None, "no BM_Grpc<Workload>/<system>/clients:C/conns:K results (grpc_bench)")]
    out = []
    for workload in sorted(series):
        lines = series[workload]
        metrics = [("items_per_second", "operations/s (higher is better)"),
                   ("p99_us", "p99 latency, µs (lower is better)")]
        if any(b.has("server_cpu_us_per_op") for pts in lines.values() for b in pts.values()):
            metrics.append(("server_cpu_us_per_op", "server CPU µs per op (lower is better)"))
        conns_all = sorted({k for (_, k) in lines})
        clients_all = sorted({c for pts in lines.values() for c in pts})
        fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4.4))
        for ax, (metric, label) in zip(axes, metrics):
            for (system, conns), points in sorted(lines.items()):
                cs = sorted(c for c in points if points[c].has(metric))
                if not cs:
                    continue
                sp = [spread(points[c], metric) for c in cs]
                ax.errorbar(cs, [s[0] for s in sp], yerr=[[s[1] for s in sp], [s[2] for s in sp]],
                            marker="osD^v"[conns_all.index(conns) % 5], capsize=2, color=color(system),
                            linestyle="-" if system == "cowkv" else "--",
                            label="%s, %d conn%s" % (system, conns, "s" if conns > 1 else ""))
            ax.set_xscale("log", base=2)
            ax.set_xticks(clients_all)
            ax.set_xticklabels([str(c) for c in clients_all])
            ax.minorticks_off()
            ax.set_xlabel("concurrent clients (log scale)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
        fig.suptitle("grpc_bench BM_%s: cowkvd against etcd over gRPC" % workload, fontsize=10)
        fig.tight_layout(rect=(0, 0.06, 1, 0.94))
        stamp(fig, results, source)
        out.append((save(plt, fig, out_dir, "grpc_%s.png" % workload[4:].lower()), None))
    return out


# ---- (c), (d) seeds ------------------------------------------------------------------

def seed000_fsync(plt, groups, results, source, out_dir):
    systems = groups.get(("seeds_bench", "Seed000DirFsync", ""), {})
    variants = [s for s in ("cowkv", "cowkv_no_dir_index_offset") if s in systems and not systems[s].errors]
    if not variants:
        return None, "no seeds_bench BM_Seed000DirFsync results"
    stats = ["mean_us", "p50_us", "p90_us", "p95_us", "p99_us", "max_us"]
    fig, ax = plt.subplots(figsize=(9, 4.6))
    bar_groups(ax, [s[:-3] for s in stats], variants,
               lambda cat, v: spread(systems[v], cat + "_us"))
    device = groups.get(("seeds_bench", "Fdatasync", ""), {}).get("device")
    d = spread(device, "p50_us")
    if d is not None:
        ax.axhline(d[0], color="black", linestyle="--", linewidth=1,
                   label="device: 4 KiB write + fdatasync p50")
    files = systems[variants[0]].median("files")
    ax.set_ylabel("µs per directory fsync (log scale; lower is better)")
    ax.set_title("seed 000: fsync of a directory after every 100 new files (%s files)"
                 % (fmt(files) if files else "?"), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    stamp(fig, results, source)
    return save(plt, fig, out_dir, "seed000_fsync.png"), None


def seed001_stalls(plt, groups, results, source, out_dir):
    workloads = [w for w in ("StreamWriteInline", "StreamWrite")
                 if groups.get(("engine_bench", w, ""), {}).get("cowkv")]
    if not workloads:
        return None, "no engine_bench BM_StreamWrite{Inline,} results"
    stats = ["p50_stall_us", "p99_stall_us", "p999_stall_us", "max_stall_us"]
    variants = ["cowkv", "cowkv_bytes_throttle"]
    fig, axes = plt.subplots(len(workloads), 2, figsize=(11, 4.2 * len(workloads)),
                             squeeze=False, gridspec_kw={"width_ratios": [3, 1]})
    for row, w in zip(axes, workloads):
        systems = groups[("engine_bench", w, "")]
        present = [v for v in variants if v in systems and not systems[v].errors]
        bar_groups(row[0], [s.split("_")[0] for s in stats], present,
                   lambda cat, v: spread(systems[v], cat + "_stall_us"))
        row[0].set_ylabel("µs per put (log scale; lower is better)")
        row[0].set_title("BM_%s: writer stalls (the time each put took)" % w, fontsize=9)
        row[0].legend(fontsize=7)
        bar_groups(row[1], ["throughput"], present,
                   lambda cat, v: scaled(spread(systems[v], "bytes_per_second"), 1e-6), log=False)
        row[1].set_ylabel("MB/s (higher is better)")
    fig.suptitle("seed 001: two writers streaming, delayed-ref throttling (cowkv) against the "
                 "reserved-bytes policy", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    stamp(fig, results, source)
    return save(plt, fig, out_dir, "seed001_stalls.png"), None


def scaled(s, k):
    return None if s is None else (s[0] * k, s[1] * k, s[2] * k)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", help="tools/bench.sh's combined file or google-benchmark JSON")
    ap.add_argument("--latency-dump", help="kv_bench --latency_dump file, for durable_put_cdf.png")
    ap.add_argument("--out-dir", default=DEFAULT_OUT, help="where the PNGs go (default docs/img)")
    args = ap.parse_args(argv)
    plt = pyplot()
    results = bench_results.load(args.results)
    groups = bench_results.collect(results)
    made = [
        ("durable_put_latency", durable_put_latency(plt, groups, results, args.results, args.out_dir)),
        ("durable_put_cdf", durable_put_cdf(plt, args.latency_dump, results, args.results, args.out_dir)),
    ]
    made += [("grpc", r) for r in grpc_plots(plt, groups, results, args.results, args.out_dir)]
    made += [
        ("seed000_fsync", seed000_fsync(plt, groups, results, args.results, args.out_dir)),
        ("seed001_stalls", seed001_stalls(plt, groups, results, args.results, args.out_dir)),
    ]
    for name, (path, why) in made:
        if path:
            print("plots.py: wrote %s" % path)
        else:
            print("plots.py: skipped %s: %s" % (name, why))
    return 0


if __name__ == "__main__":
    sys.exit(main())
