#!/usr/bin/env bash
# dbench (its default client load) on `cowkv mount` and, in the same run,
# on btrfs in a loop-mounted image file on the same disk: throughput and the
# per-operation latency table, Flush and Rename among them, as seed 004's
# commit reports them.
#
#   bench/mount_dbench.sh [-t SECONDS=60] [-c CLIENTS=$(nproc)] [-o OUT.json] COWKV_BINARY
#
# Needs root (the btrfs loop mount), fuse3, dbench and btrfs-progs. Builds
# nothing: pass a `cowkv` built with --config=opt. Writes a JSON object per
# system: {"system", "throughput_mb_s", "ops": {NAME: {count, avg_ms, max_ms}}}.
set -euo pipefail
T=60
C=$(nproc)
OUT=""
while getopts "t:c:o:" opt; do
  case $opt in
    t) T=$OPTARG ;;
    c) C=$OPTARG ;;
    o) OUT=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
COWKV=$(realpath "$1")
W=$(mktemp -d /tmp/cowkv-dbench.XXXXXX)
cleanup() {
  mountpoint -q "$W/c" && fusermount3 -u "$W/c"
  mountpoint -q "$W/b" && umount "$W/b"
  flock "$W/cowkv.img" true 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/c" "$W/b"

parse() {  # dbench output -> JSON
  python3 - "$1" "$2" <<'PY'
import json, re, sys
system, path = sys.argv[1], sys.argv[2]
ops, tput = {}, None
for line in open(path):
    m = re.match(r"\s*(\w+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
    if m and m.group(1) not in ("Operation",):
        ops[m.group(1)] = {"count": int(m.group(2)), "avg_ms": float(m.group(3)),
                           "max_ms": float(m.group(4))}
    m = re.match(r"Throughput ([\d.]+) MB/sec", line)
    if m:
        tput = float(m.group(1))
print(json.dumps({"system": system, "throughput_mb_s": tput, "ops": ops}))
PY
}

"$COWKV" mkfs --size 4G "$W/cowkv.img" >/dev/null
"$COWKV" mount --device "$W/cowkv.img" "$W/c"
dbench -D "$W/c" -t "$T" "$C" >"$W/cowkv.out" 2>&1
fusermount3 -u "$W/c"
flock "$W/cowkv.img" true

truncate -s 4G "$W/btrfs.img"
mkfs.btrfs -q -f "$W/btrfs.img"
mount -o loop "$W/btrfs.img" "$W/b"
dbench -D "$W/b" -t "$T" "$C" >"$W/btrfs.out" 2>&1
umount "$W/b"

{
  echo "["
  parse cowkv_fuse "$W/cowkv.out"
  echo ","
  parse btrfs_loop "$W/btrfs.out"
  echo "]"
} >"$W/all.json"
if [[ -n "$OUT" ]]; then cp "$W/all.json" "$OUT"; fi
python3 - "$W/all.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print("| operation | " + " | ".join(f"{r['system']} count / avg / max ms" for r in rows) + " |")
print("|---|" + "---|" * len(rows))
for op in rows[0]["ops"]:
    cells = []
    for r in rows:
        o = r["ops"].get(op)
        cells.append(f"{o['count']} / {o['avg_ms']:.3f} / {o['max_ms']:.3f}" if o else "-")
    print(f"| {op} | " + " | ".join(cells) + " |")
print("| throughput MB/s | " + " | ".join(f"{r['throughput_mb_s']}" for r in rows) + " |")
PY
