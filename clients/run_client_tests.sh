#!/usr/bin/env bash
# Runs the tests of one or more clients: the generated spec tables are up to
# date (tools/gen_client_spec.py --check), unit tests, the bad-input pass and
# the conformance scenarios (clients/conformance/scenarios.json) against
# live cowkvd processes the tests start themselves.
#
#   bash clients/run_client_tests.sh go ts java rust   # or: all
#   bash clients/run_client_tests.sh --check all       # toolchains only
#
# Installs what a client needs from its registry when missing (Go modules,
# npm packages; stubs are generated from proto/ on every run, Go's are
# committed and checked) and builds
# cowkvd with Bazel unless $COWKVD names a binary. Every client runs one
# private copy of that binary, made here (a Bazel build meanwhile replaces
# bazel-bin's file). Works on a clean clone.
#
# Toolchains it does not install: python3 (the conformance driver), Go >=
# 1.26, Node >= 20 with npm, Rust >=
# 1.85 with cargo (the JDK and Maven come from Debian, clients/java/
# run_tests.sh installs them). A missing or too old one fails that client
# (and --check) with what is missing and how to install it.
# Exit status: non-zero if any client failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

check_only=0
if [ "${1:-}" = "--check" ]; then
  check_only=1
  shift
fi
if [ $# -eq 0 ]; then
  echo "usage: $0 [--check] go|ts|java|rust|all ..." >&2
  exit 2
fi
langs=()
for a in "$@"; do
  case "$a" in
    all) langs+=(go ts java rust) ;;
    go | ts | java | rust) langs+=("$a") ;;
    typescript) langs+=(ts) ;;
    *) echo "$0: unknown client '$a' (go, ts, java, rust, all)" >&2; exit 2 ;;
  esac
done

# version_at_least HAVE WANT: dotted versions, compared numerically.
version_at_least() {
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}

# check_<lang>: 0 if the toolchain is there, else says what is missing and
# how to install it (on stderr) and returns 1.
check_go() {
  # /usr/local/go/bin: where Go's release tarball goes, often not on PATH.
  if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
  fi
  local v
  v=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  if [ -n "$v" ] && version_at_least "$v" 1.26; then return 0; fi
  echo "go: missing Go >= 1.26 (google.golang.org/grpc v1.85 needs it); found: ${v:-no go command}" >&2
  echo "go:   install Go's release tarball from https://go.dev/dl/ into /usr/local/go" \
    "(tar -C /usr/local -xzf go1.26.<n>.linux-amd64.tar.gz); Debian 12's golang-go (1.19) is too old" >&2
  return 1
}

check_ts() {
  local v
  v=$(node --version 2>/dev/null | sed 's/^v//')
  if [ -n "$v" ] && version_at_least "$v" 20 && command -v npm >/dev/null; then return 0; fi
  echo "ts: missing Node >= 20 with npm; found: node ${v:-none}, npm $(npm --version 2>/dev/null || echo none)" >&2
  echo "ts:   install Node 20 or later with npm, e.g. the nodejs package of NodeSource's node_20.x" \
    "apt repository (it includes npm); Debian 12's nodejs (18) is too old" >&2
  return 1
}

check_rust() {
  if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  local v
  v=$(rustc --version 2>/dev/null | awk '{print $2}')
  if command -v cargo >/dev/null && [ -n "$v" ] && version_at_least "$v" 1.85; then return 0; fi
  echo "rust: missing Rust >= 1.85 with cargo (tonic 0.14 needs it); found: rustc ${v:-none}," \
    "cargo $(command -v cargo >/dev/null && echo present || echo none)" >&2
  echo "rust:   install it with rustup (https://rustup.rs: rustup-init -y --profile minimal," \
    "then ~/.cargo/bin is used); Debian 12's rustc/cargo (1.63) are too old" >&2
  return 1
}

# The conformance scenarios run through clients/conformance/driver.py.
check_python3() {
  if command -v python3 >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))'; then
    return 0
  fi
  echo "conformance: missing python3 >= 3.8 (clients/conformance/driver.py runs the scenarios);" \
    "install Debian's python3" >&2
  return 1
}

check_java() {
  local need=()
  command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null || need+=(maven)
  [ ${#need[@]} -eq 0 ] && return 0
  # Not an error: clients/java/run_tests.sh installs them.
  echo "java: missing ${need[*]}; clients/java/run_tests.sh installs them from Debian" >&2
  return 0
}

if [ $check_only -eq 1 ]; then
  status=0
  for lang in "${langs[@]}"; do "check_$lang" || status=1; done
  [ $status -eq 0 ] && echo "client toolchains: ok (${langs[*]})"
  exit $status
fi

if [ -z "${COWKVD:-}" ]; then
  COWKVD="$root/bazel-bin/server/cowkvd"
  if [ ! -x "$COWKVD" ]; then
    bazel build //server:cowkvd || exit 1
  fi
fi
if [ ! -x "$COWKVD" ]; then
  echo "$0: COWKVD=$COWKVD is not an executable" >&2
  exit 1
fi
bindir=$(mktemp -d "${TMPDIR:-/tmp}/cowkv-client-tests.XXXXXX")
trap 'rm -rf "$bindir"' EXIT
cp "$COWKVD" "$bindir/cowkvd" || exit 1
export COWKVD="$bindir/cowkvd"
# The conformance runners must not skip for want of a server.
export COWKV_REQUIRE_SERVER=1

run_go() {
  check_go || return 1
  check_python3 || return 1
  cd "$root/clients/go" || return 1
  go mod download || return 1
  # internal/pb/*.pb.go are committed; internal/pb's test checks them
  # against proto/ (go generate ./... rewrites them).
  go vet ./... || return 1
  go test -count=1 ./...
}

run_ts() {
  check_ts || return 1
  check_python3 || return 1
  cd "$root/clients/typescript" || return 1
  # The lockfile pins everything; the one install script (protobufjs's
  # postinstall) only prints a version-scheme warning: skipped.
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --ignore-scripts || return 1
  fi
  npm test
}

run_java() {
  check_python3 || return 1
  bash "$root/clients/java/run_tests.sh"
}
run_rust() {
  check_rust || return 1
  check_python3 || return 1
  bash "$root/clients/rust/run_tests.sh"
}

# Every client's limits and error tables are generated from clients/spec/*.json
# (tools/gen_client_spec.py): a stale generated file fails each client run,
# naming the file.
spec_check() { python3 "$root/tools/gen_client_spec.py" --check; }

status=0
summary=()
for lang in "${langs[@]}"; do
  start=$(date +%s)
  echo "=== client tests: $lang"
  if spec_check && ( "run_$lang" ); then result=passed; else result=FAILED; status=1; fi
  summary+=("$lang: $result in $(( $(date +%s) - start )) s")
done
printf 'client tests: %s\n' "${summary[@]}"
exit $status
