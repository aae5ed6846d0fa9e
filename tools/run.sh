#!/usr/bin/env bash
# Fresh-machine "run" command: installs what is missing, builds cowkvd and the
# cowkv CLI, and starts cowkvd in the foreground on the default device file
# data/cowkv.img (1 GiB; cowkvd creates, preallocates and formats it when it
# is absent, and never formats an existing one), listening on
# 127.0.0.1:7420. Ctrl-C (or SIGTERM) stops it cleanly: in-flight calls
# drain, the engine commits, exit 0.
#
#   COWKV_IMAGE   device file (default data/cowkv.img)
#   COWKV_LISTEN  gRPC address (default 127.0.0.1:7420)
#   COWKV_METRICS Prometheus /metrics address (default 127.0.0.1:7421; empty = off)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build //server:cowkvd //clients/cli:cowkv
IMG=${COWKV_IMAGE:-data/cowkv.img}
LISTEN=${COWKV_LISTEN:-127.0.0.1:7420}
METRICS=${COWKV_METRICS-127.0.0.1:7421}
mkdir -p "$(dirname "$IMG")"
state="existing"
[ -e "$IMG" ] || state="new, 1 GiB"
metrics_line="off"
[ -z "$METRICS" ] || metrics_line="http://$METRICS/metrics"

cat <<EOF

  cowkv — cowkvd serving $IMG ($state) on $LISTEN
  metrics:  $metrics_line
  CLI:      bazel-bin/clients/cli/cowkv --server $LISTEN subvolume list
  Python:   pip install ./clients/python; cowkv.connect("$LISTEN")
  stop:     Ctrl-C (drains in-flight calls, commits, exits 0)

EOF
# exec: cowkvd itself gets Ctrl-C's SIGINT and the terminal's exit status.
exec bazel-bin/server/cowkvd --device "$IMG" --create-size 1G --listen "$LISTEN" \
  --metrics-listen "$METRICS"
