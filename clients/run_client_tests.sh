#!/usr/bin/env bash
# Runs the tests of one or more clients: unit tests, the bad-input pass and
# the conformance scenarios (clients/conformance/scenarios.json) against
# live cowkvd processes the tests start themselves.
#
#   bash clients/run_client_tests.sh go ts java rust   # or: all
#
# Installs what a client needs from its registry when missing (Go modules,
# npm packages; stubs are generated from proto/ on every run) and builds
# cowkvd with Bazel unless $COWKVD names a binary. Works on a clean clone.
# Exit status: non-zero if any client failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ $# -eq 0 ]; then
  echo "usage: $0 go|ts|java|rust|all ..." >&2
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

if [ -z "${COWKVD:-}" ]; then
  export COWKVD="$root/bazel-bin/server/cowkvd"
  if [ ! -x "$COWKVD" ]; then
    bazel build //server:cowkvd || exit 1
  fi
fi
# The conformance runners must not skip for want of a server.
export COWKV_REQUIRE_SERVER=1

run_go() {
  if ! command -v go >/dev/null; then
    echo "go: not installed (need Go >= 1.26 for google.golang.org/grpc v1.85)" >&2
    return 1
  fi
  cd "$root/clients/go" || return 1
  go mod download || return 1
  go generate ./... || return 1
  go vet ./... || return 1
  go test -count=1 ./...
}

run_ts() {
  if ! command -v npm >/dev/null; then
    echo "ts: node and npm not installed (need Node >= 20)" >&2
    return 1
  fi
  cd "$root/clients/typescript" || return 1
  # The lockfile pins everything; no install scripts are needed.
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --ignore-scripts || return 1
  fi
  npm test
}

run_java() { bash "$root/clients/java/run_tests.sh"; }
run_rust() { bash "$root/clients/rust/run_tests.sh"; }

status=0
summary=()
for lang in "${langs[@]}"; do
  start=$(date +%s)
  echo "=== client tests: $lang"
  if ( "run_$lang" ); then result=passed; else result=FAILED; status=1; fi
  summary+=("$lang: $result in $(( $(date +%s) - start )) s")
done
printf 'client tests: %s\n' "${summary[@]}"
exit $status
