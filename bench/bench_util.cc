#include "bench/bench_util.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace cowkv_bench {

bool ParseU64(const char* s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

double PercentileUs(std::vector<double>* v, double p) {
  if (v->empty()) return 0;
  std::sort(v->begin(), v->end());
  size_t rank = static_cast<size_t>(std::ceil(p * v->size()));
  rank = std::min(std::max<size_t>(rank, 1), v->size());
  return (*v)[rank - 1] * 1e6;
}

std::string RemovePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return "remove " + path + ": " + ec.message();
  return "";
}

}  // namespace cowkv_bench
