#!/usr/bin/env bash
# Runs the benchmark suite and writes ONE combined JSON results file.
#
#   tools/bench.sh [options] [-- ARGS for every binary]
#
# Builds //bench:engine_bench, kv_bench, seeds_bench, send_bench (and grpc_bench when that
# target exists) with `bazel build --config=opt`, copies the binaries out of
# bazel-bin (so a later build cannot change them mid-run), runs each with
# --benchmark_repetitions=R --benchmark_format=json, and writes the combined
# file: git commit, date, options, and per binary its arguments, exit status,
# context and benchmarks (each benchmark also carries "binary"). Format:
# bench/bench_results.py. Then: python3 bench/compare.py --check FILE, and
# python3 bench/plots.py FILE (bench/README.md, "Catching regressions").
#
# Options:
#   -o FILE               the combined results (default ./bench-results.json)
#   -r, --repetitions R   repetitions per benchmark (default 3); medians are
#                         taken over them
#   --quick               a smoke run (about half a minute): small data
#                         (--num=20000 and the like), sparse device files,
#                         short filters, --benchmark_min_time=0.05. Its
#                         figures say the suite works, not how fast cowkv is.
#   --only LIST           comma-separated binaries to run (default: all built)
#   --filter [BIN=]REGEX  --benchmark_filter for BIN, or for every binary
#                         (replaces --quick's filter); repeatable
#   --args BIN='ARGS'     extra arguments for BIN (split on spaces); repeatable
#   --latency-dump FILE   kv_bench --latency_dump=FILE (per-op put latencies,
#                         for bench/plots.py --latency-dump)
#   --tmpdir DIR          where the binaries put their files ($TEST_TMPDIR;
#                         default /tmp): put it on the disk to measure
#   --jobs N              bazel build --jobs=N
#   --bin-dir DIR         copy the binaries here and keep them (default: a
#                         temporary directory, removed at exit)
#   --no-build            do not build; run the binaries already in --bin-dir
#                         (the results name the commit noted there when they
#                         were built, not this tree's)
# Arguments after -- go to every binary.
#
# Exit status: 0 when every binary exited 0 and wrote JSON, 1 otherwise (the
# combined file is written either way), 2 on bad usage or a failed build.
set -uo pipefail
orig=$PWD  # relative paths in the options are relative to where it was started
cd "$(dirname "$0")/.."

ALL_BINARIES=(engine_bench kv_bench seeds_bench grpc_bench send_bench)

# --quick: per binary, small data and a filter (see bench/README.md).
declare -A QUICK_ARGS=(
  [engine_bench]="--num=20000 --small_commits=20 --stream_mib=32 --benchmark_min_time=0.05"
  [kv_bench]="--num=20000 --cowkv_device=sparse --benchmark_min_time=0.05"
  [seeds_bench]="--device=sparse --fs_device_mib=512 --inodes=200000 --seed000_files=2000 --seed002_extents=4096 --seed003_files=2000"
  [grpc_bench]="--benchmark_min_time=0.1"
  [send_bench]="--num=20000 --small_num=2000 --incremental_runs=2"
)
# kv_bench runs whole: at --num=20000 every benchmark is short.
declare -A QUICK_FILTER=(
  [engine_bench]='Fill|ReadRandom|Scan|SmallCommit|Fdatasync|StreamWriteInline'
  [seeds_bench]='Fdatasync|Seed003InodeInsert|Seed000|Seed002Fiemap(Shared)?/|Seed004Rename/.*/1000/'
  [grpc_bench]='clients:(1|8)/'
)
# Always: seeds_bench's variants interleaved across repetitions, as its
# README asks (the disk's flush latency moves within minutes). kv_bench must
# not be interleaved: its reads run first, on the stores as loaded.
declare -A DEFAULT_ARGS=(
  [seeds_bench]="--benchmark_enable_random_interleaving=true"
)

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

out=$orig/bench-results.json
reps=3
quick=false
only=""
jobs=""
bin_dir=""
build=true
tmpdir=""
latency_dump=""
all_filter=""
common_args=()
declare -A FILTER=()
declare -A EXTRA=()

abspath() {
  case "$1" in /*) echo "$1" ;; *) echo "$orig/$1" ;; esac
}

is_binary() {
  local b
  for b in "${ALL_BINARIES[@]}"; do [ "$b" = "$1" ] && return 0; done
  return 1
}

while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$(abspath "${2:?-o needs a file}"); shift 2 ;;
    -r|--repetitions) reps=${2:?}; shift 2 ;;
    --quick) quick=true; shift ;;
    --only) only=${2:?}; shift 2 ;;
    --filter)
      f=${2:?--filter needs a regex}
      if is_binary "${f%%=*}" && [ "${f#*=}" != "$f" ]; then FILTER[${f%%=*}]=${f#*=}; else all_filter=$f; fi
      shift 2 ;;
    --args)
      a=${2:?--args needs BIN=ARGS}
      is_binary "${a%%=*}" || { echo "bench.sh: --args $a: not one of ${ALL_BINARIES[*]}" >&2; exit 2; }
      EXTRA[${a%%=*}]="${EXTRA[${a%%=*}]:-} ${a#*=}"
      shift 2 ;;
    --latency-dump) latency_dump=$(abspath "${2:?}"); shift 2 ;;
    --tmpdir) tmpdir=$(abspath "${2:?}"); shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --bin-dir) bin_dir=$(abspath "${2:?}"); shift 2 ;;
    --no-build) build=false; shift ;;
    -h|--help) usage ;;
    --) shift; common_args=("$@"); break ;;
    *) echo "bench.sh: unknown option $1" >&2; usage ;;
  esac
done
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --repetitions must be a positive integer" >&2; exit 2; }
if [ "$build" = false ] && [ -z "$bin_dir" ]; then
  echo "bench.sh: --no-build needs --bin-dir (where the binaries are)" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cowkv-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -z "$bin_dir" ]; then bin_dir=$work/bin; fi
mkdir -p "$bin_dir"

# Which binaries: --only, else those whose target exists.
binaries=()
if [ -n "$only" ]; then
  IFS=, read -r -a binaries <<<"$only"
  for b in "${binaries[@]}"; do
    is_binary "$b" || { echo "bench.sh: --only $b: not one of ${ALL_BINARIES[*]}" >&2; exit 2; }
  done
elif [ "$build" = true ]; then
  have=$(bazel query 'kind(".*_binary", //bench:*)' 2>/dev/null)
  for b in "${ALL_BINARIES[@]}"; do
    if grep -qx "//bench:$b" <<<"$have"; then
      binaries+=("$b")
    else
      echo "bench.sh: //bench:$b does not exist; skipped" >&2
    fi
  done
else
  for b in "${ALL_BINARIES[@]}"; do [ -x "$bin_dir/$b" ] && binaries+=("$b"); done
fi
[ ${#binaries[@]} -gt 0 ] || { echo "bench.sh: no benchmark binary to run" >&2; exit 2; }

if [ "$build" = true ]; then
  targets=()
  for b in "${binaries[@]}"; do targets+=("//bench:$b"); done
  bazel_flags=(--config=opt)
  [ -n "$jobs" ] && bazel_flags+=("--jobs=$jobs")
  echo "bench.sh: bazel build ${bazel_flags[*]} ${targets[*]}" >&2
  if ! bazel build "${bazel_flags[@]}" "${targets[@]}" >"$work/build.log" 2>&1; then
    grep -E 'ERROR|error:' "$work/build.log" | head -n 20 >&2
    echo "bench.sh: build failed" >&2
    exit 2
  fi
  bazel_bin=$(bazel info --config=opt bazel-bin 2>/dev/null)
  for b in "${binaries[@]}"; do
    rm -rf "${bin_dir:?}/$b" "$bin_dir/$b.runfiles"
    cp -L "$bazel_bin/bench/$b" "$bin_dir/$b"
    # A binary that finds data files through its runfiles (grpc_bench's
    # servers, say) takes them along.
    if [ -d "$bazel_bin/bench/$b.runfiles" ]; then cp -rL "$bazel_bin/bench/$b.runfiles" "$bin_dir/"; fi
  done
fi

[ -n "$tmpdir" ] && { mkdir -p "$tmpdir" && export TEST_TMPDIR=$tmpdir; }
# The commit the binaries were built from: this tree's when building (noted
# in the bin dir), the note's with --no-build.
if [ "$build" = true ]; then
  commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  dirty=false
  [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && dirty=true
  echo "$commit $dirty" >"$bin_dir/built-from"
elif [ -r "$bin_dir/built-from" ]; then
  read -r commit dirty <"$bin_dir/built-from"
else
  commit="unknown (--no-build: $bin_dir has no built-from note)"
  dirty=false
fi
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)

parts=()
status=0
for b in "${binaries[@]}"; do
  args=("--benchmark_repetitions=$reps" "--benchmark_format=json")
  # shellcheck disable=SC2206  # the per-binary strings are space-separated arguments
  [ -n "${DEFAULT_ARGS[$b]:-}" ] && args+=(${DEFAULT_ARGS[$b]})
  # shellcheck disable=SC2206
  [ "$quick" = true ] && args+=(${QUICK_ARGS[$b]:-})
  filter=${FILTER[$b]:-$all_filter}
  [ -z "$filter" ] && [ "$quick" = true ] && filter=${QUICK_FILTER[$b]:-}
  [ -n "$filter" ] && args+=("--benchmark_filter=$filter")
  [ "$b" = kv_bench ] && [ -n "$latency_dump" ] && args+=("--latency_dump=$latency_dump")
  # shellcheck disable=SC2206
  [ -n "${EXTRA[$b]:-}" ] && args+=(${EXTRA[$b]})
  args+=("${common_args[@]}")
  echo "bench.sh: $b ${args[*]}" >&2
  start=$SECONDS
  "$bin_dir/$b" "${args[@]}" >"$work/$b.json"
  rc=$?
  echo "bench.sh: $b exited $rc after $((SECONDS - start)) s" >&2
  [ "$rc" -eq 0 ] || status=1
  args_json=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${args[@]}")
  parts+=(--part "$b" "$rc" "$work/$b.json" "$args_json")
done

python3 bench/bench_results.py combine --out "$out" \
  --meta "git_commit=\"$commit\"" --meta "git_dirty=$dirty" --meta "date=\"$date\"" \
  --meta "repetitions=$reps" --meta "quick=$quick" \
  --meta "host=$(python3 -c 'import json, os; print(json.dumps(os.uname().nodename))')" \
  "${parts[@]}" || exit 1
python3 - "$out" <<'EOF' || status=1
import sys
sys.path.insert(0, "bench")
import bench_results
r = bench_results.load(sys.argv[1])
n = sum(len(run["benchmarks"]) for run in r["runs"])
print("bench.sh: wrote %s: %d benchmark result(s) from %s (%s)"
      % (sys.argv[1], n, ", ".join(run["binary"] for run in r["runs"]), bench_results.describe(r)),
      file=sys.stderr)
errs = bench_results.errors(r)
for e in errs:
    print("bench.sh: ERROR " + e, file=sys.stderr)
sys.exit(1 if errs else 0)
EOF
exit $status
