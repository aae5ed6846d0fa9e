// Sender: a read-only snapshot (and optionally a parent snapshot) to a send
// stream (docs/format.md "Send stream"), produced in bounded pieces.
//
// What is sent: the subvolume tree's file items ('f') and KV items ('k'),
// item by item, as the TreeDiff of the snapshot against the parent (or
// against nothing: a full send). KV history ('h') and leases ('L') are not
// sent (docs/design.md "Send and receive"). An item that refers to a data
// extent goes as a kClone when that extent is already known to the
// receiver — held by a parent item the walk has seen, or sent earlier in
// this stream — else as a kExtent followed by its bytes in kData chunks of
// at most kMaxDataChunk, read from the device chunk by chunk and checked
// against the item's crc as they go (an extent is never held whole).
//
// Memory: Fill appends at most `budget` bytes plus one record; the clone
// table holds at most kMaxCloneSources extents (beyond, data is sent).
//
// Thread safety: none. The caller keeps the trees unchanged and alive
// during each Fill (the store holds its shared barrier around a call and
// checks between calls that both snapshots still exist).
#ifndef COWKV_ENGINE_SEND_SENDER_H_
#define COWKV_ENGINE_SEND_SENDER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "engine/format/items.h"
#include "engine/send/resume_token.h"
#include "engine/send/sha256.h"
#include "engine/send/stream_format.h"
#include "engine/send/tree_diff.h"
#include "engine/tree/tree.h"

namespace cowkv {
namespace send {

// Reads data extents' bytes.
class DataReader {
 public:
  virtual ~DataReader() = default;
  virtual absl::Status ReadAt(uint64_t bytenr, char* buf, size_t n) = 0;
};

inline constexpr size_t kMaxCloneSources = 1 << 16;

struct SendStats {
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t items = 0;  // kPut + kExtent + kClone
  uint64_t deletes = 0;
  uint64_t clones = 0;
  uint64_t data_bytes = 0;  // extent bytes in kData records
  uint64_t nodes_read = 0;
  uint64_t subtrees_skipped = 0;
};

// Sets the data extent bytenr inside `value`, an item that LeafDataRef
// accepts (file EXTENT_DATA on disk or preallocated; KV value in an extent).
void SetDataBytenr(absl::string_view key, std::string* value, uint64_t bytenr);

class Sender {
 public:
  // `parent` null: a full stream. `header` says who the snapshot and parent
  // are; `data` reads extents. All borrowed for the sender's life.
  Sender(Tree* snapshot, Tree* parent, const StreamHeader& header, DataReader* data);
  // A continuation (docs/format.md "Resume token"): a version-2 preamble,
  // a kResume record carrying `from`, then the items after from.last_key,
  // counted and hashed on from `from` (so kEnd covers the whole stream).
  // Extents sent or seen before the position are not clone sources: items
  // sharing them go as data.
  Sender(Tree* snapshot, Tree* parent, const StreamHeader& header, DataReader* data,
         const ResumePoint& from);

  // Appends the next records to `out` until it holds `budget` bytes or the
  // stream is complete; returns true once the kEnd record is appended.
  absl::StatusOr<bool> Fill(std::string* out, size_t budget);

  SendStats stats() const;
  TreeDiff& TEST_diff() { return diff_; }
  // Test hook: drop the next `n` items (a planted bug: a resumed send
  // that starts late; resume_test must catch it).
  void TEST_skip_items(int n) { bug_skip_items_ = n; }

 private:
  struct Source {
    CloneSource from;
    std::string key;
  };
  struct Pending {
    std::string key;
    format::DataRef ref;
    uint64_t offset = 0;
    uint32_t crc = 0;
  };
  absl::Status EmitChange(const Change& c, std::string* out);
  absl::Status EmitChunk(std::string* out);
  void Remember(uint64_t bytenr, CloneSource from, absl::string_view key);

  TreeDiff diff_;
  const StreamHeader header_;
  DataReader* const data_;
  std::optional<ResumePoint> resume_;
  bool started_ = false;
  bool done_ = false;
  std::unique_ptr<Pending> pending_;
  std::unordered_map<uint64_t, Source> sources_;
  Sha256 hash_;
  SendStats stats_;
  int bug_skip_items_ = 0;
};

}  // namespace send
}  // namespace cowkv

#endif  // COWKV_ENGINE_SEND_SENDER_H_
