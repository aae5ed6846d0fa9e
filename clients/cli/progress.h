// A progress line on stderr for long transfers (`fs put`, `fs cat`,
// offline `check`), as git and curl draw theirs:
//
//   fs put: 48.0 MiB / 120.0 MiB (40%), 96.0 MiB/s, 0:01 left
//
// Drawn only when stderr is a terminal (and, for commands whose stdout
// carries data, stdout is not one), never with --json or --quiet. The first
// frame waits COWKV_PROGRESS_DELAY seconds (default 1; 0 = at once, as
// git's GIT_PROGRESS_DELAY), so short runs draw nothing; then at most one
// frame per 100 ms; Finish() erases the line. Output on stdout and the
// stderr of a non-terminal are unchanged.
#ifndef COWKV_CLIENTS_CLI_PROGRESS_H_
#define COWKV_CLIENTS_CLI_PROGRESS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace cowkv {
namespace cli {

struct Globals;  // online.h

// "1.5 KiB", "48.0 MiB", "512 B": powers of 1024, one decimal.
std::string HumanBytes(uint64_t bytes);

// One frame: "LABEL: DONE / TOTAL (P%), RATE/s, M:SS left"; without a total
// (0: unknown, e.g. stdin) "LABEL: DONE, RATE/s". The rate is DONE over
// `elapsed`, left out before 100 ms have passed.
std::string FormatProgress(absl::string_view label, uint64_t done, uint64_t total,
                           absl::Duration elapsed);

class Progress {
 public:
  using Clock = std::function<absl::Time()>;
  using Sink = std::function<void(absl::string_view)>;

  // Draws on `sink` (stderr by default) when `enabled`; `clock` is
  // absl::Now by default. `delay`: before the first frame.
  Progress(std::string label, uint64_t total, bool enabled, absl::Duration delay,
           Clock clock = nullptr, Sink sink = nullptr);
  ~Progress();  // Finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `n` more bytes done; draws a frame when one is due. Thread-safe
  // counting; frames are drawn by whichever caller finds one due.
  void Add(uint64_t n);
  // Erases the line if anything was drawn. Idempotent.
  void Finish();

  uint64_t done() const { return done_.load(std::memory_order_relaxed); }
  int frames() const { return frames_; }

  // The minimum time between frames.
  static constexpr absl::Duration kInterval = absl::Milliseconds(100);

 private:
  const std::string label_;
  const uint64_t total_;
  const bool enabled_;
  const Clock clock_;
  const Sink sink_;
  const absl::Time start_;
  absl::Time next_;  // the next frame is due
  std::atomic<uint64_t> done_{0};
  std::atomic<bool> drawing_{false};
  int frames_ = 0;
  size_t width_ = 0;  // of the widest frame so far, for covering and erasing
};

// Whether a command should draw progress: stderr a terminal, stdout not one
// when `stdout_is_data`, and neither --json nor --quiet.
bool ProgressWanted(const Globals& g, bool stdout_is_data);

// The first frame's delay: $COWKV_PROGRESS_DELAY seconds, else 1 s.
absl::Duration ProgressDelay();

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_PROGRESS_H_
