// Watch's engine parts one by one: the durable-revision watermark
// (DurableRevision: log syncs wait for their base generation, commits,
// Kick, Close, Wait), and the store's ReadEvents edges (bad start, future
// revision, a deleted subvolume, a wait woken by a durable write).
#include <thread>

#include "absl/time/clock.h"
#include "cowkv/errors.h"
#include "cowkv/store.h"
#include "engine/store/durable_revision.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

TEST(DurableRevision, LogSyncWaitsForItsBaseGeneration) {
  DurableRevision d(10, 3);
  EXPECT_EQ(d.state().revision, 10u);
  d.Synced(3, 12);  // the chain extends the durable generation
  EXPECT_EQ(d.state().revision, 12u);
  d.Synced(4, 15);  // generation 4 is still being written
  EXPECT_EQ(d.state().revision, 12u);
  d.Synced(5, 18);
  d.Committed(4, 14);  // 4 durable: its sync's 15 too, not 5's 18
  EXPECT_EQ(d.state().revision, 15u);
  d.Committed(5, 16);
  EXPECT_EQ(d.state().revision, 18u);
  d.Committed(0, 17);  // never backwards
  EXPECT_EQ(d.state().revision, 18u);
}

TEST(DurableRevision, EpochMovesAndWaitReturns) {
  DurableRevision d(1, 1);
  DurableState s = d.state();
  // Nothing moves: the wait times out with the same state.
  EXPECT_EQ(d.Wait(s, absl::Milliseconds(5)).epoch, s.epoch);
  d.Committed(2, 2);
  DurableState t = d.Wait(s, absl::Seconds(10));
  EXPECT_EQ(t.revision, 2u);
  EXPECT_GT(t.epoch, s.epoch);
  d.Kick();  // a deletion: same revision, new epoch
  DurableState k = d.Wait(t, absl::Seconds(10));
  EXPECT_EQ(k.revision, 2u);
  EXPECT_GT(k.epoch, t.epoch);
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    d.Close();
  });
  EXPECT_TRUE(d.Wait(k, absl::Seconds(30)).closed);
  closer.join();
}

class WatchStoreTest : public testing::StoreTest {};

TEST_F(WatchStoreTest, ReadEventsEdges) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store_->DefaultSubvolume());
  ASSERT_OK_AND_ASSIGN(uint64_t r1, sv->PutItem("a", "1", Durability::kDurable));
  ASSERT_OK_AND_ASSIGN(uint64_t r2, sv->PutItem("a", "2", Durability::kAsync));
  EventsRequest q;
  q.from_revision = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(sv->ReadEvents(q).status()));
  q.from_revision = 1;
  q.to_revision = r2 + 5;
  EXPECT_EQ(ReasonOf(sv->ReadEvents(q).status()), ErrorReason::kFutureRevision);
  // The default end is the durable revision: the async put is not shown yet.
  q.to_revision = 0;
  q.prev_kv = true;
  ASSERT_OK_AND_ASSIGN(EventsResult r, sv->ReadEvents(q));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].kv.value, "1");
  EXPECT_FALSE(r.events[0].has_prev);
  EXPECT_EQ(r.next_revision, r1 + 1);
  // A waiter is woken by the commit that makes it durable.
  const DurableState seen = store_->Durable();
  std::thread committer([&] { ASSERT_OK(store_->Commit()); });
  DurableState now = store_->WaitDurable(seen, absl::Seconds(30));
  committer.join();
  while (now.revision < r2) now = store_->WaitDurable(now, absl::Seconds(30));
  q.from_revision = r.next_revision;
  ASSERT_OK_AND_ASSIGN(r, sv->ReadEvents(q));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].kv.value, "2");
  EXPECT_EQ(r.events[0].kv.version, 2u);
  EXPECT_EQ(r.events[0].prev_kv.value, "1");
}

// A commit at revision 0 (a subvolume created before any KV write) still
// makes its generation durable: the log syncs after it are durable at once.
TEST_F(WatchStoreTest, DurableWriteIsShownAtOnceAfterACommitAtRevisionZero) {
  ASSERT_OK(store_->CreateSubvolume("first").status());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store_->OpenSubvolume("first"));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(uint64_t r, sv->PutItem("k", "v", Durability::kDurable));
    EXPECT_EQ(store_->Durable().revision, r);
  }
}

TEST_F(WatchStoreTest, DeletedSubvolumeIsNotFoundAndMovesTheEpoch) {
  ASSERT_OK(store_->CreateSubvolume("w").status());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store_->OpenSubvolume("w"));
  ASSERT_OK(sv->PutItem("k", "v", Durability::kDurable).status());
  EventsRequest q;
  ASSERT_OK(sv->ReadEvents(q).status());
  const DurableState before = store_->Durable();
  ASSERT_OK(store_->DeleteSubvolume("w"));
  EXPECT_GT(store_->Durable().epoch, before.epoch);
  EXPECT_TRUE(absl::IsNotFound(sv->ReadEvents(q).status()));
}

// Revisions are store-wide: a subvolume whose first KV change comes after
// other subvolumes' changes still has complete events from the mount on (a
// watcher created before its first put must not be told COMPACTED).
TEST_F(WatchStoreTest, EventsBeforeASubvolumesFirstChangeAreNotCompacted) {
  ASSERT_OK(store_->CreateSubvolume("quiet").status());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> quiet, store_->OpenSubvolume("quiet"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> busy, store_->DefaultSubvolume());
  const uint64_t start = store_->Durable().revision + 1;  // a watcher from "now"
  for (int i = 0; i < 3; ++i) ASSERT_OK(busy->PutItem("b", "x", Durability::kDurable).status());
  EventsRequest q;
  q.from_revision = start;
  ASSERT_OK_AND_ASSIGN(EventsResult r, quiet->ReadEvents(q));
  EXPECT_TRUE(r.events.empty());
  ASSERT_OK_AND_ASSIGN(uint64_t rev, quiet->PutItem("q", "1", Durability::kDurable));
  ASSERT_OK_AND_ASSIGN(r, quiet->ReadEvents(q));
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].revision(), rev);
}

}  // namespace
}  // namespace cowkv
