// File events against a model (issue 18, "Files"): random file-tree
// operations — create, mkdir, symlink, write, truncate, fallocate, setattr,
// xattrs, links, unlink, rmdir, renames of files and directories within,
// into and out of the watched prefixes, exchanges — by path and by
// directory inode, fsyncs (engine commits while watched), KV writes (a
// revision, no file event), reopens (the span goes on), and unwatched
// stretches (the span closes; a new one starts later). After every step,
// events read from a random start under a random prefix (whole, and in
// pages) must equal the model's change list (testing::FileTreeModel); a
// start before the span is OUT_OF_RANGE COMPACTED with the span start. The
// planted bug kFileEventMatchesOldPath (a rename into a prefix is missed)
// is caught. A second test shows a file tree nobody watches records
// nothing and takes no revision. Replay: --seed=N --ops=N.
#include "engine/testing/file_watch_model.h"

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/errors.h"
#include "cowkv/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::FileTreeModel;
using Type = FileEvent::Type;

struct RunConfig {
  uint64_t seed = 1;
  int ops = 250;
  Options::TestHooks::PlantedBug bug = Options::TestHooks::PlantedBug::kNone;
};

const char* const kNames[] = {"a", "b", "c", "x"};
const char* const kPrefixes[] = {"", "a", "a/b", "b", "x/a", "/a/"};

std::string Diff(const std::vector<std::string>& have, const std::vector<std::string>& want) {
  if (have == want) return "";
  return absl::StrCat("\n  have:\n    ", absl::StrJoin(have, "\n    "), "\n  want:\n    ",
                      absl::StrJoin(want, "\n    "));
}

class FileWatchRun {
 public:
  explicit FileWatchRun(const RunConfig& cfg) : cfg_(cfg), rng_(cfg.seed), dev_(64ull << 20) {
    opts_ = testing::TestOptions();
    opts_.lease_expiry_interval_ms = 0;
    opts_.test_hooks.planted_bug = cfg.bug;
  }

  std::vector<std::string> Run() {
    if (!Store::Mkfs(&dev_, testing::TestMkfs(4096)).ok()) return {"mkfs failed"};
    if (!Open() || !Watch()) return problems_;
    for (op_ = 0; op_ < cfg_.ops && problems_.empty(); ++op_) {
      Step();
      if (problems_.empty() && recording_) CheckFrom(RandomStart());
    }
    if (problems_.empty() && recording_) CheckCommitted();
    sv_.reset();
    if (absl::Status s = store_->Close(); !s.ok()) problems_.push_back("close: " + s.ToString());
    for (const std::string& p : testing::CheckProblems(&dev_)) problems_.push_back(p);
    return problems_;
  }

 private:
  bool Fail(const std::string& what) {
    problems_.push_back(absl::StrCat("op ", op_, ": ", what));
    return false;
  }
  bool Open() {
    sv_.reset();
    if (store_ != nullptr && !store_->Close().ok()) return Fail("close failed");
    store_.reset();
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(&dev_, opts_);
    if (!s.ok()) return Fail("open: " + s.status().ToString());
    store_ = std::move(*s);
    sv_ = std::move(*store_->DefaultSubvolume());
    return true;
  }
  bool Watch() {
    absl::StatusOr<uint64_t> start = sv_->StartFileEvents();
    if (!start.ok()) return Fail("StartFileEvents: " + start.status().ToString());
    if (recording_ && *start != start_) {
      return Fail(absl::StrCat("the span restarted at ", *start, ", was ", start_));
    }
    if (!recording_ && start_ != 0 && unwatched_changes_ == 0 && *start != start_) {
      return Fail(absl::StrCat("no unwatched change, but the span restarted at ", *start));
    }
    if (!recording_ && unwatched_changes_ > 0 && *start <= Revision()) {
      return Fail(absl::StrCat("a new span starts at ", *start, ", the revision is ", Revision()));
    }
    start_ = *start;
    recording_ = true;
    return true;
  }
  uint64_t Revision() { return store_->Stats().revision; }
  Files F() { return sv_->files(); }
  std::string Name() { return kNames[rng_() % 4]; }
  uint64_t Pick(const std::vector<uint64_t>& v) { return v[rng_() % v.size()]; }
  std::vector<uint64_t> Regular() {
    std::vector<uint64_t> out;
    for (uint64_t ino : model_.Inodes(false)) {
      if (symlinks_.count(ino) == 0) out.push_back(ino);
    }
    return out;
  }
  std::string Slash(const std::string& p) { return "/" + p; }

  // Runs a change the model predicted; `rev` is the revision it took
  // (0 while nothing records: then it must take none).
  bool Did(const absl::Status& s, uint64_t before, uint64_t* rev) {
    if (!s.ok()) return Fail(s.ToString());
    const uint64_t after = Revision();
    if (recording_ && after != before + 1) {
      return Fail(absl::StrCat("a recorded change took revisions ", before, " -> ", after));
    }
    if (!recording_ && after != before) {
      return Fail(absl::StrCat("an unwatched change took revisions ", before, " -> ", after));
    }
    if (!recording_) ++unwatched_changes_;
    *rev = after;
    return true;
  }

  void Step() {
    const int dice = static_cast<int>(rng_() % 100);
    if (dice < 22) return Create(dice);
    if (dice < 40) return Data(dice);
    if (dice < 46) return Link();
    if (dice < 56) return Remove();
    if (dice < 76) return Rename(dice < 72 ? 0 : kRenameExchange);
    if (dice < 80) return Fsync();
    if (dice < 84) return (void)(Open() && Watch());
    if (dice < 86) return Unwatched();
    if (dice < 92) {
      // A KV write takes a revision, and is no file event.
      absl::StatusOr<uint64_t> r = sv_->PutItem(Name(), "v");
      if (!r.ok()) Fail(r.status().ToString());
      return;
    }
    CheckCommitted();
  }

  void Create(int dice) {
    const uint64_t dir = Pick(model_.Inodes(true));
    const std::string name = Name();
    if (model_.Child(dir, name).has_value()) return;
    const bool at = rng_() % 2 == 0;
    const std::string path = Slash(model_.PathIn(dir, name));
    const uint64_t before = Revision();
    absl::StatusOr<FileStat> st;
    Type t = Type::kCreate;
    if (dice < 10) {
      st = at ? F().CreateAt(dir, name) : F().Create(path);
    } else if (dice < 18) {
      t = Type::kMkdir;
      st = at ? F().MkdirAt(dir, name) : F().Mkdir(path);
    } else {
      t = Type::kSymlink;
      st = at ? F().SymlinkAt("target", dir, name) : F().Symlink("target", path);
    }
    uint64_t rev = 0;
    if (!Did(st.status(), before, &rev)) return;
    if (t == Type::kSymlink) symlinks_.insert(st->ino);
    model_.Create(rev, dir, name, st->ino, t);
  }

  void Data(int dice) {
    const std::vector<uint64_t> files = Regular();
    if (files.empty()) return;
    const uint64_t ino = Pick(files);
    const uint64_t before = Revision();
    absl::Status s;
    Type t = Type::kModify;
    if (dice < 30) {
      s = F().Write(ino, rng_() % 5000, std::string(1 + rng_() % 3000, 'w'));
    } else if (dice < 33) {
      s = F().Truncate(ino, rng_() % 4000);
    } else if (dice < 35) {
      s = F().Fallocate(ino, 0, rng_() % 8192, 1 + rng_() % 8192);
    } else if (dice < 38) {
      t = Type::kAttrib;
      SetAttrSpec spec;
      spec.mode = 0600 + rng_() % 64;
      s = F().SetAttr(ino, spec).status();
    } else {
      t = Type::kXattr;
      s = F().SetXattr(ino, "user.k", absl::StrCat(rng_() % 100));
    }
    uint64_t rev = 0;
    if (Did(s, before, &rev)) model_.Touch(rev, ino, t);
  }

  void Link() {
    const std::vector<uint64_t> files = Regular();
    if (files.empty()) return;
    const uint64_t ino = Pick(files);
    const uint64_t dir = Pick(model_.Inodes(true));
    const std::string name = Name();
    if (model_.Child(dir, name).has_value()) return;
    const uint64_t before = Revision();
    absl::Status s =
        rng_() % 2 == 0
            ? F().LinkAt(ino, dir, name).status()
            : F().Link(Slash(model_.Path(ino)), Slash(model_.PathIn(dir, name))).status();
    uint64_t rev = 0;
    if (Did(s, before, &rev)) model_.Link(rev, ino, dir, name);
  }

  void Remove() {
    const uint64_t dir = Pick(model_.Inodes(true));
    const std::string name = Name();
    const std::optional<uint64_t> c = model_.Child(dir, name);
    if (!c.has_value() || (model_.IsDir(*c) && !model_.Empty(*c))) return;
    const bool at = rng_() % 2 == 0;
    const std::string path = Slash(model_.PathIn(dir, name));
    const uint64_t before = Revision();
    absl::Status s = model_.IsDir(*c) ? (at ? F().RmdirAt(dir, name) : F().Rmdir(path))
                                      : (at ? F().UnlinkAt(dir, name) : F().Unlink(path));
    uint64_t rev = 0;
    if (!Did(s, before, &rev)) return;
    const bool last = !model_.IsDir(*c) && model_.Links(*c) == 1;
    model_.Remove(rev, dir, name);
    if (last) symlinks_.erase(*c);
  }

  // Whether renaming (fdir, fname) to (tdir, tname) is one the store
  // accepts, as the model sees it.
  bool RenameOk(uint64_t f, uint64_t tdir, std::optional<uint64_t> t, uint32_t flags) {
    if (t.has_value() && *t == f) return false;
    if (model_.IsDir(f) && model_.IsAncestor(f, tdir)) return false;
    if (flags == kRenameExchange) {
      return t.has_value() && !(model_.IsDir(*t) && model_.IsAncestor(*t, tdir));
    }
    if (!t.has_value()) return true;
    if (model_.IsDir(f) != model_.IsDir(*t)) return false;
    return !model_.IsDir(*t) || model_.Empty(*t);
  }

  void Rename(uint32_t flags) {
    const uint64_t fdir = Pick(model_.Inodes(true));
    const std::string fname = Name();
    const std::optional<uint64_t> f = model_.Child(fdir, fname);
    if (!f.has_value()) return;
    const uint64_t tdir = Pick(model_.Inodes(true));
    const std::string tname = Name();
    const std::optional<uint64_t> t = model_.Child(tdir, tname);
    if (!RenameOk(*f, tdir, t, flags)) return;
    if (flags == kRenameExchange && model_.IsDir(*t) && model_.IsAncestor(*t, fdir)) return;
    const uint64_t before = Revision();
    absl::Status s = rng_() % 2 == 0 ? F().RenameAt(fdir, fname, tdir, tname, flags)
                                     : F().Rename(Slash(model_.PathIn(fdir, fname)),
                                                  Slash(model_.PathIn(tdir, tname)), flags);
    uint64_t rev = 0;
    if (!Did(s, before, &rev)) return;
    const bool gone =
        t.has_value() && flags != kRenameExchange && !model_.IsDir(*t) && model_.Links(*t) == 1;
    model_.Rename(rev, fdir, fname, tdir, tname, flags == kRenameExchange);
    if (gone) symlinks_.erase(*t);
  }

  // While watched, fsync commits: everything is within the committed
  // revision after it.
  void Fsync() {
    const std::vector<uint64_t> files = Regular();
    if (files.empty()) return;
    if (absl::Status s = F().Fsync(Pick(files)); !s.ok())
      return (void)Fail("fsync: " + s.ToString());
    if (recording_ && store_->Durable().committed_revision != Revision()) {
      Fail(absl::StrCat("after a watched fsync the committed revision is ",
                        store_->Durable().committed_revision, ", the current ", Revision()));
    }
  }

  // Nobody watches for a few changes: they take no revision, the span
  // closes, and the next watch starts a new one (older starts refused).
  void Unwatched() {
    sv_->StopFileEvents();
    recording_ = false;
    unwatched_changes_ = 0;
    for (int i = 0; i < 3 && problems_.empty(); ++i) {
      if (rng_() % 2 == 0) {
        Create(static_cast<int>(rng_() % 18));
      } else {
        Data(20);
      }
    }
    const uint64_t old = start_;
    if (!problems_.empty() || !Watch()) return;
    if (start_ == old) return;    // nothing changed unwatched: the span goes on
    model_.ForgetEventsAfter(0);  // none before the new span is readable
    FileEventsRequest q;
    q.from_revision = old;
    q.to_revision = Revision();
    absl::StatusOr<FileEventsResult> r = sv_->ReadFileEvents(q);
    const absl::optional<absl::Cord> p = r.status().GetPayload(kCompactRevisionPayloadUrl);
    if (old < start_ && (ReasonOf(r.status()) != ErrorReason::kCompacted || !p.has_value() ||
                         std::string(*p) != absl::StrCat(start_))) {
      Fail(absl::StrCat("a start at ", old, " before the span at ", start_, ": ",
                        r.status().ToString()));
    }
  }

  uint64_t RandomStart() {
    const uint64_t lo = start_ > 2 ? start_ - 2 : 1;
    return lo + rng_() % (Revision() + 2 - lo);
  }

  void CheckFrom(uint64_t from) {
    FileEventsRequest q;
    q.from_revision = from;
    q.to_revision = Revision();
    q.prefix = kPrefixes[rng_() % 6];
    const std::string at = absl::StrCat("from ", from, " prefix '", q.prefix, "': ");
    absl::StatusOr<FileEventsResult> r = sv_->ReadFileEvents(q);
    if (from < start_) {
      if (ReasonOf(r.status()) != ErrorReason::kCompacted) {
        Fail(at + "before the span start " + absl::StrCat(start_) + ": " + r.status().ToString());
      }
      return;
    }
    if (!r.ok()) return (void)Fail(at + r.status().ToString());
    std::string norm = q.prefix;
    while (!norm.empty() && norm.front() == '/') norm.erase(0, 1);
    while (!norm.empty() && norm.back() == '/') norm.pop_back();
    const std::vector<std::string> want = model_.Events(from, q.to_revision, norm);
    std::string d = Diff(testing::ShowFileEvents(r->events), want);
    if (!d.empty()) return (void)Fail(at + d);
    // In pages of a few events.
    std::vector<FileEvent> paged;
    q.max_events = 1 + rng_() % 3;
    for (int pages = 0; pages < 10000; ++pages) {
      absl::StatusOr<FileEventsResult> p = sv_->ReadFileEvents(q);
      if (!p.ok()) return (void)Fail(at + "paged: " + p.status().ToString());
      paged.insert(paged.end(), p->events.begin(), p->events.end());
      if (!p->more) break;
      q.from_revision = p->next_revision;
    }
    d = Diff(testing::ShowFileEvents(paged), want);
    if (!d.empty()) Fail(at + "paged: " + d);
  }

  // The default read stops at the committed revision; a commit moves it
  // to the current one.
  void CheckCommitted() {
    FileEventsRequest q;
    q.from_revision = start_;
    absl::StatusOr<FileEventsResult> r = sv_->ReadFileEvents(q);
    if (!r.ok()) return (void)Fail("ReadFileEvents: " + r.status().ToString());
    const uint64_t committed = store_->Durable().committed_revision;
    std::string d = Diff(testing::ShowFileEvents(r->events), model_.Events(start_, committed, ""));
    if (!d.empty()) return (void)Fail(absl::StrCat("to the committed revision ", committed, d));
    if (!store_->Commit().ok()) return (void)Fail("commit failed");
    if (store_->Durable().committed_revision != Revision()) {
      Fail(absl::StrCat("after a commit the committed revision is ",
                        store_->Durable().committed_revision, ", the current ", Revision()));
    }
  }

  const RunConfig cfg_;
  std::mt19937_64 rng_;
  MemDevice dev_;
  Options opts_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Subvolume> sv_;
  FileTreeModel model_;
  std::set<uint64_t> symlinks_;
  uint64_t start_ = 0;
  bool recording_ = false;
  int unwatched_changes_ = 0;
  std::vector<std::string> problems_;
  int op_ = 0;
};

std::vector<std::string> RunWorkload(const RunConfig& cfg) { return FileWatchRun(cfg).Run(); }

TEST(FileWatchModel, EventsMatchTheModel) {
  testing::ExpectSeededRunsAgree(1, 6, false, [](uint64_t seed) {
    RunConfig cfg;
    cfg.seed = seed;
    if (testing::Flags().ops != 0) cfg.ops = static_cast<int>(testing::Flags().ops);
    return RunWorkload(cfg);
  });
}

// The planted bug: a rename matches a prefix by its old path only, so a
// move into a watched directory is missed.
TEST(FileWatchModel, CatchesPlantedRenameByOldPathOnly) {
  const int caught = testing::SeedsCatching(3, [](uint64_t seed) {
    RunConfig cfg;
    cfg.seed = seed;
    cfg.bug = Options::TestHooks::PlantedBug::kFileEventMatchesOldPath;
    return RunWorkload(cfg);
  });
  EXPECT_GE(caught, 2) << "the model did not miss renames into a prefix";
}

// Nobody watches: file writes record nothing and take no revision; after a
// watch ends, the first write closes the span (once), the rest pay nothing.
TEST(FileWatch, UnwatchedFileTreeRecordsNothing) {
  MemDevice dev(64ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subvolume> sv, store->DefaultSubvolume());
  Files f = sv->files();
  auto churn = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const std::string p = absl::StrCat("/f", i);
      ASSERT_OK_AND_ASSIGN(FileStat st, f.Create(p));
      ASSERT_OK(f.Write(st.ino, 0, std::string(100, 'x')));
      ASSERT_OK(f.Rename(p, absl::StrCat(p, "r")));
      ASSERT_OK(f.Unlink(absl::StrCat(p, "r")));
    }
  };
  const uint64_t rev = store->Stats().revision;
  churn(50);
  EXPECT_EQ(store->Stats().revision, rev);
  EXPECT_EQ(store->Stats().fs_file_events, 0u);
  EXPECT_EQ(store->Stats().fs_file_event_span_closes, 0u);
  EXPECT_EQ(sv->ReadFileEvents({}).status().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_OK_AND_ASSIGN(uint64_t start, sv->StartFileEvents());
  EXPECT_EQ(start, rev + 1);
  churn(2);
  EXPECT_EQ(store->Stats().fs_file_events, 8u);
  EXPECT_EQ(store->Stats().revision, rev + 8);
  sv->StopFileEvents();
  churn(20);
  EXPECT_EQ(store->Stats().fs_file_events, 8u);
  EXPECT_EQ(store->Stats().fs_file_event_span_closes, 1u);
  EXPECT_EQ(store->Stats().revision, rev + 8);
  // A new watch starts a new span after the unrecorded changes.
  ASSERT_OK_AND_ASSIGN(uint64_t again, sv->StartFileEvents());
  EXPECT_EQ(again, rev + 9);
  FileEventsRequest q;
  q.from_revision = start;
  EXPECT_EQ(ReasonOf(sv->ReadFileEvents(q).status()), ErrorReason::kCompacted);
  sv.reset();
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
