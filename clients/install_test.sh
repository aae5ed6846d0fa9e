#!/usr/bin/env bash
# Installs each client from its packed artifact into an empty project and
# runs a quickstart there against a live cowkvd:
#
#   go      the module as a clone holds it (git ls-files clients/go, copied
#           out), used by path from an empty module: go mod edit -replace +
#           go get, offline (GOPROXY=off; go.sum seeded from the module's, as
#           sum.golang.org would answer);
#   python  a wheel (pip wheel), pip-installed offline (--no-index) into an
#           empty venv beside only grpcio and protobuf: no grpcio-tools, no
#           .proto files;
#   ts      the npm pack tarball, npm-installed into an empty project from
#           npm's cache; a quickstart type-checked (module nodenext) and run
#           as an ES module and as CommonJS;
#   rust    cargo package's .crate, unpacked and built offline as a path
#           dependency of an empty project (no protoc but the vendored one);
#   java    mvn install into the local Maven repository (with the sources
#           and javadoc jars), an empty Maven project depending on it that
#           builds clients/java/examples/gradle's Quickstart.java; Gradle
#           runs that example when a gradle command exists, else only its
#           coordinates are checked against pom.xml.
#
# Each quickstart creates subvolume qs-<lang>, writes, reads, ranges, runs a
# retried transaction and deletes a missing key, and must print exactly
# $EXPECT. Only the artifact, not the source tree, is visible to the
# project (its own quickstart file is copied in).
#
#   bash clients/install_test.sh go python ts rust java   # or: all
#
# cowkvd: $COWKVD, else bazel-bin/server/cowkvd (built with Bazel when
# absent); a private copy runs. Exit status: non-zero if any client failed.
# Prints "install test: <lang>: passed|FAILED in N s" per client.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

if [ $# -eq 0 ]; then
  echo "usage: $0 go|python|ts|rust|java|all ..." >&2
  exit 2
fi
langs=()
for a in "$@"; do
  case "$a" in
    all) langs+=(go python ts rust java) ;;
    go | python | ts | rust | java) langs+=("$a") ;;
    *) echo "$0: unknown client '$a' (go, python, ts, rust, java, all)" >&2; exit 2 ;;
  esac
done

# Where Go's release tarball and rustup put their tools, often not on PATH
# (as clients/run_client_tests.sh, which names a missing toolchain).
for d in /usr/local/go/bin "$HOME/.cargo/bin"; do
  [ -d "$d" ] && PATH="$PATH:$d"
done
export PATH

EXPECT="quickstart: user/1=alice users=2 n=1 missing=not-found"
work=$(mktemp -d "${TMPDIR:-/tmp}/cowkv-install-test.XXXXXX")
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill -INT "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# start_server: a cowkvd on a fresh 256 MiB image at a free port; sets ADDR.
start_server() {
  local bin=${COWKVD:-$root/bazel-bin/server/cowkvd} port="" i
  if [ -z "${COWKVD:-}" ] && [ ! -x "$bin" ]; then
    bazel build --jobs=1 //server:cowkvd || return 1
  fi
  cp "$bin" "$work/cowkvd" || return 1
  "$work/cowkvd" --device "$work/cowkv.img" --create-size 256M \
    --listen 127.0.0.1:0 --metrics-listen "" 2>"$work/cowkvd.log" &
  SERVER_PID=$!
  for i in $(seq 300); do
    port=$(grep -o '(port [0-9]*)' "$work/cowkvd.log" | grep -o '[0-9]*')
    [ -n "$port" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "install test: cowkvd did not start: $(cat "$work/cowkvd.log")" >&2
    return 1
  fi
  ADDR="127.0.0.1:$port"
}

# expect_quickstart LABEL OUTPUT: OUTPUT's last line must be $EXPECT.
expect_quickstart() {
  local got
  got=$(printf '%s\n' "$2" | tail -n 1)
  if [ "$got" != "$EXPECT" ]; then
    printf '%s: quickstart printed:\n%s\nwant: %s\n' "$1" "$2" "$EXPECT" >&2
    return 1
  fi
  echo "$1: $got"
}

install_go() {
  local art="$work/go/cowkv-go" proj="$work/go/proj" out
  mkdir -p "$art" "$proj"
  # The module as a clone has it: tracked files only (a generated file left
  # out of git breaks this build as it would break a user's).
  (git ls-files -z -- clients/go | while IFS= read -r -d '' f; do
    mkdir -p "$art/$(dirname "${f#clients/go/}")" && cp "$f" "$art/${f#clients/go/}" || exit 1
  done) || return 1
  # Fills the module cache when it lacks a dependency (a no-op when warm).
  (cd "$art" && go mod download) || return 1
  cd "$proj" || return 1
  go mod init example.com/quickstart 2>/dev/null || return 1
  cp "$root/clients/install_test/go/main.go" . || return 1
  go mod edit -replace=cowkv.dev/cowkv="$art" || return 1
  # Offline: the dependencies' hashes come from the module's go.sum instead
  # of sum.golang.org (not reachable from every test machine).
  cp "$art/go.sum" go.sum || return 1
  GOPROXY=off GOFLAGS=-mod=mod go get cowkv.dev/cowkv || return 1
  GOPROXY=off go build -o quickstart . || return 1
  out=$(./quickstart "$ADDR" qs-go) || { echo "$out" >&2; return 1; }
  expect_quickstart go "$out"
}

install_python() {
  local dev="$root/clients/python/.venv" dir="$work/python" wheels out v_grpc v_pb house
  mkdir -p "$dir/dist"
  # The build tools (grpcio-tools, setuptools) come from the client's dev
  # venv; the wheel is built without fetching them again.
  bash "$root/clients/python/venv.sh" || return 1
  "$dev/bin/pip" wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
    -w "$dir/dist" "$root/clients/python" || return 1
  wheels=("$dir"/dist/cowkv-*.whl)
  # A wheelhouse of the runtime dependencies only, at the pinned versions:
  # installing with --no-index from it proves the wheel needs nothing else.
  v_grpc=$(sed -n 's/^grpcio==//p' "$root/clients/python/requirements-dev.txt")
  v_pb=$(sed -n 's/^protobuf==//p' "$root/clients/python/requirements-dev.txt")
  house="$HOME/.cache/cowkv/py-wheelhouse/grpcio-$v_grpc-protobuf-$v_pb"
  if ! ls "$house"/grpcio-*.whl "$house"/protobuf-*.whl >/dev/null 2>&1; then
    "$dev/bin/pip" download -q --disable-pip-version-check --only-binary=:all: -d "$house" \
      "grpcio==$v_grpc" "protobuf==$v_pb" || return 1
  fi
  python3 -m venv "$dir/venv" || return 1
  "$dir/venv/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$house" \
    "${wheels[0]}" || return 1
  cd "$dir" || return 1
  cp "$root/clients/install_test/python/quickstart.py" . || return 1
  venv/bin/python - <<'PY' || return 1
import importlib.metadata as m
md = m.metadata("cowkv")
assert md["License-Expression"] == "Apache-2.0", md["License-Expression"]
assert md.get_all("Classifier") and md.get_all("Project-URL"), "classifiers and URLs"
assert any(str(f).endswith("LICENSE") for f in m.files("cowkv")), "LICENSE in the wheel"
PY
  out=$(venv/bin/python quickstart.py "$ADDR" qs-python) || { echo "$out" >&2; return 1; }
  expect_quickstart python "$out"
}

install_ts() {
  local src="$root/clients/typescript" proj="$work/ts/proj" tgz out types_node
  mkdir -p "$work/ts" "$proj"
  (cd "$src" && if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --ignore-scripts
  fi) || return 1
  # npm pack runs prepack: the build (gen, tsc, the ESM entry) and LICENSE.
  tgz=$(cd "$src" && npm pack --silent --pack-destination "$work/ts" | tail -n 1) || return 1
  case $'\n'"$(tar -tzf "$work/ts/$tgz")"$'\n' in
    *$'\n'package/LICENSE$'\n'*) ;;
    *) echo "ts: no LICENSE in $tgz" >&2; return 1 ;;
  esac
  types_node=$(node -p "require('$src/package-lock.json').packages['node_modules/@types/node'].version")
  cd "$proj" || return 1
  npm init -y >/dev/null || return 1
  npm install --prefer-offline --no-audit --no-fund --loglevel=error \
    "$work/ts/$tgz" typescript@5.9.3 "@types/node@$types_node" || return 1
  cp "$root"/clients/install_test/ts/{quickstart.mts,quickstart.cts,tsconfig.json} . || return 1
  # Type-checks both against the exports map's types, then emits .mjs/.cjs.
  node_modules/.bin/tsc -p . || return 1
  out=$(node quickstart.mjs "$ADDR" qs-ts) || { echo "$out" >&2; return 1; }
  expect_quickstart "ts (import)" "$out" || return 1
  out=$(node quickstart.cjs "$ADDR" qs-ts) || { echo "$out" >&2; return 1; }
  expect_quickstart "ts (require)" "$out"
}

install_rust() {
  local dir="$work/rust" crate out
  mkdir -p "$dir/crate" "$dir/proj/src"
  # --no-verify: verifying builds the packed crate inside target/package;
  # the empty project below builds the same files outside the source tree,
  # so verifying would only compile everything a second time.
  (cd "$root/clients/rust" && CARGO_TARGET_DIR="$dir/target" \
    cargo package --offline --locked --allow-dirty --no-verify --quiet) || return 1
  crate=("$dir"/target/package/cowkv-*.crate)
  tar -xzf "${crate[0]}" -C "$dir/crate" || return 1
  cd "$dir/proj" || return 1
  cat >Cargo.toml <<EOF
[package]
name = "quickstart"
version = "0.1.0"
edition = "2021"

[dependencies]
cowkv = { path = "$(echo "$dir"/crate/cowkv-*)" }
tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
EOF
  cp "$root/clients/install_test/rust/main.rs" src/main.rs || return 1
  # The crate's Cargo.lock pins the same versions, all in cargo's cache.
  cp "$dir"/crate/cowkv-*/Cargo.lock . || return 1
  # A target directory of its own, kept between runs: the dependencies
  # build once (~1 min), later runs compile the client and the program.
  CARGO_TARGET_DIR="$HOME/.cache/cowkv/rust-install-target" \
    cargo build --offline --quiet || return 1
  out=$("$HOME/.cache/cowkv/rust-install-target/debug/quickstart" "$ADDR" qs-rust) ||
    { echo "$out" >&2; return 1; }
  expect_quickstart rust "$out"
}

install_java() {
  local src="$root/clients/java" proj="$work/java/proj" m2 coords out
  local mvn=(mvn -B -q --no-transfer-progress -Dstyle.color=never)
  if [ -n "${MAVEN_REPO:-}" ]; then mvn+=("-Dmaven.repo.local=$MAVEN_REPO"); fi
  coords=$(python3 - "$src/pom.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
p = ET.parse(sys.argv[1]).getroot()
print(":".join(p.find(f"m:{t}", ns).text for t in ("groupId", "artifactId", "version")))
PY
  ) || return 1
  m2=${MAVEN_REPO:-$HOME/.m2/repository}/dev/cowkv/cowkv-client/${coords##*:}
  # No jar of an earlier install may stand in for one this build lacks.
  rm -rf "$m2"
  (cd "$src" && "${mvn[@]}" install -Dmaven.test.skip=true) || return 1
  for kind in sources javadoc; do
    [ -s "$m2/cowkv-client-${coords##*:}-$kind.jar" ] || { echo "java: no $kind jar in $m2" >&2; return 1; }
  done
  mkdir -p "$proj/src/main/java/example" && cd "$proj" || return 1
  cp "$root/clients/install_test/java/pom.xml" . || return 1
  cp "$src/examples/gradle/src/main/java/example/Quickstart.java" src/main/java/example/ || return 1
  "${mvn[@]}" package dependency:build-classpath -Dmdep.outputFile=cp.txt \
    -Dcowkv.version="${coords##*:}" || return 1
  out=$(java -cp "target/classes:$(cat cp.txt)" example.Quickstart "$ADDR" qs-java) ||
    { echo "$out" >&2; return 1; }
  expect_quickstart "java (maven)" "$out" || return 1
  # The Gradle example must name the artifact mvn install made.
  grep -q "implementation '$coords'" "$src/examples/gradle/build.gradle" ||
    { echo "java: examples/gradle/build.gradle does not depend on $coords" >&2; return 1; }
  if command -v gradle >/dev/null; then
    cp -r "$src/examples/gradle" "$work/java/gradle" && cd "$work/java/gradle" || return 1
    out=$(gradle -q run --args="$ADDR qs-gradle") || { echo "$out" >&2; return 1; }
    expect_quickstart "java (gradle)" "$out"
  else
    echo "java (gradle): no gradle command; examples/gradle/build.gradle names $coords (not run)"
  fi
}

start_server || exit 1
status=0
summary=()
for lang in "${langs[@]}"; do
  start=$(date +%s)
  echo "=== install test: $lang"
  if ( "install_$lang" ); then result=passed; else result=FAILED; status=1; fi
  summary+=("$lang: $result in $(( $(date +%s) - start )) s")
done
printf 'install test: %s\n' "${summary[@]}"
exit $status
