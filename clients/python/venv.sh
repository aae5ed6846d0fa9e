#!/usr/bin/env bash
# Creates (or refreshes) clients/python/.venv with the pinned tools of
# requirements-dev.txt and installs the cowkv package into it, which
# generates the gRPC stubs from ../../proto (see _build/cowkv_build.py).
# Idempotent: the venv is rebuilt only when requirements-dev.txt changes.
# Prints nothing on success unless something was installed.
#   COWKV_PY_VENV  venv directory (default clients/python/.venv)
#   PYTHON         interpreter that creates it (default python3)
set -euo pipefail
cd "$(dirname "$0")"
VENV=${COWKV_PY_VENV:-.venv}
PY=${PYTHON:-python3}
stamp="$VENV/.requirements-dev.sha256"
want=$(sha256sum requirements-dev.txt | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "python client: creating $VENV" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r requirements-dev.txt
  echo "$want" > "$stamp"
fi
# --no-build-isolation: build with the venv's pinned grpcio-tools and
# setuptools instead of fetching them again for every install.
"$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --force-reinstall .
