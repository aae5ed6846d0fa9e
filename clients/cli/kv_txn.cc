// `cowkv kv txn [-s NAME] [--durability D] [SPEC_FILE | -]`: one etcd-style
// Txn from a JSON spec read from SPEC_FILE or stdin (docs/cli.md):
//
//   {"compare": [{"key": "owner", "target": "value", "op": "=", "value": "alice"},
//                {"key": "lock", "target": "exists", "op": "=", "exists": false}],
//    "success": [{"put": {"key": "lock", "value": "alice"}}],
//    "failure": [{"range": {"prefix": "lock"}}],
//    "durability": "durable"}
//
// Bytes (keys, values, bounds) are strings or {"base64": "..."}. A compare
// that does not hold is not an error: the output says FAILURE (or
// "succeeded": false) and the exit code is 0, as etcdctl's.
#include <fstream>
#include <map>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cli/kv_commands.h"
#include "clients/cli/online.h"

namespace cowkv {
namespace cli {
namespace {

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::Status CheckFields(const Json& j, absl::string_view where,
                         const std::set<std::string>& allowed) {
  if (!j.is_object()) return Invalid(where, "want an object");
  for (const auto& item : j.items()) {
    if (allowed.count(item.key()) == 0) {
      return Invalid(where, absl::StrCat("unknown field '", item.key(), "'"));
    }
  }
  return absl::OkStatus();
}

// An optional bytes field ("" when absent).
absl::Status GetBytes(const Json& j, const char* field, absl::string_view where,
                      std::string* out) {
  if (!j.contains(field)) return absl::OkStatus();
  absl::StatusOr<std::string> b =
      BytesFromJson(j[field], absl::StrCat(where, ".", field));
  if (!b.ok()) return b.status();
  *out = std::move(*b);
  return absl::OkStatus();
}

absl::Status GetNumber(const Json& j, const char* field, absl::string_view where,
                       uint64_t* out) {
  if (!j.contains(field)) return absl::OkStatus();
  if (!j[field].is_number_unsigned() && !j[field].is_number_integer()) {
    return Invalid(absl::StrCat(where, ".", field), "want an integer");
  }
  if (j[field].is_number_integer() && j[field].get<int64_t>() < 0) {
    return Invalid(absl::StrCat(where, ".", field), "must not be negative");
  }
  *out = j[field].get<uint64_t>();
  return absl::OkStatus();
}

absl::Status GetBool(const Json& j, const char* field, absl::string_view where,
                     bool* out) {
  if (!j.contains(field)) return absl::OkStatus();
  if (!j[field].is_boolean()) {
    return Invalid(absl::StrCat(where, ".", field), "want true or false");
  }
  *out = j[field].get<bool>();
  return absl::OkStatus();
}

absl::Status ParseTarget(const Json& j, const std::string& where,
                         v1::Compare* c) {
  static const std::map<std::string, v1::Compare::Target> kTargets = {
      {"value", v1::Compare::TARGET_VALUE},
      {"version", v1::Compare::TARGET_VERSION},
      {"create_revision", v1::Compare::TARGET_CREATE_REVISION},
      {"mod_revision", v1::Compare::TARGET_MOD_REVISION},
      {"exists", v1::Compare::TARGET_EXISTS}};
  static const std::map<std::string, v1::Compare::Op> kOps = {
      {"=", v1::Compare::OP_EQUAL},   {"==", v1::Compare::OP_EQUAL},
      {"!=", v1::Compare::OP_NOT_EQUAL}, {"<", v1::Compare::OP_LESS},
      {">", v1::Compare::OP_GREATER}};
  if ((j.contains("target") && !j["target"].is_string()) ||
      (j.contains("op") && !j["op"].is_string())) {
    return Invalid(where, "\"target\" and \"op\" are strings");
  }
  const std::string target = j.value("target", std::string("value"));
  const std::string op = j.value("op", std::string("="));
  if (kTargets.count(target) == 0) {
    return Invalid(where + ".target", "want value, version, create_revision, "
                                      "mod_revision or exists");
  }
  if (kOps.count(op) == 0) return Invalid(where + ".op", "want =, !=, < or >");
  c->set_target(kTargets.at(target));
  c->set_op(kOps.at(op));
  return absl::OkStatus();
}

absl::Status ParseCompare(const Json& j, const std::string& where,
                          v1::Compare* c) {
  absl::Status s = CheckFields(
      j, where, {"key", "target", "op", "value", "number", "exists"});
  if (s.ok() && !j.contains("key")) s = Invalid(where, "a compare needs a \"key\"");
  if (s.ok()) s = ParseTarget(j, where, c);
  if (s.ok()) s = GetBytes(j, "key", where, c->mutable_key());
  if (s.ok()) s = GetBytes(j, "value", where, c->mutable_value());
  uint64_t number = 0;
  bool exists = false;
  if (s.ok()) s = GetNumber(j, "number", where, &number);
  if (s.ok()) s = GetBool(j, "exists", where, &exists);
  c->set_number(number);
  c->set_exists(exists);
  return s;
}

absl::Status ParseRangeOp(const Json& j, const std::string& where,
                          v1::RangeOp* r) {
  absl::Status s = CheckFields(j, where,
                               {"start", "end", "prefix", "limit", "reverse",
                                "keys_only", "count_only"});
  if (s.ok()) s = GetBytes(j, "start", where, r->mutable_start());
  if (s.ok()) s = GetBytes(j, "end", where, r->mutable_end());
  if (s.ok()) s = GetBytes(j, "prefix", where, r->mutable_prefix());
  uint64_t limit = 0;
  bool reverse = false, keys_only = false, count_only = false;
  if (s.ok()) s = GetNumber(j, "limit", where, &limit);
  if (s.ok()) s = GetBool(j, "reverse", where, &reverse);
  if (s.ok()) s = GetBool(j, "keys_only", where, &keys_only);
  if (s.ok()) s = GetBool(j, "count_only", where, &count_only);
  r->set_limit(limit);
  r->set_reverse(reverse);
  r->set_keys_only(keys_only);
  r->set_count_only(count_only);
  return s;
}

absl::Status ParseOp(const Json& j, const std::string& where,
                     v1::RequestOp* op) {
  if (!j.is_object() || j.size() != 1) {
    return Invalid(where, "want one of {\"put\": ...}, {\"delete\": ...}, "
                          "{\"delete_range\": ...}, {\"range\": ...}");
  }
  const std::string kind = j.begin().key();
  const Json& body = j.begin().value();
  const std::string at = absl::StrCat(where, ".", kind);
  absl::Status s;
  if (kind == "put") {
    s = CheckFields(body, at, {"key", "value"});
    if (s.ok()) s = GetBytes(body, "key", at, op->mutable_put()->mutable_key());
    if (s.ok()) s = GetBytes(body, "value", at, op->mutable_put()->mutable_value());
  } else if (kind == "delete") {
    s = CheckFields(body, at, {"key"});
    if (s.ok()) s = GetBytes(body, "key", at, op->mutable_delete_()->mutable_key());
  } else if (kind == "delete_range") {
    v1::DeleteRangeOp* d = op->mutable_delete_range();
    s = CheckFields(body, at, {"start", "end"});
    if (s.ok()) s = GetBytes(body, "start", at, d->mutable_start());
    if (s.ok()) s = GetBytes(body, "end", at, d->mutable_end());
  } else if (kind == "range") {
    s = ParseRangeOp(body, at, op->mutable_range());
  } else {
    s = Invalid(where, absl::StrCat("unknown op '", kind, "'"));
  }
  return s;
}

template <typename Item, typename Parse>
absl::Status ParseList(const Json& spec, const char* field,
                       google::protobuf::RepeatedPtrField<Item>* out,
                       Parse parse) {
  if (!spec.contains(field)) return absl::OkStatus();
  if (!spec[field].is_array()) return Invalid(field, "want an array");
  for (size_t i = 0; i < spec[field].size(); ++i) {
    absl::Status s =
        parse(spec[field][i], absl::StrCat(field, "[", i, "]"), out->Add());
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseTxnSpec(absl::string_view text, v1::TxnRequest* req) {
  Json spec = Json::parse(text.begin(), text.end(), nullptr, false);
  if (spec.is_discarded()) return Invalid("spec", "not valid JSON");
  absl::Status s = CheckFields(spec, "spec",
                               {"compare", "success", "failure", "durability"});
  if (s.ok()) s = ParseList(spec, "compare", req->mutable_compare(), ParseCompare);
  if (s.ok()) s = ParseList(spec, "success", req->mutable_success(), ParseOp);
  if (s.ok()) s = ParseList(spec, "failure", req->mutable_failure(), ParseOp);
  if (s.ok() && spec.contains("durability")) {
    if (!spec["durability"].is_string()) {
      return Invalid("durability", "want default, durable or async");
    }
    absl::StatusOr<v1::Durability> d =
        ParseDurability(spec["durability"].get<std::string>());
    if (!d.ok()) return d.status();
    req->set_durability(*d);
  }
  return s;
}

namespace {

Json RangeJson(const v1::RangeResponse& r) {
  Json j = Json::object();
  j["kvs"] = Json::array();
  for (const v1::KeyValue& kv : r.kvs()) {
    j["kvs"].push_back(KeyValueJson(kv, false));
  }
  j["count"] = r.count();
  j["more"] = r.more();
  return j;
}

}  // namespace

Json TxnResponseJson(const v1::TxnResponse& r) {
  Json j = JsonObject();
  j["succeeded"] = r.succeeded();
  j["revision"] = r.revision();
  j["responses"] = Json::array();
  for (const v1::ResponseOp& op : r.responses()) {
    Json one = Json::object();
    if (op.has_delete_()) {
      one["delete"] = {{"deleted", op.delete_().deleted()}};
    } else if (op.has_range()) {
      one["range"] = RangeJson(op.range());
    } else {
      one["put"] = Json::object();
    }
    j["responses"].push_back(one);
  }
  return j;
}

std::string TxnResponseText(const v1::TxnResponse& r) {
  std::string out = absl::StrCat(r.succeeded() ? "SUCCESS" : "FAILURE",
                                 "\nrevision: ", r.revision(), "\n");
  for (int i = 0; i < r.responses_size(); ++i) {
    const v1::ResponseOp& op = r.responses(i);
    if (op.has_delete_()) {
      absl::StrAppend(&out, "[", i, "] delete: ", op.delete_().deleted(),
                      " deleted\n");
    } else if (op.has_range()) {
      absl::StrAppend(&out, "[", i, "] range: ", op.range().kvs_size(),
                      op.range().kvs_size() == 1 ? " key" : " keys",
                      op.range().more() ? " (more follow)\n" : "\n");
      for (const v1::KeyValue& kv : op.range().kvs()) {
        absl::StrAppend(&out, EscapeBytes(kv.key()), "\t",
                        EscapeBytes(kv.value()), "\n");
      }
    } else {
      absl::StrAppend(&out, "[", i, "] put\n");
    }
  }
  return out;
}

namespace {

struct TxnArgs {
  std::string subvolume = "default";
  std::string spec_file = "-";
  std::string durability;
};

absl::StatusOr<std::string> ReadSpec(const std::string& path) {
  std::ostringstream buf;
  if (path == "-") {
    buf << std::cin.rdbuf();
    return buf.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read spec file ", path));
  }
  buf << in.rdbuf();
  return buf.str();
}

int RunTxn(const TxnArgs& a, const Globals& g) {
  constexpr char kOp[] = "kv txn";
  absl::StatusOr<std::string> text = ReadSpec(a.spec_file);
  if (!text.ok()) return Fail(kOp, text.status().message());
  v1::TxnRequest req;
  absl::Status s = ParseTxnSpec(*text, &req);
  if (!s.ok()) return Fail(kOp, s.message(), kExitInvalidArgument);
  req.set_subvolume(a.subvolume);
  if (!a.durability.empty()) req.set_durability(*ParseDurability(a.durability));
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::TxnResponse resp;
  grpc::Status st = Call(*conn, conn->kv(), &v1::KV::Stub::Txn, req, &resp);
  if (!st.ok()) return RpcFail(kOp, st, g);
  return Emit(kOp, g.json ? DumpJson(TxnResponseJson(resp))
                          : TxnResponseText(resp));
}

}  // namespace

void AddKvTxn(CommandGroup* group, const GlobalsPtr& g) {
  auto a = std::make_shared<TxnArgs>();
  CLI::App* txn = group->Add(
      "txn", "Run a compare/then/else transaction from a JSON spec",
      [a, g] { return RunTxn(*a, *g); });
  txn->add_option("-s,--subvolume", a->subvolume, "Subvolume name")
      ->capture_default_str();
  txn->add_option("SPEC_FILE", a->spec_file,
                  "JSON spec file; - or omitted = stdin (docs/cli.md)");
  AddDurabilityOption(txn, &a->durability);
}

}  // namespace cli
}  // namespace cowkv
