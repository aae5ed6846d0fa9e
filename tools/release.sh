#!/usr/bin/env bash
# The release build: stripped, optimized cowkv and cowkvd in one directory.
#
#   tools/release.sh [--out DIR] [-- BAZEL_FLAGS...]
#
# Builds //clients/cli:cowkv and //server:cowkvd with --config=release
# (.bazelrc: --config=opt, -O3 -DNDEBUG, linked with --strip=always, so no
# debug info), copies them into DIR (default dist/), writes their man pages
# under DIR/man (cowkv man --dir) and prints each file with its size, then
# checks that both binaries run (--version, --help). BAZEL_FLAGS go to
# bazel build as they are (e.g. --jobs=1 --disk_cache=/tmp/bzl-cache).
# The opt build writes the same bazel-bin as the default one; the next
# default `bazel build` relinks the debug binaries (from its cache).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#--out=}"; shift ;;
    --) shift; break ;;
    *) echo "release: unknown argument '$1' (usage: tools/release.sh [--out DIR] [-- BAZEL_FLAGS...])" >&2; exit 2 ;;
  esac
done
bazel build --config=release "$@" //clients/cli:cowkv //server:cowkvd
BIN=$(bazel info --config=release "$@" bazel-bin 2>/dev/null)
mkdir -p "$OUT"
for b in clients/cli/cowkv server/cowkvd; do
  install -m 0755 "$BIN/$b" "$OUT/$(basename "$b")"
done
"$OUT/cowkv" man --dir "$OUT/man" --cowkvd "$OUT/cowkvd" >/dev/null
"$OUT/cowkv" completion bash >"$OUT/cowkv.bash"
for b in cowkv cowkvd; do
  "$OUT/$b" --version >/dev/null || { echo "release: $OUT/$b --version failed" >&2; exit 1; }
  "$OUT/$b" --help >/dev/null || { echo "release: $OUT/$b --help failed" >&2; exit 1; }
  if readelf -S "$OUT/$b" | grep -q '\.debug_info'; then
    echo "release: $OUT/$b still has debug info" >&2
    exit 1
  fi
done
echo "release: $("$OUT/cowkv" --version)"
for f in "$OUT/cowkv" "$OUT/cowkvd" "$OUT/cowkv.bash" "$OUT"/man/man*/*; do
  printf '%10s  %s\n' "$(du -h --apparent-size "$f" | cut -f1)" "$f"
done
