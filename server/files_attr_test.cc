// Goal: the attribute calls of cowkv.v1.Files (issue 17) through the
// generated stub against an in-process server: SetAttr's fields and
// errors, the xattr calls with their flags and limits. Each answer's code and POSIX name are
// checked as server_test does for the other calls.
#include <string>

#include "cowkv/v1/files.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "server/server_test_util.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {
namespace {

using testing_util::Client;
using testing_util::Ctx;
using testing_util::TestOptions;

class FilesAttr : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(TestOptions("attr"));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
    client_ = new Client(server_->port());
  }
  static void TearDownTestSuite() {
    delete client_;
    if (server_ != nullptr) {
      EXPECT_TRUE(server_->Stop().ok());
    }
    delete server_;
  }

 protected:
  static Server* server_;
  static Client* client_;
  v1::Files::Stub& fs() { return *client_->files; }
  void Create(const std::string& path, uint32_t mode = 0) {
    v1::CreateFileRequest req;
    req.set_path(path);
    req.set_mode(mode);
    v1::FileStat st;
    ASSERT_GRPC_OK(fs().Create(Ctx().get(), req, &st));
  }
  grpc::Status SetAttr(const v1::SetAttrRequest& req, v1::FileStat* st) {
    return fs().SetAttr(Ctx().get(), req, st);
  }
};
Server* FilesAttr::server_ = nullptr;
Client* FilesAttr::client_ = nullptr;

TEST_F(FilesAttr, SetAttrFields) {
  ASSERT_NO_FATAL_FAILURE(Create("/sa"));
  v1::SetAttrRequest req;
  req.set_path("/sa");
  v1::FileStat before, st;
  ASSERT_GRPC_OK(SetAttr(req, &before));  // no fields: the attributes
  EXPECT_EQ(before.mode(), 0644u);

  req.set_fields(v1::SET_ATTR_MODE | v1::SET_ATTR_UID | v1::SET_ATTR_GID | v1::SET_ATTR_ATIME |
                 v1::SET_ATTR_MTIME);
  req.set_mode(0600);
  req.set_uid(1000);
  req.set_gid(100);
  req.set_atime_ns(111);
  req.set_mtime_ns(-222);
  ASSERT_GRPC_OK(SetAttr(req, &st));
  EXPECT_EQ(st.mode(), 0600u);
  EXPECT_EQ(st.uid(), 1000u);
  EXPECT_EQ(st.gid(), 100u);
  EXPECT_EQ(st.atime_ns(), 111);
  EXPECT_EQ(st.mtime_ns(), -222);
  EXPECT_GE(st.ctime_ns(), before.ctime_ns());

  // *_NOW wins over the explicit time; fields not named stay.
  v1::SetAttrRequest now;
  now.set_ino(st.ino());
  now.set_fields(v1::SET_ATTR_MTIME | v1::SET_ATTR_MTIME_NOW);
  now.set_mtime_ns(5);
  v1::FileStat after;
  ASSERT_GRPC_OK(SetAttr(now, &after));
  EXPECT_GE(after.mtime_ns(), st.ctime_ns());
  EXPECT_EQ(after.atime_ns(), 111);
  EXPECT_EQ(after.mode(), 0600u);

  v1::SetAttrRequest size;
  size.set_path("/sa");
  size.set_fields(v1::SET_ATTR_SIZE);
  size.set_size(12345);
  ASSERT_GRPC_OK(SetAttr(size, &st));
  EXPECT_EQ(st.size(), 12345u);

  v1::StatRequest sr;
  sr.set_path("/sa");
  ASSERT_GRPC_OK(fs().Stat(Ctx().get(), sr, &st));
  EXPECT_EQ(st.mode(), 0600u);
  EXPECT_EQ(st.size(), 12345u);
}

TEST_F(FilesAttr, SetAttrErrors) {
  ASSERT_NO_FATAL_FAILURE(Create("/se"));
  v1::SetAttrRequest req;
  v1::FileStat st;
  req.set_path("/se");
  req.set_fields(v1::SET_ATTR_MODE);
  req.set_mode(010000);
  EXPECT_POSIX(SetAttr(req, &st), INVALID_ARGUMENT, "EINVAL");
  req.set_fields(1u << 20);
  EXPECT_POSIX(SetAttr(req, &st), INVALID_ARGUMENT, "EINVAL");
  req.set_fields(v1::SET_ATTR_SIZE);
  req.set_size(1ull << 60);
  EXPECT_POSIX(SetAttr(req, &st), INVALID_ARGUMENT, "EFBIG");
  req.set_path("/");
  req.set_size(0);
  EXPECT_POSIX(SetAttr(req, &st), FAILED_PRECONDITION, "EISDIR");
  req.set_path("/none");
  req.set_fields(v1::SET_ATTR_UID);
  EXPECT_POSIX(SetAttr(req, &st), NOT_FOUND, "ENOENT");
  req.set_path("");
  req.set_ino(1ull << 40);
  EXPECT_POSIX(SetAttr(req, &st), NOT_FOUND, "ENOENT");
}

TEST_F(FilesAttr, SetAttrOnReadOnlySnapshotIsEROFS) {
  v1::CreateSubvolumeRequest cr;
  cr.set_name("attr_ro");
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(client_->subvolumes->Create(Ctx().get(), cr, &info));
  v1::CreateFileRequest cf;
  cf.set_subvolume("attr_ro");
  cf.set_path("/f");
  v1::FileStat st;
  ASSERT_GRPC_OK(fs().Create(Ctx().get(), cf, &st));
  v1::SnapshotRequest snap;
  snap.set_source("attr_ro");
  snap.set_name("attr_ro_snap");
  snap.set_read_only(true);
  ASSERT_GRPC_OK(client_->subvolumes->Snapshot(Ctx().get(), snap, &info));
  v1::SetAttrRequest req;
  req.set_subvolume("attr_ro_snap");
  req.set_path("/f");
  req.set_fields(v1::SET_ATTR_MODE);
  req.set_mode(0600);
  EXPECT_POSIX(SetAttr(req, &st), FAILED_PRECONDITION, "EROFS");
}

TEST_F(FilesAttr, Xattrs) {
  ASSERT_NO_FATAL_FAILURE(Create("/x"));
  v1::SetXattrRequest set;
  set.set_path("/x");
  set.set_name("user.a");
  set.set_value(std::string("v\0\xff", 3));  // values are bytes
  v1::SetXattrResponse ok;
  ASSERT_GRPC_OK(fs().SetXattr(Ctx().get(), set, &ok));
  set.set_flags(v1::XATTR_FLAG_CREATE);
  EXPECT_POSIX(fs().SetXattr(Ctx().get(), set, &ok), ALREADY_EXISTS, "EEXIST");
  set.set_name("user.b");
  set.set_value("b");
  ASSERT_GRPC_OK(fs().SetXattr(Ctx().get(), set, &ok));
  set.set_name("user.c");
  set.set_flags(v1::XATTR_FLAG_REPLACE);
  EXPECT_POSIX(fs().SetXattr(Ctx().get(), set, &ok), NOT_FOUND, "ENODATA");
  set.set_flags(v1::XATTR_FLAG_CREATE | v1::XATTR_FLAG_REPLACE);
  EXPECT_POSIX(fs().SetXattr(Ctx().get(), set, &ok), INVALID_ARGUMENT, "EINVAL");
  set.set_flags(0);
  set.set_name(std::string(256, 'n'));
  EXPECT_POSIX(fs().SetXattr(Ctx().get(), set, &ok), INVALID_ARGUMENT, "ENAMETOOLONG");
  set.set_name("");
  EXPECT_POSIX(fs().SetXattr(Ctx().get(), set, &ok), INVALID_ARGUMENT, "EINVAL");
  set.set_name("user.big");
  set.set_value(std::string(4097, 'v'));
  EXPECT_POSIX(fs().SetXattr(Ctx().get(), set, &ok), INVALID_ARGUMENT, "ERANGE");
  set.set_value(std::string(4096, 'v'));  // fits an item of the default 16 KiB nodes
  ASSERT_GRPC_OK(fs().SetXattr(Ctx().get(), set, &ok));
  v1::RemoveXattrRequest drop;
  drop.set_path("/x");
  drop.set_name("user.big");
  v1::RemoveXattrResponse dropped;
  ASSERT_GRPC_OK(fs().RemoveXattr(Ctx().get(), drop, &dropped));

  v1::GetXattrRequest get;
  get.set_path("/x");
  get.set_name("user.a");
  v1::GetXattrResponse got;
  ASSERT_GRPC_OK(fs().GetXattr(Ctx().get(), get, &got));
  EXPECT_EQ(got.value(), std::string("v\0\xff", 3));
  get.set_name("user.none");
  EXPECT_POSIX(fs().GetXattr(Ctx().get(), get, &got), NOT_FOUND, "ENODATA");

  v1::ListXattrsRequest list;
  list.set_path("/x");
  v1::ListXattrsResponse names;
  ASSERT_GRPC_OK(fs().ListXattrs(Ctx().get(), list, &names));
  ASSERT_EQ(names.names_size(), 2);
  EXPECT_EQ(names.names(0), "user.a");
  EXPECT_EQ(names.names(1), "user.b");

  v1::RemoveXattrRequest rm;
  rm.set_path("/x");
  rm.set_name("user.a");
  v1::RemoveXattrResponse removed;
  ASSERT_GRPC_OK(fs().RemoveXattr(Ctx().get(), rm, &removed));
  EXPECT_POSIX(fs().RemoveXattr(Ctx().get(), rm, &removed), NOT_FOUND, "ENODATA");
  rm.set_path("/none");
  EXPECT_POSIX(fs().RemoveXattr(Ctx().get(), rm, &removed), NOT_FOUND, "ENOENT");
  list.set_path("/none");
  EXPECT_POSIX(fs().ListXattrs(Ctx().get(), list, &names), NOT_FOUND, "ENOENT");
}

TEST_F(FilesAttr, FsyncRange) {
  ASSERT_NO_FATAL_FAILURE(Create("/r"));
  v1::FsyncRequest req;
  req.set_path("/r");
  req.set_offset(4096);
  req.set_length(4096);
  v1::FsyncResponse resp;
  ASSERT_GRPC_OK(fs().Fsync(Ctx().get(), req, &resp));
  req.set_datasync(true);
  req.set_length(0);  // to EOF
  ASSERT_GRPC_OK(fs().Fsync(Ctx().get(), req, &resp));
  req.set_offset(UINT64_MAX - 10);
  req.set_length(100);
  EXPECT_POSIX(fs().Fsync(Ctx().get(), req, &resp), INVALID_ARGUMENT, "EINVAL");
  req.set_offset(1ull << 62);
  req.set_length(1ull << 62);  // 2^63: past the largest offset
  EXPECT_POSIX(fs().Fsync(Ctx().get(), req, &resp), INVALID_ARGUMENT, "EINVAL");
  req.set_offset(0);
  req.set_length(1);
  req.set_path("/none");
  EXPECT_POSIX(fs().Fsync(Ctx().get(), req, &resp), NOT_FOUND, "ENOENT");
}

// cowkvd --read-only: an image written by one server, served read-only by
// another: reads work, every write is FAILED_PRECONDITION with reason
// EROFS (Sync and Fsync are no-ops), stop exits cleanly (nothing to commit), and a second read-only
// server may share the device while a writer may not.
TEST(ReadOnlyServer, ReadsWorkWritesAreEROFS) {
  ServerOptions o = TestOptions("ro");
  {
    absl::StatusOr<std::unique_ptr<Server>> w = Server::Start(o);
    ASSERT_TRUE(w.ok()) << w.status();
    Client c((*w)->port());
    v1::PutRequest put;
    put.set_key("k");
    put.set_value("v");
    v1::PutResponse put_resp;
    ASSERT_GRPC_OK(c.kv->Put(Ctx().get(), put, &put_resp));
    v1::CreateFileRequest cf;
    cf.set_path("/f");
    v1::FileStat st;
    ASSERT_GRPC_OK(c.files->Create(Ctx().get(), cf, &st));
    v1::SetXattrRequest sx;
    sx.set_path("/f");
    sx.set_name("user.a");
    sx.set_value("1");
    v1::SetXattrResponse sx_resp;
    ASSERT_GRPC_OK(c.files->SetXattr(Ctx().get(), sx, &sx_resp));
    ASSERT_TRUE((*w)->Stop().ok());
  }
  ServerOptions ro = o;
  ro.device.read_only = true;
  ro.engine.read_only = true;
  absl::StatusOr<std::unique_ptr<Server>> r = Server::Start(ro);
  ASSERT_TRUE(r.ok()) << r.status();
  // Another read-only server shares the device; a writer is refused.
  ServerOptions ro2 = ro;
  ro2.metrics_listen = "";
  absl::StatusOr<std::unique_ptr<Server>> r2 = Server::Start(ro2);
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_TRUE((*r2)->Stop().ok());
  absl::StatusOr<std::unique_ptr<Server>> writer = Server::Start(o);
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kFailedPrecondition) << writer.status();

  Client c((*r)->port());
  v1::GetRequest get;
  get.set_key("k");
  v1::GetResponse got;
  ASSERT_GRPC_OK(c.kv->Get(Ctx().get(), get, &got));
  v1::StatRequest sr;
  sr.set_path("/f");
  v1::FileStat st;
  ASSERT_GRPC_OK(c.files->Stat(Ctx().get(), sr, &st));
  v1::GetXattrRequest gx;
  gx.set_path("/f");
  gx.set_name("user.a");
  v1::GetXattrResponse gx_resp;
  ASSERT_GRPC_OK(c.files->GetXattr(Ctx().get(), gx, &gx_resp));
  EXPECT_EQ(gx_resp.value(), "1");

  auto erofs = [](const grpc::Status& s, const char* what) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << what << ": " << s.error_message();
    EXPECT_EQ(ErrorInfoOf(s).reason, "EROFS") << what << ": " << s.error_message();
  };
  v1::PutRequest put;
  put.set_key("k2");
  put.set_value("v");
  v1::PutResponse put_resp;
  erofs(c.kv->Put(Ctx().get(), put, &put_resp), "Put");
  v1::CreateFileRequest cf;
  cf.set_path("/g");
  erofs(c.files->Create(Ctx().get(), cf, &st), "Create");
  v1::SetAttrRequest sa;
  sa.set_path("/f");
  sa.set_fields(v1::SET_ATTR_MODE);
  sa.set_mode(0600);
  erofs(c.files->SetAttr(Ctx().get(), sa, &st), "SetAttr");
  v1::RemoveXattrRequest rx;
  rx.set_path("/f");
  rx.set_name("user.a");
  v1::RemoveXattrResponse rx_resp;
  erofs(c.files->RemoveXattr(Ctx().get(), rx, &rx_resp), "RemoveXattr");
  v1::CreateSubvolumeRequest cs;
  cs.set_name("nope");
  v1::SubvolumeInfo info;
  erofs(c.subvolumes->Create(Ctx().get(), cs, &info), "Subvolumes.Create");
  // Sync and Fsync have nothing to make durable: OK, as sync(2) and
  // fsync(2) on a read-only mount.
  v1::SyncRequest sync;
  v1::SyncResponse sync_resp;
  ASSERT_GRPC_OK(c.admin->Sync(Ctx().get(), sync, &sync_resp));
  v1::FsyncRequest fsync;
  fsync.set_path("/f");
  v1::FsyncResponse fsync_resp;
  ASSERT_GRPC_OK(c.files->Fsync(Ctx().get(), fsync, &fsync_resp));
  EXPECT_TRUE((*r)->Stop().ok());
}

}  // namespace
}  // namespace server
}  // namespace cowkv
