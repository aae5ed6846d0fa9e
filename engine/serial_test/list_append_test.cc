// Goal: cowkv's client transactions (KvTransaction) are strictly
// serializable under contention: no lost or reordered update, no dirty or
// intermediate read, no write skew or any other dependency cycle, and no
// read that misses a transaction which committed before it began.
// Method: Elle's list-append workload. Six threads run 20,000 committed
// transactions (--ops=N) of 1-4 micro-ops over 16 hot keys, each a read of
// a key's list or an append of a globally unique element to it (read the
// value, append ",<elem>", write it back), with yields or short sleeps
// between micro-ops so that transactions overlap even on two cores; one in
// eight commits is kDurable, the rest kAsync, while the background
// committer commits every 10 ms. Every attempt takes fresh elements, so an
// aborted attempt's elements must never be seen; a thread retries ABORTED
// and OUT_OF_RANGE itself and records only the final attempt of each
// committed transaction (its reads, appends, commit revision and start/end
// times). Keys rotate to fresh ones before a list outgrows the inline value
// limit (Elle's max-writes-per-key). The history and the final lists then
// go through list_append_checker.h: direct G1a/G1b/prefix/lost-append
// checks and the ww/wr/rw/rt dependency graph, which must be acyclic; a
// cycle is printed with the transactions' ops. Afterwards the store is
// closed, `check` must be clean, and the reopened store must hold the same
// lists. A second run shrinks the conflict window to 8 keys so that "too
// old" (OUT_OF_RANGE) retries happen too. To show that the checker fails
// when it should: hand-built histories (write skew, lost update,
// interleaved appends, aborted and intermediate reads, a stale read) and a
// deliberately broken client that reads outside its transaction.
// Replay: --seed=N --ops=M (printed on failure; thread timing still varies).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/serial_test/list_append_checker.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace serial_test {
namespace {

using ::testing::HasSubstr;
using testing::ExpectCheckClean;
using testing::Flags;

constexpr int kThreads = 6;
constexpr int kKeys = 16;
constexpr int kMaxOpsPerTxn = 4;
constexpr uint64_t kDefaultTxns = 20000;
constexpr uint64_t kDefaultSeed = 1;
constexpr int kMaxAttempts = 2000;  // per transaction; more is a livelock
constexpr char kPrefix[] = "la/";

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Retryable(const absl::Status& s) { return absl::IsAborted(s) || absl::IsOutOfRange(s); }

// Lets other threads run inside a transaction: on two cores a thread would
// otherwise finish hundreds of transactions per time slice, alone.
void Pause(std::mt19937_64& rng) {
  const uint64_t r = rng() % 16;
  if (r == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
  } else if (r < 8) {
    std::this_thread::yield();
  }
}

// A transaction's shape, fixed across its attempts; key slots resolve to
// keys of the current generation at each attempt.
struct PlannedOp {
  bool append = false;
  int slot = 0;
};

struct Shared {
  Shared(Subvolume* subvol, uint64_t seed_, uint64_t txns, size_t max_value_size)
      : sv(subvol),
        seed(seed_),
        target_txns(txns),
        // Up to 11 bytes an element; lists stay under half the value limit.
        appends_per_key(std::max<uint64_t>(8, max_value_size / 22)) {}

  Subvolume* const sv;
  const uint64_t seed;
  const uint64_t target_txns;
  const uint64_t appends_per_key;  // per key generation
  bool untracked_reads = false;    // the broken client: read outside the transaction
  int readers = 0;                 // threads running read-only transactions meanwhile
  std::atomic<uint64_t> claimed{0};
  std::atomic<Elem> next_elem{1};
  std::atomic<uint64_t> committed_appends{0};
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> durable_txns{0};
  std::atomic<uint64_t> max_attempts_seen{0};
  std::atomic<bool> failed{false};
  std::vector<std::vector<TxnRecord>> records{kThreads};  // per thread
  // Attempts that failed at commit, with what they read (per thread).
  std::vector<std::vector<TxnRecord>> attempts{kThreads};
  // Read-only transactions (RunReader) and how many failed to commit.
  std::atomic<uint64_t> readonly_commits{0};
  std::atomic<uint64_t> readonly_failures{0};
};

std::string KeyFor(const Shared& s, int slot) {
  const uint64_t generation = s.committed_appends.load() / (kKeys * s.appends_per_key);
  return absl::StrFormat("%sk%06d", kPrefix, generation * kKeys + slot);
}

std::vector<PlannedOp> Plan(std::mt19937_64& rng) {
  std::vector<PlannedOp> plan(1 + rng() % kMaxOpsPerTxn);
  for (PlannedOp& op : plan) {
    op.append = rng() % 2 == 0;
    op.slot = static_cast<int>(rng() % kKeys);
  }
  return plan;
}

// One attempt; the record of what it saw if it committed.
absl::StatusOr<TxnRecord> Attempt(Shared* s, const std::vector<PlannedOp>& plan, Durability d,
                                  int thread, std::mt19937_64& rng) {
  TxnRecord rec;
  rec.thread = thread;
  rec.start_ns = NowNs();
  absl::StatusOr<std::unique_ptr<KvTransaction>> tx = s->sv->BeginTransaction();
  if (!tx.ok()) return tx.status();
  rec.read_revision = (*tx)->read_revision();
  for (const PlannedOp& op : plan) {
    Pause(rng);
    std::string key = KeyFor(*s, op.slot);
    absl::StatusOr<KeyValue> got = s->untracked_reads ? s->sv->GetItem(key) : (*tx)->Get(key);
    if (!got.ok() && !absl::IsNotFound(got.status())) return got.status();
    const std::string value = got.ok() ? got->value : "";
    absl::StatusOr<List> list = ParseList(value);
    if (!list.ok()) return list.status();
    if (!op.append) {
      rec.ops.push_back(MicroOp::Read(std::move(key), *std::move(list)));
      continue;
    }
    const Elem elem = s->next_elem.fetch_add(1);
    if (absl::Status p = (*tx)->Put(key, AppendToValue(value, elem)); !p.ok()) return p;
    rec.ops.push_back(MicroOp::Append(std::move(key), *std::move(list), elem));
  }
  Pause(rng);
  absl::StatusOr<uint64_t> rev = (*tx)->Commit(d);
  if (!rev.ok()) {
    // What the application saw before the commit failed must be one
    // revision's state too.
    if (absl::IsAborted(rev.status())) s->attempts[thread].push_back(std::move(rec));
    return rev.status();
  }
  rec.end_ns = NowNs();
  rec.revision = *rev;
  return rec;
}

// Runs one planned transaction until it commits; false on a hard failure.
bool RunTxn(Shared* s, std::mt19937_64& rng, int thread) {
  const std::vector<PlannedOp> plan = Plan(rng);
  const Durability d = rng() % 8 == 0 ? Durability::kDurable : Durability::kAsync;
  absl::Status last;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    if (attempt > 0) {
      s->retries.fetch_add(1);
      const uint64_t cap_us = std::min<uint64_t>(2000, uint64_t{20} << std::min(attempt, 7));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % (cap_us + 1)));
    }
    absl::StatusOr<TxnRecord> rec = Attempt(s, plan, d, thread, rng);
    if (rec.ok()) {
      uint64_t appends = 0;
      for (const MicroOp& op : rec->ops) appends += op.kind == MicroOp::Kind::kAppend;
      s->committed_appends.fetch_add(appends);
      if (d == Durability::kDurable) s->durable_txns.fetch_add(1);
      uint64_t seen = s->max_attempts_seen.load();
      while (attempt + 1 > seen && !s->max_attempts_seen.compare_exchange_weak(seen, attempt + 1)) {
      }
      s->records[thread].push_back(*std::move(rec));
      return true;
    }
    last = rec.status();
    if (!Retryable(last)) break;
  }
  ADD_FAILURE() << "thread " << thread << ": transaction failed: " << last
                << " (replay: --seed=" << s->seed << " --ops=" << s->target_txns << ")";
  return false;
}

// A read-only transaction of every key, again and again while the writers
// run: each must commit at its first attempt (issue 18), and its reads go
// into the history like any transaction's.
void RunReader(Shared* s, int reader, std::atomic<bool>* stop, std::vector<TxnRecord>* out) {
  std::mt19937_64 rng(s->seed * 7919 + reader);
  while (!stop->load()) {
    TxnRecord rec;
    rec.thread = kThreads + reader;
    rec.start_ns = NowNs();
    absl::StatusOr<std::unique_ptr<KvTransaction>> tx = s->sv->BeginTransaction();
    if (!tx.ok()) {
      s->readonly_failures.fetch_add(1);
      continue;
    }
    rec.read_revision = (*tx)->read_revision();
    bool failed = false;
    for (int slot = 0; slot < kKeys && !failed; ++slot) {
      Pause(rng);
      std::string key = KeyFor(*s, slot);
      absl::StatusOr<KeyValue> got = (*tx)->Get(key);
      if (!got.ok() && !absl::IsNotFound(got.status())) {
        failed = true;
        break;
      }
      absl::StatusOr<List> list = ParseList(got.ok() ? got->value : "");
      if (!list.ok()) {
        failed = true;
        break;
      }
      rec.ops.push_back(MicroOp::Read(std::move(key), *std::move(list)));
    }
    absl::StatusOr<uint64_t> rev = failed ? absl::AbortedError("read failed") : (*tx)->Commit();
    if (!rev.ok()) {
      s->readonly_failures.fetch_add(1);
      continue;
    }
    rec.end_ns = NowNs();
    rec.revision = *rev;
    s->readonly_commits.fetch_add(1);
    out->push_back(std::move(rec));
  }
}

void RunClient(Shared* s, int thread) {
  std::mt19937_64 rng(s->seed * 1000003 + thread);
  while (!s->failed.load() && s->claimed.fetch_add(1) < s->target_txns) {
    if (!RunTxn(s, rng, thread)) s->failed = true;
  }
}

absl::StatusOr<std::map<std::string, List>> ReadFinalLists(Subvolume* sv) {
  RangeRequest req;
  req.prefix = kPrefix;
  absl::StatusOr<RangeResult> r = sv->Range(req);
  if (!r.ok()) return r.status();
  std::map<std::string, List> lists;
  for (const KeyValue& kv : r->kvs) {
    absl::StatusOr<List> list = ParseList(kv.value);
    if (!list.ok()) return list.status();
    lists[kv.key] = *std::move(list);
  }
  return lists;
}

Options WorkloadOptions() {
  Options o = testing::TestOptions();
  o.commit_interval_ms = 10;
  o.dirty_bytes_max = 8 << 20;
  return o;
}

// Runs the workload to `txns` commits on `sv`; the history of what it saw.
void RunWorkload(Shared* s, History* history) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(RunClient, s, t);
  std::atomic<bool> stop{false};
  std::vector<std::vector<TxnRecord>> read_only(s->readers);
  std::vector<std::thread> readers;
  for (int r = 0; r < s->readers; ++r) readers.emplace_back(RunReader, s, r, &stop, &read_only[r]);
  for (std::thread& t : threads) t.join();
  stop = true;
  for (std::thread& t : readers) t.join();
  for (std::vector<TxnRecord>& r : read_only) {
    for (TxnRecord& t : r) history->txns.push_back(std::move(t));
  }
  ASSERT_FALSE(s->failed.load());
  for (std::vector<TxnRecord>& r : s->records) {
    for (TxnRecord& t : r) history->txns.push_back(std::move(t));
  }
  for (std::vector<TxnRecord>& r : s->attempts) {
    for (TxnRecord& t : r) history->attempts.push_back(std::move(t));
  }
  ASSERT_OK_AND_ASSIGN(history->final_lists, ReadFinalLists(s->sv));
}

void PrintSummary(const Shared& s, const History& h, const CheckResult& r,
                  const StoreStats& stats, double seconds, double check_ms) {
  std::cout << "list-append: " << h.txns.size() << " committed transactions ("
            << s.durable_txns.load() << " durable, " << s.committed_appends.load()
            << " appends over " << h.final_lists.size() << " keys) in " << seconds << " s; "
            << s.retries.load() << " retries (most attempts for one: "
            << s.max_attempts_seen.load() << "), kv_conflicts " << stats.kv_conflicts
            << ", kv_too_old " << stats.kv_too_old << ", engine commits " << stats.commits
            << "; graph: " << r.ww_edges << " ww, " << r.wr_edges << " wr, " << r.rw_edges
            << " rw, " << r.rt_edges << " rt edges, checked in " << check_ms << " ms\n";
}

// The workload on a fresh store with `options`, then the checker, `check`
// and a reopen. `txns` 0 means --ops or the default.
void RunChecked(const Options& options, uint64_t txns, bool expect_too_old) {
  const uint64_t seed = Flags().seed ? Flags().seed : kDefaultSeed;
  if (txns == 0) txns = Flags().ops ? Flags().ops : kDefaultTxns;
  const std::string replay = absl::StrCat("replay: --seed=", seed, " --ops=", txns);
  SCOPED_TRACE(replay);
  MemDevice dev(512ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(16384)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(&dev, options));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store->DefaultSubvolume());
  Shared shared(sv.get(), seed, txns, store->max_value_size());

  History history;
  const int64_t t0 = NowNs();
  ASSERT_NO_FATAL_FAILURE(RunWorkload(&shared, &history));
  const int64_t t1 = NowNs();
  const CheckResult result = CheckListAppend(history);
  const StoreStats stats = store->Stats();
  PrintSummary(shared, history, result, stats, (t1 - t0) / 1e9, (NowNs() - t1) / 1e6);
  EXPECT_EQ(history.txns.size(), txns);
  EXPECT_TRUE(result.ok()) << result.problems.size() << " problem(s):\n"
                           << absl::StrJoin(result.problems, "\n") << "\n" << replay;
  EXPECT_GT(stats.kv_conflicts, 0u) << "no contention: the test exercised nothing";
  EXPECT_GT(result.rw_edges, 0u);
  if (expect_too_old) {
    EXPECT_GT(stats.kv_too_old, 0u);
  }

  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_OK_AND_ASSIGN(sv, store->DefaultSubvolume());
  ASSERT_OK_AND_ASSIGN(auto reopened, ReadFinalLists(sv.get()));
  EXPECT_TRUE(reopened == history.final_lists) << "lists changed across close and reopen";
  ASSERT_OK(store->Close());
}

TEST(ListAppend, StrictlySerializable) { RunChecked(WorkloadOptions(), 0, false); }

// A conflict window of 8 keys: transactions that sleep fall out of it and
// retry as "too old" (OUT_OF_RANGE); the history must be just as clean.
TEST(ListAppend, StrictlySerializableWithSmallConflictWindow) {
  Options o = WorkloadOptions();
  o.conflict_window_keys = 8;
  RunChecked(o, kDefaultTxns / 4, true);
}

// The same workload through a deliberately broken client that reads each
// key outside its transaction (Subvolume::GetItem), so validation never sees
// the read: updates get lost, and the checker must say so.
TEST(ListAppend, CheckerCatchesABrokenClient) {
  const uint64_t seed = Flags().seed ? Flags().seed : kDefaultSeed;
  MemDevice dev(256ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(16384)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(&dev, WorkloadOptions()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store->DefaultSubvolume());
  CheckResult result;
  // Lost updates need two clients to interleave; ten rounds make it all but certain.
  for (int round = 0; round < 10 && result.ok(); ++round) {
    Shared shared(sv.get(), seed + round, 2000, store->max_value_size());
    shared.untracked_reads = true;
    History history;
    ASSERT_NO_FATAL_FAILURE(RunWorkload(&shared, &history));
    result = CheckListAppend(history);
    // The next round starts on fresh keys.
    RangeRequest all;
    all.prefix = kPrefix;
    ASSERT_OK_AND_ASSIGN(RangeResult r, sv->Range(all));
    for (const KeyValue& kv : r.kvs) ASSERT_OK(sv->Delete(kv.key));
  }
  ASSERT_FALSE(result.ok()) << "a client with untracked reads produced a clean history";
  std::cout << "the checker on a broken client (first problem):\n" << result.problems[0] << "\n";
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

// Issue 18: read-only transactions under the write load all commit, and
// every transaction (committed or not) read one revision.
TEST(ListAppend, ReadOnlyTransactionsAlwaysCommitUnderWriteLoad) {
  const uint64_t seed = Flags().seed ? Flags().seed : kDefaultSeed;
  MemDevice dev(256ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(16384)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(&dev, WorkloadOptions()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store->DefaultSubvolume());
  Shared shared(sv.get(), seed, kDefaultTxns / 4, store->max_value_size());
  shared.readers = 2;
  History history;
  ASSERT_NO_FATAL_FAILURE(RunWorkload(&shared, &history));
  const CheckResult result = CheckListAppend(history);
  std::cout << "read-only transactions: " << shared.readonly_commits.load() << " committed, "
            << shared.readonly_failures.load() << " failed; " << history.attempts.size()
            << " aborted read-write attempts checked\n";
  EXPECT_GT(shared.readonly_commits.load(), 10u);
  EXPECT_EQ(shared.readonly_failures.load(), 0u);
  EXPECT_GT(history.attempts.size(), 0u) << "no aborted attempt: nothing checked there";
  EXPECT_TRUE(result.ok()) << absl::StrJoin(result.problems, "\n");
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

// The planted bug kTxnReadsLatest: a transaction's Get reads the latest
// value. Read-write commits still validate, but what the transactions saw
// (read-only ones, aborted attempts) is no single revision's state.
TEST(ListAppend, CheckerCatchesTxnReadsLatest) {
  const uint64_t seed = Flags().seed ? Flags().seed : kDefaultSeed;
  MemDevice dev(256ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(16384)));
  Options o = WorkloadOptions();
  o.test_hooks.planted_bug = Options::TestHooks::PlantedBug::kTxnReadsLatest;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(&dev, o));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store->DefaultSubvolume());
  Shared shared(sv.get(), seed, 1000, store->max_value_size());
  shared.readers = 2;
  History history;
  ASSERT_NO_FATAL_FAILURE(RunWorkload(&shared, &history));
  const CheckResult result = CheckListAppend(history);
  ASSERT_FALSE(result.ok()) << "reads of the latest value went unnoticed";
  std::cout << "the checker on kTxnReadsLatest (first problem):\n" << result.problems[0] << "\n";
  ASSERT_OK(store->Close());
}

// ---- The checker on hand-built histories -------------------------------------------------

TxnRecord MakeTxn(std::vector<MicroOp> ops, int64_t start_us = 0, int64_t end_us = 0) {
  TxnRecord t;
  t.ops = std::move(ops);
  t.start_ns = start_us * 1000;
  t.end_ns = end_us * 1000;
  return t;
}

History NoRealtime(std::vector<TxnRecord> txns, std::map<std::string, List> final_lists) {
  History h;
  h.txns = std::move(txns);
  h.final_lists = std::move(final_lists);
  h.realtime = false;
  return h;
}

std::string Problems(const CheckResult& r) { return absl::StrJoin(r.problems, "\n"); }

TEST(ListAppendChecker, SerialHistoryPasses) {
  History h = NoRealtime(
      {MakeTxn({MicroOp::Append("x", {}, 1), MicroOp::Read("y", {})}, 0, 10),
       MakeTxn({MicroOp::Read("x", {1}), MicroOp::Append("y", {}, 2)}, 20, 30),
       MakeTxn({MicroOp::Append("x", {1}, 3), MicroOp::Append("x", {1, 3}, 4)}, 40, 50),
       MakeTxn({MicroOp::Read("x", {1, 3, 4}), MicroOp::Read("y", {2})}, 60, 70)},
      {{"x", {1, 3, 4}}, {"y", {2}}});
  h.realtime = true;
  CheckResult r = CheckListAppend(h);
  EXPECT_TRUE(r.ok()) << Problems(r);
  EXPECT_GT(r.ww_edges + r.wr_edges + r.rw_edges + r.rt_edges, 0u);
}

// T0 and T1 both read x and y empty; T0 appends to x, T1 to y. Each missed
// the other's append: T0 -rw-> T1 -rw-> T0.
TEST(ListAppendChecker, WriteSkewIsAG2Cycle) {
  History h = NoRealtime(
      {MakeTxn({MicroOp::Read("x", {}), MicroOp::Read("y", {}), MicroOp::Append("x", {}, 1)}),
       MakeTxn({MicroOp::Read("x", {}), MicroOp::Read("y", {}), MicroOp::Append("y", {}, 2)})},
      {{"x", {1}}, {"y", {2}}});
  CheckResult r = CheckListAppend(h);
  ASSERT_FALSE(r.ok());
  std::cout << "the checker on write skew:\n" << Problems(r) << "\n";
  EXPECT_THAT(Problems(r), HasSubstr("G2 cycle of 2 transactions"));
  EXPECT_THAT(Problems(r), HasSubstr("a(y, 2 after [])"));
}

// Both appended to x after reading it empty, yet both appends survived:
// T1 -rw-> T0 (T1 missed 1) and T0 -ww-> T1.
TEST(ListAppendChecker, LostUpdateIsAGSingleCycle) {
  History h = NoRealtime({MakeTxn({MicroOp::Append("x", {}, 1)}),
                          MakeTxn({MicroOp::Append("x", {}, 2)})},
                         {{"x", {1, 2}}});
  CheckResult r = CheckListAppend(h);
  EXPECT_THAT(Problems(r), HasSubstr("G-single cycle"));
}

// Appends interleaved in the final list: T0 -ww-> T1 -ww-> T0.
TEST(ListAppendChecker, InterleavedAppendsAreAG0Cycle) {
  History h = NoRealtime({MakeTxn({MicroOp::Append("x", {}, 1), MicroOp::Append("y", {2}, 3)}),
                          MakeTxn({MicroOp::Append("y", {}, 2), MicroOp::Append("x", {1}, 4)})},
                         {{"x", {1, 4}}, {"y", {2, 3}}});
  CheckResult r = CheckListAppend(h);
  EXPECT_THAT(Problems(r), HasSubstr("G0 cycle"));
}

TEST(ListAppendChecker, AbortedReadIsG1a) {
  History h = NoRealtime({MakeTxn({MicroOp::Append("x", {}, 1)}),
                          MakeTxn({MicroOp::Read("x", {1, 99})})},
                         {{"x", {1}}});
  CheckResult r = CheckListAppend(h);
  EXPECT_THAT(Problems(r), HasSubstr("G1a (aborted read)"));
}

TEST(ListAppendChecker, IntermediateReadIsG1b) {
  History h =
      NoRealtime({MakeTxn({MicroOp::Append("x", {}, 1), MicroOp::Append("x", {1}, 2)}),
                  MakeTxn({MicroOp::Read("x", {1})})},
                 {{"x", {1, 2}}});
  CheckResult r = CheckListAppend(h);
  EXPECT_THAT(Problems(r), HasSubstr("G1b (intermediate read)"));
}

TEST(ListAppendChecker, LostAppendAndReorderAreCaught) {
  History h = NoRealtime({MakeTxn({MicroOp::Append("x", {}, 1)}),
                          MakeTxn({MicroOp::Append("x", {1}, 2)}),
                          MakeTxn({MicroOp::Read("x", {2})})},
                         {{"x", {1}}});
  CheckResult r = CheckListAppend(h);
  EXPECT_THAT(Problems(r), HasSubstr("lost append: element 2"));
  EXPECT_THAT(Problems(r), HasSubstr("incompatible order"));
}

TEST(ListAppendChecker, InternalInconsistencyIsCaught) {
  History h = NoRealtime({MakeTxn({MicroOp::Append("x", {}, 1), MicroOp::Read("x", {})})},
                         {{"x", {1}}});
  CheckResult r = CheckListAppend(h);
  EXPECT_THAT(Problems(r), HasSubstr("internal"));
}

// T1 began after T0's commit returned but did not see T0's append:
// serializable (T1 before T0), not strictly serializable.
TEST(ListAppendChecker, StaleReadBreaksRealtimeOrder) {
  History h = NoRealtime({MakeTxn({MicroOp::Append("x", {}, 1)}, 0, 10),
                          MakeTxn({MicroOp::Read("x", {})}, 20, 30)},
                         {{"x", {1}}});
  EXPECT_TRUE(CheckListAppend(h).ok());
  h.realtime = true;
  CheckResult r = CheckListAppend(h);
  EXPECT_THAT(Problems(r), HasSubstr("G-single-realtime cycle"));
  // Overlapping in time, the same history is fine.
  h.txns[1].start_ns = 5000;
  EXPECT_TRUE(CheckListAppend(h).ok()) << Problems(CheckListAppend(h));
}

TEST(ListAppendChecker, ReadsOfTwoRevisionsAreFlagged) {
  // x: [1] at rev 1, [1 2] at rev 2; y: [3] at rev 3.
  TxnRecord a = MakeTxn({MicroOp::Append("x", {}, 1)});
  a.revision = 1;
  TxnRecord b = MakeTxn({MicroOp::Append("x", {1}, 2)});
  b.revision = 2;
  TxnRecord c = MakeTxn({MicroOp::Append("y", {}, 3)});
  c.revision = 3;
  // Reads x before rev 2 and y at rev 3 or later: no one revision.
  TxnRecord torn = MakeTxn({MicroOp::Read("x", {1}), MicroOp::Read("y", {3})});
  torn.read_revision = 1;
  History h = NoRealtime({a, b, c}, {{"x", {1, 2}}, {"y", {3}}});
  h.attempts.push_back(torn);
  CheckResult r = CheckListAppend(h);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].find("no single revision"), std::string::npos) << r.problems[0];
  // A consistent read at revision 1 with the wrong recorded read revision.
  TxnRecord wrong = MakeTxn({MicroOp::Read("x", {1})});
  wrong.read_revision = 3;
  h.attempts = {wrong};
  r = CheckListAppend(h);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].find("does not explain"), std::string::npos) << r.problems[0];
  h.attempts[0].read_revision = 1;
  EXPECT_TRUE(CheckListAppend(h).ok());
}

TEST(ListAppendChecker, ValueEncoding) {
  EXPECT_EQ(AppendToValue(AppendToValue("", 3), 17), ",3,17");
  ASSERT_OK_AND_ASSIGN(List l, ParseList(",3,17"));
  EXPECT_EQ(l, (List{3, 17}));
  ASSERT_OK_AND_ASSIGN(l, ParseList(""));
  EXPECT_TRUE(l.empty());
  EXPECT_FALSE(ParseList("3,17").ok());
  EXPECT_FALSE(ParseList(",3,x").ok());
}

}  // namespace
}  // namespace serial_test
}  // namespace cowkv

COWKV_TEST_MAIN()
