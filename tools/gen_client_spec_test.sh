#!/usr/bin/env bash
# Bazel's //:client_spec_check: the generated client tables match
# clients/spec/*.json (run from the runfiles tree, which mirrors the repository).
set -euo pipefail
python3 tools/gen_client_spec.py --check --root "$PWD"
echo "client spec: generated files up to date"
