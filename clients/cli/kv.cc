// `cowkv kv get|put|del|range|txn`: the key space of a subvolume (service KV).
//
//   cowkv kv get   [-s NAME] [--rev N] KEY  the value alone, raw bytes
//   cowkv kv put   [-s NAME] KEY [VALUE]    VALUE omitted: read from stdin
//   cowkv kv del   [-s NAME] KEY | --prefix P | --start A [--end B]
//   cowkv kv range [-s NAME] [--prefix P | --start A --end B] [--limit N]
//                  [--reverse] [--keys-only] [--count] [--snapshot SNAP]
//                  [--page-size N] [--rev N]
//   cowkv kv txn   [-s NAME] [SPEC_FILE | -]          (kv_txn.cc)
//   cowkv kv compact [-s NAME] REV          drop the history before REV
//   cowkv kv watch [-s NAME] [--prefix] [--rev N] [--prev-kv] KEY [RANGE_END]
//                                          (kv_watch.cc)
//
// --rev N reads as of revision N from the subvolume's history (every page
// of a range at N); a compacted N fails with the compact revision.
//
// -s/--subvolume defaults to "default". `get` writes the value exactly as
// stored, adding a newline only when stdout is a terminal. `range` pages
// through the whole range with the page token and prints KEY<TAB>VALUE per
// key (bytes escaped, output.h); --count prints the exact count.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cli/commands.h"
#include "clients/cli/kv_commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {

absl::StatusOr<v1::Durability> ParseDurability(absl::string_view text) {
  if (text.empty() || text == "default") return v1::DURABILITY_DEFAULT;
  if (text == "durable") return v1::DURABILITY_DURABLE;
  if (text == "async") return v1::DURABILITY_ASYNC;
  return absl::InvalidArgumentError(absl::StrCat(
      "durability '", text, "' is not one of default, durable, async"));
}

void AddDurabilityOption(CLI::App* cmd, std::string* durability) {
  cmd->add_option("--durability", *durability,
                  "When the server acknowledges: default, durable or async")
      ->check(CLI::IsMember({"default", "durable", "async"}));
}

namespace {

struct KvArgs {
  std::string subvolume = "default";
  std::string key;
  std::string value;
  bool key_given = false;    // kv del: KEY was given
  bool value_given = false;  // kv put: VALUE was given
  std::string durability;
  int64_t lease = 0;  // kv put --lease
  std::string prefix, start, end, snapshot;
  uint64_t limit = 0;
  uint64_t page_size = 0;  // 0 = the server's page limit
  bool reverse = false, keys_only = false, count = false;
  uint64_t rev = 0;  // --rev: read at this revision (0 = the latest)
};

int RunGet(const KvArgs& a, const Globals& g) {
  constexpr char kOp[] = "kv get";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::GetRequest req;
  req.set_subvolume(a.subvolume);
  req.set_key(a.key);
  req.set_revision(a.rev);
  v1::GetResponse resp;
  grpc::Status s = Call(*conn, conn->kv(), &v1::KV::Stub::Get, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (g.json) {
    Json j = JsonObject();
    j.update(KeyValueJson(resp.kv(), false));
    j["revision"] = resp.revision();
    return Emit(kOp, DumpJson(j));
  }
  const std::string& v = resp.kv().value();
  const bool newline = isatty(STDOUT_FILENO) && (v.empty() || v.back() != '\n');
  return Emit(kOp, newline ? v + "\n" : v);
}

int RunPut(const KvArgs& a, const Globals& g) {
  constexpr char kOp[] = "kv put";
  absl::StatusOr<v1::Durability> d = ParseDurability(a.durability);
  if (!d.ok()) return Fail(kOp, d.status().message(), kExitUsage);
  v1::PutRequest req;
  req.set_subvolume(a.subvolume);
  req.set_key(a.key);
  req.set_durability(*d);
  req.set_lease(a.lease);
  if (a.value_given) {
    req.set_value(a.value);
  } else {
    std::ostringstream in;
    in << std::cin.rdbuf();
    if (std::cin.bad()) return Fail(kOp, "error reading the value from stdin");
    req.set_value(in.str());
  }
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::PutResponse resp;
  grpc::Status s = Call(*conn, conn->kv(), &v1::KV::Stub::Put, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j["revision"] = resp.revision();
  return Emit(kOp, DumpJson(j));
}

int DeleteOne(Connection& conn, const KvArgs& a, v1::Durability d) {
  constexpr char kOp[] = "kv del";
  v1::DeleteRequest req;
  req.set_subvolume(a.subvolume);
  req.set_key(a.key);
  req.set_durability(d);
  v1::DeleteResponse resp;
  grpc::Status s = Call(conn, conn.kv(), &v1::KV::Stub::Delete, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, conn.globals());
  if (!conn.globals().json) return kExitOk;
  Json j = JsonObject();
  j["deleted"] = 1;
  j["revision"] = resp.revision();
  return Emit(kOp, DumpJson(j));
}

int DeleteRange(Connection& conn, const KvArgs& a, v1::Durability d) {
  constexpr char kOp[] = "kv del";
  v1::DeleteRangeRequest req;
  req.set_subvolume(a.subvolume);
  req.set_prefix(a.prefix);
  req.set_start(a.start);
  req.set_end(a.end);
  req.set_durability(d);
  v1::DeleteRangeResponse resp;
  grpc::Status s =
      Call(conn, conn.kv(), &v1::KV::Stub::DeleteRange, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, conn.globals());
  if (!conn.globals().json) return Emit(kOp, absl::StrCat(resp.deleted(), "\n"));
  Json j = JsonObject();
  j["deleted"] = resp.deleted();
  j["revision"] = resp.revision();
  return Emit(kOp, DumpJson(j));
}

int RunDel(const KvArgs& a, const Globals& g) {
  constexpr char kOp[] = "kv del";
  const bool range = !a.prefix.empty() || !a.start.empty() || !a.end.empty();
  if (range == a.key_given) {
    return Fail(kOp, "give either KEY or --prefix/--start/--end", kExitUsage);
  }
  absl::StatusOr<v1::Durability> d = ParseDurability(a.durability);
  if (!d.ok()) return Fail(kOp, d.status().message(), kExitUsage);
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  return range ? DeleteRange(*conn, a, *d) : DeleteOne(*conn, a, *d);
}

// Prints the keys of a range page by page: text lines, or one JSON object
// whose "kvs" array is written as the pages arrive.
class RangePrinter {
 public:
  RangePrinter(const KvArgs& a, bool json) : a_(a), json_(json) {}

  int Begin() {
    if (!json_) return kExitOk;
    return Emit("kv range", "{\n  \"__header\": {\"version\": \"1\"},\n  \"kvs\": [");
  }

  int Page(const v1::RangeResponse& page) {
    std::string out;
    for (const v1::KeyValue& kv : page.kvs()) {
      if (json_) {
        absl::StrAppend(&out, count_ == 0 ? "\n    " : ",\n    ",
                        KeyValueJson(kv, a_.keys_only)
                            .dump(-1, ' ', false, Json::error_handler_t::replace));
      } else if (a_.keys_only) {
        absl::StrAppend(&out, EscapeBytes(kv.key()), "\n");
      } else {
        absl::StrAppend(&out, EscapeBytes(kv.key()), "\t",
                        EscapeBytes(kv.value()), "\n");
      }
      ++count_;
    }
    revision_ = page.revision();
    return Emit("kv range", out);
  }

  int Finish() {
    if (!json_) return kExitOk;
    return Emit("kv range",
                absl::StrCat(count_ == 0 ? "],\n" : "\n  ],\n", "  \"count\": ",
                             count_, ",\n  \"revision\": ", revision_, "\n}\n"));
  }

 private:
  const KvArgs& a_;
  const bool json_;
  uint64_t count_ = 0;
  uint64_t revision_ = 0;
};

v1::RangeRequest RangeRequestFor(const KvArgs& a) {
  v1::RangeRequest req;
  req.set_subvolume(a.subvolume);
  req.set_prefix(a.prefix);
  req.set_start(a.start);
  req.set_end(a.end);
  req.set_reverse(a.reverse);
  req.set_keys_only(a.keys_only);
  req.set_count_only(a.count);
  req.set_snapshot(a.snapshot);
  req.set_revision(a.rev);
  return req;
}

int RunCount(Connection& conn, const KvArgs& a) {
  constexpr char kOp[] = "kv range";
  v1::RangeResponse resp;
  grpc::Status s = Call(conn, conn.kv(), &v1::KV::Stub::Range,
                        RangeRequestFor(a), &resp);
  if (!s.ok()) return RpcFail(kOp, s, conn.globals());
  if (!conn.globals().json) return Emit(kOp, absl::StrCat(resp.count(), "\n"));
  Json j = JsonObject();
  j["count"] = resp.count();
  j["revision"] = resp.revision();
  return Emit(kOp, DumpJson(j));
}

int RunRange(const KvArgs& a, const Globals& g) {
  constexpr char kOp[] = "kv range";
  const uint64_t page = a.page_size == 0 ? 10000 : a.page_size;  // server's limit
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  if (a.count) return RunCount(*conn, a);
  v1::RangeRequest req = RangeRequestFor(a);
  RangePrinter printer(a, g.json);
  if ((rc = printer.Begin()) != kExitOk) return rc;
  uint64_t got = 0;
  for (;;) {
    const uint64_t left = a.limit == 0 ? page : a.limit - got;
    req.set_limit(std::min(left, page));
    v1::RangeResponse page;
    grpc::Status s = Call(*conn, conn->kv(), &v1::KV::Stub::Range, req, &page);
    if (!s.ok()) return RpcFail(kOp, s, g);
    if ((rc = printer.Page(page)) != kExitOk) return rc;
    got += page.kvs_size();
    if (!page.more() || (a.limit != 0 && got >= a.limit)) break;
    req.set_page_token(page.next_page_token());
  }
  return printer.Finish();
}

void AddSubvolumeOption(CLI::App* cmd, KvArgs* a) {
  cmd->add_option("-s,--subvolume", a->subvolume,
                  "Subvolume (or snapshot) name")
      ->capture_default_str();
}

void AddRangeOptions(CLI::App* cmd, KvArgs* a) {
  cmd->add_option("--prefix", a->prefix, "Keys starting with this");
  cmd->add_option("--start", a->start, "First key (inclusive)");
  cmd->add_option("--end", a->end, "End key (exclusive)");
}

void AddRangeCommand(CommandGroup* group, const std::shared_ptr<KvArgs>& a,
                     const GlobalsPtr& g) {
  CLI::App* range = group->Add("range", "List keys (every page)",
                               [a, g] { return RunRange(*a, *g); });
  AddSubvolumeOption(range, a.get());
  AddRangeOptions(range, a.get());
  range->add_option("--limit", a->limit, "At most N keys (0 = all)");
  range->add_option("--page-size", a->page_size,
                    "Keys per call (0 = the server's limit, 10000)");
  range->add_flag("--reverse", a->reverse, "Largest keys first");
  range->add_flag("--keys-only", a->keys_only, "Print keys only");
  range->add_flag("--count", a->count, "Print only the number of keys");
  range->add_option("--snapshot", a->snapshot,
                    "Read this read-only snapshot of the subvolume instead");
  range->add_option("--rev", a->rev, "Read as of this revision, from the history (0 = the latest)");
}

int RunCompact(const KvArgs& a, const Globals& g) {
  constexpr char kOp[] = "kv compact";
  absl::StatusOr<v1::Durability> d = ParseDurability(a.durability);
  if (!d.ok()) return Fail(kOp, d.status().message(), kExitUsage);
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::CompactRequest req;
  req.set_subvolume(a.subvolume);
  req.set_revision(a.rev);
  req.set_durability(*d);
  v1::CompactResponse resp;
  grpc::Status s = Call(*conn, conn->kv(), &v1::KV::Stub::Compact, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json)
    return Emit(kOp, absl::StrCat("compacted to revision ", resp.compact_revision(), "\n"));
  Json j = JsonObject();
  j["compact_revision"] = resp.compact_revision();
  j["revision"] = resp.revision();
  return Emit(kOp, DumpJson(j));
}

}  // namespace

RunFn AddKv(CLI::App* app, const GlobalsPtr& g) {
  CommandGroup group(app, "kv",
                     "Read and write keys of a subvolume (online)");
  auto a = std::make_shared<KvArgs>();
  CLI::App* get = group.Add("get", "Print a key's value (raw bytes)",
                            [a, g] { return RunGet(*a, *g); });
  AddSubvolumeOption(get, a.get());
  get->add_option("KEY", a->key, "The key")->required();
  get->add_option("--rev", a->rev, "Read as of this revision, from the history (0 = the latest)");
  CLI::App* put = group.Add("put", "Write a key",
                            [a, g] { return RunPut(*a, *g); });
  AddSubvolumeOption(put, a.get());
  put->add_option("KEY", a->key, "The key")->required();
  put->add_option("VALUE", a->value, "The value (omitted: read stdin)")
      ->each([a](const std::string&) { a->value_given = true; });
  AddDurabilityOption(put, &a->durability);
  put->add_option("--lease", a->lease, "Attach the key to this lease (cowkv lease grant)");
  CLI::App* del = group.Add("del", "Delete a key, or a range of keys",
                            [a, g] { return RunDel(*a, *g); });
  AddSubvolumeOption(del, a.get());
  del->add_option("KEY", a->key, "The key")
      ->each([a](const std::string&) { a->key_given = true; });
  AddRangeOptions(del, a.get());
  AddDurabilityOption(del, &a->durability);
  AddRangeCommand(&group, a, g);
  AddKvTxn(&group, g);
  CLI::App* compact = group.Add("compact", "Drop the subvolume's history before a revision",
                                [a, g] { return RunCompact(*a, *g); });
  AddSubvolumeOption(compact, a.get());
  compact->add_option("REV", a->rev, "The oldest revision to keep readable")->required();
  AddDurabilityOption(compact, &a->durability);
  AddKvWatch(&group, g);
  return group.Runner();
}

}  // namespace cli
}  // namespace cowkv
