#!/bin/bash
# Seed 000's workload as its commit message gives it (btrfs 6142d08a4791):
# create empty files in one directory and fsync the directory with xfs_io
# every FSYNC_PERIOD files. Only the device setup (mkfs.btrfs, mount) is
# the caller's: MNT is a mounted cowkv subvolume.
#   seed000_dir_fsync.sh MNT [NUM_FILES=1000000] [FSYNC_PERIOD=100]
# Prints the total fsync time in ms and one line per fsync ("fsync_ms N").
set -eu
MNT=$1
num_files=${2:-1000000}
fsync_period=${3:-100}

mkdir $MNT/testdir

fsync_total_time=0
for ((i = 1; i <= $num_files; i++)); do
      echo -n > $MNT/testdir/file_$i

      if [ $((i % fsync_period)) -eq 0 ]; then
              start=$(date +%s%N)
              xfs_io -c "fsync" $MNT/testdir
              end=$(date +%s%N)
              fsync_total_time=$((fsync_total_time + (end - start)))
              echo "fsync_ms $(( (end - start) / 1000000 ))"
      fi
done

fsync_total_time=$((fsync_total_time / 1000000))
echo -e "\nTotal time spent in fsync: $fsync_total_time ms\n"
