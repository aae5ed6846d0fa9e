#!/bin/bash
# Goal: every online `cowkv` command against a live cowkvd (a temp device,
# a free port): subvolume create|list|show|rename|delete|snapshot|sync, kv
# get|put|del|range|txn|watch, fs ls|stat|mkdir|put|cat|mv|ln|rm|rmdir|fsync|watch|
# clone|fiemap|fallocate|chmod|chown|touch|setfattr|getfattr, stats, sync, check, bench, and the global
# options (--server, --token-file, --timeout, --json, COWKV_SERVER), and cowkvd --read-only. Each case checks stdout,
# and each failure case the exit code of its class (docs/cli.md) and the
# one stderr line "cowkv: <op>: <reason>".
#
#   bash clients/cli/e2e_test.sh [COWKV [COWKVD]]
#
# Defaults: bazel-bin/clients/cli/cowkv and bazel-bin/server/cowkvd (or
# $COWKVD); build them with `bazel build //clients/cli:cowkv //server:cowkvd`.
# tools/test.sh runs it after `bazel test //...`.
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
COWKV_BIN="${1:-$ROOT/bazel-bin/clients/cli/cowkv}"
COWKVD="${2:-${COWKVD:-$ROOT/bazel-bin/server/cowkvd}}"
source "$ROOT/clients/cli/test_lib.sh" "$COWKV_BIN"
[[ -x "$COWKVD" ]] || fail "cowkvd not found at $COWKVD"
STARTED=$SECONDS
CASES=0
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

case_() { CASE="$*"; CASES=$((CASES + 1)); }

# start_server NAME [cowkvd flags...]: a cowkvd on $WORK/NAME.img at a free
# port; sets PID and ADDR.
start_server() {
  local name="$1" port="" i
  shift
  # A restarted server writes the same log: remove the old one first, or the
  # loop below can read the old port before the new process truncates it.
  rm -f "$WORK/$name.log"
  "$COWKVD" --device "$WORK/$name.img" --create-size 256M \
    --listen 127.0.0.1:0 --metrics-listen "" "$@" 2>"$WORK/$name.log" &
  PID=$!
  PIDS+=("$PID")
  for i in $(seq 300); do
    port="$(grep -o '(port [0-9]*)' "$WORK/$name.log" | grep -o '[0-9]*')"
    [[ -n "$port" ]] && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$port" ]] || fail "cowkvd did not start: $(cat "$WORK/$name.log")"
  ADDR="127.0.0.1:$port"
}

# stop_server PID: SIGINT, which must drain, commit and exit 0.
stop_server() {
  kill -INT "$1"
  wait "$1"
  local rc=$?
  [[ "$rc" -eq 0 ]] || fail "cowkvd exited $rc on SIGINT"
}

c() { run --server "$ADDR" "$@"; }
expect_json() {  # PYTHON_EXPR over d = the parsed stdout must be true
  python3 -c "import json,sys; d=json.load(sys.stdin); assert d['__header']=={'version':'1'}; assert ($1), d" \
    <<<"$OUT" 2>"$WORK/.py" || fail "JSON check failed: $1 ($(tail -1 "$WORK/.py"))"
}
expect_fail() {  # RC REGEX: exit code RC, one stderr line matching REGEX, no stdout
  expect_rc "$1"
  expect_one_err_line
  expect_err "$2"
  [[ -z "$OUT" ]] || fail "stdout not empty on failure"
}

start_server main
SERVER_PID=$PID
MAIN_ADDR=$ADDR

# --- subvolumes -------------------------------------------------------------

case_ "subvolume create"
c subvolume create data
expect_rc 0; expect_no_err
expect_out "^Create subvolume 'data' \(id [0-9]+\)$"

case_ "subvolume create: name taken (already exists: 5)"
c subvolume create data
expect_fail 5 '^cowkv: subvolume create: .*data'

case_ "subvolume create: bad name refused before the call (invalid: 3)"
c subvolume create a/b
expect_fail 3 "^cowkv: subvolume create: .*contains '/'"

case_ "kv put then subvolume snapshot -r"
c kv put --subvolume data greeting hello
expect_rc 0; expect_no_err
[[ -z "$OUT" ]] || fail "kv put printed something"
c subvolume snapshot -r data data@2026-11-22
expect_rc 0
expect_out "^Create a readonly snapshot of 'data' in 'data@2026-11-22' \(id [0-9]+\)$"

case_ "subvolume snapshot (writable)"
c subvolume snapshot data data-rw
expect_rc 0
expect_out "^Create a snapshot of 'data' in 'data-rw'"
c kv put -s data-rw only-in-rw 1
expect_rc 0

case_ "subvolume list (table)"
c subvolume list
expect_rc 0
expect_out '^ +ID +GEN +OGEN +PARENT +CREATED +FLAGS +NAME$'
expect_out '^ +5 .* default$'
expect_out ' readonly +data@2026-11-22$'
expect_out ' - +data-rw$'

case_ "subvolume list --json"
c --json subvolume list
expect_rc 0
expect_json "[s['name'] for s in d['subvolume-list']] == ['default','data','data@2026-11-22','data-rw'] and d['subvolume-list'][2]['read_only'] and d['subvolume-list'][2]['parent_id'] == d['subvolume-list'][1]['id']"
# identities (btrfs's uuid, parent_uuid, received_uuid)
expect_json "d['subvolume-list'][2]['parent_uuid'] == d['subvolume-list'][1]['uuid'] and len(d['subvolume-list'][1]['uuid']) == 32 and d['subvolume-list'][1]['parent_uuid'] == '' and d['subvolume-list'][2]['received_uuid'] == ''"

case_ "subvolume show"
c subvolume show data@2026-11-22
expect_rc 0
expect_out '^data@2026-11-22$'
expect_out 'Subvolume ID: +[0-9]+'
expect_out 'Flags: +readonly'
c subvolume show data --json
expect_json "d['name'] == 'data' and not d['read_only']"

case_ "subvolume show: absent (not found: 4)"
c subvolume show nope
expect_fail 4 "^cowkv: subvolume show: .*nope"

case_ "subvolume rename"
c subvolume rename data-rw data-rw2
expect_rc 0
expect_out "^Rename subvolume 'data-rw' to 'data-rw2'$"
c kv get -s data-rw2 only-in-rw
[[ "$OUT" == 1 ]] || fail "renamed subvolume lost its key"
c subvolume show data-rw
expect_fail 4 'data-rw'

case_ "subvolume delete"
c subvolume delete data-rw2
expect_rc 0
expect_out "^Delete subvolume 'data-rw2'$"
c --json subvolume list
expect_json "'data-rw2' not in [s['name'] for s in d['subvolume-list']]"

case_ "subvolume delete default (precondition: 6)"
c subvolume delete default
expect_fail 6 '^cowkv: subvolume delete: '

case_ "subvolume show: the snapshots of a subvolume (btrfs's Snapshot(s))"
c subvolume show data
expect_rc 0
expect_out $'^\tSnapshot\\(s\\):$'
expect_out $'^\t\t\t\tdata@2026-11-22$'
expect_out $'^\tGen at creation: [0-9]+$'
c --json subvolume show data
expect_json "d['snapshots'] == ['data@2026-11-22'] and d['creation_generation'] > 0"
c --json subvolume show data@2026-11-22
expect_json "d['snapshots'] == []"

case_ "subvolume list -r, -s, --sort (server-side)"
c subvolume snapshot data data-rw3
expect_rc 0
c --json subvolume list -s
expect_json "[s['name'] for s in d['subvolume-list']] == ['data@2026-11-22','data-rw3']"
c --json subvolume list -r
expect_json "[s['name'] for s in d['subvolume-list']] == ['data@2026-11-22']"
c --json subvolume list -r -s --sort=-path
expect_json "[s['name'] for s in d['subvolume-list']] == ['data@2026-11-22']"
c --json subvolume list --sort=-rootid
expect_json "[s['id'] for s in d['subvolume-list']] == sorted([s['id'] for s in d['subvolume-list']], reverse=True)"
c --json subvolume list --sort=-ogen,+path
expect_json "[s['name'] for s in d['subvolume-list']] == ['data-rw3','data@2026-11-22','data','default']"
c subvolume list --sort=path
expect_rc 0
expect_out '^ +ID +GEN +OGEN +PARENT +CREATED +FLAGS +NAME$'
c subvolume list --sort=gen,size
expect_fail 3 "^cowkv: subvolume list: .*unknown subvolume sort key 'size'"

case_ "subvolume sync: waits for deleted subvolumes; errors name the id"
c --json subvolume show data-rw3
RW3_ID=$(python3 -c "import json,sys; print(json.load(sys.stdin)['id'])" <<<"$OUT")
c subvolume delete data-rw3
expect_rc 0
c --json subvolume sync "$RW3_ID"
expect_rc 0
expect_json "d['synced'] in ([], [$RW3_ID])"
c subvolume sync
expect_rc 0
[[ -z "$OUT" ]] || fail "nothing was pending: want no output, got '$OUT'"
c subvolume sync 999999
expect_fail 4 '^cowkv: subvolume sync: .*ENOENT: no subvolume ever had id 999999'
c subvolume sync 5
expect_fail 6 '^cowkv: subvolume sync: .*EBUSY: subvolume 5'

# --- kv ---------------------------------------------------------------------

case_ "kv get prints the value alone (no newline when not a tty)"
c kv get --subvolume data greeting
expect_rc 0; expect_no_err
[[ "$(wc -c <"$WORK/.out")" -eq 5 && "$OUT" == hello ]] || fail "want exactly 'hello'"

case_ "kv get of a missing key (not found: 4, one line)"
c kv get --subvolume data missing
expect_fail 4 '^cowkv: kv get: key not found: "missing"$'

case_ "kv get: empty key (invalid argument: 3)"
c kv get -s data ""
expect_fail 3 '^cowkv: kv get: '

case_ "kv get: unknown subvolume (not found: 4)"
c kv get -s nope k
expect_fail 4 "^cowkv: kv get: .*nope"

case_ "kv put to a read-only snapshot is refused (precondition: 6)"
c kv put --subvolume data@2026-11-22 greeting changed
expect_fail 6 '^cowkv: kv put: .*read-only'

case_ "snapshot keeps the old value; the live subvolume the new one"
c kv put -s data greeting "hello again"
c kv get -s data@2026-11-22 greeting
[[ "$OUT" == hello ]] || fail "snapshot changed"
c kv get -s data greeting
[[ "$OUT" == "hello again" ]] || fail "live value not updated"

case_ "kv put from stdin, binary value; get --json gives base64"
printf 'a\tb\000\377' >"$WORK/bin.val"
"$COWKV" --server "$ADDR" kv put -s data bin <"$WORK/bin.val" || fail "put from stdin"
"$COWKV" --server "$ADDR" kv get -s data bin >"$WORK/bin.got" || fail "get"
cmp -s "$WORK/bin.val" "$WORK/bin.got" || fail "binary value differs"
c --json kv get -s data bin
expect_json "d['value'] == {'base64': 'YQliAP8='} and d['version'] == 1 and d['revision'] >= d['mod_revision']"

case_ "kv put --durability async and durable; --json revision"
c kv put -s data d1 x --durability async --json
expect_json "d['revision'] > 0"
c kv put -s data d2 y --durability durable
expect_rc 0

case_ "kv get/range --rev read the history; kv compact; a compacted revision fails with the compact revision"
c kv put -s data hist one --json
R1=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])' <<<"$OUT")
c kv put -s data hist two
c kv get -s data --rev "$R1" hist
[[ "$OUT" == one ]] || fail "kv get --rev $R1 gave '$OUT'"
c kv get -s data hist
[[ "$OUT" == two ]] || fail "kv get gave '$OUT'"
c --json kv range -s data --prefix hist --rev "$R1"
expect_json "d['revision'] == $R1 and [kv['value'] for kv in d['kvs']] == ['one']"
c kv compact -s data $((R1 + 1))
expect_out "^compacted to revision $((R1 + 1))$"
c kv get -s data --rev "$R1" hist
expect_fail 7 "^cowkv: kv get: .*revision $R1 has been compacted.* from $((R1 + 1))"

case_ "kv watch: history from --rev with --prefix and --prev-kv (etcdctl's format), --json lines, a live change, a compacted start"
c --json kv put -s data w/a one
W1=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])' <<<"$OUT")
c kv put -s data w/a two
c kv del -s data w/a
c kv watch -s data --prefix --rev "$W1" --prev-kv --max-events 3 w/
expect_rc 0
[[ "$OUT" == $'PUT\nw/a\none\nPUT\nw/a\none\nw/a\ntwo\nDELETE\nw/a\ntwo\nw/a' ]] || fail "kv watch printed '$OUT'"
c --json kv watch -s data --rev "$W1" --max-events 3 w/a
expect_rc 0
python3 -c '
import json, sys
evs = [json.loads(l) for l in sys.stdin.read().splitlines()]
assert [e["type"] for e in evs] == ["PUT", "PUT", "DELETE"], evs
assert [e["kv"].get("value") for e in evs[:2]] == ["one", "two"], evs
assert evs[0]["revision"] == '"$W1"' and evs[2]["kv"]["key"] == "w/a", evs
' <<<"$OUT" || fail "kv watch --json lines: $OUT"
c --json kv put -s data w/marker x
M=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])' <<<"$OUT")
"$COWKV" --server "$ADDR" kv watch -s data --rev $((M + 1)) --max-events 1 w/live >"$WORK/watch.out" 2>&1 &
WPID=$!
c kv put -s data w/live now
for i in $(seq 100); do kill -0 "$WPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$WPID" 2>/dev/null && { kill "$WPID"; fail "kv watch (live) did not see the put"; }
wait "$WPID" || fail "kv watch (live) exited $?: $(cat "$WORK/watch.out")"
[[ "$(cat "$WORK/watch.out")" == $'PUT\nw/live\nnow' ]] || fail "live watch printed '$(cat "$WORK/watch.out")'"
c kv watch -s data --rev 1 w/a
expect_fail 7 "^cowkv: kv watch: WATCH_CANCEL_COMPACTED: .*\(oldest revision served: [0-9]+\)$"
c kv watch -s data --prefix w/ w/z
expect_fail 2 "^cowkv: kv watch: --prefix and RANGE_END are exclusive$"

case_ "fs watch: a live watcher of a path (inotifywait's shape, --json lines), a move out of it, history from --rev, a start before what is recorded"
"$COWKV" --server "$ADDR" --json fs watch -s data --max-events 4 /fw >"$WORK/fswatch.out" 2>"$WORK/fswatch.err" &
WPID=$!
sleep 1  # the watcher is registered (its create answered) well before this
c fs mkdir -s data /fw
c fs mkdir -s data /fw/d
c fs mkdir -s data /fwout
c fs mv -s data /fw/d /fwout/d
c fs mkdir -s data /fw/e
for i in $(seq 100); do kill -0 "$WPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$WPID" 2>/dev/null && { kill "$WPID"; fail "fs watch (live) did not see the changes: $(cat "$WORK/fswatch.out" "$WORK/fswatch.err")"; }
wait "$WPID" || fail "fs watch (live) exited $?: $(cat "$WORK/fswatch.err")"
FW1=$(python3 -c '
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
got = [(e["type"], e["path"], e.get("new_path", "")) for e in evs]
assert got == [("MKDIR", "fw", ""), ("MKDIR", "fw/d", ""), ("RENAME", "fw/d", "fwout/d"), ("MKDIR", "fw/e", "")], got
assert all(evs[i]["revision"] < evs[i + 1]["revision"] for i in range(3)), evs
print(evs[0]["revision"])' "$WORK/fswatch.out") || fail "fs watch --json lines: $(cat "$WORK/fswatch.out")"
c fs watch -s data --rev "$FW1" --max-events 4 /fw/
expect_rc 0
[[ "$OUT" == $'fw MKDIR\nfw/d MKDIR\nfw/d RENAME fwout/d\nfw/e MKDIR' ]] || fail "fs watch --rev printed '$OUT'"
c fs watch -s data --rev 1 /fw
expect_fail 7 "^cowkv: fs watch: WATCH_CANCEL_COMPACTED: .*\(oldest revision served: [0-9]+\)$"

case_ "kv txn: 25 puts from a spec file"
python3 -c 'import json; print(json.dumps({"success": [{"put": {"key": "user/%03d" % i, "value": "name %d" % i}} for i in range(1, 26)]}))' >"$WORK/puts.json"
c kv txn -s data "$WORK/puts.json"
expect_rc 0
expect_out '^SUCCESS$'
expect_out '^\[24\] put$'

case_ "kv range pages through every page"
c kv range -s data --prefix user/ --page-size 7
expect_rc 0
[[ "$(wc -l <<<"$OUT")" -eq 25 ]] || fail "want 25 keys"
[[ "$(head -1 <<<"$OUT")" == $'user/001\tname 1' ]] || fail "first line"
[[ "$(tail -1 <<<"$OUT")" == $'user/025\tname 25' ]] || fail "last line"

case_ "kv range --limit --reverse --keys-only"
c kv range -s data --prefix user/ --limit 3 --reverse --keys-only --page-size 2
expect_rc 0
[[ "$OUT" == $'user/025\nuser/024\nuser/023' ]] || fail "want the last 3 keys, reversed"

case_ "kv range --start --end and --count"
c kv range -s data --start user/010 --end user/013
[[ "$(cut -f1 <<<"$OUT" | tr '\n' ' ')" == "user/010 user/011 user/012 " ]] || fail "bounds"
c kv range -s data --prefix user/ --count
[[ "$OUT" == 25 ]] || fail "want count 25"

case_ "kv range --json (streamed pages)"
c --json kv range -s data --prefix user/ --page-size 10
expect_json "d['count'] == 25 and len(d['kvs']) == 25 and d['kvs'][0] == {'key': 'user/001', 'value': 'name 1', 'create_revision': d['kvs'][0]['create_revision'], 'mod_revision': d['kvs'][0]['mod_revision'], 'version': 1}"

case_ "kv range --snapshot reads the read-only snapshot"
c kv range -s data --snapshot data@2026-11-22 --keys-only
[[ "$OUT" == greeting ]] || fail "snapshot should hold only 'greeting'"

case_ "kv range: prefix with start (invalid argument: 3)"
c kv range -s data --prefix a --start b
expect_fail 3 '^cowkv: kv range: '

case_ "kv del one key; again (not found: 4)"
c kv del -s data user/001
expect_rc 0; expect_no_err
c kv del -s data user/001
expect_fail 4 '^cowkv: kv del: key not found'

case_ "kv del --prefix prints the count"
c kv del -s data --prefix user/02
expect_rc 0
[[ "$OUT" == 6 ]] || fail "want 6 deleted"
c kv del -s data --start user/010 --end user/012 --json
expect_json "d['deleted'] == 2"

case_ "kv del: neither KEY nor range (usage: 2)"
c kv del -s data
expect_fail 2 '^cowkv: kv del: give either KEY'

case_ "kv txn: compare holds (SUCCESS), from stdin"
cat >"$WORK/cas.json" <<'EOF'
{"compare": [{"key": "greeting", "target": "value", "op": "=", "value": "hello again"},
             {"key": "lock", "target": "exists", "op": "=", "exists": false}],
 "success": [{"put": {"key": "lock", "value": "me"}}, {"range": {"prefix": "user/00", "limit": 2}}],
 "failure": [{"range": {"prefix": "lock"}}]}
EOF
"$COWKV" --server "$ADDR" kv txn -s data <"$WORK/cas.json" >"$WORK/.out" || fail "txn"
OUT="$(cat "$WORK/.out")"
expect_out '^SUCCESS$'
expect_out '^\[1\] range: 2 keys \(more follow\)$'
expect_out $'^user/002\tname 2$'

case_ "kv txn: compare fails (FAILURE is exit 0, as etcdctl)"
c kv txn -s data "$WORK/cas.json"
expect_rc 0
expect_out '^FAILURE$'
expect_out $'^lock\tme$'
c --json kv txn -s data "$WORK/cas.json"
expect_json "d['succeeded'] is False and d['responses'][0]['range']['kvs'][0]['key'] == 'lock'"

case_ "kv txn: malformed spec (invalid argument: 3)"
echo '{"success": [{"put": {"key": 7}}]}' >"$WORK/bad.json"
c kv txn -s data "$WORK/bad.json"
expect_fail 3 '^cowkv: kv txn: success\[0\]\.put\.key'

case_ "kv txn on a read-only snapshot (precondition: 6)"
c kv txn -s data@2026-11-22 "$WORK/puts.json"
expect_fail 6 '^cowkv: kv txn: .*read-only'

# --- fs ---------------------------------------------------------------------

head -c 300000 /dev/urandom >"$WORK/big.bin"
printf 'hello world\n' >"$WORK/notes.txt"

case_ "fs mkdir -p; mkdir of an existing name (exists: 5); -p again is fine"
c fs mkdir -s data -p /docs/2026/11
expect_rc 0; expect_no_err
c fs mkdir -s data /docs
expect_fail 5 '^cowkv: fs mkdir: EEXIST'
c fs mkdir -s data -p /docs/2026 --mode 0700
expect_rc 0

case_ "fs put (file, into a directory, from stdin) and fs cat"
c fs put -s data "$WORK/notes.txt" /docs/notes.txt
expect_rc 0; expect_no_err
c fs put -s data "$WORK/big.bin" /docs
expect_rc 0
printf 'from stdin' | "$COWKV" --server "$ADDR" fs put -s data - /docs/stdin.txt || fail "put -"
"$COWKV" --server "$ADDR" fs cat -s data /docs/big.bin >"$WORK/big.got" || fail "cat"
cmp -s "$WORK/big.bin" "$WORK/big.got" || fail "big.bin differs after put/cat"
c fs cat -s data /docs/notes.txt /docs/stdin.txt
[[ "$OUT" == $'hello world\nfrom stdin' ]] || fail "cat of two files"
c fs cat -s data --offset 6 --length 5 /docs/notes.txt
[[ "$OUT" == world ]] || fail "cat --offset --length"

case_ "fs put --json; put to a read-only snapshot (precondition: 6, EROFS)"
c --json fs put -s data "$WORK/notes.txt" /docs/notes2.txt
expect_json "d['bytes_written'] == 12 and d['stat']['size'] == 12 and d['path'] == '/docs/notes2.txt'"
c fs put -s data@2026-11-22 "$WORK/notes.txt" /x
expect_fail 6 '^cowkv: fs put: EROFS'

case_ "fs put: local file missing (1)"
c fs put -s data "$WORK/absent" /y
expect_fail 1 '^cowkv: fs put: cannot open .*absent'

case_ "fs tmpfile (O_TMPFILE + linkat): stdin published as DIR/NAME; EEXIST leaves nothing"
c fs mkdir -s data /published
expect_rc 0
printf 'atomic' | "$COWKV" --server "$ADDR" fs tmpfile -s data /published a.txt || fail "tmpfile"
c fs cat -s data /published/a.txt
[[ "$OUT" == atomic ]] || fail "cat of the published file"
c --json fs tmpfile -s data --mode 0600 --from "$WORK/notes.txt" /published b.txt
expect_json "d['path'] == '/published/b.txt' and d['stat']['size'] == 12 and d['stat']['nlink'] == 1"
c fs tmpfile -s data --from "$WORK/notes.txt" /published a.txt
expect_fail 5 '^cowkv: fs tmpfile: EEXIST'
c fs ls -s data /published
[[ "$OUT" == $'a.txt\nb.txt' ]] || fail "a refused tmpfile left something: $OUT"
c fs tmpfile -s data /absent-dir x </dev/null
expect_fail 4 '^cowkv: fs tmpfile: ENOENT'
c fs tmpfile -s data@2026-11-22 / x </dev/null
expect_fail 6 '^cowkv: fs tmpfile: EROFS'

case_ "fs ls, ls -l, --json ls"
c fs ls -s data /docs
expect_rc 0
[[ "$OUT" == $'2026/\nnotes.txt\nbig.bin\nstdin.txt\nnotes2.txt' ]] || fail "ls names"
c fs ls -l -s data /docs
expect_out '^MODE +LINKS +SIZE +MODIFIED +NAME$'
expect_out '^-rw-r--r-- +1 +300000 .* big\.bin$'
expect_out '^drwxr-xr-x +1 .* 2026$'
c --json fs ls -s data -l /docs
expect_json "[e['name'] for e in d['entries']][:3] == ['2026','notes.txt','big.bin'] and d['entries'][2]['stat']['size'] == 300000"

case_ "fs stat, --json stat; stat of a missing path (not found: 4)"
c fs stat -s data /docs/notes.txt
expect_out '^  File: /docs/notes.txt$'
expect_out '^  Size: 12 .*regular file$'
expect_out '^Access: \(0644/-rw-r--r--\)'
c --json fs stat -s data /docs
expect_json "d['kind'] == 'directory' and d['ino'] > 256"
c fs stat -s data /docs/none
expect_fail 4 '^cowkv: fs stat: ENOENT'

case_ "fs mv; --no-replace onto an existing name (exists: 5); --exchange"
c fs mv -s data /docs/notes2.txt /docs/renamed.txt
expect_rc 0
c fs mv -s data --no-replace /docs/renamed.txt /docs/notes.txt
expect_fail 5 '^cowkv: fs mv: EEXIST'
c fs mv -s data --exchange /docs/stdin.txt /docs/notes.txt
expect_rc 0
c fs cat -s data /docs/notes.txt
[[ "$OUT" == "from stdin" ]] || fail "exchange did not swap"

case_ "fs ln (hard) and ln --symbolic; ls -l shows the target"
c fs ln -s data /docs/big.bin /docs/big.link
expect_rc 0
c fs stat -s data /docs/big.link
expect_out 'Links: 2$'
c fs ln -s data --symbolic /docs/big.bin /docs/big.sym
expect_rc 0
c fs ls -l -s data /docs
expect_out '^lrwxrwxrwx .* big\.sym -> /docs/big\.bin$'

case_ "fs rm; rm of a missing name (not found: 4); rm of a directory (6)"
c fs rm -s data /docs/big.link /docs/big.sym
expect_rc 0
c fs rm -s data /docs/big.link
expect_fail 4 '^cowkv: fs rm: ENOENT'
c fs rm -s data /docs/2026
expect_fail 6 '^cowkv: fs rm: EISDIR'

case_ "fs rmdir: not empty (precondition: 6, ENOTEMPTY); empty is fine"
c fs rmdir -s data /docs/2026
expect_fail 6 '^cowkv: fs rmdir: ENOTEMPTY'
c fs rmdir -s data /docs/2026/11 /docs/2026
expect_rc 0

case_ "fs fsync and fsync --data"
c fs fsync -s data /docs/big.bin
expect_rc 0; expect_no_err
c fs fsync -s data --data /docs/notes.txt
expect_rc 0

case_ "fs clone: the clone and the source share their extents (fiemap)"
c fs clone -s data /docs/big.bin /docs/big.clone
expect_rc 0; expect_no_err
"$COWKV" --server "$ADDR" fs cat -s data /docs/big.clone | cmp -s - "$WORK/big.bin" || fail "clone differs"
c fs fiemap -s data /docs/big.clone
expect_rc 0
expect_out '^Filesystem type is: cowkv$'
expect_out '^File size of /docs/big.clone is 300000 \(74 blocks of 4096 bytes\)$'
expect_out '^ ext: +logical_offset: +physical_offset: length: +expected: flags:$'
expect_out '^ +0: +0\.\. +[0-9]+: +[0-9]+\.\. +[0-9]+: +[0-9]+: +.*shared'
expect_out 'last,shared,eof$'
expect_out '^/docs/big.clone: [0-9]+ extents? found$'
c fs fiemap -s data /docs/big.bin
expect_out 'shared'

case_ "fs fiemap --json; an inline file"
c --json fs fiemap -s data /docs/big.clone
expect_json "d['size'] == 300000 and all('shared' in e['flags'] for e in d['extents']) and 'last' in d['extents'][-1]['flags']"
c fs fiemap -s data /docs/notes.txt
expect_out 'last,not_aligned,inline,eof$'

case_ "fs clone with offsets and a length"
c fs clone -s data --src-offset 64K --dst-offset 0 --length 64K /docs/big.bin /docs/part
expect_rc 0
"$COWKV" --server "$ADDR" fs cat -s data /docs/part >"$WORK/part.got"
tail -c +65537 "$WORK/big.bin" | head -c 65536 | cmp -s - "$WORK/part.got" || fail "partial clone differs"

case_ "fs clone: missing source (not found: 4)"
c fs clone -s data /docs/none /docs/x
expect_fail 4 '^cowkv: fs clone: ENOENT'

case_ "fs fallocate: preallocate, keep size past EOF, punch, zero; fiemap shows unwritten"
c fs fallocate -s data -o 0 -l 64K /docs/prealloc.bin
expect_fail 4 '^cowkv: fs fallocate: ENOENT'
"$COWKV" --server "$ADDR" fs put -s data /dev/null /docs/prealloc.bin || fail "cannot create"
c --json fs fallocate -s data -l 64K /docs/prealloc.bin
expect_rc 0
expect_json "d['stat']['size'] == 65536 and d['stat']['bytes'] == 65536"
c fs fiemap -s data /docs/prealloc.bin
expect_out 'last,unwritten,eof$'
c --json fs fallocate -s data -k -o 64K -l 32K /docs/prealloc.bin
expect_json "d['stat']['size'] == 65536 and d['stat']['bytes'] == 98304"
c --json fs fiemap -s data /docs/prealloc.bin
expect_json "all('unwritten' in e['flags'] for e in d['extents']) and d['extents'][-1]['logical'] + d['extents'][-1]['length'] == 98304"
[[ "$("$COWKV" --server "$ADDR" fs cat -s data /docs/prealloc.bin | wc -c)" == 65536 ]] ||
  fail "preallocated file is not 64 KiB"
[[ "$("$COWKV" --server "$ADDR" fs cat -s data /docs/prealloc.bin | tr -d '\0' | wc -c)" == 0 ]] ||
  fail "preallocated bytes are not zeros"
c --json fs fallocate -s data -p -o 0 -l 4K /docs/prealloc.bin
expect_json "d['stat']['size'] == 65536 and d['stat']['bytes'] == 94208"
c --json fs fallocate -s data -z -o 60K -l 10K /docs/prealloc.bin
expect_json "d['stat']['size'] == 71680"
c fs fallocate -s data -p -z -l 4K /docs/prealloc.bin
expect_fail 3 '^cowkv: fs fallocate: EINVAL'
c fs fallocate -s data -l 0 /docs/prealloc.bin
expect_fail 3 '^cowkv: fs fallocate: EINVAL'
c fs fallocate -s data -l 4K /docs
expect_fail 6 '^cowkv: fs fallocate: EISDIR'

case_ "files of a read-only snapshot are readable"
c fs ls -s data@2026-11-22 /
expect_rc 0
[[ -z "$OUT" ]] || fail "the snapshot predates every file"

# --- fs attributes and xattrs (issue 17) -------------------------------------

case_ "fs chmod, chown, touch: stat shows them"
c fs chmod -s data 0600 /docs/notes.txt
expect_rc 0; expect_no_err
[[ -z "$OUT" ]] || fail "chmod printed something"
c fs chown -s data 1000:100 /docs/notes.txt
expect_rc 0
c fs touch -s data -m --time 1000000000000000000 /docs/notes.txt
expect_rc 0
c fs stat -s data /docs/notes.txt
expect_out '^Access: \(0600/-rw-------\)  Uid: 1000  Gid: 100$'
expect_out '^Modify: 2001-09-09'
c fs chown -s data :7 /docs/notes.txt
c --json fs stat -s data /docs/notes.txt
expect_json "d['uid'] == 1000 and d['gid'] == 7 and d['mtime_ns'] == 1000000000000000000"

case_ "fs touch creates a missing file (not with -c); --json prints the attributes"
c --json fs touch -s data /docs/touched
expect_json "d['paths'][0]['path'] == '/docs/touched' and d['paths'][0]['stat']['size'] == 0"
c fs touch -s data -c /docs/not-created
expect_fail 4 '^cowkv: fs touch: ENOENT'

case_ "fs chmod: bad mode is a usage error (2); missing file (4); read-only snapshot (6)"
c fs chmod -s data 8777 /docs/notes.txt
expect_rc 2
c fs chmod -s data 0644 /docs/none
expect_fail 4 '^cowkv: fs chmod: ENOENT'
c fs chown -s data abc /docs/notes.txt
expect_rc 2
c fs chmod -s data@2026-11-22 0644 /
expect_fail 6 '^cowkv: fs chmod: EROFS'

case_ "fs setfattr and getfattr (names, -n, -d, encodings); --create, --replace, -x"
c fs setfattr -s data -n user.a -v hello /docs/notes.txt
expect_rc 0; expect_no_err
c fs setfattr -s data -n user.bin -v 0x00ff10 --create /docs/notes.txt
expect_rc 0
c fs getfattr -s data /docs/notes.txt
expect_rc 0
expect_out '^# file: /docs/notes.txt$'
expect_out '^user.a$'
expect_out '^user.bin$'
c fs getfattr -s data -d /docs/notes.txt
expect_out '^user.a="hello"$'
expect_out '^user.bin=0sAP8Q$'
c fs getfattr -s data -n user.bin -e hex /docs/notes.txt
expect_out '^user.bin=0x00ff10$'
c --json fs getfattr -s data -d /docs/notes.txt
expect_json "d['files'][0]['xattrs'] == {'user.a': 'hello', 'user.bin': {'base64': 'AP8Q'}}"
c fs setfattr -s data -n user.a -v again --create /docs/notes.txt
expect_fail 5 '^cowkv: fs setfattr: EEXIST'
c fs setfattr -s data -n user.none -v x --replace /docs/notes.txt
expect_fail 4 '^cowkv: fs setfattr: ENODATA'
c fs setfattr -s data -x user.bin /docs/notes.txt
expect_rc 0
c fs getfattr -s data -n user.bin /docs/notes.txt
expect_fail 4 '^cowkv: fs getfattr: ENODATA'
c fs setfattr -s data -n user.big -v "$(head -c 5000 /dev/zero | tr '\0' v)" /docs/notes.txt
expect_fail 3 '^cowkv: fs setfattr: ERANGE'
c fs setfattr -s data /docs/notes.txt
expect_rc 2

case_ "fs fsync --range OFF:LEN (range writeback); a bad or overflowing range"
c fs fsync -s data --range 64K:64K /docs/big.bin
expect_rc 0; expect_no_err
c fs fsync -s data --data --range 0:0 /docs/big.bin
expect_rc 0
c fs fsync -s data --range nope /docs/big.bin
expect_rc 2
c fs fsync -s data --range 9223372036854775807:2 /docs/big.bin
expect_fail 3 '^cowkv: fs fsync: EINVAL'

# --- admin ------------------------------------------------------------------

case_ "stats (table and --json)"
c stats
expect_rc 0
expect_out '^COUNTER +VALUE$'
expect_out '^commits +[0-9]+$'
expect_out '^server_rpcs +[1-9][0-9]*$'
c stats --json
expect_json "d['nodesize'] > 0 and d['total_bytes'] > d['used_bytes'] > 0"

case_ "sync (silent; --json generation)"
c sync
expect_rc 0; expect_no_err
[[ -z "$OUT" ]] || fail "sync printed something"
c --json sync
expect_json "d['generation'] > 0"

case_ "check (online): clean"
c check
expect_rc 0; expect_no_err
expect_out "^Checking filesystem on cowkvd at $ADDR"
expect_out '^no problems found$'
c check --json
expect_json "d['ok'] and d['problems'] == [] and d['trees'] > 0"

# --- bench ------------------------------------------------------------------

case_ "bench --load s --duration 2 --json: PASS (0) or FAIL (1), every figure, no key left"
c --json bench --load s --duration 2
[[ "$RC" -eq 0 || "$RC" -eq 1 ]] || fail "want exit 0 (PASS) or 1 (FAIL)"
expect_json "d['load'] == 's' and d['clients'] == 50 and d['channels'] == 1 and d['target_rate_wps'] == 150 and d['durability'] == 'durable' and d['prefix'] == '__cowkv_bench/' and d['writes'] + d['errors'] > 0 and 0 < d['peak_in_flight'] <= 50 and d['elapsed_s'] >= 2 and d['deleted'] >= d['writes'] + 1 and sorted(d['checks']) == ['errors', 'slowest', 'stddev', 'throughput'] and d['pass'] == all(x['pass'] for x in d['checks'].values()) and d['pass'] == ($RC == 0) and d['errors'] == sum(e['count'] for e in d['error_codes'].values()) and d['latency_p50_ms'] <= d['latency_p99_ms'] <= d['slowest_ms']"
if [[ "$RC" -eq 0 ]]; then expect_no_err; else expect_one_err_line; expect_err '^cowkv: bench: FAIL: '; fi
c kv range --prefix __cowkv_bench/ --count
[[ "$OUT" == 0 ]] || fail "bench left $OUT keys under its prefix"

case_ "bench text: the etcdctl check perf lines; a custom load"
c bench --clients 4 --rate 20 --duration 0.5 --durability async -s data --prefix bench-text/
[[ "$RC" -eq 0 || "$RC" -eq 1 ]] || fail "want exit 0 (PASS) or 1 (FAIL)"
expect_out '^cowkv bench: load custom: 4 clients on 1 connection, target 20 writes/s for 0.5 s; 256-byte values, async; keys under "bench-text/" in subvolume data at '
expect_out '^(PASS|FAIL): Throughput (is|too low:) [0-9.]+ writes/s \(target 20, at least 18\)$'
expect_out '^(PASS|FAIL): Slowest request took '
expect_out '^(PASS|FAIL): Stddev '
expect_out '^(PASS: No errors|FAIL: [0-9]+ errors?)$'
[[ "$(tail -1 <<<"$OUT")" == PASS || "$(tail -1 <<<"$OUT")" == FAIL ]] || fail "last line is not PASS or FAIL"
c kv range -s data --prefix bench-text/ --count
[[ "$OUT" == 0 ]] || fail "bench left $OUT keys under its prefix"

case_ "bench refuses a prefix that holds keys (precondition: 6) and leaves them alone"
c kv put __cowkv_bench/mine "user data"
c bench --duration 1
expect_fail 6 '^cowkv: bench: prefix "__cowkv_bench/" in subvolume default already holds keys \(first: "__cowkv_bench/mine"\)'
c kv range --prefix __cowkv_bench/
[[ "$OUT" == $'__cowkv_bench/mine\tuser data' ]] || fail "the user's key under the prefix changed"
c kv del __cowkv_bench/mine
expect_rc 0

case_ "bench: a bad --load, --duration or --clients (usage: 2)"
c bench --load xxl
expect_fail 2 '^cowkv: bench: .*--load'
c bench --duration 0
expect_fail 2 '^cowkv: bench: .*--duration'
c bench --clients 0
expect_fail 2 '^cowkv: bench: .*--clients'

# --- global options ---------------------------------------------------------

case_ "COWKV_SERVER names the server"
COWKV_SERVER="$ADDR" run kv get -s data greeting
[[ "$OUT" == "hello again" ]] || fail "COWKV_SERVER ignored"

case_ "--timeout: a deadline that cannot be met (timeout: 11)"
# A listener that accepts and never answers: the call cannot finish, so
# only the deadline ends it. (A 1 µs deadline against the live server was
# not enough: gRPC rounds deadlines up to the millisecond, and an online
# check of a small store can answer within one.)
SILENT_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
held = []
while True:
    c, _ = s.accept(); held.append(c)
' "$SILENT_PORT" &
SILENT_PID=$!
for _ in $(seq 50); do
  python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
    "$SILENT_PORT" 2>/dev/null && break
  sleep 0.1
done
run --server "127.0.0.1:$SILENT_PORT" --timeout 0.3 check
kill "$SILENT_PID" 2>/dev/null; wait "$SILENT_PID" 2>/dev/null
expect_fail 11 '^cowkv: check: .*--timeout'

case_ "--token-file: missing or wrong token (auth: 12); right token works"
printf 's3cret\n' >"$WORK/token"
printf 'wrong\n' >"$WORK/wrong"
start_server auth --auth-token-file "$WORK/token"
AUTH_PID=$PID
c stats
expect_fail 12 '^cowkv: stats: '
c --token-file "$WORK/wrong" subvolume list
expect_fail 12 '^cowkv: subvolume list: '
c --token-file "$WORK/token" subvolume list
expect_rc 0
expect_out ' default$'
c --token-file "$WORK/absent" subvolume list
expect_fail 1 '^cowkv: subvolume list: cannot read --token-file'
stop_server "$AUTH_PID"

case_ "version and status: client and server builds; one status line"
ADDR="$MAIN_ADDR"
c version
expect_rc 0; expect_no_err
expect_out '^client: cowkv [0-9.]+ \(cowkv.v1, commit ([0-9a-f]+(-dirty)?|unknown), (opt|checked)\)$'
expect_out '^server: cowkvd [0-9.]+ \(cowkv.v1, commit .*\) grpc [0-9.]+, protobuf [0-9.]+, nodesize [0-9]+$'
c status
expect_rc 0; expect_no_err
expect_out "^$ADDR, [0-9.]+, healthy, generation [0-9]+, revision [0-9]+, used [0-9]+ of [0-9]+ bytes \(free [0-9]+\), [0-9]+ open transactions$"
c status --json
expect_json "d['healthy'] and d['total_bytes'] > 0 and d['revision'] > 0"

case_ "offline tools refuse a served device (in use: 6); nothing acknowledged is lost"
ADDR="$MAIN_ADDR"
c kv put --subvolume data served-key kept
expect_rc 0
run mkfs --force --size 32M "$WORK/main.img"
expect_fail 6 '^cowkv: mkfs: .*is in use'
run mkfs --force "$WORK/main.img"
expect_fail 6 '^cowkv: mkfs: .*is in use'
run check "$WORK/main.img"
expect_fail 6 '^cowkv: check: .*is in use'
run dump-tree "$WORK/main.img"
expect_fail 6 '^cowkv: dump-tree: .*is in use'
[[ "$(stat -c %s "$WORK/main.img")" -eq $((256 << 20)) ]] || fail "mkfs resized a served device"
c sync
expect_rc 0
stop_server "$SERVER_PID"
run check "$WORK/main.img"
expect_rc 0
start_server main
SERVER_PID=$PID
c kv get --subvolume data served-key
expect_rc 0
[[ "$OUT" == "kept" ]] || fail "served-key lost after the refused tools and a restart: '$OUT'"

case_ "TLS and mTLS: --tls-ca/--tls-cert/--tls-key and COWKV_TLS_*; cowkvd --client-ca requires a client certificate"
if command -v openssl >/dev/null; then
  T="$WORK/tls"
  mkdir -p "$T"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/ca.key" \
    -out "$T/ca.pem" -days 1 -subj "/CN=cowkv test CA" 2>/dev/null || fail "openssl: CA"
  for who in server client; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/$who.key" \
      -out "$T/$who.csr" -subj "/CN=cowkv $who" 2>/dev/null || fail "openssl: $who csr"
    printf 'subjectAltName=IP:127.0.0.1\n' >"$T/$who.ext"
    openssl x509 -req -in "$T/$who.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial \
      -out "$T/$who.pem" -days 1 -extfile "$T/$who.ext" 2>/dev/null || fail "openssl: $who cert"
  done
  start_server mtls --tls-cert "$T/server.pem" --tls-key "$T/server.key" --client-ca "$T/ca.pem"
  MTLS_PID=$PID
  c subvolume list
  expect_fail 10 '^cowkv: subvolume list: '
  c --tls-ca "$T/ca.pem" subvolume list
  expect_fail 10 '^cowkv: subvolume list: '
  c --tls-ca "$T/ca.pem" --tls-cert "$T/client.pem" --tls-key "$T/client.key" subvolume list
  expect_rc 0
  expect_out ' default$'
  COWKV_TLS_CA="$T/ca.pem" COWKV_TLS_CERT="$T/client.pem" COWKV_TLS_KEY="$T/client.key" \
    run --server "$ADDR" kv put k v
  expect_rc 0
  c --tls-ca "$T/ca.pem" --tls-cert "$T/client.pem" subvolume list
  expect_fail 1 '--tls-cert and --tls-key go together'
  stop_server "$MTLS_PID"
else
  echo "e2e: TLS case skipped: openssl is not on PATH" >&2
fi

case_ "cowkvd --read-only: the main image served read-only after its server stops; reads work, writes are EROFS (6)"
stop_server "$SERVER_PID"
start_server main --read-only
RO_PID=$PID
c kv get -s data greeting
expect_rc 0
expect_out '^hello again$'
c fs getfattr -s data -d /docs/notes.txt
expect_out '^user.a="hello"$'
c kv put -s data greeting again
expect_fail 6 '^cowkv: kv put: '
c fs mkdir -s data /ro-dir
expect_fail 6 '^cowkv: fs mkdir: EROFS'
c fs chmod -s data 0600 /docs/notes.txt
expect_fail 6 '^cowkv: fs chmod: EROFS'
c subvolume create nope
expect_fail 6 '^cowkv: subvolume create: '
stop_server "$RO_PID"
"$COWKVD" --device "$WORK/none.img" --read-only --listen 127.0.0.1:0 --metrics-listen "" \
  2>"$WORK/none.log" && fail "--read-only created a device"
grep -q 'does not exist' "$WORK/none.log" || fail "no reason: $(cat "$WORK/none.log")"
[[ ! -e "$WORK/none.img" ]] || fail "--read-only created $WORK/none.img"
start_server main
SERVER_PID=$PID

case_ "server stopped: unavailable (10), one line naming the address"
stop_server "$SERVER_PID"
c kv get -s data greeting
expect_fail 10 "^cowkv: kv get: cowkvd at $ADDR is unavailable"
c bench --duration 1
expect_fail 10 "^cowkv: bench: cowkvd at $ADDR is unavailable"

echo "e2e: $CASES cases passed in $((SECONDS - STARTED)) s"
pass
