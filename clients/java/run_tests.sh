#!/usr/bin/env bash
# Builds the Java client and runs its tests: unit tests (error mapping, retry
# helper), the bad-input pass, live client tests and the conformance scenarios
# (clients/conformance/scenarios.json, run by the shared driver with this
# client's adapter: needs python3) against cowkvd processes the tests start
# themselves. Works on a clean clone:
#   - installs a JDK (17+) and Maven from Debian if they are missing;
#   - Maven fetches the pinned dependencies, protoc and protoc-gen-grpc-java
#     from Maven Central into the local repository (~/.m2/repository, or
#     $MAVEN_REPO), which later runs reuse;
#   - builds cowkvd with Bazel unless $COWKVD names a binary.
# Exit status: Maven's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

need=()
command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need+=(maven)
if [ ${#need[@]} -gt 0 ]; then
  echo "java client: installing ${need[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ -z "${COWKVD:-}" ]; then
  COWKVD="$root/bazel-bin/server/cowkvd"
  if [ ! -x "$COWKVD" ]; then
    (cd "$root" && bazel build //server:cowkvd)
  fi
fi
# Run a private copy: a Bazel build started meanwhile (another config, a
# relink) replaces or removes bazel-bin's file under the running tests.
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
cp "$COWKVD" "$bindir/cowkvd"
export COWKVD="$bindir/cowkvd"

args=(-B --no-transfer-progress -Dstyle.color=never)
if [ -n "${MAVEN_REPO:-}" ]; then args+=("-Dmaven.repo.local=$MAVEN_REPO"); fi
cd "$here"
mvn "${args[@]}" "$@" test
