// Goal: the server's pure pieces behave as their headers say — range pages
// and tokens, the transaction registry's leases and limits, the stats table
// against the StatsResponse proto, metrics rendering, input checks.
// Method: direct calls, a MemDevice-backed Store where a KvTransaction is
// needed, and an explicit clock (absl::Time values) for leases.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "cowkv/device.h"
#include "cowkv/v1/admin.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/connections.h"
#include "server/follower.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/range_page.h"
#include "server/stats_table.h"
#include "server/txn_registry.h"
#include "server/validate.h"

namespace cowkv {
namespace server {
namespace {

TEST(RangePage, TokensResumeAndAreTiedToTheirRequest) {
  RangeFields f;
  f.prefix = "p";
  f.limit = 2;
  absl::StatusOr<RangeRequest> first = PlanPage(f, "sv:a", "");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->start, "p");
  EXPECT_EQ(first->end, "q");
  RangeResult r;
  r.more = true;
  r.kvs.push_back({"p1", "v"});
  r.kvs.push_back({"p2", "v"});
  v1::RangeResponse page;
  FinishPage(r, f, "sv:a", &page);
  ASSERT_TRUE(page.more());
  absl::StatusOr<RangeRequest> next = PlanPage(f, "sv:a", page.next_page_token());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->start, std::string("p2\0", 3));
  EXPECT_FALSE(PlanPage(f, "sv:b", page.next_page_token()).ok());  // another scope
  f.reverse = true;
  EXPECT_FALSE(PlanPage(f, "sv:a", page.next_page_token()).ok());  // another order
}

TEST(RangePage, LimitsAndTrimming) {
  RangeFields f;
  EXPECT_EQ(PlanPage(f, "", "")->limit, 10000u);
  f.limit = 20000;
  EXPECT_EQ(PlanPage(f, "", "")->limit, 10000u);
  RangeResult r;
  for (int i = 0; i < 3; ++i) r.kvs.push_back({std::string(1, 'a' + i), std::string(5u << 20, 'v')});
  v1::RangeResponse page;
  FinishPage(r, f, "", &page);
  EXPECT_EQ(page.kvs_size(), 1);  // 8 MiB per page, the first always fits
  EXPECT_TRUE(page.more());
  // The last possible key ends the range: no token.
  RangeResult last;
  last.more = true;
  last.kvs.push_back({std::string(1024, '\xff'), ""});
  v1::RangeResponse end;
  FinishPage(last, RangeFields(), "", &end);
  EXPECT_FALSE(end.more());
  EXPECT_TRUE(end.next_page_token().empty());
  EXPECT_EQ(PrefixEnd("a\xff\xff"), "b");
  EXPECT_EQ(PrefixEnd("\xff"), "");
}

class Registry : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Store::Mkfs(&dev_, {}).ok());
    auto s = Store::Open(&dev_, Options());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    auto sv = store_->DefaultSubvolume();
    ASSERT_TRUE(sv.ok());
    sv_ = std::move(*sv);
  }
  std::unique_ptr<KvTransaction> Txn() { return std::move(sv_->BeginTransaction()).value(); }
  MemDevice dev_{64ull << 20};
  std::unique_ptr<Store> store_;
  std::unique_ptr<Subvolume> sv_;
};

TEST_F(Registry, LeasesLimitsAndFinishing) {
  TxnRegistry reg({/*per_peer=*/2, /*total=*/3});
  const absl::Time t0 = absl::Now();
  auto a = reg.Add("p1", "ipv4:10.0.0.1:1100", Txn(), absl::Seconds(1), t0);
  auto b = reg.Add("p1", "ipv4:10.0.0.1:1100", Txn(), absl::Seconds(1), t0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->handle, b->handle);
  EXPECT_TRUE(absl::IsResourceExhausted(reg.Add("p1", "ipv4:10.0.0.1:1100", Txn(), absl::Seconds(1), t0).status()));
  ASSERT_TRUE(reg.Add("p2", "ipv4:10.0.0.1:1200", Txn(), absl::Seconds(1), t0).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(reg.Add("p3", "ipv4:10.0.0.1:1300", Txn(), absl::Seconds(1), t0).status()));
  EXPECT_EQ(reg.open(), 3u);
  EXPECT_EQ(store_->Stats().open_transactions, 3u);

  // A call renews the lease; idleness past it expires the handle.
  ASSERT_TRUE(reg.With(a->handle, t0 + absl::Milliseconds(900), [](KvTransaction& t) {
                   return t.Put("k", "v");
                 }).ok());
  reg.ExpireIdle(t0 + absl::Milliseconds(1500));  // b and p2's expire, a lives
  EXPECT_EQ(reg.open(), 1u);
  EXPECT_EQ(reg.expired_total(), 2u);
  EXPECT_TRUE(absl::IsAborted(reg.Abort(b->handle, t0 + absl::Seconds(2))));
  EXPECT_TRUE(absl::IsNotFound(reg.Abort(12345, t0)));
  // Expiry does not wait for the reaper: a late call sees it.
  EXPECT_TRUE(absl::IsAborted(reg.With(a->handle, t0 + absl::Seconds(5), [](KvTransaction&) {
                                   return absl::OkStatus();
                                 })));
  EXPECT_EQ(reg.open(), 0u);
  EXPECT_EQ(store_->Stats().open_transactions, 0u);

  auto c = reg.Add("p1", "ipv4:10.0.0.1:1100", Txn(), absl::Seconds(10), t0);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(reg.With(c->handle, t0, [](KvTransaction& t) { return t.Put("c", "1"); }).ok());
  absl::StatusOr<uint64_t> rev = reg.Commit(c->handle, Durability::kDurable, t0);
  ASSERT_TRUE(rev.ok()) << rev.status();
  EXPECT_TRUE(absl::IsNotFound(reg.Commit(c->handle, Durability::kDurable, t0).status()));
  auto d = reg.Add("p1", "ipv4:10.0.0.1:1100", Txn(), absl::Seconds(10), t0);
  ASSERT_TRUE(d.ok());
  reg.AbortAll();
  EXPECT_EQ(reg.open(), 0u);
  EXPECT_EQ(store_->Stats().open_transactions, 0u);
}

// The handles of a closed connection are aborted (ABORTED naming the
// closed connection), other connections' stay, a handle in use stays.
TEST_F(Registry, ClosedConnectionsLoseTheirHandles) {
  TxnRegistry reg({/*per_peer=*/8, /*total=*/8});
  const absl::Time t0 = absl::Now();
  auto a = reg.Add("ipv4:10.0.0.1", "ipv4:10.0.0.1:5001", Txn(), absl::Seconds(60), t0);
  auto b = reg.Add("ipv4:10.0.0.1", "ipv4:10.0.0.1:5001", Txn(), absl::Seconds(60), t0);
  auto c = reg.Add("ipv4:10.0.0.1", "ipv4:10.0.0.1:5002", Txn(), absl::Seconds(60), t0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<std::string> asked;
  reg.ExpireClosed([&](const std::string& conn) {
    asked.push_back(conn);
    return conn != "ipv4:10.0.0.1:5001";
  });
  EXPECT_EQ(asked.size(), 2u) << "each connection asked once";
  EXPECT_EQ(reg.open(), 1u);
  absl::Status gone = reg.Abort(a->handle, t0);
  EXPECT_TRUE(absl::IsAborted(gone)) << gone;
  EXPECT_NE(gone.message().find("connection"), absl::string_view::npos) << gone;
  // A handle whose call is running is left to that call.
  ASSERT_TRUE(reg.With(c->handle, t0, [&](KvTransaction&) {
                   reg.ExpireClosed([](const std::string&) { return false; });
                   return absl::OkStatus();
                 }).ok());
  EXPECT_EQ(reg.open(), 1u);
  reg.ExpireClosed([](const std::string&) { return false; });
  EXPECT_EQ(reg.open(), 0u);
  EXPECT_EQ(store_->Stats().open_transactions, 0u);
}

TEST(Connections, TcpTablesAndPeers) {
  EXPECT_EQ(PeerAddress("ipv4:127.0.0.1:43210"), "ipv4:127.0.0.1");
  EXPECT_EQ(PeerAddress("ipv6:[::1]:43210"), "ipv6:[::1]");
  EXPECT_EQ(PeerAddress("unix:/tmp/s"), "unix:/tmp/s");
  EXPECT_EQ(PeerPort("ipv6:[::1]:443"), 443);
  EXPECT_FALSE(PeerPort("unix:/tmp/s").has_value());
  OpenConnections c;
  // Port 7420 = 0x1CFC; 43210 = 0xA8CA, 43211 = 0xA8CB (state 06: TIME_WAIT), 50000 = 0xC350.
  c.AddTable(
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:1CFC 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n"
      "   1: 0100007F:1CFC 0100007F:A8CA 01 00000000:00000000 00:00000000 00000000     0        0 2\n"
      "   2: 0100007F:1CFC 0100007F:A8CB 06 00000000:00000000 00:00000000 00000000     0        0 3\n"
      "   3: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4\n",
      7420);
  EXPECT_TRUE(c.Has("ipv4:127.0.0.1:43210"));
  EXPECT_FALSE(c.Has("ipv4:127.0.0.1:43211")) << "not established";
  EXPECT_FALSE(c.Has("ipv4:127.0.0.1:50000")) << "another local port";
  EXPECT_TRUE(c.Has("unix:/tmp/s")) << "cannot tell: kept";
}

TEST(StatsTable, CoversEveryEngineFieldOfStatsResponse) {
  std::set<std::string> table;
  for (const StatField& f : StatFields()) {
    EXPECT_TRUE(table.insert(f.name).second) << "duplicate " << f.name;
  }
  const google::protobuf::Descriptor* d = v1::StatsResponse::descriptor();
  int engine_fields = 0;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->number() >= 100) continue;  // the server's own
    ++engine_fields;
    EXPECT_TRUE(table.count(d->field(i)->name())) << d->field(i)->name() << " not in the table";
  }
  EXPECT_EQ(engine_fields, static_cast<int>(table.size())) << "table rows without a proto field";
}

// Goal: a follower's metrics before any pull: no lag yet (-1), down.
TEST(Follower, MetricsBeforeAnyPull) {
  FollowOptions o;
  o.primary = "127.0.0.1:1";
  o.subvolumes = {"a", "b"};
  Follower f(o, nullptr);  // never started: the store is not touched
  const std::string m = f.RenderMetrics();
  EXPECT_NE(m.find("cowkv_replica_lag_seconds{subvolume=\"a\"} -1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("cowkv_replica_up{subvolume=\"b\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("# TYPE cowkv_replica_pulls_total counter"), std::string::npos) << m;
  ASSERT_EQ(f.Status().size(), 2u);
  EXPECT_EQ(f.Status()[1].name, "b");
}

TEST(Metrics, RendersCountsAndCumulativeBuckets) {
  RpcMetrics m({"cowkv.v1.KV/Get", "cowkv.v1.KV/Put"});
  m.Record("cowkv.v1.KV/Get", grpc::StatusCode::OK, absl::Microseconds(50));
  m.Record("cowkv.v1.KV/Get", grpc::StatusCode::NOT_FOUND, absl::Milliseconds(3));
  m.Record("bogus/Method", grpc::StatusCode::OK, absl::Seconds(20));
  EXPECT_EQ(m.calls(), 3u);
  EXPECT_EQ(m.errors(), 1u);
  EXPECT_EQ(m.CallsOf("cowkv.v1.KV/Get"), 2u);
  std::string out;
  m.Render(&out);
  EXPECT_NE(out.find("grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Get\",grpc_code=\"NOT_FOUND\"} 1"), std::string::npos) << out;
  EXPECT_NE(out.find("grpc_server_handling_seconds_bucket{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Get\",le=\"0.0001\"} 1"), std::string::npos);
  EXPECT_NE(out.find("grpc_server_handling_seconds_bucket{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Get\",le=\"0.005\"} 2"), std::string::npos);
  EXPECT_NE(out.find("grpc_server_handling_seconds_bucket{grpc_type=\"unary\",grpc_service=\"other\",grpc_method=\"other\",le=\"+Inf\"} 1"), std::string::npos);
  {
    // Started, received and sent: a unary call one each (sent only when it
    // succeeds), streams per message.
    RpcMetrics r({"cowkv.v1.KV/Get", "cowkv.v1.Files/Read", "cowkv.v1.Files/Write"});
    for (int i = 0; i < 2; ++i) r.Started("cowkv.v1.KV/Get");
    r.Record("cowkv.v1.KV/Get", grpc::StatusCode::OK, absl::Microseconds(5));
    r.Record("cowkv.v1.KV/Get", grpc::StatusCode::NOT_FOUND, absl::Microseconds(5));
    r.Started("cowkv.v1.Files/Read");
    r.StreamMessages("cowkv.v1.Files/Read", 0, 3);
    r.Record("cowkv.v1.Files/Read", grpc::StatusCode::OK, absl::Microseconds(5));
    r.Started("cowkv.v1.Files/Write");
    r.StreamMessages("cowkv.v1.Files/Write", 4, 0);
    r.Record("cowkv.v1.Files/Write", grpc::StatusCode::OK, absl::Microseconds(5));
    std::string text;
    r.Render(&text);
    for (const char* want : {
             "grpc_server_started_total{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Get\"} 2\n",
             "grpc_server_msg_received_total{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Get\"} 2\n",
             "grpc_server_msg_sent_total{grpc_type=\"unary\",grpc_service=\"cowkv.v1.KV\",grpc_method=\"Get\"} 1\n",
             "grpc_server_msg_received_total{grpc_type=\"server_stream\",grpc_service=\"cowkv.v1.Files\",grpc_method=\"Read\"} 1\n",
             "grpc_server_msg_sent_total{grpc_type=\"server_stream\",grpc_service=\"cowkv.v1.Files\",grpc_method=\"Read\"} 3\n",
             "grpc_server_msg_received_total{grpc_type=\"client_stream\",grpc_service=\"cowkv.v1.Files\",grpc_method=\"Write\"} 4\n",
             "grpc_server_msg_sent_total{grpc_type=\"client_stream\",grpc_service=\"cowkv.v1.Files\",grpc_method=\"Write\"} 1\n"}) {
      EXPECT_NE(text.find(want), std::string::npos) << want;
    }
  }
  const std::string page = RenderPrometheus(StoreStats(), m, ServerGauges());
  EXPECT_NE(page.find("# TYPE cowkv_space_bytes gauge"), std::string::npos);
  EXPECT_EQ(page.find("# TYPE cowkv_space_bytes gauge", page.find("# TYPE cowkv_space_bytes gauge") + 1),
            std::string::npos) << "one HELP/TYPE per metric";
}

TEST(Metrics, RendersEngineLatencyHistograms) {
  StoreStats stats;
  LatencyHistogramSnapshot h;
  h.upper_bounds_seconds = {0.5, 1};
  h.cumulative_counts = {1, 3};
  h.count = 4;
  h.sum_seconds = 6;
  stats.commit_latency = {{"explicit", h}, {"interval", LatencyHistogramSnapshot()}};
  stats.log_sync_latency = h;
  {
    // Issue 14: values >= 1e9 were printed with %.9g and rounded.
    StoreStats big = stats;
    big.total_bytes = 1072693248;
    big.log_sync_bytes = (uint64_t{1} << 60) + 1;  // past a double's 53 bits
    big.commit_latency[1].latency.sum_seconds = 1234567.125;
    const std::string p = RenderPrometheus(big, RpcMetrics({}), ServerGauges());
    EXPECT_NE(p.find("cowkv_space_bytes{kind=\"total\"} 1072693248\n"), std::string::npos);
    EXPECT_NE(p.find("cowkv_log_sync_bytes_total 1152921504606846977\n"), std::string::npos);
    EXPECT_NE(p.find("cowkv_commit_duration_seconds_sum{trigger=\"interval\"} 1234567.125\n"),
              std::string::npos);
  }
  const std::string page = RenderPrometheus(stats, RpcMetrics({}), ServerGauges());
  // process_* from /proc/self, and the build.
  for (const char* metric : {"process_cpu_seconds_total ", "process_resident_memory_bytes ",
                             "process_open_fds ", "process_max_fds ", "process_start_time_seconds ",
                             "process_threads "}) {
    const size_t at = page.find(std::string("\n") + metric);
    ASSERT_NE(at, std::string::npos) << metric;
    const std::string value = page.substr(at + 1 + strlen(metric), page.find('\n', at + 1) - at - 1 - strlen(metric));
    double v = 0;
    EXPECT_TRUE(absl::SimpleAtod(value, &v) && v > 0) << metric << value;
  }
  EXPECT_NE(page.find("cowkv_build_info{version=\"0.1.0\",api=\"cowkv.v1\",commit=\""), std::string::npos);
  for (const char* want : {
           "# TYPE cowkv_commit_duration_seconds histogram\n",
           "cowkv_commit_duration_seconds_bucket{trigger=\"explicit\",le=\"0.5\"} 1\n",
           "cowkv_commit_duration_seconds_bucket{trigger=\"explicit\",le=\"1\"} 3\n",
           "cowkv_commit_duration_seconds_bucket{trigger=\"explicit\",le=\"+Inf\"} 4\n",
           "cowkv_commit_duration_seconds_sum{trigger=\"explicit\"} 6\n",
           "cowkv_commit_duration_seconds_count{trigger=\"explicit\"} 4\n",
           "cowkv_commit_duration_seconds_count{trigger=\"interval\"} 0\n",
           "# TYPE cowkv_log_sync_duration_seconds histogram\n",
           "\ncowkv_log_sync_duration_seconds_bucket{le=\"1\"} 3\n",
           "\ncowkv_log_sync_duration_seconds_sum 6\n",
           "\ncowkv_log_sync_duration_seconds_count 4\n"}) {
    EXPECT_NE(page.find(want), std::string::npos) << want;
  }
  // Admin.Stats' latency summaries are no metrics of their own.
  EXPECT_EQ(page.find("commit_us_by"), std::string::npos);
  EXPECT_EQ(page.find("log_sync_p50"), std::string::npos);
  // ... and read the same histograms.
  std::map<std::string, uint64_t> got;
  for (const StatField& f : StatFields()) got[f.name] = f.get(stats);
  EXPECT_EQ(got["commit_us_by_explicit"], 6000000u);
  EXPECT_EQ(got["commit_us_by_interval"], 0u);
  EXPECT_EQ(got["commit_mean_us"], 1500000u);
  EXPECT_EQ(got["commit_p50_us"], 750000u);  // rank 2 of 4: halfway into (0.5, 1]
  EXPECT_EQ(got["log_sync_mean_us"], 1500000u);
  EXPECT_EQ(got["log_sync_p99_us"], 1000000u);  // past the last bound: the last bound
}

TEST(Validate, EdgeChecks) {
  EXPECT_TRUE(ValidateSubvolumeName("n", "data@2026-11-22").ok());
  EXPECT_FALSE(ValidateSubvolumeName("n", "").ok());
  EXPECT_FALSE(ValidateSubvolumeName("n", std::string(256, 'a')).ok());
  EXPECT_FALSE(ValidateSubvolumeName("n", std::string("a\0", 2)).ok());
  EXPECT_TRUE(ValidateKey("k", std::string(1024, 'k')).ok());
  EXPECT_FALSE(ValidateKey("k", std::string(1025, 'k')).ok());
  EXPECT_TRUE(ValidatePath("p", "").ok());
  EXPECT_TRUE(ValidatePath("p", "/a//b/").ok());
  EXPECT_FALSE(ValidatePath("p", std::string("/a\0", 3)).ok());
  EXPECT_FALSE(ValidatePath("p", "/" + std::string(256, 'n')).ok());
  EXPECT_TRUE(ValidateByteRange("r", 0, UINT64_C(1) << 62).ok());
  EXPECT_FALSE(ValidateByteRange("r", UINT64_MAX, 0).ok());
  EXPECT_FALSE(ValidateByteRange("r", INT64_MAX, 1).ok());
  EXPECT_EQ(KeyForMessage(std::string("a\0b", 3)), "a\\x00\\x62");
}

// docs/api.md "Limits": a path has at most 256 components; one more is
// INVALID_ARGUMENT with the POSIX name EINVAL and the limit in the message.
TEST(Validate, PathDepth) {
  std::string deep;
  for (int i = 0; i < 256; ++i) deep += "/d";
  EXPECT_TRUE(ValidatePath("path", deep).ok());
  EXPECT_TRUE(ValidatePath("path", deep + "//").ok());  // empty components do not count
  const absl::Status s = ValidatePath("path", deep + "/d");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(s.message(), "EINVAL: path: a path has at most 256 components");
}

TEST(Validate, PathComponentsNamesAndRanges) {
  for (const char* bad : {"/a/../b", "..", "/.", "a/./b", "/a/.."}) {
    const absl::Status s = ValidatePath("path", bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_EQ(s.message().rfind("EINVAL: ", 0), 0u) << s;
  }
  EXPECT_TRUE(ValidatePath("path", "/a/.b/..c/...").ok());
  std::string longest;  // 16 components of 255 bytes: 4096 bytes, the limit
  for (int i = 0; i < 16; ++i) longest += "/" + std::string(255, 'p');
  EXPECT_TRUE(ValidatePath("path", longest).ok());
  EXPECT_EQ(ValidatePath("path", longest + "q").message().rfind("ENAMETOOLONG: ", 0), 0u);
  EXPECT_EQ(ValidatePath("path", "/" + std::string(256, 'n')).message().rfind("ENAMETOOLONG: ", 0),
            0u);
  for (const char* root : {"", "/", "///"}) {
    EXPECT_TRUE(ValidatePath("path", root).ok()) << root;
    EXPECT_TRUE(absl::IsInvalidArgument(ValidateNamedPath("path", root))) << root;
  }
  EXPECT_TRUE(ValidateNamedPath("path", "/a").ok());
  EXPECT_TRUE(ValidatePathOrIno("path", std::string("\0", 1), 257).ok());  // the ino wins
  EXPECT_FALSE(ValidatePathOrIno("path", std::string("\0", 1), 0).ok());
  EXPECT_TRUE(ValidateSymlinkTarget("../x").ok());
  EXPECT_FALSE(ValidateSymlinkTarget("").ok());
  EXPECT_FALSE(ValidateSymlinkTarget(std::string(4096, 't')).ok());
  EXPECT_FALSE(ValidateSymlinkTarget(std::string("a\0b", 3)).ok());
  EXPECT_TRUE(ValidateFileEnd("w", (1ull << 50) - 1, 1).ok());
  const absl::Status efbig = ValidateFileEnd("w", (1ull << 50) - 1, 2);
  EXPECT_EQ(efbig.message().rfind("EFBIG: ", 0), 0u) << efbig;
  EXPECT_FALSE(ValidateFileEnd("w", UINT64_MAX, 0).ok());
}

}  // namespace
}  // namespace server
}  // namespace cowkv

namespace cowkv {
namespace server {
namespace {

// 1,000 unparsable requests wrote 1,000 protobuf log lines (issue 14):
// at most `burst` per window now, and the next admitted line says how many
// were dropped.
TEST(ProtobufLog, RateLimited) {
  LogRateLimit limit(10, absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  uint64_t dropped = 0;
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) admitted += limit.Admit(t0 + absl::Milliseconds(i), &dropped);
  EXPECT_EQ(admitted, 10);
  ASSERT_TRUE(limit.Admit(t0 + absl::Seconds(11), &dropped));
  EXPECT_EQ(dropped, 990u);
  ASSERT_TRUE(limit.Admit(t0 + absl::Seconds(11), &dropped));
  EXPECT_EQ(dropped, 0u);
}

// Goal: a log line is one line and one JSON object whatever its values hold
// (quotes, backslashes, newlines, control bytes, '='), the text form quotes
// anything that is not one plain word, and levels below the set one are
// not written.
TEST(Log, JsonAndTextLinesSurviveHostileValues) {
  const std::string hostile = "a \"b\" \\ c\nd\te\x01=f";
  std::ostringstream json;
  InitLogging(LogFormat::kJson, LogLevel::kInfo, &json);
  Log(LogLevel::kWarn, "ev\"ent", hostile).Str("k", hostile).Num("n", uint64_t{18446744073709551615u})
      .Num("x", 0.5).Bool("b", true);
  Log(LogLevel::kDebug, "hidden", "below the level");
  const std::string out = json.str();
  ASSERT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["event"], "ev\"ent");
  EXPECT_EQ(j["msg"], hostile);
  EXPECT_EQ(j["k"], hostile);
  EXPECT_EQ(j["n"].get<uint64_t>(), 18446744073709551615u);
  EXPECT_EQ(j["x"], 0.5);
  EXPECT_EQ(j["b"], true);
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["ts"].get<std::string>().back(), 'Z');

  std::ostringstream text;
  InitLogging(LogFormat::kText, LogLevel::kDebug, &text);
  Log(LogLevel::kDebug, "plain", "one").Str("word", "simple").Str("spaced", "two words")
      .Str("empty", "").Str("hostile", hostile);
  const std::string line = text.str();
  ASSERT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  EXPECT_NE(line.find(" debug plain msg=one word=simple spaced=\"two words\" empty=\"\" "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("hostile=\"a \\\"b\\\" \\\\ c\\nd\\te\\u0001=f\""), std::string::npos)
      << line;
  InitLogging(LogFormat::kText, LogLevel::kInfo);
}

}  // namespace
}  // namespace server
}  // namespace cowkv
