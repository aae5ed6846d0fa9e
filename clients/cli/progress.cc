// Progress lines on stderr (progress.h).
#include "clients/cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/cli/online.h"

namespace cowkv {
namespace cli {

std::string HumanBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  return absl::StrFormat("%.1f %s", v, kUnits[u]);
}

std::string FormatProgress(absl::string_view label, uint64_t done, uint64_t total,
                           absl::Duration elapsed) {
  std::string s = absl::StrCat(label, ": ", HumanBytes(done));
  if (total > 0) {
    const uint64_t shown = done < total ? done : total;
    absl::StrAppend(&s, " / ", HumanBytes(total), " (", shown * 100 / total, "%)");
  }
  if (elapsed < absl::Milliseconds(100)) return s;
  const double rate = static_cast<double>(done) / absl::ToDoubleSeconds(elapsed);
  absl::StrAppend(&s, ", ", HumanBytes(static_cast<uint64_t>(rate)), "/s");
  if (total > done && rate >= 1) {
    const int64_t left = static_cast<int64_t>(static_cast<double>(total - done) / rate + 0.5);
    absl::StrAppend(&s, absl::StrFormat(", %d:%02d left", left / 60, left % 60));
  }
  return s;
}

Progress::Progress(std::string label, uint64_t total, bool enabled, absl::Duration delay,
                   Clock clock, Sink sink)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      clock_(clock ? std::move(clock) : Clock([] { return absl::Now(); })),
      sink_(sink ? std::move(sink) : Sink([](absl::string_view s) {
        std::fwrite(s.data(), 1, s.size(), stderr);
        std::fflush(stderr);
      })),
      start_(clock_()),
      next_(start_ + delay) {}

Progress::~Progress() { Finish(); }

void Progress::Add(uint64_t n) {
  const uint64_t done = done_.fetch_add(n, std::memory_order_relaxed) + n;
  if (!enabled_ || drawing_.exchange(true)) return;
  const absl::Time now = clock_();
  if (now >= next_) {
    std::string line = FormatProgress(label_, done, total_, now - start_);
    if (line.size() < width_) line.append(width_ - line.size(), ' ');  // cover the last frame
    sink_(absl::StrCat("\r", line));
    width_ = line.size();
    ++frames_;
    next_ = now + kInterval;
  }
  drawing_.store(false);
}

void Progress::Finish() {
  if (!enabled_ || drawing_.exchange(true)) return;
  if (width_ > 0) sink_(absl::StrCat("\r", std::string(width_, ' '), "\r"));
  width_ = 0;
  next_ = absl::InfiniteFuture();  // no frame after the end
  drawing_.store(false);
}

bool ProgressWanted(const Globals& g, bool stdout_is_data) {
  if (g.json || g.quiet || !isatty(STDERR_FILENO)) return false;
  return !(stdout_is_data && isatty(STDOUT_FILENO));
}

absl::Duration ProgressDelay() {
  const char* env = std::getenv("COWKV_PROGRESS_DELAY");
  double seconds = 0;
  if (env != nullptr && absl::SimpleAtod(env, &seconds) && seconds >= 0) {
    return absl::Seconds(seconds);
  }
  return absl::Seconds(1);
}

}  // namespace cli
}  // namespace cowkv
