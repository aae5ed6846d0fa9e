// Structured operator log over spdlog; see log.h.
#include "server/log.h"

#include <atomic>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace cowkv {
namespace server {
namespace {

constexpr char kTextPattern[] = "%Y-%m-%dT%H:%M:%S.%eZ %l %v";
constexpr char kJsonPattern[] = R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l",%v})";

struct LoggerState {
  absl::Mutex mu;
  std::shared_ptr<spdlog::logger> logger ABSL_GUARDED_BY(mu);
  std::atomic<LogFormat> format{LogFormat::kText};
  std::atomic<LogLevel> level{LogLevel::kInfo};
};

LoggerState& State() {
  static LoggerState* state = [] {
    auto* s = new LoggerState;
    absl::MutexLock l(&s->mu);
    s->logger = std::make_shared<spdlog::logger>("cowkvd",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
    s->logger->set_pattern(kTextPattern, spdlog::pattern_time_type::utc);
    s->logger->set_level(spdlog::level::info);
    return s;
  }();
  return *state;
}

std::shared_ptr<spdlog::logger> Logger() {
  LoggerState& s = State();
  absl::MutexLock l(&s.mu);
  return s.logger;
}

spdlog::level::level_enum ToSpd(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

// JSON string escaping (RFC 8259): quotes, backslash, control bytes.
void AppendJsonString(absl::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(out, "\\u%04x", c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// A text value: bare when it is one plain word, else JSON-quoted.
void AppendTextValue(absl::string_view s, std::string* out) {
  bool plain = !s.empty();
  for (unsigned char c : s) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) plain = false;
  }
  if (plain) {
    out->append(s.data(), s.size());
  } else {
    AppendJsonString(s, out);
  }
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("log format '", text, "': text or json"));
}

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "debug") return LogLevel::kDebug;
  if (t == "info") return LogLevel::kInfo;
  if (t == "warn" || t == "warning") return LogLevel::kWarn;
  if (t == "error") return LogLevel::kError;
  if (t == "off") return LogLevel::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("log level '", text, "': debug, info, warn, error or off"));
}

void InitLogging(LogFormat format, LogLevel level, std::ostream* out) {
  LoggerState& s = State();
  spdlog::sink_ptr sink;
  if (out != nullptr) {
    sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*out, /*force_flush=*/true);
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  }
  auto logger = std::make_shared<spdlog::logger>("cowkvd", std::move(sink));
  logger->set_pattern(format == LogFormat::kJson ? kJsonPattern : kTextPattern,
                      spdlog::pattern_time_type::utc);
  logger->set_level(ToSpd(level));
  logger->flush_on(spdlog::level::trace);  // every line reaches the file at once
  absl::MutexLock l(&s.mu);
  s.format.store(format);
  s.level.store(level);
  s.logger = std::move(logger);
}

Log::Log(LogLevel level, absl::string_view event, absl::string_view msg)
    : level_(level),
      enabled_(level != LogLevel::kOff && level >= State().level.load()),
      event_(event) {
  if (enabled_) Str("msg", msg);
}

Log& Log::Str(absl::string_view key, absl::string_view value) {
  if (enabled_) fields_.push_back({std::string(key), std::string(value), true});
  return *this;
}

Log& Log::Num(absl::string_view key, uint64_t value) {
  if (enabled_) fields_.push_back({std::string(key), absl::StrCat(value), false});
  return *this;
}

Log& Log::Num(absl::string_view key, double value) {
  if (enabled_) {
    // JSON has no NaN or infinity.
    fields_.push_back(
        {std::string(key), std::isfinite(value) ? absl::StrCat(value) : "null", false});
  }
  return *this;
}

Log& Log::Bool(absl::string_view key, bool value) {
  if (enabled_) fields_.push_back({std::string(key), value ? "true" : "false", false});
  return *this;
}

Log::~Log() {
  if (!enabled_) return;
  std::string line;
  if (State().format.load() == LogFormat::kJson) {
    line = "\"event\":";
    AppendJsonString(event_, &line);
    for (const Field& f : fields_) {
      line.push_back(',');
      AppendJsonString(f.key, &line);
      line.push_back(':');
      if (f.quoted) {
        AppendJsonString(f.value, &line);
      } else {
        line.append(f.value);
      }
    }
  } else {
    line = event_;
    for (const Field& f : fields_) {
      absl::StrAppend(&line, " ", f.key, "=");
      AppendTextValue(f.value, &line);
    }
  }
  Logger()->log(ToSpd(level_), spdlog::string_view_t(line.data(), line.size()));
}

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

absl::Mutex g_protobuf_mu(absl::kConstInit);
LogLimiter* g_protobuf_limit ABSL_GUARDED_BY(g_protobuf_mu) = nullptr;

void ProtobufLogHandler(google::protobuf::LogLevel level, const char* filename, int line,
                        const std::string& message) {
  LogLimiter* limit;
  {
    absl::MutexLock l(&g_protobuf_mu);
    limit = g_protobuf_limit;
  }
  uint64_t suppressed = 0;
  if (limit == nullptr || !limit->Admit(&suppressed)) return;
  const LogLevel ours = level >= google::protobuf::LOGLEVEL_ERROR     ? LogLevel::kError
                        : level == google::protobuf::LOGLEVEL_WARNING ? LogLevel::kWarn
                                                                      : LogLevel::kInfo;
  Log(ours, "protobuf", message)
      .Str("source", absl::StrCat(filename, ":", line))
      .Num("suppressed", suppressed);
}

}  // namespace

void InstallProtobufLogLimit(int burst, absl::Duration window) {
  {
    absl::MutexLock l(&g_protobuf_mu);
    // Never freed: a handler may still be running on another thread.
    g_protobuf_limit = new LogLimiter(burst, window);
  }
  google::protobuf::SetLogHandler(&ProtobufLogHandler);
}

bool LogLimiter::Admit(uint64_t* suppressed) {
  absl::MutexLock l(&mu_);
  return limit_.Admit(absl::Now(), suppressed);
}

}  // namespace server
}  // namespace cowkv
