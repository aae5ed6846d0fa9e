#!/usr/bin/env bash
# The Python client's tests: type-checks the package and the tests (mypy
# --strict) and runs pytest against a real cowkvd (bazel-bin/server/cowkvd,
# or $COWKVD; build it first with `bazel build //server:cowkvd`).
# Extra arguments go to pytest (e.g. -k fiemap).
set -euo pipefail
cd "$(dirname "$0")"
python3 ../../tools/gen_client_spec.py --check  # cowkv/_spec.py is clients/spec's
bash venv.sh
VENV=${COWKV_PY_VENV:-.venv}
"$VENV/bin/mypy" --no-error-summary
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
