// Files.Open / Close / CreateTmpfile and the calls that take a handle,
// through the generated stub against an in-process server: an open file
// unlinked keeps working by handle (an orphan) and goes at Close; an
// O_TMPFILE is written, fsynced and linked by handle; bad handles are
// EBADF (NOT_FOUND). The limits are in limits_test.cc.
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "server/server_test_util.h"

namespace cowkv {
namespace server {
namespace {

using testing_util::Client;
using testing_util::Ctx;
using testing_util::TestOptions;

class FilesHandleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Server::Start(TestOptions("files-handle"));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    c_ = std::make_unique<Client>(server_->port());
  }
  void TearDown() override { ASSERT_TRUE(server_->Stop().ok()); }

  grpc::Status Write(uint64_t handle, const std::string& path, uint64_t offset,
                     const std::string& data, v1::WriteResponse* resp) {
    auto ctx = Ctx();
    auto w = c_->files->Write(ctx.get(), resp);
    v1::WriteRequest m;
    if (handle != 0) m.set_handle(handle);
    if (handle == 0) {
      m.set_path(path);
      m.set_create(true);
    }
    m.set_offset(offset);
    m.set_data(data);
    w->Write(m);
    w->WritesDone();
    return w->Finish();
  }
  grpc::Status Read(uint64_t handle, std::string* out) {
    v1::ReadRequest r;
    r.set_handle(handle);
    auto ctx = Ctx();
    auto reader = c_->files->Read(ctx.get(), r);
    v1::ReadResponse m;
    out->clear();
    while (reader->Read(&m)) *out += m.data();
    return reader->Finish();
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> c_;
};

TEST_F(FilesHandleTest, UnlinkedOpenFileWorksByHandleUntilClose) {
  v1::WriteResponse wr;
  ASSERT_GRPC_OK(Write(0, "/f", 0, "hello world", &wr));
  v1::OpenRequest open;
  open.set_path("/f");
  v1::OpenResponse h;
  ASSERT_GRPC_OK(c_->files->Open(Ctx().get(), open, &h));
  EXPECT_NE(h.handle(), 0u);
  EXPECT_EQ(h.ino(), wr.stat().ino());
  EXPECT_EQ(h.lease_ms(), 30000u);
  EXPECT_EQ(h.stat().size(), 11u);
  v1::UnlinkRequest unlink;
  unlink.set_path("/f");
  v1::UnlinkResponse ur;
  ASSERT_GRPC_OK(c_->files->Unlink(Ctx().get(), unlink, &ur));
  // Stat, Write, Read, Truncate, Fsync, Fiemap by handle.
  v1::StatRequest stat;
  stat.set_handle(h.handle());
  v1::FileStat st;
  ASSERT_GRPC_OK(c_->files->Stat(Ctx().get(), stat, &st));
  EXPECT_EQ(st.nlink(), 0u);
  ASSERT_GRPC_OK(Write(h.handle(), "", 6, "WORLD", &wr));
  EXPECT_EQ(wr.stat().nlink(), 0u);
  std::string data;
  ASSERT_GRPC_OK(Read(h.handle(), &data));
  EXPECT_EQ(data, "hello WORLD");
  v1::TruncateRequest tr;
  tr.set_handle(h.handle());
  tr.set_size(5);
  ASSERT_GRPC_OK(c_->files->Truncate(Ctx().get(), tr, &st));
  EXPECT_EQ(st.size(), 5u);
  v1::FsyncRequest fs;
  fs.set_handle(h.handle());
  v1::FsyncResponse fr;
  ASSERT_GRPC_OK(c_->files->Fsync(Ctx().get(), fs, &fr));
  v1::FiemapRequest fm;
  fm.set_handle(h.handle());
  v1::FiemapResponse fmr;
  ASSERT_GRPC_OK(c_->files->Fiemap(Ctx().get(), fm, &fmr));
  // Linking it back: not an O_TMPFILE, ENOENT as linkat on Linux.
  v1::LinkRequest link;
  link.set_handle(h.handle());
  link.set_new_path("/back");
  grpc::Status s = c_->files->Link(Ctx().get(), link, &st);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_TRUE(absl::StartsWith(s.error_message(), "ENOENT")) << s.error_message();
  v1::CloseRequest close;
  close.set_handle(h.handle());
  v1::CloseResponse cr;
  ASSERT_GRPC_OK(c_->files->CloseHandle(Ctx().get(), close, &cr));
  v1::StatRequest by_ino;
  by_ino.set_ino(h.ino());
  EXPECT_CODE(c_->files->Stat(Ctx().get(), by_ino, &st), NOT_FOUND);
  s = c_->files->CloseHandle(Ctx().get(), close, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StartsWith(s.error_message(), "EBADF")) << s.error_message();
  EXPECT_CODE(c_->files->Stat(Ctx().get(), stat, &st), NOT_FOUND);
}

TEST_F(FilesHandleTest, TmpfileWrittenFsyncedAndLinked) {
  v1::MkdirRequest mk;
  mk.set_path("/d");
  v1::FileStat d;
  ASSERT_GRPC_OK(c_->files->Mkdir(Ctx().get(), mk, &d));
  v1::CreateTmpfileRequest tmp;
  tmp.set_dir_ino(d.ino());
  tmp.set_mode(0600);
  v1::OpenResponse h;
  ASSERT_GRPC_OK(c_->files->CreateTmpfile(Ctx().get(), tmp, &h));
  EXPECT_EQ(h.stat().nlink(), 0u);
  EXPECT_EQ(h.stat().mode(), 0600u);
  v1::WriteResponse wr;
  ASSERT_GRPC_OK(Write(h.handle(), "", 0, "staged", &wr));
  v1::FsyncRequest fs;
  fs.set_handle(h.handle());
  v1::FsyncResponse fr;
  ASSERT_GRPC_OK(c_->files->Fsync(Ctx().get(), fs, &fr));
  v1::LinkRequest link;
  link.set_handle(h.handle());
  link.set_new_path("/d/final");
  v1::FileStat st;
  ASSERT_GRPC_OK(c_->files->Link(Ctx().get(), link, &st));
  EXPECT_EQ(st.nlink(), 1u);
  // A second name by inode (linkat of a named file).
  v1::LinkRequest again;
  again.set_ino(h.ino());
  again.set_new_path("/other");
  ASSERT_GRPC_OK(c_->files->Link(Ctx().get(), again, &st));
  EXPECT_EQ(st.nlink(), 2u);
  v1::CloseRequest close;
  close.set_handle(h.handle());
  v1::CloseResponse cr;
  ASSERT_GRPC_OK(c_->files->CloseHandle(Ctx().get(), close, &cr));
  v1::StatRequest stat;
  stat.set_path("/d/final");
  ASSERT_GRPC_OK(c_->files->Stat(Ctx().get(), stat, &st));
  EXPECT_EQ(st.size(), 6u);
}

TEST_F(FilesHandleTest, BadRequests) {
  v1::OpenRequest open;
  open.set_path("/missing");
  v1::OpenResponse h;
  EXPECT_CODE(c_->files->Open(Ctx().get(), open, &h), NOT_FOUND);
  open.set_path("/");
  open.set_lease_ms(600001);
  EXPECT_CODE(c_->files->Open(Ctx().get(), open, &h), INVALID_ARGUMENT);
  v1::StatRequest stat;
  stat.set_handle(12345);
  v1::FileStat st;
  grpc::Status s = c_->files->Stat(Ctx().get(), stat, &st);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StartsWith(s.error_message(), "EBADF")) << s.error_message();
  v1::CreateTmpfileRequest tmp;
  tmp.set_dir_path("/nope");
  EXPECT_CODE(c_->files->CreateTmpfile(Ctx().get(), tmp, &h), NOT_FOUND);
  // A later Write message may not name a handle.
  open.set_lease_ms(0);
  ASSERT_GRPC_OK(c_->files->Open(Ctx().get(), open, &h));
  v1::WriteResponse wr;
  auto ctx = Ctx();
  auto w = c_->files->Write(ctx.get(), &wr);
  v1::WriteRequest m;
  m.set_path("/x");
  m.set_create(true);
  m.set_data("a");
  w->Write(m);
  v1::WriteRequest later;
  later.set_handle(h.handle());
  w->Write(later);
  w->WritesDone();
  EXPECT_CODE(w->Finish(), INVALID_ARGUMENT);
}

}  // namespace
}  // namespace server
}  // namespace cowkv
