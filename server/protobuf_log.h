// cowkvd's handler for protobuf's own log lines. Protobuf logs one ~220-byte
// line for every request field it refuses to parse (invalid UTF-8 in a
// string), before any handler or authentication runs: 1,000 bad requests
// wrote 220 KB in 0.39 s. The handler lets through at most `burst` lines per
// `window`, then one line saying how many it dropped.
//
//   InstallProtobufLogLimit(10, absl::Seconds(10));
#ifndef COWKV_SERVER_PROTOBUF_LOG_H_
#define COWKV_SERVER_PROTOBUF_LOG_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"

namespace cowkv {
namespace server {

// The limiter itself (tests): Admit(now) says whether a line may be
// written, and how many were dropped since the last admitted one.
class LogRateLimit {
 public:
  LogRateLimit(int burst, absl::Duration window) : burst_(burst), window_(window) {}
  bool Admit(absl::Time now, uint64_t* dropped_before);

 private:
  const int burst_;
  const absl::Duration window_;
  absl::Time window_start_ = absl::InfinitePast();
  int in_window_ = 0;
  uint64_t dropped_ = 0;
};

// Process-wide: protobuf's log goes to stderr through one LogRateLimit.
void InstallProtobufLogLimit(int burst, absl::Duration window);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_PROTOBUF_LOG_H_
