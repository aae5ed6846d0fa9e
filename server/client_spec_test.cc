// The clients' spec (clients/spec/limits.json, errors.json) against the
// server: every limit a client checks equals the server's constant, every
// reason the engine or the server can emit is in the spec with the same
// errno and gRPC code, and the code -> errno fallback is the spec's. A
// change on either side without the other fails here (then edit the spec
// and run python3 tools/gen_client_spec.py).
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "cowkv/errors.h"
#include "cowkv/store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/limits.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json Spec(const std::string& name) {
  const std::string path = "clients/spec/" + name + ".json";
  json j = json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << path << " is not JSON";
  EXPECT_EQ(j.value("format", 0), 1) << path;
  return j;
}

// The server's side of every limit in limits.json.
std::map<std::string, int64_t> ServerLimits() {
  return {
      {"max_key_bytes", kMaxKeySize},
      {"max_value_bytes", kMaxValueSize},
      {"max_bound_bytes", kMaxKeySize + 1},  // server/validate.cc: one past the largest key
      {"max_name_bytes", kMaxNameLen},
      {"max_path_bytes", kMaxPathLen},
      {"max_path_depth", kMaxPathDepth},
      {"max_symlink_bytes", kMaxSymlinkLen},
      {"max_write_chunk_bytes", kMaxWriteChunkBytes},
      {"max_txn_ops", kMaxTxnOps},
      {"max_lease_ms", kMaxLeaseMs},
      {"max_lease_ttl_seconds", kMaxLeaseTtlSeconds},
  };
}

TEST(ClientSpec, LimitsAreTheServers) {
  std::map<std::string, int64_t> server = ServerLimits();
  const json spec = Spec("limits");
  for (const json& l : spec["limits"]) {
    const std::string name = l["name"];
    auto it = server.find(name);
    ASSERT_NE(it, server.end()) << "limits.json has " << name << ", the server no such limit";
    EXPECT_EQ(l["value"].get<int64_t>(), it->second) << name << ": spec vs server/limits.h";
    server.erase(it);
  }
  for (const auto& [name, value] : server) ADD_FAILURE() << name << " is missing from limits.json";
}

// reason -> the spec's row.
std::map<std::string, json> SpecReasons() {
  std::map<std::string, json> out;
  const json spec = Spec("errors");  // outlives the loop
  for (const json& r : spec["reasons"]) out[r["reason"]] = r;
  return out;
}

std::string CodeName(int code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

bool HasCode(const json& row, const std::string& code) {
  for (const json& c : row["codes"]) {
    if (c == code) return true;
  }
  return false;
}

// What the server sends for `status`: ErrorInfo reason and gRPC code, and
// for a Files call the errno, must be a row of the spec.
void ExpectInSpec(const std::map<std::string, json>& spec, const absl::Status& status,
                  const std::string& what) {
  const grpc::Status g = ToGrpcStatus(status);
  const ErrorInfoFields info = ErrorInfoOf(g);
  auto it = spec.find(info.reason);
  ASSERT_NE(it, spec.end()) << what << ": reason " << info.reason << " is not in errors.json";
  EXPECT_TRUE(HasCode(it->second, CodeName(g.error_code())))
      << what << ": reason " << info.reason << " with code " << CodeName(g.error_code())
      << ", not one of errors.json's " << it->second["codes"].dump();
}

TEST(ClientSpec, EveryEngineReasonWithItsErrnoAndCode) {
  const std::map<std::string, json> spec = SpecReasons();
  std::set<std::string> engine;
  for (int i = 1; i < kErrorReasonCount; ++i) {
    const auto reason = static_cast<ErrorReason>(i);
    const std::string name(ReasonName(reason));
    engine.insert(name);
    auto it = spec.find(name);
    ASSERT_NE(it, spec.end()) << "the engine's reason " << name << " is not in errors.json";
    const json& row = it->second;
    EXPECT_EQ(row["source"], "engine") << name;
    EXPECT_EQ(row["errno"], std::string(ReasonPosixName(reason))) << name << ": errno";
    for (const json& code : row["codes"]) {
      absl::StatusCode c = absl::StatusCode::kUnknown;
      for (int k = 1; k <= 16; ++k) {
        if (CodeName(k) == code) c = static_cast<absl::StatusCode>(k);
      }
      const grpc::Status g = ToGrpcFileStatus(WithReason(absl::Status(c, "x"), reason));
      EXPECT_EQ(ErrorInfoOf(g).reason, name);
      EXPECT_EQ(ErrorInfoOf(g).errno_name, std::string(row["errno"])) << name << " " << code;
    }
    if (name[0] == 'E') {  // a POSIX reason: PosixError decides its code
      ExpectInSpec(spec, PosixError(reason, "x"), "PosixError(" + name + ")");
      EXPECT_EQ(row["codes"][0], CodeName(PosixError(reason, "x").raw_code())) << name;
    }
  }
  for (const auto& [name, row] : spec) {
    if (row["source"] == "engine") EXPECT_TRUE(engine.count(name)) << name << ": not the engine's";
  }
}

TEST(ClientSpec, CodesTheirClassAndErrno) {
  const std::map<std::string, json> spec = SpecReasons();
  const json errors = Spec("errors");  // outlives the loop
  for (const json& c : errors["codes"]) {
    const auto code = static_cast<absl::StatusCode>(c["number"].get<int>());
    EXPECT_EQ(CodeName(c["number"].get<int>()), c["name"]);
    EXPECT_EQ(std::string(PosixNameFor(absl::Status(code, "x"))), c["errno"]) << c["name"];
    // A status without a reason: the code's name (UNAVAILABLE: DEVICE_UNAVAILABLE).
    ExpectInSpec(spec, absl::Status(code, "x"), "a bare " + std::string(c["name"]));
  }
}

TEST(ClientSpec, StatusMappingsOwnReasons) {
  const std::map<std::string, json> spec = SpecReasons();
  for (const grpc::Status& g :
       {StoppingStatus(), UnauthenticatedStatus("no token"),
        UnparsableRequestStatus("/cowkv.v1.KV/Get", "cowkv.v1.GetRequest", "")}) {
    const std::string reason = ErrorInfoOf(g).reason;
    auto it = spec.find(reason);
    ASSERT_NE(it, spec.end()) << reason << " is not in errors.json";
    EXPECT_TRUE(HasCode(it->second, CodeName(g.error_code()))) << reason;
  }
}

// "ResourceExhausted" -> "RESOURCE_EXHAUSTED".
std::string UpperSnake(const std::string& camel) {
  std::string out;
  for (char ch : camel) {
    if (std::isupper(static_cast<unsigned char>(ch)) && !out.empty()) out += '_';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return out;
}

// Every WithServerReason(absl::XError(...), "REASON") call in `text`:
// {reason, code name or "" when the call's status is not built in it}.
std::vector<std::pair<std::string, std::string>> ServerReasonCalls(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  static const std::regex kLiteral("\"([A-Z][A-Z0-9_]*)\"");
  static const std::regex kCtor("absl::([A-Za-z]+)Error\\(");
  for (size_t at = text.find("WithServerReason("); at != std::string::npos;
       at = text.find("WithServerReason(", at + 1)) {
    size_t i = at + std::string("WithServerReason(").size();
    int depth = 1;
    for (; i < text.size() && depth > 0; ++i) depth += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
    const std::string call = text.substr(at, i - at);
    if (absl::StrContains(call, "absl::string_view reason")) continue;  // its declaration
    std::string reason, code;
    for (std::sregex_iterator m(call.begin(), call.end(), kLiteral), end; m != end; ++m) {
      reason = (*m)[1];
    }
    std::smatch ctor;
    if (std::regex_search(call, ctor, kCtor)) code = UpperSnake(ctor[1]);
    out.push_back({reason, code});
  }
  return out;
}

TEST(ClientSpec, EveryServerReasonWithItsCode) {
  const std::map<std::string, json> spec = SpecReasons();
  int calls = 0;
  for (const auto& entry : std::filesystem::directory_iterator("server")) {
    const std::string path = entry.path().string();
    if (!absl::EndsWith(path, ".cc") || absl::EndsWith(path, "_test.cc")) continue;
    for (const auto& [reason, code] : ServerReasonCalls(ReadFile(path))) {
      ++calls;
      auto it = spec.find(reason);
      ASSERT_NE(it, spec.end()) << path << ": reason \"" << reason << "\" is not in errors.json";
      if (!code.empty()) {
        EXPECT_TRUE(HasCode(it->second, code)) << path << ": " << reason << " with " << code;
      }
    }
  }
  EXPECT_GE(calls, 10) << "the scan found too few WithServerReason calls";
}

}  // namespace
}  // namespace server
}  // namespace cowkv
