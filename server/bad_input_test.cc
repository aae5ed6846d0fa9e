// Goal: no request, however malformed, crashes cowkvd, gets any code but
// the one the API documents for it, comes back without a message, or
// changes what the store held.
// Method: one in-process cowkvd (server_test_util.h) on a 64 MiB device.
// Setup writes seed data: KV keys in subvolume "seed" (one value large
// enough for a data extent, one 1024-byte key), a few directories, files
// (inline and extent data, empty) and a symlink, a read-only snapshot
// "seed-ro", a writable snapshot "seed-rw", an empty subvolume "other", a
// subvolume "scratch" that requests may change, and three interactive
// transaction handles: open (long lease), expired and finished. Then a
// seeded PRNG sends COUNT requests (default 10,000) spread over every RPC of
// Subvolumes, KV (interactive transactions included), Files (the Read and
// Write streams included) and Admin. Each request is built from a set of
// flaws (Flaws below): a field no request may hold (empty or oversized key,
// value, bound or name; '/', NUL, "." or ".." where they are refused;
// paths too long or too deep; offsets and lengths that overflow or pass
// 2^50; unknown enum values, flags, modes; bad page tokens), a string field
// holding invalid UTF-8 or a message that is not protobuf (sent raw through
// grpc::GenericStub, as typed stubs would not build them), an unknown
// subvolume, snapshot or transaction handle, an expired handle, a write of
// any kind to the read-only snapshot, an absent or existing object, the
// wrong kind of file, a message over gRPC's size limit, a deadline already
// passed — or none, for edge requests that must succeed (reads past EOF,
// any ReadDir cookie, page tokens with any resume key). Oracle() maps the
// flaws to the one expected code, in the order the server checks them
// (request fields before any lookup). Every reply must have exactly that
// code and, when it is an error, a non-empty message (Files errors: the
// POSIX name first); successful reads are compared with the seed. No
// request may change "seed", "seed-ro", "seed-rw", "other" or "default".
// Afterwards Admin.Check must report ok with no problems, every piece of
// seed data must read back unchanged (KV values and the exact key set,
// file contents and attributes, directory listings, the symlink, the same
// in the snapshots, the subvolume list), and every cowkv.v1 method must
// have been called.
// Replay: the seed is printed; rerun with
//   bazel test //server:bad_input_test --test_env=BAD_INPUT_SEED=N
//   --test_env=BAD_INPUT_COUNT=M
// The long form is //server:bad_input_test_long (manual; 200,000 requests).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/generic/generic_stub.h"
#include "server/limits.h"
#include "server/range_page.h"
#include "server/server_test_util.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {
namespace {

using Code = grpc::StatusCode;
using testing_util::Client;
using testing_util::TestOptions;

constexpr uint64_t kDefaultSeed = 20261122;
constexpr uint64_t kDefaultCount = 10000;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  uint64_t out = 0;
  if (!absl::SimpleAtoi(v, &out)) {
    ADD_FAILURE() << name << "=" << v << " is not a number";
    return fallback;
  }
  return out;
}

// The server parses requests in this process too: protobuf logs every
// string field it refuses. Hundreds of those lines are expected here.
void QuietUtf8Log(google::protobuf::LogLevel level, const char* filename, int line,
                  const std::string& message) {
  if (absl::StrContains(message, "invalid UTF-8")) return;
  std::cerr << "[libprotobuf " << level << " " << filename << ":" << line << "] " << message
            << "\n";
}

// ---- The oracle ------------------------------------------------------------------

// What is wrong with a request. Most requests have one flaw; some have two,
// to pin down which the server reports first.
struct Flaws {
  bool deadline_passed = false;  // the client's deadline passed before sending
  bool too_large = false;        // the message is over gRPC's 20 MiB limit
  bool unparsable = false;       // invalid UTF-8 in a string field, or not protobuf
  bool malformed = false;        // a field the request alone makes invalid
  bool unknown_subvolume = false;
  bool unknown_handle = false;  // never issued, or finished
  bool expired_handle = false;
  bool writable_snapshot = false;  // Range.snapshot names a writable snapshot
  bool foreign_snapshot = false;   // Range.snapshot is not a snapshot of Range.subvolume
  bool protected_default = false;  // deleting "default"
  bool read_only = false;          // a write to the read-only snapshot
  bool absent = false;             // the key, file or subvolume named does not exist
  bool exists = false;             // the name to create is taken
  bool wrong_kind = false;         // EISDIR, ENOTDIR, ENOTEMPTY, EPERM: the object forbids it
  bool not_regular = false;        // EINVAL the object decides: a symlink read, a file ReadLink
  bool unsupported = false;        // a Fallocate mode that is not supported (EOPNOTSUPP)
};

// The one code a request with these flaws gets: the first that applies, in
// the order the server checks (docs/api.md "Errors").
Code Oracle(const Flaws& f) {
  if (f.deadline_passed) return Code::DEADLINE_EXCEEDED;  // nothing is sent
  if (f.too_large) return Code::RESOURCE_EXHAUSTED;       // gRPC refuses it, no handler runs
  if (f.unparsable || f.malformed) return Code::INVALID_ARGUMENT;
  if (f.unsupported) return Code::UNIMPLEMENTED;  // decided by the request alone too
  if (f.unknown_subvolume || f.unknown_handle) return Code::NOT_FOUND;
  if (f.expired_handle) return Code::ABORTED;
  if (f.writable_snapshot) return Code::FAILED_PRECONDITION;
  if (f.foreign_snapshot) return Code::INVALID_ARGUMENT;
  if (f.protected_default || f.read_only) return Code::FAILED_PRECONDITION;
  if (f.absent) return Code::NOT_FOUND;
  if (f.exists) return Code::ALREADY_EXISTS;
  if (f.wrong_kind) return Code::FAILED_PRECONDITION;
  if (f.not_regular) return Code::INVALID_ARGUMENT;
  return Code::OK;
}

// ---- Raw calls ---------------------------------------------------------------------

struct Reply {
  grpc::Status status;
  std::vector<std::string> messages;  // serialized responses
};

std::string ToString(const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!bb.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// One call of `method` ("/cowkv.v1.KV/Get") with these serialized request
// messages, whatever its kind (gRPC's wire does not know unary from
// streaming): write them all, half-close, read every response, finish.
Reply RawCall(grpc::GenericStub* stub, const std::string& method,
              const std::vector<std::string>& requests, bool deadline_passed) {
  grpc::ClientContext ctx;
  const auto now = std::chrono::system_clock::now();
  ctx.set_deadline(deadline_passed ? now - std::chrono::seconds(1)
                                   : now + std::chrono::seconds(60));
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub->PrepareCall(&ctx, method, &cq);
  void* tag = nullptr;
  bool ok = false;
  auto wait = [&] { return cq.Next(&tag, &ok) && ok; };
  call->StartCall(nullptr);
  bool alive = wait();
  for (size_t i = 0; alive && i < requests.size(); ++i) {
    grpc::Slice slice(requests[i]);
    grpc::ByteBuffer bb(&slice, 1);
    call->Write(bb, nullptr);
    alive = wait();
  }
  call->WritesDone(nullptr);
  wait();
  Reply reply;
  for (;;) {
    grpc::ByteBuffer bb;
    call->Read(&bb, nullptr);
    if (!wait()) break;
    reply.messages.push_back(ToString(bb));
  }
  call->Finish(&reply.status, nullptr);
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return reply;
}

// ---- Seed data ---------------------------------------------------------------------

struct SeedFile {
  std::string path;
  v1::FileKind kind;
  std::string data;    // regular files
  std::string target;  // symlinks
  uint64_t ino = 0;    // filled in by setup
};

struct SeedDirEntry {
  std::string name;
  v1::FileKind kind;
  uint64_t cookie;
};

const char* const kSeed = "seed";
const char* const kReadOnly = "seed-ro";
const char* const kWritable = "seed-rw";
const char* const kOther = "other";
const char* const kScratch = "scratch";

// ---- The session -------------------------------------------------------------------

class BadInput {
 public:
  BadInput(uint64_t seed, uint64_t count, Client* client)
      : seed_(seed), count_(count), rng_(seed), stub_(client->channel) {}

  void Setup();
  void Run();
  void VerifySeedUnchanged();
  void VerifyEveryMethodCalled();
  void PrintSummary() const;
  std::string Replay() const {
    return absl::StrCat("replay: bazel test //server:bad_input_test --test_env=BAD_INPUT_SEED=",
                        seed_, " --test_env=BAD_INPUT_COUNT=", count_);
  }
  uint64_t sent() const { return sent_; }

 private:
  // Randomness.
  uint64_t U(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool OneIn(uint64_t n) { return U(n) == 0; }
  template <typename T>
  const T& PickOf(const std::vector<T>& v) {
    return v[U(v.size())];
  }
  std::string Bytes(size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng_());
    return s;
  }
  std::string Fresh(absl::string_view prefix) { return absl::StrCat(prefix, ++fresh_); }

  // Flawed field values.
  std::string BadKey();
  std::string BadName();
  std::string AbsentName();
  std::string BadPath();
  std::string UnknownSubvolume() { return PickOf<std::string>({"absent-sv", ".", "..", "Seed"}); }
  uint64_t UnknownHandle();
  std::string Utf8Bomb();  // a placeholder that Serialize() turns into invalid UTF-8
  // A write's target with one flaw drawn into `f` (unparsable one time in
  // `unparsable_one_in`): a malformed request, an unknown subvolume, the
  // read-only snapshot, or (`state`) a flaw of the store's state on the seed.
  struct WriteTarget {
    std::string sv;
    bool state = false;
  };
  WriteTarget DrawWriteTarget(uint64_t unparsable_one_in, Flaws* f);
  template <typename M>
  std::string Serialize(const M& m, bool unparsable);

  // Sending and judging.
  Reply Send(const std::string& method, const std::string& what, const Flaws& f,
             std::vector<std::string> requests, bool allow_deadline = true);
  void Judge(const std::string& method, const std::string& what, const Flaws& f, const Reply& r);
  template <typename M>
  static M Parse(const Reply& r, size_t i = 0) {
    M m;
    if (i < r.messages.size()) m.ParseFromString(r.messages[i]);
    return m;
  }

  // One generator per service; each picks an RPC and its flaws.
  void Subvolumes();
  void Kv();
  void KvRange();
  void KvWrites();
  void KvTxn();
  void KvCompact();
  void KvInteractive();
  void FilesRead();
  void FilesWriteStream();
  void FilesNamespace();
  void FilesData();
  void FilesFallocate();
  void FilesHandles();
  void FilesAttrs();
  void Admin();
  void Leases();
  void KvWatch();

  // Helpers for the Files generators.
  const SeedFile& AnyFile();
  const SeedFile& FileOfKind(v1::FileKind kind);
  // The seed or one of its snapshots: every seed file and key is in each.
  std::string ReadableSubvolume() { return PickOf<std::string>({kSeed, kReadOnly, kWritable}); }
  void VerifyStat(const std::string& what, const v1::FileStat& st, const SeedFile& f);
  void VerifyRange(const std::string& what, const v1::RangeResponse& resp, std::string start,
                   std::string end, bool reverse, uint64_t limit, bool keys_only, bool count_only);

  // Setup helpers.
  void SetupKv();
  void SetupFiles();
  void SetupHandles();
  Reply Ok(const std::string& method, const google::protobuf::Message& req);
  Reply WriteFile(const std::string& sv, const std::string& path, const std::string& data);

  const uint64_t seed_;
  const uint64_t count_;
  std::mt19937_64 rng_;
  grpc::GenericStub stub_;

  std::map<std::string, std::string> kv_;  // the seed's keys
  std::vector<SeedFile> files_;
  std::map<std::string, std::vector<SeedDirEntry>> dirs_;  // path -> entries, creation order
  std::string token_;               // a page token of Range{prefix "k/", kTokenLimit} on kSeed
  std::string txn_token_;           // a page token of the same request in the live transaction
  uint64_t live_ = 0;               // open transaction on kSeed
  uint64_t expired_ = 0;            // its lease ran out
  uint64_t finished_ = 0;           // aborted
  std::vector<std::string> bombs_;  // pending {placeholder, bad} pairs, flattened
  std::map<std::string, std::map<int, uint64_t>> codes_;  // method -> code -> count
  uint64_t sent_ = 0;
  uint64_t fresh_ = 0;
  int failures_ = 0;
};

// The page-token request: prefix "k/", 5 keys a page, forward.
constexpr uint64_t kTokenLimit = 5;

std::string BadKeyOfSize(size_t n) { return std::string(n, 'K'); }

std::string BadInput::BadKey() {
  switch (U(4)) {
    case 0:
      return "";
    case 1:
      return BadKeyOfSize(kMaxKeySize + 1);
    case 2:
      return BadKeyOfSize(kMaxKeySize + 1 + U(4000));
    default:
      return Bytes(kMaxKeySize + 1 + U(70000));
  }
}

std::string BadInput::BadName() {
  switch (U(5)) {
    case 0:
      return "";
    case 1:
      return std::string(kMaxNameLen + 1 + U(300), 'n');
    case 2:
      return absl::StrCat("a/", U(1000));
    case 3:
      return std::string("nul\0name", 8);
    default:
      return "/";
  }
}

std::string BadInput::AbsentName() {
  return PickOf<std::string>({Fresh("absent-"), ".", "..", "SEED", std::string(255, 'z')});
}

std::string BadInput::BadPath() {
  switch (U(8)) {
    case 0:
      return absl::StrCat("/dir/", std::string(kMaxNameLen + 1 + U(100), 'c'));
    case 1:
      return "/" + std::string(kMaxPathLen, 'p');  // 4097 bytes
    case 2: {
      std::string p;
      while (p.size() <= kMaxPathLen) p += "/abcdefgh";
      return p;
    }
    case 3:
      return std::string("/dir/a\0b", 8);
    case 4:
      return PickOf<std::string>({"/dir/../dir/a", "/..", "..", "/dir/./a", ".", "/a/.."});
    case 5: {
      std::string p;
      for (size_t i = 0; i <= kMaxPathDepth + U(50); ++i) p += "/d";
      return p;  // 257 or more components
    }
    case 6:
      return std::string("\0", 1);
    default:
      return absl::StrCat("/dir/", std::string(kMaxNameLen + 1, 'x'), "/a");
  }
}

uint64_t BadInput::UnknownHandle() {
  for (;;) {
    const uint64_t h = OneIn(8) ? 0 : rng_();
    if (h != live_ && h != expired_) return h;
  }
}

// Invalid UTF-8 sequences protobuf refuses in a proto3 string (checked
// locally in Serialize, so this list cannot claim more than it does).
const std::vector<std::string>& BadUtf8() {
  static const std::vector<std::string> v = {
      "\xff", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",        "\xe2\x82",
      "\x80", "\xfe\xfe", "ok\xc3",       std::string("\xc3\x28", 2)};
  return v;
}

// Fields no request with none defines (1: varint 1, 2: "abc"): proto3
// keeps unknown fields, so the request parses and is served.
const std::string& UnknownFields() {
  static const std::string s = "\x08\x01\x12\x03\x61\x62\x63";
  return s;
}

// Byte strings that make any message fail to parse when appended.
const std::vector<std::string>& BadTails() {
  static const std::vector<std::string> v = {
      "\x0f",              // field 1, wire type 7 (does not exist)
      "\x0e",              // field 1, wire type 6 (does not exist)
      "\x08\x80",          // a varint cut short
      "\x12\x05\x61\x62",  // 5 bytes promised, 2 sent
      std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 12),  // tag too long
  };
  return v;
}

std::string BadInput::Utf8Bomb() {
  // A unique valid placeholder of the bad string's length, so that every
  // length prefix in the message stays right when Serialize() swaps them.
  const std::string tag = absl::StrCat("utf8-", ++fresh_, "-");
  const std::string& seq = PickOf(BadUtf8());
  bombs_.push_back(tag + std::string(seq.size(), 'Z'));
  bombs_.push_back(tag + seq);
  return bombs_[bombs_.size() - 2];
}

template <typename M>
std::string BadInput::Serialize(const M& m, bool unparsable) {
  std::string wire = m.SerializeAsString();
  for (size_t i = 0; i + 1 < bombs_.size(); i += 2) {
    const size_t at = wire.find(bombs_[i]);
    if (at != std::string::npos) wire.replace(at, bombs_[i].size(), bombs_[i + 1]);
  }
  const bool bombed = !bombs_.empty();
  bombs_.clear();
  if (unparsable && !bombed) wire += PickOf(BadTails());
  M check;
  if (check.ParseFromString(wire) == unparsable) {
    ADD_FAILURE() << "generator bug: " << M::descriptor()->full_name()
                  << (unparsable ? " parses although it should not" : " does not parse");
  }
  return wire;
}

Reply BadInput::Send(const std::string& method, const std::string& what, const Flaws& flaws,
                     std::vector<std::string> requests, bool allow_deadline) {
  Flaws f = flaws;
  // Now and then the deadline has passed before the call starts: whatever
  // the request, nothing reaches the server.
  if (allow_deadline && OneIn(150)) f.deadline_passed = true;
  Reply r = RawCall(&stub_, "/cowkv.v1." + method, requests, f.deadline_passed);
  ++sent_;
  Judge(method, what, f, r);
  return r;
}

void BadInput::Judge(const std::string& method, const std::string& what, const Flaws& f,
                     const Reply& r) {
  const Code want = Oracle(f);
  const Code got = r.status.error_code();
  ++codes_[method][static_cast<int>(got)];
  std::string problem;
  if (got != want) {
    problem = absl::StrCat("want code ", want, ", got ", got);
  } else if (got != Code::OK && r.status.error_message().empty()) {
    problem = "the error has an empty message";
  } else if (got != Code::OK && absl::StartsWith(method, "Files/") && !f.deadline_passed &&
             !f.too_large && !HasPosixName(r.status.error_message())) {
    problem = "a Files error without its POSIX name first";
  }
  if (problem.empty()) return;
  ++failures_;
  ADD_FAILURE() << "request #" << sent_ << " " << method << " (" << what << "): " << problem
                << ": \"" << r.status.error_message().substr(0, 300) << "\"\n"
                << Replay();
}

// ---- Setup -----------------------------------------------------------------------------

Reply BadInput::Ok(const std::string& method, const google::protobuf::Message& req) {
  Reply r = RawCall(&stub_, "/cowkv.v1." + method, {req.SerializeAsString()}, false);
  EXPECT_TRUE(r.status.ok()) << "setup: " << method << ": " << r.status.error_message();
  return r;
}

Reply BadInput::WriteFile(const std::string& sv, const std::string& path, const std::string& data) {
  std::vector<std::string> msgs;
  v1::WriteRequest first;
  first.set_subvolume(sv);
  first.set_path(path);
  first.set_create(true);
  first.set_truncate(true);
  msgs.push_back(first.SerializeAsString());
  for (size_t off = 0; off < data.size(); off += 1 << 20) {
    v1::WriteRequest chunk;
    chunk.set_data(data.substr(off, 1 << 20));
    msgs.push_back(chunk.SerializeAsString());
  }
  Reply r = RawCall(&stub_, "/cowkv.v1.Files/Write", msgs, false);
  EXPECT_TRUE(r.status.ok()) << "setup: write " << path << ": " << r.status.error_message();
  return r;
}

void BadInput::SetupKv() {
  for (int i = 0; i < 40; ++i) kv_[absl::StrFormat("k/%03d", i)] = "v" + Bytes(U(100));
  kv_["big"] = "v" + Bytes(64 << 10);  // past the inline limit: a data extent
  kv_[std::string(kMaxKeySize, 'K')] = "the longest key";
  kv_[std::string(1, '\0')] = "the smallest key";
  kv_[std::string("\xff\xfe", 2)] = "";
  for (const auto& [k, v] : kv_) {
    v1::PutRequest put;
    put.set_subvolume(kSeed);
    put.set_key(k);
    put.set_value(v);
    put.set_durability(OneIn(2) ? v1::DURABILITY_DURABLE : v1::DURABILITY_ASYNC);
    Ok("KV/Put", put);
  }
}

void BadInput::SetupFiles() {
  std::string big(300 << 10, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
  files_ = {
      {"/dir", v1::FILE_KIND_DIRECTORY, "", ""},     {"/dir/a", v1::FILE_KIND_REGULAR, "hello", ""},
      {"/dir/b", v1::FILE_KIND_REGULAR, big, ""},    {"/dir/sub", v1::FILE_KIND_DIRECTORY, "", ""},
      {"/other", v1::FILE_KIND_DIRECTORY, "", ""},   {"/empty", v1::FILE_KIND_REGULAR, "", ""},
      {"/link", v1::FILE_KIND_SYMLINK, "", "dir/a"},
  };
  for (SeedFile& f : files_) {
    if (f.kind == v1::FILE_KIND_DIRECTORY) {
      v1::MkdirRequest mk;
      mk.set_subvolume(kSeed);
      mk.set_path(f.path);
      f.ino = Parse<v1::FileStat>(Ok("Files/Mkdir", mk)).ino();
    } else if (f.kind == v1::FILE_KIND_SYMLINK) {
      v1::SymlinkRequest sl;
      sl.set_subvolume(kSeed);
      sl.set_path(f.path);
      sl.set_target(f.target);
      f.ino = Parse<v1::FileStat>(Ok("Files/Symlink", sl)).ino();
    } else {
      f.ino = Parse<v1::WriteResponse>(WriteFile(kSeed, f.path, f.data)).stat().ino();
    }
    ASSERT_NE(f.ino, 0u) << f.path;
  }
  for (const char* dir : {"/", "/dir", "/dir/sub", "/other"}) {
    v1::ReadDirRequest rd;
    rd.set_subvolume(kSeed);
    rd.set_path(dir);
    const v1::ReadDirResponse listing = Parse<v1::ReadDirResponse>(Ok("Files/ReadDir", rd));
    for (const v1::DirEntry& e : listing.entries()) {
      dirs_[dir].push_back({e.name(), e.kind(), e.cookie()});
    }
  }
  ASSERT_EQ(dirs_["/"].size(), 4u);
  ASSERT_EQ(dirs_["/dir"].size(), 3u);
  WriteFile(kScratch, "/s", "scratch");
}

void BadInput::SetupHandles() {
  v1::BeginRequest begin;
  begin.set_subvolume(kSeed);
  begin.set_lease_ms(kMaxLeaseMs);
  live_ = Parse<v1::BeginResponse>(Ok("KV/Begin", begin)).handle();
  begin.set_lease_ms(1);
  expired_ = Parse<v1::BeginResponse>(Ok("KV/Begin", begin)).handle();
  begin.set_lease_ms(0);
  finished_ = Parse<v1::BeginResponse>(Ok("KV/Begin", begin)).handle();
  v1::AbortRequest abort;
  abort.set_handle(finished_);
  Ok("KV/Abort", abort);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past `expired_`'s lease
  ASSERT_TRUE(live_ != 0 && expired_ != 0 && finished_ != 0);

  // Page tokens of one request, outside and inside the live transaction.
  v1::RangeRequest range;
  range.set_subvolume(kSeed);
  range.set_prefix("k/");
  range.set_limit(kTokenLimit);
  token_ = Parse<v1::RangeResponse>(Ok("KV/Range", range)).next_page_token();
  v1::TxnRangeRequest txn_range;
  txn_range.set_handle(live_);
  txn_range.mutable_range()->set_prefix("k/");
  txn_range.mutable_range()->set_limit(kTokenLimit);
  txn_token_ = Parse<v1::RangeResponse>(Ok("KV/TxnRange", txn_range)).next_page_token();
  ASSERT_FALSE(token_.empty());
  ASSERT_FALSE(txn_token_.empty());
}

void BadInput::Setup() {
  for (const char* name : {kSeed, kOther, kScratch}) {
    v1::CreateSubvolumeRequest create;
    create.set_name(name);
    Ok("Subvolumes/Create", create);
  }
  SetupKv();
  SetupFiles();
  for (const auto& [name, ro] :
       std::vector<std::pair<const char*, bool>>{{kReadOnly, true}, {kWritable, false}}) {
    v1::SnapshotRequest snap;
    snap.set_source(kSeed);
    snap.set_name(name);
    snap.set_read_only(ro);
    Ok("Subvolumes/Snapshot", snap);
  }
  SetupHandles();
}

// ---- Generators: Subvolumes --------------------------------------------------------

void BadInput::Subvolumes() {
  Flaws f;
  f.unparsable = OneIn(8);
  const std::vector<std::string> existing = {kSeed, kReadOnly, kOther, "default"};
  switch (U(12)) {
    case 11: {  // Partial receives: the list (none here); Abort of a bad or absent name;
                // Send of a damaged resume token
      const uint64_t k = U(3);
      if (k == 0) {
        Send("Subvolumes/PartialReceives", "partial receives", f,
             {f.unparsable ? std::string("\xff\xff")
                           : v1::PartialReceivesRequest().SerializeAsString()});
        return;
      }
      if (k == 1) {
        v1::AbortReceiveRequest req;
        f.malformed = !f.unparsable && OneIn(2);
        f.absent = !f.unparsable && !f.malformed;
        req.set_name(f.unparsable  ? Utf8Bomb()
                     : f.malformed ? BadName()
                                   : std::string("no-partial"));
        Send("Subvolumes/AbortReceive", "abort receive " + req.name().substr(0, 40), f,
             {Serialize(req, f.unparsable)});
        return;
      }
      v1::SendRequest req;
      f.malformed = !f.unparsable;  // a token that does not decode: INVALID_ARGUMENT
      req.set_resume_token(f.unparsable ? Utf8Bomb()
                                        : PickOf<std::string>({"AAAA", "!!", "Q0tSVA"}));
      Send("Subvolumes/Send", "send -t " + req.resume_token().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 8: {  // Send: a bad, unknown or writable snapshot; the read-only one streams
      v1::SendRequest req;
      const uint64_t k = U(4);
      f.malformed = !f.unparsable && k == 0;
      f.absent = k == 1;
      f.wrong_kind = k == 2;  // writable: FAILED_PRECONDITION
      req.set_snapshot(f.unparsable   ? Utf8Bomb()
                       : f.malformed  ? BadName()
                       : f.absent     ? std::string("no-such-snapshot")
                       : f.wrong_kind ? PickOf<std::string>({kSeed, kWritable, "default"})
                                      : std::string(kReadOnly));
      if (k == 3 && OneIn(2)) req.set_parent(kReadOnly);  // an empty difference
      Send("Subvolumes/Send", "send " + req.snapshot().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 9: {  // Receive: nothing, a bad name, names in a later message, bytes that are no stream
      f.malformed = !f.unparsable;
      v1::ReceiveRequest first;
      std::vector<std::string> msgs;
      const uint64_t k = U(4);
      first.set_chunk(std::string(16 + U(100), static_cast<char>('a' + U(26))));
      if (f.unparsable) first.set_name(Utf8Bomb());
      if (k == 0 && !f.unparsable) first.set_name(BadName());
      msgs.push_back(Serialize(first, f.unparsable));
      if (k == 1) {
        v1::ReceiveRequest later;
        later.set_name("later");
        msgs.push_back(later.SerializeAsString());
        msgs.front() = v1::ReceiveRequest().SerializeAsString();
      }
      if (k == 2 && !f.unparsable) msgs.clear();
      Send("Subvolumes/Receive", absl::StrCat("receive (", k, ")"), f, msgs, false);
      return;
    }
    case 10: {  // Digest: a bad or unknown name; an existing one is hashed
      v1::DigestSubvolumeRequest req;
      f.malformed = !f.unparsable && OneIn(3);
      f.absent = !f.malformed && OneIn(3);
      req.set_name(f.unparsable  ? Utf8Bomb()
                   : f.malformed ? BadName()
                   : f.absent    ? std::string("no-such-subvolume")
                                 : PickOf(existing));
      Send("Subvolumes/Digest", "digest " + req.name().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 6: {  // List with filters and sort keys; a bad key is INVALID_ARGUMENT
      v1::ListSubvolumesRequest req;
      req.set_read_only(OneIn(2));
      req.set_snapshots_only(OneIn(2));
      f.malformed = !f.unparsable && OneIn(3);
      for (uint64_t n = U(3); n > 0; --n) {
        req.add_sort(PickOf<std::string>({"gen", "-ogen", "+rootid", "path,-gen", "id", "-name"}));
      }
      if (f.malformed) req.add_sort(PickOf<std::string>({"size", "", "gen,", "--gen", "Gen"}));
      if (f.unparsable) req.add_sort(Utf8Bomb());
      const Reply r = Send("Subvolumes/List", "list sorted", f, {Serialize(req, f.unparsable)});
      if (r.status.ok()) {
        const v1::ListSubvolumesResponse listed = Parse<v1::ListSubvolumesResponse>(r);
        for (const v1::SubvolumeInfo& s : listed.subvolumes()) {
          if ((req.read_only() && !s.read_only()) || (req.snapshots_only() && s.parent_id() == 0)) {
            ADD_FAILURE() << "List: " << s.name() << " passed a filter it fails\n" << Replay();
          }
        }
      }
      return;
    }
    case 7: {  // Sync: nothing is deleted here; an unknown id, a live one
      v1::SyncSubvolumesRequest req;
      const uint64_t k = U(3);
      f.absent = k == 1;
      f.protected_default = k == 2;  // a live subvolume: FAILED_PRECONDITION too
      if (f.absent) req.add_ids(PickOf<uint64_t>({1, 2, 255, 1ull << 40, UINT64_MAX}));
      if (f.protected_default) req.add_ids(5);
      req.set_timeout_ms(U(3) * 1000);
      Send("Subvolumes/Sync", absl::StrCat("sync ", req.ids_size(), " ids"), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 0: {  // Create: a bad name, or a taken one
      v1::CreateSubvolumeRequest req;
      f.malformed = !f.unparsable && OneIn(2);
      f.exists = !f.malformed;
      req.set_name(f.unparsable ? Utf8Bomb() : f.malformed ? BadName() : PickOf(existing));
      Send("Subvolumes/Create", "create " + req.name().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 1: {  // List: any unknown field is fine; bytes that are not protobuf are not
      // Fields 100 (varint) and 101 (bytes): ListSubvolumesRequest has 1..3.
      std::string wire = OneIn(2) ? std::string("\xa0\x06\x01\xaa\x06\x03\x61\x62\x63") : "";
      if (f.unparsable) wire += PickOf(BadTails());
      if (v1::ListSubvolumesRequest().ParseFromString(wire) == f.unparsable) {
        ADD_FAILURE() << "generator bug: a List request that "
                      << (f.unparsable ? "parses" : "does not parse");
      }
      const Reply r = Send("Subvolumes/List", "list", f, {wire});
      if (r.status.ok() && Parse<v1::ListSubvolumesResponse>(r).subvolumes_size() != 6) {
        ADD_FAILURE() << "List: the subvolumes changed\n" << Replay();
      }
      return;
    }
    case 2: {  // Show
      v1::ShowSubvolumeRequest req;
      const uint64_t k = U(3);
      f.malformed = !f.unparsable && k == 0;
      f.absent = !f.unparsable && k == 1;
      req.set_name(f.unparsable  ? Utf8Bomb()
                   : f.malformed ? BadName()
                   : f.absent    ? AbsentName()
                                 : PickOf(existing));
      const Reply r = Send("Subvolumes/Show", "show " + req.name().substr(0, 40), f,
                           {Serialize(req, f.unparsable)});
      if (r.status.ok() && Parse<v1::SubvolumeInfo>(r).name() != req.name()) {
        ADD_FAILURE() << "Show " << req.name() << ": another subvolume\n" << Replay();
      }
      return;
    }
    case 3: {  // Rename: bad names, an absent source, a taken target
      v1::RenameSubvolumeRequest req;
      const uint64_t k = U(3);
      f.malformed = !f.unparsable && k == 0;
      f.absent = !f.unparsable && k == 1;
      f.exists = !f.unparsable && k == 2;
      req.set_name(f.absent ? AbsentName() : kOther);
      req.set_new_name(f.exists ? PickOf<std::string>({kSeed, kReadOnly, "default"})
                                : Fresh("renamed-"));
      if (f.malformed) (OneIn(2) ? req.set_name(BadName()) : req.set_new_name(BadName()));
      if (f.unparsable) (OneIn(2) ? req.set_name(Utf8Bomb()) : req.set_new_name(Utf8Bomb()));
      if (f.malformed && OneIn(2)) f.absent = true, req.set_new_name(BadName());
      Send("Subvolumes/Rename",
           "rename " + req.name().substr(0, 30) + " -> " + req.new_name().substr(0, 30), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 4: {  // Delete: bad, absent, "default"
      v1::DeleteSubvolumeRequest req;
      const uint64_t k = U(3);
      f.malformed = !f.unparsable && k == 0;
      f.absent = !f.unparsable && k == 1;
      f.protected_default = !f.unparsable && k == 2;
      req.set_name(f.unparsable  ? Utf8Bomb()
                   : f.malformed ? BadName()
                   : f.absent    ? AbsentName()
                                 : "default");
      Send("Subvolumes/Delete", "delete " + req.name().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    default: {  // Snapshot: bad names, an absent source, a taken name
      v1::SnapshotRequest req;
      const uint64_t k = U(3);
      f.malformed = !f.unparsable && k == 0;
      f.absent = !f.unparsable && k == 1;
      f.exists = !f.unparsable && k == 2;
      req.set_source(f.absent ? AbsentName() : PickOf(existing));
      req.set_name(f.exists ? PickOf(existing) : Fresh("snap-"));
      req.set_read_only(OneIn(2));
      if (f.malformed) (OneIn(2) ? req.set_source(BadName()) : req.set_name(BadName()));
      if (f.unparsable) (OneIn(2) ? req.set_source(Utf8Bomb()) : req.set_name(Utf8Bomb()));
      Send("Subvolumes/Snapshot",
           "snapshot " + req.source().substr(0, 30) + " as " + req.name().substr(0, 30), f,
           {Serialize(req, f.unparsable)});
      return;
    }
  }
}

// ---- Generators: KV ----------------------------------------------------------------

void BadInput::Kv() {
  switch (U(5)) {
    case 0:
      return KvRange();
    case 1:
      return KvWrites();
    case 2:
      return KvTxn();
    case 3:
      return KvCompact();
    default:
      break;
  }
  // Get.
  Flaws f;
  f.unparsable = OneIn(8);
  v1::GetRequest req;
  const uint64_t k = U(5);
  f.malformed = k == 0;
  const bool unknown = k == 1 || (f.malformed && OneIn(3));
  f.absent = k == 2;
  f.unknown_subvolume = unknown;
  req.set_subvolume(f.unparsable ? Utf8Bomb() : unknown ? UnknownSubvolume() : ReadableSubvolume());
  if (OneIn(10) && !unknown && !f.unparsable) req.set_subvolume("");  // "default": empty
  const bool in_default = req.subvolume().empty();
  auto it = kv_.begin();
  std::advance(it, U(kv_.size()));
  req.set_key(f.malformed ? BadKey() : f.absent ? Fresh("absent/") : it->first);
  if (in_default && !f.malformed) f.absent = true;
  const Reply r = Send(
      "KV/Get",
      absl::StrCat("get ", req.key().size(), "-byte key in '", req.subvolume().substr(0, 20), "'"),
      f, {Serialize(req, f.unparsable)});
  if (r.status.ok() && Parse<v1::GetResponse>(r).kv().value() != it->second) {
    ADD_FAILURE() << "Get: the value of a seed key changed\n" << Replay();
  }
}

void BadInput::VerifyRange(const std::string& what, const v1::RangeResponse& resp,
                           std::string start, std::string end, bool reverse, uint64_t limit,
                           bool keys_only, bool count_only) {
  std::vector<std::pair<std::string, std::string>> want;
  for (const auto& [k, v] : kv_) {
    if (k >= start && (end.empty() || k < end)) want.emplace_back(k, v);
  }
  if (reverse) std::reverse(want.begin(), want.end());
  if (count_only) {
    if (resp.count() != want.size() || resp.kvs_size() != 0) {
      ADD_FAILURE() << what << ": count " << resp.count() << ", want " << want.size() << "\n"
                    << Replay();
    }
    return;
  }
  const uint64_t page = limit == 0 || limit > kRangePageKeys ? kRangePageKeys : limit;
  const bool more = want.size() > page;
  if (more) want.resize(page);
  bool same = resp.kvs_size() == static_cast<int>(want.size()) && resp.more() == more;
  for (int i = 0; same && i < resp.kvs_size(); ++i) {
    same = resp.kvs(i).key() == want[i].first &&
           resp.kvs(i).value() == (keys_only ? "" : want[i].second);
  }
  if (!same) {
    ADD_FAILURE() << what << ": " << resp.kvs_size() << " keys (more " << resp.more() << "), want "
                  << want.size() << " (more " << more << ")\n"
                  << Replay();
  }
}

void BadInput::KvRange() {
  Flaws f;
  f.unparsable = OneIn(10);
  v1::RangeRequest req;
  const uint64_t k = U(10);
  req.set_subvolume(OneIn(2) ? kSeed : "");
  req.set_limit(OneIn(3) ? U(12) : OneIn(2) ? 0 : kRangePageKeys + U(1000000));
  req.set_reverse(OneIn(2));
  req.set_keys_only(OneIn(4));
  req.set_count_only(OneIn(6));
  if (OneIn(2)) {
    req.set_prefix(PickOf<std::string>({"k/", "k/0", "k/01", "b", "zz"}));
  } else {
    req.set_start(PickOf<std::string>({"", "k/005", std::string(1, '\0'), "a"}));
    req.set_end(PickOf<std::string>({"", "k/030", "l", std::string(kMaxKeySize + 1, 'K')}));
  }
  std::string what = "range";
  if (k == 0) {  // bad bounds
    f.malformed = true;
    switch (U(4)) {
      case 0:
        req.clear_prefix(), req.set_start(BadKeyOfSize(kMaxKeySize + 1 + U(2000)));
        break;
      case 1:
        req.clear_prefix(), req.set_end(BadKeyOfSize(kMaxKeySize + 2 + U(2000)));
        break;
      case 2:
        req.set_prefix(BadKeyOfSize(kMaxKeySize + 1));
        break;
      default:
        req.set_prefix("k/"), req.set_start("a");
        break;
    }
    what = "range with bad bounds";
  } else if (k == 1) {  // a page token that is not one of this request
    f.malformed = true;
    std::string t = token_;
    switch (U(4)) {
      case 0:
        t = Bytes(1 + U(40));
        break;
      case 1:
        t[U(11)] ^= static_cast<char>(1 + U(255));
        break;
      case 2:
        t = t.substr(0, U(11));
        if (t.empty()) t = "c";
        break;
      default:
        t = token_.substr(0, 11) + std::string(kMaxKeySize + 1, 'r');
        break;
    }
    req.clear_start(), req.clear_end();
    req.set_subvolume(kSeed);
    req.set_prefix("k/");
    req.set_reverse(false);
    req.set_page_token(t);
    if (OneIn(4))
      req.set_subvolume(PickOf<std::string>({"absent-sv", "."}));  // still malformed first
    what = "range with a bad page token";
  } else if (k == 2) {  // a token of another request: other order, bounds or scope
    f.malformed = true;
    req.set_page_token(token_);
    req.clear_start(), req.clear_end();
    switch (U(3)) {
      case 0:
        req.set_subvolume(kSeed), req.set_prefix("k/"), req.set_reverse(true);
        break;
      case 1:
        req.set_subvolume(kSeed), req.set_prefix("k/0"), req.set_reverse(false);
        break;
      default:
        req.set_subvolume(""), req.set_prefix("k/"), req.set_reverse(false);
        break;
    }
    what = "range with another request's token";
  } else if (k == 3) {
    f.unknown_subvolume = true;
    req.set_subvolume(UnknownSubvolume());
    what = "range of an unknown subvolume";
  } else if (k == 4) {
    const uint64_t s = U(3);
    f.unknown_subvolume = s == 0;
    f.writable_snapshot = s == 1;
    f.foreign_snapshot = s == 2;
    req.set_snapshot(s == 0 ? UnknownSubvolume() : s == 1 ? kWritable : kReadOnly);
    req.set_subvolume(s == 2 ? kOther : OneIn(2) ? kSeed : "");
    what = "range at a snapshot that cannot serve it";
  } else if (k == 5) {  // a real token, its resume key replaced: any resume is fine
    req.clear_start(), req.clear_end();
    req.set_subvolume(kSeed);
    req.set_prefix("k/");
    req.set_reverse(false);
    const std::string resume =
        OneIn(3) ? Bytes(U(kMaxKeySize + 1)) : absl::StrFormat("k/%03d", U(45));
    req.set_page_token(token_.substr(0, 11) + resume);
    const RangeFields fields = FieldsOf(req);
    absl::StatusOr<RangeRequest> page = PlanPage(fields, "sv:seed", req.page_token());
    const Reply r =
        Send("KV/Range", "range with a resumed token", f, {Serialize(req, f.unparsable)});
    if (r.status.ok() && page.ok()) {
      VerifyRange("range with a resumed token", Parse<v1::RangeResponse>(r), page->start, page->end,
                  false, req.limit(), req.keys_only(), req.count_only());
    }
    return;
  } else if (k == 6) {
    req.set_subvolume(OneIn(2) ? "" : kSeed);
    req.set_snapshot(kReadOnly);
    what = "range at the read-only snapshot";
  }
  if (f.unparsable) {
    (OneIn(2) ? req.set_subvolume(Utf8Bomb()) : req.set_snapshot(Utf8Bomb()));
  }
  const Reply r = Send("KV/Range", what, f, {Serialize(req, f.unparsable)});
  if (!r.status.ok() || !req.page_token().empty()) return;
  // Every successful read is of the seed (or its snapshot) or of the empty "default".
  if (req.subvolume().empty() && req.snapshot().empty()) {
    if (Parse<v1::RangeResponse>(r).kvs_size() != 0 || Parse<v1::RangeResponse>(r).count() != 0) {
      ADD_FAILURE() << "Range: keys appeared in \"default\"\n" << Replay();
    }
    return;
  }
  std::string start = req.start(), end = req.end();
  if (!req.prefix().empty()) start = req.prefix(), end = PrefixEnd(req.prefix());
  VerifyRange(what, Parse<v1::RangeResponse>(r), start, end, req.reverse(), req.limit(),
              req.keys_only(), req.count_only());
}

BadInput::WriteTarget BadInput::DrawWriteTarget(uint64_t unparsable_one_in, Flaws* f) {
  f->unparsable = OneIn(unparsable_one_in);
  const uint64_t k = U(4);
  f->malformed = k == 0;
  f->unknown_subvolume = k == 1 || (f->malformed && OneIn(4));
  f->read_only = k == 2 || (f->malformed && OneIn(4));
  WriteTarget t;
  t.sv = f->unparsable          ? Utf8Bomb()
         : f->unknown_subvolume ? UnknownSubvolume()
         : f->read_only         ? std::string(kReadOnly)
                                : std::string(kSeed);
  t.state = k == 3;  // then neither malformed, unknown nor read-only
  return t;
}

// Put, Delete, DeleteRange: never a write that would succeed on the seed.
// Compact with one flaw each (a valid Compact would change the seed's
// history): unparsable, a bad non-empty name, revision 0 or an unknown durability,
// an unknown subvolume, the read-only snapshot.
void BadInput::KvCompact() {
  Flaws f;
  f.unparsable = OneIn(8);
  v1::CompactRequest req;
  req.set_subvolume(kSeed);
  req.set_revision(1 + U(1000));
  switch (U(4)) {
    case 0:
      f.malformed = true;
      // (BadName() may be "", which names "default": not malformed.)
      if (const std::string bad = BadName(); OneIn(3) && !bad.empty()) {
        req.set_subvolume(bad);
      } else if (OneIn(2)) {
        req.set_revision(0);
      } else {
        req.set_durability(static_cast<v1::Durability>(3 + U(100)));
      }
      break;
    case 1:
      f.unknown_subvolume = true;
      req.set_subvolume(UnknownSubvolume());
      break;
    default:
      f.read_only = true;
      req.set_subvolume(kReadOnly);
      break;
  }
  if (f.unparsable) req.set_subvolume(Utf8Bomb());
  Send("KV/Compact",
       absl::StrCat("compact '", req.subvolume().substr(0, 20), "' to ", req.revision()), f,
       {Serialize(req, f.unparsable)});
}

void BadInput::KvWrites() {
  Flaws f;
  // One flaw of the request, of the target, or of the key's state.
  const auto [sv, state] = DrawWriteTarget(10, &f);
  const bool bad_durability = f.malformed && OneIn(4);
  const v1::Durability durability =
      bad_durability ? static_cast<v1::Durability>(3 + U(100))
                     : (OneIn(2) ? v1::DURABILITY_DURABLE : v1::DURABILITY_ASYNC);
  const std::string where = " in '" + sv.substr(0, 20) + "'";
  switch (U(3)) {
    case 0: {  // Put
      v1::PutRequest req;
      req.set_subvolume(sv);
      req.set_key("k/000");
      req.set_value("changed");
      req.set_durability(durability);
      if (f.malformed && !bad_durability) {
        if (OneIn(40)) {
          req.set_value(std::string(kMaxValueSize + 1, 'v'));
        } else {
          req.set_key(BadKey());
        }
      }
      if (state) {
        // A put to the seed would succeed: send it over gRPC's size limit
        // instead, or to the read-only snapshot.
        if (OneIn(40)) {
          f.too_large = true;
          req.set_value(std::string(kMaxMessageBytes + 1, 'v'));
        } else {
          f.read_only = true;
          if (!f.unparsable) req.set_subvolume(kReadOnly);
        }
      }
      Send("KV/Put",
           absl::StrCat("put ", req.key().size(), "-byte key, ", req.value().size(), "-byte value",
                        where),
           f, {Serialize(req, f.unparsable)});
      return;
    }
    case 1: {  // Delete: of a seed key, or (state) of an absent key, which writes nothing
      v1::DeleteRequest req;
      req.set_subvolume(sv);
      req.set_durability(durability);
      req.set_key(f.malformed && !bad_durability ? BadKey() : "k/001");
      if (state) {
        f.absent = true;
        req.set_key(Fresh("absent/"));
      }
      Send("KV/Delete", absl::StrCat("delete ", req.key().size(), "-byte key", where), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    default: {  // DeleteRange: everything, or (state) keys that do not exist
      v1::DeleteRangeRequest req;
      req.set_subvolume(sv);
      req.set_durability(durability);
      req.set_start(std::string(1, '\0'));
      if (state) req.clear_start(), req.set_prefix("zz-none/");
      if (f.malformed && !bad_durability) {
        switch (U(4)) {
          case 0:
            req.clear_start();
            break;  // nothing set: refused
          case 1:
            req.set_prefix("k/");
            break;  // prefix and start
          case 2:
            req.set_end(BadKeyOfSize(kMaxKeySize + 2));
            break;
          default:
            req.clear_start(), req.set_prefix(BadKeyOfSize(kMaxKeySize + 1));
            break;
        }
      }
      const Reply r =
          Send("KV/DeleteRange", "delete-range" + where, f, {Serialize(req, f.unparsable)});
      if (r.status.ok() && Parse<v1::DeleteRangeResponse>(r).deleted() != 0) {
        ADD_FAILURE() << "DeleteRange deleted seed keys\n" << Replay();
      }
      return;
    }
  }
}

void BadInput::KvTxn() {
  Flaws f;
  f.unparsable = OneIn(10);
  v1::TxnRequest req;
  const uint64_t k = U(5);
  f.malformed = k == 0;
  f.unknown_subvolume = k == 1;
  f.read_only = k == 2;
  req.set_subvolume(f.unparsable          ? Utf8Bomb()
                    : f.unknown_subvolume ? UnknownSubvolume()
                    : f.read_only         ? kReadOnly
                                          : kSeed);
  req.set_durability(v1::DURABILITY_ASYNC);
  // The writes are in `success`; on the seed the compare never holds, so
  // only `failure` (reads) runs.
  v1::Compare* c = req.add_compare();
  c->set_key("k/000");
  c->set_target(v1::Compare::TARGET_VALUE);
  c->set_value(f.read_only ? kv_["k/000"] : "no such value");
  v1::RequestOp* put = req.add_success();
  put->mutable_put()->set_key("k/001");
  put->mutable_put()->set_value("changed");
  req.add_success()->mutable_delete_()->set_key("k/002");
  req.add_success()->mutable_delete_range()->set_start("k/");
  req.add_failure()->mutable_range()->set_prefix("k/0");
  std::string what = "txn";
  if (f.malformed) {
    switch (U(9)) {
      case 0:
        c->set_key(BadKey());
        what = "txn: compare key";
        break;
      case 1:
        c->set_target(static_cast<v1::Compare_Target>(5 + U(50)));
        what = "txn: target";
        break;
      case 2:
        c->set_op(static_cast<v1::Compare_Op>(4 + U(50)));
        what = "txn: op";
        break;
      case 3:
        c->set_target(v1::Compare::TARGET_EXISTS), c->set_op(v1::Compare::OP_LESS);
        what = "txn: exists <";
        break;
      case 4:
        req.add_failure();
        what = "txn: an empty op";
        break;
      case 5:
        put->mutable_put()->set_key(BadKey());
        what = "txn: put key";
        break;
      case 6:
        req.add_failure()->mutable_range()->set_end(BadKeyOfSize(kMaxKeySize + 2));
        what = "txn: range end";
        break;
      case 7:
        req.set_durability(static_cast<v1::Durability>(3 + U(9)));
        what = "txn: durability";
        break;
      default:
        for (size_t i = 0; i <= kMaxTxnOps; ++i) req.add_failure()->mutable_delete_()->set_key("z");
        what = "txn: too many ops";
        break;
    }
  }
  const Reply r = Send("KV/Txn", what + " in '" + req.subvolume().substr(0, 20) + "'", f,
                       {Serialize(req, f.unparsable)});
  if (r.status.ok()) {
    const v1::TxnResponse resp = Parse<v1::TxnResponse>(r);
    if (resp.succeeded() || resp.responses_size() != 1) {
      ADD_FAILURE() << "Txn on the seed ran its writes\n" << Replay();
    }
  }
}

void BadInput::KvInteractive() {
  Flaws f;
  const uint64_t k = U(4);
  f.unknown_handle = k == 0;
  f.expired_handle = k == 1;
  const uint64_t handle = f.unknown_handle   ? (OneIn(3) ? finished_ : UnknownHandle())
                          : f.expired_handle ? expired_
                                             : live_;
  f.unparsable = OneIn(12);  // no string fields: bytes that are not protobuf
  f.malformed = !f.unparsable && OneIn(3);
  switch (U(8)) {
    case 0: {  // Begin: a lease too long, an unknown subvolume
      v1::BeginRequest req;
      f = Flaws();
      f.unparsable = OneIn(6);
      f.malformed = OneIn(2);
      f.unknown_subvolume = !f.malformed || OneIn(2);
      req.set_lease_ms(f.malformed ? kMaxLeaseMs + 1 + U(UINT32_MAX) : U(kMaxLeaseMs));
      req.set_subvolume(f.unparsable          ? Utf8Bomb()
                        : f.unknown_subvolume ? UnknownSubvolume()
                                              : kSeed);
      Send("KV/Begin", "begin", f, {Serialize(req, f.unparsable)});
      return;
    }
    case 1: {
      v1::TxnGetRequest req;
      req.set_handle(handle);
      auto it = kv_.begin();
      std::advance(it, U(kv_.size()));
      const bool absent = !f.malformed && OneIn(3);
      req.set_key(f.malformed ? BadKey() : absent ? Fresh("absent/") : it->first);
      f.absent = absent;
      const Reply r = Send("KV/TxnGet", "txn get", f, {Serialize(req, f.unparsable)});
      if (r.status.ok() && Parse<v1::GetResponse>(r).kv().value() != it->second) {
        ADD_FAILURE() << "TxnGet: a seed value changed\n" << Replay();
      }
      return;
    }
    case 2: {
      v1::TxnRangeRequest req;
      req.set_handle(handle);
      v1::RangeRequest* range = req.mutable_range();
      range->set_prefix("k/");
      range->set_limit(kTokenLimit);
      if (OneIn(3)) {
        range->set_page_token(txn_token_);
        // The token is tied to the live handle: with any other it is not
        // a token of this request, which is decided before the handle.
        if (handle != live_) f.malformed = true;
      }
      if (f.malformed) {
        switch (U(4)) {
          case 0:
            range->set_subvolume(kSeed);
            break;
          case 1:
            range->set_snapshot(kReadOnly);
            break;
          case 2:
            range->set_page_token(token_);
            break;  // a token of KV.Range, not of this
          default:
            range->set_start("a");
            break;
        }
      }
      const Reply r = Send("KV/TxnRange", "txn range", f, {Serialize(req, f.unparsable)});
      if (r.status.ok() && range->page_token().empty()) {
        VerifyRange("txn range", Parse<v1::RangeResponse>(r), "k/", "k0", false, kTokenLimit, false,
                    false);
      }
      return;
    }
    case 3: {  // TxnPut: buffered in the live transaction, which is never committed
      v1::TxnPutRequest req;
      req.set_handle(handle);
      req.set_key(f.malformed ? BadKey() : Fresh("scratch/"));
      req.set_value(f.malformed && OneIn(50) ? std::string(kMaxValueSize + 1, 'v') : "x");
      if (f.malformed && req.value().size() > 1) req.set_key("scratch/k");
      Send("KV/TxnPut", "txn put", f, {Serialize(req, f.unparsable)});
      return;
    }
    case 4: {
      v1::TxnDeleteRequest req;
      req.set_handle(handle);
      req.set_key(Fresh("scratch/"));
      if (f.malformed) {
        switch (U(3)) {
          case 0:
            req.set_key(BadKey());
            break;
          case 1:
            req.set_end("scratch/z");
            break;  // an end without `range`
          default:
            req.set_range(true), req.set_end(BadKeyOfSize(kMaxKeySize + 2));
            break;
        }
      } else if (OneIn(2)) {
        req.set_range(true);
        req.set_end("scratch/z");
      }
      Send("KV/TxnDelete", "txn delete", f, {Serialize(req, f.unparsable)});
      return;
    }
    case 5: {  // Commit: never the live transaction
      v1::CommitRequest req;
      if (!f.unknown_handle && !f.expired_handle) f.unknown_handle = true;
      req.set_handle(f.unknown_handle ? UnknownHandle() : expired_);
      if (f.malformed) req.set_durability(static_cast<v1::Durability>(3 + U(100)));
      Send("KV/Commit", "commit", f, {Serialize(req, f.unparsable)});
      return;
    }
    case 6: {  // Abort: never the live transaction
      v1::AbortRequest req;
      f.malformed = false;
      if (!f.unknown_handle && !f.expired_handle) f.unknown_handle = true;
      req.set_handle(f.unknown_handle ? UnknownHandle() : expired_);
      Send("KV/Abort", "abort", f, {Serialize(req, f.unparsable)});
      return;
    }
    default:
      break;
  }
  // A transaction on the read-only snapshot: Begin and a buffered write
  // succeed; Commit is refused, and the handle is gone.
  v1::BeginRequest begin;
  begin.set_subvolume(kReadOnly);
  const Reply b = Send("KV/Begin", "begin on the read-only snapshot", Flaws(),
                       {begin.SerializeAsString()}, false);
  const uint64_t h = Parse<v1::BeginResponse>(b).handle();
  if (!b.status.ok()) return;
  if (OneIn(2)) {
    v1::TxnPutRequest put;
    put.set_handle(h);
    put.set_key("k/003");
    put.set_value("changed");
    Send("KV/TxnPut", "put in a read-only transaction", Flaws(), {put.SerializeAsString()}, false);
  } else {
    v1::TxnDeleteRequest del;
    del.set_handle(h);
    del.set_key("k/");
    del.set_range(true);
    Send("KV/TxnDelete", "delete in a read-only transaction", Flaws(), {del.SerializeAsString()},
         false);
  }
  v1::CommitRequest commit;
  commit.set_handle(h);
  Flaws ro;
  ro.read_only = true;
  Send("KV/Commit", "commit on the read-only snapshot", ro, {commit.SerializeAsString()}, false);
  v1::AbortRequest abort;
  abort.set_handle(h);
  Flaws gone;
  gone.unknown_handle = true;
  Send("KV/Abort", "abort after commit", gone, {abort.SerializeAsString()}, false);
}

// ---- Generators: Files -------------------------------------------------------------

const SeedFile& BadInput::AnyFile() { return files_[U(files_.size())]; }

const SeedFile& BadInput::FileOfKind(v1::FileKind kind) {
  for (;;) {
    const SeedFile& f = AnyFile();
    if (f.kind == kind) return f;
  }
}

void BadInput::VerifyStat(const std::string& what, const v1::FileStat& st, const SeedFile& f) {
  const uint64_t size = f.kind == v1::FILE_KIND_SYMLINK ? f.target.size() : f.data.size();
  if (st.ino() != f.ino || st.kind() != f.kind ||
      (f.kind != v1::FILE_KIND_DIRECTORY && st.size() != size)) {
    ADD_FAILURE() << what << " " << f.path << ": ino " << st.ino() << " kind " << st.kind()
                  << " size " << st.size() << ", want " << f.ino << " " << f.kind << " " << size
                  << "\n"
                  << Replay();
  }
}

// Stat, ReadDir, ReadLink, Fiemap, Fsync and the Read stream.
void BadInput::FilesRead() {
  Flaws f;
  f.unparsable = OneIn(8);
  const uint64_t k = U(6);
  f.malformed = k == 0;
  f.unknown_subvolume = k == 1 || (f.malformed && OneIn(4));
  f.absent = k == 2;
  const std::string sv = f.unparsable          ? Utf8Bomb()
                         : f.unknown_subvolume ? UnknownSubvolume()
                                               : ReadableSubvolume();
  const SeedFile& file = AnyFile();
  const bool by_ino = !f.malformed && !f.absent && OneIn(4);
  const std::string path = f.malformed ? BadPath() : f.absent ? Fresh("/dir/absent-") : file.path;
  const uint64_t ino = by_ino ? file.ino : (f.absent && OneIn(3) ? (1ull << 40) + U(1000) : 0);
  const std::string what =
      absl::StrCat(path.substr(0, 40), " ino ", ino, " in '", sv.substr(0, 20), "'");
  switch (U(6)) {
    case 0: {
      v1::StatRequest req;
      req.set_subvolume(sv), req.set_path(path), req.set_ino(ino);
      const Reply r = Send("Files/Stat", "stat " + what, f, {Serialize(req, f.unparsable)});
      if (r.status.ok()) VerifyStat("stat", Parse<v1::FileStat>(r), file);
      return;
    }
    case 1: {
      v1::ReadDirRequest req;
      req.set_subvolume(sv), req.set_path(path), req.set_ino(ino);
      const uint64_t cookie = OneIn(3) ? rng_() : U(10);
      req.set_cookie(cookie);
      req.set_limit(OneIn(2) ? 0 : U(5));
      if (file.kind != v1::FILE_KIND_DIRECTORY) f.wrong_kind = true;  // ENOTDIR
      const Reply r = Send("Files/ReadDir", "readdir " + what, f, {Serialize(req, f.unparsable)});
      if (!r.status.ok()) return;
      std::vector<std::string> want;
      for (const SeedDirEntry& e : dirs_[file.path]) {
        if (e.cookie >= cookie) want.push_back(e.name);
      }
      const uint64_t limit = req.limit() == 0 ? kReadDirPageEntries : req.limit();
      if (want.size() > limit) want.resize(limit);
      std::vector<std::string> got;
      const v1::ReadDirResponse listing = Parse<v1::ReadDirResponse>(r);
      for (const v1::DirEntry& e : listing.entries()) got.push_back(e.name());
      if (got != want) {
        ADD_FAILURE() << "readdir " << what << " from " << cookie << ": ["
                      << absl::StrJoin(got, ",") << "], want [" << absl::StrJoin(want, ",") << "]\n"
                      << Replay();
      }
      return;
    }
    case 2: {
      v1::ReadLinkRequest req;
      req.set_subvolume(sv), req.set_path(by_ino ? file.path : path);
      if (file.kind != v1::FILE_KIND_SYMLINK) f.not_regular = true;  // EINVAL: not a symlink
      const Reply r = Send("Files/ReadLink", "readlink " + what, f, {Serialize(req, f.unparsable)});
      if (r.status.ok() && Parse<v1::ReadLinkResponse>(r).target() != file.target) {
        ADD_FAILURE() << "readlink: the target changed\n" << Replay();
      }
      return;
    }
    case 3: {
      v1::FiemapRequest req;
      req.set_subvolume(sv), req.set_path(path), req.set_ino(ino);
      const SeedFile& reg = f.malformed || f.absent ? file : FileOfKind(v1::FILE_KIND_REGULAR);
      if (!f.malformed && !f.absent) req.set_path(reg.path), req.set_ino(by_ino ? reg.ino : 0);
      const bool overflow = !f.malformed && !f.absent && !f.unknown_subvolume && OneIn(3);
      req.set_offset(overflow ? UINT64_MAX - U(100) : OneIn(2) ? U(1ull << 62) : U(1 << 20));
      req.set_length(overflow ? 1 + U(1000) : U(1 << 20));
      f.malformed |= overflow;
      Send("Files/Fiemap", "fiemap " + what, f, {Serialize(req, f.unparsable)});
      return;
    }
    case 4: {  // Fsync: fine on the seed and on the snapshot (nothing to make durable there)
      v1::FsyncRequest req;
      req.set_subvolume(sv), req.set_path(path), req.set_ino(ino);
      req.set_datasync(OneIn(2));
      Send("Files/Fsync", "fsync " + what, f, {Serialize(req, f.unparsable)});
      return;
    }
    default: {  // Read
      v1::ReadRequest req;
      req.set_subvolume(sv), req.set_path(path), req.set_ino(ino);
      const bool overflow = !f.malformed && !f.absent && !f.unknown_subvolume && OneIn(4);
      const uint64_t offset = overflow   ? (1ull << 63) + U(1000)
                              : OneIn(4) ? U(1ull << 62)
                                         : U(400 << 10);
      const uint64_t length = OneIn(3) ? 0 : U(2 << 20);
      req.set_offset(offset);
      req.set_length(overflow && OneIn(2) ? UINT64_MAX - U(10) : length);
      if (overflow && req.length() == length) req.set_offset(UINT64_MAX - U(1000));
      f.malformed |= overflow;
      if (file.kind == v1::FILE_KIND_DIRECTORY) f.wrong_kind = true;  // EISDIR
      if (file.kind == v1::FILE_KIND_SYMLINK) f.not_regular = true;   // EINVAL
      const Reply r = Send("Files/Read", "read " + what, f, {Serialize(req, f.unparsable)});
      if (!r.status.ok()) return;
      std::string data;
      for (size_t i = 0; i < r.messages.size(); ++i) data += Parse<v1::ReadResponse>(r, i).data();
      const std::string want =
          offset >= file.data.size()
              ? ""
              : file.data.substr(offset, length == 0 ? std::string::npos : length);
      if (data != want) {
        ADD_FAILURE() << "read " << what << " [" << offset << ", +" << length
                      << "): " << data.size() << " bytes, want " << want.size() << "\n"
                      << Replay();
      }
      return;
    }
  }
}

// The Write stream: flaws in the first message change nothing; flaws in a
// later one go to the scratch subvolume, whose file may change.
void BadInput::FilesWriteStream() {
  Flaws f;
  v1::WriteRequest first;
  const uint64_t k = U(12);
  first.set_subvolume(kSeed);
  first.set_path("/dir/a");
  first.set_data("changed");
  first.set_truncate(OneIn(2));
  std::vector<std::string> msgs;
  std::string what;
  if (k == 0) {  // a request field no write may have
    f.malformed = true;
    switch (U(6)) {
      case 0:
        first.set_path(BadPath());
        break;
      case 1:
        first.set_mode(010000 + U(1000000));
        break;
      case 2:
        first.set_offset(UINT64_MAX - U(1000));
        break;
      case 3:
        first.set_offset(kMaxFileSize - 2), first.set_create(true),
            first.set_path(Fresh("/dir/efbig-"));
        break;
      case 4:
        first.set_create(true), first.set_path(Fresh("/dir/nope/")), first.set_mode(0200000);
        break;
      default:
        if (OneIn(20)) {
          first.set_data(std::string(kMaxWriteChunkBytes + 1, 'd'));
        } else {
          first.set_path(BadPath());
        }
        break;
    }
    if (OneIn(3)) first.set_subvolume(PickOf<std::string>({kReadOnly, "absent-sv"}));
    what = "write: a bad first message";
  } else if (k == 1) {
    f.unknown_subvolume = true;
    first.set_subvolume(UnknownSubvolume());
    what = "write to an unknown subvolume";
  } else if (k == 2) {  // every kind of write to the read-only snapshot
    f.read_only = true;
    first.set_subvolume(kReadOnly);
    if (OneIn(2)) first.set_create(true), first.set_path(Fresh("/dir/new-"));
    if (OneIn(3)) first.clear_data(), first.set_truncate(false);  // nothing to write: still EROFS
    what = "write to the read-only snapshot";
  } else if (k == 3) {
    f.absent = true;
    first.set_path(OneIn(2) ? Fresh("/dir/absent-") : "/nope/x");
    first.set_create(first.path() == "/nope/x");  // a missing parent even with create
    what = "write to an absent file";
  } else if (k == 4) {
    first.set_path(OneIn(2) ? "/dir" : "/link");
    first.set_create(OneIn(2));
    if (OneIn(3)) first.clear_data(), first.set_truncate(false);  // no data: still refused
    (first.path() == "/dir" ? f.wrong_kind : f.not_regular) = true;
    what = "write to a " + first.path().substr(1);
  } else if (k == 5) {  // nothing at all, or a first message that does not parse
    f.malformed = true;
    first.set_path(Utf8Bomb());
    msgs.push_back(Serialize(first, true));
    if (OneIn(2)) msgs.clear();
    Send("Files/Write", msgs.empty() ? "write: no message" : "write: an unparsable first message",
         f, msgs);
    return;
  } else if (k == 6) {  // a later message that names the file
    f.malformed = true;
    first.set_subvolume(kScratch);
    first.set_path("/s");
    v1::WriteRequest later;
    later.set_data("more");
    switch (U(4)) {
      case 0:
        later.set_path("/s");
        break;
      case 1:
        later.set_offset(1 + U(100));
        break;
      case 2:
        later.set_truncate(true);
        break;
      default:
        if (OneIn(20))
          later.set_data(std::string(kMaxWriteChunkBytes + 1, 'd'));
        else
          later.set_ino(1 + U(1000));
        break;
    }
    msgs = {first.SerializeAsString(), later.SerializeAsString()};
    Send("Files/Write", "write: a later message names the file", f, msgs, false);
    return;
  } else if (k == 7) {
    // A later message that does not parse: gRPC C++ reports it to the
    // server as the end of the stream, so the call succeeds with the
    // chunks before it (docs/api.md). bytes_written tells.
    first.set_subvolume(kScratch);
    first.set_path("/s");
    first.set_data("12345");
    v1::WriteRequest bad;
    bad.set_path(Utf8Bomb());
    bad.set_data("lost");
    v1::WriteRequest after;
    after.set_data("also lost");
    msgs = {first.SerializeAsString(), Serialize(bad, true), after.SerializeAsString()};
    const Reply r = Send("Files/Write", "write: a later message does not parse", f, msgs, false);
    if (r.status.ok() && Parse<v1::WriteResponse>(r).bytes_written() != 5) {
      ADD_FAILURE() << "write: " << Parse<v1::WriteResponse>(r).bytes_written()
                    << " bytes written, want the 5 before the unparsable message\n"
                    << Replay();
    }
    return;
  } else {  // a valid write, to the scratch subvolume
    first.set_subvolume(kScratch);
    first.set_path(OneIn(2) ? "/s" : Fresh("/w-"));
    first.set_create(true);
    first.set_offset(U(1 << 20));
    what = "write to scratch";
  }
  msgs.push_back(Serialize(first, false));
  if (OneIn(2)) {
    v1::WriteRequest more;
    more.set_data(Bytes(U(5000)));
    msgs.push_back(more.SerializeAsString());
  }
  Send("Files/Write", what, f, msgs);
}

// Mkdir, Create, Rename, Link, Symlink, Unlink, Rmdir: never valid on the seed.
void BadInput::FilesNamespace() {
  Flaws f;
  const auto [sv, state] = DrawWriteTarget(8, &f);
  const std::string bad =
      f.malformed ? (OneIn(4) ? PickOf<std::string>({"", "/", "//"}) : BadPath()) : "";
  switch (U(7)) {
    case 0:
    case 1: {  // Mkdir, Create
      const bool dir = OneIn(2);
      std::string path = Fresh("/dir/new-");
      uint32_t mode = OneIn(2) ? 0 : 0700;
      if (f.malformed) (OneIn(5) ? (void)(mode = 010000 + U(100000)) : (void)(path = bad));
      if (state) {
        switch (U(3)) {
          case 0:
            f.absent = true, path = "/nope/x";
            break;
          case 1:
            f.exists = true, path = PickOf<std::string>({"/dir", "/dir/a", "/link", "/empty"});
            break;
          default:
            f.wrong_kind = true, path = "/dir/a/x";
            break;  // ENOTDIR
        }
      }
      if (dir) {
        v1::MkdirRequest req;
        req.set_subvolume(sv), req.set_path(path), req.set_mode(mode);
        Send("Files/Mkdir", "mkdir " + path.substr(0, 40), f, {Serialize(req, f.unparsable)});
      } else {
        v1::CreateFileRequest req;
        req.set_subvolume(sv), req.set_path(path), req.set_mode(mode);
        Send("Files/Create", "create " + path.substr(0, 40), f, {Serialize(req, f.unparsable)});
      }
      return;
    }
    case 2: {  // Rename
      v1::RenameRequest req;
      req.set_subvolume(sv);
      req.set_from("/dir/a");
      req.set_to(Fresh("/dir/renamed-"));
      if (f.malformed) {
        switch (U(3)) {
          case 0:
            req.set_from(bad);
            break;
          case 1:
            req.set_to(bad);
            break;
          default:
            req.set_flags(PickOf<uint32_t>({3, 4, 7, 0x80000000u, 1u << 16}));
            break;
        }
      }
      if (state) {
        switch (U(5)) {
          case 0:
            f.absent = true, req.set_from(Fresh("/absent-"));
            break;
          case 1:
            f.exists = true, req.set_to("/dir/b"), req.set_flags(v1::RENAME_FLAG_NOREPLACE);
            break;
          case 2:
            f.absent = true, req.set_flags(v1::RENAME_FLAG_EXCHANGE);
            break;  // `to` absent
          case 3:
            f.wrong_kind = true, req.set_to("/dir");
            break;  // a file over a directory: EISDIR
          default:
            f.wrong_kind = true, req.set_from("/other"), req.set_to("/dir");
            break;  // ENOTEMPTY
        }
      }
      Send("Files/Rename", "rename " + req.from().substr(0, 30) + " -> " + req.to().substr(0, 30),
           f, {Serialize(req, f.unparsable)});
      return;
    }
    case 3: {  // Link
      v1::LinkRequest req;
      req.set_subvolume(sv);
      req.set_existing("/dir/b");
      req.set_new_path(Fresh("/dir/link-"));
      // `existing` may name the root (a directory: EPERM); only `new_path` must have a name.
      if (f.malformed) (OneIn(2) ? req.set_existing(BadPath()) : req.set_new_path(bad));
      if (state) {
        switch (U(4)) {
          case 0:
            f.absent = true, req.set_existing(Fresh("/absent-"));
            break;
          case 1:
            f.exists = true, req.set_new_path("/dir/a");
            break;
          case 2:
            f.wrong_kind = true, req.set_existing("/dir/sub");
            break;  // EPERM
          default:
            f.absent = true, req.set_new_path("/nope/x");
            break;
        }
      }
      Send("Files/Link",
           "link " + req.existing().substr(0, 30) + " -> " + req.new_path().substr(0, 30), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 4: {  // Symlink
      v1::SymlinkRequest req;
      req.set_subvolume(sv);
      req.set_target(
          PickOf<std::string>({"dir/a", "../x", "/abs", std::string(kMaxSymlinkLen, 't')}));
      req.set_path(Fresh("/dir/sym-"));
      if (f.malformed) {
        switch (U(4)) {
          case 0:
            req.set_target("");
            break;
          case 1:
            req.set_target(std::string(kMaxSymlinkLen + 1 + U(100), 't'));
            break;
          case 2:
            req.set_target(std::string("a\0b", 3));
            break;
          default:
            req.set_path(bad);
            break;
        }
      }
      if (f.unparsable && OneIn(2)) req.set_target(Utf8Bomb());
      if (state)
        (OneIn(2) ? (f.exists = true, req.set_path("/dir/a"))
                  : (f.absent = true, req.set_path("/nope/s")));
      Send("Files/Symlink", "symlink " + req.path().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 5: {  // Unlink
      v1::UnlinkRequest req;
      req.set_subvolume(sv);
      req.set_path(f.malformed ? bad
                               : PickOf<std::string>({"/dir/a", "/dir/b", "/link", "/empty"}));
      if (state)
        (OneIn(2) ? (f.absent = true, req.set_path(Fresh("/dir/absent-")))
                  : (f.wrong_kind = true, req.set_path("/dir/sub")));  // EISDIR
      Send("Files/Unlink", "unlink " + req.path().substr(0, 40), f, {Serialize(req, f.unparsable)});
      return;
    }
    default: {  // Rmdir
      v1::RmdirRequest req;
      req.set_subvolume(sv);
      req.set_path(f.malformed ? bad : PickOf<std::string>({"/dir/sub", "/other"}));
      if (state) {
        switch (U(3)) {
          case 0:
            f.absent = true, req.set_path(Fresh("/dir/absent-"));
            break;
          case 1:
            f.wrong_kind = true, req.set_path("/dir/a");
            break;  // ENOTDIR
          default:
            f.wrong_kind = true, req.set_path("/dir");
            break;  // ENOTEMPTY
        }
      }
      Send("Files/Rmdir", "rmdir " + req.path().substr(0, 40), f, {Serialize(req, f.unparsable)});
      return;
    }
  }
}

// Issue 17's calls: SetAttr, SetXattr and RemoveXattr never valid on the
// seed; GetXattr (of a name never set) and ListXattrs reads. Malformed
// requests carry what the server checks before the subvolume: a bad path,
// or (SetAttr) a mode, field bit or size it refuses.
void BadInput::FilesAttrs() {
  Flaws f;
  const auto [sv, state] = DrawWriteTarget(8, &f);
  const std::string path =
      f.malformed ? BadPath() : PickOf<std::string>({"/dir/a", "/dir/b", "/empty"});
  const std::string absent = Fresh("/dir/absent-");
  switch (U(5)) {
    case 0: {
      v1::SetAttrRequest req;
      req.set_subvolume(sv), req.set_path(path);
      req.set_fields(v1::SET_ATTR_MODE), req.set_mode(0600);
      if (f.malformed && OneIn(2)) {
        req.set_path("/dir/a");
        switch (U(3)) {
          case 0:
            req.set_mode(010000 + U(1000));
            break;
          case 1:
            req.set_fields(v1::SET_ATTR_MODE | (1u << (10 + U(20))));
            break;
          default:
            req.set_fields(v1::SET_ATTR_SIZE), req.set_size(kMaxFileSize + 1 + U(1000));
        }
      }
      if (state) {
        (OneIn(2) ? (f.absent = true, req.set_path(absent))
                  : (f.wrong_kind = true, req.set_path("/dir"),
                     req.set_fields(v1::SET_ATTR_SIZE)));  // EISDIR
      }
      Send("Files/SetAttr", "setattr " + req.path().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 1: {
      v1::SetXattrRequest req;
      req.set_subvolume(sv), req.set_path(state ? absent : path);
      req.set_name("user.x"), req.set_value("v");
      if (state) f.absent = true;
      Send("Files/SetXattr", "setxattr " + req.path().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 2: {
      v1::RemoveXattrRequest req;
      req.set_subvolume(sv), req.set_path(path), req.set_name("user.never");
      if (state) f.absent = true;  // ENODATA (NOT_FOUND)
      Send("Files/RemoveXattr", "removexattr " + req.path().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    case 3: {  // a read: the read-only snapshot serves it
      v1::GetXattrRequest req;
      f.read_only = false;
      req.set_subvolume(sv), req.set_path(path), req.set_name("user.never");
      f.absent = true;  // ENODATA (NOT_FOUND), after the flaws above it
      Send("Files/GetXattr", "getxattr " + req.path().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
    default: {
      v1::ListXattrsRequest req;
      f.read_only = false;
      req.set_subvolume(sv), req.set_path(state ? absent : path);
      if (state) f.absent = true;
      Send("Files/ListXattrs", "listxattrs " + req.path().substr(0, 40), f,
           {Serialize(req, f.unparsable)});
      return;
    }
  }
}

// Truncate, Clone and Fallocate: never valid on the seed.
void BadInput::FilesData() {
  if (OneIn(3)) return FilesFallocate();
  Flaws f;
  const auto [sv, state] = DrawWriteTarget(8, &f);
  if (OneIn(2)) {
    v1::TruncateRequest req;
    req.set_subvolume(sv);
    req.set_path(PickOf<std::string>({"/dir/a", "/dir/b", "/empty"}));
    req.set_size(U(1 << 20));
    if (f.malformed) {
      switch (U(3)) {
        case 0:
          req.set_path(BadPath());
          break;
        case 1:
          req.set_size(kMaxFileSize + 1 + U(1000));
          break;
        default:
          req.set_size(UINT64_MAX - U(1000));
          break;
      }
    }
    if (state) {
      switch (U(3)) {
        case 0:
          f.absent = true, req.set_path(Fresh("/absent-"));
          break;
        case 1:
          f.wrong_kind = true, req.set_path("/dir");
          break;  // EISDIR
        default:
          f.not_regular = true, req.set_path("/link");
          break;  // EINVAL
      }
    }
    Send("Files/Truncate", "truncate " + req.path().substr(0, 40), f,
         {Serialize(req, f.unparsable)});
    return;
  }
  v1::CloneRequest req;
  req.set_subvolume(sv);
  req.set_src_path("/dir/b");
  req.set_dst_path("/empty");
  req.set_length(OneIn(2) ? 0 : 4096 * (1 + U(10)));
  if (f.malformed) {
    switch (U(4)) {
      case 0:
        req.set_src_offset(UINT64_MAX - U(100)), req.set_length(1 + U(100));
        break;
      case 1:
        req.set_dst_offset((1ull << 63) - U(100)), req.set_length(1000);
        break;
      case 2:
        req.set_src_path(BadPath());
        break;
      default:
        req.set_dst_path(BadPath());
        break;
    }
  }
  if (state) {
    switch (U(4)) {
      case 0:
        f.absent = true, req.set_src_path(Fresh("/absent-"));
        break;
      case 1:
        f.absent = true, req.set_dst_path(Fresh("/absent-"));
        break;
      case 2:
        f.wrong_kind = true, req.set_src_path("/dir");
        break;  // EISDIR
      default:
        f.not_regular = true, req.set_src_offset(1 << 30);
        break;  // past the source's end
    }
  }
  Send("Files/Clone",
       "clone " + req.src_path().substr(0, 30) + " -> " + req.dst_path().substr(0, 30), f,
       {Serialize(req, f.unparsable)});
}

// Fallocate: malformed (length 0, PUNCH_HOLE with ZERO_RANGE, past 2^50, a
// bad path), a mode not supported, or an object it refuses.
void BadInput::FilesFallocate() {
  Flaws f;
  const auto [sv, state] = DrawWriteTarget(8, &f);
  v1::FallocateRequest req;
  req.set_subvolume(sv);
  req.set_path(PickOf<std::string>({"/dir/a", "/dir/b", "/empty"}));
  req.set_mode(PickOf<uint32_t>({0, v1::FALLOCATE_FLAG_KEEP_SIZE,
                                 v1::FALLOCATE_FLAG_PUNCH_HOLE | v1::FALLOCATE_FLAG_KEEP_SIZE,
                                 v1::FALLOCATE_FLAG_ZERO_RANGE}));
  req.set_offset(U(1 << 20));
  req.set_length(1 + U(1 << 20));
  if (f.malformed) {
    switch (U(4)) {
      case 0:
        req.set_length(0);
        break;
      case 1:
        req.set_mode(v1::FALLOCATE_FLAG_PUNCH_HOLE | v1::FALLOCATE_FLAG_ZERO_RANGE |
                     v1::FALLOCATE_FLAG_KEEP_SIZE);
        break;
      case 2:
        req.set_offset(kMaxFileSize - U(100)), req.set_length(1000);
        break;
      default:
        req.set_path(BadPath());
        break;
    }
  } else if (OneIn(4)) {
    // Collapse, insert, unshare range, no-hide-stale, punch without KEEP_SIZE.
    f.unsupported = true;
    req.set_mode(PickOf<uint32_t>({0x08, 0x20, 0x40, 0x04, v1::FALLOCATE_FLAG_PUNCH_HOLE}));
  }
  if (state) {
    switch (U(3)) {
      case 0:
        f.absent = true, req.set_path(Fresh("/absent-"));
        break;
      case 1:
        f.wrong_kind = true, req.set_path("/dir");
        break;  // EISDIR
      default:
        f.not_regular = true, req.set_path("/link");
        break;  // EINVAL
    }
  }
  Send("Files/Fallocate", "fallocate " + req.path().substr(0, 40), f,
       {Serialize(req, f.unparsable)});
}

// ---- Generators: Admin -------------------------------------------------------------

void BadInput::Admin() {
  Flaws f;
  f.unparsable = OneIn(3);
  // Sync and Check do real work (a commit, a full verification): fewer of them.
  const std::string method = OneIn(3)   ? "Admin/Stats"
                             : OneIn(2) ? "Admin/Version"
                             : OneIn(3) ? "Admin/Sync"
                             : OneIn(2) ? "Admin/Check"
                                        : "Admin/Stats";
  // The requests have no fields: unknown ones are kept and ignored.
  std::string wire = OneIn(2) ? UnknownFields() : "";
  if (f.unparsable) wire += PickOf(BadTails());
  if (v1::StatsRequest().ParseFromString(wire) == f.unparsable) {
    ADD_FAILURE() << "generator bug: an Admin request that "
                  << (f.unparsable ? "parses" : "does not parse");
  }
  const Reply r = Send(method, absl::StrCat(method, " with ", wire.size(), " bytes"), f, {wire});
  if (r.status.ok() && method == "Admin/Check" && !Parse<v1::CheckResponse>(r).ok()) {
    ADD_FAILURE() << "Check mid-run: " << Parse<v1::CheckResponse>(r).problems(0) << "\n"
                  << Replay();
  }
}

// ---- Generators: Lease -------------------------------------------------------------

// Grants (revoked at once, so the seed keeps no lease), revokes,
// time-to-lives and keep-alives of leases that do not exist, and lists.
void BadInput::Leases() {
  Flaws f;
  const uint64_t kind = U(5);
  f.unparsable = kind != 4 && OneIn(8);  // a stream's bad message reads as its end
  const bool unknown = !f.unparsable && OneIn(6);
  f.unknown_subvolume = unknown;
  const std::string sv = f.unparsable ? Utf8Bomb()
                         : unknown    ? UnknownSubvolume()
                                      : ReadableSubvolume();
  const int64_t absent_id = static_cast<int64_t>(1000000000 + U(1000000));
  if (kind == 0) {
    v1::LeaseGrantRequest req;
    req.set_subvolume(sv);
    const uint64_t t = U(4);
    const int64_t ttl = t == 0 ? 0 : t == 1 ? -3 : 1 + static_cast<int64_t>(U(100));
    req.set_ttl(ttl);
    f.malformed = ttl <= 0;
    f.read_only = sv == kReadOnly;
    const Reply r =
        Send("Lease/Grant", absl::StrCat("grant ttl ", ttl), f, {Serialize(req, f.unparsable)});
    if (r.status.ok()) {
      v1::LeaseRevokeRequest revoke;
      revoke.set_subvolume(sv);
      revoke.set_id(Parse<v1::LeaseGrantResponse>(r).id());
      Ok("Lease/Revoke", revoke);
    }
  } else if (kind == 1) {
    v1::LeaseRevokeRequest req;
    req.set_subvolume(sv);
    req.set_id(absent_id);
    f.read_only = sv == kReadOnly;
    f.absent = true;
    Send("Lease/Revoke", "revoke of an absent lease", f, {Serialize(req, f.unparsable)});
  } else if (kind == 2) {
    v1::LeaseTimeToLiveRequest req;
    req.set_subvolume(sv);
    req.set_id(absent_id);
    req.set_keys(OneIn(2));
    f.absent = true;
    Send("Lease/TimeToLive", "ttl of an absent lease", f, {Serialize(req, f.unparsable)});
  } else if (kind == 3) {
    v1::LeaseLeasesRequest req;
    req.set_subvolume(sv);
    const Reply r = Send("Lease/Leases", "list", f, {Serialize(req, f.unparsable)});
    if (r.status.ok() && Parse<v1::LeaseLeasesResponse>(r).ids_size() != 0) {
      ADD_FAILURE() << "a seed subvolume holds a lease\n" << Replay();
    }
  } else {
    std::vector<std::string> msgs;
    const uint64_t n = 1 + U(3);
    for (uint64_t i = 0; i < n; ++i) {
      v1::LeaseKeepAliveRequest req;
      req.set_subvolume(sv);
      req.set_id(absent_id + static_cast<int64_t>(i));
      msgs.push_back(Serialize(req, false));
    }
    const Reply r =
        Send("Lease/KeepAlive", absl::StrCat(n, " keep-alives of absent leases"), f, msgs);
    for (size_t i = 0; r.status.ok() && i < r.messages.size(); ++i) {
      if (Parse<v1::LeaseKeepAliveResponse>(r, i).ttl() != 0) {
        ADD_FAILURE() << "keep-alive of an absent lease answered a TTL\n" << Replay();
      }
    }
  }
}

// ---- Generators: Watch -------------------------------------------------------------

// A Watch stream of 1..3 creates, each with at most one flaw — answered in
// the stream as a refused watcher (created and canceled, REFUSED) carrying
// the code the flaw's request would get, the stream itself OK — or none
// (created); then a cancel of an id never created (NOT_FOUND in the
// stream). Watchers of the seed see no event: nothing writes it.
void BadInput::KvWatch() {
  std::vector<std::string> msgs;
  std::vector<Code> want;
  const uint64_t n = 1 + U(3);
  for (uint64_t i = 0; i < n; ++i) {
    v1::WatchRequest r;
    v1::WatchCreateRequest* c = r.mutable_create_request();
    c->set_subvolume(ReadableSubvolume());
    c->set_key("k/");
    c->set_range_end("k0");
    c->set_prev_kv(OneIn(2));
    Code code = Code::INVALID_ARGUMENT;
    switch (U(8)) {
      case 0:
        c->clear_key();
        c->clear_range_end();
        break;
      case 1:
        c->set_range_end("a");  // before the key
        break;
      case 2:
        c->set_watch_id(-1 - static_cast<int64_t>(U(100)));
        break;
      case 3:
        c->add_filters(static_cast<v1::WatchCreateRequest::FilterType>(2 + U(50)));
        break;
      case 4:
        c->set_subvolume(UnknownSubvolume());
        code = Code::NOT_FOUND;
        break;
      case 5:
        c->set_key(std::string(kMaxKeySize + 1, 'k'));
        break;
      default:
        code = Code::OK;
        break;
    }
    want.push_back(code);
    msgs.push_back(Serialize(r, false));
  }
  v1::WatchRequest cancel;
  cancel.mutable_cancel_request()->set_watch_id(static_cast<int64_t>(1000000 + U(1000)));
  msgs.push_back(Serialize(cancel, false));
  want.push_back(Code::NOT_FOUND);
  const Reply r = Send("KV/Watch", absl::StrCat(n, " watch creates and a cancel"), Flaws{}, msgs);
  if (!r.status.ok()) return;  // Judge reported it
  if (r.messages.size() != want.size()) {
    ADD_FAILURE() << "KV/Watch: " << r.messages.size() << " responses to " << want.size()
                  << " requests\n"
                  << Replay();
    return;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const v1::WatchResponse w = Parse<v1::WatchResponse>(r, i);
    const bool ok = want[i] == Code::OK
                        ? w.created() && !w.canceled()
                        : w.canceled() && w.error_code() == want[i] && !w.cancel_reason().empty();
    if (!ok) {
      ADD_FAILURE() << "KV/Watch request " << i << ": expected code " << want[i] << ", got "
                    << w.ShortDebugString() << "\n"
                    << Replay();
    }
  }
}

// Open, Close and CreateTmpfile. Every handle opened is closed at once (an
// O_TMPFILE never linked goes with it), so the seed does not change.
void BadInput::FilesHandles() {
  Flaws f;
  f.unparsable = OneIn(8);
  const uint64_t k = U(5);
  auto close = [this](uint64_t handle) {
    v1::CloseRequest c;
    c.set_handle(handle);
    Send("Files/CloseHandle", "close an open handle", Flaws{}, {Serialize(c, false)});
  };
  switch (U(3)) {
    case 0: {
      f.malformed = k == 0;
      f.unknown_subvolume = k == 1;
      f.absent = k == 2;
      const std::string sv = f.unparsable          ? Utf8Bomb()
                             : f.unknown_subvolume ? UnknownSubvolume()
                                                   : ReadableSubvolume();
      v1::OpenRequest req;
      req.set_subvolume(sv);
      req.set_path(f.absent ? Fresh("/dir/absent-") : AnyFile().path);
      if (f.malformed && OneIn(2)) {
        req.set_path(BadPath());
      } else if (f.malformed) {
        req.set_lease_ms(kMaxLeaseMs + 1 + U(1000));
      }
      const Reply r =
          Send("Files/Open", "open " + req.path().substr(0, 40), f, {Serialize(req, f.unparsable)});
      if (r.status.ok()) close(Parse<v1::OpenResponse>(r).handle());
      return;
    }
    case 1: {
      v1::CloseRequest req;
      req.set_handle(rng_() | 1);
      f.unknown_handle = true;
      Send("Files/CloseHandle", "close an unknown handle", f, {Serialize(req, f.unparsable)});
      return;
    }
    default: {
      f.malformed = k == 0;
      f.unknown_subvolume = k == 1;
      f.absent = k == 2;
      f.read_only = k == 3;
      const std::string sv = f.unparsable          ? Utf8Bomb()
                             : f.unknown_subvolume ? UnknownSubvolume()
                             : f.read_only         ? kReadOnly
                                                   : PickOf<std::string>({kSeed, kWritable});
      v1::CreateTmpfileRequest req;
      req.set_subvolume(sv);
      req.set_dir_path(f.absent ? Fresh("/absent-") : "/dir");
      if (f.malformed) req.set_mode(010000 + U(1000));
      const Reply r = Send("Files/CreateTmpfile", "tmpfile in " + req.dir_path(), f,
                           {Serialize(req, f.unparsable)});
      if (r.status.ok()) close(Parse<v1::OpenResponse>(r).handle());
      return;
    }
  }
}

// ---- The run ------------------------------------------------------------------------

void BadInput::Run() {
  const std::vector<std::pair<int, std::function<void()>>> generators = {
      {4, [this] { Subvolumes(); }},       {12, [this] { Kv(); }},
      {5, [this] { KvInteractive(); }},    {6, [this] { FilesRead(); }},
      {3, [this] { FilesWriteStream(); }}, {6, [this] { FilesNamespace(); }},
      {2, [this] { FilesData(); }},        {1, [this] { Admin(); }},
      {1, [this] { FilesHandles(); }},     {2, [this] { FilesAttrs(); }},
      {1, [this] { Leases(); }},           {1, [this] { KvWatch(); }},
  };
  int total = 0;
  for (const auto& g : generators) total += g.first;
  while (sent_ < count_ && failures_ < 25) {
    int pick = static_cast<int>(U(total));
    for (const auto& g : generators) {
      if ((pick -= g.first) < 0) {
        g.second();
        break;
      }
    }
  }
  if (failures_ >= 25) ADD_FAILURE() << "stopped after 25 failures\n" << Replay();
}

void BadInput::PrintSummary() const {
  std::cout << "bad_input_test: seed " << seed_ << ", " << sent_ << " requests\n";
  for (const auto& [method, codes] : codes_) {
    std::cout << "  " << method << ":";
    for (const auto& [code, n] : codes) std::cout << " " << code << "x" << n;
    std::cout << "\n";
  }
}

void BadInput::VerifyEveryMethodCalled() {
  for (const std::string& full : Server::MethodNames()) {
    const std::string method = full.substr(std::string("cowkv.v1.").size());
    EXPECT_GT(codes_[method].size(), 0u) << method << " was never called\n" << Replay();
  }
}

// ---- The seed afterwards ----------------------------------------------------------

void BadInput::VerifySeedUnchanged() {
  for (const char* sv : {kSeed, kReadOnly, kWritable}) {
    SCOPED_TRACE(sv);
    for (const auto& [k, v] : kv_) {
      v1::GetRequest get;
      get.set_subvolume(sv);
      get.set_key(k);
      EXPECT_EQ(Parse<v1::GetResponse>(Ok("KV/Get", get)).kv().value(), v) << k.substr(0, 20);
    }
    v1::RangeRequest all;
    all.set_subvolume(sv);
    all.set_keys_only(true);
    std::vector<std::string> keys;
    const v1::RangeResponse listing = Parse<v1::RangeResponse>(Ok("KV/Range", all));
    for (const v1::KeyValue& kv : listing.kvs()) {
      keys.push_back(kv.key());
    }
    std::vector<std::string> want;
    for (const auto& [k, v] : kv_) want.push_back(k);
    EXPECT_EQ(keys, want) << "the key set changed";
    for (const SeedFile& f : files_) {
      v1::StatRequest stat;
      stat.set_subvolume(sv);
      stat.set_path(f.path);
      VerifyStat("final stat", Parse<v1::FileStat>(Ok("Files/Stat", stat)), f);
      if (f.kind == v1::FILE_KIND_REGULAR) {
        v1::ReadRequest read;
        read.set_subvolume(sv);
        read.set_path(f.path);
        const Reply r = Ok("Files/Read", read);
        std::string data;
        for (size_t i = 0; i < r.messages.size(); ++i) data += Parse<v1::ReadResponse>(r, i).data();
        EXPECT_EQ(data, f.data) << f.path;
      } else if (f.kind == v1::FILE_KIND_SYMLINK) {
        v1::ReadLinkRequest rl;
        rl.set_subvolume(sv);
        rl.set_path(f.path);
        EXPECT_EQ(Parse<v1::ReadLinkResponse>(Ok("Files/ReadLink", rl)).target(), f.target);
      }
    }
    for (const auto& [dir, entries] : dirs_) {
      v1::ReadDirRequest rd;
      rd.set_subvolume(sv);
      rd.set_path(dir);
      const v1::ReadDirResponse got = Parse<v1::ReadDirResponse>(Ok("Files/ReadDir", rd));
      std::vector<std::string> have, want;
      for (const v1::DirEntry& e : got.entries()) {
        have.push_back(absl::StrCat(e.name(), ":", e.kind(), ":", e.cookie()));
      }
      for (const SeedDirEntry& e : entries) {
        want.push_back(absl::StrCat(e.name, ":", e.kind, ":", e.cookie));
      }
      EXPECT_EQ(have, want) << "the listing of " << dir << " changed";
    }
  }
  // "default" and "other" are still empty; the subvolumes are the same six.
  for (const char* sv : {"", kOther}) {
    v1::RangeRequest all;
    all.set_subvolume(sv);
    all.set_count_only(true);
    EXPECT_EQ(Parse<v1::RangeResponse>(Ok("KV/Range", all)).count(), 0u) << sv;
    v1::ReadDirRequest rd;
    rd.set_subvolume(sv);
    EXPECT_EQ(Parse<v1::ReadDirResponse>(Ok("Files/ReadDir", rd)).entries_size(), 0) << sv;
  }
  std::vector<std::string> names;
  const v1::ListSubvolumesResponse list =
      Parse<v1::ListSubvolumesResponse>(Ok("Subvolumes/List", v1::ListSubvolumesRequest()));
  for (const v1::SubvolumeInfo& info : list.subvolumes()) {
    names.push_back(info.name());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"default", kOther, kScratch, kSeed, kReadOnly, kWritable}));
}

TEST(BadInput, EveryRequestGetsItsCodeAndChangesNothing) {
  google::protobuf::SetLogHandler(&QuietUtf8Log);
  const uint64_t seed = EnvU64("BAD_INPUT_SEED", kDefaultSeed);
  const uint64_t count = EnvU64("BAD_INPUT_COUNT", kDefaultCount);
  std::cout << "bad_input_test: BAD_INPUT_SEED=" << seed << " BAD_INPUT_COUNT=" << count << "\n";
  ServerOptions o = TestOptions("bad-input");
  o.max_txns_per_peer = 16;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  Client client((*server)->port());
  BadInput b(seed, count, &client);
  b.Setup();
  ASSERT_FALSE(::testing::Test::HasFailure()) << "setup failed\n" << b.Replay();
  const auto start = std::chrono::steady_clock::now();
  b.Run();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  b.PrintSummary();
  std::cout << "bad_input_test: " << b.sent() << " requests in " << seconds << " s\n";
  EXPECT_GE(b.sent(), count);
  b.VerifyEveryMethodCalled();

  v1::CheckResponse check;
  ASSERT_GRPC_OK(client.admin->Check(testing_util::Ctx().get(), v1::CheckRequest(), &check));
  EXPECT_TRUE(check.ok()) << (check.problems_size() > 0 ? check.problems(0) : "") << "\n"
                          << b.Replay();
  EXPECT_EQ(check.problems_size(), 0);
  b.VerifySeedUnchanged();
  EXPECT_TRUE((*server)->Stop().ok());
  if (::testing::Test::HasFailure()) std::cout << b.Replay() << "\n";
  google::protobuf::SetLogHandler(nullptr);
}

}  // namespace
}  // namespace server
}  // namespace cowkv
