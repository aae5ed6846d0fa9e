// Goal: file watchers on KV.Watch (WatchCreateRequest.files; docs/design.md
// "File watch") through the generated stub against an in-process server:
// the file tree's changes under a prefix in revision order — creates, a
// write, renames out of and into the prefix (both paths), unlink — arrive
// without any client commit (the hub commits for them); a start before the
// span (the file tree changed while nobody watched) is cancelled COMPACTED
// with the span start; deleting the subvolume cancels its file watchers; a
// file watcher with KV fields is refused; a KV-only store records no file
// event.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/v1/admin.grpc.pb.h"
#include "cowkv/v1/files.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "server/server_test_util.h"

namespace cowkv {
namespace server {
namespace {

using testing_util::Client;
using testing_util::Ctx;
using testing_util::TestOptions;
using Stream = grpc::ClientReaderWriter<v1::WatchRequest, v1::WatchResponse>;

class FileWatch : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    ServerOptions o = TestOptions("file-watch");
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
    client_ = new Client(server_->port());
  }
  static void TearDownTestSuite() {
    delete client_;
    if (server_ != nullptr) EXPECT_TRUE(server_->Stop().ok());
    delete server_;
  }

 protected:
  static Server* server_;
  static Client* client_;

  struct Open {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<Stream> stream;
  };
  Open OpenStream() {
    Open o;
    o.ctx = Ctx();
    o.stream = client_->kv->Watch(o.ctx.get());
    return o;
  }
  static v1::WatchRequest FilesReq(const std::string& prefix, const std::string& sv = "",
                                   uint64_t start = 0) {
    v1::WatchRequest r;
    v1::WatchCreateRequest* c = r.mutable_create_request();
    c->set_subvolume(sv);
    c->mutable_files()->set_prefix(prefix);
    c->set_start_revision(start);
    return r;
  }
  static v1::WatchResponse Next(Stream* s) {
    v1::WatchResponse r;
    EXPECT_TRUE(s->Read(&r)) << "the stream ended";
    return r;
  }
  // The created response's revision.
  uint64_t Create(Stream* s, const v1::WatchRequest& req) {
    EXPECT_TRUE(s->Write(req));
    v1::WatchResponse r = Next(s);
    EXPECT_TRUE(r.created());
    EXPECT_FALSE(r.canceled()) << r.cancel_reason();
    return r.revision();
  }
  // "TYPE path[ -> new_path]" of the next `n` file events.
  std::vector<std::string> Events(Stream* s, size_t n) {
    std::vector<std::string> out;
    while (out.size() < n) {
      v1::WatchResponse r = Next(s);
      if (r.canceled() || r.file_events_size() == 0) {
        ADD_FAILURE() << "expected file events, got " << r.ShortDebugString();
        break;
      }
      for (const v1::FileWatchEvent& e : r.file_events()) {
        out.push_back(absl::StrCat(v1::FileWatchEvent::Type_Name(e.type()), " ", e.path(),
                                   e.new_path().empty() ? "" : " -> ", e.new_path()));
      }
    }
    return out;
  }
  void Mkdir(const std::string& p, const std::string& sv = "") {
    v1::MkdirRequest req;
    req.set_subvolume(sv);
    req.set_path(p);
    v1::FileStat st;
    ASSERT_GRPC_OK(client_->files->Mkdir(Ctx().get(), req, &st));
  }
  void CreateFile(const std::string& p, const std::string& sv = "") {
    v1::CreateFileRequest req;
    req.set_subvolume(sv);
    req.set_path(p);
    v1::FileStat st;
    ASSERT_GRPC_OK(client_->files->Create(Ctx().get(), req, &st));
  }
  void Truncate(const std::string& p, uint64_t size) {
    v1::TruncateRequest req;
    req.set_path(p);
    req.set_size(size);
    v1::FileStat st;
    ASSERT_GRPC_OK(client_->files->Truncate(Ctx().get(), req, &st));
  }
  void Rename(const std::string& from, const std::string& to) {
    v1::RenameRequest req;
    req.set_from(from);
    req.set_to(to);
    v1::RenameResponse resp;
    ASSERT_GRPC_OK(client_->files->Rename(Ctx().get(), req, &resp));
  }
  void Unlink(const std::string& p) {
    v1::UnlinkRequest req;
    req.set_path(p);
    v1::UnlinkResponse resp;
    ASSERT_GRPC_OK(client_->files->Unlink(Ctx().get(), req, &resp));
  }
};

Server* FileWatch::server_ = nullptr;
Client* FileWatch::client_ = nullptr;

TEST_F(FileWatch, AKvOnlyStoreRecordsNoFileEvent) {
  // First in the suite: nobody has watched files yet.
  Mkdir("/quiet");
  CreateFile("/quiet/f");
  v1::StatsRequest req;
  v1::StatsResponse st;
  ASSERT_GRPC_OK(client_->admin->Stats(Ctx().get(), req, &st));
  EXPECT_EQ(st.fs_file_events(), 0u);
  EXPECT_EQ(st.fs_file_event_span_closes(), 0u);
}

TEST_F(FileWatch, ChangesUnderAPrefixInOrderWithoutAClientCommit) {
  Open o = OpenStream();
  Create(o.stream.get(), FilesReq("/d/"));
  Mkdir("/d");
  CreateFile("/d/f");
  Truncate("/d/f", 100);
  Mkdir("/e");
  Rename("/d/f", "/e/f");  // out of the prefix: seen (old path)
  CreateFile("/e/g");      // not under d
  Rename("/e/g", "/d/g");  // into it: seen (new path)
  Unlink("/d/g");
  const std::vector<std::string> want = {"MKDIR d",           "CREATE d/f",        "MODIFY d/f",
                                         "RENAME d/f -> e/f", "RENAME e/g -> d/g", "UNLINK d/g"};
  EXPECT_EQ(Events(o.stream.get(), want.size()), want);
  EXPECT_GT(server_->watch_hub().file_commits(), 0u);
  o.ctx->TryCancel();
}

// The last engine commit is older than the span (KV writes made durable by
// log syncs since): the hub still commits for the watcher, at once rather
// than at the commit interval (this stream gives up after 5 s).
TEST_F(FileWatch, EventsArriveWhenTheLastCommitIsOlderThanTheSpan) {
  CreateFile("/unwatched");  // ends any span: the watch below starts a new one
  for (int i = 0; i < 3; ++i) {
    v1::PutRequest req;
    req.set_key(absl::StrCat("k", i));
    req.set_value("v");
    v1::PutResponse resp;
    ASSERT_GRPC_OK(client_->kv->Put(Ctx().get(), req, &resp));
  }
  Open o;
  o.ctx = std::make_unique<grpc::ClientContext>();
  o.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  o.stream = client_->kv->Watch(o.ctx.get());
  Create(o.stream.get(), FilesReq("late"));
  CreateFile("/late");
  EXPECT_EQ(Events(o.stream.get(), 1), std::vector<std::string>{"CREATE late"});
  o.ctx->TryCancel();
}

TEST_F(FileWatch, StartBeforeTheSpanIsCompacted) {
  uint64_t first = 0;
  {
    Open o = OpenStream();
    first = Create(o.stream.get(), FilesReq("")) + 1;
    CreateFile("/s1");
    EXPECT_EQ(Events(o.stream.get(), 1), std::vector<std::string>{"CREATE s1"});
    // The client leaves: its watcher (and the file-event registration) ends.
    o.stream->WritesDone();
    v1::WatchResponse rest;
    while (o.stream->Read(&rest)) {
    }
    (void)o.stream->Finish();
  }
  // Nobody watches: this change is not recorded and closes the span.
  CreateFile("/s2");
  Open o = OpenStream();
  ASSERT_TRUE(o.stream->Write(FilesReq("", "", first)));
  v1::WatchResponse r = Next(o.stream.get());
  if (r.created() && !r.canceled()) r = Next(o.stream.get());
  EXPECT_TRUE(r.canceled());
  EXPECT_EQ(r.cancel_code(), v1::WATCH_CANCEL_COMPACTED) << r.cancel_reason();
  EXPECT_GT(r.compact_revision(), first);
  o.ctx->TryCancel();
}

TEST_F(FileWatch, DeletedSubvolumeCancelsItsFileWatchers) {
  v1::CreateSubvolumeRequest cs;
  cs.set_name("doomed");
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(client_->subvolumes->Create(Ctx().get(), cs, &info));
  Open o = OpenStream();
  Create(o.stream.get(), FilesReq("", "doomed"));
  CreateFile("/x", "doomed");
  EXPECT_EQ(Events(o.stream.get(), 1), std::vector<std::string>{"CREATE x"});
  v1::DeleteSubvolumeRequest ds;
  ds.set_name("doomed");
  v1::DeleteSubvolumeResponse dr;
  ASSERT_GRPC_OK(client_->subvolumes->Delete(Ctx().get(), ds, &dr));
  v1::WatchResponse c = Next(o.stream.get());
  EXPECT_TRUE(c.canceled());
  EXPECT_EQ(c.cancel_code(), v1::WATCH_CANCEL_SUBVOLUME_DELETED);
  o.ctx->TryCancel();
}

TEST_F(FileWatch, FileWatcherWithKvFieldsIsRefused) {
  Open o = OpenStream();
  v1::WatchRequest req = FilesReq("a");
  req.mutable_create_request()->set_key("k");
  ASSERT_TRUE(o.stream->Write(req));
  v1::WatchResponse r = Next(o.stream.get());
  EXPECT_TRUE(r.canceled());
  EXPECT_EQ(r.cancel_code(), v1::WATCH_CANCEL_REFUSED);
  EXPECT_EQ(r.error_code(), static_cast<int32_t>(grpc::StatusCode::INVALID_ARGUMENT));
  o.ctx->TryCancel();
}

}  // namespace
}  // namespace server
}  // namespace cowkv
