// Goal: docs/format.md cannot drift from the code.
// Method: parse every OFFSET | SIZE | FIELD table in format.md, section by
// section, and compare each row with the constants engine/format exports;
// a row the code does not know, or a field the doc lacks, fails the test.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/base/coding.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/fs/fs_items.h"
#include "engine/kv/kv_item.h"
#include "engine/send/resume_token.h"
#include "engine/send/sha256.h"
#include "engine/send/stream_format.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using namespace format;  // NOLINT: constants only

struct Row {
  uint64_t offset;
  uint64_t size;
  std::string field;
};
using Table = std::vector<Row>;

// section heading -> tables in order
std::map<std::string, std::vector<Table>> ParseDoc() {
  std::string path = std::string(std::getenv("TEST_SRCDIR")) + "/cowkv/docs/format.md";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::map<std::string, std::vector<Table>> out;
  std::string line, section;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "#")) {
      section = std::string(absl::StripLeadingAsciiWhitespace(absl::StripPrefix(
          absl::StripPrefix(absl::StripPrefix(line, "#"), "#"), "#")));
      in_table = false;
      continue;
    }
    if (absl::StartsWith(line, "| offset | size | field")) {
      out[section].emplace_back();
      in_table = true;
      continue;
    }
    if (!absl::StartsWith(line, "|")) {
      in_table = false;
      continue;
    }
    if (!in_table || absl::StartsWith(line, "|---")) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 5) continue;
    Row r;
    r.offset = std::strtoull(std::string(absl::StripAsciiWhitespace(cells[1])).c_str(), nullptr, 10);
    r.size = std::strtoull(std::string(absl::StripAsciiWhitespace(cells[2])).c_str(), nullptr, 10);
    r.field = std::string(absl::StripAsciiWhitespace(cells[3]));
    out[section].back().push_back(r);
  }
  return out;
}

void ExpectTable(const Table& doc, const std::vector<Row>& code, const std::string& what) {
  ASSERT_EQ(doc.size(), code.size()) << what << ": the doc and the code list different fields";
  for (size_t i = 0; i < code.size(); ++i) {
    EXPECT_EQ(doc[i].field, code[i].field) << what << " row " << i;
    EXPECT_EQ(doc[i].offset, code[i].offset) << what << " " << code[i].field << " offset";
    EXPECT_EQ(doc[i].size, code[i].size) << what << " " << code[i].field << " size";
    if (i > 0) {
      EXPECT_GE(doc[i].offset, doc[i - 1].offset + doc[i - 1].size) << what << " overlap";
    }
  }
}

TEST(FormatDoc, Superblock) {
  auto doc = ParseDoc();
  ASSERT_EQ(doc["Superblock"].size(), 1u);
  ExpectTable(doc["Superblock"][0],
              {{kSbCsumOff, 4, "csum"},
               {kSbCsumTypeOff, 4, "csum_type"},
               {kSbMagicOff, 8, "magic"},
               {kSbFsidOff, kFsidSize, "fsid"},
               {kSbBytenrOff, 8, "bytenr"},
               {kSbFlagsOff, 8, "flags"},
               {kSbGenerationOff, 8, "generation"},
               {kSbRootOff, 8, "root"},
               {kSbRootGenerationOff, 8, "root_generation"},
               {kSbRootLevelOff, 1, "root_level"},
               {kSbTotalBytesOff, 8, "total_bytes"},
               {kSbBytesUsedOff, 8, "bytes_used"},
               {kSbNodesizeOff, 4, "nodesize"},
               {kSbSectorsizeOff, 4, "sectorsize"},
               {kSbLogRootOff, 8, "log_root"},
               {kSbLogNonceOff, 8, "log_nonce"},
               {kSbLogRootLevelOff, 1, "log_root_level"},
               {kSbNextTreeIdOff, 8, "next_tree_id"},
               {kSbFormatVersionOff, 8, "format_version"},
               {kSbRevisionOff, 8, "revision"}},
              "superblock");
  EXPECT_EQ(kSbRevisionOff + 8, kSbUsedSize);
}

TEST(FormatDoc, Node) {
  auto doc = ParseDoc();
  ASSERT_EQ(doc["Node"].size(), 3u);
  ExpectTable(doc["Node"][0],
              {{kNodeCsumOff, 4, "csum"},
               {kNodeFlagsOff, 4, "flags"},
               {kNodeFsidOff, kFsidSize, "fsid"},
               {kNodeBytenrOff, 8, "bytenr"},
               {kNodeGenerationOff, 8, "generation"},
               {kNodeOwnerOff, 8, "owner"},
               {kNodeNritemsOff, 4, "nritems"},
               {kNodeLevelOff, 1, "level"}},
              "node header");
  ExpectTable(doc["Node"][1],
              {{0, 2, "data_offset"}, {2, 2, "key_len"}, {4, 2, "value_len"}, {6, 2, "reserved"}},
              "slot");
  EXPECT_EQ(6u + 2u, kSlotSize);
  ExpectTable(doc["Node"][2], {{0, 8, "child_bytenr"}, {8, 8, "child_generation"}},
              "child pointer");
  EXPECT_EQ(16u, kChildPtrSize);
  EXPECT_EQ(64u, kNodeHeaderSize);
}

TEST(FormatDoc, Items) {
  auto doc = ParseDoc();
  ASSERT_EQ(doc["Root item (48 bytes, then an optional drop-progress key)"].size(), 1u);
  ExpectTable(doc["Root item (48 bytes, then an optional drop-progress key)"][0],
              {{0, 8, "bytenr"},
               {8, 8, "generation"},
               {16, 1, "level"},
               {24, 8, "flags"},
               {32, 8, "last_snapshot"},
               {40, 1, "drop_level"}},
              "root item");
  EXPECT_EQ(48u, kRootItemSize);
  ASSERT_EQ(doc["Extent item (32 bytes)"].size(), 1u);
  ExpectTable(doc["Extent item (32 bytes)"][0],
              {{0, 8, "refs"}, {8, 8, "generation"}, {16, 8, "flags"}, {24, 1, "level"}},
              "extent item");
  EXPECT_EQ(32u, kExtentItemSize);
  EXPECT_EQ(kRootItem, 132);
  EXPECT_EQ(kExtentItem, 168);
  EXPECT_EQ(kTreeBlockRef, 176);
  EXPECT_EQ(kSharedBlockRef, 182);
}

TEST(FormatDoc, KvItem) {
  auto doc = ParseDoc();
  ASSERT_EQ(doc["KV item"].size(), 1u);
  ExpectTable(doc["KV item"][0],
              {{0, 1, "kind"}, {1, 7, "reserved"}, {8, 8, "create_revision"},
               {16, 8, "mod_revision"}, {24, 8, "version"}},
              "KV item");
  EXPECT_EQ(kv::kKvHeaderSize, 32u);
  EXPECT_EQ(kv::kKvPrefix, 'k');
  std::string item = kv::EncodeItem({1, 2, 3}, "v");
  EXPECT_EQ(DecodeLE64(item.data() + 8), 1u);
  EXPECT_EQ(DecodeLE64(item.data() + 16), 2u);
  EXPECT_EQ(DecodeLE64(item.data() + 24), 3u);
}

TEST(FormatDoc, SendStream) {
  auto doc = ParseDoc();
  ASSERT_EQ(doc["Send stream"].size(), 2u);
  ExpectTable(doc["Send stream"][0], {{0, 8, "magic"}, {8, 4, "version"}, {12, 4, "reserved"}},
              "send stream preamble");
  ExpectTable(doc["Send stream"][1],
              {{0, 4, "payload_len"}, {4, 2, "type"}, {6, 2, "reserved"}, {8, 4, "crc"}},
              "send stream frame");
  EXPECT_EQ(send::kPreambleSize, 16u);
  EXPECT_EQ(send::kFrameHeaderSize, 12u);
  EXPECT_EQ(send::kStreamVersion, 2u);  // 1 whole, 2 a continuation ("Resume token")
  EXPECT_EQ(send::kContinuationVersion, 2u);
  EXPECT_EQ(send::PreambleVersion(send::EncodePreamble()), 1u);
  EXPECT_EQ(static_cast<int>(send::RecordType::kResume), 8);
  EXPECT_EQ(send::kMaxRecordPayload, 131072u);
  EXPECT_EQ(send::kMaxDataChunk, 65536u);
  std::string frame;
  send::AppendDelete("fk", &frame);
  EXPECT_EQ(DecodeLE32(frame.data()), frame.size() - send::kFrameHeaderSize);
  EXPECT_EQ(DecodeLE16(frame.data() + 4), 3u);  // DELETE
  EXPECT_EQ(format::kRootFlagReceiving, 4u);
}

// "Resume token": the binary token's fixed part and field order.
TEST(FormatDoc, ResumeToken) {
  send::ResumePoint p;
  p.uuid[0] = 1;
  p.stransid = 0x1122;
  p.records = 3;
  p.offset = 64;
  p.last_key = "fk";
  send::Sha256 h;
  h.Update(std::string(64, 'x'));
  p.sha_state = h.State();
  p.name = "n";
  const std::string t = send::EncodeResumePoint(p);
  EXPECT_EQ(t.substr(0, 4), "CKRT");
  EXPECT_EQ(DecodeLE16(t.data() + 4), 1u);        // version
  EXPECT_EQ(static_cast<uint8_t>(t[8]), 1u);      // uuid
  EXPECT_EQ(DecodeLE64(t.data() + 24), 0x1122u);  // stransid
  EXPECT_EQ(DecodeLE64(t.data() + 56), 3u);       // records
  EXPECT_EQ(DecodeLE64(t.data() + 64), 64u);      // offset
  EXPECT_EQ(DecodeLE16(t.data() + 72), 2u);       // last_key length
  EXPECT_EQ(p.sha_state.size(), 40u);             // 8 words, length, no pending bytes
  EXPECT_EQ(t.size(), 72u + 2 + 2 + 2 + 40 + 2 + 1 + 4);
  EXPECT_EQ(format::kReceiveProgressKey, std::string("R"));
}

TEST(FormatDoc, Log) {
  auto doc = ParseDoc();
  ASSERT_EQ(doc["Log"].size(), 3u);
  ExpectTable(doc["Log"][0],
              {{kLogCsumOff, 4, "csum"},
               {kLogFlagsOff, 4, "flags"},
               {kLogMagicOff, 8, "magic"},
               {kLogFsidOff, kFsidSize, "fsid"},
               {kLogBytenrOff, 8, "bytenr"},
               {kLogNonceOff, 8, "nonce"},
               {kLogBaseGenOff, 8, "base_generation"},
               {kLogSeqOff, 8, "seq"},
               {kLogNextOff, 8, "next"},
               {kLogRevisionOff, 8, "revision"},
               {kLogNtreesOff, 4, "ntrees"},
               {kLogNentriesOff, 4, "nentries"}},
              "log root block");
  EXPECT_EQ(kLogHeaderSize, 88u);
  ExpectTable(doc["Log"][1],
              {{0, 8, "subvolume"}, {8, 8, "root_bytenr"}, {16, 8, "root_generation"},
               {24, 1, "root_level"}},
              "log tree entry");
  EXPECT_EQ(kLogEntrySize, 32u);
  ExpectTable(doc["Log"][2], {{0, 8, "subvolume"}, {8, 2, "key_len"}, {10, 4, "value_len"}},
              "inline log entry");
  EXPECT_EQ(kLogInlineHeaderSize, 14u);
  EXPECT_EQ(kLogTreeOwner, 0xfffffffffffffffaull);
  EXPECT_EQ(kLogMagic, 0x4c5f564b574f435full);
}

TEST(FormatDoc, FileItems) {
  auto doc = ParseDoc();
  ASSERT_EQ(doc["File items"].size(), 2u);
  ExpectTable(doc["File items"][0],
              {{0, 8, "generation"}, {8, 8, "transid"}, {16, 8, "size"}, {24, 8, "nbytes"},
               {32, 4, "nlink"}, {36, 4, "uid"}, {40, 4, "gid"}, {44, 4, "mode"},
               {48, 8, "rdev"}, {56, 8, "flags"}, {64, 8, "atime_ns"}, {72, 8, "ctime_ns"},
               {80, 8, "mtime_ns"}, {88, 8, "otime_ns"}},
              "inode item");
  EXPECT_EQ(fs::kInodeItemSize, 96u);
  fs::InodeItem it;
  it.mode = 0100644;
  it.nlink = 7;
  it.otime_ns = 11;
  std::string enc = fs::EncodeInodeItem(it);
  EXPECT_EQ(DecodeLE32(enc.data() + 32), 7u);
  EXPECT_EQ(DecodeLE32(enc.data() + 44), 0100644u);
  EXPECT_EQ(DecodeLE64(enc.data() + 88), 11u);
  ExpectTable(doc["File items"][1],
              {{0, 8, "generation"}, {8, 1, "kind"}, {9, 7, "reserved"}, {16, 8, "disk_bytenr"},
               {24, 8, "disk_len"}, {32, 8, "extent_offset"}, {40, 8, "num_bytes"},
               {48, 4, "crc"}, {52, 4, "pad"}},
              "file extent");
  EXPECT_EQ(fs::kFileExtentRegularSize, 56u);
  EXPECT_EQ(fs::kInodeItem, 1);
  EXPECT_EQ(fs::kInodeRef, 12);
  EXPECT_EQ(fs::kInodeExtref, 13);
  EXPECT_EQ(fs::kInodeExtrefHeader, 18u);
  EXPECT_EQ(fs::kXattrItem, 24);
  EXPECT_EQ(fs::kDirItem, 84);
  EXPECT_EQ(fs::kDirIndex, 96);
  EXPECT_EQ(fs::kExtentData, 108);
  EXPECT_EQ(fs::kOrphanItem, 48);
  EXPECT_EQ(fs::kOrphanObjectid, 0xfffffffffffffffbull);
  EXPECT_EQ(fs::kRootDirIno, 256u);
}

TEST(FormatDoc, DerivedLimits) {
  EXPECT_EQ(MaxInlineValue(4096), 976u);
  EXPECT_EQ(MaxInlineValue(16384), 7120u);
  EXPECT_EQ(MaxInlineValue(65536), 31696u);
  EXPECT_EQ(kMaxTreeKeySize, 1032u);
  EXPECT_EQ(kSuperblockOffsets[0], 64u << 10);
  EXPECT_EQ(kSuperblockOffsets[1], 64u << 20);
  EXPECT_EQ(kSuperblockOffsets[2], 256ull << 30);
  EXPECT_EQ(kSuperMagic, 0x4d5f564b574f435full);
  EXPECT_EQ(kMaxLevel, 16);
  EXPECT_EQ(kMinDeviceBytes, 16u << 20);
}

}  // namespace
}  // namespace cowkv
