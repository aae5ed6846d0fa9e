// Global options, the connection and the status -> exit code mapping.
#include "clients/cli/online.h"

#include <chrono>
#include <fstream>
#include <tuple>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "clients/cli/commands.h"

namespace cowkv {
namespace cli {

namespace {

// The server's message limit is 20 MiB (docs/api.md); leave room for it.
constexpr int kMaxMessageBytes = 24 << 20;

}  // namespace

int ExitCodeFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return kExitInvalidArgument;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::ALREADY_EXISTS:
      return kExitExists;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return kExitPrecondition;
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::OUT_OF_RANGE:
      return kExitConflict;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return kExitNoSpace;
    case grpc::StatusCode::DATA_LOSS:
      return kExitDataLoss;
    case grpc::StatusCode::UNAVAILABLE:
      return kExitUnavailable;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return kExitTimeout;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return kExitAuth;
    default:
      return kExitFailure;  // INTERNAL, UNKNOWN, UNIMPLEMENTED
  }
}

const char* StatusCodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
  };
  const int i = static_cast<int>(code);
  const int n = static_cast<int>(sizeof(kNames) / sizeof(kNames[0]));
  return i >= 0 && i < n ? kNames[i] : "UNKNOWN";
}

int RpcFail(absl::string_view op, const grpc::Status& status,
            const Globals& globals) {
  std::string reason = status.error_message();
  if (reason.empty()) reason = StatusCodeName(status.error_code());
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      reason = absl::StrCat("cowkvd at ", globals.server,
                            " is unavailable: ", reason);
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      reason = absl::StrCat(reason, " (--timeout ", globals.timeout_seconds,
                            " s)");
      break;
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::UNIMPLEMENTED:
      reason = absl::StrCat(StatusCodeName(status.error_code()), ": ", reason);
      break;
    default:
      break;
  }
  return Fail(op, reason, ExitCodeFor(status.error_code()));
}

std::string SubvolumeNameProblem(absl::string_view name) {
  if (name.empty()) return "a subvolume name cannot be empty";
  if (name.size() > 255) {
    return absl::StrCat("subvolume name is ", name.size(),
                        " bytes (at most 255)");
  }
  if (name.find('/') != absl::string_view::npos) {
    return absl::StrCat("subvolume name '", name, "' contains '/'");
  }
  if (name.find('\0') != absl::string_view::npos) {
    return "subvolume name contains NUL";
  }
  return "";
}

Connection::Connection(const Globals& g, std::string token,
                       std::shared_ptr<grpc::ChannelCredentials> creds)
    : globals_(g), token_(std::move(token)), creds_(std::move(creds)) {
  channel_ = NewChannel(grpc::ChannelArguments());
  subvolumes_ = v1::Subvolumes::NewStub(channel_);
  kv_ = v1::KV::NewStub(channel_);
  files_ = v1::Files::NewStub(channel_);
  admin_ = v1::Admin::NewStub(channel_);
  lease_ = v1::Lease::NewStub(channel_);
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const Globals& g) {
  std::string token;
  if (!g.token_file.empty()) {
    std::ifstream in(g.token_file, std::ios::binary);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat("cannot read --token-file ", g.token_file));
    }
    std::stringstream buf;
    buf << in.rdbuf();
    token = std::string(absl::StripAsciiWhitespace(buf.str()));
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-file ", g.token_file, " is empty"));
    }
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!g.tls_ca.empty() || !g.tls_cert.empty() || !g.tls_key.empty()) {
    if (g.tls_cert.empty() != g.tls_key.empty()) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    grpc::SslCredentialsOptions ssl;
    for (auto [flag, path, out] : {std::make_tuple("--tls-ca", &g.tls_ca, &ssl.pem_root_certs),
                                   std::make_tuple("--tls-cert", &g.tls_cert, &ssl.pem_cert_chain),
                                   std::make_tuple("--tls-key", &g.tls_key, &ssl.pem_private_key)}) {
      if (path->empty()) continue;
      std::ifstream in(*path, std::ios::binary);
      if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", flag, " ", *path));
      std::stringstream buf;
      buf << in.rdbuf();
      *out = buf.str();
    }
    creds = grpc::SslCredentials(ssl);
  }
  return std::unique_ptr<Connection>(new Connection(g, std::move(token), std::move(creds)));
}

std::shared_ptr<grpc::Channel> Connection::NewChannel(const grpc::ChannelArguments& args) const {
  grpc::ChannelArguments all = args;
  all.SetMaxReceiveMessageSize(kMaxMessageBytes);
  all.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(globals_.server, creds_, all);
}

void Connection::Authorize(grpc::ClientContext* context) const {
  if (!token_.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  }
}

void Connection::Prepare(grpc::ClientContext* context, bool stream) const {
  const bool deadline =
      globals_.timeout_seconds > 0 && (!stream || globals_.timeout_given);
  if (deadline) {
    context->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::microseconds(
            static_cast<int64_t>(globals_.timeout_seconds * 1e6)));
  }
  Authorize(context);
}

std::unique_ptr<Connection> Connect(absl::string_view op, const Globals& g,
                                    int* exit_code) {
  absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::Open(g);
  if (!conn.ok()) {
    *exit_code = Fail(op, conn.status().message());
    return nullptr;
  }
  return std::move(*conn);
}

}  // namespace cli
}  // namespace cowkv
