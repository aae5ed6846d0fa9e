// The online side of `cowkv`: global options, the connection to cowkvd and
// the mapping from a gRPC status to an exit code and one stderr line.
//
// Every online command makes its calls through a Connection, which applies
// the global --timeout as each call's deadline and sends the bearer token of
// --token-file. A failed call ends the command with RpcFail():
//
//   cowkv: <operation>: <the server's reason>
//
// and the exit code of the status's class (ExitCodeFor, the table in
// docs/cli.md).
#ifndef COWKV_CLIENTS_CLI_ONLINE_H_
#define COWKV_CLIENTS_CLI_ONLINE_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/v1/admin.grpc.pb.h"
#include "cowkv/v1/files.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "cowkv/v1/lease.grpc.pb.h"
#include "cowkv/v1/subvolumes.grpc.pb.h"

namespace cowkv {
namespace cli {

inline constexpr char kDefaultServer[] = "127.0.0.1:7420";
inline constexpr double kDefaultTimeoutSeconds = 30;

// Exit codes of online commands, one per class of gRPC status (docs/cli.md).
// 0, 1 and 2 are shared with the offline commands (commands.h).
inline constexpr int kExitInvalidArgument = 3;  // INVALID_ARGUMENT, bad input
inline constexpr int kExitNotFound = 4;          // NOT_FOUND
inline constexpr int kExitExists = 5;            // ALREADY_EXISTS
inline constexpr int kExitPrecondition = 6;      // FAILED_PRECONDITION
inline constexpr int kExitConflict = 7;          // ABORTED, OUT_OF_RANGE
inline constexpr int kExitNoSpace = 8;           // RESOURCE_EXHAUSTED
inline constexpr int kExitDataLoss = 9;          // DATA_LOSS
inline constexpr int kExitUnavailable = 10;      // UNAVAILABLE
inline constexpr int kExitTimeout = 11;          // DEADLINE_EXCEEDED, CANCELLED
inline constexpr int kExitAuth = 12;             // UNAUTHENTICATED, PERMISSION_DENIED

// The global options, filled by the parser before any command runs.
struct Globals {
  std::string server = kDefaultServer;
  std::string token_file;
  // TLS (any of them set = TLS): the CA that signed cowkvd's certificate
  // (empty = the system's roots), and this client's certificate and key
  // for a cowkvd that requires them (--client-ca).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  double timeout_seconds = kDefaultTimeoutSeconds;  // 0 = no deadline
  bool timeout_given = false;  // --timeout was on the command line
  bool json = false;
  bool quiet = false;  // --quiet: no progress lines (progress.h)
};

// The exit code for a gRPC status code (kExitOk for OK).
int ExitCodeFor(grpc::StatusCode code);

// The name of a status code ("NOT_FOUND").
const char* StatusCodeName(grpc::StatusCode code);

// Prints "cowkv: <op>: <reason>" for a failed call and returns its exit code.
// The reason is the server's message, or the code's name when it has none;
// a server that cannot be reached is named with its address.
int RpcFail(absl::string_view op, const grpc::Status& status,
            const Globals& globals);

// Checks a subvolume name as the server would (1..255 bytes, no '/' or NUL):
// empty when fine, else the reason.
std::string SubvolumeNameProblem(absl::string_view name);

// A channel to cowkvd and the four service stubs.
class Connection {
 public:
  // Reads --token-file (if given); INVALID_ARGUMENT or NOT_FOUND if it cannot.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const Globals& g);

  // Sets the deadline and the token on a call's context. `stream` calls
  // (file transfers, check) get a deadline only if --timeout was given.
  void Prepare(grpc::ClientContext* context, bool stream = false) const;
  // Adds only the bearer token (if any): for calls whose deadline the
  // caller sets itself (cowkv bench).
  void Authorize(grpc::ClientContext* context) const;

  // Another channel to the same server with the same credentials and
  // message limits, plus `args`. cowkv bench opens several, each with
  // GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL and an argument of its own, so that
  // each is its own TCP connection.
  std::shared_ptr<grpc::Channel> NewChannel(const grpc::ChannelArguments& args) const;

  v1::Subvolumes::Stub& subvolumes() { return *subvolumes_; }
  v1::KV::Stub& kv() { return *kv_; }
  v1::Files::Stub& files() { return *files_; }
  v1::Admin::Stub& admin() { return *admin_; }
  v1::Lease::Stub& lease() { return *lease_; }
  // The channel, for the stubs of services made on demand (Lease).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  const Globals& globals() const { return globals_; }

 private:
  Connection(const Globals& g, std::string token,
             std::shared_ptr<grpc::ChannelCredentials> creds);

  Globals globals_;
  std::string token_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Subvolumes::Stub> subvolumes_;
  std::unique_ptr<v1::KV::Stub> kv_;
  std::unique_ptr<v1::Files::Stub> files_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<v1::Lease::Stub> lease_;
};

// Opens the connection for a command; on failure prints the one line and
// returns null with *exit_code set.
std::unique_ptr<Connection> Connect(absl::string_view op, const Globals& g,
                                    int* exit_code);

// Calls a unary RPC with a prepared context: `stub` is a Stub, `method` a
// pointer to one of its methods. Returns the status; `response` is filled.
template <typename Stub, typename Request, typename Response>
grpc::Status Call(const Connection& conn, Stub& stub,
                  grpc::Status (Stub::*method)(grpc::ClientContext*,
                                               const Request&, Response*),
                  const Request& request, Response* response) {
  grpc::ClientContext context;
  conn.Prepare(&context);
  return (stub.*method)(&context, request, response);
}

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_ONLINE_H_
