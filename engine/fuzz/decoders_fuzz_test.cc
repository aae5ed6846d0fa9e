// Goal: every on-disk byte is decoded defensively. Each decoder of the
// device's contents (superblock, nodes, engine items, fs items, KV items, log
// root blocks), fed arbitrary bytes, returns OK or DATA_LOSS: it never
// crashes, never reads out of bounds (the test command runs this under
// --config=asan) and never takes long. What it accepts, the matching encoder
// writes back in a form it accepts again.
// Method: per decoder, a deterministic mutation loop (mutator.h) over seeds
// made by the real encoders plus hand-made edge cases; accepted mutants join
// the seed pool so mutations stack. Checksummed formats are fuzzed twice:
// raw, and with the checksum restamped after mutating so the parser behind
// the checksum is reached (a buggy writer stamps a valid checksum on
// malformed bytes).
// Replay: --fuzz_iters=N --fuzz_seed=S (a failure or crash prints both, the
// target, the iteration and the input in hex). The long form:
//   bazel run --config=asan //engine/fuzz:decoders_fuzz_test_long -- --fuzz_iters=200000
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/format/node_codec.h"
#include "engine/format/superblock.h"
#include "engine/fs/fs_items.h"
#include "engine/fuzz/mutator.h"
#include "engine/fs/fs_events.h"
#include "engine/kv/history_item.h"
#include "engine/kv/kv_item.h"
#include "engine/lease/lease_item.h"
#include "engine/log/log_format.h"
#include "gtest/gtest.h"

#if defined(__SANITIZE_ADDRESS__)
#define COWKV_FUZZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COWKV_FUZZ_SANITIZED 1
#endif
#endif
#ifdef COWKV_FUZZ_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

namespace cowkv {
namespace fuzz {
namespace {

using format::Item;
using format::ItemView;
using format::NodeExpect;
using format::NodeHeader;

// ---- Flags and the harness ---------------------------------------------------------

// Mutants per target: about 1 s for the whole test optimized and 8 s under
// asan on two cores. decoders_fuzz_test_long passes 2,000,000.
constexpr uint64_t kDefaultIters = 100000;

struct FuzzFlags {
  uint64_t iters = kDefaultIters;
  uint64_t seed = 0;  // xor-ed into every target's rng seed: new runs, same targets
};

FuzzFlags& Flags() {
  static FuzzFlags f;
  return f;
}

void ParseFlags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    auto take = [&](const char* name, uint64_t* v) {
      const size_t n = std::strlen(name);
      if (std::strncmp(argv[i], name, n) != 0) return false;
      *v = std::strtoull(argv[i] + n, nullptr, 10);
      return true;
    };
    // The last one wins, so `bazel run ..._long -- --fuzz_iters=N` overrides the BUILD args.
    if (take("--fuzz_iters=", &Flags().iters) || take("--fuzz_seed=", &Flags().seed)) continue;
    argv[out++] = argv[i];
  }
  *argc = out;
}

// Decodes one input and returns OK or the decoder's error. Adapters for
// decoders that return bool map false to DATA_LOSS, as their callers do.
// Properties of accepted inputs are checked inside with EXPECT_*.
using DecodeFn = std::function<absl::Status(absl::string_view)>;
// Applied to every mutant before decoding (e.g. restamping a checksum).
using FixupFn = std::function<void(std::string*)>;

struct Target {
  std::string name;
  uint64_t seed = 0;
  std::vector<std::string> valid;  // real encoder output: each must decode OK
  std::vector<std::string> extra;  // hand-made edge cases and regressions
  DecodeFn decode;
  FixupFn fixup = nullptr;
  uint64_t iters_divisor = 1;  // for targets whose inputs are large
};

// What the loop is decoding right now, for the crash report.
struct Current {
  const Target* target = nullptr;
  bool mutant = false;  // else a seed or an edge case
  uint64_t index = 0;   // the iteration, or the seed's place in the pool
  const std::string* input = nullptr;
};
Current g_current;

// Hex of `s` with its trailing zeros counted, not spelled (blocks are mostly padding).
std::string HexDump(absl::string_view s) {
  size_t end = s.size();
  while (end > 0 && s[end - 1] == 0) --end;
  std::string out = absl::BytesToHexString(s.substr(0, end));
  if (end < s.size()) absl::StrAppend(&out, " then ", s.size() - end, " zero bytes");
  return out;
}

std::string Replay() {
  const Current& c = g_current;
  if (c.target == nullptr || c.input == nullptr) return "";
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      test == nullptr ? "" : absl::StrCat(test->test_suite_name(), ".", test->name());
  return absl::StrCat("target ", c.target->name, c.mutant ? " iteration " : " seed ", c.index,
                      " (replay: --gtest_filter=", filter, " --fuzz_seed=", Flags().seed,
                      " --fuzz_iters=", Flags().iters, "), input of ", c.input->size(),
                      " bytes: ", HexDump(*c.input));
}

// Called by the sanitizers before they exit, and by std::terminate.
void ReportCrash() {
  const std::string r = Replay();
  if (!r.empty()) std::fprintf(stderr, "decoder fuzz crash: %s\n", r.c_str());
}

void InstallCrashReport() {
#ifdef COWKV_FUZZ_SANITIZED
  __sanitizer_set_death_callback(ReportCrash);
#endif
  std::set_terminate([] {
    ReportCrash();
    std::abort();
  });
}

// Crc32c of [4, end) at offset 0: the checksum layout of the superblock,
// nodes and log root blocks alike.
void RestampCrc(std::string* s) {
  if (s->size() >= 4) EncodeLE32(s->data(), Crc32c(s->data() + 4, s->size() - 4));
}

void CheckOutcome(const absl::Status& s) {
  // Every decoder here documents DATA_LOSS as its only error.
  if (!s.ok()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  }
}

// Edge cases every decoder gets: nothing, one byte, and a seed-sized block
// of zeros and of 0xff.
void AddEdgeCases(const Target& t, std::vector<std::string>* pool) {
  pool->insert(pool->end(), {"", std::string(1, '\0'), std::string(1, '\xff')});
  const size_t n = t.valid.empty() ? 64 : t.valid.front().size();
  pool->push_back(std::string(n, '\0'));
  pool->push_back(std::string(n, '\xff'));
  pool->insert(pool->end(), t.extra.begin(), t.extra.end());
}

// Accepted mutants join the pool (bounded) so that later mutations stack on
// inputs that already got past the checks.
void Remember(const std::string& in, size_t originals, Mutator* m,
              std::vector<std::string>* pool) {
  constexpr size_t kMaxAccepted = 256;
  if (pool->size() < originals + kMaxAccepted) {
    pool->push_back(in);
  } else {
    (*pool)[originals + m->Below(kMaxAccepted)] = in;
  }
}

// Decodes the seeds, edge cases and regressions as they are: encoder output
// must decode OK, the rest OK or DATA_LOSS. False on a failure.
bool CheckPool(const Target& t, const std::vector<std::string>& pool) {
  for (size_t i = 0; i < pool.size(); ++i) {
    g_current.index = i;
    g_current.input = &pool[i];
    const absl::Status s = t.decode(pool[i]);
    // If an encoder's output does not decode, the mutants test nothing.
    if (i < t.valid.size()) {
      EXPECT_TRUE(s.ok()) << s;
    }
    CheckOutcome(s);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << Replay();
      return false;
    }
  }
  return true;
}

void RunTarget(const Target& t) {
  std::vector<std::string> pool = t.valid;
  AddEdgeCases(t, &pool);
  g_current = Current();
  g_current.target = &t;
  if (!CheckPool(t, pool)) {
    g_current = Current();
    return;
  }
  const size_t originals = pool.size();
  Mutator m(t.seed ^ Flags().seed);
  const uint64_t iters = std::max<uint64_t>(1, Flags().iters / t.iters_divisor);
  // Decoders are linear in their input (at most 64 KiB here); anything this
  // slow is a hang in the making. Bazel's test timeout catches real hangs.
  constexpr int64_t kTooSlowMs = 1000;
  g_current.mutant = true;
  for (uint64_t i = 0; i < iters; ++i) {
    std::string in = pool[m.Below(pool.size())];
    m.Mutate(&in);
    if (t.fixup) t.fixup(&in);
    g_current.index = i;
    g_current.input = &in;
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = t.decode(in);
    const int64_t took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
    CheckOutcome(s);
    EXPECT_LT(took_ms, kTooSlowMs) << "the decoder took " << took_ms << " ms";
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << Replay();
      break;
    }
    if (s.ok()) Remember(in, originals, &m, &pool);
  }
  g_current = Current();
}

// Two-part inputs (a tree key and its value) travel as one string so that
// mutations reach both parts and the boundary: u8 key length, key, value.
std::string Pair(absl::string_view key, absl::string_view value) {
  EXPECT_LE(key.size(), 255u);
  return absl::StrCat(std::string(1, static_cast<char>(key.size())), key, value);
}

void Split(absl::string_view in, absl::string_view* key, absl::string_view* value) {
  if (in.empty()) {
    *key = *value = absl::string_view();
    return;
  }
  const size_t n = std::min<size_t>(static_cast<uint8_t>(in[0]), in.size() - 1);
  *key = in.substr(1, n);
  *value = in.substr(1 + n);
}

size_t FirstDifference(absl::string_view a, absl::string_view b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

// For an accepted input: `again`, the encoding of what was decoded, must be
// accepted too and re-encode to itself (decoding keeps everything the
// encoder writes). Where the decoder checks every byte (`exact`), `again`
// must be the input itself.
template <typename Decode, typename Encode>
void ExpectStable(absl::string_view input, const std::string& again, bool exact, Decode decode,
                  Encode encode) {
  if (exact) {
    EXPECT_TRUE(again == input) << "re-encoding differs at byte "
                                << FirstDifference(again, input);
  }
  auto decoded = decode(again);
  ASSERT_TRUE(decoded.ok()) << "the re-encoding does not decode: " << decoded.status();
  const std::string third = encode(*decoded);
  EXPECT_TRUE(third == again) << "re-encoding is not stable at byte "
                              << FirstDifference(third, again);
}

absl::Status Rejected(absl::string_view what) {
  return absl::DataLossError(absl::StrCat(what, " rejected"));
}

const std::string kFsid(format::kFsidSize, 'F');

// ---- Superblock --------------------------------------------------------------------

constexpr uint64_t kSbAt = format::kSuperblockOffsets[0];

format::Superblock BaseSuper() {
  format::Superblock sb;
  sb.fsid = kFsid;
  sb.bytenr = kSbAt;
  sb.generation = 7;
  sb.root = 2 << 20;
  sb.root_generation = 7;
  sb.root_level = 1;
  sb.total_bytes = 1ull << 30;
  sb.bytes_used = 3 * 16384;
  sb.nodesize = 16384;
  sb.sectorsize = 4096;
  sb.log_root = 4 << 20;
  sb.log_nonce = 0x5eed;
  sb.next_tree_id = 256;
  sb.revision = 99;
  return sb;
}

std::vector<std::string> SuperSeeds() {
  std::vector<std::string> out;
  format::Superblock sb = BaseSuper();
  out.push_back(format::EncodeSuperblock(sb));
  // The smallest device, its root in the last node, no log.
  sb.total_bytes = kMinDeviceBytes;
  sb.bytes_used = sb.total_bytes;
  sb.root = sb.total_bytes - sb.nodesize;
  sb.log_root = 0;
  sb.log_nonce = 0;
  out.push_back(format::EncodeSuperblock(sb));
  // The extremes: 64 KiB nodes, 512-byte sectors, the top level, counters at max.
  sb = BaseSuper();
  sb.nodesize = 65536;
  sb.sectorsize = 512;
  sb.root_level = format::kMaxLevel - 1;
  sb.generation = sb.root_generation = sb.flags = UINT64_MAX;
  sb.revision = sb.next_tree_id = sb.log_nonce = UINT64_MAX;
  sb.total_bytes = sb.bytes_used = ~uint64_t{65535};
  sb.root = sb.total_bytes - sb.nodesize;
  sb.log_root = sb.root - sb.nodesize;
  out.push_back(format::EncodeSuperblock(sb));
  // 4 KiB nodes and sectors.
  sb = BaseSuper();
  sb.nodesize = sb.sectorsize = 4096;
  sb.root = (1 << 20) + 4096;
  sb.generation = sb.root_generation = 1;
  sb.root_level = 0;
  out.push_back(format::EncodeSuperblock(sb));
  return out;
}

absl::Status DecodeSuper(absl::string_view in) {
  absl::StatusOr<format::Superblock> sb = format::DecodeSuperblock(in, kSbAt);
  if (!sb.ok()) return sb.status();
  // Exact: every byte that is not a field must be zero.
  ExpectStable(
      in, format::EncodeSuperblock(*sb), true,
      [](absl::string_view v) { return format::DecodeSuperblock(v, kSbAt); },
      format::EncodeSuperblock);
  return absl::OkStatus();
}

TEST(SuperblockFuzz, Raw) {
  RunTarget({"superblock", 101, SuperSeeds(), {}, DecodeSuper, nullptr});
}

TEST(SuperblockFuzz, RestampedChecksum) {
  RunTarget({"superblock restamped", 102, SuperSeeds(), {}, DecodeSuper, RestampCrc});
}

// ---- Nodes ------------------------------------------------------------------------

constexpr uint32_t kSector = 4096;
constexpr uint64_t kNodeAt = 1 << 20;
// Only the bytenr is pinned, so mutated generations, owners and levels get
// past the header into the item checks.
const NodeExpect kAnyNode{kNodeAt, 0, 0, -1};
// What a parent pointer pins as well (every seed node has generation 9, owner 5).
const NodeExpect kPinnedNode{kNodeAt, 9, 5, -1};

std::string Node(const NodeHeader& h, const std::vector<Item>& items, uint32_t ns) {
  std::string out(ns, '\0');
  format::EncodeNode(h, items, kFsid, ns, out.data());
  return out;
}

std::string Counter(int i) {
  char b[16];
  std::snprintf(b, sizeof(b), "%05d", i);
  return b;
}

std::vector<std::string> LeafSeeds(uint32_t ns) {
  const NodeHeader h{kNodeAt, 9, 5, 0};
  std::vector<std::string> out;
  out.push_back(Node(h, {}, ns));
  std::vector<Item> items;
  for (int i = 0; i < 40; ++i) items.push_back({"key" + Counter(i), std::string(i * 3, 'v')});
  out.push_back(Node(h, items, ns));
  // Tiny items until the node is full.
  items.clear();
  const size_t tiny = format::ItemSize(Counter(0).size(), 0);
  for (size_t i = 0; (i + 1) * tiny <= format::NodeCapacity(ns); ++i) {
    items.push_back({Counter(static_cast<int>(i)), ""});
  }
  out.push_back(Node(h, items, ns));
  // Two largest items: a maximal key each, exactly filling the node.
  const size_t vmax = format::MaxLeafItemSize(ns) - format::kSlotSize - format::kMaxTreeKeySize;
  std::string k(format::kMaxTreeKeySize, 'K');
  items = {{k, std::string(vmax, 'a')}};
  out.push_back(Node(h, items, ns));
  k.back() = 'L';
  items.push_back({k, std::string(vmax, 'b')});
  out.push_back(Node(h, items, ns));
  return out;
}

std::vector<std::string> InternalSeeds(uint32_t ns) {
  std::vector<std::string> out;
  auto child = [](int i, uint64_t gen) {
    return format::EncodeChildPtr({(2ull << 20) + i * kSector, gen});
  };
  out.push_back(Node({kNodeAt, 9, 5, 1}, {{"", child(0, 8)}, {"m", child(1, 9)}}, ns));
  // The top level, maximal keys.
  std::vector<Item> items = {{"", child(0, 1)}};
  for (char c : {'a', 'b'}) items.push_back({std::string(format::kMaxTreeKeySize, c), child(c, 9)});
  out.push_back(Node({kNodeAt, 9, 5, format::kMaxLevel - 1}, items, ns));
  // As many children as fit.
  items = {{"", child(0, 9)}};
  const size_t each = format::ItemSize(Counter(0).size(), format::kChildPtrSize);
  for (int i = 1; (i + 1) * each <= format::NodeCapacity(ns); ++i) {
    items.push_back({Counter(i), child(i, 9)});
  }
  out.push_back(Node({kNodeAt, 9, 5, 2}, items, ns));
  return out;
}

bool Inside(absl::string_view outer, absl::string_view inner) {
  const auto lo = reinterpret_cast<uintptr_t>(outer.data());
  const auto p = reinterpret_cast<uintptr_t>(inner.data());
  return p >= lo && p + inner.size() <= lo + outer.size();
}

absl::Status DecodeNodeChecked(absl::string_view in, uint32_t ns, const NodeExpect& expect) {
  NodeHeader h;
  std::vector<ItemView> views;
  absl::Status s = format::DecodeNodeViews(in, kFsid, ns, kSector, expect, &h, &views);
  if (!s.ok()) return s;
  for (const ItemView& v : views) {
    EXPECT_TRUE(Inside(in, v.key) && Inside(in, v.value)) << "an item view leaves the node";
  }
  NodeHeader h2;
  std::vector<Item> items;
  s = format::DecodeNode(in, kFsid, ns, kSector, expect, &h2, &items);
  EXPECT_TRUE(s.ok()) << "DecodeNode disagrees with DecodeNodeViews: " << s;
  if (!s.ok()) return absl::OkStatus();
  // Every byte is checked (the reserved header tail must be zero), so the
  // encoder writes back the very same node.
  std::string want(in);
  RestampCrc(&want);
  EXPECT_TRUE(Node(h2, items, ns) == want)
      << "re-encoding differs at byte " << FirstDifference(Node(h2, items, ns), want);
  return absl::OkStatus();
}

Target NodeTarget(std::string name, uint64_t seed, uint32_t ns, bool restamp,
                  const NodeExpect& expect) {
  std::vector<std::string> seeds = LeafSeeds(ns);
  for (std::string& s : InternalSeeds(ns)) seeds.push_back(std::move(s));
  Target t{std::move(name), seed, std::move(seeds), {}, nullptr, nullptr};
  t.decode = [ns, expect](absl::string_view in) { return DecodeNodeChecked(in, ns, expect); };
  if (restamp) t.fixup = RestampCrc;
  // A 64 KiB node costs sixteen 4 KiB ones to copy and checksum.
  t.iters_divisor = ns / 4096;
  return t;
}

TEST(NodeFuzz, Raw) { RunTarget(NodeTarget("node 4K", 201, 4096, false, kAnyNode)); }

TEST(NodeFuzz, RestampedChecksum) {
  RunTarget(NodeTarget("node 4K restamped", 202, 4096, true, kAnyNode));
}

TEST(NodeFuzz, RestampedChecksum64K) {
  RunTarget(NodeTarget("node 64K restamped", 203, 65536, true, kPinnedNode));
}

// ---- Engine items (format/items.h) -------------------------------------------------

TEST(FormatItemsFuzz, ExtentItem) {
  using format::ExtentItem;
  std::vector<std::string> seeds;
  for (const ExtentItem& e :
       {ExtentItem{1, 7, format::kExtentFlagData, 0},
        ExtentItem{3, 9, format::kExtentFlagTreeBlock, 2},
        ExtentItem{UINT64_MAX, UINT64_MAX,
                   format::kExtentFlagTreeBlock | format::kExtentFlagFullBackref,
                   format::kMaxLevel - 1}}) {
    seeds.push_back(format::EncodeExtentItem(e));
  }
  auto decode = [](absl::string_view v) { return format::DecodeExtentItem(v, kNodeAt); };
  RunTarget({"extent item", 301, seeds, {}, [&](absl::string_view in) {
               absl::StatusOr<ExtentItem> e = decode(in);
               if (!e.ok()) return e.status();
               // Exact: the pad bytes must be zero.
               ExpectStable(in, format::EncodeExtentItem(*e), true, decode,
                            format::EncodeExtentItem);
               return absl::OkStatus();
             }});
}

TEST(FormatItemsFuzz, RootItem) {
  format::RootItem r;
  r.bytenr = 2 << 20;
  r.generation = 4;
  r.level = 1;
  std::vector<std::string> seeds = {format::EncodeRootItem(r)};
  r.flags = format::kRootFlagReadOnly | format::kRootFlagDropping;
  r.drop_level = 1;
  r.drop_progress = format::EncodeKey17({300, 1, 0});
  seeds.push_back(format::EncodeRootItem(r));
  r.bytenr = r.generation = r.last_snapshot = UINT64_MAX;
  r.level = r.drop_level = format::kMaxLevel - 1;
  r.drop_progress = std::string(format::kMaxTreeKeySize, 'p');
  seeds.push_back(format::EncodeRootItem(r));
  auto decode = [](absl::string_view v) { return format::DecodeRootItem(v, 5); };
  RunTarget({"root item", 302, seeds, {}, [&](absl::string_view in) {
               absl::StatusOr<format::RootItem> d = decode(in);
               if (!d.ok()) return d.status();
               // Exact: the pad bytes must be zero.
               ExpectStable(in, format::EncodeRootItem(*d), true, decode,
                            format::EncodeRootItem);
               return absl::OkStatus();
             }});
}

TEST(FormatItemsFuzz, SubvolInfo) {
  std::vector<std::string> seeds;
  for (const format::SubvolInfoItem& s :
       {format::SubvolInfoItem{5, 0, 1, "a"},
        format::SubvolInfoItem{256, 1700000000000, 7, "snap-1"},
        format::SubvolInfoItem{UINT64_MAX, UINT64_MAX, UINT64_MAX,
                               std::string(format::kMaxSubvolNameSize, 'n')}}) {
    seeds.push_back(format::EncodeSubvolInfo(s));
  }
  auto decode = [](absl::string_view v) { return format::DecodeSubvolInfo(v, 257); };
  RunTarget({"subvol info", 303, seeds, {}, [&](absl::string_view in) {
               absl::StatusOr<format::SubvolInfoItem> d = decode(in);
               if (!d.ok()) return d.status();
               ExpectStable(in, format::EncodeSubvolInfo(*d), true, decode,
                            format::EncodeSubvolInfo);
               return absl::OkStatus();
             }});
}

TEST(FormatItemsFuzz, DataRefCount) {
  std::vector<std::string> seeds;
  for (uint32_t c : {1u, 7u, UINT32_MAX}) seeds.push_back(format::EncodeDataRefCount(c));
  auto decode = [](absl::string_view v) { return format::DecodeDataRefCount(v, kNodeAt); };
  RunTarget({"data ref count", 304, seeds, {}, [&](absl::string_view in) {
               absl::StatusOr<uint32_t> d = decode(in);
               if (!d.ok()) return d.status();
               ExpectStable(in, format::EncodeDataRefCount(*d), true, decode,
                            format::EncodeDataRefCount);
               return absl::OkStatus();
             }});
}

TEST(FormatItemsFuzz, Key17) {
  std::vector<std::string> seeds;
  for (const format::Key17& k :
       {format::Key17{0, 0, 0}, format::Key17{256, format::kExtentItem, 16384},
        format::Key17{UINT64_MAX, 255, UINT64_MAX}}) {
    seeds.push_back(format::EncodeKey17(k));
  }
  RunTarget({"key17", 305, seeds, {}, [](absl::string_view in) {
               format::Key17 k;
               if (!format::DecodeKey17(in, &k)) return Rejected("key17");
               EXPECT_EQ(format::EncodeKey17(k), in);
               return absl::OkStatus();
             }});
}

std::string FsExtentKey(uint64_t ino, uint64_t off) {
  return fs::EncodeFsKey({ino, fs::kExtentData, off});
}

std::string RegularExtent(uint64_t bytenr, uint64_t disk_len, uint64_t off, uint64_t num) {
  fs::FileExtent e;
  e.generation = 3;
  e.kind = fs::kExtentRegular;
  e.disk_bytenr = bytenr;
  e.disk_len = disk_len;
  e.offset = off;
  e.num_bytes = num;
  e.crc = 0xc0ffee;
  return fs::EncodeFileExtent(e);
}
// A KV history entry holding `prev` (kv/history_item.h).
std::string HistoryEntryOf(const std::string& prev, uint8_t type = kv::kHistoryPut) {
  const absl::string_view p = prev;
  return kv::EncodeHistoryEntry(type, &p);
}

// A preallocated extent (fallocate): the regular layout, kind 2, crc 0.
std::string PreallocExtent(uint64_t bytenr, uint64_t disk_len, uint64_t off, uint64_t num) {
  fs::FileExtent e;
  e.generation = 3;
  e.kind = fs::kExtentPrealloc;
  e.disk_bytenr = bytenr;
  e.disk_len = disk_len;
  e.offset = off;
  e.num_bytes = num;
  return fs::EncodeFileExtent(e);
}

TEST(FormatItemsFuzz, LeafDataRef) {
  const std::vector<std::string> seeds = {
      Pair(FsExtentKey(257, 0), RegularExtent(8 << 20, 8192, 0, 8192)),
      Pair(FsExtentKey(UINT64_MAX, UINT64_MAX), RegularExtent(UINT64_MAX, UINT64_MAX, 0, 1)),
      Pair(FsExtentKey(257, 4096), PreallocExtent(8 << 20, 131072, 4096, 8192)),
      Pair(kv::TreeKey("user"), kv::EncodeExtentItem({1, 2, 2}, {9 << 20, 8192, 5000, 7})),
      Pair(kv::TreeKey(std::string(200, 'u')),
           kv::EncodeExtentItem({1, 1, 1}, {UINT64_MAX, UINT64_MAX, UINT64_MAX, 7})),
      // A KV history entry whose prev item is in an extent.
      Pair(kv::HistoryKey(9, "user"),
           HistoryEntryOf(kv::EncodeExtentItem({1, 2, 2}, {9 << 20, 8192, 5000, 7}))),
  };
  // Items that refer to no extent: an inline file extent, an inline KV value.
  fs::FileExtent inl;
  inl.inline_data = "data";
  const std::vector<std::string> extra = {
      Pair(FsExtentKey(257, 0), fs::EncodeFileExtent(inl)),
      Pair(kv::TreeKey("user"), kv::EncodeItem({1, 1, 1}, "value")),
  };
  RunTarget({"leaf data ref", 306, seeds, extra, [](absl::string_view in) {
               absl::string_view key, value;
               Split(in, &key, &value);
               format::DataRef d;
               if (!format::LeafDataRef(key, value, &d)) return Rejected("data ref");
               // What readers rely on: a non-empty extent holding the value.
               EXPECT_NE(d.len, 0u);
               EXPECT_LE(d.value_len, d.len);
               return absl::OkStatus();
             }});
}

// ---- File items (fs/fs_items.h) ----------------------------------------------------

TEST(FsItemsFuzz, FsKey) {
  std::vector<std::string> seeds;
  for (const fs::FsKey& k :
       {fs::FsKey{fs::kRootDirIno, fs::kInodeItem, 0}, fs::FsKey{257, fs::kDirIndex, 2},
        fs::FsKey{UINT64_MAX, 255, UINT64_MAX}}) {
    seeds.push_back(fs::EncodeFsKey(k));
  }
  RunTarget({"fs key", 401, seeds, {}, [](absl::string_view in) {
               fs::FsKey k;
               if (!fs::DecodeFsKey(in, &k)) return Rejected("fs key");
               EXPECT_EQ(fs::EncodeFsKey(k), in);
               return absl::OkStatus();
             }});
}

std::vector<std::string> InodeSeeds() {
  std::vector<std::string> out;
  fs::InodeItem it;
  it.generation = 5;
  it.transid = 7;
  it.size = it.nbytes = 4096;
  it.nlink = 1;
  it.mode = 0100644;
  it.atime_ns = it.ctime_ns = it.mtime_ns = it.otime_ns = 1700000000000000000;
  out.push_back(fs::EncodeInodeItem(it));
  it.mode = 040755;
  it.nlink = 2;
  out.push_back(fs::EncodeInodeItem(it));
  it.mode = 0120777;
  out.push_back(fs::EncodeInodeItem(it));
  it.generation = it.transid = it.size = it.nbytes = it.rdev = it.flags = UINT64_MAX;
  it.nlink = it.uid = it.gid = UINT32_MAX;
  it.mode = 0107777;
  it.atime_ns = it.ctime_ns = INT64_MIN;
  it.mtime_ns = it.otime_ns = INT64_MAX;
  out.push_back(fs::EncodeInodeItem(it));
  return out;
}

TEST(FsItemsFuzz, InodeItem) {
  auto decode = [](absl::string_view v) { return fs::DecodeInodeItem(v, 257); };
  RunTarget({"inode item", 402, InodeSeeds(), {}, [&](absl::string_view in) {
               absl::StatusOr<fs::InodeItem> d = decode(in);
               if (!d.ok()) return d.status();
               ExpectStable(in, fs::EncodeInodeItem(*d), true, decode, fs::EncodeInodeItem);
               return absl::OkStatus();
             }});
}

TEST(FsItemsFuzz, InodeExtrefs) {
  const uint64_t h = fs::ExtrefHash(256, "a");
  std::vector<std::string> seeds = {
      fs::EncodeInodeExtrefs({{256, 2, "a"}}),
      fs::EncodeInodeExtrefs({{256, 2, "a"}, {256, 3, "a"}}),
  };
  auto decode = [h](absl::string_view v) { return fs::DecodeInodeExtrefs(v, 257, h); };
  RunTarget({"inode extrefs", 409, seeds, {}, [&](absl::string_view in) {
               auto d = decode(in);
               if (!d.ok()) return d.status();
               ExpectStable(in, fs::EncodeInodeExtrefs(*d), true, decode, fs::EncodeInodeExtrefs);
               return absl::OkStatus();
             }});
}

TEST(FsItemsFuzz, InodeRefs) {
  std::vector<fs::InodeRef> many;
  for (int i = 0; i < 20; ++i) many.push_back({static_cast<uint64_t>(i + 2), "name" + Counter(i)});
  std::vector<std::string> seeds = {
      fs::EncodeInodeRefs({{2, "a"}}),
      fs::EncodeInodeRefs({{2, "file.txt"}, {3, "other"}}),
      fs::EncodeInodeRefs({{UINT64_MAX, std::string(kMaxNameLen, 'n')}}),
      fs::EncodeInodeRefs(many),
  };
  auto decode = [](absl::string_view v) { return fs::DecodeInodeRefs(v, 257); };
  RunTarget({"inode refs", 403, seeds, {}, [&](absl::string_view in) {
               auto d = decode(in);
               if (!d.ok()) return d.status();
               ExpectStable(in, fs::EncodeInodeRefs(*d), true, decode, fs::EncodeInodeRefs);
               return absl::OkStatus();
             }});
}

std::vector<fs::DirEntry> SampleEntries() {
  return {
      {257, fs::FileType::kRegular, 7, "a"},
      {258, fs::FileType::kDirectory, 8, "dir"},
      {259, fs::FileType::kSymlink, 9, "link"},
      {UINT64_MAX, fs::FileType::kRegular, UINT64_MAX, std::string(kMaxNameLen, 'n')},
  };
}

TEST(FsItemsFuzz, DirEntries) {
  std::vector<std::string> seeds = {fs::EncodeDirEntries(SampleEntries())};
  for (const fs::DirEntry& e : SampleEntries()) seeds.push_back(fs::EncodeDirEntries({e}));
  auto decode = [](absl::string_view v) { return fs::DecodeDirEntries(v, 256); };
  RunTarget({"dir entries", 404, seeds, {}, [&](absl::string_view in) {
               auto d = decode(in);
               // The lookup that copies only the match accepts the same
               // inputs and finds the first entry of that name.
               for (const fs::DirEntry& want : SampleEntries()) {
                 auto one = fs::FindDirEntry(in, 256, want.name);
                 EXPECT_EQ(one.ok(), d.ok());
                 if (!one.ok() || !d.ok()) continue;
                 auto it = std::find_if(d->begin(), d->end(),
                                        [&](const fs::DirEntry& e) { return e.name == want.name; });
                 EXPECT_EQ(one->has_value(), it != d->end());
                 if (one->has_value() && it != d->end()) {
                   EXPECT_EQ((*one)->child, it->child);
                 }
               }
               if (!d.ok()) return d.status();
               ExpectStable(in, fs::EncodeDirEntries(*d), true, decode, fs::EncodeDirEntries);
               return absl::OkStatus();
             }});
}

TEST(FsItemsFuzz, DirIndex) {
  std::vector<std::string> seeds;
  for (const fs::DirEntry& e : SampleEntries()) seeds.push_back(fs::EncodeDirEntries({e}));
  // Two entries: a DIR_ITEM's shape, not a DIR_INDEX's.
  const std::vector<std::string> extra = {fs::EncodeDirEntries(SampleEntries())};
  auto decode = [](absl::string_view v) { return fs::DecodeDirIndex(v, 256); };
  auto encode = [](const fs::DirEntry& e) { return fs::EncodeDirEntries({e}); };
  RunTarget({"dir index", 405, seeds, extra, [&](absl::string_view in) {
               auto d = decode(in);
               if (!d.ok()) return d.status();
               ExpectStable(in, encode(*d), true, decode, encode);
               return absl::OkStatus();
             }});
}

// A file extent input: the u64 key offset (DecodeFileExtent checks the
// extent's end against it), then the item value.
std::string WithOffset(uint64_t off, absl::string_view value) {
  std::string out(8, '\0');
  EncodeLE64(out.data(), off);
  return absl::StrCat(out, value);
}

TEST(FsItemsFuzz, FileExtent) {
  fs::FileExtent inl;
  inl.generation = 3;
  inl.inline_data = "x";
  std::vector<std::string> seeds = {WithOffset(0, fs::EncodeFileExtent(inl))};
  inl.inline_data = std::string(2000, 'd');
  seeds.push_back(WithOffset(4096, fs::EncodeFileExtent(inl)));
  seeds.push_back(WithOffset(0, RegularExtent(8 << 20, 8192, 0, 8192)));
  seeds.push_back(WithOffset(1 << 20, RegularExtent(9 << 20, 1 << 20, 4096, 65536)));
  seeds.push_back(WithOffset(1 << 20, PreallocExtent(9 << 20, 1 << 20, 4096, 65536)));
  // The last byte of a huge extent, at the last file offset that fits.
  seeds.push_back(
      WithOffset(UINT64_MAX - 1, RegularExtent(UINT64_MAX, UINT64_MAX, UINT64_MAX - 1, 1)));
  RunTarget({"file extent", 406, seeds, {}, [](absl::string_view in) {
               const uint64_t off = in.size() >= 8 ? DecodeLE64(in.data()) : 0;
               const absl::string_view value = in.substr(std::min<size_t>(8, in.size()));
               auto decode = [off](absl::string_view v) {
                 return fs::DecodeFileExtent(v, 257, off);
               };
               absl::StatusOr<fs::FileExtent> d = decode(value);
               if (!d.ok()) return d.status();
               // What readers rely on: the range read stays inside the extent
               // and the file range does not wrap.
               if (d->on_disk()) {
                 if (d->kind == fs::kExtentPrealloc) {
                   EXPECT_EQ(d->crc, 0u);
                 }
                 EXPECT_LT(d->offset, d->disk_len);
                 EXPECT_LE(d->num_bytes, d->disk_len - d->offset);
                 EXPECT_GE(off + d->num_bytes, off);
               }
               ExpectStable(value, fs::EncodeFileExtent(*d), true, decode, fs::EncodeFileExtent);
               return absl::OkStatus();
             }});
}

TEST(FsItemsFuzz, Xattrs) {
  std::vector<fs::Xattr> many;
  for (int i = 0; i < 16; ++i) many.push_back({"user.x" + Counter(i), std::string(i, 'v')});
  std::vector<std::string> seeds = {
      fs::EncodeXattrs({{"user.a", "1"}}),
      fs::EncodeXattrs({{"user.empty", ""}, {"security.selinux", "label"}}),
      fs::EncodeXattrs({{std::string(255, 'n'), std::string(4000, 'v')}}),
      fs::EncodeXattrs(many),
  };
  auto decode = [](absl::string_view v) { return fs::DecodeXattrs(v, 257); };
  RunTarget({"xattrs", 407, seeds, {}, [&](absl::string_view in) {
               auto d = decode(in);
               if (!d.ok()) return d.status();
               ExpectStable(in, fs::EncodeXattrs(*d), true, decode, fs::EncodeXattrs);
               return absl::OkStatus();
             }});
}

TEST(FsItemsFuzz, ValidateItemByKeyType) {
  fs::FileExtent inl;
  inl.inline_data = "hello";
  const std::vector<std::string> seeds = {
      Pair(fs::EncodeFsKey({257, fs::kInodeItem, 0}), InodeSeeds().front()),
      Pair(fs::EncodeFsKey({257, fs::kInodeRef, 256}), fs::EncodeInodeRefs({{2, "a"}})),
      Pair(fs::EncodeFsKey({257, fs::kInodeExtref, fs::ExtrefHash(256, "a")}),
           fs::EncodeInodeExtrefs({{256, 2, "a"}})),
      Pair(fs::EncodeFsKey({256, fs::kDirItem, fs::NameHash("a")}),
           fs::EncodeDirEntries(SampleEntries())),
      Pair(fs::EncodeFsKey({256, fs::kDirIndex, 2}), fs::EncodeDirEntries({SampleEntries()[0]})),
      Pair(FsExtentKey(257, 0), fs::EncodeFileExtent(inl)),
      Pair(FsExtentKey(257, 4096), RegularExtent(8 << 20, 8192, 0, 8192)),
      Pair(fs::EncodeFsKey({257, fs::kXattrItem, fs::NameHash("user.a")}),
           fs::EncodeXattrs({{"user.a", "1"}})),
  };
  const std::vector<std::string> extra = {Pair(fs::EncodeFsKey({257, 200, 0}), "?")};
  RunTarget({"fs item by key type", 408, seeds, extra, [](absl::string_view in) {
               absl::string_view key, value;
               Split(in, &key, &value);
               fs::FsKey k;
               // Log replay vets an fs entry only once its key decodes.
               if (!fs::DecodeFsKey(key, &k)) return Rejected("fs key");
               return fs::ValidateItem(k, value);
             }});
}

// ---- File events (fs/fs_events.h) -------------------------------------------------

TEST(FileEventFuzz, DecodeFileEvent) {
  auto ev = [](uint8_t type, uint64_t ino, std::string path, std::string np) {
    fs::FileEventRecord r{type, ino, std::move(path), std::move(np)};
    return fs::EncodeFileEvent(r, 4000);
  };
  const std::vector<std::string> seeds = {
      Pair(fs::FileEventKey(3, 0), ev(1, 257, "a/b", "")),
      Pair(fs::FileEventKey(fs::kMaxFileEventRevision, 0xffff), ev(7, 300, "a", "b/c")),
      Pair(fs::FileEventKey(9, 1), ev(9, 256, "", "")),
      Pair(fs::FileEventKey(9, 2), ev(8, 258, std::string(3000, 'x'), std::string(3000, 'y'))),
  };
  RunTarget({"file event", 503, seeds, {}, [](absl::string_view in) {
               absl::string_view key, raw;
               Split(in, &key, &raw);
               absl::StatusOr<FileEvent> e = fs::DecodeFileEvent(key, raw);
               if (!e.ok()) return e.status();
               EXPECT_GT(e->revision, 0u);
               EXPECT_LE(e->path.size(), kMaxPathLen);
               fs::FileEventRecord r{static_cast<uint8_t>(e->type), e->ino, e->path, e->new_path};
               if (!e->paths_lost) EXPECT_EQ(fs::EncodeFileEvent(r, 1 << 20), raw);
               return absl::OkStatus();
             }});
  RunTarget({"file event info", 504,
             {fs::EncodeFileEventInfo({5, 0}), fs::EncodeFileEventInfo({0, 77})},
             {},
             [](absl::string_view in) { return fs::DecodeFileEventInfo(in).status(); }});
}

// ---- KV items (kv/kv_item.h) -------------------------------------------------------

// ---- KV history items (kv/history_item.h) ------------------------------------------

TEST(KvHistoryFuzz, DecodeHistoryEntry) {
  const std::string prev = kv::EncodeItem({1, 2, 2}, "old");
  const std::vector<std::string> seeds = {
      Pair(kv::HistoryKey(3, "k"), HistoryEntryOf(prev)),
      Pair(kv::HistoryKey(kv::kMaxHistoryRevision, std::string(200, 'k')),
           HistoryEntryOf(prev, kv::kHistoryDelete)),
      Pair(kv::HistoryKey(1, "new"), kv::EncodeHistoryEntry(kv::kHistoryPut, nullptr)),
  };
  RunTarget({"kv history entry", 502, seeds, {}, [](absl::string_view in) {
               absl::string_view key, raw;
               Split(in, &key, &raw);
               absl::StatusOr<kv::HistoryEntry> e = kv::DecodeHistoryEntry(key, raw);
               if (!e.ok()) return e.status();
               EXPECT_GT(e->revision, 0u);
               EXPECT_TRUE(Inside(key, e->key)) << "the user key leaves the tree key";
               EXPECT_TRUE(Inside(raw, e->prev)) << "the prev item leaves the entry";
               const absl::string_view p = e->prev;
               EXPECT_EQ(kv::EncodeHistoryEntry(e->type, e->has_prev ? &p : nullptr), raw);
               EXPECT_EQ(kv::HistoryKey(e->revision, e->key), key);
               return absl::OkStatus();
             }});
}

TEST(KvItemFuzz, DecodeItem) {
  const std::vector<std::string> seeds = {
      Pair(kv::TreeKey("a"), kv::EncodeItem({1, 1, 1}, "")),
      Pair(kv::TreeKey("key"), kv::EncodeItem({5, 9, 3}, "value")),
      Pair(kv::TreeKey(std::string(254, 'k')), kv::EncodeItem({2, 2, 1}, std::string(3000, 'v'))),
      Pair(kv::TreeKey("big"), kv::EncodeExtentItem({2, 4, 2}, {1 << 20, 4096, 4000, 7})),
      Pair(kv::TreeKey("max"), kv::EncodeExtentItem({UINT64_MAX, UINT64_MAX, UINT64_MAX},
                                                    {UINT64_MAX, kMaxValueSize + (1u << 16),
                                                     kMaxValueSize, UINT32_MAX})),
  };
  RunTarget({"kv item", 501, seeds, {}, [](absl::string_view in) {
               absl::string_view key, raw;
               Split(in, &key, &raw);
               // Callers only decode keys of the KV key space (IsKvTreeKey):
               // the error message names UserKey(tree_key).
               const std::string tk = kv::IsKvTreeKey(key) ? std::string(key) : kv::TreeKey(key);
               auto decode = [&tk](absl::string_view v) { return kv::DecodeItem(tk, v); };
               auto encode = [](const kv::ItemView& v) {
                 return v.in_extent ? kv::EncodeExtentItem(v.meta, v.extent)
                                    : kv::EncodeItem(v.meta, v.value);
               };
               absl::StatusOr<kv::ItemView> d = decode(raw);
               if (!d.ok()) return d.status();
               if (d->in_extent) {
                 EXPECT_LE(d->extent.value_len, d->extent.disk_len);
                 EXPECT_LE(d->extent.value_len, kMaxValueSize);
               } else {
                 EXPECT_TRUE(Inside(raw, d->value)) << "the inline value leaves the item";
               }
               ExpectStable(raw, encode(*d), true, decode, encode);
               return absl::OkStatus();
             }});
}

// ---- Lease items (lease/lease_item.h) ----------------------------------------------

TEST(LeaseItemFuzz, DecodeLeaseItem) {
  const std::vector<std::string> seeds = {
      Pair(lease::RecordKey(1), lease::EncodeRecord(1)),
      Pair(lease::RecordKey(0x7fffffffffffffffull), lease::EncodeRecord(kMaxLeaseTtlSeconds)),
      Pair(lease::AttachmentKey(7, "key"), lease::EncodeAttachment()),
      Pair(lease::AttachmentKey(9, std::string(200, 'k')), lease::EncodeAttachment()),
  };
  RunTarget({"lease item", 701, seeds, {}, [](absl::string_view in) {
               absl::string_view key, raw;
               Split(in, &key, &raw);
               const std::string tk(key);
               auto decode = [&tk](absl::string_view v) { return lease::DecodeLeaseItem(tk, v); };
               auto encode = [](const lease::LeaseItem& i) {
                 return i.record ? lease::EncodeRecord(i.ttl_seconds) : lease::EncodeAttachment();
               };
               absl::StatusOr<lease::LeaseItem> d = decode(raw);
               if (!d.ok()) return d.status();
               EXPECT_GE(d->id, 1u);
               EXPECT_LE(d->id, 0x7fffffffffffffffull);
               if (d->record) {
                 EXPECT_GE(d->ttl_seconds, 1);
                 EXPECT_LE(d->ttl_seconds, kMaxLeaseTtlSeconds);
                 EXPECT_EQ(lease::RecordKey(d->id), tk);
               } else {
                 EXPECT_LE(d->user_key.size(), kMaxKeySize);
                 EXPECT_EQ(lease::AttachmentKey(d->id, d->user_key), tk);
               }
               ExpectStable(raw, encode(*d), true, decode, encode);
               return absl::OkStatus();
             }});
}

// ---- Log root blocks (log/log_format.h) --------------------------------------------

log::LogRootExpect LogExpect() {
  log::LogRootExpect e;
  e.fsid = kFsid;
  e.bytenr = 2 << 20;
  e.nonce = 0x5eed5eed;
  e.base_generation = 41;
  e.seq = 3;
  e.device_size = 1ull << 30;
  e.nodesize = 16384;
  return e;
}

log::LogRootBlock BaseLog() {
  const log::LogRootExpect e = LogExpect();
  log::LogRootBlock b;
  b.fsid = e.fsid;
  b.bytenr = e.bytenr;
  b.nonce = e.nonce;
  b.base_generation = e.base_generation;
  b.seq = e.seq;
  b.next = 3 << 20;
  b.revision = 1000;
  return b;
}

log::LogTreeRef LogTree(uint64_t subvol, int i) {
  return {subvol, (8ull << 20) + i * 16384ull, LogExpect().base_generation + 1,
          static_cast<uint8_t>(i % format::kMaxLevel)};
}

std::vector<std::string> LogSeeds() {
  std::vector<std::string> out;
  log::LogRootBlock b = BaseLog();
  out.push_back(log::EncodeLogRoot(b, 4096));
  // The next block in the device's last node.
  b.next = LogExpect().device_size - LogExpect().nodesize;
  out.push_back(log::EncodeLogRoot(b, 4096));
  b = BaseLog();
  b.trees = {LogTree(5, 0), LogTree(256, 1), LogTree(UINT64_MAX, 15)};
  out.push_back(log::EncodeLogRoot(b, 4096));
  b.trees.clear();
  for (size_t i = 0; i < log::MaxLogTrees(4096); ++i) b.trees.push_back(LogTree(256 + i, i));
  out.push_back(log::EncodeLogRoot(b, 4096));
  b = BaseLog();
  b.entries = {{5, kv::TreeKey("a"), kv::EncodeItem({1, 1, 1}, "v")},
               {5, kv::TreeKey("gone"), ""},
               {UINT64_MAX, FsExtentKey(257, 0), RegularExtent(8 << 20, 8192, 0, 8192)}};
  out.push_back(log::EncodeLogRoot(b, 4096));
  // One entry with a maximal key filling the block exactly.
  const size_t room = log::MaxInlineBytes(4096) - format::kLogInlineHeaderSize;
  b.entries = {{5, std::string(format::kMaxTreeKeySize, 'k'),
                std::string(room - format::kMaxTreeKeySize, 'v')}};
  out.push_back(log::EncodeLogRoot(b, 4096));
  // Small entries until the block is full, in a 512-byte sector.
  b.entries.clear();
  for (int i = 0; (i + 1) * (format::kLogInlineHeaderSize + 6 + 2) <= log::MaxInlineBytes(512);
       ++i) {
    b.entries.push_back({5, "k" + Counter(i), "vv"});
  }
  out.push_back(log::EncodeLogRoot(b, 512));
  return out;
}

// A log bytenr a reader may read a node at.
bool InDevice(uint64_t bytenr, const log::LogRootExpect& e) {
  return bytenr % e.nodesize == 0 && bytenr >= format::kReservedHead &&
         e.device_size >= e.nodesize && bytenr <= e.device_size - e.nodesize;
}

absl::Status DecodeLog(absl::string_view in) {
  const log::LogRootExpect e = LogExpect();
  auto decode = [&e](absl::string_view v) { return log::DecodeLogRoot(v, e); };
  absl::StatusOr<log::LogRootBlock> b = decode(in);
  if (!b.ok()) return b.status();
  // Recovery reads the next block and every log tree root at these.
  EXPECT_TRUE(InDevice(b->next, e)) << "next block at " << b->next;
  for (const log::LogTreeRef& t : b->trees) {
    EXPECT_TRUE(InDevice(t.bytenr, e)) << "log tree root at " << t.bytenr;
  }
  // Exact: padding and the bytes after the entries must be zero.
  const uint32_t size = static_cast<uint32_t>(in.size());
  auto encode = [size](const log::LogRootBlock& v) { return log::EncodeLogRoot(v, size); };
  ExpectStable(in, encode(*b), true, decode, encode);
  return absl::OkStatus();
}

// Regressions: bytenrs that are nodesize-aligned but so large that adding a
// node wraps past zero, which the range check once let through.
std::vector<std::string> WrappingLogBlocks() {
  const uint64_t wraps = ~uint64_t{LogExpect().nodesize - 1};
  log::LogRootBlock b = BaseLog();
  b.next = wraps;
  std::vector<std::string> out = {log::EncodeLogRoot(b, 4096)};
  b = BaseLog();
  b.trees = {LogTree(5, 0)};
  b.trees[0].bytenr = wraps;
  out.push_back(log::EncodeLogRoot(b, 4096));
  return out;
}

TEST(LogRootFuzz, Raw) { RunTarget({"log root", 601, LogSeeds(), {}, DecodeLog, nullptr}); }

TEST(LogRootFuzz, RestampedChecksum) {
  RunTarget({"log root restamped", 602, LogSeeds(), WrappingLogBlocks(), DecodeLog, RestampCrc});
}

TEST(LogRootFuzz, WrappingBytenrIsDataLoss) {
  for (const std::string& block : WrappingLogBlocks()) {
    EXPECT_EQ(log::DecodeLogRoot(block, LogExpect()).status().code(),
              absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace cowkv

int main(int argc, char** argv) {
  cowkv::fuzz::ParseFlags(&argc, argv);
  cowkv::fuzz::InstallCrashReport();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
