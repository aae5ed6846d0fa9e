#!/bin/bash
# Goal: docs/operations.md's commands work as written. Every ```sh block of
# the guide runs, in the guide's order, in one bash (set -euo pipefail)
# against live cowkvd processes; each `<!-- ops-test: ACTION -->` line runs
# the stage direction ACTION below (what an operator does by hand: start or
# stop cowkvd, damage the device). Then the transcript must show what the
# guide promises: the restored subvolume's value, check's findings on the
# damaged device, a refused write on the full device, and equal digests
# before and after the move to a new device. A block that fails, an
# unknown ACTION, or a block that did not run fails the test.
#
#   bash docs/operations_doc_test.sh COWKV COWKVD docs/operations.md
set -u
abs() { if [[ "$1" == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
COWKV="$(abs "$1")"
COWKVD="$(abs "$2")"
DOC="$(abs "$3")"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/ops_doc.XXXXXX")"
trap 'kill -9 ${SERVER_PID:-} ${NEW_PID:-} 2>/dev/null; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/bin"
ln -s "$COWKV" "$WORK/bin/cowkv"
ln -s "$COWKVD" "$WORK/bin/cowkvd"

# The generated script: the harness, then the guide's blocks and actions.
SCRIPT="$WORK/run.sh"
cat >"$SCRIPT" <<'EOF'
set -euo pipefail
export PATH="$WORK/bin:$PATH"
export DEV="$WORK/cowkv.img" NEWDEV="$WORK/new.img"
export BACKUPS="$WORK/backups/data" EXPORT="$WORK/export"
cd "$WORK"
die() { echo "HARNESS FAIL: $*"; exit 1; }

# serve DEVICE SIZE LOG: a cowkvd on ephemeral ports; sets PID, PORT, MPORT
serve() {
  cowkvd --device "$1" --create-size "$2" --listen 127.0.0.1:0 \
    --metrics-listen 127.0.0.1:0 2>"$3" &
  PID=$!
  PORT=""
  for _ in $(seq 300); do
    PORT="$(grep -o '(port [0-9]*)' "$3" | head -n 1 | grep -o '[0-9]*' || true)"
    MPORT="$(grep -o '(port [0-9]*)' "$3" | sed -n 2p | grep -o '[0-9]*' || true)"
    [[ -n "$PORT" && -n "$MPORT" ]] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  die "cowkvd did not start: $(cat "$3")"
}
start_main() {  # start_main DEVICE SIZE
  serve "$1" "$2" "$WORK/server.log"
  SERVER_PID=$PID
  echo "$SERVER_PID" >"$WORK/server.pid"
  export COWKV_SERVER="127.0.0.1:$PORT" METRICS="127.0.0.1:$MPORT"
}
stop_pid() {
  kill -TERM "$1"
  local rc=0
  wait "$1" || rc=$?
  [[ "$rc" -eq 0 ]] || die "cowkvd $1 exited $rc"
}
action() {
  echo "=== ops-test: $1"
  case "$1" in
    start-server) start_main "$DEV" 256M ;;
    seed-data)
      cowkv subvolume create data >/dev/null
      cowkv kv put -s data greeting hello
      head -c 100000 /dev/urandom >"$WORK/file"
      cowkv fs put -s data "$WORK/file" /file
      DATA_ID="$(cowkv subvolume show data --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
      ;;
    stop-server) stop_pid "$SERVER_PID" ;;
    damage-device)
      local leaf
      leaf="$(cowkv dump-tree --tree "$DATA_ID" "$DEV" | awk '$1 == "leaf" {print $2; exit}')"
      [[ -n "$leaf" ]] || die "no leaf of tree $DATA_ID"
      printf '\xff\xff\xff\xff' | dd of="$DEV" bs=1 seek=$((leaf + 512)) conv=notrunc status=none
      ;;
    start-server-on-newdev) start_main "$WORK/recovered.img" 256M ;;
    small-device)
      stop_pid "$SERVER_PID"
      start_main "$WORK/small.img" 48M
      cowkv subvolume create data >/dev/null
      ;;
    start-new-server)
      serve "$NEWDEV" 1G "$WORK/new.log"
      NEW_PID=$PID
      echo "$NEW_PID" >"$WORK/new.pid"
      export NEW_SERVER="127.0.0.1:$PORT"
      ;;
    stop-all)
      [[ "$(cowkv subvolume digest data)" == "$(COWKV_SERVER="$NEW_SERVER" cowkv subvolume digest data)" ]] ||
        die "data differs after the move"
      stop_pid "$SERVER_PID"
      stop_pid "$NEW_PID"
      echo "=== stopped"
      ;;
    *) die "unknown ops-test action '$1'" ;;
  esac
}
EOF

# Append the guide: sh blocks verbatim, each announced; actions as calls.
BLOCKS=0
python3 - "$DOC" >>"$SCRIPT" <<'EOF' || { echo "FAIL: cannot parse the guide"; exit 1; }
import re, sys
lines = open(sys.argv[1]).read().split("\n")
n, i = 0, 0
while i < len(lines):
    m = re.match(r"<!-- ops-test: ([a-z-]+) -->$", lines[i])
    if m:
        print("action %s" % m.group(1))
    elif lines[i] == "```sh":
        n += 1
        print('echo "=== block %d (line %d)"' % (n, i + 1))
        i += 1
        while lines[i] != "```":
            print(lines[i])
            i += 1
    i += 1
print('echo "=== %d blocks ran"' % n)
EOF
BLOCKS="$(grep -c '^```sh$' "$DOC")"
[[ "$BLOCKS" -ge 8 ]] || { echo "FAIL: only $BLOCKS sh blocks in the guide"; exit 1; }

export WORK
bash "$SCRIPT" >"$WORK/transcript" 2>&1
RC=$?
sed 's/^/  | /' "$WORK/transcript"
fail() { echo "FAIL: $*"; exit 1; }
[[ "$RC" -eq 0 ]] || fail "the guide's script exited $RC (the last '=== block N' above is where)"
grep -q "^=== $BLOCKS blocks ran$" "$WORK/transcript" || fail "not every block ran"
grep -q "^=== stopped$" "$WORK/transcript" || fail "the last action did not run"
expect() { grep -Eq -- "$1" "$WORK/transcript" || fail "the transcript lacks /$1/"; }
expect "Backup of 'data' as 'data@backup-.*\(incremental\)"
expect "Chain of 2 streams ok"
expect "^hello again$"
expect "^ERROR: "
expect "^found [0-9]+ problems?$"
expect "cowkv: kv put: .*"
expect "Exported [0-9]+ streams"
expect "Imported [0-9]+ subvolumes"
expect "^cowkv_corruptions_detected_total 0$"
echo "PASS: operations_doc_test ($BLOCKS blocks)"
