// The one place that turns an absl::Status (from the engine or from the
// server's own input checks) into the grpc::Status a client sees (STYLE.md
// point 20; etcd's togRPCError). No other server file builds a grpc::Status
// from an error.
//
// The numeric values of absl::StatusCode and grpc::StatusCode are the same
// (static_asserts in the .cc), so most codes pass through with their message.
// Two rules change them:
//  1. UNAVAILABLE means "the server is stopping: retry the call" and nothing
//     else. The engine reports a dead device as UNAVAILABLE (FaultDevice);
//     that becomes INTERNAL ("device unavailable: ..."), because retrying the
//     call cannot help.
//  2. For Files RPCs the message starts with a POSIX error name ("ENOENT:
//     ..."). Engine fs errors already do; any other (a subvolume lookup, a
//     server limit) gets the name that matches its code.
//
//  3. Every error carries google.rpc.ErrorInfo in its status details:
//     domain "cowkv.dev", reason the class the engine (engine/include/cowkv/errors.h)
//     or the server (WithServerReason) set — "ENOENT", "READ_ONLY_SNAPSHOT",
//     "CONFLICT", "TOO_OLD", "LIMIT", ... — or else the code's name
//     ("NOT_FOUND"); for Files, metadata["errno"] is the POSIX name the
//     message starts with. Programs read the reason, never the message.
//
// docs/api.md has the table for users. Thread-safe (pure functions).
#ifndef COWKV_SERVER_STATUS_MAPPING_H_
#define COWKV_SERVER_STATUS_MAPPING_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace cowkv {
namespace server {

// ErrorInfo.domain of every cowkv error.
inline constexpr absl::string_view kErrorDomain = "cowkv.dev";

// `status` with a server-decided ErrorInfo reason ("TOO_MANY_TRANSACTIONS").
absl::Status WithServerReason(absl::Status status, absl::string_view reason);

// The ErrorInfo in `status`'s details: {reason, errno} (errno "" when none);
// reason "" when the details hold none. For tests and tools.
struct ErrorInfoFields {
  std::string reason;
  std::string domain;
  std::string errno_name;
  std::map<std::string, std::string> metadata;  // every ErrorInfo.metadata entry
};
ErrorInfoFields ErrorInfoOf(const grpc::Status& status);

// For Subvolumes, KV and Admin RPCs.
grpc::Status ToGrpcStatus(const absl::Status& status);

// For Files RPCs: as ToGrpcStatus, with the POSIX name first in the message.
grpc::Status ToGrpcFileStatus(const absl::Status& status);

// The POSIX error name a Files error of this code carries when the engine
// gave none ("ENOENT" for NOT_FOUND, ...). Exposed for tests.
absl::string_view PosixNameFor(const absl::Status& status);

// True when `message` already starts with "E<UPPERCASE>: ".
bool HasPosixName(absl::string_view message);

// The status of a call that arrives while the server is stopping.
grpc::Status StoppingStatus();

// The status of a call without the right bearer token.
grpc::Status UnauthenticatedStatus(absl::string_view why);

// The status of a call whose request message did not parse (gRPC would
// answer INTERNAL with an empty message; see request_parse_interceptor.h):
// INVALID_ARGUMENT naming the method and the message type, with "EINVAL: "
// first for Files methods. `method` is "/cowkv.v1.KV/Get", `request_type`
// "cowkv.v1.GetRequest", `grpc_message` what gRPC said (may be empty).
grpc::Status UnparsableRequestStatus(absl::string_view method, absl::string_view request_type,
                                     absl::string_view grpc_message);
// The same as an absl::Status, for a handler that parses its own request
// (raw callback methods): ToGrpcStatus makes it UnparsableRequestStatus's.
absl::Status UnparsableRequestError(absl::string_view method, absl::string_view request_type);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_STATUS_MAPPING_H_
