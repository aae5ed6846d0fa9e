// ConflictWindow: the recent writes a committing client transaction is
// validated against (optimistic concurrency control).
//
// A transaction reads at the latest state and records what it read: point
// keys and key ranges (so phantoms count). At commit it is valid only if no
// write with a revision above its read revision touched anything it read;
// then it is equivalent to running alone at its commit point, which makes
// read-write transactions strictly serializable.
//
// The window keeps, per (subvolume, key), the revision of the last write,
// for writes above `floor()`. It is bounded: past `max_keys` entries the
// oldest are dropped and the floor rises; a transaction whose read revision
// is below the floor gets OUT_OF_RANGE ("too old"), distinct from a conflict
// (ABORTED). Writes are only recorded while some transaction is open: one
// that begins later reads at a revision no older write can matter to.
//
// Not thread-safe; the store serialises calls under its tree lock.
#ifndef COWKV_ENGINE_KV_CONFLICT_WINDOW_H_
#define COWKV_ENGINE_KV_CONFLICT_WINDOW_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace kv {

struct ReadRange {
  uint64_t subvol = 0;
  std::string start;  // inclusive
  std::string end;    // exclusive; empty = unbounded
};

struct ReadSet {
  std::vector<std::pair<uint64_t, std::string>> keys;
  std::vector<ReadRange> ranges;
  bool empty() const { return keys.empty() && ranges.empty(); }
};

class ConflictWindow {
 public:
  explicit ConflictWindow(uint64_t max_keys) : max_keys_(max_keys) {}

  // A transaction opened at `revision` (the current one) / closed.
  void OpenTxn(uint64_t revision);
  void CloseTxn();
  bool tracking() const { return open_txns_ > 0; }

  void RecordWrite(uint64_t subvol, absl::string_view key, uint64_t revision);

  // OK; ABORTED naming the first conflicting key; OUT_OF_RANGE when
  // `read_revision` fell out of the window.
  absl::Status Validate(uint64_t read_revision, const ReadSet& reads) const;

  uint64_t floor() const { return floor_; }
  size_t size() const { return last_write_.size(); }

 private:
  using Key = std::pair<uint64_t, std::string>;
  const uint64_t max_keys_;
  uint64_t open_txns_ = 0;
  uint64_t floor_ = 0;
  std::map<Key, uint64_t> last_write_;
  std::deque<std::pair<uint64_t, Key>> order_;  // (revision, key), oldest first
};

}  // namespace kv
}  // namespace cowkv

#endif  // COWKV_ENGINE_KV_CONFLICT_WINDOW_H_
