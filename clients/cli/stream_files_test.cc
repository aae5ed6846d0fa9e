// Goal: the server-free half of `cowkv backup` and `cowkv export` —
// reading a send stream's HEADER, walking a stream's framing, SHA-256,
// manifests, and the chain and order checks — accepts what the format
// (docs/format.md "Send stream") allows and refuses every damage.
// Method: streams are built here byte by byte from the format's table (an
// encoder independent of the engine's); every single-byte flip and every
// truncation of one is refused; random chains are broken at a random link
// and must be refused naming that link. Replay: --gtest_random_seed=N
// (the seed is printed by gtest and feeds the generator).
#include "clients/cli/stream_files.h"

#include <isa-l.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace cli {
namespace {

void PutLe(std::string* out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t Crc(const std::string& bytes) {
  return ~crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<char*>(bytes.data())),
                      static_cast<int>(bytes.size()), 0xFFFFFFFFu);
}

std::string Record(uint16_t type, const std::string& payload) {
  std::string frame;
  PutLe(&frame, payload.size(), 4);
  PutLe(&frame, type, 2);
  PutLe(&frame, 0, 2);
  const uint32_t crc = Crc(frame + payload);
  PutLe(&frame, crc, 4);
  return frame + payload;
}

std::string Uuid(char c) { return std::string(16, c); }

// A stream: preamble, HEADER, `puts` PUT records, END.
std::string Stream(const std::string& uuid, uint64_t stransid, const std::string& parent,
                   uint64_t parent_stransid, int puts, uint32_t version = 1) {
  std::string s = "COWKVSND";
  PutLe(&s, version, 4);
  PutLe(&s, 0, 4);
  std::string h;
  PutLe(&h, 16384, 4);
  PutLe(&h, 4096, 4);
  h += uuid;
  PutLe(&h, stransid, 8);
  h += parent.empty() ? std::string(16, '\0') : parent;
  PutLe(&h, parent_stransid, 8);
  PutLe(&h, 1700000000000, 8);
  PutLe(&h, 4, 2);
  h += "snap";
  s += Record(1, h);
  for (int i = 0; i < puts; ++i) {
    std::string p;
    const std::string key = absl::StrCat("k", i);
    PutLe(&p, key.size(), 2);
    p += key;
    PutLe(&p, 3, 4);
    p += "val";
    s += Record(2, p);
  }
  Sha256 sha;
  sha.Update(s);
  std::string end;
  PutLe(&end, 1 + puts, 8);  // every record before END, HEADER included
  end += absl::HexStringToBytes(sha.FinishHex());
  return s + Record(7, end);
}

class StreamFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stream_files_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)std::system(absl::StrCat("rm -rf ", dir_).c_str()); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    return path;
  }
  std::string dir_;
};

TEST(Sha256Test, KnownVector) {
  Sha256 sha;
  sha.Update("ab");
  sha.Update("c");
  EXPECT_EQ(sha.FinishHex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(StreamHeaderTest, ParsesTheFormatsFields) {
  const std::string s = Stream(Uuid('a'), 7, Uuid('b'), 5, 0);
  absl::StatusOr<StreamHeaderInfo> h = ParseStreamHeader(s);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->nodesize, 16384u);
  EXPECT_EQ(h->sectorsize, 4096u);
  EXPECT_EQ(h->uuid, absl::BytesToHexString(Uuid('a')));
  EXPECT_EQ(h->stransid, 7u);
  EXPECT_EQ(h->parent_uuid, absl::BytesToHexString(Uuid('b')));
  EXPECT_EQ(h->parent_stransid, 5u);
  EXPECT_EQ(h->name, "snap");
  absl::StatusOr<StreamHeaderInfo> full = ParseStreamHeader(Stream(Uuid('a'), 7, "", 0, 0));
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->parent_uuid, "");
}

TEST(StreamHeaderTest, RefusesOtherBytesAndNewerVersions) {
  EXPECT_EQ(ParseStreamHeader("not a stream at all").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseStreamHeader(Stream(Uuid('a'), 1, "", 0, 0, 2)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const std::string s = Stream(Uuid('a'), 1, "", 0, 0);
  for (size_t n = 8; n < 16 + 12 + 70; ++n) {
    EXPECT_EQ(ParseStreamHeader(s.substr(0, n)).status().code(), absl::StatusCode::kDataLoss) << n;
  }
}

TEST_F(StreamFilesTest, WalkAcceptsAWholeStream) {
  const std::string path = Write("ok.stream", Stream(Uuid('a'), 3, "", 0, 20));
  absl::StatusOr<StreamWalk> w = WalkStreamFile(path);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->records, 22u);
}

TEST_F(StreamFilesTest, WalkRefusesEveryFlippedByte) {
  const std::string good = Stream(Uuid('a'), 3, Uuid('c'), 2, 3);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    const std::string path = Write("bad.stream", bad);
    EXPECT_FALSE(WalkStreamFile(path).ok()) << "flip at byte " << i;
  }
}

TEST_F(StreamFilesTest, WalkRefusesTruncationAndTrailingBytes) {
  const std::string good = Stream(Uuid('a'), 3, "", 0, 3);
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string path = Write("short.stream", good.substr(0, n));
    EXPECT_FALSE(WalkStreamFile(path).ok()) << "truncated to " << n;
  }
  EXPECT_EQ(WalkStreamFile(Write("long.stream", good + "x")).status().code(),
            absl::StatusCode::kDataLoss);
}

StreamEntry Entry(int i, const std::string& parent, uint64_t parent_gen) {
  StreamEntry e;
  e.file = absl::StrCat(i, ".stream");
  e.snapshot = absl::StrCat("s", i);
  e.uuid = absl::StrCat("uuid", i);
  e.stransid = 10 * i + 1;
  e.parent_uuid = parent;
  e.parent_stransid = parent_gen;
  return e;
}

std::vector<StreamEntry> Chain(int n) {
  std::vector<StreamEntry> c;
  for (int i = 0; i < n; ++i) {
    c.push_back(i == 0 ? Entry(0, "", 0) : Entry(i, c.back().uuid, c.back().stransid));
  }
  return c;
}

TEST(ChainTest, RandomChainsBrokenAtARandomLinkAreRefusedThere) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + rng() % 12;
    std::vector<StreamEntry> c = Chain(n);
    ASSERT_TRUE(CheckBackupChain(c).ok());
    ASSERT_TRUE(CheckExportOrder(c).ok());
    const int at = rng() % n;
    switch (rng() % 4) {
      case 0:
        c[at].parent_uuid = at == 0 ? "x" : "";
        break;  // full mid-chain / incr first
      case 1:
        c[at].parent_stransid += 1;
        c[at].parent_uuid = at ? c[at].parent_uuid : "y";
        break;
      case 2:
        c[at].parent_uuid = "elsewhere";
        break;
      case 3:
        if (n < 2) continue;
        std::swap(c[at], c[(at + 1) % n]);  // out of order
        break;
    }
    absl::Status s = CheckBackupChain(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << "round " << round;
  }
}

TEST(ChainTest, ExportOrderWantsParentsFirstAndUniqueNames) {
  std::vector<StreamEntry> e = {Entry(0, "", 0), Entry(1, "", 0)};
  e.push_back(Entry(2, e[0].uuid, e[0].stransid));  // two lineages interleaved: fine
  EXPECT_TRUE(CheckExportOrder(e).ok());
  EXPECT_FALSE(CheckBackupChain(e).ok());
  std::swap(e[0], e[2]);
  EXPECT_EQ(CheckExportOrder(e).code(), absl::StatusCode::kFailedPrecondition);
  std::vector<StreamEntry> dup = {Entry(0, "", 0), Entry(0, "", 0)};
  dup[1].uuid = "other";
  EXPECT_EQ(CheckExportOrder(dup).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StreamFilesTest, ManifestRoundTripsAndRefusesPaths) {
  Manifest m{"backup", "data", Chain(3)};
  m.streams[1].sha256 = std::string(64, 'f');
  ASSERT_TRUE(SaveManifest(dir_, kBackupManifest, m).ok());
  absl::StatusOr<Manifest> back = LoadManifest(dir_, kBackupManifest);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ManifestToJson(*back), ManifestToJson(m));
  EXPECT_EQ(LoadManifest(dir_, "absent.json").status().code(), absl::StatusCode::kNotFound);
  m.streams[2].file = "../../etc/passwd";
  EXPECT_EQ(ManifestFromJson(ManifestToJson(m)).status().code(),
            absl::StatusCode::kInvalidArgument);
  Write("junk.json", "{\"kind\": 3}");
  EXPECT_EQ(LoadManifest(dir_, "junk.json").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StreamFilesTest, CheckStreamFileComparesBytesHashAndHeader) {
  const std::string bytes = Stream(Uuid('a'), 3, "", 0, 2);
  Write("1.stream", bytes);
  absl::StatusOr<FileDigest> d = DigestFile(absl::StrCat(dir_, "/1.stream"));
  ASSERT_TRUE(d.ok());
  StreamEntry e;
  e.file = "1.stream";
  e.uuid = absl::BytesToHexString(Uuid('a'));
  e.stransid = 3;
  e.bytes = d->bytes;
  e.sha256 = d->sha256;
  EXPECT_TRUE(CheckStreamFile(dir_, e).ok()) << CheckStreamFile(dir_, e);
  StreamEntry other = e;
  other.stransid = 4;
  EXPECT_EQ(CheckStreamFile(dir_, other).code(), absl::StatusCode::kFailedPrecondition);
  other = e;
  other.parent_uuid = e.uuid;
  EXPECT_EQ(CheckStreamFile(dir_, other).code(), absl::StatusCode::kFailedPrecondition);
  std::string bad = bytes;
  bad[bad.size() / 2] ^= 0x40;
  Write("1.stream", bad);
  EXPECT_EQ(CheckStreamFile(dir_, e).code(), absl::StatusCode::kDataLoss);
  std::remove(absl::StrCat(dir_, "/1.stream").c_str());
  EXPECT_EQ(CheckStreamFile(dir_, e).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cli
}  // namespace cowkv
