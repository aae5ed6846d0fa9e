#!/usr/bin/env python3
"""Tests of bench/plots.py on synthetic results: every plot is drawn from the
benchmarks it names (grpc_bench's included, which cannot run here yet) and
skipped with a message when they are absent. Needs matplotlib (Debian
python3-matplotlib): run as a script without it, it re-runs itself under
/usr/bin/python3 (as plots.py does); under plain pytest it is skipped.
Run: python3 bench/plots_test.py (or bazel test //bench:plots_test)."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_TMPDIR"):  # bazel: matplotlib's cache in the test's own directory
    os.environ.setdefault("MPLCONFIGDIR", os.environ["TEST_TMPDIR"])
try:
    import matplotlib  # noqa: F401  (checked here, so plots.pyplot() never re-runs itself)
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False
import plots  # noqa: E402
from compare_test import reps, results  # noqa: E402


pytestmark = pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="needs matplotlib (python3-matplotlib)")


def full_results():
    kv = reps("BM_Fdatasync/device", [{"p50_us": 120.0, "p99_us": 200.0}] * 3)
    for system, base in (("cowkv", 150.0), ("rocksdb", 180.0), ("lmdb", 300.0)):
        for t in (1, 8, 64):
            kv += reps("BM_DurablePut/%s/threads:%d" % (system, t),
                       [{"p50_us": base * t ** 0.5 * f, "p99_us": 3 * base * t ** 0.5 * f,
                         "items_per_second": 1e6 / base * t} for f in (0.9, 1.0, 1.2)])
    grpc = []
    for system in ("cowkv", "etcd"):
        for c in (1, 4, 16, 64):
            for k in (1, 4):
                grpc += reps("BM_GrpcPut/%s/clients:%d/conns:%d" % (system, c, k),
                             [{"items_per_second": 1000.0 * c, "p99_us": 100.0 + c,
                               "server_cpu_us_per_op": 30.0, "server_rss_mib": 50.0}] * 3)
    seeds = reps("BM_Fdatasync/device", [{"p50_us": 120.0}])
    for v, k in (("cowkv", 1.0), ("cowkv_no_dir_index_offset", 15.0)):
        seeds += reps("BM_Seed000DirFsync/" + v,
                      [{s: k * x for s, x in (("mean_us", 900), ("p50_us", 800), ("p90_us", 1200),
                                              ("p95_us", 1500), ("p99_us", 3000), ("max_us", 9000),
                                              ("files", 100000))}] * 3)
    engine = []
    for v in ("cowkv", "cowkv_bytes_throttle"):
        engine += reps("BM_StreamWriteInline/" + v,
                       [{"p50_stall_us": 5.0, "p99_stall_us": 70.0, "p999_stall_us": 1500.0,
                         "max_stall_us": 60000.0, "bytes_per_second": 4e8}] * 3)
    return results(("kv_bench", kv), ("grpc_bench", grpc), ("seeds_bench", seeds),
                   ("engine_bench", engine), quick=True)


def test_every_plot_is_drawn_from_its_data(tmp_path, capsys):
    res = tmp_path / "r.json"
    res.write_text(json.dumps(full_results()))
    dump = tmp_path / "lat.tsv"
    with open(dump, "w") as f:
        f.write("# kv_bench --latency_dump: benchmark\trepetition\tlatency_us\n")
        for system in ("cowkv", "rocksdb", "lmdb"):
            for i in range(200):
                f.write("BM_DurablePut/%s/threads:8\t0\t%.3f\n" % (system, 100 + i))
    out = tmp_path / "img"
    assert plots.main([str(res), "--latency-dump", str(dump), "--out-dir", str(out)]) == 0
    assert sorted(os.listdir(out)) == ["durable_put_cdf.png", "durable_put_latency.png", "grpc_put.png",
                                       "seed000_fsync.png", "seed001_stalls.png"]
    assert "skipped" not in capsys.readouterr().out


def test_absent_data_skips_with_a_message(tmp_path, capsys):
    res = tmp_path / "r.json"
    res.write_text(json.dumps(results(("kv_bench", reps("BM_ReadRandom/cowkv", [{"items_per_second": 1.0}])))))
    out = tmp_path / "img"
    assert plots.main([str(res), "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert not out.exists() or os.listdir(out) == []
    for name in ("durable_put_latency", "durable_put_cdf", "grpc", "seed000_fsync", "seed001_stalls"):
        assert "plots.py: skipped %s: " % name in printed


if __name__ == "__main__":
    # As plots.py does: a python3 without matplotlib (a pyenv one first on
    # PATH, say) hands over to Debian's, where python3-matplotlib lives.
    debian = "/usr/bin/python3"
    if (not HAVE_MATPLOTLIB and not os.environ.get("COWKV_PLOTS_REEXEC") and os.path.exists(debian)
            and os.path.realpath(sys.executable) != os.path.realpath(debian)):
        os.environ["COWKV_PLOTS_REEXEC"] = "1"
        os.execv(debian, [debian, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.abspath(__file__)]))
