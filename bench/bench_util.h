// Small helpers every benchmark binary needs: flag parsing, percentiles,
// cleanup of the files a run made.
#ifndef COWKV_BENCH_BENCH_UTIL_H_
#define COWKV_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace cowkv_bench {

// Parses a whole decimal uint64; false on anything else.
bool ParseU64(const char* s, uint64_t* out);

// Nearest-rank percentile of `v` (seconds; sorted in place), in microseconds.
double PercentileUs(std::vector<double>* v, double p);

// Removes a file or directory tree; "" or a message.
std::string RemovePath(const std::string& path);

}  // namespace cowkv_bench

#endif  // COWKV_BENCH_BENCH_UTIL_H_
