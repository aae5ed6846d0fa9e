#!/bin/bash
# Goal: `cowkv export` / `cowkv import` move a whole store — writable
# subvolumes, read-only snapshots of several lineages, a snapshot whose
# source was deleted, a writable snapshot of a snapshot, a non-empty default
# subvolume — from a 256 MiB device to a smaller (64 MiB) and a bigger
# (1 GiB) one: every subvolume's digest and read-only flag is equal on
# both targets, the export snapshots are gone from source and targets, and
# the source is unchanged. Import refuses a damaged file and a taken name
# before changing anything; export refuses a directory that has an export.
#
#   bash clients/cli/export_test.sh COWKV COWKVD
source "$(dirname "$0")/test_lib.sh" "$1"
if [[ "$2" == /* ]]; then COWKVD="$2"; else COWKVD="$OLDPWD/$2"; fi
[[ -x "$COWKVD" ]] || fail "cowkvd not found at $COWKVD"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

start() {  # start NAME SIZE: a cowkvd on a fresh device; sets PORT
  "$COWKVD" --device "$WORK/$1.img" --create-size "$2" --listen 127.0.0.1:0 \
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
start src 256M
SRC="127.0.0.1:$PORT"
start small 64M
SMALL="127.0.0.1:$PORT"
start big 1G
BIG="127.0.0.1:$PORT"
export COWKV_SERVER="$SRC"
D="$WORK/export"

ok() { run "$@"; [[ "$RC" -eq 0 ]] || fail "cowkv $*"; }

case_ "a store with several lineages"
ok subvolume create data
ok kv put -s data k1 v1
head -c 300000 /dev/urandom >"$WORK/big"
ok fs put -s data "$WORK/big" /big
ok subvolume snapshot -r data data@1
ok kv put -s data k2 v2
ok fs mv -s data /big /big2
ok subvolume snapshot -r data data@2
ok subvolume snapshot data@1 fork          # writable snapshot of a snapshot
ok kv put -s fork f1 x
ok subvolume create gone
ok kv put -s gone g v
ok subvolume snapshot -r gone gone@ro
ok subvolume delete gone                   # a lineage whose source is deleted
ok subvolume snapshot -r gone@ro gone@ro2
ok subvolume create plain
ok kv put -s plain p q
ok kv put dk dv                            # the default subvolume
ok fs mkdir -s data /d

names() {  # names SERVER: every subvolume name, one a line, sorted
  COWKV_SERVER="$1" run subvolume list --json
  python3 -c 'import json,sys; [print(s["name"], s["read_only"]) for s in json.load(sys.stdin)["subvolume-list"]]' <<<"$OUT" | sort
}
digests() {  # digests SERVER: "name read_only digest" for each subvolume
  names "$1" | while read -r n ro; do
    COWKV_SERVER="$1" run subvolume digest "$n"
    echo "$n $ro $(cut -d' ' -f1 <<<"$OUT")"
  done
}
BEFORE="$(digests "$SRC")"
[[ "$(grep -cE '^[^ ]+ (True|False) [0-9a-f]{64}$' <<<"$BEFORE")" -eq 8 ]] ||
  fail "want 8 subvolumes with digests: $BEFORE"

case_ "export"
ok export --dir "$D"
expect_out "Exported [0-9]+ streams \(4 writable subvolumes\)"
[[ "$(digests "$SRC")" == "$BEFORE" ]] || fail "the source changed: $(digests "$SRC")"
python3 - "$D/export.json" <<'EOF' || fail "export.json: $(cat "$D/export.json")"
import json, sys
m = json.load(open(sys.argv[1]))
s = m["streams"]
full = [e for e in s if not e["parent_uuid"]]
# one full stream per lineage: data's (data, data@1, data@2, fork), gone's, plain's, default's
assert len(full) == 4, full
assert sorted(e["writable_as"] for e in s if e["writable_as"]) == ["data", "default", "fork", "plain"]
EOF

case_ "export refuses a directory that has an export"
run export --dir "$D"
expect_rc 5
expect_one_err_line

for T in SMALL BIG; do
  case_ "import into the $T device"
  COWKV_SERVER="${!T}" ok import --dir "$D"
  expect_out "Imported 8 subvolumes"
  AFTER="$(digests "${!T}")"
  # default on the target is its own (empty) one; the source's is default@imported
  WANT="$(sed 's/^default /default@imported /' <<<"$BEFORE" | sort)"
  GOT="$(grep -v '^default ' <<<"$AFTER")"
  [[ "$GOT" == "$WANT" ]] || fail "digests differ on $T:
want:
$WANT
got:
$GOT"
  grep -q '@export-' <<<"$AFTER" && fail "export snapshots left on $T"
  COWKV_SERVER="${!T}" ok kv put -s fork f2 y   # writable again
done

case_ "import refuses a taken name before changing anything"
COWKV_SERVER="$SMALL" run import --dir "$D"
expect_rc 5
expect_err "already has a subvolume"

case_ "import refuses a damaged file before changing anything"
start fresh 64M
FRESH="127.0.0.1:$PORT"
flip_byte "$D/000002.stream" 40
COWKV_SERVER="$FRESH" run import --dir "$D"
expect_rc 9
expect_one_err_line
[[ "$(names "$FRESH")" == "default False" ]] || fail "import changed the target: $(names "$FRESH")"

for p in "${PIDS[@]}"; do kill -INT "$p"; wait "$p" || fail "cowkvd did not stop cleanly"; done
PIDS=()
echo "PASS: export_test"
