#!/usr/bin/env bash
# The test command: installs what is missing, then runs every test.
# Engine tests run twice: optimized with asserts, and under ASan+UBSan. Then,
# against live servers built by the same run: the Python client's tests
# (clients/python/test.sh: mypy --strict, pytest incl. the conformance
# scenarios), the CLI's end-to-end test (clients/cli/e2e_test.sh), README's
# tour (tools/readme_tour_test.sh) and the Go, TypeScript, Java and Rust
# clients (clients/run_client_tests.sh), and every client installed from its
# packed artifact into an empty project (clients/install_test.sh). Each part
# adds to the pass/fail summary.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh || exit 1

log=$(mktemp)
status=0
python3 tools/tidy.py || status=1
bazel test //... 2>&1 | tee -a "$log" || status=1
bazel test --config=asan //engine/... 2>&1 | tee -a "$log" || status=1
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)' "$log")
summary="bazel ${passed}/${failed}"

# The binaries the live tests run (`bazel test //...` builds them too; this
# makes sure, and is a no-op when it did).
if ! bazel build //server:cowkvd //clients/cli:cowkv >"$log" 2>&1; then
  grep -E 'ERROR|error:' "$log" | head -n 20 >&2
  echo "test: cannot build cowkvd and cowkv" >&2
  status=1
  failed=$((failed + 1))
else
  # Python client: pytest's last line, "N passed[, M failed] in Ts".
  : >"$log"
  bash clients/python/test.sh 2>&1 | tee "$log"
  py_rc=${PIPESTATUS[0]}
  py_passed=$(grep -oE '[0-9]+ passed' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo 0)
  py_failed=$(grep -oE '[0-9]+ (failed|error)' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo 0)
  if [ "$py_rc" -ne 0 ]; then
    status=1
    [ "$py_failed" -eq 0 ] && py_failed=1  # mypy or set-up failed before pytest
  fi
  passed=$((passed + py_passed))
  failed=$((failed + py_failed))
  summary="$summary, python ${py_passed}/${py_failed}"

  # CLI end to end: "e2e: N cases passed" or a FAIL line.
  : >"$log"
  bash clients/cli/e2e_test.sh 2>&1 | tee "$log"
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then
    e2e_passed=$(sed -nE 's/^e2e: ([0-9]+) cases passed.*/\1/p' "$log" | tail -n 1)
    passed=$((passed + ${e2e_passed:-1}))
    summary="$summary, cli e2e ${e2e_passed:-1}/0"
  else
    status=1
    failed=$((failed + 1))
    summary="$summary, cli e2e FAILED"
  fi

  # README's tour, every command and output against a live cowkvd:
  # "readme tour: N commands matched" or a FAIL line; counts as one test.
  : >"$log"
  bash tools/readme_tour_test.sh 2>&1 | tee "$log"
  if [ "${PIPESTATUS[0]}" -eq 0 ] && grep -qE '^readme tour: [0-9]+ commands matched' "$log"; then
    passed=$((passed + 1))
    summary="$summary, readme 1/0"
  else
    status=1
    failed=$((failed + 1))
    summary="$summary, readme 0/1"
  fi

  # Go, TypeScript, Java and Rust clients: unit tests, bad input and the
  # conformance scenarios against live servers; one result per client.
  : >"$log"
  COWKVD="$PWD/bazel-bin/server/cowkvd" bash clients/run_client_tests.sh all 2>&1 | tee "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  c_passed=$(grep -cE '^client tests: [a-z]+: passed' "$log")
  c_failed=$(grep -cE '^client tests: [a-z]+: FAILED' "$log")
  passed=$((passed + c_passed))
  failed=$((failed + c_failed))
  summary="$summary, clients ${c_passed}/${c_failed}"

  # Every client installed from its packed artifact (wheel, npm tarball,
  # Maven local repository, cargo package, Go module by path) into an empty
  # project, its quickstart run against a live cowkvd; one result per client.
  : >"$log"
  COWKVD="$PWD/bazel-bin/server/cowkvd" bash clients/install_test.sh all 2>&1 | tee "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  i_passed=$(grep -cE '^install test: [a-z]+: passed' "$log")
  i_failed=$(grep -cE '^install test: [a-z]+: FAILED' "$log")
  # A run that stopped before any client (cowkvd did not start) is a failure.
  [ $((i_passed + i_failed)) -eq 0 ] && i_failed=1 && status=1
  passed=$((passed + i_passed))
  failed=$((failed + i_failed))
  summary="$summary, install ${i_passed}/${i_failed}"
fi

rm -f "$log"
echo "tests: ${passed} passed, ${failed} failed (passed/failed: ${summary})"
if [ "$passed" -eq 0 ]; then
  echo "no test ran" >&2
  exit 1
fi
exit $status
