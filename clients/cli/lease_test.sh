#!/bin/bash
# Goal: `cowkv lease grant|revoke|keep-alive|timetolive|list`, `cowkv kv put
# --lease` and `cowkv lock NAME -- COMMAND` against a live cowkvd: the
# output etcdctl users expect, --json, the exit code and one stderr line
# of each failure (docs/cli.md), keys going with their lease's revoke and
# expiry, and two `cowkv lock` runs never holding the lock at once.
#
#   bash clients/cli/lease_test.sh COWKV COWKVD
source "$(dirname "$0")/test_lib.sh" "$1"
if [[ "$2" == /* ]]; then COWKVD="$2"; else COWKVD="$OLDPWD/$2"; fi
[[ -x "$COWKVD" ]] || fail "cowkvd not found at $COWKVD"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

"$COWKVD" --device "$WORK/s.img" --create-size 256M --listen 127.0.0.1:0 \
  --metrics-listen "" 2>"$WORK/s.log" &
PID=$!
PIDS+=("$PID")
port=""
for i in $(seq 300); do
  port="$(grep -o '(port [0-9]*)' "$WORK/s.log" | grep -o '[0-9]*')"
  [[ -n "$port" ]] && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$port" ]] || fail "cowkvd did not start: $(cat "$WORK/s.log")"
export COWKV_SERVER="127.0.0.1:$port"

case_ "lease grant with an id"
run lease grant --id 42 60
expect_rc 0
expect_out '^lease 42 granted with TTL\(60s\)$'

case_ "lease grant picks an id (--json)"
run lease grant 5 --json
expect_rc 0
expect_out '"ttl": 5'
ID2="$(grep -o '"id": [0-9]*' <<<"$OUT" | grep -o '[0-9]*$')"
[[ -n "$ID2" ]] || fail "no id in $OUT"

case_ "lease grant: id taken"
run lease grant --id 42 60
expect_rc 5
expect_one_err_line

case_ "lease grant: bad TTL"
run lease grant 0
expect_rc 3
expect_one_err_line

case_ "kv put --lease"
run kv put --lease 42 a 1
expect_rc 0
run kv put --lease 42 b 2
expect_rc 0
run kv put --lease "$ID2" c 3
expect_rc 0

case_ "kv put --lease: unknown lease"
run kv put --lease 43 x 1
expect_rc 4
expect_one_err_line
expect_err 'lease 43 not found'

case_ "lease timetolive --keys"
run lease timetolive --keys 42
expect_rc 0
expect_out '^lease 42 granted with TTL\(60s\), remaining\([0-9]+s\), attached keys\(\[a b\]\)$'

case_ "lease list"
run lease list
expect_rc 0
expect_out '^found 2 leases$'
expect_out '^42$'

case_ "lease keep-alive --once"
run lease keep-alive --once 42
expect_rc 0
expect_out '^lease 42 keepalived with TTL\(60\)$'

case_ "lease keep-alive: unknown lease"
run lease keep-alive --once 44
expect_rc 4
expect_one_err_line

case_ "lease revoke deletes its keys"
run lease revoke 42
expect_rc 0
expect_out '^lease 42 revoked$'
run kv get a
expect_rc 4
run kv get b
expect_rc 4

case_ "lease revoke: unknown lease"
run lease revoke 42
expect_rc 4
expect_one_err_line
expect_err 'lease 42 not found'

case_ "an expired lease takes its key"
for i in $(seq 100); do
  run kv get c
  [[ "$RC" -eq 4 ]] && break
  sleep 0.1
done
expect_rc 4
run lease timetolive "$ID2"
expect_rc 4

case_ "lock runs the command and releases"
run lock jobs -- sh -c 'echo held; exit 3'
expect_rc 3
expect_out '^held$'
run kv range --prefix jobs/
expect_no_out 'jobs/'

case_ "two locks never overlap"
rm -f "$WORK/trace"
"$COWKV" lock jobs -- sh -c "echo in >>'$WORK/trace'; sleep 1; echo out >>'$WORK/trace'" &
P1=$!
"$COWKV" lock jobs -- sh -c "echo in >>'$WORK/trace'; sleep 1; echo out >>'$WORK/trace'" &
P2=$!
wait "$P1" || fail "first lock failed"
wait "$P2" || fail "second lock failed"
[[ "$(tr '\n' ' ' <"$WORK/trace")" == "in out in out " ]] || fail "overlap: $(cat "$WORK/trace")"

case_ "lock: no command"
run lock jobs
expect_rc 2

kill -INT "$PID"
wait "$PID" || fail "cowkvd did not stop cleanly"
echo "PASS: lease_test"
