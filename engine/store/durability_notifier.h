// DurabilityNotifier: answers writers that must not block a thread while
// their write becomes durable (a server's callback handlers). A writer
// applies its write, takes the durability point it needs (a value of the
// store's durable_seq_) and hands it here with a callback; one thread
// collects every point handed in meanwhile, waits once for the largest
// (the store's WaitDurable: a log sync, or an engine commit when the log
// cannot take it), and answers them all with that wait's status. So N
// writers arriving during one sync cost one wait and one thread, not N
// blocked threads — group commit without a thread per writer.
//
// A lone writer needs no thread at all: when nothing is queued, the
// notifier's thread is not waiting and no other caller is, Add waits on the
// caller's own thread (it leads the log sync itself) and runs `done` there
// before it returns. So one client's durable write costs no hand-off to
// another thread and back (on a 2-core VM each wake-up of a sleeping
// thread costs tens of microseconds), and at most one caller's thread is
// ever held by a wait: everyone arriving meanwhile queues for the thread.
// (`lone_inline` false: every wait is the thread's.)
//
// The thread starts with the first Add. Stop() answers everything queued
// (waiting for it first) and ends the thread; an Add after Stop is answered
// at once with `closed_status`.
//
// Locking: mu_ is a leaf; callbacks and the wait run without it.
#ifndef COWKV_ENGINE_STORE_DURABILITY_NOTIFIER_H_
#define COWKV_ENGINE_STORE_DURABILITY_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace cowkv {

class DurabilityNotifier {
 public:
  // Returns once `point` is durable, or why it cannot be.
  using Wait = std::function<absl::Status(uint64_t point)>;
  using Done = std::function<void(const absl::Status&)>;

  DurabilityNotifier(Wait wait, absl::Status closed_status, bool lone_inline = true);
  ~DurabilityNotifier();
  DurabilityNotifier(const DurabilityNotifier&) = delete;
  DurabilityNotifier& operator=(const DurabilityNotifier&) = delete;

  // Calls `done` once `point` is durable (or with the error that stopped
  // it): on this thread before returning when this caller is the lone
  // writer (see above), else from the notifier's thread; at once when
  // stopped.
  void Add(uint64_t point, Done done);
  // Answers everything queued, waits for a lone writer's wait to end, and
  // ends the thread.
  void Stop();

  struct Counters {
    uint64_t waits = 0;         // WaitDurable calls made (both kinds)
    uint64_t answers = 0;       // callbacks run (both kinds)
    uint64_t caller_waits = 0;  // ... of which on a lone writer's thread
  };
  Counters counters() const;

 private:
  struct Waiter {
    uint64_t point;
    Done done;
  };
  void Loop();

  const Wait wait_;
  const absl::Status closed_status_;
  const bool lone_inline_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<Waiter> queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool thread_waiting_ ABSL_GUARDED_BY(mu_) = false;  // the thread is in wait_
  bool caller_waiting_ ABSL_GUARDED_BY(mu_) = false;  // a lone writer is in wait_
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // started under mu_, joined by Stop
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_STORE_DURABILITY_NOTIFIER_H_
