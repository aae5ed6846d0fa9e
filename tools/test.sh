#!/usr/bin/env bash
# The test command: installs what is missing, then runs every test.
# Engine tests run twice: optimized with asserts, and under ASan+UBSan.
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
rm -f "$log"
echo "tests: ${passed} passed, ${failed} failed"
if [ "$passed" -eq 0 ]; then
  echo "no test ran" >&2
  exit 1
fi
exit $status
