// Goal: `cowkvd --follow` keeps a read replica equal to the primary: it
// catches up after writes (KV values inline and in extents, files), serves
// reads and refuses writes under the followed name, survives being killed
// mid-pull (restart, catch up again, no leftovers), rotates the primary's
// follow snapshots, and when the primary goes down keeps serving the last
// replica while Stats reports the failure.
// Method: two cowkvd subprocesses (cowkvd_process.h), the follower pulling
// every 0.2 s; "caught up" = the replica's digest equals the primary's
// subvolume's (no write in between). Replay: the writes are seeded
// (FOLLOW_SEED).
#include <random>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cowkv/v1/admin.grpc.pb.h"
#include "cowkv/v1/files.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "cowkv/v1/subvolumes.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cowkvd_process.h"

namespace cowkv {
namespace server {
namespace {

using testing_process::Cowkvd;
using testing_process::TempDir;

struct Client {
  explicit Client(int port) {
    auto ch = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                  grpc::InsecureChannelCredentials());
    kv = v1::KV::NewStub(ch);
    files = v1::Files::NewStub(ch);
    sv = v1::Subvolumes::NewStub(ch);
    admin = v1::Admin::NewStub(ch);
  }
  std::unique_ptr<v1::KV::Stub> kv;
  std::unique_ptr<v1::Files::Stub> files;
  std::unique_ptr<v1::Subvolumes::Stub> sv;
  std::unique_ptr<v1::Admin::Stub> admin;
};

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return c;
}

grpc::Status Put(Client& c, const std::string& key, const std::string& value) {
  v1::PutRequest req;
  req.set_subvolume("data");
  req.set_key(key);
  req.set_value(value);
  v1::PutResponse resp;
  return c.kv->Put(Ctx().get(), req, &resp);
}

grpc::Status WriteFile(Client& c, const std::string& path, const std::string& data) {
  auto ctx = Ctx();
  v1::WriteResponse resp;
  auto w = c.files->Write(ctx.get(), &resp);
  v1::WriteRequest m;
  m.set_subvolume("data");
  m.set_path(path);
  m.set_create(true);
  m.set_truncate(true);
  m.set_data(data);
  w->Write(m);
  w->WritesDone();
  return w->Finish();
}

// Seeded writes: KV puts (some past the inline size) and file writes.
void Writes(Client& c, std::mt19937_64& rng, int n) {
  for (int i = 0; i < n; ++i) {
    const int r = static_cast<int>(rng() % 4);
    if (r == 0) {
      ASSERT_TRUE(WriteFile(c, absl::StrCat("/f", rng() % 6), std::string(1 + rng() % 200000, 'a' + r))
                      .ok());
    } else {
      const size_t len = rng() % 5 == 0 ? 20000 + rng() % 50000 : rng() % 300;
      ASSERT_TRUE(Put(c, absl::StrCat("k", rng() % 100), std::string(len, 'a' + rng() % 26)).ok());
    }
  }
}

std::string Digest(Client& c, const std::string& name) {
  v1::DigestSubvolumeRequest req;
  req.set_name(name);
  v1::DigestSubvolumeResponse resp;
  grpc::Status s = c.sv->Digest(Ctx().get(), req, &resp);
  return s.ok() ? resp.sha256() : absl::StrCat("error: ", s.error_message());
}

// Waits (up to 60 s) until the replica's digest equals the primary's.
bool CaughtUp(Client& primary, Client& follower) {
  const std::string want = Digest(primary, "data");
  for (int i = 0; i < 600; ++i) {
    if (Digest(follower, "data") == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::vector<std::string> FollowSnapshots(Client& c) {
  v1::ListSubvolumesResponse resp;
  EXPECT_TRUE(c.sv->List(Ctx().get(), v1::ListSubvolumesRequest(), &resp).ok());
  std::vector<std::string> out;
  for (const v1::SubvolumeInfo& s : resp.subvolumes()) {
    if (absl::StartsWith(s.name(), "data@follow-")) out.push_back(s.name());
  }
  return out;
}

v1::ReplicaStatus Replica(Client& c) {
  v1::StatsResponse st;
  EXPECT_TRUE(c.admin->Stats(Ctx().get(), v1::StatsRequest(), &st).ok());
  return st.server_replicas_size() > 0 ? st.server_replicas(0) : v1::ReplicaStatus();
}

TEST(Follower, CatchesUpSurvivesKillAndPrimaryOutage) {
  const char* seed_env = std::getenv("FOLLOW_SEED");
  std::mt19937_64 rng(seed_env ? std::strtoull(seed_env, nullptr, 10) : 1);
  const std::string pdev = absl::StrCat(TempDir(), "/follow-primary-", getpid(), ".img");
  const std::string fdev = absl::StrCat(TempDir(), "/follow-replica-", getpid(), ".img");
  Cowkvd primary(pdev);
  ASSERT_TRUE(primary.Start()) << primary.Log();
  Client p(primary.port());
  v1::CreateSubvolumeRequest create;
  create.set_name("data");
  v1::SubvolumeInfo info;
  ASSERT_TRUE(p.sv->Create(Ctx().get(), create, &info).ok());
  Writes(p, rng, 60);
  ASSERT_TRUE(Put(p, "fixed", "v").ok());
  Cowkvd follower(fdev, {"--follow", absl::StrCat("127.0.0.1:", primary.port()),
                         "--follow-subvolume", "data", "--follow-interval", "0.2"});
  ASSERT_TRUE(follower.Start()) << follower.Log();
  Client f(follower.port());
  ASSERT_TRUE(CaughtUp(p, f)) << follower.Log();
  // Reads are served, writes refused (a read-only snapshot).
  v1::GetRequest get;
  get.set_subvolume("data");
  get.set_key("fixed");
  v1::GetResponse got;
  EXPECT_TRUE(f.kv->Get(Ctx().get(), get, &got).ok());
  grpc::Status w = Put(f, "fixed", "x");
  EXPECT_EQ(w.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << w.error_message();
  // More writes, caught up incrementally.
  Writes(p, rng, 40);
  ASSERT_TRUE(CaughtUp(p, f)) << follower.Log();
  // (The counters move just after the replica does.)
  v1::ReplicaStatus r1 = Replica(f);
  for (int i = 0; i < 50 && r1.pulls() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r1 = Replica(f);
  }
  EXPECT_GE(r1.pulls(), 2u) << r1.DebugString();
  EXPECT_GT(r1.bytes_received(), 0u);
  EXPECT_GE(r1.lag_seconds(), 0.0);
  // Killed (mid-pull, often: one pull every 0.2 s while big writes land).
  for (int round = 0; round < 3; ++round) {
    Writes(p, rng, 30);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 400));
    follower.Kill9();
    Writes(p, rng, 10);
    ASSERT_TRUE(follower.Start()) << follower.Log();
    ASSERT_TRUE(CaughtUp(p, f)) << "round " << round << ": " << follower.Log();
  }
  // Rotation: the primary keeps the last follow snapshot (and maybe one
  // being made); the replica has no leftover of a cut pull.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_LE(FollowSnapshots(p).size(), 2u);
  // A pull in flight shows its snapshot on the replica for a moment (a
  // loaded machine stretches it): a leftover is one that never goes.
  bool clean = false;
  for (int i = 0; i < 200 && !clean; ++i) {
    clean = FollowSnapshots(f).empty();
    if (!clean) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(clean) << "follow snapshots left on the replica";
  // The primary goes down: the replica keeps serving, Stats says why.
  const std::string last = Digest(f, "data");
  EXPECT_EQ(primary.Stop(), 0);
  v1::ReplicaStatus r2;
  for (int i = 0; i < 100 && r2.last_error().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r2 = Replica(f);
  }
  EXPECT_FALSE(r2.last_error().empty());
  EXPECT_GT(r2.failures(), 0u);
  EXPECT_EQ(Digest(f, "data"), last);
  EXPECT_TRUE(f.kv->Get(Ctx().get(), get, &got).ok());
  EXPECT_EQ(follower.Stop(), 0) << follower.Log();
  unlink(pdev.c_str());
  unlink(fdev.c_str());
}

}  // namespace
}  // namespace server
}  // namespace cowkv

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    fprintf(stderr, "usage: follower_test PATH_TO_COWKVD\n");
    return 2;
  }
  cowkv::server::testing_process::g_cowkvd = argv[1];
  return RUN_ALL_TESTS();
}
