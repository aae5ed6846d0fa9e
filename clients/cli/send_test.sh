#!/bin/bash
# Goal: `cowkv send`, `cowkv receive` and `cowkv subvolume digest` between
# two live cowkvd: a full and an incremental stream (through -f FILE and
# through stdout/stdin) make read-only copies whose digests equal the
# sources'; --dry-run writes nothing; a damaged, truncated or parentless
# stream and a writable snapshot are refused with one stderr line and the
# exit code of their class (docs/cli.md), leaving no subvolume behind.
# Resumable receive: `receive -s` of a cut stream keeps a partial receive
# (listed, its name taken, its token printed); `send -t TOKEN` makes the
# rest, which cut again moves the token on (the old one is refused) and,
# piped whole, completes a copy with the source's digest; a damaged token
# is refused; `receive --abort` drops a partial receive. A third cowkvd
# --follow the first serves a replica of src (same digest), shows its lag in
# `cowkv status` and refuses writes to it.
#
#   bash clients/cli/send_test.sh COWKV COWKVD
source "$(dirname "$0")/test_lib.sh" "$1"
if [[ "$2" == /* ]]; then COWKVD="$2"; else COWKVD="$OLDPWD/$2"; fi
[[ -x "$COWKVD" ]] || fail "cowkvd not found at $COWKVD"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

start() {  # start NAME [FLAGS...]: a cowkvd on a fresh device; sets PORT
  local name="$1"
  shift
  "$COWKVD" --device "$WORK/$name.img" --create-size 256M --listen 127.0.0.1:0 \
    --metrics-listen "" "$@" 2>"$WORK/$name.log" &
  local pid=$!
  PIDS+=("$pid")
  PORT=""
  for i in $(seq 300); do
    PORT="$(grep -o '(port [0-9]*)' "$WORK/$name.log" | grep -o '[0-9]*')"
    [[ -n "$PORT" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$PORT" ]] || fail "cowkvd did not start: $(cat "$WORK/$name.log")"
}
start a
A="127.0.0.1:$PORT"
start b
B="127.0.0.1:$PORT"
export COWKV_SERVER="$A"

case_ "source history"
run subvolume create src
expect_rc 0
run kv put -s src k1 v1
expect_rc 0
head -c 300000 /dev/urandom >"$WORK/big"
run fs put -s src "$WORK/big" /big
expect_rc 0
run fs mkdir -s src /dir
expect_rc 0
run subvolume snapshot -r src s1
expect_rc 0

case_ "send: a writable subvolume is refused"
run send src -f "$WORK/x.stream"
expect_rc 6
expect_one_err_line

case_ "send s1 -f FILE, receive -f FILE"
run send s1 -f "$WORK/s1.stream"
expect_rc 0
expect_err 'At subvol s1: [0-9]+ records'
COWKV_SERVER="$B" run receive -f "$WORK/s1.stream"
expect_rc 0
expect_out "At subvol s1 \(full\)"

case_ "digests agree"
run subvolume digest s1
expect_rc 0
DA="$(cut -d' ' -f1 <<<"$OUT")"
COWKV_SERVER="$B" run subvolume digest s1
expect_rc 0
[[ "$(cut -d' ' -f1 <<<"$OUT")" == "$DA" ]] || fail "digest differs: $DA vs $OUT"
[[ "$DA" =~ ^[0-9a-f]{64}$ ]] || fail "not a digest: $DA"

case_ "incremental through stdout and stdin"
run kv put -s src k2 v2
expect_rc 0
run fs mv -s src /big /dir/big2
expect_rc 0
run subvolume snapshot -r src s2
expect_rc 0
"$COWKV" send -p s1 s2 >"$WORK/s2.stream" 2>"$WORK/send.err" || fail "send -p failed: $(cat "$WORK/send.err")"
COWKV_SERVER="$B" "$COWKV" receive <"$WORK/s2.stream" >"$WORK/recv.out" 2>&1 || fail "receive failed: $(cat "$WORK/recv.out")"
grep -q "incremental on 's1'" "$WORK/recv.out" || fail "not incremental: $(cat "$WORK/recv.out")"
run subvolume digest s2 --json
DA="$(grep -o '"sha256": "[0-9a-f]*"' <<<"$OUT")"
COWKV_SERVER="$B" run subvolume digest s2 --json
expect_rc 0
grep -q "$DA" <<<"$OUT" || fail "digest differs: $DA vs $OUT"
COWKV_SERVER="$B" run subvolume show s2 --json
expect_out '"read_only": true'
COWKV_SERVER="$B" run kv get -s s2 k2
expect_out 'v2'

case_ "receive --dry-run writes nothing"
COWKV_SERVER="$B" run receive --dry-run s2copy -f "$WORK/s2.stream"
expect_rc 0
expect_out "Stream checked for s2copy"
COWKV_SERVER="$B" run subvolume show s2copy
expect_rc 4

case_ "receive: a taken name"
COWKV_SERVER="$B" run receive -f "$WORK/s2.stream"
expect_rc 5
expect_one_err_line

case_ "receive: a damaged stream"
cp "$WORK/s2.stream" "$WORK/bad.stream"
flip_byte "$WORK/bad.stream" 200
COWKV_SERVER="$B" run receive s2bad -f "$WORK/bad.stream"
expect_rc 9
expect_one_err_line

case_ "receive: a truncated stream"
head -c 150 "$WORK/s2.stream" >"$WORK/short.stream"
COWKV_SERVER="$B" run receive s2short -f "$WORK/short.stream"
expect_rc 9
expect_err 'truncated'
COWKV_SERVER="$B" run subvolume list --json
expect_no_out 's2bad|s2short'

case_ "receive: the parent is missing"
COWKV_SERVER="$B" run subvolume delete s1 s2
expect_rc 0
COWKV_SERVER="$B" run receive -f "$WORK/s2.stream"
expect_rc 4
expect_err 'no parent'

case_ "receive: not a stream"
head -c 100 /dev/urandom >"$WORK/junk"
COWKV_SERVER="$B" run receive junk -f "$WORK/junk"
expect_rc 3
expect_one_err_line

case_ "receive -s: a cut stream is kept and resumed with send -t"
run subvolume create big
expect_rc 0
head -c 3000000 /dev/urandom >"$WORK/big3"
run fs put -s big "$WORK/big3" /big3
expect_rc 0
run kv put -s big kk vv
expect_rc 0
run subvolume snapshot -r big big-r
expect_rc 0
run send big-r -f "$WORK/big.stream"
expect_rc 0
SIZE=$(stat -c %s "$WORK/big.stream")
head -c $((SIZE / 2)) "$WORK/big.stream" >"$WORK/big.half"
COWKV_SERVER="$B" run receive -s bigcopy -f "$WORK/big.half"
expect_rc 9
expect_one_err_line
expect_err "partial receive 'bigcopy' kept"
COWKV_SERVER="$B" run subvolume show bigcopy
expect_rc 4
COWKV_SERVER="$B" run receive --list-partial --json
expect_rc 0
expect_out '"name": "bigcopy"'
COWKV_SERVER="$B" run receive --resume-token bigcopy
expect_rc 0
TOKEN1="$OUT"
[[ "$TOKEN1" =~ ^[A-Za-z0-9_-]+$ ]] || fail "not a token: $TOKEN1"
COWKV_SERVER="$B" run receive bigcopy -f "$WORK/big.stream"
expect_rc 5
expect_err 'partial receive'

case_ "send -t: the rest, cut again, then finished through a pipe"
run send -t "$TOKEN1" -f "$WORK/rest1.stream"
expect_rc 0
SIZE=$(stat -c %s "$WORK/rest1.stream")
head -c $((SIZE / 2)) "$WORK/rest1.stream" >"$WORK/rest1.half"
COWKV_SERVER="$B" run receive -s -f "$WORK/rest1.half"
expect_rc 9
COWKV_SERVER="$B" run receive --resume-token bigcopy
expect_rc 0
TOKEN2="$OUT"
[[ "$TOKEN2" != "$TOKEN1" ]] || fail "the token did not move"
COWKV_SERVER="$B" run receive -f "$WORK/rest1.stream"
expect_rc 6
expect_err 'ask for its token again'
BAD="${TOKEN2:0:20}A${TOKEN2:21}"
[[ "$BAD" != "$TOKEN2" ]] || BAD="${TOKEN2:0:20}B${TOKEN2:21}"
run send -t "$BAD" -f "$WORK/bad.rest"
expect_rc 3
expect_one_err_line
"$COWKV" send -t "$TOKEN2" 2>"$WORK/send.err" | COWKV_SERVER="$B" "$COWKV" receive >"$WORK/recv.out" 2>&1 ||
  fail "resume failed: $(cat "$WORK/send.err" "$WORK/recv.out")"
grep -q "At subvol bigcopy" "$WORK/recv.out" || fail "not received: $(cat "$WORK/recv.out")"
run subvolume digest big-r
DA="$(cut -d' ' -f1 <<<"$OUT")"
COWKV_SERVER="$B" run subvolume digest bigcopy
expect_rc 0
[[ "$(cut -d' ' -f1 <<<"$OUT")" == "$DA" ]] || fail "resumed digest differs: $DA vs $OUT"
COWKV_SERVER="$B" run receive --list-partial --json
expect_no_out 'bigcopy'

case_ "receive --abort drops a partial receive"
COWKV_SERVER="$B" run receive -s bigdrop -f "$WORK/big.half"
expect_rc 9
COWKV_SERVER="$B" run receive --abort bigdrop
expect_rc 0
COWKV_SERVER="$B" run receive --resume-token bigdrop
expect_rc 4
expect_one_err_line
COWKV_SERVER="$B" run receive --abort bigdrop
expect_rc 4

case_ "cowkvd --follow: a read replica, its lag in cowkv status, writes refused"
start r --follow "$A" --follow-subvolume src --follow-interval 0.2
R="127.0.0.1:$PORT"
for i in $(seq 100); do
  COWKV_SERVER="$R" "$COWKV" kv get -s src k2 >"$WORK/r.out" 2>/dev/null && break
  sleep 0.1
done
grep -q v2 "$WORK/r.out" || fail "the replica did not catch up: $(cat "$WORK/r.log")"
COWKV_SERVER="$R" run status
expect_rc 0
expect_out "^replica src of $A: lag [0-9.e-]+ s \(src@follow-[0-9]+\), [0-9]+ pulls, [0-9]+ failures, [0-9]+ bytes received$"
COWKV_SERVER="$R" run status --json
expect_out '"lag_seconds"'
COWKV_SERVER="$R" run kv put -s src k3 v3
expect_rc 6
expect_one_err_line
run subvolume digest src
DA="$(cut -d' ' -f1 <<<"$OUT")"
COWKV_SERVER="$R" run subvolume digest src
[[ "$(cut -d' ' -f1 <<<"$OUT")" == "$DA" ]] || fail "replica digest differs: $DA vs $OUT"

for p in "${PIDS[@]}"; do kill -INT "$p"; wait "$p" || fail "cowkvd did not stop cleanly"; done
PIDS=()
echo "PASS: send_test"
