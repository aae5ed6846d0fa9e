// NodeCache's bookkeeping against a model: random creates, discards, seals
// and write-completions; after each step the dirty count read without the
// lock (DirtyNodes, what the throttler asks on every write) equals the
// locked Stats() and the model, SealDirty returns exactly the dirty nodes in
// bytenr order, and sealed nodes stay readable until written.
#include "engine/tree/node_cache.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cowkv/device.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

constexpr uint32_t kNodesize = 4096;

format::NodeHeader Header(uint64_t bytenr) {
  format::NodeHeader h;
  h.bytenr = bytenr;
  h.generation = 1;
  h.owner = 5;
  h.level = 0;
  return h;
}

TEST(NodeCache, DirtyCountMatchesTheModelThroughEveryTransition) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    MemDevice dev(16 << 20);
    // A small clean bound, so eviction runs too.
    NodeCache cache(&dev, std::string(16, 'f'), kNodesize, 4096, 8 * kNodesize);
    std::set<uint64_t> dirty;
    std::map<uint64_t, const Node*> sealed;     // sealed, not yet written or freed
    std::vector<std::vector<NodeRef>> batches;  // sealed, not yet written
    for (int step = 0; step < 600; ++step) {
      const int op = rng() % 10;
      const uint64_t bytenr = (1 + rng() % 64) * kNodesize;
      if (op < 5) {
        if (!dirty.count(bytenr) && !sealed.count(bytenr)) {
          cache.NewDirty(Header(bytenr));
          dirty.insert(bytenr);
        }
      } else if (op < 7) {
        cache.Discard(bytenr);  // freed: dirty, sealed or absent alike
        dirty.erase(bytenr);
        sealed.erase(bytenr);
      } else if (op < 9) {
        std::vector<NodeRef> out = cache.SealDirty();
        std::vector<uint64_t> got;
        for (const NodeRef& n : out) got.push_back(n->bytenr);
        EXPECT_EQ(got, std::vector<uint64_t>(dirty.begin(), dirty.end()));
        for (const NodeRef& n : out) sealed[n->bytenr] = n.get();
        dirty.clear();
        batches.push_back(std::move(out));
      } else if (!batches.empty()) {
        const size_t i = rng() % batches.size();
        for (const NodeRef& n : batches[i]) {
          // A bytenr freed and sealed again since belongs to a later batch.
          auto it = sealed.find(n->bytenr);
          if (it != sealed.end() && it->second == n.get()) sealed.erase(it);
        }
        cache.MarkWritten(batches[i]);
        batches.erase(batches.begin() + i);
      }
      ASSERT_EQ(cache.DirtyNodes(), dirty.size()) << "step " << step;
      const NodeCacheStats s = cache.Stats();
      ASSERT_EQ(s.dirty_nodes, dirty.size());
      ASSERT_EQ(s.dirty_bytes, dirty.size() * kNodesize);
    }
  }
}

}  // namespace
}  // namespace cowkv
