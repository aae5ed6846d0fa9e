#!/usr/bin/env bash
# Bazel's --workspace_status_command: the git commit the build came from,
# for `cowkvd --version` and `cowkv version` (//build_info).
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && ! git diff --quiet HEAD 2>/dev/null; then commit="$commit-dirty"; fi
echo "STABLE_GIT_COMMIT $commit"
