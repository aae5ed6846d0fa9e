// Goal: file events show exactly the durable file changes across power
// loss (issue 18, "Files"). After a cut at any flush point, in every loss
// mode, a watcher that restarts from its span start either gets the events
// of exactly the changes that survived — a prefix of the changes made, in
// order, holding everything it was shown before the cut and every change
// an acknowledged commit or watched fsync covered, and the file tree is
// the one that prefix of changes built — or, when the span itself did not
// survive, OUT_OF_RANGE (and then it was shown nothing). Every fourth cut
// also crashes the replay once.
// Method: before the watch, an unwatched file is written and fsynced (the
// log then holds file keys, so the watch must start a new span); then one
// writer creates, writes, renames (files and directories), unlinks,
// fsyncs (commits while watched), commits and makes durable KV puts (log
// syncs that must carry no file change), with a watcher polling
// ReadFileEvents (up to the committed revision) between them. The change
// in flight at the cut is kept aside and accepted only as the last one.
// The planted bugs kFileWatchSeesUncommitted (events read to the current
// revision) and kFileFsyncLogsWhileWatched (a watched fsync syncs the
// log) are caught. Replay: --seed=N.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/errors.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/crash_harness.h"
#include "engine/testing/file_watch_model.h"
#include "engine/testing/loss_modes.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::FileTreeModel;
using Type = FileEvent::Type;

constexpr int kOps = 40;

// An event without its inode (the in-flight change's is not known).
std::string Show(const FileEvent& e) {
  return absl::StrCat(e.revision, " ", testing::FileEventName(e.type), " ", e.path,
                      e.new_path.empty() ? "" : " -> ", e.new_path);
}

// The model: the file tree (names, kinds, sizes) after each recorded change.
struct Tree {
  FileTreeModel names;
  std::map<uint64_t, uint64_t> size;  // regular files
};

std::string Listing(const Tree& t) {
  std::vector<std::string> out;
  for (bool dirs : {true, false}) {
    for (uint64_t ino : t.names.Inodes(dirs)) {
      if (ino == FileTreeModel::kRoot) continue;
      auto s = t.size.find(ino);
      out.push_back(absl::StrCat(t.names.Path(ino), dirs ? "/" : "",
                                 s == t.size.end() ? "" : absl::StrCat(" ", s->second)));
    }
  }
  std::sort(out.begin(), out.end());
  return absl::StrJoin(out, "\n");
}

struct Outcome {
  uint64_t start = 0;                  // the span start StartFileEvents answered
  std::vector<std::string> events;     // the changes made (Show), in order
  std::vector<std::string> listings;   // listings[n]: the tree after the first n changes
  std::optional<std::string> pending;  // the change in flight at the cut
  std::string pending_listing;
  size_t acked = 0;               // changes a commit or watched fsync acknowledged
  std::vector<std::string> seen;  // what the watcher was shown
  uint64_t seen_to = 0;
};

Options WorkloadOptions(Options::TestHooks::PlantedBug bug) {
  Options o = testing::TestOptions();
  o.default_durability = Durability::kAsync;
  o.test_hooks.planted_bug = bug;
  return o;
}

void Poll(Subvolume* sv, Outcome* out) {
  FileEventsRequest q;
  q.from_revision = out->seen_to + 1;
  absl::StatusOr<FileEventsResult> r = sv->ReadFileEvents(q);
  if (!r.ok()) return;
  for (const FileEvent& e : r->events) out->seen.push_back(Show(e));
  out->seen_to = r->next_revision - 1;
}

class Writer {
 public:
  Writer(Store* store, Subvolume* sv, uint64_t seed, Outcome* out)
      : store_(store), sv_(sv), rng_(seed), out_(out) {}

  // One random change; false once the device died.
  bool Step() {
    const int dice = static_cast<int>(rng_() % 20);
    const uint64_t dir = Pick(tree_.names.Inodes(true));
    const std::string name = absl::StrCat("n", rng_() % 5);
    const std::optional<uint64_t> child = tree_.names.Child(dir, name);
    Tree next = tree_;
    const uint64_t rev = store_->Stats().revision + 1;
    Files f = sv_->files();
    if (dice < 5 && !child) {
      const bool mkdir = dice < 2;
      next.names.Create(rev, dir, name, 1, mkdir ? Type::kMkdir : Type::kCreate);
      Begin(next);
      absl::StatusOr<FileStat> st = mkdir ? f.MkdirAt(dir, name) : f.CreateAt(dir, name);
      if (!st.ok()) return false;
      tree_.names.Create(rev, dir, name, st->ino, mkdir ? Type::kMkdir : Type::kCreate);
      if (!mkdir) tree_.size[st->ino] = 0;
      return Done();
    }
    if (dice < 9 && child && !tree_.names.IsDir(*child)) {
      const uint64_t off = rng_() % 3000, len = 1 + rng_() % 5000;
      next.names.Touch(rev, *child, Type::kModify);
      next.size[*child] = std::max(next.size[*child], off + len);
      Begin(next);
      if (!f.Write(*child, off, std::string(len, 'w')).ok()) return false;
      tree_ = next;
      return Done();
    }
    if (dice < 12 && child) return Rename(dir, name, *child, rev);
    if (dice < 14 && child && !tree_.names.IsDir(*child)) {
      next.names.Remove(rev, dir, name);
      next.size.erase(*child);
      Begin(next);
      if (!f.UnlinkAt(dir, name).ok()) return false;
      tree_ = next;
      return Done();
    }
    return Other(dice);
  }

 private:
  uint64_t Pick(const std::vector<uint64_t>& v) { return v[rng_() % v.size()]; }
  void Begin(const Tree& next) {
    out_->pending = Show(next.names.events().back());
    out_->pending_listing = Listing(next);
  }
  bool Done() {
    out_->events.push_back(*out_->pending);
    out_->listings.push_back(Listing(tree_));
    out_->pending.reset();
    return true;
  }

  bool Rename(uint64_t fdir, const std::string& fname, uint64_t f, uint64_t rev) {
    const uint64_t tdir = Pick(tree_.names.Inodes(true));
    const std::string tname = absl::StrCat("n", rng_() % 5);
    if (tree_.names.Child(tdir, tname) ||
        (tree_.names.IsDir(f) && tree_.names.IsAncestor(f, tdir))) {
      return true;
    }
    Tree next = tree_;
    next.names.Rename(rev, fdir, fname, tdir, tname, false);
    Begin(next);
    if (!sv_->files().RenameAt(fdir, fname, tdir, tname).ok()) return false;
    tree_ = next;
    return Done();
  }

  bool Other(int dice) {
    if (dice < 16) {
      std::vector<uint64_t> files;
      for (const auto& [ino, s] : tree_.size) files.push_back(ino);
      if (files.empty()) return true;
      // Watched: fsync commits every change so far.
      if (!sv_->files().Fsync(Pick(files)).ok()) return false;
      out_->acked = out_->events.size();
      return true;
    }
    if (dice < 17) {
      if (!store_->Commit().ok()) return false;
      out_->acked = out_->events.size();
      return true;
    }
    if (dice < 19) {
      // A durable KV put: a log sync, which must carry no file change.
      return sv_->PutItem(absl::StrCat("k", rng_() % 4), "v", Durability::kDurable).ok();
    }
    Poll(sv_, out_);
    return true;
  }

  Store* store_;
  Subvolume* sv_;
  std::mt19937_64 rng_;
  Outcome* out_;
  Tree tree_;
};

Outcome RunWorkload(BlockDevice* dev, uint64_t seed, Options::TestHooks::PlantedBug bug) {
  Outcome out;
  auto store = Store::Open(dev, WorkloadOptions(bug));
  if (!store.ok()) return out;
  auto sv = (*store)->DefaultSubvolume();
  if (!sv.ok()) return out;
  // Unwatched: a file fsynced into the log (no event, no revision).
  Files f = (*sv)->files();
  absl::StatusOr<FileStat> pre = f.Create("/pre");
  if (!pre.ok() || !f.Write(pre->ino, 0, "before").ok() || !f.Fsync(pre->ino).ok()) return out;
  absl::StatusOr<uint64_t> start = (*sv)->StartFileEvents();
  if (!start.ok()) return out;
  out.start = *start;
  out.seen_to = *start - 1;
  Writer w(store->get(), sv->get(), seed, &out);
  out.listings.push_back("");  // replaced below: the tree of no recorded change
  for (int i = 0; i < kOps; ++i) {
    if (!w.Step()) break;
    if (i % 3 == 0) Poll(sv->get(), &out);
  }
  sv->reset();
  (void)(*store)->Close();
  return out;
}

// The tree as the store has it, in Listing's form ("pre" left out: it is
// not the watcher's change).
absl::StatusOr<std::string> StoreListing(Files f) {
  std::vector<std::string> out;
  std::vector<std::pair<uint64_t, std::string>> dirs = {{FileTreeModel::kRoot, ""}};
  while (!dirs.empty()) {
    auto [dir, path] = dirs.back();
    dirs.pop_back();
    COWKV_ASSIGN_OR_RETURN(ReadDirResult r, f.ReadDirInode(dir));
    for (const DirEntryInfo& e : r.entries) {
      const std::string p = path.empty() ? e.name : absl::StrCat(path, "/", e.name);
      if (p == "pre") continue;
      if (e.kind == FileKind::kDirectory) {
        out.push_back(p + "/");
        dirs.push_back({e.ino, p});
        continue;
      }
      COWKV_ASSIGN_OR_RETURN(FileStat st, f.StatInode(e.ino));
      out.push_back(absl::StrCat(p, " ", st.size));
    }
  }
  std::sort(out.begin(), out.end());
  return absl::StrJoin(out, "\n");
}

void Verify(Store* store, const Outcome& run, std::vector<std::string>* problems) {
  auto sv = store->DefaultSubvolume();
  if (!sv.ok()) return problems->push_back(sv.status().ToString());
  if (run.start == 0) return;  // cut before the watch began
  absl::StatusOr<uint64_t> start = (*sv)->StartFileEvents();
  if (!start.ok()) return problems->push_back("StartFileEvents: " + start.status().ToString());
  FileEventsRequest q;
  q.from_revision = run.start;
  absl::StatusOr<FileEventsResult> r = (*sv)->ReadFileEvents(q);
  if (*start != run.start) {
    // The span did not survive: its watcher must resume elsewhere, and can
    // have been shown nothing.
    if (ReasonOf(r.status()) != ErrorReason::kCompacted) {
      problems->push_back("a lost span read as " + r.status().ToString());
    }
    if (!run.seen.empty()) {
      problems->push_back(absl::StrCat("the span was lost, but the watcher was shown ",
                                       run.seen.size(), " events"));
    }
    return;
  }
  if (!r.ok()) return problems->push_back("ReadFileEvents: " + r.status().ToString());
  std::vector<std::string> have;
  for (const FileEvent& e : r->events) have.push_back(Show(e));
  std::vector<std::string> made = run.events;
  if (run.pending) made.push_back(*run.pending);
  const size_t n = have.size();
  if (n > made.size() || !std::equal(have.begin(), have.end(), made.begin())) {
    return problems->push_back(absl::StrCat(
        "events after the restart are not a prefix of the "
        "changes made:\n  have:\n    ",
        absl::StrJoin(have, "\n    "), "\n  made:\n    ", absl::StrJoin(made, "\n    ")));
  }
  if (n < run.acked) {
    problems->push_back(
        absl::StrCat(run.acked, " changes were acknowledged durable, ", n, " events survived"));
  }
  if (run.seen.size() > n || !std::equal(run.seen.begin(), run.seen.end(), have.begin())) {
    problems->push_back(absl::StrCat("the watcher was shown ", run.seen.size(),
                                     " events; after the restart ", n, " are there"));
  }
  const std::string want = n == made.size() && run.pending ? run.pending_listing
                           : n == 0                        ? std::string()
                                                           : run.listings[n];
  absl::StatusOr<std::string> got = StoreListing((*sv)->files());
  if (!got.ok()) return problems->push_back("listing: " + got.status().ToString());
  if (*got != want) {
    problems->push_back(absl::StrCat("after ", n, " events the tree is\n    ", *got,
                                     "\n  but those changes made\n    ", want));
  }
}

testing::CrashReport Sweep(FaultDevice::LossMode mode, uint64_t default_seed,
                           Options::TestHooks::PlantedBug bug, bool stop_at_first) {
  return testing::SweepEveryFlush<Outcome>(
      mode, default_seed, WorkloadOptions(Options::TestHooks::PlantedBug::kNone), stop_at_first,
      [bug](FaultDevice* dev, uint64_t seed) { return RunWorkload(dev, seed, bug); }, Verify);
}

class FileWatchCrash : public ::testing::TestWithParam<FaultDevice::LossMode> {};

TEST_P(FileWatchCrash, EveryFlushPointShowsExactlyTheDurableFileEvents) {
  const testing::CrashReport report =
      Sweep(GetParam(), 23, Options::TestHooks::PlantedBug::kNone, true);
  testing::ExpectCleanSweep(report, 10u);
}

INSTANTIATE_TEST_SUITE_P(AllLossModes, FileWatchCrash, testing::AllLossModes(),
                         testing::LossModeName);

// The planted bugs: the watcher is shown changes no commit sealed yet; a
// watched fsync makes a change durable through the log, without its event.
TEST(FileWatchCrashPlanted, SeesUncommittedIsCaught) {
  const testing::CrashReport report =
      Sweep(FaultDevice::LossMode::kDropAll, 23,
            Options::TestHooks::PlantedBug::kFileWatchSeesUncommitted, false);
  testing::ExpectPlantedBugCaught(report, "no cut saw events of lost changes");
}

TEST(FileWatchCrashPlanted, FsyncThroughTheLogIsCaught) {
  const testing::CrashReport report =
      Sweep(FaultDevice::LossMode::kDropAll, 23,
            Options::TestHooks::PlantedBug::kFileFsyncLogsWhileWatched, false);
  testing::ExpectPlantedBugCaught(report, "no cut found a durable change without its event");
}

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
