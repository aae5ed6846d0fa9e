#!/bin/bash
# Goal: `cowkv backup create|verify|restore` against two live cowkvd: a
# chain of a full and two incremental backups (KV, files, a rename, a
# delete) restores on another server to a subvolume whose digest equals
# the source's at each point (--upto), read-only or --writable; the
# manifest and the server agree (uuids, parent uuids in `subvolume list
# --json`); older backup snapshots are pruned (--keep); verify finds a
# damaged file, a broken chain and a truncated stream, and restore refuses
# them before receiving anything.
#
#   bash clients/cli/backup_test.sh COWKV COWKVD
source "$(dirname "$0")/test_lib.sh" "$1"
if [[ "$2" == /* ]]; then COWKVD="$2"; else COWKVD="$OLDPWD/$2"; fi
[[ -x "$COWKVD" ]] || fail "cowkvd not found at $COWKVD"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

start() {  # start NAME: a cowkvd on a fresh device; sets PORT
  "$COWKVD" --device "$WORK/$1.img" --create-size 256M --listen 127.0.0.1:0 \
    --metrics-listen "" 2>"$WORK/$1.log" &
  local pid=$!
  PIDS+=("$pid")
  PORT=""
  for i in $(seq 300); do
    PORT="$(grep -o '(port [0-9]*)' "$WORK/$1.log" | grep -o '[0-9]*')"
    [[ -n "$PORT" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$PORT" ]] || fail "cowkvd did not start: $(cat "$WORK/$1.log")"
}
start a
A="127.0.0.1:$PORT"
start b
B="127.0.0.1:$PORT"
export COWKV_SERVER="$A"
D="$WORK/backups"

digest() {  # digest SERVER NAME: prints the subvolume's SHA-256
  COWKV_SERVER="$1" run subvolume digest "$2"
  [[ "$RC" -eq 0 ]] || fail "digest of $2 on $1"
  cut -d' ' -f1 <<<"$OUT"
}
manifest_field() {  # manifest_field INDEX FIELD
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["streams"][int(sys.argv[2])][sys.argv[3]])' \
    "$D/manifest.json" "$1" "$2"
}

case_ "full backup"
run subvolume create data
expect_rc 0
run kv put -s data k1 v1
expect_rc 0
head -c 200000 /dev/urandom >"$WORK/big"
run fs put -s data "$WORK/big" /big
expect_rc 0
run backup create data --dir "$D"
expect_rc 0
expect_out "Backup of 'data' as 'data@backup-[0-9]{8}T[0-9]{6}\.[0-9]{3}Z': 000001-full\.stream, [0-9]+ bytes \(full\)"
D1="$(digest "$A" data)"

case_ "two incremental backups"
run kv put -s data k2 v2
expect_rc 0
run fs mv -s data /big /big2
expect_rc 0
run backup create data --dir "$D" --keep 2
expect_rc 0
expect_out "000002-incr\.stream.*\(incremental\)"
D2="$(digest "$A" data)"
run kv del -s data k1
expect_rc 0
run fs mkdir -s data /dir
expect_rc 0
run backup create data --dir "$D" --json
expect_rc 0
expect_out '"incremental": true'
expect_out '"chain_length": 3'
D3="$(digest "$A" data)"

case_ "the manifest and the server agree; --keep pruned the old snapshots"
S1="$(manifest_field 0 snapshot)"
S2="$(manifest_field 1 snapshot)"
S3="$(manifest_field 2 snapshot)"
[[ "$(manifest_field 1 parent_uuid)" == "$(manifest_field 0 uuid)" ]] || fail "chain link 1"
[[ "$(manifest_field 2 parent_uuid)" == "$(manifest_field 1 uuid)" ]] || fail "chain link 2"
[[ -z "$(manifest_field 0 parent_uuid)" ]] || fail "the first stream is not full"
run subvolume list --json
expect_rc 0
LIST="$OUT"
printf '%s' "$LIST" >"$WORK/list.json"
python3 - "$S3" "$(manifest_field 2 uuid)" "$WORK/list.json" <<'EOF' || fail "subvolume list --json: $LIST"
import json, sys
subs = {s["name"]: s for s in json.load(open(sys.argv[3]))["subvolume-list"]}
snap = subs[sys.argv[1]]
assert snap["uuid"] == sys.argv[2], snap
assert snap["parent_uuid"] == subs["data"]["uuid"], snap
assert snap["read_only"] and snap["received_uuid"] == ""
EOF
grep -q "\"$S1\"" <<<"$LIST" && fail "the oldest backup snapshot was kept"
# --keep 1 (the default) on the third backup keeps only the newest
grep -q "\"$S2\"" <<<"$LIST" && fail "the second backup snapshot was kept"
[[ "$(digest "$A" "$S3")" == "$D3" ]] || fail "the last backup snapshot differs from data"

case_ "verify"
run backup verify --dir "$D"
expect_rc 0
expect_out "000001-full.stream: sha256 ok, [0-9]+ records ok, dry run ok"
# the source server kept only the newest snapshot: the parents of 2 and 3 are gone
expect_out "000002-incr.stream: .*parent not on the server"
expect_out "000003-incr.stream: .*parent not on the server"
expect_out "Chain of 3 streams ok"
COWKV_SERVER="127.0.0.1:1" run backup verify --dir "$D" --offline --json
expect_rc 0
expect_out '"ok": true'

case_ "restore to another server, at each point"
COWKV_SERVER="$B" run backup restore --dir "$D" --upto 000001-full.stream r1
expect_rc 0
expect_out "Restored 1 streams up to 000001-full.stream"
[[ "$(digest "$B" r1)" == "$D1" ]] || fail "r1 differs"
COWKV_SERVER="$B" run backup restore --dir "$D" --upto 000002-incr.stream r2
expect_rc 0
[[ "$(digest "$B" r2)" == "$D2" ]] || fail "r2 differs"
COWKV_SERVER="$B" run backup restore --dir "$D" r3
expect_rc 0
[[ "$(digest "$B" r3)" == "$D3" ]] || fail "r3 differs"
COWKV_SERVER="$B" run subvolume show r3 --json
expect_out '"read_only": true'
COWKV_SERVER="$B" run subvolume list --json
expect_no_out '@restore-'
COWKV_SERVER="$B" run kv get -s r3 k2
expect_out v2
# B now holds a copy of every snapshot of the chain: every stream dry-runs
COWKV_SERVER="$B" run backup verify --dir "$D"
expect_rc 0
expect_no_out "not on the server"
[[ "$(grep -c 'dry run ok' <<<"$OUT")" -eq 3 ]] || fail "not every stream dry-ran: $OUT"

case_ "restore --writable"
COWKV_SERVER="$B" run backup restore --dir "$D" --writable w
expect_rc 0
expect_out "as 'w@base', writable as 'w'"
[[ "$(digest "$B" w)" == "$D3" ]] || fail "w differs"
COWKV_SERVER="$B" run kv put -s w k9 v9
expect_rc 0
COWKV_SERVER="$B" run subvolume show w@base --json
expect_out '"read_only": true'

case_ "restore: a taken name leaves nothing behind"
COWKV_SERVER="$B" run backup restore --dir "$D" r3
expect_rc 5
expect_one_err_line
COWKV_SERVER="$B" run subvolume list --json
expect_no_out '@restore-'

case_ "create refuses a directory another create holds"
flock "$D/.lock" sleep 3 &
LOCKER=$!
sleep 0.5
run backup create data --dir "$D"
expect_rc 6
expect_err "in use by another"
wait "$LOCKER"

case_ "create refuses another subvolume's directory"
run subvolume create other
run backup create other --dir "$D"
expect_rc 6
expect_err "holds backups of 'data'"

case_ "a damaged file: verify and restore refuse it"
cp "$D/000002-incr.stream" "$WORK/keep.stream"
flip_byte "$D/000002-incr.stream" 100
run backup verify --dir "$D" --offline
expect_rc 9
expect_one_err_line
expect_err "000002-incr.stream: damaged"
COWKV_SERVER="$B" run backup restore --dir "$D" r4
expect_rc 9
COWKV_SERVER="$B" run subvolume show r4
expect_rc 4
cp "$WORK/keep.stream" "$D/000002-incr.stream"

case_ "a broken chain: a missing link"
cp "$D/manifest.json" "$WORK/manifest.keep"
python3 - "$D/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
del m["streams"][1]
json.dump(m, open(sys.argv[1], "w"))
EOF
run backup verify --dir "$D" --offline
expect_rc 6
expect_err "broken chain: 000003-incr.stream is a difference from"
COWKV_SERVER="$B" run backup restore --dir "$D" r5
expect_rc 6
expect_one_err_line
cp "$WORK/manifest.keep" "$D/manifest.json"

case_ "a truncated stream whose manifest entry was rewritten to match"
head -c 300 "$D/000003-incr.stream" >"$WORK/short"
cp "$WORK/short" "$D/000003-incr.stream"
python3 - "$D/manifest.json" "$D/000003-incr.stream" <<'EOF'
import hashlib, json, os, sys
m = json.load(open(sys.argv[1]))
data = open(sys.argv[2], "rb").read()
m["streams"][2]["bytes"] = len(data)
m["streams"][2]["sha256"] = hashlib.sha256(data).hexdigest()
json.dump(m, open(sys.argv[1], "w"))
EOF
run backup verify --dir "$D" --offline
expect_rc 9
expect_err "truncated"
cp "$WORK/manifest.keep" "$D/manifest.json"

case_ "create: the last backup's snapshot is gone from the server"
run subvolume delete "$S3"
expect_rc 0
run backup create data --dir "$D"
expect_rc 6
expect_err "is not on the server"
run subvolume list --json
expect_no_out '"data@backup-' 

for p in "${PIDS[@]}"; do kill -INT "$p"; wait "$p" || fail "cowkvd did not stop cleanly"; done
PIDS=()
echo "PASS: backup_test"
