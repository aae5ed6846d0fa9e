#!/usr/bin/env bash
# Replica lag under load (issue 19): a primary cowkvd under `cowkv bench`
# write load and a follower (`cowkvd --follow`) pulling subvolume `data`
# from it every --follow-interval; samples the follower's
# cowkv_replica_lag_seconds (seconds since its replica's snapshot was taken
# on the primary) every 0.2 s while the load runs, and prints the lag's
# percentiles, the pulls and the bytes received, with the load's own report.
#
#   bench/replica_lag.sh [--bin DIR] [--load s|m|l|xl] [--duration S] [--interval S]
#
# --bin: a directory holding cowkvd and cowkv (default bazel-bin's; build
# them with --config=opt for figures). Files go in a temporary directory
# under $TMPDIR, removed at exit; the servers listen on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=""
load=m
duration=30
interval=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=${2:?}; shift 2 ;;
    --load) load=${2:?}; shift 2 ;;
    --duration) duration=${2:?}; shift 2 ;;
    --interval) interval=${2:?}; shift 2 ;;
    *) echo "replica_lag.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
cowkvd=${bin:-bazel-bin/server}/cowkvd
cowkv=${bin:-bazel-bin/clients/cli}/cowkv
[ -x "$cowkvd" ] && [ -x "$cowkv" ] || { echo "replica_lag.sh: no cowkvd/cowkv (--bin)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/replica_lag.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() {  # ADDR
  for _ in $(seq 100); do "$cowkv" --server "$1" status >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "replica_lag.sh: no server at $1" >&2
  exit 1
}

pp=$(free_port); pm=$(free_port); fp=$(free_port); fm=$(free_port)
"$cowkvd" --device "$work/primary.img" --create-size 4G --listen "127.0.0.1:$pp" \
  --metrics-listen "127.0.0.1:$pm" >"$work/primary.log" 2>&1 &
pids+=($!)
wait_up "127.0.0.1:$pp"
"$cowkv" --server "127.0.0.1:$pp" subvolume create data >/dev/null
"$cowkvd" --device "$work/follower.img" --create-size 4G --listen "127.0.0.1:$fp" \
  --metrics-listen "127.0.0.1:$fm" --follow "127.0.0.1:$pp" --follow-subvolume data \
  --follow-interval "$interval" >"$work/follower.log" 2>&1 &
pids+=($!)
wait_up "127.0.0.1:$fp"

metric() {  # NAME -> value for subvolume data
  curl -s "http://127.0.0.1:$fm/metrics" | awk -v n="$1{subvolume=\"data\"}" '$1 == n {print $2}'
}
"$cowkv" --server "127.0.0.1:$pp" bench --load "$load" -s data --duration "$duration" \
  >"$work/bench.out" 2>&1 &
load_pid=$!
: >"$work/lag"
while kill -0 "$load_pid" 2>/dev/null; do
  metric cowkv_replica_lag_seconds >>"$work/lag"
  sleep 0.2
done
wait "$load_pid" || true
cat "$work/bench.out"
python3 - "$work/lag" "$(metric cowkv_replica_pulls_total)" "$(metric cowkv_replica_bytes_received_total)" \
  "$(metric cowkv_replica_failures_total)" "$interval" <<'EOF'
import sys
lags = sorted(float(x) for x in open(sys.argv[1]) if x.strip() and float(x) >= 0)
pulls, received, failures, interval = sys.argv[2:6]
if not lags:
    sys.exit("replica_lag.sh: the follower never had a replica")
pct = lambda p: lags[min(len(lags) - 1, int(p * len(lags)))]
print(f"replica lag (--follow-interval {interval} s), {len(lags)} samples under load: "
      f"p50 {pct(0.5):.2f} s, p99 {pct(0.99):.2f} s, max {lags[-1]:.2f} s; "
      f"pulls {pulls}, failures {failures}, bytes received {received}")
EOF
