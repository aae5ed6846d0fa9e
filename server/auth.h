// Who may call what: bearer tokens with a role and an optional list of
// subvolumes (etcd has users and roles per key range; this is the same idea
// per subvolume), read from --auth-token-file:
//
//   # token                          role   subvolumes (optional)
//   9f1c2a4e7b...                    admin
//   reader-3e8a...                   read
//   app-77d0...                      write  app,app-logs,app-snap-*
//
// One entry per line: the token (at least 16 bytes, no spaces), a role, and
// an optional comma-separated list of subvolume names, each exact or a
// prefix ending in `*` ("" = the `default` subvolume). No list = every
// subvolume. A file holding one bare token (the older form) is that token
// as admin. '#' starts a comment.
//
// Roles, each including the one before:
//   read   Get, Range, Stat, ReadDir, Read, ReadLink, Fiemap, the reading
//          side of interactive transactions, a Txn without writes,
//          Subvolumes.List/Show, Admin.Stats/Version/Check.
//   write  every change of keys and files in its subvolumes, Fsync,
//          Admin.Sync.
//   admin  Subvolumes.Create/Rename/Delete/Snapshot, on every subvolume.
//
// A call outside its role or its subvolumes is PERMISSION_DENIED (reason
// PERMISSION_DENIED); a missing or unknown token UNAUTHENTICATED.
// Thread-safe after construction (immutable).
#ifndef COWKV_SERVER_AUTH_H_
#define COWKV_SERVER_AUTH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/auth_metadata_processor.h"

namespace cowkv {
namespace server {

enum class Role { kRead = 0, kWrite = 1, kAdmin = 2 };

// What a method needs. kRead < kWrite < kAdmin, compared with Role.
enum class Access { kRead = 0, kWrite = 1, kAdmin = 2 };

// The access a cowkv.v1 method ("cowkv.v1.KV/Put") needs; kAdmin for a
// name it does not know (a new method must be classified to be usable by
// read and write tokens).
Access MethodAccess(absl::string_view method);

absl::string_view RoleName(Role role);

struct Principal {
  Role role = Role::kAdmin;
  // Empty = every subvolume. Exact names, or prefixes ending in '*'.
  std::vector<std::string> subvolumes;

  bool Allows(Access access) const { return static_cast<int>(role) >= static_cast<int>(access); }
  // `name` "" means "default".
  bool MaySee(absl::string_view name) const;
  // A short description for logs and errors ("read on app,app-logs").
  std::string Describe() const;
};

class TokenTable {
 public:
  // No tokens: authentication off.
  TokenTable() = default;
  // One admin token on every subvolume (ServerOptions::auth_token).
  static TokenTable SingleAdmin(std::string token);
  // The --auth-token-file text; errors name the line.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text);

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  // The principal of `token`, or nullptr. Compares every entry in time
  // independent of where the tokens differ.
  const Principal* Find(absl::string_view token) const;

 private:
  struct Entry {
    std::string token;
    Principal principal;
  };
  std::vector<Entry> entries_;
};

// With TLS, gRPC runs this on each call's metadata before the call reaches
// the server (and so before its request is parsed): a cowkv.v1 call without
// a known token is refused there, UNAUTHENTICATED. Health and reflection
// (/grpc.*) pass. ServiceEnv::Run checks again (it also serves plaintext
// listeners, where gRPC has no such hook) and applies the role.
class TokenAuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  // `tokens` must outlive the gRPC server.
  explicit TokenAuthProcessor(const TokenTable* tokens) : tokens_(tokens) {}
  bool IsBlocking() const override { return false; }  // a table lookup
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const TokenTable* const tokens_;
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_AUTH_H_
