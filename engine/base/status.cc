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
  std::string fields;
  auto field = [&fields](absl::string_view name, auto value) {
    absl::StrAppend(&fields, fields.empty() ? "" : " ", name, "=", value);
  };
  if (site.bytenr != UINT64_MAX) field("bytenr", site.bytenr);
  if (site.owner != UINT64_MAX) field("owner", site.owner);
  if (site.inode != UINT64_MAX) field("inode", site.inode);
  if (site.level >= 0) field("level", site.level);
  if (site.slot >= 0) field("slot", site.slot);
  std::string msg =
      absl::StrCat("corrupt ", site.what, ": ", fields, fields.empty() ? "" : ", ", reason);
  if (!have.empty()) absl::StrAppend(&msg, ", have=", have);
  if (!want.empty()) absl::StrAppend(&msg, have.empty() ? ", want=" : " want=", want);
  const char* base = file;
  for (const char* p = file; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  absl::StrAppend(&msg, " [", base, ":", line, "]");
  return WithReason(absl::DataLossError(msg), ErrorReason::kCorruption);
}

uint64_t CorruptionsDetected() { return g_corruptions.load(std::memory_order_relaxed); }

}  // namespace cowkv
