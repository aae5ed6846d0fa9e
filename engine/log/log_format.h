// Log root blocks: the self-validating links of a log chain.
//
// A durable commit (and, later, fsync) writes the log trees' new nodes and
// one log root block, then flushes once. The superblock of generation N
// names the chain's first block (log_root) and a random nonce; every block
// names where the next one will go. A block belongs to the chain only if its
// checksum verifies and it repeats the fsid, its own bytenr, the nonce, the
// base generation N and the expected sequence number — so a torn or stale
// block (an older chain, a crashed run that reused the spot) ends the chain
// instead of being replayed. Layout: layout.h "Log root block",
// docs/format.md "Log".
#ifndef COWKV_ENGINE_LOG_LOG_FORMAT_H_
#define COWKV_ENGINE_LOG_LOG_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace log {

struct LogTreeRef {
  uint64_t subvol = 0;
  uint64_t bytenr = 0;
  uint64_t generation = 0;
  uint8_t level = 0;
};

struct LogEntry {
  uint64_t subvol = 0;
  std::string key;    // tree key
  std::string value;  // item value; empty = the key was deleted
};

// One log sync: a root block whose entries are inline (a small sync: one
// sector written) or in log trees it lists (never both).
struct LogRootBlock {
  std::string fsid;
  uint64_t bytenr = 0;
  uint64_t nonce = 0;
  uint64_t base_generation = 0;
  uint64_t seq = 0;
  uint64_t next = 0;
  uint64_t revision = 0;
  std::vector<LogTreeRef> trees;
  std::vector<LogEntry> entries;
};

// Log trees one block can list; bytes of inline entries it can hold.
size_t MaxLogTrees(uint32_t sectorsize);
size_t MaxInlineBytes(uint32_t sectorsize);
inline size_t InlineSize(const LogEntry& e) {
  return 14 + e.key.size() + e.value.size();
}

// Exactly `sectorsize` bytes, checksum included.
std::string EncodeLogRoot(const LogRootBlock& b, uint32_t sectorsize);

// What the reader expects of the block at `bytenr`.
struct LogRootExpect {
  std::string fsid;
  uint64_t bytenr = 0;
  uint64_t nonce = 0;
  uint64_t base_generation = 0;
  uint64_t seq = 0;
  uint64_t device_size = 0;
  uint32_t nodesize = 0;
};

// Decodes the block a reader knows must be the link `e` describes: when it
// is not, DATA_LOSS with the reason, built by CorruptionError (counted in
// CorruptionsDetected()). The block's size is the sector size.
absl::StatusOr<LogRootBlock> DecodeLogRoot(absl::string_view data, const LogRootExpect& e);

// The same verification for a reader probing where a chain may end:
// recovery walks links until one does not verify, and there a never-written,
// torn or stale block is the normal end of the chain, not corruption, so
// nothing is counted. True and `*out` when the block is the link; false and
// the reason in `*why` (optional) when not. Accepts exactly the blocks
// DecodeLogRoot accepts.
bool ProbeLogRoot(absl::string_view data, const LogRootExpect& e, LogRootBlock* out,
                  std::string* why);

}  // namespace log
}  // namespace cowkv

#endif  // COWKV_ENGINE_LOG_LOG_FORMAT_H_
