// Goal: a checksum failure on a read reaches the client as DATA_LOSS with a
// message that says what is damaged, Admin.Check lists the damage, and the
// rest of the store stays readable.
// Method: an in-process cowkvd on a temporary device writes a 256 KiB file
// (data extents, not inline) and a 64 KiB KV value (past the inline value
// limit, so it lives in a data extent), plus a small file and a small key
// that must stay intact, commits (Admin.Sync) and stops. The file's extent
// is found with Fiemap (its physical address), the value's by searching the
// device image for its bytes (KV has no fiemap); the image must hold each
// exactly once. Bytes are flipped in both through the device file, the
// server restarts on it, and then: Files.Read of the file and KV.Get of the
// key are DATA_LOSS ("EIO: " first for Files) naming the damaged extent;
// the corruption counter in Admin.Stats counts both; Admin.Check answers
// ok = false with one problem per damaged extent; the small file and key
// read back unchanged.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/server_test_util.h"

namespace cowkv {
namespace server {
namespace {

using testing_util::Client;
using testing_util::Ctx;
using testing_util::TestOptions;

std::string Pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed;
  for (char& c : s) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    c = static_cast<char>(x >> 56);
  }
  return s;
}

grpc::Status WriteFile(Client& c, const std::string& path, const std::string& data) {
  auto ctx = Ctx();
  v1::WriteResponse resp;
  auto w = c.files->Write(ctx.get(), &resp);
  v1::WriteRequest first;
  first.set_path(path);
  first.set_create(true);
  first.set_data(data);
  w->Write(first);
  w->WritesDone();
  return w->Finish();
}

grpc::Status ReadFile(Client& c, const std::string& path, std::string* data) {
  auto ctx = Ctx();
  v1::ReadRequest req;
  req.set_path(path);
  auto r = c.files->Read(ctx.get(), req);
  v1::ReadResponse chunk;
  data->clear();
  while (r->Read(&chunk)) *data += chunk.data();
  return r->Finish();
}

grpc::Status Get(Client& c, const std::string& key, std::string* value) {
  v1::GetRequest req;
  req.set_key(key);
  v1::GetResponse resp;
  grpc::Status s = c.kv->Get(Ctx().get(), req, &resp);
  *value = resp.kv().value();
  return s;
}

uint64_t Corruptions(Client& c) {
  v1::StatsResponse stats;
  const grpc::Status s = c.admin->Stats(Ctx().get(), v1::StatsRequest(), &stats);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return stats.corruptions_detected();
}

// Every offset at which `needle` occurs in the file at `path`.
std::vector<uint64_t> FindAll(const std::string& path, const std::string& needle) {
  std::ifstream in(path, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint64_t> out;
  for (size_t at = image.find(needle); at != std::string::npos; at = image.find(needle, at + 1)) {
    out.push_back(at);
  }
  return out;
}

// Flips every bit of `n` bytes at `offset` of the file at `path`.
void FlipBytes(const std::string& path, uint64_t offset, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  std::string buf(n, '\0');
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(buf.data(), static_cast<std::streamsize>(n));
  ASSERT_TRUE(f.good());
  for (char& c : buf) c = static_cast<char>(~c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(buf.data(), static_cast<std::streamsize>(n));
  f.flush();
  ASSERT_TRUE(f.good());
}

TEST(DataLoss, FlippedExtentBytesAreDataLossAndCheckListsThem) {
  const ServerOptions o = TestOptions("data-loss");
  const std::string file_data = Pattern(256 << 10, 1);
  const std::string value = Pattern(64 << 10, 2);
  uint64_t file_extent = 0;
  uint64_t ino = 0;
  {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    Client c((*s)->port());
    ASSERT_GRPC_OK(WriteFile(c, "/big", file_data));
    ASSERT_GRPC_OK(WriteFile(c, "/small", "intact"));
    v1::PutRequest put;
    put.set_key("big");
    put.set_value(value);
    put.set_durability(v1::DURABILITY_ASYNC);  // the commit below writes it, the log does not
    v1::PutResponse put_resp;
    ASSERT_GRPC_OK(c.kv->Put(Ctx().get(), put, &put_resp));
    put.set_key("small");
    put.set_value("intact");
    ASSERT_GRPC_OK(c.kv->Put(Ctx().get(), put, &put_resp));
    v1::SyncResponse sync;
    ASSERT_GRPC_OK(c.admin->Sync(Ctx().get(), v1::SyncRequest(), &sync));

    v1::FiemapRequest fm;
    fm.set_path("/big");
    v1::FiemapResponse extents;
    ASSERT_GRPC_OK(c.files->Fiemap(Ctx().get(), fm, &extents));
    ASSERT_GT(extents.extents_size(), 0);
    const v1::FiemapExtent& first = extents.extents(0);
    ASSERT_EQ(first.flags() & v1::FIEMAP_FLAG_INLINE, 0u) << "256 KiB must not be inline";
    ASSERT_EQ(first.logical(), 0u);
    file_extent = first.physical();
    ASSERT_GT(file_extent, 0u);
    v1::StatRequest stat;
    stat.set_path("/big");
    v1::FileStat st;
    ASSERT_GRPC_OK(c.files->Stat(Ctx().get(), stat, &st));
    ino = st.ino();
    ASSERT_TRUE((*s)->Stop().ok());
  }

  // The value's bytes are on the device once (in its data extent), and so
  // are the file's first bytes (at the address Fiemap gave).
  const std::vector<uint64_t> value_at = FindAll(o.device.path, value.substr(0, 4096));
  ASSERT_EQ(value_at.size(), 1u) << "the 64 KiB value should be stored exactly once";
  const std::vector<uint64_t> file_at = FindAll(o.device.path, file_data.substr(0, 4096));
  ASSERT_EQ(file_at, std::vector<uint64_t>{file_extent});
  FlipBytes(o.device.path, file_extent + 1000, 16);
  FlipBytes(o.device.path, value_at[0] + 5000, 16);

  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  Client c((*s)->port());
  const uint64_t corruptions_before = Corruptions(c);

  std::string data;
  const grpc::Status read = ReadFile(c, "/big", &data);
  std::cout << "Files.Read: " << read.error_message() << "\n";
  EXPECT_EQ(read.error_code(), grpc::StatusCode::DATA_LOSS) << read.error_message();
  EXPECT_TRUE(absl::StartsWith(read.error_message(), "EIO: ")) << read.error_message();
  EXPECT_TRUE(absl::StrContains(read.error_message(), "checksum mismatch")) << read.error_message();
  EXPECT_TRUE(absl::StrContains(read.error_message(), absl::StrCat("bytenr=", file_extent)))
      << read.error_message();
  EXPECT_TRUE(absl::StrContains(read.error_message(), absl::StrCat("inode ", ino)))
      << read.error_message();
  EXPECT_GE(Corruptions(c), corruptions_before + 1) << "the file's checksum failure is not counted";

  std::string got;
  const grpc::Status get = Get(c, "big", &got);
  std::cout << "KV.Get: " << get.error_message() << "\n";
  EXPECT_EQ(get.error_code(), grpc::StatusCode::DATA_LOSS) << get.error_message();
  EXPECT_TRUE(absl::StrContains(get.error_message(), "checksum mismatch")) << get.error_message();
  EXPECT_TRUE(absl::StrContains(get.error_message(), absl::StrCat("bytenr=", value_at[0])))
      << get.error_message();
  EXPECT_TRUE(absl::StrContains(get.error_message(), "\"big\"")) << get.error_message();
  EXPECT_GE(Corruptions(c), corruptions_before + 2)
      << "the value's checksum failure is not counted";

  // Everything else reads back.
  ASSERT_GRPC_OK(ReadFile(c, "/small", &data));
  EXPECT_EQ(data, "intact");
  ASSERT_GRPC_OK(Get(c, "small", &got));
  EXPECT_EQ(got, "intact");

  v1::CheckResponse check;
  ASSERT_GRPC_OK(c.admin->Check(Ctx().get(), v1::CheckRequest(), &check));
  EXPECT_FALSE(check.ok());
  const std::string problems = absl::StrJoin(check.problems(), "\n");
  std::cout << "Admin.Check:\n" << problems << "\n";
  EXPECT_EQ(check.problems_size(), 2) << problems;
  for (uint64_t extent : {file_extent, value_at[0]}) {
    EXPECT_TRUE(
        absl::StrContains(problems, absl::StrCat("data extent ", extent, ": checksum mismatch")))
        << extent << " not in:\n"
        << problems;
  }
  EXPECT_TRUE((*s)->Stop().ok());
}

}  // namespace
}  // namespace server
}  // namespace cowkv
