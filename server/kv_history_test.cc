// Goal: reads at a past revision (Get and Range with `revision`, paged),
// Compact, the COMPACTED / FUTURE_REVISION errors with their ErrorInfo
// (reason, metadata compact_revision), and interactive transactions that
// read their revision and, read-only, always commit (issue 18), through
// the generated stub against an in-process server.
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/v1/kv.grpc.pb.h"
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

class KvHistory : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(TestOptions("history"));
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
  v1::KV::Stub& kv() { return *client_->kv; }
  uint64_t Put(const std::string& k, const std::string& v) {
    v1::PutRequest req;
    req.set_key(k);
    req.set_value(v);
    v1::PutResponse resp;
    grpc::Status s = kv().Put(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.revision();
  }
  uint64_t Delete(const std::string& k) {
    v1::DeleteRequest req;
    req.set_key(k);
    v1::DeleteResponse resp;
    grpc::Status s = kv().Delete(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.revision();
  }
  grpc::Status Get(const std::string& k, uint64_t rev, v1::GetResponse* resp) {
    v1::GetRequest req;
    req.set_key(k);
    req.set_revision(rev);
    return kv().Get(Ctx().get(), req, resp);
  }
};
Server* KvHistory::server_ = nullptr;
Client* KvHistory::client_ = nullptr;

TEST_F(KvHistory, GetAndRangeAtARevisionThenCompact) {
  const uint64_t r1 = Put("h/a", "1");
  const uint64_t r2 = Put("h/a", "2");
  const uint64_t r3 = Put("h/b", "1");
  const uint64_t r4 = Delete("h/a");
  v1::GetResponse g;
  ASSERT_TRUE(Get("h/a", r1, &g).ok());
  EXPECT_EQ(g.kv().value(), "1");
  EXPECT_EQ(g.kv().mod_revision(), r1);
  EXPECT_EQ(g.revision(), r1);
  ASSERT_TRUE(Get("h/a", r3, &g).ok());
  EXPECT_EQ(g.kv().value(), "2");
  EXPECT_EQ(Get("h/a", r4, &g).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Get("h/b", r2, &g).error_code(), grpc::StatusCode::NOT_FOUND);

  // A paged range at r3: every page at the same revision.
  v1::RangeRequest rr;
  rr.set_prefix("h/");
  rr.set_revision(r3);
  rr.set_limit(1);
  v1::RangeResponse page;
  ASSERT_TRUE(kv().Range(Ctx().get(), rr, &page).ok());
  ASSERT_EQ(page.kvs_size(), 1);
  EXPECT_EQ(page.kvs(0).key(), "h/a");
  EXPECT_EQ(page.kvs(0).value(), "2");
  EXPECT_EQ(page.revision(), r3);
  ASSERT_TRUE(page.more());
  Put("h/c", "later");  // after r3: not on the next page
  rr.set_page_token(page.next_page_token());
  v1::RangeResponse next;
  ASSERT_TRUE(kv().Range(Ctx().get(), rr, &next).ok());
  ASSERT_EQ(next.kvs_size(), 1);
  EXPECT_EQ(next.kvs(0).key(), "h/b");
  EXPECT_FALSE(next.more());
  // The token is bound to its revision.
  rr.set_revision(r2);
  EXPECT_EQ(kv().Range(Ctx().get(), rr, &next).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Compact r3: r3 stays, r2 is COMPACTED with the compact revision.
  v1::CompactRequest c;
  c.set_revision(r3);
  v1::CompactResponse cr;
  ASSERT_TRUE(kv().Compact(Ctx().get(), c, &cr).ok());
  EXPECT_EQ(cr.compact_revision(), r3);
  ASSERT_TRUE(Get("h/a", r3, &g).ok());
  grpc::Status old = Get("h/a", r2, &g);
  EXPECT_EQ(old.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  ErrorInfoFields info = ErrorInfoOf(old);
  EXPECT_EQ(info.reason, "COMPACTED") << old.error_message();
  EXPECT_EQ(info.metadata["compact_revision"], absl::StrCat(r3));
  c.set_revision(r2);
  EXPECT_EQ(ErrorInfoOf(kv().Compact(Ctx().get(), c, &cr)).reason, "COMPACTED");
  // The future.
  grpc::Status future = Get("h/a", r4 + 1000, &g);
  EXPECT_EQ(future.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(ErrorInfoOf(future).reason, "FUTURE_REVISION");
  c.set_revision(0);
  EXPECT_EQ(kv().Compact(Ctx().get(), c, &cr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(KvHistory, TransactionReadsItsRevisionAndReadOnlyCommits) {
  Put("t/x", "before");
  v1::BeginRequest b;
  v1::BeginResponse tx;
  ASSERT_TRUE(kv().Begin(Ctx().get(), b, &tx).ok());
  Put("t/x", "after");
  Put("t/y", "new");
  v1::TxnGetRequest tg;
  tg.set_handle(tx.handle());
  tg.set_key("t/x");
  v1::GetResponse g;
  ASSERT_TRUE(kv().TxnGet(Ctx().get(), tg, &g).ok()) << "no eager abort";
  EXPECT_EQ(g.kv().value(), "before");
  v1::TxnRangeRequest trr;
  trr.set_handle(tx.handle());
  trr.mutable_range()->set_prefix("t/");
  v1::RangeResponse r;
  ASSERT_TRUE(kv().TxnRange(Ctx().get(), trr, &r).ok());
  ASSERT_EQ(r.kvs_size(), 1) << "t/y came after the read revision";
  v1::CommitRequest c;
  c.set_handle(tx.handle());
  v1::CommitResponse cr;
  ASSERT_TRUE(kv().Commit(Ctx().get(), c, &cr).ok()) << "a read-only transaction commits";
}

}  // namespace
}  // namespace server
}  // namespace cowkv
