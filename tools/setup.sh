#!/usr/bin/env bash
# Installs every Debian package that cowkv's build, tests and benchmarks need.
# Idempotent: on a ready machine it checks with dpkg and does nothing.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java
  g++ pkg-config python3
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libisal-dev libcli11-dev liblmdb-dev librocksdb-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libcpp-httplib-dev nlohmann-json3-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
