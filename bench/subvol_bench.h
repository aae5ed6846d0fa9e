// Subvolume and throttler benchmarks (issue 3, seed 001), registered into
// //bench:engine_bench next to the LMDB comparisons.
#ifndef COWKV_BENCH_SUBVOL_BENCH_H_
#define COWKV_BENCH_SUBVOL_BENCH_H_

#include <cstdint>
#include <string>

namespace cowkv_bench {

// `dir` holds the benchmarks' files; `stream_bytes` is the total written by
// BM_StreamWrite.
void RegisterSubvolumeBenchmarks(const std::string& dir, uint64_t stream_bytes,
                                 uint64_t stream_value_bytes);

}  // namespace cowkv_bench

#endif  // COWKV_BENCH_SUBVOL_BENCH_H_
