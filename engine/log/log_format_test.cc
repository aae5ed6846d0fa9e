// Log root blocks: the encoder and its verifying decoder.
//
// Goal: every kind of block (empty, listing log trees, holding inline
// entries, full) round-trips at every sector size, and no damaged or foreign
// block is ever taken for the expected link.
// Method: bounded-exhaustive over small blocks (512-byte sectors, one block
// of each kind): every single-byte change at every offset, raw and with the
// checksum restamped; every truncation; every sector-size mismatch; every
// field of the expectation. A refusal is DATA_LOSS through CorruptionError
// (reason kCorruption, counted), and ProbeLogRoot — recovery's uncounted
// form — accepts exactly what DecodeLogRoot accepts. The random half of this
// is engine/fuzz/decoders_fuzz_test.cc.
#include "engine/log/log_format.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/format/sector.h"
#include "engine/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace log {
namespace {

constexpr uint32_t kNodesize = 16384;
constexpr uint32_t kSectorsizes[] = {512, 1024, 2048, 4096};

LogRootExpect Expect() {
  LogRootExpect e;
  e.fsid = "log-format-test!";
  e.bytenr = 4 * kNodesize + format::kReservedHead;
  e.nonce = 0x1234567890abcdefull;
  e.base_generation = 77;
  e.seq = 3;
  e.device_size = 64ull << 20;
  e.nodesize = kNodesize;
  return e;
}

LogRootBlock Header() {
  const LogRootExpect e = Expect();
  LogRootBlock b;
  b.fsid = e.fsid;
  b.bytenr = e.bytenr;
  b.nonce = e.nonce;
  b.base_generation = e.base_generation;
  b.seq = e.seq;
  b.next = e.bytenr + kNodesize;
  b.revision = 4242;
  return b;
}

LogTreeRef TreeRef(int i) {
  return {256u + i, format::kReservedHead + (10u + i) * kNodesize, Expect().base_generation + 1,
          static_cast<uint8_t>(i % format::kMaxLevel)};
}

// One block of every kind that fits `sectorsize`.
std::vector<std::pair<std::string, LogRootBlock>> Kinds(uint32_t sectorsize) {
  std::vector<std::pair<std::string, LogRootBlock>> out;
  out.push_back({"empty", Header()});
  LogRootBlock b = Header();
  b.trees = {TreeRef(0)};
  out.push_back({"one log tree", b});
  for (size_t i = 1; i < MaxLogTrees(sectorsize); ++i) b.trees.push_back(TreeRef(i));
  out.push_back({"full of log trees", b});
  b = Header();
  b.entries = {{5, "tkey", "value"}, {5, "tgone", ""}, {~uint64_t{0}, "t", std::string(3, 0)}};
  out.push_back({"inline puts and deletes", b});
  // One entry that fills the block to its last byte.
  const size_t room = MaxInlineBytes(sectorsize) - format::kLogInlineHeaderSize;
  const size_t klen = std::min(room, format::kMaxTreeKeySize);
  b.entries = {{6, std::string(klen, 'k'), std::string(room - klen, 'v')}};
  out.push_back({"one entry filling the block", b});
  return out;
}

void ExpectSameBlock(const LogRootBlock& a, const LogRootBlock& b) {
  EXPECT_EQ(a.fsid, b.fsid);
  EXPECT_EQ(a.bytenr, b.bytenr);
  EXPECT_EQ(a.nonce, b.nonce);
  EXPECT_EQ(a.base_generation, b.base_generation);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.next, b.next);
  EXPECT_EQ(a.revision, b.revision);
  ASSERT_EQ(a.trees.size(), b.trees.size());
  for (size_t i = 0; i < a.trees.size(); ++i) {
    EXPECT_EQ(a.trees[i].subvol, b.trees[i].subvol);
    EXPECT_EQ(a.trees[i].bytenr, b.trees[i].bytenr);
    EXPECT_EQ(a.trees[i].generation, b.trees[i].generation);
    EXPECT_EQ(a.trees[i].level, b.trees[i].level);
  }
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    EXPECT_EQ(a.entries[i].subvol, b.entries[i].subvol);
    EXPECT_EQ(a.entries[i].key, b.entries[i].key);
    EXPECT_EQ(a.entries[i].value, b.entries[i].value);
  }
}

// Decodes with both entry points; they must agree. A refusal must be a
// counted corruption naming the block.
absl::StatusOr<LogRootBlock> Decode(absl::string_view data, const LogRootExpect& e) {
  const uint64_t before = CorruptionsDetected();
  absl::StatusOr<LogRootBlock> b = DecodeLogRoot(data, e);
  LogRootBlock probed;
  std::string why;
  const bool probe_ok = ProbeLogRoot(data, e, &probed, &why);
  EXPECT_EQ(probe_ok, b.ok()) << why << " / " << b.status();
  if (b.ok()) {
    EXPECT_EQ(CorruptionsDetected(), before);
    return b;
  }
  EXPECT_THAT(b, testing::StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(ReasonOf(b.status()), ErrorReason::kCorruption);
  EXPECT_EQ(CorruptionsDetected(), before + 1) << "ProbeLogRoot counts nothing";
  EXPECT_NE(b.status().message().find(absl::StrCat("log root block: bytenr=", e.bytenr)),
            std::string::npos)
      << b.status();
  EXPECT_NE(b.status().message().find(why), std::string::npos) << b.status();
  return b;
}

// A block that lists one valid log tree, with `patch` applied to the
// bytes of that tree's entry (the encoder asserts what the decoder
// refuses, so a bad entry is written as a bad writer would: into a sealed
// block, checksum restamped).
std::string WithTreeEntry(const std::function<void(char* entry)>& patch) {
  LogRootBlock b = Header();
  b.trees = {TreeRef(0)};
  std::string block = EncodeLogRoot(b, 512);
  patch(block.data() + format::kLogHeaderSize);
  format::SealSector(format::kLogRootSector, &block);
  return block;
}

TEST(LogFormat, EveryKindRoundTripsAtEverySectorSize) {
  for (uint32_t ss : kSectorsizes) {
    for (const auto& [name, block] : Kinds(ss)) {
      SCOPED_TRACE(absl::StrCat(name, " at sector size ", ss));
      const std::string enc = EncodeLogRoot(block, ss);
      ASSERT_EQ(enc.size(), ss);
      absl::StatusOr<LogRootBlock> dec = Decode(enc, Expect());
      ASSERT_OK(dec);
      ExpectSameBlock(*dec, block);
      EXPECT_EQ(EncodeLogRoot(*dec, ss), enc);
    }
  }
}

TEST(LogFormat, InlineSizeAndCapacitiesAgreeWithTheLayout) {
  for (uint32_t ss : kSectorsizes) {
    EXPECT_EQ(MaxInlineBytes(ss), ss - format::kLogHeaderSize);
    EXPECT_EQ(MaxLogTrees(ss), (ss - format::kLogHeaderSize) / format::kLogEntrySize);
    // What InlineSize counts is what the encoder writes: entries that sum
    // to MaxInlineBytes fit, to the byte.
    for (const auto& [name, block] : Kinds(ss)) {
      size_t bytes = 0;
      for (const LogEntry& e : block.entries) bytes += InlineSize(e);
      EXPECT_LE(bytes, MaxInlineBytes(ss)) << name;
    }
  }
}

// Every single-byte change at every offset is refused, and for the reason
// an operator should read: the checksum (the magic, checked first, for its
// own bytes). The decoder's exact re-encoding would refuse these too, as
// "nonzero reserved bytes": the reason is what tells the two apart.
TEST(LogFormat, EverySingleByteCorruptionIsRefusedByTheChecksum) {
  constexpr uint32_t kSs = 512;
  for (const auto& [name, block] : Kinds(kSs)) {
    SCOPED_TRACE(name);
    const std::string enc = EncodeLogRoot(block, kSs);
    for (size_t off = 0; off < enc.size(); ++off) {
      const bool magic = off >= format::kLogMagicOff && off < format::kLogMagicOff + 8;
      const std::string reason = magic ? ": bad magic" : ": checksum mismatch";
      for (int x = 1; x < 256; ++x) {
        std::string bad = enc;
        bad[off] = static_cast<char>(bad[off] ^ x);
        absl::StatusOr<LogRootBlock> dec = Decode(bad, Expect());
        ASSERT_FALSE(dec.ok()) << "offset " << off << " xor " << x;
        ASSERT_NE(dec.status().message().find(reason), std::string::npos)
            << "offset " << off << " xor " << x << ": " << dec.status();
      }
    }
  }
}

// Every single-byte change with the checksum restamped (a buggy writer, or
// a checksum collision): what is not refused is a different block that
// re-encodes to exactly these bytes, so no byte goes unchecked; and bytes
// the expectation pins or that frame the block are always refused.
TEST(LogFormat, EveryRestampedByteChangeIsRefusedOrDecodedExactly) {
  constexpr uint32_t kSs = 512;
  auto always_refused = [](size_t off) {
    return (off >= format::kLogFlagsOff && off < format::kLogNextOff) ||
           (off >= format::kLogNtreesOff && off < format::kLogHeaderSize);
  };
  for (const auto& [name, block] : Kinds(kSs)) {
    SCOPED_TRACE(name);
    const std::string enc = EncodeLogRoot(block, kSs);
    int accepted = 0;
    for (size_t off = format::kLogFlagsOff; off < enc.size(); ++off) {
      for (int x = 1; x < 256; ++x) {
        std::string bad = enc;
        bad[off] = static_cast<char>(bad[off] ^ x);
        EncodeLE32(bad.data(), Crc32c(bad.data() + 4, bad.size() - 4));
        absl::StatusOr<LogRootBlock> dec = Decode(bad, Expect());
        if (!dec.ok()) continue;
        ++accepted;
        ASSERT_FALSE(always_refused(off)) << "offset " << off << " xor " << x;
        ASSERT_EQ(EncodeLogRoot(*dec, kSs), bad) << "offset " << off << " xor " << x;
      }
    }
    EXPECT_GT(accepted, 0) << "the revision is free: some change must decode";
  }
}

TEST(LogFormat, EveryTruncationIsRefused) {
  for (uint32_t ss : {512u, 4096u}) {
    for (const auto& [name, block] : Kinds(ss)) {
      SCOPED_TRACE(absl::StrCat(name, " at sector size ", ss));
      const std::string enc = EncodeLogRoot(block, ss);
      for (size_t len = 0; len < enc.size(); ++len) {
        ASSERT_FALSE(Decode(absl::string_view(enc).substr(0, len), Expect()).ok()) << len;
      }
    }
  }
}

// A block written at one sector size and read at another (a superblock's
// sectorsize that does not match the writer's): truncated, or followed by
// whatever the device holds after it.
TEST(LogFormat, ABlockReadAtAnotherSectorSizeIsRefused) {
  for (uint32_t written : kSectorsizes) {
    for (uint32_t read : kSectorsizes) {
      if (read == written) continue;
      for (const auto& [name, block] : Kinds(std::min(read, written))) {
        SCOPED_TRACE(absl::StrCat(name, ": written at ", written, ", read at ", read));
        const std::string enc = EncodeLogRoot(block, written);
        for (char fill : {'\0', '\xff'}) {
          std::string buf = enc;
          buf.resize(read, fill);
          EXPECT_FALSE(Decode(buf, Expect()).ok());
        }
      }
    }
  }
}

TEST(LogFormat, ABlockOfAnotherChainOrPlaceIsRefused) {
  const std::string enc = EncodeLogRoot(Kinds(4096)[3].second, 4096);
  std::vector<std::pair<std::string, LogRootExpect>> wrong;
  for (uint64_t delta : {uint64_t{1}, uint64_t{kNodesize}, ~uint64_t{0}}) {
    LogRootExpect e = Expect();
    e.bytenr += delta;
    wrong.push_back({absl::StrCat("bytenr + ", delta), e});
    e = Expect();
    e.nonce += delta;
    wrong.push_back({absl::StrCat("nonce + ", delta), e});
    e = Expect();
    e.base_generation += delta;
    wrong.push_back({absl::StrCat("generation + ", delta), e});
    e = Expect();
    e.seq += delta;
    wrong.push_back({absl::StrCat("seq + ", delta), e});
  }
  for (size_t i = 0; i < format::kFsidSize; ++i) {
    LogRootExpect e = Expect();
    e.fsid[i] ^= 1;
    wrong.push_back({absl::StrCat("fsid byte ", i), e});
  }
  for (const auto& [name, e] : wrong) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(Decode(enc, e).ok());
  }
}

// next and each log tree root must be a node-aligned bytenr inside the
// device and outside the reserved head, with no wrap-around at the top of
// the 64-bit range.
TEST(LogFormat, BytenrsOutsideTheDeviceAreRefused) {
  const LogRootExpect e = Expect();
  const uint64_t last = e.device_size - kNodesize;
  const std::pair<uint64_t, bool> kBytenrs[] = {
      {0, false},
      {format::kReservedHead - kNodesize, false},
      {format::kReservedHead, true},
      {format::kReservedHead + 512, false},
      {format::kReservedHead + kNodesize, true},
      {last, true},
      {last + kNodesize, false},
      {e.device_size, false},
      {~uint64_t{kNodesize - 1}, false},  // + nodesize wraps to zero
  };
  for (const auto& [bytenr, valid] : kBytenrs) {
    SCOPED_TRACE(bytenr);
    // The encoder asserts a next bytenr past the reserved head: write it
    // into a sealed block and restamp the checksum, as a bad writer would.
    std::string block = EncodeLogRoot(Header(), 512);
    EncodeLE64(block.data() + format::kLogNextOff, bytenr);
    format::SealSector(format::kLogRootSector, &block);
    EXPECT_EQ(Decode(block, e).ok(), valid);
    EXPECT_EQ(Decode(WithTreeEntry([&](char* t) { EncodeLE64(t + 8, bytenr); }), e).ok(), valid);
  }
}

TEST(LogFormat, LogTreeRootsMustBeOfTheNextGenerationAndABoundedLevel) {
  for (int level = 0; level < 256; ++level) {
    const std::string block = WithTreeEntry([&](char* t) { t[24] = static_cast<char>(level); });
    EXPECT_EQ(Decode(block, Expect()).ok(), level < format::kMaxLevel) << level;
  }
  for (uint64_t gen : {uint64_t{0}, Expect().base_generation, Expect().base_generation + 2}) {
    const std::string block = WithTreeEntry([&](char* t) { EncodeLE64(t + 16, gen); });
    EXPECT_FALSE(Decode(block, Expect()).ok()) << gen;
  }
}

TEST(LogFormat, InlineKeysMustBeTreeKeys) {
  // Keys of 1 and of kMaxTreeKeySize bytes are written and read back; an
  // empty key or a longer one (the encoder asserts both) is written as a
  // bad writer would, by patching the key length of a one-byte key.
  for (size_t klen : {size_t{1}, format::kMaxTreeKeySize}) {
    LogRootBlock b = Header();
    b.entries = {{5, std::string(klen, 'k'), "v"}};
    EXPECT_TRUE(Decode(EncodeLogRoot(b, 4096), Expect()).ok()) << klen;
  }
  for (size_t klen : {size_t{0}, format::kMaxTreeKeySize + 1}) {
    LogRootBlock b = Header();
    b.entries = {{5, std::string(format::kMaxTreeKeySize + 1, 'k').substr(0, 1), "v"}};
    std::string block = EncodeLogRoot(b, 4096);
    EncodeLE16(block.data() + format::kLogHeaderSize + 8, static_cast<uint16_t>(klen));
    format::SealSector(format::kLogRootSector, &block);
    EXPECT_FALSE(Decode(block, Expect()).ok()) << klen;
  }
}

}  // namespace
}  // namespace log
}  // namespace cowkv
