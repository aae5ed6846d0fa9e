#include "engine/base/status.h"

#include <atomic>

#include "absl/strings/str_cat.h"

namespace cowkv {
namespace {
// Relaxed: a statistic, no ordering with other memory is implied.
std::atomic<uint64_t> g_corruptions{0};
}  // namespace

absl::Status CorruptionError(const CorruptionSite& site, absl::string_view reason,
                             absl::string_view have, absl::string_view want,
                             const char* file, int line) {
  if (site.counted) g_corruptions.fetch_add(1, std::memory_order_relaxed);
  std::string msg = absl::StrCat("corrupt ", site.what, ":");
  const char* sep = " ";
  if (site.bytenr != UINT64_MAX) {
    absl::StrAppend(&msg, sep, "bytenr=", site.bytenr);
    sep = " ";
  }
  if (site.owner != UINT64_MAX) absl::StrAppend(&msg, " owner=", site.owner);
  if (site.level >= 0) absl::StrAppend(&msg, " level=", site.level);
  if (site.slot >= 0) absl::StrAppend(&msg, " slot=", site.slot);
  absl::StrAppend(&msg, ", ", reason);
  if (!have.empty()) absl::StrAppend(&msg, ", have=", have);
  if (!want.empty()) absl::StrAppend(&msg, " want=", want);
  const char* base = file;
  for (const char* p = file; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  absl::StrAppend(&msg, " [", base, ":", line, "]");
  return WithReason(absl::DataLossError(msg), ErrorReason::kCorruption);
}

uint64_t CorruptionsDetected() { return g_corruptions.load(std::memory_order_relaxed); }

}  // namespace cowkv
