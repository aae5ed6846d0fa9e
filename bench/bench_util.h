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

// --benchmark_out and --benchmark_out_format, read before
// benchmark::Initialize consumes them. False (with a message naming
// `program`) for csv, which the exact-name reporter does not write.
struct OutFlags {
  std::string file;
  std::string format;
};
bool ReadOutFlags(int argc, char** argv, const char* program, OutFlags* out);

// Runs the registered benchmarks with exact BM_<Workload>/<system> names:
// the "/iterations:K", "/min_time:..." and "/manual_time" / "/real_time"
// parts of each run name are cleared ("/threads:N" stays); results also go
// to `out.file` (json or console) if set.
void RunWithExactNames(const OutFlags& out);

}  // namespace cowkv_bench

#endif  // COWKV_BENCH_BENCH_UTIL_H_
