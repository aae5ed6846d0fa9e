#!/bin/bash
# Seed 003's workload as its commit message gives it (btrfs 364806ffeb04):
# fs_mark creating empty files in one directory per thread, no sync.
#   seed003_fs_mark.sh MNT [FILES=100000] [THREADS=$(nproc --all)] [LOOPS=5]
set -eu
MNT=$1
FILES=${2:-100000}
THREADS=${3:-$(nproc --all)}
LOOPS=${4:-5}

OPTS="-S 0 -L $LOOPS -n $FILES -s 0 -t $THREADS -k"
for ((i = 1; i <= $THREADS; i++)); do
	OPTS="$OPTS -d $MNT/d$i"
done
fs_mark $OPTS
