// cowkvd's operator log: one structured event per line on stderr, as text
//
//   2026-11-26T19:40:02.113Z info start msg="cowkvd 0.1.0 starting" device=/srv/a.img
//
// or as JSON (--log-format=json), one object per line:
//
//   {"ts":"2026-11-26T19:40:02.113Z","level":"info","event":"start",
//    "msg":"cowkvd 0.1.0 starting","device":"/srv/a.img"}
//
// Every event has a name (docs/api.md, "Logs", lists them and their fields)
// and a `msg` for people; programs read the other fields. Built on spdlog
// (Debian's libspdlog-dev): its sinks, levels and timestamps, thread-safe
// and one write(2) per line so lines of concurrent threads never mix; the
// fields are formatted here so that both formats quote and escape alike.
//
//   Log(LogLevel::kWarn, "slow_commit", "commit took 1.4 s")
//       .Num("generation", 42).Num("ms", 1400).Str("trigger", "interval");
//
// The line is written when the temporary ends (end of the statement), and
// only if its level is enabled. Until InitLogging, text at level info.
// Thread-safe.
#ifndef COWKV_SERVER_LOG_H_
#define COWKV_SERVER_LOG_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cowkv {
namespace server {

enum class LogFormat { kText, kJson };
enum class LogLevel { kDebug, kInfo, kWarn, kError, kOff };

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text);  // "text" | "json"
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);    // "debug" .. "error", "off"

// Sets the format and the lowest level written. `out` null = stderr; tests
// pass a stream (which must outlive the logging).
void InitLogging(LogFormat format, LogLevel level, std::ostream* out = nullptr);

class Log {
 public:
  Log(LogLevel level, absl::string_view event, absl::string_view msg);
  ~Log();  // writes the line
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  Log& Str(absl::string_view key, absl::string_view value);
  Log& Num(absl::string_view key, uint64_t value);
  Log& Num(absl::string_view key, double value);
  Log& Bool(absl::string_view key, bool value);

 private:
  struct Field {
    std::string key;
    std::string value;
    bool quoted;  // a string (JSON-quoted), else a number or boolean
  };
  const LogLevel level_;
  const bool enabled_;
  std::string event_;
  std::vector<Field> fields_;
};

// The limiter under LogLimiter (tests): Admit(now) says whether a line may
// be written, and how many were dropped since the last admitted one. Not
// thread-safe.
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

// Rate-limited events of one kind (auth failures, ENOSPC, DATA_LOSS): at
// most `burst` per `window`; the next one admitted says how many were
// dropped (field "suppressed"). Thread-safe.
class LogLimiter {
 public:
  LogLimiter(int burst, absl::Duration window) : limit_(burst, window) {}
  // Whether to log now; `*suppressed` = lines dropped since the last one.
  bool Admit(uint64_t* suppressed);

 private:
  absl::Mutex mu_;
  LogRateLimit limit_ ABSL_GUARDED_BY(mu_);
};

// Protobuf's own log lines (one ~220-byte line for every request field it
// refuses to parse, before any handler or token check runs: 1,000 bad
// requests wrote 220 KB in 0.39 s) become "protobuf" events, at most
// `burst` per `window`. Process-wide.
void InstallProtobufLogLimit(int burst, absl::Duration window);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_LOG_H_
