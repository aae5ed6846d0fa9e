#!/usr/bin/env bash
# Installs every Debian package that cowkv's build, tests and benchmarks need
# (openssl: the clients' TLS tests make their certificates with it;
# libtcmalloc-minimal4: cowkvd's allocator;
# libfuse3-dev, fuse3: `cowkv mount`; fsmark, dbench, stress-ng, postmark,
# attr, xfsprogs: the tools the mount's tests run on it; btrfs-progs: the
# peer of bench/mount_dbench.sh;
# python3-pytest and python3-matplotlib: //bench:compare_test and plots_test,
# and bench/plots.py).
# Idempotent: on a ready machine it checks with dpkg and does nothing.
# Then checks the toolchains of the Go, TypeScript and Rust clients, which it
# does not install (Go >= 1.26, Node >= 20 with npm, Rust >= 1.85 with
# cargo): each one missing is named with how to install it, and its client
# fails in tools/test.sh; the rest of the tests still run.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  bazel-bootstrap bazel-rules-java
  g++ pkg-config python3
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libisal-dev libcli11-dev liblmdb-dev librocksdb-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libcpp-httplib-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  openssl libtcmalloc-minimal4
  libfuse3-dev fuse3 fsmark dbench stress-ng postmark attr xfsprogs btrfs-progs
  python3-pytest python3-matplotlib
)

check_client_toolchains() {
  if ! bash clients/run_client_tests.sh --check all >/dev/null; then
    echo "setup: the clients above fail in tools/test.sh until their toolchain is installed" >&2
  fi
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  check_client_toolchains
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
check_client_toolchains
