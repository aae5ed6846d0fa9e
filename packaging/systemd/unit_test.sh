#!/bin/bash
# Goal: packaging/systemd/cowkvd.service works. PID 1 here is not systemd,
# so systemd-run cannot start the unit; instead:
#  1. `systemd-analyze verify` accepts the unit (ExecStart pointed at the
#     built cowkvd, the only change), when systemd-analyze is installed;
#  2. the unit's ExecStart, expanded as systemd would (unit_exec.py) with
#     the device and addresses overridden as a `systemctl edit` drop-in
#     would, runs exactly: cowkvd creates the device, serves (`cowkv
#     status` answers on the listen address), stops on the unit's
#     KillSignal within TimeoutStopSec with exit 0, and serves the same
#     data again when started a second time (Restart= restarts it so).
#
#   bash packaging/systemd/unit_test.sh UNIT UNIT_EXEC COWKVD COWKV
set -u
abs() { if [[ "$1" == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
UNIT="$(abs "$1")"; UNIT_EXEC="$(abs "$2")"; COWKVD="$(abs "$3")"; COWKV="$(abs "$4")"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/unit_test.XXXXXX")"
PID=""
trap '[[ -n "$PID" ]] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; [[ -f "$WORK/log" ]] && sed 's/^/  | /' "$WORK/log"; exit 1; }
field() { sed -n "s/^$1=//p" "$UNIT" | tail -n 1; }

echo "--- systemd-analyze verify"
sed "s|^ExecStart=/usr/local/bin/cowkvd |ExecStart=$COWKVD |" "$UNIT" >"$WORK/cowkvd.service"
grep -q "^ExecStart=$COWKVD " "$WORK/cowkvd.service" || fail "ExecStart is not /usr/local/bin/cowkvd ..."
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify --man=no "$WORK/cowkvd.service" >"$WORK/verify" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$WORK/verify")"
  [[ -s "$WORK/verify" ]] && fail "systemd-analyze verify warns: $(cat "$WORK/verify")"
else
  echo "systemd-analyze not installed: skipped"
fi
[[ "$(field Type)" == exec ]] || fail "Type= is not exec (cowkvd does not sd_notify)"
[[ "$(field Restart)" == on-failure ]] || fail "Restart= is not on-failure"
KILL="$(field KillSignal)"
STOP_S="$(field TimeoutStopSec)"

run_unit() {  # the unit's ExecStart exactly, with the drop-in's overrides
  python3 "$UNIT_EXEC" "$WORK/cowkvd.service" \
    "COWKVD_DEVICE=$WORK/state/cowkv.img" "COWKVD_LISTEN=127.0.0.1:0" \
    "COWKVD_METRICS_LISTEN=127.0.0.1:0" "COWKVD_FLAGS=--log-format=json --create-size=64M" \
    >"$WORK/argv" || fail "unit_exec.py"
  mapfile -d '' ARGV <"$WORK/argv"
  [[ "${ARGV[0]}" == "$COWKVD" ]] || fail "argv[0] is ${ARGV[0]}"
  echo "argv: ${ARGV[*]}"
  "${ARGV[@]}" 2>"$WORK/log" &
  PID=$!
  PORT=""
  for _ in $(seq 300); do
    PORT="$(grep -o '"port":[0-9]*' "$WORK/log" | head -n 1 | grep -o '[0-9]*' || true)"
    [[ -n "$PORT" ]] && break
    kill -0 "$PID" 2>/dev/null || fail "cowkvd exited before serving"
    sleep 0.1
  done
  [[ -n "$PORT" ]] || fail "cowkvd did not serve"
}
stop_unit() {
  kill "-${KILL#SIG}" "$PID"
  local rc=0
  timeout "$STOP_S" tail --pid="$PID" -f /dev/null || fail "not stopped within ${STOP_S}s"
  wait "$PID" || rc=$?
  PID=""
  [[ "$rc" -eq 0 ]] || fail "exit $rc on $KILL"
}

echo "--- ExecStart, first start"
mkdir -p "$WORK/state"   # StateDirectory=
run_unit
"$COWKV" --server "127.0.0.1:$PORT" status >"$WORK/status" 2>&1 || fail "status: $(cat "$WORK/status")"
grep -q healthy "$WORK/status" || fail "status: $(cat "$WORK/status")"
"$COWKV" --server "127.0.0.1:$PORT" kv put k survives || fail "put"
grep -q '"event":"serving"' "$WORK/log" || fail "no JSON serving event (COWKVD_FLAGS not passed?)"
stop_unit
echo "--- ExecStart, second start (as Restart= would)"
run_unit
[[ "$("$COWKV" --server "127.0.0.1:$PORT" kv get k)" == survives ]] || fail "the data did not survive"
stop_unit
echo "PASS: unit_test"
