#include "engine/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace cowkv {
namespace internal {

void CheckFailed(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "cowkv: invariant violated at %s:%d: %s%s%s\n", file, line,
               expr, msg ? ": " : "", msg ? msg : "");
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal
}  // namespace cowkv
