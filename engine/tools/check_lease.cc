// CheckLeaseTree: see check_lease.h. Every lease item decodes; every
// attachment has its record and its KV key; a key is attached once; a
// lease holds at most kMaxKeysPerLease keys.
#include "engine/tools/check_lease.h"

#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/limits.h"
#include "engine/kv/kv_item.h"
#include "engine/lease/lease_item.h"

namespace cowkv {

void CheckLeaseTree(Tree* tree, uint64_t id, std::vector<std::string>* problems) {
  auto problem = [&](const auto&... args) {
    problems->push_back(absl::StrCat("tree ", id, " leases: ", args...));
  };
  std::map<uint64_t, size_t> keys_per_lease;  // leases with a record
  std::map<std::string, uint64_t> attached;
  TreeIterator it(tree);
  for (it.Seek(std::string(1, lease::kLeasePrefix)); it.Valid() && lease::IsLeaseTreeKey(it.key());
       it.Next()) {
    absl::StatusOr<lease::LeaseItem> item = lease::DecodeLeaseItem(it.key(), it.value());
    if (!item.ok()) {
      problem(item.status().message());
      continue;
    }
    if (item->record) {
      keys_per_lease[item->id] = 0;
      continue;
    }
    const std::string shown = absl::CHexEscape(item->user_key.substr(0, 64));
    auto lease = keys_per_lease.find(item->id);
    if (lease == keys_per_lease.end()) {
      problem("key '", shown, "' attached to lease ", item->id, " which has no record");
    } else if (++lease->second == kMaxKeysPerLease + 1) {
      problem("lease ", item->id, " holds more than ", kMaxKeysPerLease, " keys");
    }
    auto [prev, fresh] = attached.emplace(item->user_key, item->id);
    if (!fresh) {
      problem("key '", shown, "' attached to leases ", prev->second, " and ", item->id);
    }
  }
  if (!it.status().ok()) {
    problem(it.status().message());
    return;
  }
  for (const auto& [key, lease] : attached) {
    absl::Status s = tree->Get(kv::TreeKey(key)).status();
    if (!s.ok()) {
      problem("key '", absl::CHexEscape(key.substr(0, 64)), "' attached to lease ", lease,
              " does not exist (", s.message(), ")");
    }
  }
}

}  // namespace cowkv
