// The LMDB side of the comparison: one environment directory, map size big
// enough for the data set, no environment flags (so every commit is durable
// with LMDB's defaults: data fdatasync + meta page sync).
#ifndef COWKV_BENCH_LMDB_PEER_H_
#define COWKV_BENCH_LMDB_PEER_H_

#include <cstdint>
#include <memory>

#include "bench/kv_system.h"

namespace cowkv_bench {

struct LmdbPeerOptions {
  uint64_t map_bytes = 4ull << 30;
  // ReadBatch: true = a fresh read snapshot per Get (mdb_txn_renew/reset, the
  // like of cowkv's self-contained Store::Get); false = one read transaction
  // for the whole batch (db_bench_mdb's style).
  bool txn_per_read = true;
};

std::unique_ptr<KvSystem> NewLmdbPeer(const LmdbPeerOptions& options = {});

}  // namespace cowkv_bench

#endif  // COWKV_BENCH_LMDB_PEER_H_
