// Tokens, roles and subvolume lists; see auth.h.
#include "server/auth.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cowkv {
namespace server {
namespace {

constexpr size_t kMinTokenBytes = 16;

// Every cowkv.v1 method that a read or write token may call. Anything not
// here needs admin (server_test checks that every method is classified on
// purpose: each one is here or in kAdminMethods).
struct MethodAccessRow {
  const char* method;
  Access access;
};
constexpr MethodAccessRow kMethodAccess[] = {
    // KV. Txn is classified by its ops in the handler (a Txn with a put
    // or delete needs write); here it is the least it needs.
    {"cowkv.v1.KV/Get", Access::kRead},
    {"cowkv.v1.KV/Range", Access::kRead},
    {"cowkv.v1.KV/Put", Access::kWrite},
    {"cowkv.v1.KV/Delete", Access::kWrite},
    {"cowkv.v1.KV/DeleteRange", Access::kWrite},
    {"cowkv.v1.KV/Txn", Access::kRead},
    {"cowkv.v1.KV/Begin", Access::kRead},
    {"cowkv.v1.KV/TxnGet", Access::kRead},
    {"cowkv.v1.KV/TxnRange", Access::kRead},
    {"cowkv.v1.KV/TxnPut", Access::kWrite},
    {"cowkv.v1.KV/TxnDelete", Access::kWrite},
    {"cowkv.v1.KV/Commit", Access::kRead},  // its writes were checked as they were made
    {"cowkv.v1.KV/Abort", Access::kRead},
    {"cowkv.v1.KV/Compact", Access::kWrite},  // drops history readers may want: a write
    {"cowkv.v1.KV/Watch", Access::kRead},
    // Files.
    {"cowkv.v1.Files/Stat", Access::kRead},
    {"cowkv.v1.Files/ReadDir", Access::kRead},
    {"cowkv.v1.Files/Read", Access::kRead},
    {"cowkv.v1.Files/ReadLink", Access::kRead},
    {"cowkv.v1.Files/Fiemap", Access::kRead},
    {"cowkv.v1.Files/Mkdir", Access::kWrite},
    {"cowkv.v1.Files/Create", Access::kWrite},
    {"cowkv.v1.Files/Write", Access::kWrite},
    {"cowkv.v1.Files/Truncate", Access::kWrite},
    {"cowkv.v1.Files/Rename", Access::kWrite},
    {"cowkv.v1.Files/Link", Access::kWrite},
    {"cowkv.v1.Files/Symlink", Access::kWrite},
    {"cowkv.v1.Files/Unlink", Access::kWrite},
    {"cowkv.v1.Files/Rmdir", Access::kWrite},
    {"cowkv.v1.Files/Clone", Access::kWrite},
    {"cowkv.v1.Files/Fsync", Access::kWrite},
    {"cowkv.v1.Files/Fallocate", Access::kWrite},
    // Open files: opening reads (a handle keeps an unlinked file, as any
    // reader's open does); an O_TMPFILE writes.
    {"cowkv.v1.Files/Open", Access::kRead},
    {"cowkv.v1.Files/CloseHandle", Access::kRead},
    {"cowkv.v1.Files/CreateTmpfile", Access::kWrite},
    {"cowkv.v1.Files/SetAttr", Access::kWrite},
    {"cowkv.v1.Files/SetXattr", Access::kWrite},
    {"cowkv.v1.Files/GetXattr", Access::kRead},
    {"cowkv.v1.Files/ListXattrs", Access::kRead},
    {"cowkv.v1.Files/RemoveXattr", Access::kWrite},
    // Subvolumes: reading the list; changing it is admin.
    {"cowkv.v1.Subvolumes/List", Access::kRead},
    {"cowkv.v1.Subvolumes/Show", Access::kRead},
    {"cowkv.v1.Subvolumes/Create", Access::kAdmin},
    {"cowkv.v1.Subvolumes/Rename", Access::kAdmin},
    {"cowkv.v1.Subvolumes/Delete", Access::kAdmin},
    {"cowkv.v1.Subvolumes/Snapshot", Access::kAdmin},
    // Waiting for deleted subvolumes' space commits, as Admin/Sync does.
    {"cowkv.v1.Subvolumes/Sync", Access::kWrite},
    // Send reads a whole snapshot (and its parent); Receive, which makes a
    // subvolume, is admin.
    {"cowkv.v1.Subvolumes/Send", Access::kRead},
    {"cowkv.v1.Subvolumes/Digest", Access::kRead},
    // Listing partial receives shows names and resume tokens (positions in
    // a stream, no data); dropping one (AbortReceive) is admin.
    {"cowkv.v1.Subvolumes/PartialReceives", Access::kRead},
    // Admin. Check reads the whole device: an operator's tool.
    {"cowkv.v1.Admin/Stats", Access::kRead},
    {"cowkv.v1.Admin/Version", Access::kRead},
    {"cowkv.v1.Admin/Sync", Access::kWrite},
    {"cowkv.v1.Admin/Check", Access::kAdmin},
    // Leases: a grant, revoke or keep-alive changes what the keys do.
    {"cowkv.v1.Lease/Grant", Access::kWrite},
    {"cowkv.v1.Lease/Revoke", Access::kWrite},
    {"cowkv.v1.Lease/KeepAlive", Access::kWrite},
    {"cowkv.v1.Lease/TimeToLive", Access::kRead},
    {"cowkv.v1.Lease/Leases", Access::kRead},
};

const absl::flat_hash_map<std::string, Access>& MethodTable() {
  static const auto* table = [] {
    auto* t = new absl::flat_hash_map<std::string, Access>;
    for (const MethodAccessRow& r : kMethodAccess) t->emplace(r.method, r.access);
    return t;
  }();
  return *table;
}

absl::StatusOr<Role> ParseRole(absl::string_view text) {
  if (text == "read") return Role::kRead;
  if (text == "write") return Role::kWrite;
  if (text == "admin") return Role::kAdmin;
  return absl::InvalidArgumentError(absl::StrCat("role '", text, "': read, write or admin"));
}

// Compares in time independent of where the strings differ.
bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Access MethodAccess(absl::string_view method) {
  const auto& table = MethodTable();
  auto it = table.find(method);
  return it == table.end() ? Access::kAdmin : it->second;
}

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kWrite:
      return "write";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

bool Principal::MaySee(absl::string_view name) const {
  if (subvolumes.empty()) return true;
  if (name.empty()) name = "default";
  for (const std::string& s : subvolumes) {
    if (absl::EndsWith(s, "*")
            ? absl::StartsWith(name, absl::string_view(s).substr(0, s.size() - 1))
            : name == s) {
      return true;
    }
  }
  return false;
}

std::string Principal::Describe() const {
  return absl::StrCat(RoleName(role), " on ",
                      subvolumes.empty() ? "every subvolume" : absl::StrJoin(subvolumes, ","));
}

TokenTable TokenTable::SingleAdmin(std::string token) {
  TokenTable t;
  if (!token.empty()) t.entries_.push_back({std::move(token), Principal{}});
  return t;
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text) {
  TokenTable t;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    auto fail = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", why));
    };
    if (words.size() > 3) return fail("expected: TOKEN ROLE [SUBVOLUME,...]");
    Entry e;
    e.token = std::string(words[0]);
    // A bare token (the older one-token file) may be shorter.
    if (words.size() > 1 && e.token.size() < kMinTokenBytes) {
      return fail(absl::StrCat("a token is at least ", kMinTokenBytes, " bytes"));
    }
    if (words.size() >= 2) {
      absl::StatusOr<Role> role = ParseRole(words[1]);
      if (!role.ok()) return fail(role.status().message());
      e.principal.role = *role;
    }
    if (words.size() == 3) {
      for (absl::string_view s : absl::StrSplit(words[2], ',', absl::SkipEmpty())) {
        e.principal.subvolumes.emplace_back(s);
      }
      if (e.principal.subvolumes.empty()) return fail("an empty subvolume list");
    }
    for (const Entry& other : t.entries_) {
      if (other.token == e.token) return fail("the same token twice");
    }
    t.entries_.push_back(std::move(e));
  }
  if (t.entries_.empty()) return absl::InvalidArgumentError("no token in the file");
  return t;
}

const Principal* TokenTable::Find(absl::string_view token) const {
  const Principal* found = nullptr;
  for (const Entry& e : entries_) {
    if (ConstantTimeEqual(token, e.token)) found = &e.principal;
  }
  return found;
}

grpc::Status TokenAuthProcessor::Process(const InputMetadata& auth_metadata,
                                         grpc::AuthContext* /*context*/,
                                         OutputMetadata* /*consumed_auth_metadata*/,
                                         OutputMetadata* /*response_metadata*/) {
  auto path = auth_metadata.find(":path");
  if (path != auth_metadata.end() &&
      absl::StartsWith(absl::string_view(path->second.data(), path->second.size()), "/grpc.")) {
    return grpc::Status::OK;  // health and reflection need no token
  }
  auto auth = auth_metadata.find("authorization");
  if (auth != auth_metadata.end()) {
    absl::string_view value(auth->second.data(), auth->second.size());
    if (absl::ConsumePrefix(&value, "Bearer ") && tokens_->Find(value) != nullptr) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong bearer token (send metadata 'authorization: Bearer "
                      "<token>')");
}

}  // namespace server
}  // namespace cowkv
