// Rate-limited protobuf log; see protobuf_log.h.
#include "server/protobuf_log.h"

#include <iostream>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"

namespace cowkv {
namespace server {

bool LogRateLimit::Admit(absl::Time now, uint64_t* dropped_before) {
  if (now - window_start_ >= window_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++dropped_;
    return false;
  }
  ++in_window_;
  *dropped_before = dropped_;
  dropped_ = 0;
  return true;
}

namespace {
absl::Mutex g_mu(absl::kConstInit);
LogRateLimit* g_limit ABSL_GUARDED_BY(g_mu) = nullptr;

void Handler(google::protobuf::LogLevel level, const char* filename, int line,
             const std::string& message) {
  absl::MutexLock l(&g_mu);
  uint64_t dropped = 0;
  if (g_limit == nullptr || !g_limit->Admit(absl::Now(), &dropped)) return;
  if (dropped > 0) std::cerr << "cowkvd: " << dropped << " protobuf log lines dropped (rate limit)\n";
  std::cerr << "[libprotobuf " << level << " " << filename << ":" << line << "] " << message
            << std::endl;
}
}  // namespace

void InstallProtobufLogLimit(int burst, absl::Duration window) {
  {
    absl::MutexLock l(&g_mu);
    delete g_limit;
    g_limit = new LogRateLimit(burst, window);
  }
  google::protobuf::SetLogHandler(&Handler);
}

}  // namespace server
}  // namespace cowkv
