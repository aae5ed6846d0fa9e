#include "engine/refs/delayed_refs.h"

#include "engine/format/items.h"

#include "engine/base/check.h"

namespace cowkv {

const DelayedRefHead& DelayedRefs::Add(uint64_t bytenr, uint64_t num_bytes, uint8_t level,
                                       BackrefKey ref, int64_t delta, bool new_alloc,
                                       uint64_t generation) {
  COWKV_CHECK(delta != 0);
  COWKV_CHECK(num_bytes > 0);
  COWKV_CHECK(format::IsBackref(ref.type));
  auto [it, inserted] = heads_.try_emplace(bytenr);
  DelayedRefHead& h = it->second;
  if (inserted) {
    h.bytenr = bytenr;
    h.num_bytes = num_bytes;
    h.level = level;
    h.generation = generation;
    h.is_tree_block = !format::IsDataRef(ref.type);
  }
  COWKV_CHECK(h.num_bytes == num_bytes);
  if (new_alloc) {
    COWKV_CHECK_MSG(inserted, "fresh allocation of an extent with pending refs");
    // A fresh extent starts with exactly one reference, its allocator's.
    COWKV_CHECK(delta == 1);
    h.must_insert = true;
  }
  int64_t& d = h.refs[ref];
  d += delta;
  if (d == 0) h.refs.erase(ref);
  h.ref_mod += delta;
  ++pending_updates_;
  ++updates_since_commit_;
  return h;
}

void DelayedRefs::SetFullBackref(uint64_t bytenr, uint64_t num_bytes, uint8_t level) {
  auto [it, inserted] = heads_.try_emplace(bytenr);
  DelayedRefHead& h = it->second;
  if (inserted) {
    h.bytenr = bytenr;
    h.num_bytes = num_bytes;
    h.level = level;
  }
  h.set_full_backref = true;
  ++pending_updates_;
}

const DelayedRefHead* DelayedRefs::Find(uint64_t bytenr) const {
  auto it = heads_.find(bytenr);
  return it == heads_.end() ? nullptr : &it->second;
}

bool DelayedRefs::DropIfCancelled(uint64_t bytenr) {
  auto it = heads_.find(bytenr);
  if (it == heads_.end()) return false;
  const DelayedRefHead& h = it->second;
  if (!h.must_insert || h.ref_mod != 0 || !h.refs.empty() || h.set_full_backref) return false;
  heads_.erase(it);
  return true;
}

std::vector<DelayedRefHead> DelayedRefs::TakeAll() {
  std::vector<DelayedRefHead> out;
  out.reserve(heads_.size());
  for (auto& [bytenr, h] : heads_) out.push_back(std::move(h));
  heads_.clear();
  pending_updates_ = 0;
  updates_since_commit_ = 0;
  ++runs_;
  heads_run_ += out.size();
  return out;
}

std::vector<DelayedRefHead> DelayedRefs::TakeBatch(size_t max_heads) {
  COWKV_DCHECK(max_heads > 0);
  std::vector<DelayedRefHead> out;
  auto it = heads_.begin();
  while (it != heads_.end() && out.size() < max_heads) {
    out.push_back(std::move(it->second));
    it = heads_.erase(it);
  }
  pending_updates_ = pending_updates_ > out.size() ? pending_updates_ - out.size() : 0;
  ++runs_;
  heads_run_ += out.size();
  return out;
}

DelayedRefStats DelayedRefs::Stats() const {
  return DelayedRefStats{heads_.size(), pending_updates_, runs_, heads_run_};
}

}  // namespace cowkv
