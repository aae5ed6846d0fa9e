// kv_bench: cowkv's durable KV commits against RocksDB and LMDB, in one process.
//
// Every system works on real files in one directory (--dir), with the same
// data: 16-byte keys ("%016u"), 100-byte values (bench/kv_system.h Dataset),
// N = --num keys loaded once per system before its first benchmark (untimed).
//
//   BM_Fdatasync/device        4 KiB pwrite + fdatasync in the same directory:
//                              the floor of any durable commit. p50_us, p99_us.
//   BM_ReadRandom/<sys>        one point get of a random loaded key; the value
//                              is checked.
//   BM_RangeScan/<sys>         100 consecutive keys from a random start.
//   BM_DurablePut/<sys>        one single-key put acknowledged durable per
//                              iteration; 1, 8 and 64 threads.
//   BM_AsyncPut/<sys>          one single-key put acknowledged after apply
//                              (cowkv kAsync, RocksDB sync=false, LMDB
//                              MDB_NOSYNC); one thread.
//   BM_BatchTxn100/<sys>       100 puts in one transaction, committed durably;
//                              items = keys.
// <sys> is cowkv, rocksdb or lmdb; they run in this order (reads first, on
// the stores as loaded). All are timed in real time; google-benchmark
// appends "/real_time" and, for DurablePut, "/threads:N". The put workloads
// report p50_us and p99_us of the merged per-operation latencies of all
// threads (each thread keeps its own samples; thread 0 merges them after every
// thread has finished) and items_per_second in keys/s over all threads; on
// cowkv the durable ones also report commits_per_sync (StoreStats
// durable_commits / log_syncs over the run), log_full_commits,
// log_keys_per_sync and log_kib_per_sync.
//
// Durable means: cowkv Durability::kDurable (a log sync, group commit),
// RocksDB WriteOptions::sync = true (WAL fsync, group commit), LMDB's default
// commit (fdatasync of the data, then of the meta page). Writes overwrite
// loaded keys with a value of the same size, so the key count stays N.
//
// Flags (parsed and removed before benchmark::Initialize):
//   --num=N                    keys loaded per system (default 1000000)
//   --dir=PATH                 where the files go (default $TEST_TMPDIR, else
//                              /tmp/cowkv-kvbench); a mkdtemp directory inside
//                              it holds them and is removed at exit
//   --cowkv_device=zeroed|sparse  zeroed (default): the cowkv device file is
//                                 written with zeros before mkfs, like a raw
//                                 block device; sparse: a sparse file
//   --cowkv_nodesize=N           cowkv mkfs nodesize (16384)
//   --cowkv_io=buffered|direct   cowkv FileDevice through the page cache
//                                (default) or with O_DIRECT
//   --cowkv_scan=iterator|range  cowkv RangeScan through Subvolume::NewIterator
//                              (default; Seek + Next, like the peers' cursors)
//                              or Subvolume::Range(start, limit = 100)
//   --latency_dump=FILE        off by default. Writes, at exit, every reported
//                              run's merged per-operation latencies of the put
//                              benchmarks (DurablePut, AsyncPut, BatchTxn100)
//                              to FILE, one line per operation:
//                              "<name>\t<repetition>\t<microseconds>", for
//                              bench/plots.py's CDF. Collected after the timed
//                              loop, so the figures are the same with it on.
// bench/README.md describes the setup of each system.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <lmdb.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_util.h"
#include "bench/kv_system.h"
#include "cowkv/device.h"
#include "cowkv/store.h"

namespace cowkv_bench {
namespace {

using Clock = std::chrono::steady_clock;
using Kvs = std::vector<std::pair<std::string_view, std::string_view>>;

constexpr uint64_t kDeviceBytes = 4ull << 30;     // cowkv sparse file, LMDB map size
constexpr uint64_t kCacheBytes = 1ull << 30;      // cowkv node cache, RocksDB block cache
constexpr size_t kLoadBatch = 1000;               // keys per load transaction
constexpr size_t kTxnKeys = 100;                  // BM_BatchTxn100
constexpr size_t kScanKeys = 100;                 // BM_RangeScan

// ---- Configuration ---------------------------------------------------------------

struct Config {
  uint64_t num = 1000000;
  std::string dir;  // --dir; empty = default
  bool cowkv_scan_range = false;
  bool cowkv_zero_device = true;
  bool cowkv_direct_io = false;
  uint32_t cowkv_nodesize = 16384;
  std::string latency_dump;  // --latency_dump; empty = off
};

Config g_config;
std::unique_ptr<Dataset> g_data;
std::string g_run_dir;  // the mkdtemp directory everything lives in

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The latency samples of one multi-threaded run. Every thread hands its own
// vector in once, after its timed loop (errors included); thread 0 then
// waits for all of them and takes the merged set, which resets the pool for
// the next run (google-benchmark joins a run's threads before the next one).
class LatencyPool {
 public:
  void Add(const std::vector<double>& samples) {
    absl::MutexLock l(&mu_);
    all_.insert(all_.end(), samples.begin(), samples.end());
    ++arrived_;
  }
  std::vector<double> TakeAll(int threads) {
    absl::MutexLock l(&mu_);
    auto all_arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return arrived_ >= threads; };
    mu_.Await(absl::Condition(&all_arrived));
    std::vector<double> out;
    out.swap(all_);
    arrived_ = 0;
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<double> all_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
};

LatencyPool g_latencies;

// --latency_dump: the merged latencies of every put run, written at exit.
// google-benchmark calls a benchmark function several times per reported
// run: with growing iteration counts until the run is long enough (only the
// last is reported), and for repetitions after the first with that same
// final count. So a name's reported runs are exactly its calls whose
// iteration count equals its last call's; Write keeps those and drops the
// estimation calls. Record is called by thread 0 after every thread has
// left the timed loop.
class LatencyDump {
 public:
  void Record(std::string name, int64_t iterations, const std::vector<double>& seconds) {
    absl::MutexLock l(&mu_);
    runs_.push_back(Run{std::move(name), iterations, seconds});
  }

  // "" or a message.
  std::string Write(const std::string& path) {
    absl::MutexLock l(&mu_);
    std::map<std::string, int64_t> final_iterations;
    for (const Run& r : runs_) final_iterations[r.name] = r.iterations;
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return "open " + path + ": " + std::strerror(errno);
    std::fprintf(f, "# kv_bench --latency_dump: benchmark\trepetition\tlatency_us\n");
    std::map<std::string, int> repetition;
    for (const Run& r : runs_) {
      if (r.iterations != final_iterations[r.name]) continue;  // an estimation call
      const int rep = repetition[r.name]++;
      for (double sec : r.seconds)
        std::fprintf(f, "%s\t%d\t%.3f\n", r.name.c_str(), rep, sec * 1e6);
    }
    if (std::fclose(f) != 0) return "write " + path + ": " + std::strerror(errno);
    return "";
  }

 private:
  struct Run {
    std::string name;
    int64_t iterations;
    std::vector<double> seconds;
  };
  absl::Mutex mu_;
  std::vector<Run> runs_ ABSL_GUARDED_BY(mu_);
};

LatencyDump g_latency_dump;

// ---- The systems -----------------------------------------------------------------

// cowkv's KV commit counters (StoreStats), cumulative.
struct CommitCounters {
  uint64_t durable = 0;      // durable_commits
  uint64_t syncs = 0;        // log_syncs
  uint64_t log_full = 0;     // commits_by_log_full: durable commits the log could not take
  uint64_t synced_keys = 0;  // log_synced_keys
  uint64_t sync_bytes = 0;   // log_sync_bytes
};

// What every benchmark body calls; errors are strings (empty = OK) naming the
// failed call. Put and PutBatch are thread-safe; Get and Scan are called by
// one thread at a time.
class Peer {
 public:
  virtual ~Peer() = default;
  virtual const char* name() const = 0;
  // Creates a fresh store at `path` (which must not exist) and opens it.
  virtual std::string Create(const std::string& path) = 0;
  virtual std::string Close() = 0;
  // One key; durable = acknowledged only once it survives a crash.
  virtual std::string Put(std::string_view key, std::string_view value, bool durable) = 0;
  // One atomic transaction of puts.
  virtual std::string PutBatch(const Kvs& kvs, bool durable) = 0;
  // The value of `key` (copied out); a missing key is an error.
  virtual std::string Get(std::string_view key, std::string* value) = 0;
  // Up to `n` consecutive keys from the first key >= `start`: how many, the
  // first key, key + value bytes seen.
  virtual std::string Scan(std::string_view start, size_t n, size_t* count, std::string* first,
                           uint64_t* bytes) = 0;
  // Makes every acknowledged write durable (untimed; after the load and
  // after BM_AsyncPut, so no benchmark inherits another's unsynced writes).
  virtual std::string Settle() = 0;
  // After the load: whatever settles the store for reads (untimed).
  virtual std::string FinishLoad() { return Settle(); }
  // cowkv only; false when the system has no such counters.
  virtual bool CommitStats(CommitCounters* c) { return false; }
};

// ---- cowkv -----------------------------------------------------------------------

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string CowErr(const std::string& what, const absl::Status& s) {
  return "cowkv " + what + ": " + s.ToString();
}

// A Store on a FileDevice over a sparse file; KV calls go to the default
// subvolume. Options: defaults (30 s commit interval, conflict window) but a
// 1 GiB node cache.
class CowkvPeer : public Peer {
 public:
  ~CowkvPeer() override { (void)Close(); }
  const char* name() const override { return "cowkv"; }

  std::string Create(const std::string& path) override {
    cowkv::FileDeviceOptions fo;
    fo.create_size = kDeviceBytes;
    fo.direct_io = g_config.cowkv_direct_io;
    auto dev = cowkv::FileDevice::Open(path, fo);
    if (!dev.ok()) return CowErr("FileDevice::Open", dev.status());
    device_ = std::move(*dev);
    if (g_config.cowkv_zero_device) {
      // Like a raw block device: every block already allocated on the
      // host filesystem, so a write never waits for the filesystem to
      // allocate (or convert) the block it lands on.
      const std::string zeros(8 << 20, '\0');
      for (uint64_t off = 0; off < kDeviceBytes; off += zeros.size()) {
        absl::Status w = device_->WriteAt(off, zeros.data(), zeros.size());
        if (!w.ok()) return CowErr("zero-fill", w);
      }
      absl::Status f = device_->Flush();
      if (!f.ok()) return CowErr("zero-fill flush", f);
    }
    cowkv::MkfsOptions mk;
    mk.nodesize = g_config.cowkv_nodesize;
    absl::Status s = cowkv::Store::Mkfs(device_.get(), mk);
    if (!s.ok()) return CowErr("Store::Mkfs", s);
    cowkv::Options opts;
    opts.node_cache_bytes = kCacheBytes;
    auto store = cowkv::Store::Open(device_.get(), opts);
    if (!store.ok()) return CowErr("Store::Open", store.status());
    store_ = std::move(*store);
    auto sv = store_->DefaultSubvolume();
    if (!sv.ok()) return CowErr("Store::DefaultSubvolume", sv.status());
    subvol_ = std::move(*sv);
    return "";
  }

  std::string Close() override {
    std::string err;
    subvol_.reset();
    if (store_ != nullptr) {
      absl::Status s = store_->Close();
      if (!s.ok()) err = CowErr("Store::Close", s);
      store_.reset();
    }
    device_.reset();
    return err;
  }

  std::string Put(std::string_view key, std::string_view value, bool durable) override {
    absl::Status s = subvol_->Put(AV(key), AV(value), Dur(durable));
    if (!s.ok()) return CowErr(durable ? "Subvolume::Put(kDurable)" : "Subvolume::Put(kAsync)", s);
    return "";
  }

  std::string PutBatch(const Kvs& kvs, bool durable) override {
    auto txn = subvol_->BeginTransaction();
    if (!txn.ok()) return CowErr("Subvolume::BeginTransaction", txn.status());
    for (const auto& [k, v] : kvs) {
      absl::Status s = (*txn)->Put(AV(k), AV(v));
      if (!s.ok()) return CowErr("KvTransaction::Put", s);
    }
    absl::StatusOr<uint64_t> rev = (*txn)->Commit(Dur(durable));
    if (!rev.ok()) {
      return CowErr(durable ? "KvTransaction::Commit(kDurable)" : "KvTransaction::Commit(kAsync)",
                    rev.status());
    }
    return "";
  }

  std::string Get(std::string_view key, std::string* value) override {
    absl::StatusOr<std::string> v = subvol_->Get(AV(key));
    if (!v.ok()) return CowErr("Subvolume::Get", v.status());
    *value = std::move(*v);
    return "";
  }

  std::string Scan(std::string_view start, size_t n, size_t* count, std::string* first,
                   uint64_t* bytes) override {
    return g_config.cowkv_scan_range ? ScanRange(start, n, count, first, bytes)
                                     : ScanIterator(start, n, count, first, bytes);
  }

  std::string Settle() override {
    absl::Status s = store_->Commit();
    return s.ok() ? "" : CowErr("Store::Commit", s);
  }

  bool CommitStats(CommitCounters* c) override {
    const cowkv::StoreStats st = store_->Stats();
    c->durable = st.durable_commits;
    c->syncs = st.log_syncs;
    c->log_full = st.commits_by_log_full;
    c->synced_keys = st.log_synced_keys;
    c->sync_bytes = st.log_sync_bytes;
    return true;
  }

 private:
  static cowkv::Durability Dur(bool durable) {
    return durable ? cowkv::Durability::kDurable : cowkv::Durability::kAsync;
  }

  std::string ScanIterator(std::string_view start, size_t n, size_t* count, std::string* first,
                           uint64_t* bytes) {
    std::unique_ptr<cowkv::Iterator> it = subvol_->NewIterator();
    size_t c = 0;
    uint64_t b = 0;
    for (it->Seek(AV(start)); c < n && it->Valid(); it->Next()) {
      if (c++ == 0) first->assign(it->key().data(), it->key().size());
      b += it->key().size() + it->value().size();
    }
    if (!it->status().ok()) return CowErr("Iterator", it->status());
    *count = c;
    *bytes = b;
    return "";
  }

  std::string ScanRange(std::string_view start, size_t n, size_t* count, std::string* first,
                        uint64_t* bytes) {
    cowkv::RangeRequest req;
    req.start = std::string(start);
    req.limit = n;
    absl::StatusOr<cowkv::RangeResult> r = subvol_->Range(req);
    if (!r.ok()) return CowErr("Subvolume::Range", r.status());
    uint64_t b = 0;
    for (const cowkv::KeyValue& kv : r->kvs) b += kv.key.size() + kv.value.size();
    if (!r->kvs.empty()) *first = r->kvs.front().key;
    *count = r->kvs.size();
    *bytes = b;
    return "";
  }

  std::unique_ptr<cowkv::FileDevice> device_;  // outlives store_
  std::unique_ptr<cowkv::Store> store_;
  std::unique_ptr<cowkv::Subvolume> subvol_;
};

// ---- RocksDB ---------------------------------------------------------------------

std::string RocksErr(const std::string& what, const rocksdb::Status& s) {
  return "rocksdb " + what + ": " + s.ToString();
}

rocksdb::Slice RS(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

// Default options but a 1 GiB LRU block cache (cowkv's node cache size).
class RocksdbPeer : public Peer {
 public:
  ~RocksdbPeer() override { (void)Close(); }
  const char* name() const override { return "rocksdb"; }

  std::string Create(const std::string& path) override {
    rocksdb::Options opts;
    opts.create_if_missing = true;
    opts.error_if_exists = true;
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = rocksdb::NewLRUCache(kCacheBytes);
    opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(opts, path, &db);
    if (!s.ok()) return RocksErr("DB::Open", s);
    db_.reset(db);
    return "";
  }

  std::string Close() override {
    std::string err;
    if (db_ != nullptr) {
      rocksdb::Status s = db_->Close();
      if (!s.ok()) err = RocksErr("DB::Close", s);
      db_.reset();
    }
    return err;
  }

  std::string Put(std::string_view key, std::string_view value, bool durable) override {
    rocksdb::WriteOptions wo;
    wo.sync = durable;
    rocksdb::Status s = db_->Put(wo, RS(key), RS(value));
    return s.ok() ? "" : RocksErr(durable ? "DB::Put(sync)" : "DB::Put(nosync)", s);
  }

  std::string PutBatch(const Kvs& kvs, bool durable) override {
    rocksdb::WriteBatch batch;
    for (const auto& [k, v] : kvs) {
      rocksdb::Status s = batch.Put(RS(k), RS(v));
      if (!s.ok()) return RocksErr("WriteBatch::Put", s);
    }
    rocksdb::WriteOptions wo;
    wo.sync = durable;
    rocksdb::Status s = db_->Write(wo, &batch);
    return s.ok() ? "" : RocksErr(durable ? "DB::Write(sync)" : "DB::Write(nosync)", s);
  }

  std::string Get(std::string_view key, std::string* value) override {
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), RS(key), value);
    return s.ok() ? "" : RocksErr("DB::Get", s);
  }

  std::string Scan(std::string_view start, size_t n, size_t* count, std::string* first,
                   uint64_t* bytes) override {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    size_t c = 0;
    uint64_t b = 0;
    for (it->Seek(RS(start)); c < n && it->Valid(); it->Next()) {
      if (c++ == 0) *first = it->key().ToString();
      b += it->key().size() + it->value().size();
    }
    if (!it->status().ok()) return RocksErr("Iterator", it->status());
    *count = c;
    *bytes = b;
    return "";
  }

  std::string Settle() override {
    rocksdb::Status s = db_->SyncWAL();
    return s.ok() ? "" : RocksErr("DB::SyncWAL", s);
  }

  // The memtable to an SST, then one compaction of everything: reads see a
  // settled LSM with no background work (RocksDB's best read case).
  std::string FinishLoad() override {
    rocksdb::Status s = db_->Flush(rocksdb::FlushOptions());
    if (!s.ok()) return RocksErr("DB::Flush", s);
    s = db_->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr);
    if (!s.ok()) return RocksErr("DB::CompactRange", s);
    return "";
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
};

// ---- LMDB ------------------------------------------------------------------------

std::string LmdbErr(const std::string& what, int rc) {
  return "lmdb " + what + ": " + mdb_strerror(rc) + " (" + std::to_string(rc) + ")";
}

MDB_val MV(std::string_view s) {
  MDB_val v;
  v.mv_size = s.size();
  v.mv_data = const_cast<char*>(s.data());
  return v;
}

// One environment directory, 4 GiB map, durable defaults (no MDB_NOSYNC, no
// MDB_WRITEMAP). MDB_NOTLS ties read slots to the transaction instead of the
// thread, so the one reused read transaction (mdb_txn_renew/reset per read,
// a fresh snapshot each time) may be used from any benchmark thread.
// Non-durable writes set MDB_NOSYNC around their commit; they never run
// concurrently with durable ones in this binary.
class LmdbPeer : public Peer {
 public:
  ~LmdbPeer() override { (void)Close(); }
  const char* name() const override { return "lmdb"; }

  std::string Create(const std::string& path) override {
    if (mkdir(path.c_str(), 0755) != 0) return "lmdb mkdir " + path + ": " + std::strerror(errno);
    int rc = mdb_env_create(&env_);
    if (rc != 0) {
      env_ = nullptr;
      return LmdbErr("mdb_env_create", rc);
    }
    if ((rc = mdb_env_set_mapsize(env_, kDeviceBytes)) != 0) {
      return LmdbErr("mdb_env_set_mapsize", rc);
    }
    if ((rc = mdb_env_open(env_, path.c_str(), MDB_NOTLS, 0644)) != 0) {
      return LmdbErr("mdb_env_open", rc);
    }
    MDB_txn* txn = nullptr;
    if ((rc = mdb_txn_begin(env_, nullptr, 0, &txn)) != 0) return LmdbErr("mdb_txn_begin", rc);
    if ((rc = mdb_dbi_open(txn, nullptr, 0, &dbi_)) != 0) {
      mdb_txn_abort(txn);
      return LmdbErr("mdb_dbi_open", rc);
    }
    if ((rc = mdb_txn_commit(txn)) != 0) return LmdbErr("mdb_txn_commit", rc);
    if ((rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &read_txn_)) != 0) {
      read_txn_ = nullptr;
      return LmdbErr("mdb_txn_begin(RDONLY)", rc);
    }
    mdb_txn_reset(read_txn_);
    return "";
  }

  std::string Close() override {
    if (read_txn_ != nullptr) mdb_txn_abort(read_txn_);
    read_txn_ = nullptr;
    if (env_ != nullptr) mdb_env_close(env_);
    env_ = nullptr;
    return "";
  }

  std::string Put(std::string_view key, std::string_view value, bool durable) override {
    const std::pair<std::string_view, std::string_view> kv(key, value);
    return Write(&kv, 1, durable);
  }

  std::string PutBatch(const Kvs& kvs, bool durable) override {
    return Write(kvs.data(), kvs.size(), durable);
  }

  std::string Get(std::string_view key, std::string* value) override {
    int rc = mdb_txn_renew(read_txn_);
    if (rc != 0) return LmdbErr("mdb_txn_renew", rc);
    MDB_val k = MV(key), v;
    rc = mdb_get(read_txn_, dbi_, &k, &v);
    if (rc == 0) value->assign(static_cast<const char*>(v.mv_data), v.mv_size);
    mdb_txn_reset(read_txn_);
    return rc == 0 ? "" : LmdbErr("mdb_get", rc);
  }

  std::string Scan(std::string_view start, size_t n, size_t* count, std::string* first,
                   uint64_t* bytes) override {
    int rc = mdb_txn_renew(read_txn_);
    if (rc != 0) return LmdbErr("mdb_txn_renew", rc);
    MDB_cursor* cur = nullptr;
    if ((rc = mdb_cursor_open(read_txn_, dbi_, &cur)) != 0) {
      mdb_txn_reset(read_txn_);
      return LmdbErr("mdb_cursor_open", rc);
    }
    size_t c = 0;
    uint64_t b = 0;
    MDB_val k = MV(start), v;
    for (MDB_cursor_op op = MDB_SET_RANGE; c < n; op = MDB_NEXT) {
      if ((rc = mdb_cursor_get(cur, &k, &v, op)) != 0) break;
      if (c++ == 0) first->assign(static_cast<const char*>(k.mv_data), k.mv_size);
      b += k.mv_size + v.mv_size;
    }
    mdb_cursor_close(cur);
    mdb_txn_reset(read_txn_);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbErr("mdb_cursor_get", rc);
    *count = c;
    *bytes = b;
    return "";
  }

  std::string Settle() override {
    int rc = mdb_env_sync(env_, 1);
    return rc == 0 ? "" : LmdbErr("mdb_env_sync", rc);
  }

 private:
  // One write transaction of `n` puts.
  std::string Write(const std::pair<std::string_view, std::string_view>* kvs, size_t n,
                    bool durable) {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc != 0) return LmdbErr("mdb_txn_begin", rc);
    for (size_t i = 0; i < n; ++i) {
      MDB_val k = MV(kvs[i].first), v = MV(kvs[i].second);
      if ((rc = mdb_put(txn, dbi_, &k, &v, 0)) != 0) {
        mdb_txn_abort(txn);
        return LmdbErr("mdb_put", rc);
      }
    }
    if (!durable && (rc = mdb_env_set_flags(env_, MDB_NOSYNC, 1)) != 0) {
      mdb_txn_abort(txn);
      return LmdbErr("mdb_env_set_flags(MDB_NOSYNC, on)", rc);
    }
    rc = mdb_txn_commit(txn);
    int frc = durable ? 0 : mdb_env_set_flags(env_, MDB_NOSYNC, 0);
    if (rc != 0) return LmdbErr(durable ? "mdb_txn_commit" : "mdb_txn_commit(NOSYNC)", rc);
    if (frc != 0) return LmdbErr("mdb_env_set_flags(MDB_NOSYNC, off)", frc);
    return "";
  }

  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
  MDB_txn* read_txn_ = nullptr;  // reset between reads
};

// ---- Per-system fixtures: created and loaded on first use, shared ---------------

enum class Sys { kCowkv, kRocksdb, kLmdb };
constexpr Sys kSystems[] = {Sys::kCowkv, Sys::kRocksdb, Sys::kLmdb};

const char* SysName(Sys s) {
  switch (s) {
    case Sys::kCowkv: return "cowkv";
    case Sys::kRocksdb: return "rocksdb";
    case Sys::kLmdb: return "lmdb";
  }
  return "?";
}

std::unique_ptr<Peer> NewPeer(Sys s) {
  switch (s) {
    case Sys::kCowkv: return std::make_unique<CowkvPeer>();
    case Sys::kRocksdb: return std::make_unique<RocksdbPeer>();
    case Sys::kLmdb: return std::make_unique<LmdbPeer>();
  }
  return nullptr;
}

struct Fixture {
  std::unique_ptr<Peer> peer;
  std::string error;  // set once if building it failed
};

absl::Mutex g_fixture_mu;
std::map<Sys, Fixture> g_fixtures;

// All N keys with their fill values, in the dataset's random fill order, in
// transactions of kLoadBatch keys acknowledged after apply; then FinishLoad.
std::string Load(Peer* peer) {
  const std::vector<uint32_t>& order = g_data->fill_random_order();
  Kvs kvs;
  for (size_t i = 0; i < order.size(); i += kLoadBatch) {
    kvs.clear();
    for (size_t j = i; j < std::min(order.size(), i + kLoadBatch); ++j) {
      kvs.emplace_back(g_data->key(order[j]), g_data->value(order[j]));
    }
    std::string err = peer->PutBatch(kvs, /*durable=*/false);
    if (!err.empty()) return err;
  }
  return peer->FinishLoad();
}

// The loaded store of system `s`, built on first use by whichever benchmark
// thread gets here first (never timed: google-benchmark starts the clock at
// the loop, after every thread has arrived).
Peer* GetPeer(Sys s, std::string* error) {
  absl::MutexLock l(&g_fixture_mu);
  Fixture& f = g_fixtures[s];
  if (f.peer == nullptr && f.error.empty()) {
    std::unique_ptr<Peer> peer = NewPeer(s);
    std::string err = peer->Create(g_run_dir + "/" + SysName(s));
    if (err.empty()) err = Load(peer.get());
    if (err.empty()) {
      f.peer = std::move(peer);
    } else {
      f.error = "setup (create + load): " + err;
    }
  }
  *error = f.error;
  return f.peer.get();
}

std::string CloseFixtures() {
  std::string first;
  for (auto& [s, f] : g_fixtures) {
    if (f.peer == nullptr) continue;
    std::string err = f.peer->Close();
    if (first.empty() && !err.empty()) first = err;
    f.peer.reset();
  }
  g_fixtures.clear();
  return first;
}

// ---- Benchmarks ------------------------------------------------------------------

// Reports cowkv's commit counters over a run (when it made durable commits):
// durable commits per log sync (0 if no log sync ran), the durable commits
// that fell back to an engine commit, and keys and KiB written per log sync.
struct CommitDelta {
  bool have = false;
  CommitCounters start;

  void Start(Peer* p) { have = p->CommitStats(&start); }
  void Report(Peer* p, benchmark::State& state) const {
    CommitCounters end;
    if (!have || !p->CommitStats(&end) || end.durable == start.durable) return;
    const double syncs = static_cast<double>(end.syncs - start.syncs);
    auto per_sync = [syncs](uint64_t v) {
      return syncs > 0 ? static_cast<double>(v) / syncs : 0.0;
    };
    state.counters["commits_per_sync"] = per_sync(end.durable - start.durable);
    state.counters["log_full_commits"] = static_cast<double>(end.log_full - start.log_full);
    state.counters["log_keys_per_sync"] = per_sync(end.synced_keys - start.synced_keys);
    state.counters["log_kib_per_sync"] = per_sync(end.sync_bytes - start.sync_bytes) / 1024;
  }
};

// The timed loop of a put benchmark on one thread: each iteration runs
// `op(rng)`; returns the per-iteration latencies (seconds).
template <typename Op>
std::vector<double> TimedPuts(benchmark::State& state, Op op) {
  std::vector<double> lat;
  lat.reserve(1 << 16);
  std::mt19937_64 rng(0x6b76 + static_cast<uint64_t>(state.thread_index()));
  for (auto _ : state) {
    Clock::time_point t0 = Clock::now();
    std::string err = op(rng);
    Clock::time_point t1 = Clock::now();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    lat.push_back(Seconds(t0, t1));
  }
  return lat;
}

// Shared by DurablePut, AsyncPut and BatchTxn100: runs `op` per iteration on
// every thread, merges all threads' latencies in thread 0 (p50_us, p99_us of
// the merged set; with --latency_dump also recorded under `name`, the
// benchmark's reported name) and reports items_per_second as keys/s over all
// threads.
template <typename Op>
void RunPuts(benchmark::State& state, const std::string& name, Sys s, size_t keys_per_op, Op op) {
  std::string err;
  Peer* peer = GetPeer(s, &err);
  if (peer == nullptr) state.SkipWithError(err.c_str());
  CommitDelta delta;
  if (peer != nullptr && state.thread_index() == 0) delta.Start(peer);
  std::vector<double> lat;
  if (peer != nullptr) {
    lat = TimedPuts(state, [&](std::mt19937_64& rng) { return op(peer, rng); });
  } else {
    for (auto _ : state) {
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(lat.size() * keys_per_op));
  g_latencies.Add(lat);
  if (state.thread_index() != 0) return;
  std::vector<double> all = g_latencies.TakeAll(state.threads());
  if (all.empty()) return;
  if (!g_config.latency_dump.empty()) g_latency_dump.Record(name, state.max_iterations, all);
  state.counters["p50_us"] = PercentileUs(&all, 0.50);
  state.counters["p99_us"] = PercentileUs(&all, 0.99);
  delta.Report(peer, state);
}

// The value an overwrite of key i writes: alternates, so each put changes it.
std::string_view WriteValue(uint32_t i, uint64_t r) {
  return (r & 1) != 0 ? g_data->alt_value(i) : g_data->value(i);
}

void BM_DurablePut(benchmark::State& state, Sys s) {
  const std::string name = absl::StrCat("BM_DurablePut/", SysName(s), "/threads:", state.threads());
  RunPuts(state, name, s, 1, [](Peer* p, std::mt19937_64& rng) {
    const uint64_t r = rng();
    const uint32_t i = static_cast<uint32_t>((r >> 1) % g_data->size());
    return p->Put(g_data->key(i), WriteValue(i, r), /*durable=*/true);
  });
}

void BM_AsyncPut(benchmark::State& state, Sys s) {
  RunPuts(state, absl::StrCat("BM_AsyncPut/", SysName(s)), s, 1, [](Peer* p, std::mt19937_64& rng) {
    const uint64_t r = rng();
    const uint32_t i = static_cast<uint32_t>((r >> 1) % g_data->size());
    return p->Put(g_data->key(i), WriteValue(i, r), /*durable=*/false);
  });
  std::string err;
  Peer* peer = GetPeer(s, &err);
  if (peer != nullptr && state.thread_index() == 0) {
    err = peer->Settle();  // untimed: the next benchmark starts with nothing unsynced
    if (!err.empty()) state.SkipWithError(("after the loop: " + err).c_str());
  }
}

void BM_BatchTxn100(benchmark::State& state, Sys s) {
  Kvs kvs;
  kvs.reserve(kTxnKeys);
  const std::string name = absl::StrCat("BM_BatchTxn100/", SysName(s));
  RunPuts(state, name, s, kTxnKeys, [&kvs](Peer* p, std::mt19937_64& rng) {
    kvs.clear();
    for (size_t j = 0; j < kTxnKeys; ++j) {
      const uint64_t r = rng();
      const uint32_t i = static_cast<uint32_t>((r >> 1) % g_data->size());
      kvs.emplace_back(g_data->key(i), WriteValue(i, r));
    }
    return p->PutBatch(kvs, /*durable=*/true);
  });
}

// One point get per iteration, keys in the dataset's read order; every value
// is checked.
void BM_ReadRandom(benchmark::State& state, Sys s) {
  std::string err;
  Peer* peer = GetPeer(s, &err);
  if (peer == nullptr) {
    state.SkipWithError(err.c_str());
    return;
  }
  static uint64_t cursor = 0;  // continues across runs, so repeats read other keys
  const std::vector<uint32_t>& order = g_data->read_random_order();
  std::string value;
  for (auto _ : state) {
    const uint32_t i = order[cursor++ % order.size()];
    err = peer->Get(g_data->key(i), &value);
    if (err.empty() && !g_data->ValueOk(i, value)) {
      err = std::string(peer->name()) + " Get(key " + std::to_string(i) + "): wrong value";
    }
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// kScanKeys consecutive keys from a random start per iteration; the count and
// the first key are checked.
void BM_RangeScan(benchmark::State& state, Sys s) {
  std::string err;
  Peer* peer = GetPeer(s, &err);
  if (peer == nullptr) {
    state.SkipWithError(err.c_str());
    return;
  }
  const uint64_t n = g_data->size();
  const size_t want = static_cast<size_t>(std::min<uint64_t>(kScanKeys, n));
  std::mt19937_64 rng(0x5ca9);
  std::string first;
  uint64_t items = 0, bytes = 0;
  for (auto _ : state) {
    const uint32_t start = static_cast<uint32_t>(rng() % (n - want + 1));
    size_t count = 0;
    uint64_t b = 0;
    err = peer->Scan(g_data->key(start), want, &count, &first, &b);
    if (err.empty() && (count != want || first != g_data->key(start))) {
      err = absl::StrCat(peer->name(), " scan from key ", start, " saw ", count,
                         " keys starting at '", first, "', expected ", want);
    }
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    items += count;
    bytes += b;
  }
  state.SetItemsProcessed(static_cast<int64_t>(items));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

// ---- BM_Fdatasync/device ---------------------------------------------------------

constexpr size_t kSyncBlock = 4096;
constexpr size_t kSyncBlocks = 256;

// A file of kSyncBlocks allocated, synced blocks; -1 and `err` on failure.
int OpenSyncFile(const std::string& path, char* buf, std::string* err) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    *err = "open " + path + ": " + std::strerror(errno);
    return -1;
  }
  for (size_t b = 0; b < kSyncBlocks; ++b) {
    if (pwrite(fd, buf, kSyncBlock, b * kSyncBlock) != static_cast<ssize_t>(kSyncBlock)) {
      *err = std::string("pwrite: ") + std::strerror(errno);
      break;
    }
  }
  if (err->empty() && fdatasync(fd) != 0) *err = std::string("fdatasync: ") + std::strerror(errno);
  if (!err->empty()) {
    close(fd);
    return -1;
  }
  return fd;
}

// The floor for any durable commit: one 4 KiB pwrite (an overwrite of an
// allocated block) + fdatasync per iteration, in the same directory.
void BM_FdatasyncDevice(benchmark::State& state) {
  static uint64_t seq = 0;
  const std::string path = g_run_dir + "/fdatasync-" + std::to_string(++seq);
  alignas(4096) static char buf[kSyncBlock];
  std::memset(buf, 0xab, sizeof(buf));
  std::string err;
  const int fd = OpenSyncFile(path, buf, &err);
  std::vector<double> lat;
  if (fd < 0) state.SkipWithError(err.c_str());
  uint64_t n = 0;
  for (auto _ : state) {
    buf[0] = static_cast<char>(n);
    Clock::time_point t0 = Clock::now();
    if (pwrite(fd, buf, kSyncBlock, (n++ % kSyncBlocks) * kSyncBlock) !=
        static_cast<ssize_t>(kSyncBlock)) {
      err = std::string("pwrite: ") + std::strerror(errno);
    } else if (fdatasync(fd) != 0) {
      err = std::string("fdatasync: ") + std::strerror(errno);
    }
    Clock::time_point t1 = Clock::now();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    lat.push_back(Seconds(t0, t1));
  }
  if (fd >= 0 && close(fd) != 0 && err.empty()) {
    err = std::string("close: ") + std::strerror(errno);
    state.SkipWithError(err.c_str());
  }
  std::string rm = RemovePath(path);
  if (!rm.empty() && err.empty()) state.SkipWithError(rm.c_str());
  if (lat.empty()) return;
  state.SetItemsProcessed(static_cast<int64_t>(lat.size()));
  state.counters["p50_us"] = PercentileUs(&lat, 0.50);
  state.counters["p99_us"] = PercentileUs(&lat, 0.99);
}

void RegisterAll() {
  auto name = [](const char* workload, Sys s) {
    return std::string("BM_") + workload + "/" + SysName(s);
  };
  benchmark::RegisterBenchmark("BM_Fdatasync/device", BM_FdatasyncDevice)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  using Fn = void (*)(benchmark::State&, Sys);
  // Reads first, so they see every store exactly as the load left it, whatever
  // --benchmark_filter selects (an LSM's reads slow down with the overwrites
  // the write benchmarks leave in its memtable).
  const std::pair<const char*, Fn> reads[] = {{"ReadRandom", BM_ReadRandom},
                                              {"RangeScan", BM_RangeScan}};
  const std::pair<const char*, Fn> writes[] = {{"AsyncPut", BM_AsyncPut},
                                               {"BatchTxn100", BM_BatchTxn100}};
  for (const auto& [workload, fn] : reads) {
    for (Sys s : kSystems) {
      benchmark::RegisterBenchmark(name(workload, s).c_str(), fn, s)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (Sys s : kSystems) {
    benchmark::RegisterBenchmark(name("DurablePut", s).c_str(), BM_DurablePut, s)
        ->Threads(1)
        ->Threads(8)
        ->Threads(64)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (const auto& [workload, fn] : writes) {
    for (Sys s : kSystems) {
      benchmark::RegisterBenchmark(name(workload, s).c_str(), fn, s)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// ---- main ------------------------------------------------------------------------

// Removes our flags from argv; false on a bad value.
bool ParseOwnFlags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    uint64_t v = 0;
    if (a.rfind("--num=", 0) == 0) {
      if (!ParseU64(a.c_str() + 6, &v) || v == 0 || v > 0xffffffffull) {
        std::fprintf(stderr, "kv_bench: bad %s (1..2^32-1)\n", a.c_str());
        return false;
      }
      g_config.num = v;
    } else if (a.rfind("--dir=", 0) == 0 && a.size() > 6) {
      g_config.dir = a.substr(6);
    } else if (a.rfind("--cowkv_nodesize=", 0) == 0) {
      g_config.cowkv_nodesize = static_cast<uint32_t>(std::atoi(a.c_str() + 17));
    } else if (a == "--cowkv_io=direct" || a == "--cowkv_io=buffered") {
      g_config.cowkv_direct_io = (a == "--cowkv_io=direct");
    } else if (a == "--cowkv_device=zeroed" || a == "--cowkv_device=sparse") {
      g_config.cowkv_zero_device = (a == "--cowkv_device=zeroed");
    } else if (a == "--cowkv_scan=iterator" || a == "--cowkv_scan=range") {
      g_config.cowkv_scan_range = (a == "--cowkv_scan=range");
    } else if (a.rfind("--latency_dump=", 0) == 0 && a.size() > 15) {
      g_config.latency_dump = a.substr(15);
    } else if (a.rfind("--num", 0) == 0 || a.rfind("--dir", 0) == 0 ||
               a.rfind("--latency_dump", 0) == 0 || a.rfind("--cowkv_scan", 0) == 0) {
      std::fprintf(stderr, "kv_bench: bad %s\n", a.c_str());
      return false;
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

int Main(int argc, char** argv) {
  if (!ParseOwnFlags(&argc, argv)) return 2;
  // Read before Initialize() consumes them (RunWithExactNames needs them).
  OutFlags out_flags;
  if (!ReadOutFlags(argc, argv, "kv_bench", &out_flags)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  {
    // --dir (created if needed), else $TEST_TMPDIR, else /tmp/cowkv-kvbench.
    std::string base = g_config.dir;
    if (base.empty()) {
      const char* tmp = std::getenv("TEST_TMPDIR");
      base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp/cowkv-kvbench";
    }
    std::string err;
    g_run_dir = MakeRunDir(base, "kv_bench", &err);
    if (g_run_dir.empty()) {
      std::fprintf(stderr, "kv_bench: %s\n", err.c_str());
      return 1;
    }
  }
  // Debian builds Abseil without NDEBUG, which turns on Mutex deadlock
  // detection (a graph update on every lock); production binaries turn it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  g_data = std::make_unique<Dataset>(g_config.num);
  RegisterAll();
  benchmark::AddCustomContext("num", std::to_string(g_config.num));
  benchmark::AddCustomContext("key_bytes", std::to_string(kKeySize));
  benchmark::AddCustomContext("value_bytes", std::to_string(kValueSize));
  benchmark::AddCustomContext("files_dir", g_run_dir);
  benchmark::AddCustomContext("cowkv_scan", g_config.cowkv_scan_range ? "range" : "iterator");
  if (!g_config.latency_dump.empty()) {
    benchmark::AddCustomContext("latency_dump", g_config.latency_dump);
  }
  benchmark::AddCustomContext("rocksdb_version", std::to_string(ROCKSDB_MAJOR) + "." +
                                                     std::to_string(ROCKSDB_MINOR) + "." +
                                                     std::to_string(ROCKSDB_PATCH));
  benchmark::AddCustomContext("lmdb_version", MDB_VERSION_STRING);
  // Names exactly BM_<Workload>/<system> (no /real_time suffix), so tools
  // can pair cowkv with its peers.
  RunWithExactNames(out_flags);
  benchmark::Shutdown();

  int rc = 0;
  std::string err;
  if (!g_config.latency_dump.empty()) {
    err = g_latency_dump.Write(g_config.latency_dump);
    if (!err.empty()) {
      std::fprintf(stderr, "kv_bench: --latency_dump: %s\n", err.c_str());
      rc = 1;
    }
  }
  err = CloseFixtures();
  if (!err.empty()) {
    std::fprintf(stderr, "kv_bench: closing stores: %s\n", err.c_str());
    rc = 1;
  }
  err = RemovePath(g_run_dir);
  if (!err.empty()) {
    std::fprintf(stderr, "kv_bench: %s\n", err.c_str());
    rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace cowkv_bench

int main(int argc, char** argv) { return cowkv_bench::Main(argc, argv); }
