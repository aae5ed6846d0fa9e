#!/usr/bin/env python3
"""Tests of bench/compare.py (both modes) and bench/bench_results.py, on
synthetic google-benchmark JSON.

Goal: a ratio that regressed beyond the threshold fails the check, noise
under it does not, the direction of "better" follows the metric (throughput
up, latency and time down), missing peers are reported, medians over
repetitions are used (not means, not one repetition), benchmarks of
different binaries are never paired, and the checked-in baseline is well
formed. Run: python3 bench/compare_test.py (or bazel test //bench:compare_test).
"""
import io
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_results  # noqa: E402
import compare  # noqa: E402


# ---- synthetic results --------------------------------------------------------------

def reps(name, values, aggregates=True, time_unit="ms"):
    """google-benchmark runs of `name`, one per dict in `values` (counters,
    plus "real_time"), then mean/median aggregates as the library writes them."""
    out = []
    for i, counters in enumerate(values):
        b = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": len(values),
             "repetition_index": i, "threads": 1, "iterations": 10, "real_time": 1.0,
             "cpu_time": 1.0, "time_unit": time_unit}
        b.update(counters)
        out.append(b)
    if aggregates and len(values) > 1:
        keys = set().union(*values)
        for agg in ("mean", "median"):
            b = {"name": name + "_" + agg, "run_name": name, "run_type": "aggregate",
                 "aggregate_name": agg, "repetitions": len(values), "threads": 1,
                 "iterations": len(values), "real_time": 1.0, "cpu_time": 1.0, "time_unit": time_unit}
            for k in keys:
                vs = sorted(v[k] for v in values if k in v)
                b[k] = sum(vs) / len(vs) if agg == "mean" else vs[len(vs) // 2]
            out.append(b)
    return out


def results(*parts, quick=False, contexts=None):
    """A combined results dict; parts: (binary, [benchmark runs])."""
    runs = []
    for binary, benches in parts:
        runs.append({"binary": binary, "exit_code": 0,
                     "context": (contexts or {}).get(binary, {"num": "1000000"}),
                     "benchmarks": [dict(b, binary=binary) for b in benches]})
    return {"format": bench_results.FORMAT, "git_commit": "abc123", "date": "2026-11-27T00:00:00Z",
            "repetitions": 3, "quick": quick, "runs": runs}


def baseline(**ratios):
    """A baseline dict; keyword names are ignored, values are (key, ratio)."""
    return {"comment": "test", "context": {},
            "ratios": {k: {"ratio": r, "source": "test"} for k, r in ratios.values()}}


def run_check(res, base, threshold=0.15, **kw):
    out = io.StringIO()
    rc = compare.check(res, base, threshold, out=out, **kw)
    return rc, out.getvalue()


def kv(cowkv, lmdb, rocksdb=None, workload="BM_ReadRandom", metric="items_per_second"):
    """kv_bench runs with one value per system (three identical repetitions)."""
    benches = reps(workload + "/cowkv", [{metric: cowkv}] * 3)
    benches += reps(workload + "/lmdb", [{metric: lmdb}] * 3)
    if rocksdb is not None:
        benches += reps(workload + "/rocksdb", [{metric: rocksdb}] * 3)
    return ("kv_bench", benches)


READ_LMDB = "kv_bench BM_ReadRandom/* lmdb items_per_second"
READ_ROCKS = "kv_bench BM_ReadRandom/* rocksdb items_per_second"


# ---- the check ----------------------------------------------------------------------

def test_regression_beyond_threshold_fails():
    # cowkv/lmdb was 2.0; now 1.0: cowkv lost half its lead.
    rc, out = run_check(results(kv(100, 100)), baseline(a=(READ_LMDB, 2.0)))
    assert rc == 1
    assert "REGRESSED:" in out
    assert READ_LMDB + ": 2 -> 1 (-50%; higher is better)" in out


def test_noise_under_threshold_passes():
    # 2.0 -> 1.8 is -10 %, under the default 15 %.
    rc, out = run_check(results(kv(180, 100)), baseline(a=(READ_LMDB, 2.0)))
    assert rc == 0
    assert "REGRESSED" not in out
    assert "0 regressed, 0 improved, 1 within it" in out


def test_threshold_flag_is_honoured():
    rc, _ = run_check(results(kv(180, 100)), baseline(a=(READ_LMDB, 2.0)), threshold=0.05)
    assert rc == 1
    with pytest.raises(SystemExit):
        compare.main(["--check", "unused.json", "--threshold", "-1"])


def test_improvement_is_printed_but_does_not_fail():
    rc, out = run_check(results(kv(400, 100)), baseline(a=(READ_LMDB, 2.0)))
    assert rc == 0
    assert "improved:" in out and READ_LMDB + ": 2 -> 4 (+100%" in out


def test_latency_ratio_rising_is_a_regression():
    key = "kv_bench BM_DurablePut/*/threads:8 lmdb p50_us"
    base = baseline(a=(key, 0.5))
    worse = results(("kv_bench", reps("BM_DurablePut/cowkv/threads:8", [{"p50_us": 70}] * 3)
                     + reps("BM_DurablePut/lmdb/threads:8", [{"p50_us": 100}] * 3)))
    rc, out = run_check(worse, base)
    assert rc == 1 and key + ": 0.5 -> 0.7 (+40%; lower is better)" in out
    better = results(("kv_bench", reps("BM_DurablePut/cowkv/threads:8", [{"p50_us": 30}] * 3)
                      + reps("BM_DurablePut/lmdb/threads:8", [{"p50_us": 100}] * 3)))
    rc, out = run_check(better, base)
    assert rc == 0 and "improved:" in out


def test_variant_without_throughput_compares_real_time():
    # Seed 004: manual time only; the ratio is cowkv/cowkv_<variant>, lower is better.
    benches = reps("BM_Seed004Rename/cowkv/10000", [{"real_time": 90.0}] * 3)
    benches += reps("BM_Seed004Rename/cowkv_no_logged_check/10000", [{"real_time": 180.0}] * 3)
    got = compare.ratios(results(("seeds_bench", benches)))
    key = "seeds_bench BM_Seed004Rename/*/10000 cowkv_no_logged_check real_time"
    assert list(got) == [key]
    assert got[key].value == pytest.approx(0.5)
    assert not got[key].higher_is_better


def test_missing_peer_and_missing_group_are_reported():
    base = baseline(a=(READ_LMDB, 1.0), b=(READ_ROCKS, 1.0),
                    c=("kv_bench BM_RangeScan/* lmdb items_per_second", 1.0))
    rc, out = run_check(results(kv(100, 100)), base)  # no rocksdb, no RangeScan
    assert rc == 0
    assert READ_ROCKS + ": rocksdb missing from the run" in out
    assert "kv_bench BM_RangeScan/* lmdb items_per_second: not run" in out
    rc, _ = run_check(results(kv(100, 100)), base, require_all=True)
    assert rc == 1


def test_missing_cowkv_is_reported():
    benches = reps("BM_ReadRandom/lmdb", [{"items_per_second": 1.0}])
    rc, out = run_check(results(("kv_bench", benches)), baseline(a=(READ_LMDB, 1.0)))
    assert READ_LMDB + ": cowkv missing from the run" in out


def test_medians_over_repetitions_are_used():
    # One slow repetition of each: the means give 0.54, the medians 1.0,
    # the first repetition 2.0.
    benches = reps("BM_ReadRandom/cowkv", [{"items_per_second": v} for v in (200, 100, 100)])
    benches += reps("BM_ReadRandom/lmdb", [{"items_per_second": v} for v in (100, 100, 1000)])
    got = compare.ratios(results(("kv_bench", benches)))
    assert got[READ_LMDB].value == pytest.approx(1.0)


def test_median_aggregate_used_when_only_aggregates():
    benches = [b for b in reps("BM_ReadRandom/cowkv", [{"items_per_second": v} for v in (300, 100, 100)])
               + reps("BM_ReadRandom/lmdb", [{"items_per_second": 100}] * 3)
               if b["run_type"] == "aggregate"]
    got = compare.ratios(results(("kv_bench", benches)))
    assert got[READ_LMDB].value == pytest.approx(1.0)  # the mean would say 1.67


def test_binaries_are_not_paired_with_each_other():
    engine = ("engine_bench", reps("BM_ReadRandom/cowkv", [{"items_per_second": 100}]))
    kvb = ("kv_bench", reps("BM_ReadRandom/lmdb", [{"items_per_second": 100}]))
    assert compare.ratios(results(engine, kvb)) == {}


def test_device_is_not_a_peer():
    benches = reps("BM_Fdatasync/device", [{"p50_us": 100}]) + reps("BM_ReadRandom/cowkv", [{"items_per_second": 1}])
    assert compare.ratios(results(("kv_bench", benches))) == {}


def test_benchmark_error_fails_and_is_named():
    benches = reps("BM_ReadRandom/cowkv", [{"items_per_second": 100}])
    benches.append({"name": "BM_ReadRandom/lmdb", "run_name": "BM_ReadRandom/lmdb", "run_type": "iteration",
                    "error_occurred": True, "error_message": "lmdb mdb_get: boom"})
    rc, out = run_check(results(("kv_bench", benches)), baseline(a=(READ_LMDB, 1.0)))
    assert rc == 1
    assert "ERROR kv_bench BM_ReadRandom/lmdb: lmdb mdb_get: boom" in out
    assert READ_LMDB + ": lmdb reported an error" in out


def test_context_difference_is_warned():
    base = baseline(a=(READ_LMDB, 1.0))
    base["context"] = {"kv_bench": {"num": "1000000"}}
    res = results(kv(100, 100), contexts={"kv_bench": {"num": "20000"}})
    _, out = run_check(res, base)
    assert "warning: kv_bench num=20000 in this run, 1000000 in the baseline" in out


def test_grpc_names_pair_by_clients_and_conns():
    benches = []
    for c in (1, 8):
        benches += reps("BM_GrpcPut/cowkv/clients:%d/conns:1" % c,
                        [{"items_per_second": 1000.0 * c, "p99_us": 100.0, "server_cpu_us_per_op": 20.0}])
        benches += reps("BM_GrpcPut/etcd/clients:%d/conns:1" % c,
                        [{"items_per_second": 500.0 * c, "p99_us": 200.0, "server_cpu_us_per_op": 40.0}])
    got = compare.ratios(results(("grpc_bench", benches)))
    assert got["grpc_bench BM_GrpcPut/*/clients:8/conns:1 etcd items_per_second"].value == pytest.approx(2.0)
    assert got["grpc_bench BM_GrpcPut/*/clients:1/conns:1 etcd server_cpu_us_per_op"].value == pytest.approx(0.5)
    assert len(got) == 6


# ---- --update-baseline and the command line ------------------------------------------

def write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_update_then_check_round_trips(tmp_path, capsys):
    res = write(tmp_path, "r.json", results(kv(150, 100, 50)))
    base = str(tmp_path / "baseline.json")
    assert compare.main(["--update-baseline", res, "--baseline", base]) == 0
    doc = json.load(open(base))
    assert set(doc["ratios"]) == {READ_LMDB, READ_ROCKS}
    assert doc["ratios"][READ_LMDB]["ratio"] == pytest.approx(1.5)
    assert doc["context"] == {"kv_bench": {"num": "1000000"}}
    assert compare.main(["--check", res, "--baseline", base]) == 0
    assert "2 ratio(s) compared, threshold 15%: 0 regressed" in capsys.readouterr().out


def test_update_merge_keeps_other_entries(tmp_path):
    base = write(tmp_path, "b.json", baseline(a=("seeds_bench BM_X/* cowkv_v real_time", 0.5)))
    res = write(tmp_path, "r.json", results(kv(150, 100)))
    assert compare.main(["--update-baseline", res, "--baseline", base, "--merge"]) == 0
    assert set(json.load(open(base))["ratios"]) == {READ_LMDB, "seeds_bench BM_X/* cowkv_v real_time"}


def test_update_refuses_a_quick_run(tmp_path):
    res = write(tmp_path, "r.json", results(kv(150, 100), quick=True))
    base = str(tmp_path / "baseline.json")
    assert compare.main(["--update-baseline", res, "--baseline", base]) == 2
    assert not os.path.exists(base)
    assert compare.main(["--update-baseline", res, "--baseline", base, "--allow-quick"]) == 0


def test_plain_google_benchmark_json_is_accepted(tmp_path, capsys):
    plain = {"context": {"executable": "/x/bazel-bin/bench/kv_bench", "num": "1000000"},
             "benchmarks": kv(100, 100)[1]}
    path = write(tmp_path, "plain.json", plain)
    base = write(tmp_path, "b.json", baseline(a=(READ_LMDB, 1.0)))
    assert compare.main(["--check", path, "--baseline", base]) == 0
    assert "1 ratio(s) compared" in capsys.readouterr().out


def test_checked_in_baseline_is_well_formed():
    doc = compare.load_baseline(compare.BASELINE)
    assert doc["comment"]
    assert doc["ratios"]
    for key, entry in doc["ratios"].items():
        parsed = compare.parse_key(key)
        assert parsed is not None, key
        assert parsed[3] != "cowkv" and parsed[4] in compare.THROUGHPUT + compare.LATENCY + ("real_time",), key
        assert entry["ratio"] > 0 and entry["source"], key


# ---- mode 1 (engine_bench targets) is unchanged ----------------------------------------

def engine_json(fill_ratio):
    b = []
    for w, c, l in (("FillSeq", 1, 1), ("FillRandom", fill_ratio, 1), ("ReadRandom", 1, 1), ("Scan", 1, 1)):
        b += reps("BM_%s/cowkv" % w, [{"items_per_second": c * 1e6}], aggregates=False)
        b += reps("BM_%s/lmdb" % w, [{"items_per_second": l * 1e6}], aggregates=False)
    b += reps("BM_SmallCommit/cowkv", [{"p50_us": 500, "p99_us": 900, "flushes_per_commit": 2.0}])
    b += reps("BM_SmallCommit/lmdb", [{"p50_us": 300, "p99_us": 400}])
    return {"context": {"num": "1000000"}, "benchmarks": b}


def test_targets_mode_passes_and_fails_as_before(tmp_path, capsys):
    good = write(tmp_path, "good.json", engine_json(1.2))
    bad = write(tmp_path, "bad.json", engine_json(0.5))
    assert compare.main([good]) == 0
    assert "FillRandom" in capsys.readouterr().out
    assert compare.main([bad]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_targets_mode_reads_the_engine_part_of_a_combined_file(tmp_path):
    combined = results(("engine_bench", engine_json(1.2)["benchmarks"]), kv(1, 1))
    assert compare.main([write(tmp_path, "c.json", combined)]) == 0


# ---- bench_results.combine (what tools/bench.sh runs) --------------------------------

def test_combine_marks_binaries_and_records_broken_output(tmp_path):
    good = write(tmp_path, "kv.json", {"context": {"num": "5"}, "benchmarks": kv(1, 1)[1]})
    empty = tmp_path / "seeds.json"
    empty.write_text("")
    out = str(tmp_path / "all.json")
    bench_results.combine_main(["--out", out, "--meta", "git_commit=\"abc\"", "--meta", "quick=true",
                                "--part", "kv_bench", "0", good, "[\"--num=5\"]",
                                "--part", "seeds_bench", "134", str(empty), "[]"])
    r = bench_results.load(out)
    assert r["git_commit"] == "abc" and r["quick"] is True
    assert [run["binary"] for run in r["runs"]] == ["kv_bench", "seeds_bench"]
    assert all(b["binary"] == "kv_bench" for b in r["runs"][0]["benchmarks"])
    assert r["runs"][0]["args"] == ["--num=5"]
    errs = bench_results.errors(r)
    assert "seeds_bench: exited with status 134" in errs
    assert any(e.startswith("seeds_bench: no JSON output") for e in errs)


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.abspath(__file__)]))
