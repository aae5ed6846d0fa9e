// Goal: every cowkv.v1 RPC works through the generated C++ stub, and each
// error the API documents comes back with its code (and, for Files, the
// POSIX name first in the message).
// Method: one in-process cowkvd on a temporary 64 MiB device serves the
// suite "Rpc" (tests use distinct names, so they share it); the last test of
// that suite checks that every method of every service was called at least
// once, so a new RPC without a test fails here. Configurations that change
// the server (a full device, a token, the stopping state) get their own
// server. Health, reflection and /metrics are checked over the wire too.
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "grpcpp/impl/codegen/sync_stream.h"
#include "httplib.h"
#include "server/server_test_util.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {
namespace {

using testing_util::Client;
using testing_util::Ctx;
using testing_util::TestOptions;

class Rpc : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    ServerOptions o = TestOptions("rpc");
    o.engine.conflict_window_keys = 64;  // small, so "too old" is reachable
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
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
  v1::Subvolumes::Stub& sv() { return *client_->subvolumes; }
  v1::KV::Stub& kv() { return *client_->kv; }
  v1::Files::Stub& fs() { return *client_->files; }
  v1::Admin::Stub& admin() { return *client_->admin; }

  void CreateSubvolume(const std::string& name) {
    v1::CreateSubvolumeRequest req;
    req.set_name(name);
    v1::SubvolumeInfo info;
    ASSERT_GRPC_OK(sv().Create(Ctx().get(), req, &info));
  }
  void Snapshot(const std::string& src, const std::string& name, bool ro) {
    v1::SnapshotRequest req;
    req.set_source(src);
    req.set_name(name);
    req.set_read_only(ro);
    v1::SubvolumeInfo info;
    ASSERT_GRPC_OK(sv().Snapshot(Ctx().get(), req, &info));
  }
  grpc::Status Put(const std::string& sub, const std::string& k, const std::string& v,
                   uint64_t* rev = nullptr) {
    v1::PutRequest req;
    req.set_subvolume(sub);
    req.set_key(k);
    req.set_value(v);
    v1::PutResponse resp;
    grpc::Status s = kv().Put(Ctx().get(), req, &resp);
    if (rev != nullptr) *rev = resp.revision();
    return s;
  }
  grpc::Status Get(const std::string& sub, const std::string& k, v1::GetResponse* resp) {
    v1::GetRequest req;
    req.set_subvolume(sub);
    req.set_key(k);
    return kv().Get(Ctx().get(), req, resp);
  }
  uint64_t Begin(const std::string& sub, uint64_t lease_ms = 0) {
    v1::BeginRequest req;
    req.set_subvolume(sub);
    req.set_lease_ms(lease_ms);
    v1::BeginResponse resp;
    grpc::Status s = kv().Begin(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.handle();
  }
  grpc::Status Commit(uint64_t handle, uint64_t* rev = nullptr) {
    v1::CommitRequest req;
    req.set_handle(handle);
    v1::CommitResponse resp;
    grpc::Status s = kv().Commit(Ctx().get(), req, &resp);
    if (rev != nullptr) *rev = resp.revision();
    return s;
  }
  grpc::Status WriteFile(const std::string& sub, const std::string& path, const std::string& data,
                         bool create = true, v1::WriteResponse* out = nullptr) {
    auto ctx = Ctx();
    v1::WriteResponse resp;
    auto w = fs().Write(ctx.get(), &resp);
    v1::WriteRequest first;
    first.set_subvolume(sub);
    first.set_path(path);
    first.set_create(create);
    first.set_truncate(true);
    w->Write(first);
    for (size_t off = 0; off < data.size(); off += 1 << 20) {
      v1::WriteRequest chunk;
      chunk.set_data(data.substr(off, 1 << 20));
      if (!w->Write(chunk)) break;
    }
    w->WritesDone();
    grpc::Status s = w->Finish();
    if (out != nullptr) *out = resp;
    return s;
  }
  grpc::Status ReadFile(const std::string& sub, const std::string& path, uint64_t offset,
                        uint64_t length, std::string* data, int* messages = nullptr) {
    auto ctx = Ctx();
    v1::ReadRequest req;
    req.set_subvolume(sub);
    req.set_path(path);
    req.set_offset(offset);
    req.set_length(length);
    auto r = fs().Read(ctx.get(), req);
    v1::ReadResponse chunk;
    int n = 0;
    data->clear();
    while (r->Read(&chunk)) {
      EXPECT_EQ(chunk.offset(), offset + data->size());
      *data += chunk.data();
      ++n;
    }
    if (messages != nullptr) *messages = n;
    return r->Finish();
  }
  v1::FileStat StatPath(const std::string& sub, const std::string& path) {
    v1::StatRequest req;
    req.set_subvolume(sub);
    req.set_path(path);
    v1::FileStat st;
    grpc::Status s = fs().Stat(Ctx().get(), req, &st);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return st;
  }
};

Server* Rpc::server_ = nullptr;
Client* Rpc::client_ = nullptr;

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + i / 4096) & 0xff);
  return s;
}

// ---- Subvolumes -------------------------------------------------------------

TEST_F(Rpc, SubvolumeCreateListShow) {
  v1::CreateSubvolumeRequest create;
  create.set_name("data@2026-11-22");
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(sv().Create(Ctx().get(), create, &info));
  EXPECT_GT(info.id(), 5u);
  EXPECT_EQ(info.name(), "data@2026-11-22");
  EXPECT_CODE(sv().Create(Ctx().get(), create, &info), ALREADY_EXISTS);
  for (const std::string& bad : {std::string(), std::string("a/b"), std::string(256, 'n'),
                                 std::string("a\0b", 3)}) {
    create.set_name(bad);
    EXPECT_CODE(sv().Create(Ctx().get(), create, &info), INVALID_ARGUMENT);
  }

  v1::ListSubvolumesResponse list;
  ASSERT_GRPC_OK(sv().List(Ctx().get(), v1::ListSubvolumesRequest(), &list));
  std::vector<std::string> names;
  for (const auto& s : list.subvolumes()) names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "default"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "data@2026-11-22"), names.end());

  v1::ShowSubvolumeRequest show;
  show.set_name("default");
  ASSERT_GRPC_OK(sv().Show(Ctx().get(), show, &info));
  EXPECT_EQ(info.id(), 5u);
  show.set_name("no-such-subvolume");
  EXPECT_CODE(sv().Show(Ctx().get(), show, &info), NOT_FOUND);
  show.set_name("");
  EXPECT_CODE(sv().Show(Ctx().get(), show, &info), INVALID_ARGUMENT);
}

TEST_F(Rpc, SubvolumeRenameDelete) {
  CreateSubvolume("ren-a");
  CreateSubvolume("ren-b");
  v1::RenameSubvolumeRequest ren;
  v1::RenameSubvolumeResponse ren_resp;
  ren.set_name("ren-a");
  ren.set_new_name("ren-c");
  ASSERT_GRPC_OK(sv().Rename(Ctx().get(), ren, &ren_resp));
  EXPECT_CODE(sv().Rename(Ctx().get(), ren, &ren_resp), NOT_FOUND);
  ren.set_name("ren-c");
  ren.set_new_name("ren-b");
  EXPECT_CODE(sv().Rename(Ctx().get(), ren, &ren_resp), ALREADY_EXISTS);
  ren.set_new_name("bad/name");
  EXPECT_CODE(sv().Rename(Ctx().get(), ren, &ren_resp), INVALID_ARGUMENT);
  // "default" keeps its name: requests without a subvolume name mean it.
  ren.set_name("default");
  ren.set_new_name("old-default");
  EXPECT_CODE(sv().Rename(Ctx().get(), ren, &ren_resp), FAILED_PRECONDITION);
  ASSERT_GRPC_OK(Put("", "still-default", "1"));

  v1::DeleteSubvolumeRequest del;
  v1::DeleteSubvolumeResponse del_resp;
  del.set_name("ren-c");
  ASSERT_GRPC_OK(sv().Delete(Ctx().get(), del, &del_resp));
  EXPECT_CODE(sv().Delete(Ctx().get(), del, &del_resp), NOT_FOUND);
  del.set_name("default");
  EXPECT_CODE(sv().Delete(Ctx().get(), del, &del_resp), FAILED_PRECONDITION);
  del.set_name("");
  EXPECT_CODE(sv().Delete(Ctx().get(), del, &del_resp), INVALID_ARGUMENT);
}

TEST_F(Rpc, SubvolumeSnapshot) {
  CreateSubvolume("snap-src");
  ASSERT_GRPC_OK(Put("snap-src", "k", "before"));
  v1::SnapshotRequest req;
  req.set_source("snap-src");
  req.set_name("snap-ro");
  req.set_read_only(true);
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(sv().Snapshot(Ctx().get(), req, &info));
  EXPECT_TRUE(info.read_only());
  EXPECT_GT(info.parent_id(), 5u);
  EXPECT_CODE(sv().Snapshot(Ctx().get(), req, &info), ALREADY_EXISTS);
  req.set_source("no-such-source");
  req.set_name("snap-x");
  EXPECT_CODE(sv().Snapshot(Ctx().get(), req, &info), NOT_FOUND);
  req.set_source("snap-src");
  req.set_name("");
  EXPECT_CODE(sv().Snapshot(Ctx().get(), req, &info), INVALID_ARGUMENT);

  ASSERT_GRPC_OK(Put("snap-src", "k", "after"));
  v1::GetResponse got;
  ASSERT_GRPC_OK(Get("snap-ro", "k", &got));
  EXPECT_EQ(got.kv().value(), "before");
  EXPECT_CODE(Put("snap-ro", "k", "x"), FAILED_PRECONDITION);
}

// Goal: Send streams a snapshot, Receive makes an equal read-only copy
// (full, then incremental against the received parent), Digest agrees,
// and the refusals keep their codes and reasons. Method: one server
// receives its own streams under other names.
TEST_F(Rpc, SubvolumeSendReceiveDigest) {
  CreateSubvolume("send-src");
  ASSERT_GRPC_OK(Put("send-src", "k", std::string(20000, 'v')));
  auto snapshot = [&](const std::string& name) {
    v1::SnapshotRequest req;
    req.set_source("send-src");
    req.set_name(name);
    req.set_read_only(true);
    v1::SubvolumeInfo info;
    return sv().Snapshot(Ctx().get(), req, &info);
  };
  auto send = [&](const std::string& snap, const std::string& parent, std::string* out) {
    v1::SendRequest req;
    req.set_snapshot(snap);
    req.set_parent(parent);
    auto ctx = Ctx();
    auto reader = sv().Send(ctx.get(), req);
    v1::SendResponse m;
    bool stats = false;
    while (reader->Read(&m)) {
      out->append(m.chunk());
      stats = stats || m.has_stats();
    }
    grpc::Status st = reader->Finish();
    if (st.ok()) EXPECT_TRUE(stats);
    return st;
  };
  auto receive = [&](const std::string& name, const std::string& stream,
                     v1::ReceiveResponse* resp) {
    auto ctx = Ctx();
    auto writer = sv().Receive(ctx.get(), resp);
    v1::ReceiveRequest m;
    m.set_name(name);
    for (size_t pos = 0; pos == 0 || pos < stream.size(); pos += 1000) {
      m.set_chunk(stream.substr(pos, 1000));
      if (!writer->Write(m)) break;
      m.Clear();
    }
    writer->WritesDone();
    return writer->Finish();
  };
  auto digest = [&](const std::string& name) {
    v1::DigestSubvolumeRequest req;
    req.set_name(name);
    v1::DigestSubvolumeResponse resp;
    grpc::Status st = sv().Digest(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.sha256();
  };
  ASSERT_GRPC_OK(snapshot("send-1"));
  std::string full, inc;
  ASSERT_GRPC_OK(send("send-1", "", &full));
  v1::ReceiveResponse r;
  ASSERT_GRPC_OK(receive("recv-1", full, &r));
  EXPECT_FALSE(r.incremental());
  EXPECT_EQ(digest("recv-1"), digest("send-1"));
  ASSERT_GRPC_OK(Put("send-src", "k2", "v2"));
  ASSERT_GRPC_OK(snapshot("send-2"));
  ASSERT_GRPC_OK(send("send-2", "send-1", &inc));
  ASSERT_GRPC_OK(receive("recv-2", inc, &r));
  EXPECT_TRUE(r.incremental());
  EXPECT_EQ(digest("recv-2"), digest("send-2"));
  v1::ShowSubvolumeRequest show;
  show.set_name("recv-2");
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(sv().Show(Ctx().get(), show, &info));
  EXPECT_TRUE(info.read_only());
  EXPECT_EQ(info.received_uuid().size(), 32u);
  EXPECT_GT(info.received_generation(), 0u);
  // Refusals.
  std::string ignored;
  EXPECT_CODE(send("send-src", "", &ignored), FAILED_PRECONDITION);
  EXPECT_CODE(send("no-such", "", &ignored), NOT_FOUND);
  EXPECT_CODE(receive("recv-2", inc, &r), ALREADY_EXISTS);
  std::string bad = inc;
  bad[bad.size() / 2] ^= 0x40;
  EXPECT_CODE(receive("recv-bad", bad, &r), DATA_LOSS);
  EXPECT_CODE(receive("recv-short", inc.substr(0, inc.size() - 5), &r), DATA_LOSS);
  show.set_name("recv-bad");
  EXPECT_CODE(sv().Show(Ctx().get(), show, &info), NOT_FOUND);

  // Resumable: a receive cut in the middle is kept and listed with its
  // token; Send with the token makes the rest; that completes it.
  auto receive_cut = [&](const std::string& name, const std::string& stream, size_t cut) {
    auto ctx = Ctx();
    v1::ReceiveResponse resp;
    auto writer = sv().Receive(ctx.get(), &resp);
    v1::ReceiveRequest m;
    m.set_name(name);
    m.set_resumable(true);
    m.set_chunk(stream.substr(0, cut));
    writer->Write(m);
    writer->WritesDone();
    return writer->Finish();
  };
  auto partials = [&]() {
    v1::PartialReceivesResponse resp;
    grpc::Status st = sv().PartialReceives(Ctx().get(), v1::PartialReceivesRequest(), &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  };
  EXPECT_CODE(receive_cut("recv-resumed", full, full.size() / 2), DATA_LOSS);
  v1::PartialReceivesResponse listed = partials();
  ASSERT_EQ(listed.partial_size(), 1);
  EXPECT_EQ(listed.partial(0).name(), "recv-resumed");
  EXPECT_FALSE(listed.partial(0).in_use());
  EXPECT_EQ(ErrorInfoOf(receive("recv-resumed", full, &r)).reason, "PARTIAL_RECEIVE");
  auto send_rest = [&](const std::string& token, std::string* out) {
    v1::SendRequest req;
    req.set_resume_token(token);
    auto ctx = Ctx();
    auto reader = sv().Send(ctx.get(), req);
    v1::SendResponse m;
    while (reader->Read(&m)) out->append(m.chunk());
    return reader->Finish();
  };
  std::string rest;
  ASSERT_GRPC_OK(send_rest(listed.partial(0).token(), &rest));
  std::string tampered = listed.partial(0).token();
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  std::string ignored2;
  grpc::Status bad_token = send_rest(tampered, &ignored2);
  EXPECT_EQ(bad_token.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ErrorInfoOf(bad_token).reason, "RESUME_TOKEN");
  ASSERT_GRPC_OK(receive("", rest, &r));
  EXPECT_EQ(r.name(), "recv-resumed");
  EXPECT_EQ(digest("recv-resumed"), digest("send-1"));
  EXPECT_EQ(partials().partial_size(), 0);
  // Abort drops one; an unknown name is NOT_FOUND.
  EXPECT_CODE(receive_cut("recv-dropped", full, full.size() / 2), DATA_LOSS);
  ASSERT_EQ(partials().partial_size(), 1);
  v1::AbortReceiveRequest abort;
  abort.set_name("recv-dropped-nope");
  v1::AbortReceiveResponse aborted;
  EXPECT_CODE(sv().AbortReceive(Ctx().get(), abort, &aborted), NOT_FOUND);
  abort.set_name("recv-dropped");
  ASSERT_GRPC_OK(sv().AbortReceive(Ctx().get(), abort, &aborted));
  EXPECT_EQ(partials().partial_size(), 0);
}

// ---- KV: one-shot calls -------------------------------------------------------

TEST_F(Rpc, KvPutGetDelete) {
  CreateSubvolume("kv1");
  uint64_t r1 = 0, r2 = 0;
  ASSERT_GRPC_OK(Put("kv1", "alpha", "1", &r1));
  ASSERT_GRPC_OK(Put("kv1", "alpha", "2", &r2));
  EXPECT_GT(r2, r1);
  v1::GetResponse got;
  ASSERT_GRPC_OK(Get("kv1", "alpha", &got));
  EXPECT_EQ(got.kv().value(), "2");
  EXPECT_EQ(got.kv().create_revision(), r1);
  EXPECT_EQ(got.kv().mod_revision(), r2);
  EXPECT_EQ(got.kv().version(), 2u);
  EXPECT_GE(got.revision(), r2);

  EXPECT_CODE(Get("kv1", "missing", &got), NOT_FOUND);
  EXPECT_CODE(Get("kv1", "", &got), INVALID_ARGUMENT);
  EXPECT_CODE(Get("kv1", std::string(1025, 'k'), &got), INVALID_ARGUMENT);
  EXPECT_CODE(Get("no-such-sv", "alpha", &got), NOT_FOUND);
  EXPECT_CODE(Put("kv1", "", "v"), INVALID_ARGUMENT);
  EXPECT_CODE(Put("kv1", "big", std::string((16u << 20) + 1, 'v')), INVALID_ARGUMENT);
  // Over the message limit: gRPC itself refuses it.
  EXPECT_CODE(Put("kv1", "huge", std::string(21u << 20, 'v')), RESOURCE_EXHAUSTED);
  ASSERT_GRPC_OK(Put("kv1", std::string(1024, 'k'), std::string(100000, 'v')));  // extent value
  ASSERT_GRPC_OK(Get("kv1", std::string(1024, 'k'), &got));
  EXPECT_EQ(got.kv().value().size(), 100000u);

  v1::PutRequest bad_durability;
  bad_durability.set_key("k");
  bad_durability.set_durability(static_cast<v1::Durability>(7));
  v1::PutResponse put_resp;
  EXPECT_CODE(kv().Put(Ctx().get(), bad_durability, &put_resp), INVALID_ARGUMENT);

  v1::DeleteRequest del;
  v1::DeleteResponse del_resp;
  del.set_subvolume("kv1");
  del.set_key("alpha");
  del.set_durability(v1::DURABILITY_ASYNC);
  ASSERT_GRPC_OK(kv().Delete(Ctx().get(), del, &del_resp));
  EXPECT_GT(del_resp.revision(), r2);
  EXPECT_CODE(kv().Delete(Ctx().get(), del, &del_resp), NOT_FOUND);
  del.set_key("");
  EXPECT_CODE(kv().Delete(Ctx().get(), del, &del_resp), INVALID_ARGUMENT);
  Snapshot("kv1", "kv1-ro", true);
  del.set_subvolume("kv1-ro");
  del.set_key(std::string(1024, 'k'));
  EXPECT_CODE(kv().Delete(Ctx().get(), del, &del_resp), FAILED_PRECONDITION);
}

// Goal: Get at a past revision and Compact through the stub (the history's
// own cases are in kv_history_test.cc).
TEST_F(Rpc, KvGetAtRevisionAndCompact) {
  CreateSubvolume("kvh");
  uint64_t r1 = 0, r2 = 0;
  ASSERT_GRPC_OK(Put("kvh", "k", "1", &r1));
  ASSERT_GRPC_OK(Put("kvh", "k", "2", &r2));
  v1::GetRequest get;
  get.set_subvolume("kvh");
  get.set_key("k");
  get.set_revision(r1);
  v1::GetResponse got;
  ASSERT_GRPC_OK(kv().Get(Ctx().get(), get, &got));
  EXPECT_EQ(got.kv().value(), "1");
  v1::CompactRequest c;
  c.set_subvolume("kvh");
  c.set_revision(r2);
  v1::CompactResponse cr;
  ASSERT_GRPC_OK(kv().Compact(Ctx().get(), c, &cr));
  EXPECT_EQ(cr.compact_revision(), r2);
  EXPECT_CODE(kv().Get(Ctx().get(), get, &got), OUT_OF_RANGE);
  c.set_subvolume("no-such-sv");
  EXPECT_CODE(kv().Compact(Ctx().get(), c, &cr), NOT_FOUND);
}

TEST_F(Rpc, KvRangePaging) {
  CreateSubvolume("kv2");
  for (int i = 0; i < 25; ++i) ASSERT_GRPC_OK(Put("kv2", absl::StrCat("p/", 100 + i), "v"));
  ASSERT_GRPC_OK(Put("kv2", "q", "other"));
  for (bool reverse : {false, true}) {
    v1::RangeRequest req;
    req.set_subvolume("kv2");
    req.set_prefix("p/");
    req.set_limit(10);
    req.set_reverse(reverse);
    std::vector<std::string> keys;
    int pages = 0;
    for (;;) {
      v1::RangeResponse resp;
      ASSERT_GRPC_OK(kv().Range(Ctx().get(), req, &resp));
      ++pages;
      for (const auto& kv : resp.kvs()) keys.push_back(kv.key());
      if (!resp.more()) {
        EXPECT_TRUE(resp.next_page_token().empty());
        break;
      }
      req.set_page_token(resp.next_page_token());
    }
    EXPECT_EQ(pages, 3);
    ASSERT_EQ(keys.size(), 25u);
    EXPECT_EQ(keys.front(), reverse ? "p/124" : "p/100");
    EXPECT_EQ(keys.back(), reverse ? "p/100" : "p/124");
  }
  v1::RangeRequest req;
  req.set_subvolume("kv2");
  req.set_start("p/110");
  req.set_end("p/115");
  req.set_keys_only(true);
  v1::RangeResponse resp;
  ASSERT_GRPC_OK(kv().Range(Ctx().get(), req, &resp));
  ASSERT_EQ(resp.kvs_size(), 5);
  EXPECT_TRUE(resp.kvs(0).value().empty());
  req.set_count_only(true);
  ASSERT_GRPC_OK(kv().Range(Ctx().get(), req, &resp));
  EXPECT_EQ(resp.count(), 5u);

  // Errors: prefix with bounds, a token of another request, a bad bound.
  v1::RangeRequest bad;
  bad.set_subvolume("kv2");
  bad.set_prefix("p/");
  bad.set_start("a");
  EXPECT_CODE(kv().Range(Ctx().get(), bad, &resp), INVALID_ARGUMENT);
  bad.clear_start();
  bad.set_page_token("not a token");
  EXPECT_CODE(kv().Range(Ctx().get(), bad, &resp), INVALID_ARGUMENT);
  bad.clear_page_token();
  bad.clear_prefix();
  bad.set_end(std::string(1026, 'e'));
  EXPECT_CODE(kv().Range(Ctx().get(), bad, &resp), INVALID_ARGUMENT);
  bad.clear_end();
  bad.set_subvolume("no-such-sv");
  EXPECT_CODE(kv().Range(Ctx().get(), bad, &resp), NOT_FOUND);
  // A deadline that has passed is honoured (DEADLINE_EXCEEDED, no work).
  grpc::ClientContext past;
  past.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
  EXPECT_CODE(kv().Range(&past, req, &resp), DEADLINE_EXCEEDED);
}

TEST_F(Rpc, KvRangeAtSnapshot) {
  CreateSubvolume("kv3");
  for (int i = 0; i < 5; ++i) ASSERT_GRPC_OK(Put("kv3", absl::StrCat("k", i), "old"));
  Snapshot("kv3", "kv3-ro", true);
  Snapshot("kv3", "kv3-rw", false);
  ASSERT_GRPC_OK(Put("kv3", "k0", "new"));
  ASSERT_GRPC_OK(Put("kv3", "k9", "new"));
  v1::RangeRequest req;
  req.set_subvolume("kv3");
  req.set_snapshot("kv3-ro");
  v1::RangeResponse resp;
  ASSERT_GRPC_OK(kv().Range(Ctx().get(), req, &resp));
  ASSERT_EQ(resp.kvs_size(), 5);
  EXPECT_EQ(resp.kvs(0).value(), "old");
  req.set_snapshot("kv3-rw");
  EXPECT_CODE(kv().Range(Ctx().get(), req, &resp), FAILED_PRECONDITION);
  CreateSubvolume("kv3-other");
  req.set_snapshot("kv3-ro");
  req.set_subvolume("kv3-other");
  EXPECT_CODE(kv().Range(Ctx().get(), req, &resp), INVALID_ARGUMENT);
  req.set_snapshot("kv3-none");
  EXPECT_CODE(kv().Range(Ctx().get(), req, &resp), NOT_FOUND);
}

TEST_F(Rpc, KvDeleteRange) {
  CreateSubvolume("kv4");
  for (int i = 0; i < 10; ++i) ASSERT_GRPC_OK(Put("kv4", absl::StrCat("d/", i), "v"));
  ASSERT_GRPC_OK(Put("kv4", "e", "v"));
  v1::DeleteRangeRequest req;
  req.set_subvolume("kv4");
  req.set_prefix("d/");
  v1::DeleteRangeResponse resp;
  ASSERT_GRPC_OK(kv().DeleteRange(Ctx().get(), req, &resp));
  EXPECT_EQ(resp.deleted(), 10u);
  v1::GetResponse got;
  ASSERT_GRPC_OK(Get("kv4", "e", &got));
  v1::DeleteRangeRequest empty;
  empty.set_subvolume("kv4");
  EXPECT_CODE(kv().DeleteRange(Ctx().get(), empty, &resp), INVALID_ARGUMENT);
  req.set_start("a");
  EXPECT_CODE(kv().DeleteRange(Ctx().get(), req, &resp), INVALID_ARGUMENT);
  Snapshot("kv4", "kv4-ro", true);
  v1::DeleteRangeRequest ro;
  ro.set_subvolume("kv4-ro");
  ro.set_start(std::string(1, '\0'));
  EXPECT_CODE(kv().DeleteRange(Ctx().get(), ro, &resp), FAILED_PRECONDITION);
}

TEST_F(Rpc, KvTxn) {
  CreateSubvolume("kv5");
  ASSERT_GRPC_OK(Put("kv5", "lock", "free"));
  v1::TxnRequest req;
  req.set_subvolume("kv5");
  v1::Compare* c = req.add_compare();
  c->set_key("lock");
  c->set_target(v1::Compare::TARGET_VALUE);
  c->set_value("free");
  req.add_success()->mutable_put()->set_key("lock");
  req.mutable_success(0)->mutable_put()->set_value("taken");
  req.add_success()->mutable_range()->set_prefix("lock");
  req.add_failure()->mutable_range()->set_prefix("lock");
  req.set_durability(v1::DURABILITY_DURABLE);
  v1::TxnResponse resp;
  ASSERT_GRPC_OK(kv().Txn(Ctx().get(), req, &resp));
  EXPECT_TRUE(resp.succeeded());
  ASSERT_EQ(resp.responses_size(), 2);
  EXPECT_TRUE(resp.responses(0).has_put());
  EXPECT_EQ(resp.responses(1).range().kvs(0).value(), "free");  // reads the state before
  // Now the compare fails: not an error, the failure branch runs.
  ASSERT_GRPC_OK(kv().Txn(Ctx().get(), req, &resp));
  EXPECT_FALSE(resp.succeeded());
  ASSERT_EQ(resp.responses_size(), 1);
  EXPECT_EQ(resp.responses(0).range().kvs(0).value(), "taken");

  v1::TxnRequest bad = req;
  bad.add_success();  // an op with nothing set
  EXPECT_CODE(kv().Txn(Ctx().get(), bad, &resp), INVALID_ARGUMENT);
  bad = req;
  bad.mutable_compare(0)->set_target(v1::Compare::TARGET_EXISTS);
  bad.mutable_compare(0)->set_op(v1::Compare::OP_LESS);
  EXPECT_CODE(kv().Txn(Ctx().get(), bad, &resp), INVALID_ARGUMENT);
  bad = req;
  bad.mutable_compare(0)->set_key("");
  EXPECT_CODE(kv().Txn(Ctx().get(), bad, &resp), INVALID_ARGUMENT);
  Snapshot("kv5", "kv5-ro", true);
  bad = req;
  bad.set_subvolume("kv5-ro");
  bad.mutable_compare(0)->set_value("taken");
  EXPECT_CODE(kv().Txn(Ctx().get(), bad, &resp), FAILED_PRECONDITION);
}

// ---- KV: interactive transactions ---------------------------------------------

TEST_F(Rpc, KvInteractiveCommit) {
  CreateSubvolume("tx1");
  ASSERT_GRPC_OK(Put("tx1", "a", "1"));
  const uint64_t h = Begin("tx1");
  ASSERT_NE(h, 0u);
  v1::TxnPutRequest put;
  put.set_handle(h);
  put.set_key("b");
  put.set_value("2");
  v1::TxnPutResponse put_resp;
  ASSERT_GRPC_OK(kv().TxnPut(Ctx().get(), put, &put_resp));
  v1::TxnGetRequest get;
  get.set_handle(h);
  get.set_key("b");
  v1::GetResponse got;
  ASSERT_GRPC_OK(kv().TxnGet(Ctx().get(), get, &got));  // sees its own write
  EXPECT_EQ(got.kv().value(), "2");
  get.set_key("zz");
  EXPECT_CODE(kv().TxnGet(Ctx().get(), get, &got), NOT_FOUND);
  v1::TxnRangeRequest range;
  range.set_handle(h);
  v1::RangeResponse range_resp;
  ASSERT_GRPC_OK(kv().TxnRange(Ctx().get(), range, &range_resp));
  EXPECT_EQ(range_resp.kvs_size(), 2);
  range.mutable_range()->set_subvolume("tx1");
  EXPECT_CODE(kv().TxnRange(Ctx().get(), range, &range_resp), INVALID_ARGUMENT);
  v1::TxnDeleteRequest del;
  v1::TxnDeleteResponse del_resp;
  del.set_handle(h);
  del.set_key("a");
  ASSERT_GRPC_OK(kv().TxnDelete(Ctx().get(), del, &del_resp));
  del.set_end("x");
  EXPECT_CODE(kv().TxnDelete(Ctx().get(), del, &del_resp), INVALID_ARGUMENT);
  del.set_range(true);
  del.set_key("c");
  ASSERT_GRPC_OK(kv().TxnDelete(Ctx().get(), del, &del_resp));
  put.set_key("");
  EXPECT_CODE(kv().TxnPut(Ctx().get(), put, &put_resp), INVALID_ARGUMENT);
  uint64_t rev = 0;
  ASSERT_GRPC_OK(Commit(h, &rev));
  EXPECT_GT(rev, 0u);
  EXPECT_CODE(Get("tx1", "a", &got), NOT_FOUND);
  ASSERT_GRPC_OK(Get("tx1", "b", &got));
  EXPECT_EQ(got.kv().mod_revision(), rev);
  // The handle is finished.
  EXPECT_CODE(Commit(h), NOT_FOUND);
  put.set_key("b");
  EXPECT_CODE(kv().TxnPut(Ctx().get(), put, &put_resp), NOT_FOUND);
}

TEST_F(Rpc, KvInteractiveConflictAbortExpiry) {
  CreateSubvolume("tx2");
  ASSERT_GRPC_OK(Put("tx2", "x", "0"));
  const uint64_t h1 = Begin("tx2");
  const uint64_t h2 = Begin("tx2");
  for (uint64_t h : {h1, h2}) {
    v1::TxnGetRequest get;
    get.set_handle(h);
    get.set_key("x");
    v1::GetResponse got;
    ASSERT_GRPC_OK(kv().TxnGet(Ctx().get(), get, &got));
    v1::TxnPutRequest put;
    put.set_handle(h);
    put.set_key("x");
    put.set_value(absl::StrCat(h));
    v1::TxnPutResponse put_resp;
    ASSERT_GRPC_OK(kv().TxnPut(Ctx().get(), put, &put_resp));
  }
  ASSERT_GRPC_OK(Commit(h1));
  const grpc::Status lost = Commit(h2);
  EXPECT_CODE(lost, ABORTED);  // x changed after h2 read it: retry
  EXPECT_EQ(ErrorInfoOf(lost).reason, "CONFLICT") << lost.error_message();

  // Abort: once fine, then the handle is gone.
  const uint64_t h3 = Begin("tx2");
  v1::AbortRequest abort;
  abort.set_handle(h3);
  v1::AbortResponse abort_resp;
  ASSERT_GRPC_OK(kv().Abort(Ctx().get(), abort, &abort_resp));
  EXPECT_CODE(kv().Abort(Ctx().get(), abort, &abort_resp), NOT_FOUND);

  // A lease that runs out: later calls are ABORTED ("expired").
  const uint64_t h4 = Begin("tx2", /*lease_ms=*/100);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  v1::TxnGetRequest get;
  get.set_handle(h4);
  get.set_key("x");
  v1::GetResponse got;
  const grpc::Status expired = kv().TxnGet(Ctx().get(), get, &got);
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::ABORTED) << expired.error_message();
  EXPECT_NE(expired.error_message().find("expired"), std::string::npos);

  v1::BeginRequest begin;
  v1::BeginResponse begin_resp;
  begin.set_lease_ms(600001);
  EXPECT_CODE(kv().Begin(Ctx().get(), begin, &begin_resp), INVALID_ARGUMENT);
  begin.set_lease_ms(0);
  begin.set_subvolume("no-such-sv");
  EXPECT_CODE(kv().Begin(Ctx().get(), begin, &begin_resp), NOT_FOUND);
}

TEST_F(Rpc, KvInteractiveTooOldAndLimits) {
  CreateSubvolume("tx3");
  ASSERT_GRPC_OK(Put("tx3", "x", "0"));
  const uint64_t h = Begin("tx3");
  v1::TxnGetRequest get;
  get.set_handle(h);
  get.set_key("x");
  v1::GetResponse got;
  ASSERT_GRPC_OK(kv().TxnGet(Ctx().get(), get, &got));
  v1::TxnPutRequest put;
  put.set_handle(h);
  put.set_key("y");
  put.set_value("1");
  v1::TxnPutResponse put_resp;
  ASSERT_GRPC_OK(kv().TxnPut(Ctx().get(), put, &put_resp));
  // Push the transaction out of the 64-key conflict window.
  for (int i = 0; i < 200; ++i) ASSERT_GRPC_OK(Put("tx3", absl::StrCat("fill", i), "v"));
  EXPECT_CODE(Commit(h), OUT_OF_RANGE);

  // Open transactions per client connection: 4 in this suite's server.
  std::vector<uint64_t> open;
  for (int i = 0; i < 4; ++i) open.push_back(Begin("tx3"));
  v1::BeginRequest begin;
  begin.set_subvolume("tx3");
  v1::BeginResponse begin_resp;
  EXPECT_CODE(kv().Begin(Ctx().get(), begin, &begin_resp), RESOURCE_EXHAUSTED);
  for (uint64_t o : open) {
    v1::AbortRequest abort;
    abort.set_handle(o);
    v1::AbortResponse abort_resp;
    ASSERT_GRPC_OK(kv().Abort(Ctx().get(), abort, &abort_resp));
  }
  // Writes of a transaction on a read-only snapshot are refused.
  Snapshot("tx3", "tx3-ro", true);
  const uint64_t ro = Begin("tx3-ro");
  put.set_handle(ro);
  const grpc::Status ro_put = kv().TxnPut(Ctx().get(), put, &put_resp);
  const grpc::Status ro_commit = ro_put.ok() ? Commit(ro) : ro_put;
  EXPECT_EQ(ro_commit.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << ro_commit.error_message();
  EXPECT_EQ(ErrorInfoOf(ro_commit).reason, "READ_ONLY_SNAPSHOT") << ro_commit.error_message();
  if (!ro_put.ok()) {
    v1::AbortRequest abort;
    abort.set_handle(ro);
    v1::AbortResponse abort_resp;
    kv().Abort(Ctx().get(), abort, &abort_resp);
  }
}

// ---- Files ----------------------------------------------------------------------

TEST_F(Rpc, FilesCreateStatMkdirReadDir) {
  CreateSubvolume("fs1");
  v1::MkdirRequest mk;
  mk.set_subvolume("fs1");
  mk.set_path("/dir");
  v1::FileStat st;
  ASSERT_GRPC_OK(fs().Mkdir(Ctx().get(), mk, &st));
  EXPECT_EQ(st.kind(), v1::FILE_KIND_DIRECTORY);
  EXPECT_EQ(st.mode(), 0755u);
  EXPECT_POSIX(fs().Mkdir(Ctx().get(), mk, &st), ALREADY_EXISTS, "EEXIST");
  mk.set_path("/missing/sub");
  EXPECT_POSIX(fs().Mkdir(Ctx().get(), mk, &st), NOT_FOUND, "ENOENT");
  mk.set_path("/dir2");
  mk.set_mode(010000);
  EXPECT_POSIX(fs().Mkdir(Ctx().get(), mk, &st), INVALID_ARGUMENT, "EINVAL");

  v1::CreateFileRequest cr;
  cr.set_subvolume("fs1");
  for (int i = 0; i < 5; ++i) {
    cr.set_path(absl::StrCat("/dir/f", i));
    ASSERT_GRPC_OK(fs().Create(Ctx().get(), cr, &st));
  }
  EXPECT_EQ(st.kind(), v1::FILE_KIND_REGULAR);
  EXPECT_POSIX(fs().Create(Ctx().get(), cr, &st), ALREADY_EXISTS, "EEXIST");

  v1::StatRequest stat;
  stat.set_subvolume("fs1");
  stat.set_path("/dir/f4");
  v1::FileStat by_path;
  ASSERT_GRPC_OK(fs().Stat(Ctx().get(), stat, &by_path));
  EXPECT_EQ(by_path.ino(), st.ino());
  stat.set_path("");
  stat.set_ino(st.ino());
  ASSERT_GRPC_OK(fs().Stat(Ctx().get(), stat, &by_path));
  EXPECT_EQ(by_path.kind(), v1::FILE_KIND_REGULAR);
  stat.set_ino(0);
  stat.set_path("/nope");
  EXPECT_POSIX(fs().Stat(Ctx().get(), stat, &by_path), NOT_FOUND, "ENOENT");
  stat.set_path(std::string(5000, 'p'));
  EXPECT_POSIX(fs().Stat(Ctx().get(), stat, &by_path), INVALID_ARGUMENT, "ENAMETOOLONG");
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "/d";
  stat.set_path(deep);
  EXPECT_POSIX(fs().Stat(Ctx().get(), stat, &by_path), INVALID_ARGUMENT, "EINVAL");

  v1::ReadDirRequest rd;
  rd.set_subvolume("fs1");
  rd.set_path("/dir");
  rd.set_limit(2);
  std::vector<std::string> names;
  for (;;) {
    v1::ReadDirResponse page;
    ASSERT_GRPC_OK(fs().ReadDir(Ctx().get(), rd, &page));
    for (const auto& e : page.entries()) names.push_back(e.name());
    if (!page.more()) break;
    rd.set_cookie(page.next_cookie());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"f0", "f1", "f2", "f3", "f4"}));
  rd.set_cookie(0);
  rd.set_path("/dir/f0");
  v1::ReadDirResponse page;
  EXPECT_POSIX(fs().ReadDir(Ctx().get(), rd, &page), FAILED_PRECONDITION, "ENOTDIR");
  rd.set_path("/none");
  EXPECT_POSIX(fs().ReadDir(Ctx().get(), rd, &page), NOT_FOUND, "ENOENT");
}

TEST_F(Rpc, FilesWriteReadTruncate) {
  CreateSubvolume("fs2");
  const std::string data = Pattern(3u << 20 | 12345, 1);
  v1::WriteResponse wr;
  ASSERT_GRPC_OK(WriteFile("fs2", "/big", data, true, &wr));
  EXPECT_EQ(wr.bytes_written(), data.size());
  EXPECT_EQ(wr.stat().size(), data.size());
  std::string back;
  int messages = 0;
  ASSERT_GRPC_OK(ReadFile("fs2", "/big", 0, 0, &back, &messages));
  EXPECT_EQ(back, data);
  EXPECT_EQ(messages, 4);  // 1 MiB chunks
  ASSERT_GRPC_OK(ReadFile("fs2", "/big", 1000, 5000, &back));
  EXPECT_EQ(back, data.substr(1000, 5000));
  ASSERT_GRPC_OK(ReadFile("fs2", "/big", data.size() + 10, 0, &back, &messages));
  EXPECT_TRUE(back.empty());
  EXPECT_EQ(messages, 1);
  EXPECT_POSIX(ReadFile("fs2", "/none", 0, 0, &back), NOT_FOUND, "ENOENT");
  EXPECT_POSIX(ReadFile("fs2", "/", 0, 0, &back), FAILED_PRECONDITION, "EISDIR");
  EXPECT_POSIX(ReadFile("fs2", "/big", UINT64_MAX - 5, 100, &back), INVALID_ARGUMENT, "EINVAL");
  EXPECT_POSIX(WriteFile("fs2", "/absent", "x", /*create=*/false), NOT_FOUND, "ENOENT");
  EXPECT_POSIX(WriteFile("fs2", "/", "x", false), FAILED_PRECONDITION, "EISDIR");

  {  // Only the first message may name the file.
    auto ctx = Ctx();
    v1::WriteResponse resp;
    auto w = fs().Write(ctx.get(), &resp);
    v1::WriteRequest m;
    m.set_subvolume("fs2");
    m.set_path("/big");
    w->Write(m);
    w->Write(m);
    w->WritesDone();
    EXPECT_POSIX(w->Finish(), INVALID_ARGUMENT, "EINVAL");
  }
  {  // Cancelling a read stream stops it.
    auto ctx = Ctx();
    v1::ReadRequest req;
    req.set_subvolume("fs2");
    req.set_path("/big");
    auto r = fs().Read(ctx.get(), req);
    v1::ReadResponse chunk;
    ASSERT_TRUE(r->Read(&chunk));
    ctx->TryCancel();
    while (r->Read(&chunk)) {
    }
    EXPECT_CODE(r->Finish(), CANCELLED);
  }

  v1::TruncateRequest tr;
  tr.set_subvolume("fs2");
  tr.set_path("/big");
  tr.set_size(10);
  v1::FileStat st;
  ASSERT_GRPC_OK(fs().Truncate(Ctx().get(), tr, &st));
  EXPECT_EQ(st.size(), 10u);
  tr.set_size((1ull << 50) + 1);
  EXPECT_POSIX(fs().Truncate(Ctx().get(), tr, &st), INVALID_ARGUMENT, "EFBIG");
  tr.set_path("/none");
  // A size no file may have is wrong whatever the path names: checked first.
  EXPECT_POSIX(fs().Truncate(Ctx().get(), tr, &st), INVALID_ARGUMENT, "EFBIG");
  tr.set_size(10);
  EXPECT_POSIX(fs().Truncate(Ctx().get(), tr, &st), NOT_FOUND, "ENOENT");
}

TEST_F(Rpc, FilesRenameLinkSymlinkUnlinkRmdir) {
  CreateSubvolume("fs3");
  ASSERT_GRPC_OK(WriteFile("fs3", "/a", "AAA"));
  ASSERT_GRPC_OK(WriteFile("fs3", "/b", "BBB"));
  v1::RenameRequest rn;
  v1::RenameResponse rn_resp;
  rn.set_subvolume("fs3");
  rn.set_from("/a");
  rn.set_to("/b");
  rn.set_flags(v1::RENAME_FLAG_NOREPLACE);
  EXPECT_POSIX(fs().Rename(Ctx().get(), rn, &rn_resp), ALREADY_EXISTS, "EEXIST");
  rn.set_flags(v1::RENAME_FLAG_EXCHANGE);
  ASSERT_GRPC_OK(fs().Rename(Ctx().get(), rn, &rn_resp));
  std::string back;
  ASSERT_GRPC_OK(ReadFile("fs3", "/a", 0, 0, &back));
  EXPECT_EQ(back, "BBB");
  rn.set_flags(3);
  EXPECT_POSIX(fs().Rename(Ctx().get(), rn, &rn_resp), INVALID_ARGUMENT, "EINVAL");
  rn.set_flags(0);
  rn.set_to("/c");
  ASSERT_GRPC_OK(fs().Rename(Ctx().get(), rn, &rn_resp));
  EXPECT_POSIX(fs().Rename(Ctx().get(), rn, &rn_resp), NOT_FOUND, "ENOENT");

  v1::MkdirRequest mk;
  mk.set_subvolume("fs3");
  mk.set_path("/d1");
  v1::FileStat st;
  ASSERT_GRPC_OK(fs().Mkdir(Ctx().get(), mk, &st));
  mk.set_path("/d2");
  ASSERT_GRPC_OK(fs().Mkdir(Ctx().get(), mk, &st));
  ASSERT_GRPC_OK(WriteFile("fs3", "/d2/inside", "x"));
  rn.set_from("/d1");
  rn.set_to("/d2");
  EXPECT_POSIX(fs().Rename(Ctx().get(), rn, &rn_resp), FAILED_PRECONDITION, "ENOTEMPTY");

  v1::LinkRequest ln;
  ln.set_subvolume("fs3");
  ln.set_existing("/c");
  ln.set_new_path("/c2");
  ASSERT_GRPC_OK(fs().Link(Ctx().get(), ln, &st));
  EXPECT_EQ(st.nlink(), 2u);
  EXPECT_POSIX(fs().Link(Ctx().get(), ln, &st), ALREADY_EXISTS, "EEXIST");
  ln.set_existing("/d1");
  ln.set_new_path("/d1-link");
  EXPECT_POSIX(fs().Link(Ctx().get(), ln, &st), FAILED_PRECONDITION, "EPERM");

  v1::SymlinkRequest sl;
  sl.set_subvolume("fs3");
  sl.set_target("../somewhere/else");
  sl.set_path("/sym");
  ASSERT_GRPC_OK(fs().Symlink(Ctx().get(), sl, &st));
  EXPECT_EQ(st.kind(), v1::FILE_KIND_SYMLINK);
  EXPECT_POSIX(fs().Symlink(Ctx().get(), sl, &st), ALREADY_EXISTS, "EEXIST");
  sl.set_target("");
  sl.set_path("/sym2");
  EXPECT_POSIX(fs().Symlink(Ctx().get(), sl, &st), INVALID_ARGUMENT, "EINVAL");
  v1::ReadLinkRequest rl;
  rl.set_subvolume("fs3");
  rl.set_path("/sym");
  v1::ReadLinkResponse rl_resp;
  ASSERT_GRPC_OK(fs().ReadLink(Ctx().get(), rl, &rl_resp));
  EXPECT_EQ(rl_resp.target(), "../somewhere/else");
  rl.set_path("/c");
  EXPECT_POSIX(fs().ReadLink(Ctx().get(), rl, &rl_resp), INVALID_ARGUMENT, "EINVAL");

  v1::UnlinkRequest ul;
  v1::UnlinkResponse ul_resp;
  ul.set_subvolume("fs3");
  ul.set_path("/c2");
  ASSERT_GRPC_OK(fs().Unlink(Ctx().get(), ul, &ul_resp));
  EXPECT_POSIX(fs().Unlink(Ctx().get(), ul, &ul_resp), NOT_FOUND, "ENOENT");
  ul.set_path("/d1");
  EXPECT_POSIX(fs().Unlink(Ctx().get(), ul, &ul_resp), FAILED_PRECONDITION, "EISDIR");

  v1::RmdirRequest rm;
  v1::RmdirResponse rm_resp;
  rm.set_subvolume("fs3");
  rm.set_path("/d2");
  EXPECT_POSIX(fs().Rmdir(Ctx().get(), rm, &rm_resp), FAILED_PRECONDITION, "ENOTEMPTY");
  rm.set_path("/c");
  EXPECT_POSIX(fs().Rmdir(Ctx().get(), rm, &rm_resp), FAILED_PRECONDITION, "ENOTDIR");
  rm.set_path("/d1");
  ASSERT_GRPC_OK(fs().Rmdir(Ctx().get(), rm, &rm_resp));
  EXPECT_POSIX(fs().Rmdir(Ctx().get(), rm, &rm_resp), NOT_FOUND, "ENOENT");
}

TEST_F(Rpc, FilesCloneFsyncFiemap) {
  CreateSubvolume("fs4");
  const std::string data = Pattern(512u << 10, 2);
  ASSERT_GRPC_OK(WriteFile("fs4", "/src", data));
  ASSERT_GRPC_OK(WriteFile("fs4", "/dst", ""));
  v1::CloneRequest cl;
  v1::CloneResponse cl_resp;
  cl.set_subvolume("fs4");
  cl.set_src_path("/src");
  cl.set_dst_path("/dst");
  ASSERT_GRPC_OK(fs().Clone(Ctx().get(), cl, &cl_resp));
  std::string back;
  ASSERT_GRPC_OK(ReadFile("fs4", "/dst", 0, 0, &back));
  EXPECT_EQ(back, data);
  cl.set_dst_path("/src");
  cl.set_dst_offset(4096);
  cl.set_length(8192);
  EXPECT_POSIX(fs().Clone(Ctx().get(), cl, &cl_resp), INVALID_ARGUMENT, "EINVAL");  // overlap
  cl.set_src_path("/none");
  EXPECT_POSIX(fs().Clone(Ctx().get(), cl, &cl_resp), NOT_FOUND, "ENOENT");

  v1::FsyncRequest fsync;
  v1::FsyncResponse fsync_resp;
  fsync.set_subvolume("fs4");
  fsync.set_path("/dst");
  ASSERT_GRPC_OK(fs().Fsync(Ctx().get(), fsync, &fsync_resp));
  fsync.set_datasync(true);
  ASSERT_GRPC_OK(fs().Fsync(Ctx().get(), fsync, &fsync_resp));
  fsync.set_path("/none");
  EXPECT_POSIX(fs().Fsync(Ctx().get(), fsync, &fsync_resp), NOT_FOUND, "ENOENT");


  v1::FiemapRequest fm;
  fm.set_subvolume("fs4");
  fm.set_path("/dst");
  v1::FiemapResponse fm_resp;
  ASSERT_GRPC_OK(fs().Fiemap(Ctx().get(), fm, &fm_resp));
  ASSERT_GT(fm_resp.extents_size(), 0);
  uint64_t covered = 0;
  for (const auto& e : fm_resp.extents()) {
    covered += e.length();
    EXPECT_NE(e.flags() & v1::FIEMAP_FLAG_SHARED, 0u) << "a clone shares its source's extents";
  }
  EXPECT_EQ(covered, data.size());
  EXPECT_NE(fm_resp.extents(fm_resp.extents_size() - 1).flags() & v1::FIEMAP_FLAG_LAST, 0u);
  EXPECT_FALSE(fm_resp.more());
  fm.set_path("/none");
  EXPECT_POSIX(fs().Fiemap(Ctx().get(), fm, &fm_resp), NOT_FOUND, "ENOENT");
  fm.set_path("/dst");
  fm.set_offset(UINT64_MAX);
  fm.set_length(10);
  EXPECT_POSIX(fs().Fiemap(Ctx().get(), fm, &fm_resp), INVALID_ARGUMENT, "EINVAL");
  // A length of 2^64 - 1 is FIEMAP_MAX_OFFSET: to the end of the file.
  fm.set_offset(0);
  fm.set_length(UINT64_MAX);
  v1::FiemapResponse to_end, whole;
  ASSERT_GRPC_OK(fs().Fiemap(Ctx().get(), fm, &to_end));
  fm.set_length(0);
  ASSERT_GRPC_OK(fs().Fiemap(Ctx().get(), fm, &whole));
  EXPECT_EQ(to_end.SerializeAsString(), whole.SerializeAsString());
  EXPECT_GT(to_end.extents_size(), 0);
}

TEST_F(Rpc, FilesOnReadOnlySnapshotAreEROFS) {
  CreateSubvolume("fs5");
  ASSERT_GRPC_OK(WriteFile("fs5", "/f", "data"));
  Snapshot("fs5", "fs5-ro", true);
  std::string back;
  ASSERT_GRPC_OK(ReadFile("fs5-ro", "/f", 0, 0, &back));
  EXPECT_EQ(back, "data");
  EXPECT_POSIX(WriteFile("fs5-ro", "/f", "new"), FAILED_PRECONDITION, "EROFS");
  v1::MkdirRequest mk;
  mk.set_subvolume("fs5-ro");
  mk.set_path("/d");
  v1::FileStat st;
  const grpc::Status mkdir_ro = fs().Mkdir(Ctx().get(), mk, &st);
  EXPECT_POSIX(mkdir_ro, FAILED_PRECONDITION, "EROFS");
  // The class travels as google.rpc.ErrorInfo, set by the engine.
  EXPECT_EQ(ErrorInfoOf(mkdir_ro).reason, "READ_ONLY_SNAPSHOT");
  EXPECT_EQ(ErrorInfoOf(mkdir_ro).errno_name, "EROFS");
  EXPECT_EQ(ErrorInfoOf(mkdir_ro).domain, "cowkv.dev");
  v1::StatRequest stat;
  stat.set_subvolume("no-such-sv");
  EXPECT_POSIX(fs().Stat(Ctx().get(), stat, &st), NOT_FOUND, "ENOENT");
  stat.set_subvolume("fs5");
  stat.set_path("/missing");
  const grpc::Status missing = fs().Stat(Ctx().get(), stat, &st);
  EXPECT_EQ(ErrorInfoOf(missing).reason, "ENOENT") << missing.error_message();
  mk.set_subvolume("fs5");
  mk.set_path("/f/sub");
  const grpc::Status notdir = fs().Mkdir(Ctx().get(), mk, &st);
  EXPECT_EQ(ErrorInfoOf(notdir).reason, "ENOTDIR") << notdir.error_message();
}

// Fallocate: allocate (growing the file), KEEP_SIZE past EOF, punch hole,
// zero range; UNWRITTEN in fiemap; the modes refused (EOPNOTSUPP as
// UNIMPLEMENTED, before the file is looked up), length 0, a directory,
// a read-only snapshot.
TEST_F(Rpc, FilesFallocate) {
  CreateSubvolume("fs-falloc");
  ASSERT_GRPC_OK(WriteFile("fs-falloc", "/f", Pattern(10000, 3)));
  v1::FallocateRequest req;
  req.set_subvolume("fs-falloc");
  req.set_path("/f");
  req.set_offset(0);
  req.set_length(100000);
  v1::FileStat st;
  ASSERT_GRPC_OK(fs().Fallocate(Ctx().get(), req, &st));
  EXPECT_EQ(st.size(), 100000u);
  EXPECT_EQ(st.bytes(), 100000u);
  std::string back;
  ASSERT_GRPC_OK(ReadFile("fs-falloc", "/f", 0, 0, &back));
  EXPECT_EQ(back, Pattern(10000, 3) + std::string(90000, '\0'));
  req.set_mode(v1::FALLOCATE_FLAG_KEEP_SIZE);
  req.set_offset(100000);
  req.set_length(50000);
  ASSERT_GRPC_OK(fs().Fallocate(Ctx().get(), req, &st));
  EXPECT_EQ(st.size(), 100000u);
  EXPECT_EQ(st.bytes(), 150000u);
  v1::FiemapRequest fm;
  fm.set_subvolume("fs-falloc");
  fm.set_path("/f");
  v1::FiemapResponse fm_resp;
  ASSERT_GRPC_OK(fs().Fiemap(Ctx().get(), fm, &fm_resp));
  ASSERT_GE(fm_resp.extents_size(), 2);
  EXPECT_EQ(fm_resp.extents(0).flags() & v1::FIEMAP_FLAG_UNWRITTEN, 0u);
  const v1::FiemapExtent& last = fm_resp.extents(fm_resp.extents_size() - 1);
  EXPECT_NE(last.flags() & v1::FIEMAP_FLAG_UNWRITTEN, 0u);
  EXPECT_EQ(last.logical() + last.length(), 150000u) << "preallocated past EOF";
  req.set_mode(v1::FALLOCATE_FLAG_PUNCH_HOLE | v1::FALLOCATE_FLAG_KEEP_SIZE);
  req.set_offset(1000);
  req.set_length(2000);
  ASSERT_GRPC_OK(fs().Fallocate(Ctx().get(), req, &st));
  req.set_mode(v1::FALLOCATE_FLAG_ZERO_RANGE);
  req.set_offset(5000);
  req.set_length(200000);
  ASSERT_GRPC_OK(fs().Fallocate(Ctx().get(), req, &st));
  EXPECT_EQ(st.size(), 205000u);
  std::string want = Pattern(10000, 3);
  want.replace(1000, 2000, std::string(2000, '\0'));
  want.resize(5000);
  want.resize(205000, '\0');
  ASSERT_GRPC_OK(ReadFile("fs-falloc", "/f", 0, 0, &back));
  EXPECT_EQ(back, want);
  // By inode number.
  req.set_path("");
  req.set_ino(st.ino());
  req.set_mode(0);
  req.set_offset(0);
  req.set_length(1);
  ASSERT_GRPC_OK(fs().Fallocate(Ctx().get(), req, &st));
  // Refused: what the request alone decides comes before the lookup.
  req.set_ino(0);
  req.set_path("/none");
  for (uint32_t mode : {0x02u, 0x04u, 0x08u, 0x20u, 0x40u}) {
    req.set_mode(mode);
    const grpc::Status s = fs().Fallocate(Ctx().get(), req, &st);
    EXPECT_POSIX(s, UNIMPLEMENTED, "EOPNOTSUPP");
    EXPECT_EQ(ErrorInfoOf(s).reason, "EOPNOTSUPP") << s.error_message();
    EXPECT_EQ(ErrorInfoOf(s).errno_name, "EOPNOTSUPP");
  }
  req.set_mode(v1::FALLOCATE_FLAG_PUNCH_HOLE | v1::FALLOCATE_FLAG_ZERO_RANGE);
  EXPECT_POSIX(fs().Fallocate(Ctx().get(), req, &st), INVALID_ARGUMENT, "EINVAL");
  req.set_mode(0);
  req.set_length(0);
  EXPECT_POSIX(fs().Fallocate(Ctx().get(), req, &st), INVALID_ARGUMENT, "EINVAL");
  req.set_offset(1ull << 50);
  req.set_length(1);
  EXPECT_POSIX(fs().Fallocate(Ctx().get(), req, &st), INVALID_ARGUMENT, "EFBIG");
  req.set_offset(0);
  EXPECT_POSIX(fs().Fallocate(Ctx().get(), req, &st), NOT_FOUND, "ENOENT");
  v1::MkdirRequest mk;
  mk.set_subvolume("fs-falloc");
  mk.set_path("/d");
  ASSERT_GRPC_OK(fs().Mkdir(Ctx().get(), mk, &st));
  req.set_path("/d");
  EXPECT_POSIX(fs().Fallocate(Ctx().get(), req, &st), FAILED_PRECONDITION, "EISDIR");
  Snapshot("fs-falloc", "fs-falloc-ro", true);
  req.set_subvolume("fs-falloc-ro");
  req.set_path("/f");
  EXPECT_POSIX(fs().Fallocate(Ctx().get(), req, &st), FAILED_PRECONDITION, "EROFS");
}

// Open files (files_handle_test.cc has the rest): an unlinked open file
// read by handle, an O_TMPFILE linked by handle, EBADF after Close.
TEST_F(Rpc, FilesOpenCloseTmpfile) {
  CreateSubvolume("fs6");
  ASSERT_GRPC_OK(WriteFile("fs6", "/f", "kept by its handle"));
  v1::OpenRequest open;
  open.set_subvolume("fs6");
  open.set_path("/f");
  v1::OpenResponse h;
  ASSERT_GRPC_OK(fs().Open(Ctx().get(), open, &h));
  v1::UnlinkRequest un;
  un.set_subvolume("fs6");
  un.set_path("/f");
  v1::UnlinkResponse un_resp;
  ASSERT_GRPC_OK(fs().Unlink(Ctx().get(), un, &un_resp));
  v1::StatRequest stat;
  stat.set_handle(h.handle());
  v1::FileStat st;
  ASSERT_GRPC_OK(fs().Stat(Ctx().get(), stat, &st));
  EXPECT_EQ(st.nlink(), 0u);
  EXPECT_EQ(st.size(), 18u);
  v1::CreateTmpfileRequest tmp;
  tmp.set_subvolume("fs6");
  tmp.set_dir_path("/");
  v1::OpenResponse t;
  ASSERT_GRPC_OK(fs().CreateTmpfile(Ctx().get(), tmp, &t));
  v1::LinkRequest link;
  link.set_handle(t.handle());
  link.set_new_path("/named");
  ASSERT_GRPC_OK(fs().Link(Ctx().get(), link, &st));
  EXPECT_EQ(st.ino(), t.ino());
  v1::CloseRequest close;
  v1::CloseResponse close_resp;
  for (uint64_t handle : {h.handle(), t.handle()}) {
    close.set_handle(handle);
    ASSERT_GRPC_OK(fs().CloseHandle(Ctx().get(), close, &close_resp));
  }
  const grpc::Status bad = fs().Stat(Ctx().get(), stat, &st);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ErrorInfoOf(bad).reason, "EBADF") << bad.error_message();
  EXPECT_EQ(ErrorInfoOf(bad).errno_name, "EBADF") << bad.error_message();
}

// Issue 17's calls once each (server/files_attr_test.cc has their cases):
// SetAttr, SetXattr, GetXattr, ListXattrs, RemoveXattr.
TEST_F(Rpc, FilesAttributesAndXattrs) {
  CreateSubvolume("fs17");
  ASSERT_GRPC_OK(WriteFile("fs17", "/f", "data"));
  v1::SetAttrRequest sa;
  sa.set_subvolume("fs17");
  sa.set_path("/f");
  sa.set_fields(v1::SET_ATTR_MODE);
  sa.set_mode(0600);
  v1::FileStat st;
  ASSERT_GRPC_OK(fs().SetAttr(Ctx().get(), sa, &st));
  EXPECT_EQ(st.mode(), 0600u);
  v1::SetXattrRequest set;
  set.set_subvolume("fs17");
  set.set_path("/f");
  set.set_name("user.a");
  set.set_value("1");
  v1::SetXattrResponse set_resp;
  ASSERT_GRPC_OK(fs().SetXattr(Ctx().get(), set, &set_resp));
  v1::GetXattrRequest get;
  get.set_subvolume("fs17");
  get.set_path("/f");
  get.set_name("user.a");
  v1::GetXattrResponse got;
  ASSERT_GRPC_OK(fs().GetXattr(Ctx().get(), get, &got));
  EXPECT_EQ(got.value(), "1");
  v1::ListXattrsRequest list;
  list.set_subvolume("fs17");
  list.set_path("/f");
  v1::ListXattrsResponse names;
  ASSERT_GRPC_OK(fs().ListXattrs(Ctx().get(), list, &names));
  ASSERT_EQ(names.names_size(), 1);
  v1::RemoveXattrRequest rm;
  rm.set_subvolume("fs17");
  rm.set_path("/f");
  rm.set_name("user.a");
  v1::RemoveXattrResponse rm_resp;
  ASSERT_GRPC_OK(fs().RemoveXattr(Ctx().get(), rm, &rm_resp));
  EXPECT_POSIX(fs().RemoveXattr(Ctx().get(), rm, &rm_resp), NOT_FOUND, "ENODATA");
}

// ---- Admin, health, reflection, metrics ------------------------------------------

TEST_F(Rpc, AdminSyncStatsCheckVersion) {
  ASSERT_GRPC_OK(Put("", "admin-key", "v"));
  v1::SyncResponse sync;
  ASSERT_GRPC_OK(admin().Sync(Ctx().get(), v1::SyncRequest(), &sync));
  EXPECT_GT(sync.generation(), 0u);
  v1::StatsResponse stats;
  ASSERT_GRPC_OK(admin().Stats(Ctx().get(), v1::StatsRequest(), &stats));
  EXPECT_EQ(stats.nodesize(), 16384u);
  EXPECT_GT(stats.total_bytes(), 0u);
  EXPECT_GT(stats.commits(), 0u);
  EXPECT_GT(stats.commits_by_explicit(), 0u);
  EXPECT_GE(stats.subvolumes(), 1u);
  EXPECT_GT(stats.revision(), 0u);
  EXPECT_GT(stats.server_rpcs(), 0u);
  EXPECT_GT(stats.server_rpc_errors(), 0u);
  // The engine's latency figures: the Sync above was a timed explicit commit
  // and the Put a timed log sync (durable by default).
  EXPECT_GT(stats.commit_us_by_explicit(), 0u);
  EXPECT_GT(stats.commit_mean_us(), 0u);
  EXPECT_GT(stats.commit_p50_us(), 0u);
  EXPECT_LE(stats.commit_p50_us(), stats.commit_p99_us());
  EXPECT_GT(stats.log_syncs(), 0u);
  EXPECT_GT(stats.log_sync_us(), 0u);
  EXPECT_GT(stats.log_sync_mean_us(), 0u);
  EXPECT_GT(stats.log_sync_p50_us(), 0u);
  EXPECT_LE(stats.log_sync_p50_us(), stats.log_sync_p99_us());
  v1::CheckResponse check;
  ASSERT_GRPC_OK(admin().Check(Ctx().get(), v1::CheckRequest(), &check));
  EXPECT_TRUE(check.ok()) << (check.problems_size() ? check.problems(0) : "");
  EXPECT_GT(check.nodes(), 0u);
  EXPECT_EQ(check.fsid().size(), 32u);
  v1::VersionResponse version;
  ASSERT_GRPC_OK(admin().Version(Ctx().get(), v1::VersionRequest(), &version));
  EXPECT_EQ(version.api(), "cowkv.v1");
  EXPECT_FALSE(version.version().empty());
  EXPECT_FALSE(version.grpc_version().empty());
  EXPECT_EQ(version.nodesize(), 16384u);
}

TEST_F(Rpc, HealthService) {
  const grpc::internal::RpcMethod check("/grpc.health.v1.Health/Check",
                                        grpc::internal::RpcMethod::NORMAL_RPC);
  for (const std::string& service : {std::string(), std::string("cowkv.v1.KV")}) {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    auto ctx = Ctx();
    ASSERT_GRPC_OK((grpc::internal::BlockingUnaryCall<grpc::health::v1::HealthCheckRequest,
                                                      grpc::health::v1::HealthCheckResponse>(
        client_->channel.get(), check, ctx.get(), req, &resp)));
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse resp;
  auto ctx = Ctx();
  EXPECT_CODE((grpc::internal::BlockingUnaryCall<grpc::health::v1::HealthCheckRequest,
                                                 grpc::health::v1::HealthCheckResponse>(
                  client_->channel.get(), check, ctx.get(), req, &resp)),
              NOT_FOUND);
}

// One reflection exchange with hand-encoded messages (the reflection proto's
// C++ classes live inside libgrpc++_reflection and are not installed).
// `version` is "v1alpha" (gRPC's plugin) or "v1" (reflection_v1.h); the
// two protocols have the same messages under different packages.
std::string Reflect(grpc::Channel* channel, const std::string& request_bytes,
                    const std::string& version = "v1alpha") {
  const std::string path =
      absl::StrCat("/grpc.reflection.", version, ".ServerReflection/ServerReflectionInfo");
  const grpc::internal::RpcMethod method(path.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING);
  auto ctx = Ctx();
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> rw(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel, method, ctx.get()));
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer req(&slice, 1);
  EXPECT_TRUE(rw->Write(req));
  rw->WritesDone();
  grpc::ByteBuffer resp;
  std::string out;
  if (rw->Read(&resp)) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(resp.Dump(&slices).ok());
    for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  EXPECT_TRUE(rw->Finish().ok());
  return out;
}

// Goal: both reflection protocols describe every service (v1 is ours,
// v1alpha gRPC's plugin), so grpcurl and newer tools work either way.
TEST_F(Rpc, ServerReflection) {
  auto field = [](char tag, const std::string& value) {
    return absl::StrCat(std::string(1, tag), std::string(1, static_cast<char>(value.size())),
                        value);
  };
  for (const std::string version : {"v1alpha", "v1"}) {
    SCOPED_TRACE(version);
    // list_services (field 7, empty string).
    const std::string list = Reflect(client_->channel.get(), std::string("\x3a\x00", 2), version);
    for (const char* name :
         {"cowkv.v1.KV", "cowkv.v1.Files", "cowkv.v1.Subvolumes", "cowkv.v1.Admin",
          "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"}) {
      EXPECT_NE(list.find(name), std::string::npos) << name;
    }
    // file_containing_symbol (field 4): the health service must be describable.
    const std::string health =
        Reflect(client_->channel.get(), field('\x22', "grpc.health.v1.Health"), version);
    EXPECT_NE(health.find("grpc/health/v1/health.proto"), std::string::npos);
    const std::string kv = Reflect(client_->channel.get(), field('\x22', "cowkv.v1.KV"), version);
    EXPECT_NE(kv.find("cowkv/v1/kv.proto"), std::string::npos);
    // A method name resolves to its file too (grpcurl describes methods so).
    const std::string method =
        Reflect(client_->channel.get(), field('\x22', "cowkv.v1.KV.Put"), version);
    EXPECT_NE(method.find("cowkv/v1/kv.proto"), std::string::npos);
    // file_by_filename (field 3).
    const std::string file =
        Reflect(client_->channel.get(), field('\x1a', "cowkv/v1/files.proto"), version);
    EXPECT_NE(file.find("MkdirRequest"), std::string::npos);
    // An unknown symbol: an error_response (field 7 of the response, tag 0x3a).
    const std::string missing =
        Reflect(client_->channel.get(), field('\x22', "no.such.Symbol"), version);
    EXPECT_NE(missing.find("no.such.Symbol"), std::string::npos);
    EXPECT_EQ(missing.find("cowkv/v1/kv.proto"), std::string::npos);
  }
}

// One Prometheus histogram series as scraped: buckets in page order.
struct ScrapedHistogram {
  std::vector<std::pair<std::string, double>> buckets;  // le, cumulative count
  double sum = -1;
  double count = -1;
};

// Every series of histogram `name` on a /metrics page, by its labels other
// than `le` (e.g. `trigger="explicit"`, or "" for an unlabelled one).
std::map<std::string, ScrapedHistogram> ScrapeHistograms(const std::string& body,
                                                         const std::string& name) {
  std::map<std::string, ScrapedHistogram> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t nl = body.find('\n', pos);
    const std::string line = body.substr(pos, nl - pos);
    pos = nl == std::string::npos ? body.size() : nl + 1;
    if (line.rfind(name + "_", 0) != 0) continue;
    const size_t space = line.rfind(' ');
    const std::string series = line.substr(0, space);
    const double value = std::stod(line.substr(space + 1));
    const size_t brace = series.find('{');
    const std::string metric = series.substr(0, brace);
    std::string labels = brace == std::string::npos
                             ? ""
                             : series.substr(brace + 1, series.size() - brace - 2);
    std::string le;
    const size_t le_at = labels.find("le=\"");
    if (le_at != std::string::npos) {
      le = labels.substr(le_at + 4, labels.find('"', le_at + 4) - le_at - 4);
      labels = labels.substr(0, le_at == 0 ? 0 : le_at - 1);  // drop ",le=..."
    }
    ScrapedHistogram& h = out[labels];
    if (metric == name + "_bucket") {
      EXPECT_FALSE(le.empty()) << line;
      h.buckets.push_back({le, value});
    } else if (metric == name + "_sum") {
      h.sum = value;
    } else if (metric == name + "_count") {
      h.count = value;
    } else {
      ADD_FAILURE() << "unexpected series " << line;
    }
  }
  return out;
}

// A scraped histogram is well formed: ascending bounds ending at +Inf,
// cumulative counts that never decrease, +Inf == _count, a sum that is
// there (and positive once something was observed).
void ExpectWellFormed(const std::string& what, const ScrapedHistogram& h) {
  SCOPED_TRACE(what);
  ASSERT_GE(h.buckets.size(), 2u);
  EXPECT_EQ(h.buckets.back().first, "+Inf");
  for (size_t i = 1; i < h.buckets.size(); ++i) {
    if (i + 1 < h.buckets.size()) {
      EXPECT_LT(std::stod(h.buckets[i - 1].first), std::stod(h.buckets[i].first));
    }
    EXPECT_LE(h.buckets[i - 1].second, h.buckets[i].second) << "le=" << h.buckets[i].first;
  }
  EXPECT_EQ(h.buckets.back().second, h.count);
  EXPECT_GE(h.sum, 0);
  if (h.count > 0) {
    EXPECT_GT(h.sum, 0);
  }
}

// The value of one plain sample, `series` exactly as on the page.
double Sample(const std::string& body, const std::string& series) {
  const size_t at = body.find("\n" + series + " ");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no sample " << series;
    return -1;
  }
  const size_t start = at + series.size() + 2;
  return std::stod(body.substr(start, body.find('\n', start) - start));
}

TEST_F(Rpc, PrometheusMetrics) {
  ASSERT_GRPC_OK(Put("", "metrics-key", "v"));
  v1::SyncResponse sync;
  ASSERT_GRPC_OK(admin().Sync(Ctx().get(), v1::SyncRequest(), &sync));
  httplib::Client http("127.0.0.1", server_->metrics_port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const std::string& body = res->body;
  // Integers are exact, whatever their size (was %.9g: 1.07269325e+09).
  {
    v1::StatsResponse stats;
    ASSERT_GRPC_OK(admin().Stats(Ctx().get(), v1::StatsRequest(), &stats));
    EXPECT_NE(body.find(absl::StrCat("cowkv_space_bytes{kind=\"total\"} ", stats.total_bytes(), "\n")),
              std::string::npos)
        << "total_bytes " << stats.total_bytes() << " not printed exactly";
    EXPECT_EQ(body.find("e+"), std::string::npos) << "a value printed with an exponent";
  }
  for (const char* want : {
           "grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Put\",grpc_code=\"OK\"}",
           "grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Get\",grpc_code=\"NOT_FOUND\"}",
           "grpc_server_handling_seconds_bucket{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Put\",le=\"+Inf\"}",
           "grpc_server_started_total{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Put\"}",
           "grpc_server_msg_sent_total{grpc_type=\"server_stream\",grpc_service=\"cowkv.v1.Files\",grpc_method=\"Read\"}",
           "grpc_server_msg_received_total{grpc_type=\"client_stream\",grpc_service=\"cowkv.v1.Files\",grpc_method=\"Write\"}",
           "cowkv_sync_commit_duration_seconds_count",
           "cowkv_durable_write_duration_seconds_bucket",
           "cowkv_engine_commits_by_trigger_total{trigger=\"explicit\"}",
           "cowkv_log_syncs_total", "cowkv_delayed_ref_heads", "cowkv_throttle_waits_total",
           "cowkv_node_cache_hits_total", "cowkv_space_bytes{kind=\"free\"}",
           "cowkv_server_open_transaction_handles"}) {
    EXPECT_NE(body.find(want), std::string::npos) << want;
  }
  // Every line is a comment or "name{labels} value".
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t nl = body.find('\n', pos);
    const std::string line = body.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line[0] == '#') continue;
    EXPECT_NE(line.rfind(' '), std::string::npos) << line;
  }

  // The engine's histograms: every commit by trigger, every log sync. Their
  // counts equal the engine counters on the same page (one StoreStats).
  const std::vector<std::string> triggers = {"delayed_refs", "dirty_bytes", "explicit", "fsync",
                                             "interval", "log_full", "space"};
  auto scrape = [&](std::map<std::string, ScrapedHistogram>* commits, ScrapedHistogram* syncs) {
    auto page = http.Get("/metrics");
    ASSERT_TRUE(page);
    const std::string& b = page->body;
    for (const char* want : {"# TYPE cowkv_commit_duration_seconds histogram\n",
                             "# HELP cowkv_commit_duration_seconds ",
                             "# TYPE cowkv_log_sync_duration_seconds histogram\n",
                             "# HELP cowkv_log_sync_duration_seconds "}) {
      EXPECT_NE(b.find(want), std::string::npos) << want;
    }
    *commits = ScrapeHistograms(b, "cowkv_commit_duration_seconds");
    std::vector<std::string> labels;
    for (const auto& [l, h] : *commits) {
      labels.push_back(l.substr(std::string("trigger=\"").size(),
                                l.size() - std::string("trigger=\"").size() - 1));
      ExpectWellFormed(l, h);
      EXPECT_EQ(h.buckets.size(), 23u) << l;  // 22 bounds and +Inf
      EXPECT_EQ(h.count, Sample(b, "cowkv_engine_commits_by_trigger_total{" + l + "}")) << l;
    }
    EXPECT_EQ(labels, triggers);
    const std::map<std::string, ScrapedHistogram> log =
        ScrapeHistograms(b, "cowkv_log_sync_duration_seconds");
    ASSERT_EQ(log.size(), 1u);
    ASSERT_EQ(log.count(""), 1u) << "the log-sync histogram has no labels";
    *syncs = log.at("");
    ExpectWellFormed("log sync", *syncs);
    EXPECT_EQ(syncs->count, Sample(b, "cowkv_log_syncs_total"));
  };
  std::map<std::string, ScrapedHistogram> commits_before, commits_after;
  ScrapedHistogram syncs_before, syncs_after;
  ASSERT_NO_FATAL_FAILURE(scrape(&commits_before, &syncs_before));
  // A durable put (one log sync) and a Sync (one explicit commit) later:
  v1::PutRequest put;
  put.set_key("metrics-key-2");
  put.set_value("v");
  put.set_durability(v1::DURABILITY_DURABLE);
  v1::PutResponse put_resp;
  ASSERT_GRPC_OK(kv().Put(Ctx().get(), put, &put_resp));
  ASSERT_GRPC_OK(admin().Sync(Ctx().get(), v1::SyncRequest(), &sync));
  ASSERT_NO_FATAL_FAILURE(scrape(&commits_after, &syncs_after));
  const std::string expl = "trigger=\"explicit\"";
  EXPECT_EQ(commits_after[expl].count, commits_before[expl].count + 1);
  EXPECT_GT(commits_after[expl].sum, commits_before[expl].sum);
  EXPECT_EQ(syncs_after.count, syncs_before.count + 1);
  EXPECT_GT(syncs_after.sum, syncs_before.sum);
}

// ---- Leases (cowkv.v1.Lease) -------------------------------------------------------

// Goal: etcd's lease API over gRPC: grant, a put and a Txn put with the
// lease, time-to-live with keys, keep-alive on the stream (ttl 0 for a
// gone lease, the stream goes on), list, revoke deleting both keys in one
// revision; unknown leases are NOT_FOUND with reason LEASE_NOT_FOUND.
TEST_F(Rpc, Leases) {
  std::unique_ptr<v1::Lease::Stub> lease = v1::Lease::NewStub(client_->channel);
  v1::LeaseGrantRequest grant;
  grant.set_ttl(60);
  grant.set_id(777);
  v1::LeaseGrantResponse granted;
  ASSERT_GRPC_OK(lease->Grant(Ctx().get(), grant, &granted));
  EXPECT_EQ(granted.id(), 777);
  EXPECT_EQ(granted.ttl(), 60);
  EXPECT_CODE(lease->Grant(Ctx().get(), grant, &granted), ALREADY_EXISTS);
  grant.set_id(0);
  grant.set_ttl(0);
  EXPECT_CODE(lease->Grant(Ctx().get(), grant, &granted), INVALID_ARGUMENT);

  v1::PutRequest put;
  put.set_key("lease/a");
  put.set_value("1");
  put.set_lease(777);
  v1::PutResponse put_resp;
  ASSERT_GRPC_OK(kv().Put(Ctx().get(), put, &put_resp));
  put.set_lease(778);
  const grpc::Status unknown = kv().Put(Ctx().get(), put, &put_resp);
  EXPECT_CODE(unknown, NOT_FOUND);
  EXPECT_EQ(ErrorInfoOf(unknown).reason, "LEASE_NOT_FOUND") << unknown.error_message();
  v1::TxnRequest txn;
  v1::PutOp* op = txn.add_success()->mutable_put();
  op->set_key("lease/b");
  op->set_value("2");
  op->set_lease(777);
  v1::TxnResponse txn_resp;
  ASSERT_GRPC_OK(kv().Txn(Ctx().get(), txn, &txn_resp));

  v1::LeaseTimeToLiveRequest ttl;
  ttl.set_id(777);
  ttl.set_keys(true);
  v1::LeaseTimeToLiveResponse ttl_resp;
  ASSERT_GRPC_OK(lease->TimeToLive(Ctx().get(), ttl, &ttl_resp));
  EXPECT_EQ(ttl_resp.granted_ttl(), 60);
  EXPECT_GT(ttl_resp.ttl(), 0);
  ASSERT_EQ(ttl_resp.keys_size(), 2);
  EXPECT_EQ(ttl_resp.keys(0), "lease/a");
  EXPECT_EQ(ttl_resp.keys(1), "lease/b");

  {
    auto ctx = Ctx();
    auto stream = lease->KeepAlive(ctx.get());
    v1::LeaseKeepAliveRequest ka;
    v1::LeaseKeepAliveResponse ka_resp;
    ka.set_id(777);
    ASSERT_TRUE(stream->Write(ka));
    ASSERT_TRUE(stream->Read(&ka_resp));
    EXPECT_EQ(ka_resp.id(), 777);
    EXPECT_EQ(ka_resp.ttl(), 60);
    ka.set_id(5);
    ASSERT_TRUE(stream->Write(ka));
    ASSERT_TRUE(stream->Read(&ka_resp));
    EXPECT_EQ(ka_resp.ttl(), 0);  // gone: etcd's answer, the stream goes on
    ka.set_id(777);
    ASSERT_TRUE(stream->Write(ka));
    ASSERT_TRUE(stream->Read(&ka_resp));
    EXPECT_EQ(ka_resp.ttl(), 60);
    stream->WritesDone();
    ASSERT_GRPC_OK(stream->Finish());
  }

  v1::LeaseLeasesResponse list;
  ASSERT_GRPC_OK(lease->Leases(Ctx().get(), v1::LeaseLeasesRequest(), &list));
  ASSERT_EQ(list.ids_size(), 1);
  EXPECT_EQ(list.ids(0), 777);

  v1::LeaseRevokeRequest revoke;
  revoke.set_id(777);
  v1::LeaseRevokeResponse revoked;
  ASSERT_GRPC_OK(lease->Revoke(Ctx().get(), revoke, &revoked));
  EXPECT_EQ(revoked.revision(), txn_resp.revision() + 1);
  v1::GetRequest get;
  get.set_key("lease/a");
  v1::GetResponse got;
  EXPECT_CODE(kv().Get(Ctx().get(), get, &got), NOT_FOUND);
  get.set_key("lease/b");
  EXPECT_CODE(kv().Get(Ctx().get(), get, &got), NOT_FOUND);
  const grpc::Status again = lease->Revoke(Ctx().get(), revoke, &revoked);
  EXPECT_CODE(again, NOT_FOUND);
  EXPECT_EQ(ErrorInfoOf(again).reason, "LEASE_NOT_FOUND");
  EXPECT_CODE(lease->TimeToLive(Ctx().get(), ttl, &ttl_resp), NOT_FOUND);
  v1::LeaseLeasesRequest missing;
  missing.set_subvolume("no-such-subvolume");
  EXPECT_CODE(lease->Leases(Ctx().get(), missing, &list), NOT_FOUND);
}

// ---- Subvolumes: list filters and sort, show's snapshots, sync -------------------

TEST_F(Rpc, SubvolumeListFiltersAndSort) {
  CreateSubvolume("lst-a");
  Snapshot("lst-a", "lst-a@ro", true);
  Snapshot("lst-a", "lst-a@rw", false);
  auto list = [&](v1::ListSubvolumesRequest req) {
    v1::ListSubvolumesResponse resp;
    const grpc::Status st = sv().List(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    std::vector<v1::SubvolumeInfo> out(resp.subvolumes().begin(), resp.subvolumes().end());
    return out;
  };
  v1::ListSubvolumesRequest req;
  req.set_snapshots_only(true);
  std::set<std::string> names;
  for (const auto& s : list(req)) {
    EXPECT_NE(s.parent_id(), 0u) << s.name();
    names.insert(s.name());
  }
  EXPECT_TRUE(names.count("lst-a@ro") && names.count("lst-a@rw") && !names.count("lst-a"));
  req.set_read_only(true);
  names.clear();
  for (const auto& s : list(req)) {
    EXPECT_TRUE(s.read_only()) << s.name();
    names.insert(s.name());
  }
  EXPECT_TRUE(names.count("lst-a@ro") && !names.count("lst-a@rw"));

  v1::ListSubvolumesRequest sorted;
  sorted.add_sort("-rootid");
  std::vector<v1::SubvolumeInfo> by_id = list(sorted);
  ASSERT_GE(by_id.size(), 4u);
  for (size_t i = 1; i < by_id.size(); ++i) EXPECT_GT(by_id[i - 1].id(), by_id[i].id());
  sorted.clear_sort();
  sorted.add_sort("-ogen,path");
  std::vector<v1::SubvolumeInfo> by_ogen = list(sorted);
  for (size_t i = 1; i < by_ogen.size(); ++i) {
    EXPECT_GE(by_ogen[i - 1].creation_generation(), by_ogen[i].creation_generation());
  }
  sorted.clear_sort();
  sorted.add_sort("gen");
  sorted.add_sort("+size");
  v1::ListSubvolumesResponse resp;
  grpc::Status bad = sv().List(Ctx().get(), sorted, &resp);
  EXPECT_CODE(bad, INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("'+size'"), std::string::npos) << bad.error_message();
}

TEST_F(Rpc, SubvolumeShowNamesSnapshots) {
  CreateSubvolume("shw-a");
  Snapshot("shw-a", "shw-a@1", true);
  Snapshot("shw-a", "shw-a@2", false);
  Snapshot("shw-a@1", "shw-a@1@1", true);
  v1::ShowSubvolumeRequest show;
  show.set_name("shw-a");
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(sv().Show(Ctx().get(), show, &info));
  EXPECT_EQ(std::vector<std::string>(info.snapshots().begin(), info.snapshots().end()),
            (std::vector<std::string>{"shw-a@1", "shw-a@2"}));
  EXPECT_GT(info.creation_generation(), 0u);
  v1::ListSubvolumesResponse list;
  ASSERT_GRPC_OK(sv().List(Ctx().get(), v1::ListSubvolumesRequest(), &list));
  for (const auto& s : list.subvolumes()) EXPECT_EQ(s.snapshots_size(), 0) << s.name();
}

TEST_F(Rpc, SubvolumeSync) {
  CreateSubvolume("sync-big");
  for (int i = 0; i < 300; ++i) {
    ASSERT_GRPC_OK(Put("sync-big", absl::StrCat("key", i), std::string(1000, 'v')));
  }
  v1::ShowSubvolumeRequest show;
  show.set_name("sync-big");
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(sv().Show(Ctx().get(), show, &info));
  v1::DeleteSubvolumeRequest del;
  del.set_name("sync-big");
  v1::DeleteSubvolumeResponse del_resp;
  ASSERT_GRPC_OK(sv().Delete(Ctx().get(), del, &del_resp));
  v1::SyncSubvolumesRequest req;
  req.add_ids(info.id());
  req.set_timeout_ms(30000);
  v1::SyncSubvolumesResponse resp;
  ASSERT_GRPC_OK(sv().Sync(Ctx().get(), req, &resp));
  EXPECT_LE(resp.synced_size(), 1);  // the background cleaner may have been first
  // Nothing pending now: at once, for every id and for none.
  ASSERT_GRPC_OK(sv().Sync(Ctx().get(), req, &resp));
  EXPECT_EQ(resp.synced_size(), 0);
  ASSERT_GRPC_OK(sv().Sync(Ctx().get(), v1::SyncSubvolumesRequest(), &resp));
  EXPECT_EQ(resp.synced_size(), 0);
  req.clear_ids();
  req.add_ids(1ull << 40);
  grpc::Status unknown = sv().Sync(Ctx().get(), req, &resp);
  EXPECT_CODE(unknown, NOT_FOUND);
  EXPECT_NE(unknown.error_message().find("ENOENT"), std::string::npos);
  req.clear_ids();
  req.add_ids(5);
  EXPECT_CODE(sv().Sync(Ctx().get(), req, &resp), FAILED_PRECONDITION);
}

// Goal: KV.Watch answers a create and shows a put (server/watch_test.cc
// tests it in depth).
TEST_F(Rpc, WatchShowsAPut) {
  auto ctx = Ctx();
  auto stream = kv().Watch(ctx.get());
  v1::WatchRequest req;
  req.mutable_create_request()->set_key("watch-one");
  ASSERT_TRUE(stream->Write(req));
  v1::WatchResponse created;
  ASSERT_TRUE(stream->Read(&created));
  EXPECT_TRUE(created.created());
  v1::PutRequest put;
  put.set_key("watch-one");
  put.set_value("v");
  v1::PutResponse put_resp;
  ASSERT_GRPC_OK(kv().Put(Ctx().get(), put, &put_resp));
  v1::WatchResponse ev;
  ASSERT_TRUE(stream->Read(&ev));
  ASSERT_EQ(ev.events_size(), 1);
  EXPECT_EQ(ev.events(0).kv().value(), "v");
  EXPECT_EQ(ev.events(0).kv().mod_revision(), put_resp.revision());
  stream->WritesDone();
  while (stream->Read(&ev)) {
  }
  ASSERT_GRPC_OK(stream->Finish());
}

// Runs last in the suite: every method of every service was called.
TEST_F(Rpc, ZzEveryMethodWasCalled) {
  for (const std::string& method : Server::MethodNames()) {
    EXPECT_GT(server_->metrics().CallsOf(method), 0u) << method << " has no test";
  }
}

// ---- Servers of their own ------------------------------------------------------

// Goal: a full device is RESOURCE_EXHAUSTED (ENOSPC for files) and nothing
// breaks: the server keeps serving reads and check stays clean.
TEST(RpcNoSpace, FullDeviceIsResourceExhausted) {
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(TestOptions("nospace", 16ull << 20));
  ASSERT_TRUE(s.ok()) << s.status();
  Client c((*s)->port());
  grpc::Status last;
  int written = 0;
  for (int i = 0; i < 4000 && last.ok(); ++i) {
    v1::PutRequest req;
    req.set_key(absl::StrCat("fill", i));
    req.set_value(std::string(64 << 10, 'f'));
    v1::PutResponse resp;
    last = c.kv->Put(Ctx().get(), req, &resp);
    if (last.ok()) ++written;
  }
  EXPECT_EQ(last.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << last.error_message();
  EXPECT_GT(written, 0);
  v1::WriteResponse wr;
  auto ctx = Ctx();
  auto w = c.files->Write(ctx.get(), &wr);
  v1::WriteRequest m;
  m.set_path("/f");
  m.set_create(true);
  m.set_data(std::string(2u << 20, 'x'));
  w->Write(m);
  w->WritesDone();
  const grpc::Status ws = w->Finish();
  EXPECT_EQ(ws.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << ws.error_message();
  EXPECT_EQ(ws.error_message().rfind("ENOSPC: ", 0), 0u) << ws.error_message();
  v1::GetRequest get;
  get.set_key("fill0");
  v1::GetResponse got;
  ASSERT_GRPC_OK(c.kv->Get(Ctx().get(), get, &got));
  v1::CheckResponse check;
  ASSERT_GRPC_OK(c.admin->Check(Ctx().get(), v1::CheckRequest(), &check));
  EXPECT_TRUE(check.ok()) << (check.problems_size() ? check.problems(0) : "");
  EXPECT_TRUE((*s)->Stop().ok());
}

// Goal: with a token configured, calls without it (or with a wrong one) are
// UNAUTHENTICATED and change nothing; with it they work.
TEST(RpcAuth, BearerToken) {
  ServerOptions o = TestOptions("auth");
  o.auth_token = "s3cret";
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  Client c((*s)->port());
  v1::PutRequest put;
  put.set_key("k");
  put.set_value("v");
  v1::PutResponse resp;
  EXPECT_CODE(c.kv->Put(Ctx().get(), put, &resp), UNAUTHENTICATED);
  EXPECT_CODE(c.kv->Put(Ctx("wrong").get(), put, &resp), UNAUTHENTICATED);
  ASSERT_GRPC_OK(c.kv->Put(Ctx("s3cret").get(), put, &resp));
  v1::StatsResponse stats;
  EXPECT_CODE(c.admin->Stats(Ctx().get(), v1::StatsRequest(), &stats), UNAUTHENTICATED);
  EXPECT_TRUE((*s)->Stop().ok());
}

// Goal: tokens with roles and subvolume lists (auth.h): each role can do
// what it is for and gets PERMISSION_DENIED (ErrorInfo PERMISSION_DENIED)
// past it, changing nothing; a limited token sees only its subvolumes.
TEST(RpcAuth, RolesAndSubvolumes) {
  ServerOptions o = TestOptions("roles");
  absl::StatusOr<TokenTable> tokens = TokenTable::Parse(
      "# comment\n"
      "admin-token-0123456789 admin\n"
      "reader-token-012345678 read   # every subvolume\n"
      "app-token-0123456789ab write app,app-snap-*\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  o.tokens = *tokens;
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  Client c((*s)->port());
  const std::string admin = "admin-token-0123456789", reader = "reader-token-012345678",
                    app = "app-token-0123456789ab";
  auto denied = [](const grpc::Status& st) {
    return st.error_code() == grpc::StatusCode::PERMISSION_DENIED &&
           ErrorInfoOf(st).reason == "PERMISSION_DENIED";
  };
  for (const char* name : {"app", "other"}) {
    v1::CreateSubvolumeRequest create;
    create.set_name(name);
    v1::SubvolumeInfo info;
    EXPECT_TRUE(denied(c.subvolumes->Create(Ctx(app).get(), create, &info)));
    ASSERT_GRPC_OK(c.subvolumes->Create(Ctx(admin).get(), create, &info));
  }
  v1::PutRequest put;
  put.set_key("k");
  put.set_value("v");
  v1::PutResponse put_resp;
  // read: reads anywhere, writes nowhere.
  put.set_subvolume("app");
  EXPECT_TRUE(denied(c.kv->Put(Ctx(reader).get(), put, &put_resp)));
  ASSERT_GRPC_OK(c.kv->Put(Ctx(app).get(), put, &put_resp));
  v1::GetRequest get;
  get.set_subvolume("app");
  get.set_key("k");
  v1::GetResponse got;
  ASSERT_GRPC_OK(c.kv->Get(Ctx(reader).get(), get, &got));
  v1::TxnRequest txn;
  txn.set_subvolume("app");
  txn.add_success()->mutable_range()->set_prefix("k");
  v1::TxnResponse txn_resp;
  ASSERT_GRPC_OK(c.kv->Txn(Ctx(reader).get(), txn, &txn_resp));  // a Txn that only reads
  txn.add_success()->mutable_put()->set_key("by-reader");
  EXPECT_TRUE(denied(c.kv->Txn(Ctx(reader).get(), txn, &txn_resp)));
  v1::MkdirRequest mk;
  mk.set_subvolume("app");
  mk.set_path("/d");
  v1::FileStat st;
  EXPECT_TRUE(denied(c.files->Mkdir(Ctx(reader).get(), mk, &st)));
  // write on app,app-snap-*: its subvolumes only, no subvolume changes.
  ASSERT_GRPC_OK(c.files->Mkdir(Ctx(app).get(), mk, &st));
  put.set_subvolume("other");
  EXPECT_TRUE(denied(c.kv->Put(Ctx(app).get(), put, &put_resp)));
  put.set_subvolume("");  // default
  EXPECT_TRUE(denied(c.kv->Put(Ctx(app).get(), put, &put_resp)));
  get.set_subvolume("other");
  EXPECT_TRUE(denied(c.kv->Get(Ctx(app).get(), get, &got)));
  v1::StatRequest stat;
  stat.set_subvolume("other");
  EXPECT_TRUE(denied(c.files->Stat(Ctx(app).get(), stat, &st)));
  v1::SnapshotRequest snap;
  snap.set_source("app");
  snap.set_name("app-snap-1");
  snap.set_read_only(true);
  v1::SubvolumeInfo info;
  EXPECT_TRUE(denied(c.subvolumes->Snapshot(Ctx(app).get(), snap, &info)));
  ASSERT_GRPC_OK(c.subvolumes->Snapshot(Ctx(admin).get(), snap, &info));
  v1::ListSubvolumesResponse list;
  ASSERT_GRPC_OK(c.subvolumes->List(Ctx(app).get(), v1::ListSubvolumesRequest(), &list));
  std::vector<std::string> names;
  for (const auto& sv : list.subvolumes()) names.push_back(sv.name());
  EXPECT_EQ(names, (std::vector<std::string>{"app", "app-snap-1"}));
  get.set_subvolume("app-snap-1");
  ASSERT_GRPC_OK(c.kv->Get(Ctx(app).get(), get, &got));
  v1::CheckResponse check;
  EXPECT_TRUE(denied(c.admin->Check(Ctx(app).get(), v1::CheckRequest(), &check)));
  ASSERT_GRPC_OK(c.admin->Check(Ctx(admin).get(), v1::CheckRequest(), &check));
  EXPECT_TRUE(check.ok());
  // Nothing a denied call tried is there.
  get.set_subvolume("other");
  get.set_key("k");
  EXPECT_CODE(c.kv->Get(Ctx(admin).get(), get, &got), NOT_FOUND);
  EXPECT_TRUE((*s)->Stop().ok());
}

// Goal: with TLS, a call without a known token is refused before the
// server parses its request (TokenAuthProcessor): bytes that do not parse,
// sent without a token, are UNAUTHENTICATED rather than INVALID_ARGUMENT;
// health needs no token; a good token works.
TEST(RpcAuth, TlsRefusesUnknownCallersBeforeParsing) {
  const std::string dir = testing::TempDir();
  const std::string cert = dir + "/auth-cert.pem", key = dir + "/auth-key.pem";
  const std::string cmd = absl::StrCat(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ", key,
      " -out ", cert, " -days 1 -subj /CN=cowkvd-test -addext subjectAltName=IP:127.0.0.1",
      " >/dev/null 2>&1");
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl cannot make a certificate here";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  ServerOptions o = TestOptions("tls-auth");
  o.tls_cert_pem = read(cert);
  o.tls_key_pem = read(key);
  o.auth_token = "s3cret-token-0123456789";
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = o.tls_cert_pem;
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*s)->port()), grpc::SslCredentials(ssl));
  auto kv = v1::KV::NewStub(channel);
  v1::PutRequest put;
  put.set_key("k");
  put.set_value("v");
  v1::PutResponse resp;
  EXPECT_CODE(kv->Put(Ctx().get(), put, &resp), UNAUTHENTICATED);
  EXPECT_CODE(kv->Put(Ctx("wrong").get(), put, &resp), UNAUTHENTICATED);
  ASSERT_GRPC_OK(kv->Put(Ctx(o.auth_token).get(), put, &resp));
  // Bytes that are not a GetRequest (field 1 as invalid UTF-8 would be a
  // string; here a truncated varint): without a token, refused unparsed.
  auto raw = [&](const std::string& token) {
    const grpc::internal::RpcMethod method("/cowkv.v1.KV/Get",
                                           grpc::internal::RpcMethod::NORMAL_RPC);
    grpc::Slice slice(std::string("\x0a\xff", 2));
    grpc::ByteBuffer req(&slice, 1), out;
    auto ctx = Ctx(token);
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), method, ctx.get(), req, &out);
  };
  EXPECT_CODE(raw(""), UNAUTHENTICATED);
  EXPECT_CODE(raw(o.auth_token), INVALID_ARGUMENT);
  const grpc::internal::RpcMethod check("/grpc.health.v1.Health/Check",
                                        grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::health::v1::HealthCheckRequest hreq;
  grpc::health::v1::HealthCheckResponse hresp;
  auto hctx = Ctx();
  ASSERT_GRPC_OK((grpc::internal::BlockingUnaryCall<grpc::health::v1::HealthCheckRequest,
                                                    grpc::health::v1::HealthCheckResponse>(
      channel.get(), check, hctx.get(), hreq, &hresp)));
  EXPECT_TRUE((*s)->Stop().ok());
}

// Goal: every method is classified on purpose: only the six that change
// the set of subvolumes or read the whole device need admin; a new method
// that is not in auth.cc's table would need admin and fail here.
TEST(RpcAuth, EveryMethodIsClassified) {
  const std::set<std::string> admin_only = {
      "cowkv.v1.Subvolumes/Create",      "cowkv.v1.Subvolumes/Rename",
      "cowkv.v1.Subvolumes/Delete",      "cowkv.v1.Subvolumes/Snapshot",
      "cowkv.v1.Subvolumes/Receive",     "cowkv.v1.Admin/Check",
      "cowkv.v1.Subvolumes/AbortReceive"};
  for (const std::string& m : Server::MethodNames()) {
    EXPECT_EQ(MethodAccess(m) == Access::kAdmin, admin_only.count(m) == 1) << m;
  }
}

// Goal: the token file's grammar; every mistake names its line.
TEST(RpcAuth, TokenFileGrammar) {
  absl::StatusOr<TokenTable> legacy = TokenTable::Parse("  s3cret \n");
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  ASSERT_NE(legacy->Find("s3cret"), nullptr);
  EXPECT_EQ(legacy->Find("s3cret")->role, Role::kAdmin);
  EXPECT_EQ(legacy->Find("s3cre"), nullptr);
  EXPECT_EQ(legacy->Find("s3cret2"), nullptr);
  for (const char* bad :
       {"", "# only a comment\n", "short read\n", "0123456789abcdefgh superuser\n",
        "0123456789abcdefgh read a,b extra\n",
        "0123456789abcdefgh read\n0123456789abcdefgh write\n", "0123456789abcdefgh read ,\n"}) {
    absl::StatusOr<TokenTable> t = TokenTable::Parse(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok() && absl::string_view(bad).find('\n') != absl::string_view::npos &&
        absl::string_view(bad).find("0123") != absl::string_view::npos) {
      EXPECT_NE(t.status().message().find("line "), absl::string_view::npos) << t.status();
    }
  }
  Principal p{Role::kWrite, {"app", "logs-*"}};
  EXPECT_TRUE(p.MaySee("app"));
  EXPECT_TRUE(p.MaySee("logs-2026"));
  EXPECT_FALSE(p.MaySee("app2"));
  EXPECT_FALSE(p.MaySee(""));
  const Principal only_default{Role::kRead, {"default"}};
  EXPECT_TRUE(only_default.MaySee(""));
  EXPECT_TRUE(p.Allows(Access::kWrite));
  EXPECT_FALSE(p.Allows(Access::kAdmin));
}

// Goal: while the server drains, calls are UNAVAILABLE (retry), health says
// NOT_SERVING after Stop, and a second server on the same device is refused
// until the first one is gone; the data written survives the restart.
TEST(RpcLifecycle, StoppingLockAndRestart) {
  ServerOptions o = TestOptions("life");
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->device_created());
  {
    Client c((*s)->port());
    v1::PutRequest put;
    put.set_key("survives");
    put.set_value("yes");
    put.set_durability(v1::DURABILITY_ASYNC);  // durable only through the stop's commit
    v1::PutResponse resp;
    ASSERT_GRPC_OK(c.kv->Put(Ctx().get(), put, &resp));

    ServerOptions second = o;
    absl::StatusOr<std::unique_ptr<Server>> s2 = Server::Start(second);
    ASSERT_FALSE(s2.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(s2.status())) << s2.status();
    EXPECT_NE(s2.status().message().find("in use"), std::string::npos);

    (*s)->TEST_SetStopping();
    EXPECT_CODE(c.kv->Put(Ctx().get(), put, &resp), UNAVAILABLE);
    v1::VersionResponse version;
    EXPECT_CODE(c.admin->Version(Ctx().get(), v1::VersionRequest(), &version), UNAVAILABLE);
  }
  ASSERT_TRUE((*s)->Stop().ok());
  EXPECT_TRUE((*s)->Stop().ok());  // idempotent
  s->reset();

  o.device.mkfs = false;
  absl::StatusOr<std::unique_ptr<Server>> again = Server::Start(o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE((*again)->device_created());
  Client c((*again)->port());
  v1::GetRequest get;
  get.set_key("survives");
  v1::GetResponse got;
  ASSERT_GRPC_OK(c.kv->Get(Ctx().get(), get, &got));
  EXPECT_EQ(got.kv().value(), "yes");
  EXPECT_TRUE((*again)->Stop().ok());
}

// Goal: an existing file that holds no cowkv filesystem is never formatted
// without --mkfs; with it, it is.
TEST(RpcLifecycle, ExistingDeviceNeedsMkfs) {
  ServerOptions o = TestOptions("existing");
  {
    FILE* f = fopen(o.device.path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(ftruncate(fileno(f), 32 << 20), 0);
    fclose(f);
  }
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(s.status())) << s.status();
  EXPECT_NE(s.status().message().find("--mkfs"), std::string::npos);
  o.device.mkfs = true;
  s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->device_created());
  EXPECT_TRUE((*s)->Stop().ok());
}

}  // namespace
}  // namespace server
}  // namespace cowkv
