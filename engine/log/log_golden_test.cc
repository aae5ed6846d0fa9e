// Goal: the log root block's bytes do not move.
// Method: two blocks with fixed inputs, one listing log trees and one with
// inline entries, compared with the bytes the encoder wrote before the
// sector codec (engine/format/sector.h) was factored out; both decode back
// to their inputs. The mutation fuzz test of the decoder is in engine/fuzz.
#include <string>

#include "absl/strings/escaping.h"
#include "engine/format/layout.h"
#include "engine/log/log_format.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace log {
namespace {

constexpr uint32_t kSector = 4096;
constexpr uint32_t kNodesize = 16384;

LogRootBlock Sample() {
  LogRootBlock b;
  b.fsid = std::string(16, 'F');
  b.bytenr = 4ull << 20;
  b.nonce = 0x1122334455667788ull;
  b.base_generation = 7;
  b.seq = 2;
  b.next = (4ull << 20) + kNodesize;
  b.revision = 99;
  return b;
}

LogRootExpect Expect() {
  return LogRootExpect{std::string(16, 'F'), 4ull << 20, 0x1122334455667788ull, 7, 2,
                       1ull << 30,           kNodesize};
}

// Encodes `b`: its hex up to `used` bytes must be `golden` and every later
// byte zero. Returns the block decoded again.
LogRootBlock ExpectGolden(const LogRootBlock& b, size_t used, const std::string& golden) {
  const std::string enc = EncodeLogRoot(b, kSector);
  EXPECT_EQ(enc.size(), kSector);
  EXPECT_EQ(absl::BytesToHexString(enc.substr(0, used)), golden);
  EXPECT_EQ(enc.substr(used), std::string(kSector - used, '\0'));
  absl::StatusOr<LogRootBlock> dec = DecodeLogRoot(enc, Expect());
  EXPECT_TRUE(dec.ok()) << dec.status();
  return dec.ok() ? *dec : LogRootBlock{};
}

TEST(LogRoot, GoldenBytesWithTrees) {
  LogRootBlock b = Sample();
  b.trees.push_back(LogTreeRef{5, 5ull << 20, 8, 1});
  b.trees.push_back(LogTreeRef{256, 6ull << 20, 8, 0});
  const LogRootBlock dec = ExpectGolden(b, format::kLogHeaderSize + 2 * format::kLogEntrySize,
                                        "4ea57296000000005f434f574b565f4c"
                                        "46464646464646464646464646464646"
                                        "00004000000000008877665544332211"
                                        "07000000000000000200000000000000"
                                        "00404000000000006300000000000000"
                                        "02000000000000000500000000000000"
                                        "00005000000000000800000000000000"
                                        "01000000000000000001000000000000"
                                        "00006000000000000800000000000000"
                                        "0000000000000000");
  EXPECT_EQ(dec.trees.size(), 2u);
  EXPECT_EQ(dec.revision, 99u);
}

TEST(LogRoot, GoldenBytesWithInlineEntries) {
  LogRootBlock b = Sample();
  b.entries.push_back(LogEntry{5, "key-a", "value-a"});
  b.entries.push_back(LogEntry{5, "key-b", ""});
  const LogRootBlock dec =
      ExpectGolden(b, format::kLogHeaderSize + InlineSize(b.entries[0]) + InlineSize(b.entries[1]),
                   "a8fd23cf000000005f434f574b565f4c"
                   "46464646464646464646464646464646"
                   "00004000000000008877665544332211"
                   "07000000000000000200000000000000"
                   "00404000000000006300000000000000"
                   "00000000020000000500000000000000"
                   "0500070000006b65792d6176616c7565"
                   "2d610500000000000000050000000000"
                   "6b65792d62");
  ASSERT_EQ(dec.entries.size(), 2u);
  EXPECT_EQ(dec.entries[0].value, "value-a");
}

}  // namespace
}  // namespace log
}  // namespace cowkv
