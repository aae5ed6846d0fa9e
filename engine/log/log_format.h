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

// DATA_LOSS with the reason (CorruptionError's shape, not counted in
// CorruptionsDetected(): a chain always ends at such a block) when the block
// is not the expected link.
absl::StatusOr<LogRootBlock> DecodeLogRoot(absl::string_view data, const LogRootExpect& e);

}  // namespace log
}  // namespace cowkv

#endif  // COWKV_ENGINE_LOG_LOG_FORMAT_H_
