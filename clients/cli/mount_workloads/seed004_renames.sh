#!/bin/bash
# Seed 004's rename workload as its commit message gives it (btrfs
# ce5b701150ce): NUM_FILES empty files, a sync, an unrelated file written
# and fsynced (so a log exists), one more change to the directory, then a
# `mv` of every file.
#   seed004_renames.sh MNT [NUM_FILES=10000]
set -eu
MNT=$1
NUM_FILES=${2:-10000}

mkdir $MNT/testdir

for ((i = 1; i <= $NUM_FILES; i++)); do
    echo -n > $MNT/testdir/file_$i
done

sync

# Now do some change to an unrelated file and fsync it.
# This is just to create a log tree to make sure that inode_logged()
# does not return false when called against "testdir".
xfs_io -f -c "pwrite 0 4K" -c "fsync" $MNT/foo >/dev/null

# Do some change to testdir. This is to make sure inode_logged()
# will return true when called against "testdir", because its
# logged_trans is 0, it was changed in the current transaction
# and there's a log tree.
echo -n > $MNT/testdir/file_$((NUM_FILES + 1))

echo "Renaming $NUM_FILES files..."
start=$(date +%s%N)
for ((i = 1; i <= $NUM_FILES; i++)); do
    mv $MNT/testdir/file_$i $MNT/testdir/file_$i-RPMDELETE
done
end=$(date +%s%N)

dur=$(( (end - start) / 1000000 ))
echo "Renames took $dur milliseconds"
