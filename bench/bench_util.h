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

// The value of the last argument starting with `prefix` ("" if none).
std::string FlagValue(int argc, char** argv, const std::string& prefix);

// Creates `base` if needed and a fresh mkdtemp directory
// `base/<prefix>.XXXXXX` inside it: its path, or "" with `*err` set.
std::string MakeRunDir(const std::string& base, const std::string& prefix, std::string* err);

// Runs the registered benchmarks with exact BM_<Workload>/<system> names:
// the "/iterations:K", "/min_time:..." and "/manual_time" / "/real_time"
// parts of each run name are cleared ("/threads:N" stays). `out_file` and
// `out_format` are --benchmark_out and --benchmark_out_format, read before
// benchmark::Initialize consumes them (json or console; csv is refused by
// the callers).
void RunWithExactNames(const std::string& out_file, const std::string& out_format);

}  // namespace cowkv_bench

#endif  // COWKV_BENCH_BENCH_UTIL_H_
