#!/usr/bin/env bash
# Fresh-machine "run" command: installs what is missing, builds cowkv, creates
# the default image (data/cowkv.img, 1 GiB sparse) if absent, and shows it
# with `cowkv check` and `cowkv dump-tree`. (The server issue turns this into
# starting cowkvd on the same image.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build //:cowkv
COWKV=bazel-bin/clients/cli/cowkv
IMG=${COWKV_IMAGE:-data/cowkv.img}
mkdir -p "$(dirname "$IMG")"
if [ ! -e "$IMG" ]; then
  "$COWKV" mkfs --size 1G "$IMG"
fi
"$COWKV" check "$IMG"
"$COWKV" dump-tree --tree 1 "$IMG"
