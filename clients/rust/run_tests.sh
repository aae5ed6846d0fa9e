#!/usr/bin/env bash
# Builds the Rust client and runs `cargo test`: unit tests (error mapping,
# retry helper, argument checks), doc tests, the bad-input pass, live client
# tests and the conformance scenarios (clients/conformance/scenarios.json)
# against cowkvd processes the tests start themselves. Works on a clean clone:
#   - needs cargo (rustup; Debian's is too old for tonic 0.14): fails if absent;
#   - protoc comes from the protoc-bin-vendored crate ($PROTOC overrides);
#   - crates come from crates.io as Cargo.lock pins them (--locked);
#   - builds into $CARGO_TARGET_DIR, by default ~/.cache/cowkv/rust-target, so
#     that a fresh clone (CI) reuses the last build: cold ~80 s, warm seconds;
#   - builds cowkvd with Bazel unless $COWKVD names a binary.
# Exit status: cargo's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if ! command -v cargo >/dev/null; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "rust client: cargo not found (install Rust >= 1.85 with rustup)" >&2
    exit 1
  fi
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

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cowkv/rust-target}"
export CARGO_TERM_COLOR=never
cd "$here"
cargo test --locked "$@"
