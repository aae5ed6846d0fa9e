// StoreImpl::FsBackendImpl: the store's fs::FsBackend — the tree reads and
// writes fs::FsOps asks for, with their data references and space
// reservations — shared by the file call path (fs_path.cc) and log replay
// (replay.cc). Private to engine/store.
#ifndef COWKV_ENGINE_STORE_FS_BACKEND_IMPL_H_
#define COWKV_ENGINE_STORE_FS_BACKEND_IMPL_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/crc32c.h"
#include "engine/fs/fs_backend.h"
#include "engine/fs/fs_events.h"
#include "engine/fs/fs_ops.h"
#include "engine/store/store_impl.h"

namespace cowkv {

// One subvolume's items, data and log as the fs layer sees them. Lives for
// one operation, under the tree lock the caller holds.
class StoreImpl::FsBackendImpl : public fs::FsBackend {
 public:
  FsBackendImpl(StoreImpl* s, uint64_t subvol, Tree* tree) : s_(s), subvol_(subvol), tree_(tree) {}

  uint64_t subvol() const override { return subvol_; }
  uint64_t generation() const override { return s_->txn_->generation(); }
  bool read_only() const override { return s_->txn_->IsReadOnly(subvol_); }
  size_t max_value_size() const override { return tree_->max_value_size(); }

  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key) override {
    return tree_->Lookup(key);
  }

  absl::Status Scan(absl::string_view start, absl::string_view end, bool reverse,
                    const ScanFn& fn) override {
    TreeIterator it(tree_);
    if (!reverse) {
      for (it.Seek(start); it.Valid() && it.key() < end; it.Next()) {
        if (!fn(it.key(), it.value())) break;
      }
      return it.status();
    }
    it.SeekForPrev(end);
    if (it.Valid() && it.key() == end) it.Prev();
    for (; it.Valid() && it.key() >= start; it.Prev()) {
      if (!fn(it.key(), it.value())) break;
    }
    return it.status();
  }

  absl::Status ScanWithPath(absl::string_view start, absl::string_view end,
                            const PathScanFn& fn) override {
    TreeIterator it(tree_);
    std::vector<fs::PathNode> path;
    for (it.Seek(start); it.Valid() && it.key() < end; it.Next()) {
      // Rebuilt only when the iterator moved to another leaf.
      const auto [leaf, leaf_gen] = it.PathNode(0);
      if (path.empty() || path[0].bytenr != leaf || path[0].generation != leaf_gen ||
          path.size() != static_cast<size_t>(it.path_levels())) {
        path.clear();
        for (int lv = 0; lv < it.path_levels(); ++lv) {
          path.push_back({it.PathNode(lv).first, it.PathNode(lv).second});
        }
      }
      if (!fn(it.key(), it.value(), path)) break;
    }
    return it.status();
  }

  absl::Status Apply(const std::vector<fs::FsWrite>& writes) override;

  absl::StatusOr<format::DataRef> WriteData(absl::string_view data) override {
    COWKV_ASSIGN_OR_RETURN(format::DataRef d, s_->txn_->AllocDataExtent(data.size()));
    std::string buf(data);
    buf.resize(d.len, '\0');
    d.value_len = d.len;
    d.crc = Crc32c(buf.data(), buf.size());
    absl::Status w = s_->device_->WriteAt(d.bytenr, buf.data(), buf.size());
    if (!w.ok()) {
      s_->txn_->ReleaseUnusedData(d);
      return w;
    }
    return d;
  }
  void ReleaseData(const format::DataRef& d) override { s_->txn_->ReleaseUnusedData(d); }
  absl::StatusOr<format::DataRef> AllocData(uint64_t len) override {
    COWKV_ASSIGN_OR_RETURN(format::DataRef d, s_->txn_->AllocDataExtent(len));
    d.value_len = 0;
    d.crc = 0;
    return d;
  }
  uint64_t FreeDataBytes() override { return s_->txn_->Stats().free_bytes; }

  // Corrupt bytes are reported through CorruptionError, as every other
  // read of the device does: one message shape, and counted in
  // corruptions_detected (the KV value path, LoadValue, does the same).
  absl::StatusOr<std::string> ReadData(const format::DataRef& d) override {
    CorruptionSite site;
    site.what = "data extent";
    site.bytenr = d.bytenr;
    site.owner = subvol_;
    if (d.bytenr + d.value_len > s_->device_->Size() || d.value_len > d.len) {
      return COWKV_CORRUPTION(site, "extent past the end of the device",
                              absl::StrCat(d.bytenr + d.value_len),
                              absl::StrCat(s_->device_->Size()));
    }
    std::string buf(d.value_len, '\0');
    COWKV_RETURN_IF_ERROR(s_->device_->ReadAt(d.bytenr, buf.data(), buf.size()));
    const uint32_t crc = Crc32c(buf.data(), buf.size());
    if (crc != d.crc) {
      return COWKV_CORRUPTION(site, absl::StrCat("checksum mismatch over ", d.value_len, " bytes"),
                              absl::StrCat(crc), absl::StrCat(d.crc));
    }
    return buf;
  }

  void NoteLog(absl::string_view key) override { s_->log_->NoteChange(subvol_, key); }
  absl::StatusOr<bool> LogContains(absl::string_view key) override {
    return s_->log_->Contains(subvol_, key);
  }
  bool LogHasFsEntries() override { return s_->log_->HasFsEntries(subvol_); }

  // With the fiemap path cache (seed 002), the extent-tree leaf of the last
  // lookup is kept for the next: fiemap asks about extents in file order,
  // which for a file written sequentially is disk order too.
  absl::StatusOr<uint64_t> DataExtentRefs(uint64_t bytenr, uint64_t len) override {
    return s_->txn_->DataExtentRefs(bytenr, len,
                                    s_->options_.fiemap_path_cache ? &extent_hint_ : nullptr);
  }
  absl::StatusOr<bool> TreeBlockShared(const fs::PathNode& n) override {
    return s_->txn_->TreeBlockShared(subvol_, n.bytenr, n.generation);
  }
  absl::Status WithExtentReads(absl::FunctionRef<absl::Status()> fn) override {
    return s_->txn_->WithExtentReads(fn);
  }
  uint64_t snapshot_epoch() const override {
    return s_->snapshot_epoch_.load(std::memory_order_acquire);
  }
  uint64_t drop_epoch() const override { return s_->drop_epoch_.load(std::memory_order_acquire); }

  // File events (file_watch_path.cc). Set up by StoreImpl::PrepareFileEvents.
  bool recording_file_events() const override { return recording_; }
  void AddFileEvent(fs::FileEventRecord ev) override { events_.push_back(std::move(ev)); }
  void RecordFileEvents() { recording_ = true; }
  // The next Apply writes `info` with the span closed, noted for the log.
  void CloseFileEventSpan(const fs::FileEventInfo& info) { close_span_ = info; }
  bool span_closed() const { return span_closed_; }
  uint64_t events_written() const { return events_written_; }

 private:
  struct ApplyPlan;
  // Adds one write to `plan` (sizes checked, old value looked up if needed).
  absl::Status PlanWrite(const fs::FsWrite& w, ApplyPlan* plan);
  // `op_writes` and the pending events (under revision *revision, the next
  // one) or the closed info, into `all`; their keys and values live in
  // extra_ until the next call.
  void StageFileEventWrites(const std::vector<fs::FsWrite>& op_writes,
                            std::vector<fs::FsWrite>* all, uint64_t* revision);
  // After Apply wrote them: the revision is taken, the queue emptied.
  void FileEventsApplied(uint64_t revision);

  StoreImpl* const s_;
  const uint64_t subvol_;
  Tree* const tree_;
  Tree::LeafHint extent_hint_;
  bool recording_ = false;
  std::optional<fs::FileEventInfo> close_span_;
  std::vector<fs::FileEventRecord> events_;
  std::vector<std::pair<std::string, std::optional<std::string>>> extra_;
  bool span_closed_ = false;
  uint64_t events_written_ = 0;
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_STORE_FS_BACKEND_IMPL_H_
