// Goal: cowkv's client transactions keep an invariant that only serializable
// execution keeps: money moved between accounts is never created, destroyed
// or lost, and no reader ever commits having seen a total other than the
// initial one (no lost update, no read skew, no write skew).
// Method: the classic bank workload (Jepsen's "bank"). 16 accounts of 1000
// each, created in one transaction. Eight threads make random transfers
// through Subvolume::RunInTransaction: read two accounts, and if the source
// holds the amount, write both balances back; a transfer that finds too
// little commits read-only. Few accounts, and yields or short sleeps inside
// the transactions (two cores would otherwise run them one at a time), keep
// the threads in conflict. Two reader threads meanwhile read every account
// in a transaction (mostly one Range over the prefix; else two Ranges, or
// one Get each, with pauses between) and require the total to be exactly
// 16 * 1000; those read-only transactions read their revision from the
// history and must all commit, none aborted (issue 18); every fourth read is a
// one-revision snapshot (Subvolume::Range) that must add up too. Each
// transfer thread keeps the net change of each account from its committed
// transfers. At the end every balance equals 1000 plus those changes, the
// total is unchanged, transfers committed, some were retried and conflicts
// were counted (Stats().kv_conflicts); then the store is closed, `check`
// must be clean, and the reopened store holds the same balances. Run with
// kAsync commits and, on fewer transfers, kDurable ones, while the
// background committer commits every 10 ms.
// Replay: --seed=N --ops=M (M = transfers per thread; printed on failure;
// thread timing still varies).
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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::ExpectCheckClean;
using testing::Flags;

constexpr int kAccounts = 16;
constexpr int64_t kInitialBalance = 1000;
constexpr int64_t kTotal = kAccounts * kInitialBalance;
constexpr int64_t kMaxTransfer = 300;
constexpr int kTransferThreads = 8;
constexpr int kReaderThreads = 2;
constexpr int kMaxAttempts = 64;
constexpr uint64_t kDefaultSeed = 1;
constexpr char kPrefix[] = "acct/";

std::string AccountKey(int i) { return absl::StrFormat("%s%03d", kPrefix, i); }

absl::StatusOr<int64_t> ParseBalance(const KeyValue& kv) {
  int64_t balance = 0;
  if (!absl::SimpleAtoi(kv.value, &balance)) {
    return absl::DataLossError(absl::StrCat(kv.key, " holds '", kv.value, "', not a balance"));
  }
  return balance;
}

absl::StatusOr<int64_t> ReadBalance(KvTransaction& tx, int account) {
  absl::StatusOr<KeyValue> kv = tx.Get(AccountKey(account));
  if (!kv.ok()) return kv.status();
  return ParseBalance(*kv);
}

// Balances of every account, in key order, from one Range result.
absl::StatusOr<std::vector<int64_t>> Balances(const RangeResult& r) {
  if (r.kvs.size() != kAccounts) {
    return absl::DataLossError(absl::StrCat(r.kvs.size(), " accounts, not ", kAccounts));
  }
  std::vector<int64_t> balances;
  for (const KeyValue& kv : r.kvs) {
    absl::StatusOr<int64_t> b = ParseBalance(kv);
    if (!b.ok()) return b.status();
    balances.push_back(*b);
  }
  return balances;
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

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

RangeRequest Accounts(int first, int end) {
  RangeRequest req;
  req.start = AccountKey(first);
  req.end = AccountKey(end);
  return req;
}

// Every balance, read in `tx` in one of three ways: one Range over the
// prefix, two Ranges, or one Get each; with pauses between the pieces.
absl::StatusOr<std::vector<int64_t>> ReadAllAccounts(KvTransaction& tx, std::mt19937_64& rng) {
  const uint64_t mode = rng() % 4;
  RangeResult all;
  if (mode <= 1) {
    RangeRequest req;
    req.prefix = kPrefix;
    absl::StatusOr<RangeResult> r = tx.Range(req);
    if (!r.ok()) return r.status();
    all = *std::move(r);
  } else if (mode == 2) {
    for (auto [first, end] : {std::pair{0, kAccounts / 2}, std::pair{kAccounts / 2, kAccounts}}) {
      absl::StatusOr<RangeResult> r = tx.Range(Accounts(first, end));
      if (!r.ok()) return r.status();
      for (KeyValue& kv : r->kvs) all.kvs.push_back(std::move(kv));
      Pause(rng);
    }
  } else {
    for (int i = 0; i < kAccounts; ++i) {
      absl::StatusOr<KeyValue> kv = tx.Get(AccountKey(i));
      if (!kv.ok()) return kv.status();
      all.kvs.push_back(*std::move(kv));
      if (i % 4 == 3) Pause(rng);
    }
  }
  return Balances(all);
}

struct Bank {
  Subvolume* sv = nullptr;
  Durability durability = Durability::kAsync;
  uint64_t seed = 0;
  uint64_t transfers_per_thread = 0;
  std::string replay;
  std::atomic<bool> writers_done{false};
  std::atomic<uint64_t> committed{0};  // transfers that moved money
  std::atomic<uint64_t> declined{0};   // found too little; committed read-only
  std::atomic<uint64_t> gave_up{0};    // still conflicting after kMaxAttempts
  std::atomic<uint64_t> attempts{0};   // transfer attempts (fn calls)
  std::atomic<uint64_t> reads_ok{0};   // reader transactions that validated
  std::atomic<uint64_t> reads_ok_during{0};  // ... while transfers were running
  std::atomic<uint64_t> reads_aborted{0};
  std::atomic<uint64_t> snapshots{0};
  std::vector<std::vector<int64_t>> deltas;  // per transfer thread, per account
};

void TransferThread(Bank* bank, int thread) {
  std::mt19937_64 rng(bank->seed * 1000003 + thread);
  std::vector<int64_t>& delta = bank->deltas[thread];
  for (uint64_t i = 0; i < bank->transfers_per_thread; ++i) {
    const int from = static_cast<int>(rng() % kAccounts);
    const int to = static_cast<int>((from + 1 + rng() % (kAccounts - 1)) % kAccounts);
    const int64_t amount = 1 + static_cast<int64_t>(rng() % kMaxTransfer);
    bool moved = false;  // as the last (committed) attempt decided
    absl::Status s = bank->sv->RunInTransaction(
        [&](KvTransaction& tx) -> absl::Status {
          bank->attempts.fetch_add(1);
          moved = false;
          absl::StatusOr<int64_t> a = ReadBalance(tx, from);
          if (!a.ok()) return a.status();
          Pause(rng);
          absl::StatusOr<int64_t> b = ReadBalance(tx, to);
          if (!b.ok()) return b.status();
          Pause(rng);
          if (*a < amount) return absl::OkStatus();
          moved = true;
          absl::Status p = tx.Put(AccountKey(from), absl::StrCat(*a - amount));
          return p.ok() ? tx.Put(AccountKey(to), absl::StrCat(*b + amount)) : p;
        },
        bank->durability, kMaxAttempts);
    if (absl::IsAborted(s) || absl::IsOutOfRange(s)) {
      bank->gave_up.fetch_add(1);
    } else if (!s.ok()) {
      ADD_FAILURE() << "transfer " << from << " -> " << to << " failed: " << s << " ("
                    << bank->replay << ")";
      return;
    } else if (moved) {
      delta[from] -= amount;
      delta[to] += amount;
      bank->committed.fetch_add(1);
    } else {
      bank->declined.fetch_add(1);
    }
  }
}

// One transaction reading every account; checks the total if it validates.
void AuditOnce(Bank* bank, std::mt19937_64& rng) {
  const bool during = !bank->writers_done.load();
  absl::StatusOr<std::unique_ptr<KvTransaction>> tx = bank->sv->BeginTransaction();
  ASSERT_OK(tx);
  absl::StatusOr<std::vector<int64_t>> balances = ReadAllAccounts(**tx, rng);
  if (absl::IsAborted(balances.status())) {
    bank->reads_aborted.fetch_add(1);
    return;
  }
  ASSERT_OK(balances) << bank->replay;
  Pause(rng);
  absl::StatusOr<uint64_t> commit = (*tx)->Commit();
  if (absl::IsAborted(commit.status()) || absl::IsOutOfRange(commit.status())) {
    bank->reads_aborted.fetch_add(1);
    return;
  }
  ASSERT_OK(commit);
  ASSERT_EQ(*commit, (*tx)->read_revision()) << "a read-only commit is at its read revision";
  ASSERT_EQ(Sum(*balances), kTotal)
      << "a validated read-only transaction at revision " << *commit << " saw a total of "
      << Sum(*balances) << " (" << bank->replay << ")";
  bank->reads_ok.fetch_add(1);
  if (during) bank->reads_ok_during.fetch_add(1);
}

// A one-revision snapshot read outside any transaction.
void SnapshotOnce(Bank* bank) {
  RangeRequest req;
  req.prefix = kPrefix;
  absl::StatusOr<RangeResult> r = bank->sv->Range(req);
  ASSERT_OK(r);
  absl::StatusOr<std::vector<int64_t>> balances = Balances(*r);
  ASSERT_OK(balances) << bank->replay;
  ASSERT_EQ(Sum(*balances), kTotal) << "the snapshot at revision " << r->revision
                                    << " has a total of " << Sum(*balances) << " ("
                                    << bank->replay << ")";
  bank->snapshots.fetch_add(1);
}

void ReaderThread(Bank* bank, int reader) {
  std::mt19937_64 rng(bank->seed * 1000003 + kTransferThreads + reader);
  // Until the writers are done, and at least one validated audit after.
  for (uint64_t i = 0; !bank->writers_done.load() || bank->reads_ok.load() == 0; ++i) {
    if (::testing::Test::HasFatalFailure()) return;
    if (i % 4 == 3) {
      SnapshotOnce(bank);
    } else {
      AuditOnce(bank, rng);
    }
  }
}

// Every balance equals 1000 plus the committed transfers' net changes.
void ExpectBalances(Subvolume* sv, const Bank& bank) {
  std::vector<int64_t> want(kAccounts, kInitialBalance);
  for (const std::vector<int64_t>& d : bank.deltas) {
    for (int i = 0; i < kAccounts; ++i) want[i] += d[i];
  }
  RangeRequest req;
  req.prefix = kPrefix;
  ASSERT_OK_AND_ASSIGN(RangeResult r, sv->Range(req));
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> have, Balances(r));
  EXPECT_EQ(Sum(have), kTotal) << bank.replay;
  for (int i = 0; i < kAccounts; ++i) {
    EXPECT_EQ(have[i], want[i]) << AccountKey(i) << " (" << bank.replay << ")";
    EXPECT_GE(have[i], 0) << AccountKey(i) << " (" << bank.replay << ")";
  }
}

absl::Status CreateAccounts(Subvolume* sv) {
  return sv->RunInTransaction([](KvTransaction& tx) -> absl::Status {
    for (int i = 0; i < kAccounts; ++i) {
      if (absl::Status s = tx.Put(AccountKey(i), absl::StrCat(kInitialBalance)); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  });
}

void RunTransfersAndReaders(Bank* bank) {
  std::vector<std::thread> writers, readers;
  for (int t = 0; t < kTransferThreads; ++t) writers.emplace_back(TransferThread, bank, t);
  for (int t = 0; t < kReaderThreads; ++t) readers.emplace_back(ReaderThread, bank, t);
  for (std::thread& t : writers) t.join();
  bank->writers_done = true;
  for (std::thread& t : readers) t.join();
}

void RunBank(Durability durability, uint64_t default_transfers) {
  Bank bank;
  bank.durability = durability;
  bank.seed = Flags().seed ? Flags().seed : kDefaultSeed;
  bank.transfers_per_thread = Flags().ops ? Flags().ops : default_transfers;
  bank.replay = absl::StrCat("replay: --seed=", bank.seed, " --ops=", bank.transfers_per_thread);
  bank.deltas.assign(kTransferThreads, std::vector<int64_t>(kAccounts, 0));
  SCOPED_TRACE(bank.replay);
  MemDevice dev(256ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  Options o = testing::TestOptions();
  o.commit_interval_ms = 10;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(&dev, o));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store->DefaultSubvolume());
  ASSERT_OK(CreateAccounts(sv.get()));
  bank.sv = sv.get();

  const auto t0 = std::chrono::steady_clock::now();
  RunTransfersAndReaders(&bank);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - t0;
  const StoreStats stats = store->Stats();
  std::cout << "bank: " << bank.committed.load() << " transfers committed, "
            << bank.declined.load() << " declined, " << bank.gave_up.load() << " gave up, "
            << bank.attempts.load() << " attempts; audits " << bank.reads_ok.load()
            << " validated (" << bank.reads_ok_during.load() << " during transfers), "
            << bank.reads_aborted.load() << " aborted; " << bank.snapshots.load()
            << " snapshots; kv_conflicts " << stats.kv_conflicts << ", kv_too_old "
            << stats.kv_too_old << ", durable commits " << stats.durable_commits
            << ", engine commits " << stats.commits << "; " << elapsed.count() << " s\n";
  ASSERT_NO_FATAL_FAILURE(ExpectBalances(sv.get(), bank));
  EXPECT_GT(bank.committed.load(), 0u);
  EXPECT_GT(stats.kv_conflicts, 0u) << "no contention: the test exercised nothing";
  EXPECT_GT(bank.attempts.load(), bank.committed + bank.declined + bank.gave_up)
      << "no transfer was ever retried";
  EXPECT_GT(bank.reads_ok.load(), 0u);
  EXPECT_EQ(bank.reads_aborted.load(), 0u)
      << "a read-only transaction failed to commit under the transfers (issue 18)";
  EXPECT_GT(bank.reads_ok_during.load(), 0u);

  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_OK_AND_ASSIGN(sv, store->DefaultSubvolume());
  ASSERT_NO_FATAL_FAILURE(ExpectBalances(sv.get(), bank));
  ASSERT_OK(store->Close());
}

TEST(Bank, AsyncTransfersPreserveEveryBalance) { RunBank(Durability::kAsync, 2000); }

TEST(Bank, DurableTransfersPreserveEveryBalance) { RunBank(Durability::kDurable, 500); }

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
