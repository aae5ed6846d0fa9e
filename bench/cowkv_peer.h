// The cowkv side of the comparison: a Store over a FileDevice on a sparse
// file, committed only when the benchmark says (no interval or dirty-bytes
// trigger), with a node cache large enough to hold the whole tree.
#ifndef COWKV_BENCH_COWKV_PEER_H_
#define COWKV_BENCH_COWKV_PEER_H_

#include <cstdint>
#include <memory>

#include "bench/kv_system.h"

namespace cowkv_bench {

struct CowkvPeerOptions {
  uint64_t device_bytes = 4ull << 30;       // sparse file size
  uint64_t node_cache_bytes = 1ull << 30;
};

std::unique_ptr<KvSystem> NewCowkvPeer(const CowkvPeerOptions& options = {});

}  // namespace cowkv_bench

#endif  // COWKV_BENCH_COWKV_PEER_H_
