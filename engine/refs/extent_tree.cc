#include "engine/refs/extent_tree.h"

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/format/items.h"

namespace cowkv {

using format::EncodeKey17;
using format::ExtentItem;
using format::Key17;

namespace {

absl::Status Inconsistent(const DelayedRefHead& h, absl::string_view what) {
  CorruptionSite site;
  site.what = "extent tree";
  site.bytenr = h.bytenr;
  return COWKV_CORRUPTION(site, what, "", "");
}

// Data back-references carry a count (one per leaf item pointing at the
// extent from that tree or leaf: a file may reference one extent from
// several items); tree-block references are single.
absl::Status ApplyDataBackref(Tree* tree, const DelayedRefHead& h, const std::string& key,
                              BackrefKey ref, int64_t delta) {
  int64_t count = 0;
  absl::StatusOr<std::string> cur = tree->Get(key);
  if (cur.ok()) {
    absl::StatusOr<uint32_t> c = format::DecodeDataRefCount(*cur, h.bytenr);
    if (!c.ok()) return c.status();
    count = *c;
  } else if (!absl::IsNotFound(cur.status())) {
    return cur.status();
  }
  count += delta;
  if (count < 0 || count > UINT32_MAX) {
    return Inconsistent(h, absl::StrCat("data backref type ", ref.type, " ", ref.param,
                                        " count would be ", count));
  }
  if (count == 0) return tree->Delete(key);
  return tree->Put(key, format::EncodeDataRefCount(static_cast<uint32_t>(count)));
}

absl::Status ApplyBackrefs(Tree* tree, const DelayedRefHead& h) {
  for (const auto& [ref, delta] : h.refs) {
    std::string key = EncodeKey17(Key17{h.bytenr, ref.type, ref.param});
    if (format::IsDataRef(ref.type)) {
      COWKV_RETURN_IF_ERROR(ApplyDataBackref(tree, h, key, ref, delta));
    } else if (delta == 1) {
      absl::StatusOr<std::string> cur = tree->Get(key);
      if (cur.ok()) return Inconsistent(h, absl::StrCat("duplicate backref type ", ref.type, " ", ref.param));
      if (!absl::IsNotFound(cur.status())) return cur.status();
      COWKV_RETURN_IF_ERROR(tree->Put(key, ""));
    } else if (delta == -1) {
      absl::Status s = tree->Delete(key);
      if (absl::IsNotFound(s)) {
        return Inconsistent(h, absl::StrCat("drop of missing backref type ", ref.type, " ", ref.param));
      }
      COWKV_RETURN_IF_ERROR(s);
    } else {
      return Inconsistent(h, absl::StrCat("backref delta ", delta, " on a single-count backref"));
    }
  }
  return absl::OkStatus();
}

absl::Status RunHead(Tree* tree, const DelayedRefHead& h, const ExtentFreeFn& on_free) {
  std::string key = EncodeKey17(Key17{h.bytenr, format::kExtentItem, h.num_bytes});
  if (h.must_insert) {
    if (h.ref_mod <= 0) return Inconsistent(h, "fresh extent without references");
    ExtentItem e;
    e.refs = static_cast<uint64_t>(h.ref_mod);
    e.generation = h.generation;
    e.flags = h.is_tree_block ? format::kExtentFlagTreeBlock : format::kExtentFlagData;
    if (h.set_full_backref) e.flags |= format::kExtentFlagFullBackref;
    e.level = h.level;
    COWKV_RETURN_IF_ERROR(tree->Put(key, format::EncodeExtentItem(e)));
    return ApplyBackrefs(tree, h);
  }
  absl::StatusOr<std::string> raw = tree->Get(key);
  if (absl::IsNotFound(raw.status())) return Inconsistent(h, "ref update on a missing extent item");
  if (!raw.ok()) return raw.status();
  COWKV_ASSIGN_OR_RETURN(ExtentItem e, format::DecodeExtentItem(*raw, h.bytenr));
  COWKV_RETURN_IF_ERROR(ApplyBackrefs(tree, h));
  // The refcount read from the device is checked, not asserted: a head
  // that would take it below zero means the extent tree and the trees
  // disagree on disk (DATA_LOSS). What the engine writes is asserted by the
  // encoder (a refcount of zero deletes the item, never encodes it).
  int64_t refs = static_cast<int64_t>(e.refs) + h.ref_mod;
  if (refs < 0) return Inconsistent(h, absl::StrCat("refcount below zero: ", refs));
  if (refs == 0) {
    COWKV_RETURN_IF_ERROR(tree->Delete(key));
    on_free(h.bytenr, h.num_bytes);
    return absl::OkStatus();
  }
  const bool set_flag = h.set_full_backref && !(e.flags & format::kExtentFlagFullBackref);
  if (h.ref_mod != 0 || set_flag) {
    e.refs = static_cast<uint64_t>(refs);
    if (set_flag) e.flags |= format::kExtentFlagFullBackref;
    COWKV_RETURN_IF_ERROR(tree->Put(key, format::EncodeExtentItem(e)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDelayedRefs(Tree* extent_tree, const std::vector<DelayedRefHead>& heads,
                            const ExtentFreeFn& on_free) {
  for (const DelayedRefHead& h : heads) {
    COWKV_RETURN_IF_ERROR(RunHead(extent_tree, h, on_free));
  }
  return absl::OkStatus();
}

}  // namespace cowkv
