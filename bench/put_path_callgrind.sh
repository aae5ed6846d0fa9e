#!/usr/bin/env bash
# Instructions per durable KV Put, through gRPC and in the engine alone.
#
#   bench/put_path_callgrind.sh COWKVD [PUTS]
#
# Runs COWKVD (build it with --config=opt) under callgrind on a fresh
# file-backed device, sends PUTS durable puts (16 B keys, 256 B values, one
# client) with the Python client, and prints the inclusive instruction count
# per put of the whole server process (gRPC included; its start and stop
# are spread over the puts), of its KV Put handler and of the engine facade
# below it.
# Callgrind counts instructions, not time, so two builds compare exactly
# whatever else the machine is doing; docs/benchmarks.md ("The Put path")
# shows the figures before and after issue 15.
set -euo pipefail
cowkvd=$(readlink -f "$1")
puts=${2:-2000}
here=$(cd "$(dirname "$0")/.." && pwd)
py="$here/clients/python/.venv/bin/python"
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
port=$((20000 + RANDOM % 20000))

valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
  --collect-atstart=yes --dump-instr=no \
  "$cowkvd" --device "$work/dev.img" --create-size 256M --listen "127.0.0.1:$port" \
  --metrics-listen "" >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q "port $port" "$work/log" 2>/dev/null && break
  sleep 0.1
done
PYTHONPATH="$here/clients/python/src" "$py" - "$port" "$puts" <<'EOF'
import sys
import cowkv
port, n = sys.argv[1], int(sys.argv[2])
c = cowkv.connect(f"127.0.0.1:{port}")
kv = c.subvolume("default")
value = b"v" * 256
for i in range(n):
    kv.put(b"key-%012d" % i, value, durability=cowkv.Durability.DURABLE)
c.close()
EOF
kill -INT "$pid"
wait "$pid" || true

# Inclusive cost of a function = its row in callgrind_annotate --inclusive.
report() {  # report LABEL REGEX
  local ir
  ir=$(callgrind_annotate --inclusive=yes --threshold=100 "$work/cg.out" 2>/dev/null |
       awk -v re="$2" '$0 ~ re && !done {gsub(",", "", $1); print $1; done = 1}')
  if [ -n "$ir" ]; then
    echo "$1: $((ir / puts)) instructions per put"
  else
    echo "$1: not found in the profile" >&2
  fi
}
total=$(callgrind_annotate "$work/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done {gsub(",", "", $1); print $1; done = 1}')
echo "whole process (start and stop included): $((total / puts)) instructions per put"
report "server KV Put handler (KvService::Put)" 'cowkv::server::KvService::Put\('
report "engine facade below it" "${ENGINE_FN:-cowkv::Subvolume::(Put|Txn)\\(}"
