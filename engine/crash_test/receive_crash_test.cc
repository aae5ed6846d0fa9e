// Goal: power loss during a receive never leaves a partial subvolume:
// after the remount a received subvolume is either absent or whole (its
// digest equals the sender's), the hidden tree of an unfinished receive is
// dropped, and `check` is clean.
// Method: two streams are made once on a separate store (a full one of
// snapshot p, and an incremental one of s against p, both with file data
// and KV values in extents). The workload receives them in 4 KiB pieces
// and commits every few pieces, as background commits would, so the
// hidden tree reaches the device half filled; the harness cuts power at
// every flush point, in every loss mode. Verify: the visible subvolumes
// are the last acknowledged state or the one in flight, each received one
// has the sender's digest, and after the cleaner runs nothing is pending.
//
// ResumableReceiveCrash: the same with resumable receives. Verify: after
// the remount each stream's subvolume is whole, or a partial receive of it
// is listed and a continuation made from its token (by the sender, still
// open) completes it to the sender's digest, or nothing of it is there and
// a whole resumable receive lands; then no partial receive and no hidden
// tree is left, and `check` is clean.
// Replay: --seed=N.
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/crash_harness.h"
#include "engine/testing/loss_modes.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

struct Streams {
  std::string full, inc;
  std::string digest_p, digest_s;
  // The sender stays open (continuations of resumable receives).
  std::unique_ptr<MemDevice> dev;
  std::unique_ptr<Store> source;
};

std::string Send(Store* s, const std::string& snap, const std::string& parent) {
  std::string out;
  SendOptions o;
  o.snapshot = snap;
  o.parent = parent;
  absl::Status st = s->Send(o, [&](absl::string_view b) {
                       out.append(b.data(), b.size());
                       return absl::OkStatus();
                     }).status();
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

// Built once: the source store's history and its two streams.
const Streams& TheStreams() {
  static const Streams* streams = [] {
    auto* out = new Streams;
    out->dev = std::make_unique<MemDevice>(64ull << 20);
    EXPECT_TRUE(Store::Mkfs(out->dev.get(), testing::TestMkfs(4096)).ok());
    std::unique_ptr<Store> s = *Store::Open(out->dev.get(), testing::TestOptions());
    EXPECT_TRUE(s->CreateSubvolume("src").ok());
    std::unique_ptr<Subvolume> sv = *s->OpenSubvolume("src");
    Files f = sv->files();
    for (int i = 0; i < 60; ++i) {
      EXPECT_TRUE(
          sv->Put(absl::StrCat("key", i), std::string(i % 7 == 0 ? 5000 : 80, 'a' + i % 26)).ok());
    }
    EXPECT_TRUE(f.Mkdir("/d").ok());
    for (int i = 0; i < 6; ++i) {
      FileStat st = *f.Create(absl::StrCat("/d/f", i));
      EXPECT_TRUE(f.Write(st.ino, 0, std::string(30000 * (i + 1), 'x' + i % 3)).ok());
    }
    EXPECT_TRUE(s->CreateSnapshot("src", "p", true).ok());
    EXPECT_TRUE(f.Rename("/d/f1", "/d/g1").ok());
    EXPECT_TRUE(f.Unlink("/d/f2").ok());
    const uint64_t f3 = *f.Lookup("/d/f3");
    EXPECT_TRUE(f.Write(f3, 4096, std::string(9000, 'n')).ok());
    for (int i = 0; i < 60; i += 3) EXPECT_TRUE(sv->Put(absl::StrCat("key", i), "changed").ok());
    EXPECT_TRUE(s->CreateSnapshot("src", "s", true).ok());
    out->full = Send(s.get(), "p", "");
    out->inc = Send(s.get(), "s", "p");
    out->digest_p = s->DigestSubvolume("p")->sha256_hex;
    out->digest_s = s->DigestSubvolume("s")->sha256_hex;
    out->source = std::move(s);
    return out;
  }();
  return *streams;
}

using State = std::set<std::string>;  // the visible subvolumes

struct Outcome {
  std::vector<State> acked;
  bool in_flight = false;
};

absl::Status ReceiveInPieces(Store* store, const std::string& stream, bool resumable = false) {
  ReceiveOptions o;
  o.resumable = resumable;
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<ReceiveStream> rs, store->Receive(o));
  int pieces = 0;
  for (size_t pos = 0; pos < stream.size(); pos += 4096) {
    COWKV_RETURN_IF_ERROR(rs->Write(absl::string_view(stream).substr(pos, 4096)));
    if (++pieces % 6 == 0) COWKV_RETURN_IF_ERROR(store->Commit());
  }
  return rs->Finish().status();
}

Outcome RunWorkload(FaultDevice* dev, bool resumable) {
  const Streams& st = TheStreams();
  Outcome out;
  State state{"default"};
  out.acked.push_back(state);
  auto opened = Store::Open(dev, testing::TestOptions());
  if (!opened.ok()) return out;
  Store* store = opened->get();
  for (const std::string* stream : {&st.full, &st.inc}) {
    out.in_flight = true;
    if (!ReceiveInPieces(store, *stream, resumable).ok()) return out;
    out.in_flight = false;
    state.insert(stream == &st.full ? "p" : "s");
    out.acked.push_back(state);
  }
  store->Close().IgnoreError();
  return out;
}

Outcome RunPlain(FaultDevice* dev, const testing::Cut&, std::vector<std::string>*) {
  return RunWorkload(dev, false);
}

Outcome RunResumable(FaultDevice* dev, const testing::Cut&, std::vector<std::string>*) {
  return RunWorkload(dev, true);
}

void Verify(Store* store, const Outcome& o, const Outcome& uncut,
            std::vector<std::string>* problems) {
  State got;
  for (const SubvolumeInfo& info : store->ListSubvolumes()) got.insert(info.name);
  const size_t acked = o.acked.size() - 1;
  const bool ok = got == o.acked[acked] ||
                  (o.in_flight && acked + 1 < uncut.acked.size() && got == uncut.acked[acked + 1]);
  if (!ok) {
    problems->push_back(absl::StrCat("visible subvolumes (", got.size(), ") are neither step ",
                                     acked, " nor the one in flight"));
    return;
  }
  const Streams& st = TheStreams();
  for (const auto& [name, want] :
       std::map<std::string, std::string>{{"p", st.digest_p}, {"s", st.digest_s}}) {
    if (got.count(name) == 0) continue;
    absl::StatusOr<SubvolumeDigest> d = store->DigestSubvolume(name);
    if (!d.ok() || d->sha256_hex != want) {
      problems->push_back(absl::StrCat(
          "received '", name, "' is not whole: ", d.ok() ? d->sha256_hex : d.status().ToString()));
    }
  }
  absl::Status dropped = store->DropDeletedSubvolumes();
  if (!dropped.ok()) problems->push_back(absl::StrCat("drop: ", dropped.ToString()));
  const uint64_t pending = store->Stats().deleted_subvolumes_pending;
  if (pending != 0) problems->push_back(absl::StrCat(pending, " hidden trees still pending"));
}

class ReceiveCrash : public ::testing::TestWithParam<FaultDevice::LossMode> {};

TEST_P(ReceiveCrash, EveryFlushPoint) {
  TheStreams();
  const std::string image = testing::FormattedImage(128ull << 20);
  testing::CrashPlan plan = testing::PlanForMode(&image, GetParam(), 5);
  testing::CrashHarness<Outcome> harness(std::move(plan), RunPlain, Verify);
  const testing::CrashReport report = harness.Sweep();
  EXPECT_EQ(harness.uncut().acked.size(), 3u);
  EXPECT_TRUE(report.ok()) << report.Failures();
}

INSTANTIATE_TEST_SUITE_P(AllLossModes, ReceiveCrash, testing::AllLossModes(),
                         testing::LossModeName);

// Cuts after which a partial receive was resumed (the sweep must meet some).
std::atomic<int> resumed_partials{0};

// Completes the receive of `name` after the remount: resumes its partial
// receive if one is listed, else receives the whole stream.
absl::Status Complete(Store* store, const std::string& name, const std::string& whole) {
  COWKV_ASSIGN_OR_RETURN(std::vector<PartialReceive> parts, store->PartialReceives());
  std::string stream = whole;
  for (const PartialReceive& p : parts) {
    if (p.name != name) continue;
    ++resumed_partials;
    SendOptions o;
    o.resume_token = p.token;
    stream.clear();
    COWKV_RETURN_IF_ERROR(TheStreams()
                              .source
                              ->Send(o,
                                     [&](absl::string_view b) {
                                       stream.append(b.data(), b.size());
                                       return absl::OkStatus();
                                     })
                              .status());
  }
  return ReceiveInPieces(store, stream, /*resumable=*/true);
}

void VerifyResumable(Store* store, const Outcome& o, const Outcome& uncut,
                     std::vector<std::string>* problems) {
  Verify(store, o, uncut, problems);
  if (!problems->empty()) return;
  const Streams& st = TheStreams();
  for (const auto& [name, stream] :
       std::vector<std::pair<std::string, const std::string*>>{{"p", &st.full}, {"s", &st.inc}}) {
    if (store->ShowSubvolume(name).ok()) continue;
    absl::Status done = Complete(store, name, *stream);
    if (!done.ok()) problems->push_back(absl::StrCat("completing '", name, "': ", done.ToString()));
  }
  for (const auto& [name, want] :
       std::map<std::string, std::string>{{"p", st.digest_p}, {"s", st.digest_s}}) {
    absl::StatusOr<SubvolumeDigest> d = store->DigestSubvolume(name);
    if (!d.ok() || d->sha256_hex != want) {
      problems->push_back(absl::StrCat(
          "resumed '", name, "' differs: ", d.ok() ? d->sha256_hex : d.status().ToString()));
    }
  }
  absl::StatusOr<std::vector<PartialReceive>> left = store->PartialReceives();
  if (!left.ok() || !left->empty()) problems->push_back("partial receives left");
}

class ResumableReceiveCrash : public ::testing::TestWithParam<FaultDevice::LossMode> {};

TEST_P(ResumableReceiveCrash, EveryFlushPoint) {
  TheStreams();
  const std::string image = testing::FormattedImage(128ull << 20);
  testing::CrashPlan plan = testing::PlanForMode(&image, GetParam(), 5);
  testing::CrashHarness<Outcome> harness(std::move(plan), RunResumable, VerifyResumable);
  resumed_partials = 0;
  const testing::CrashReport report = harness.Sweep();
  EXPECT_EQ(harness.uncut().acked.size(), 3u);
  EXPECT_TRUE(report.ok()) << report.Failures();
  EXPECT_GT(resumed_partials.load(), 0) << "no cut left a partial receive to resume";
  std::cout << "partial receives resumed after a cut: " << resumed_partials.load() << "\n";
}

INSTANTIATE_TEST_SUITE_P(AllLossModes, ResumableReceiveCrash, testing::AllLossModes(),
                         testing::LossModeName);

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
