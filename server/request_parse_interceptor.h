// RequestParseInterceptor: a gRPC server interceptor that turns the status
// of a unary or server-streaming cowkv.v1 call whose request message did not
// parse into INVALID_ARGUMENT with a message that says so.
//
// Why: gRPC C++ parses a request before any handler runs. When protobuf
// refuses the bytes — a proto3 `string` field (a subvolume name, a path, a
// symlink target) holding invalid UTF-8 is the common case; truncated or
// garbage bytes are the other — gRPC answers INTERNAL with an empty message
// (grpcpp/impl/codegen/proto_utils.h: GenericDeserialize) — UNIMPLEMENTED,
// also with no message, for a typed callback-API method. (KV Put, Delete
// and Txn are raw callback methods that parse their own request,
// ParseRawRequest in service_env.h, and get no interceptor: its per-call
// machinery cost ~12,000 instructions a put.) INTERNAL means a
// device I/O error in this API (docs/api.md), and an empty message breaks
// the rule that every failure says what failed.
//
// How: for a unary or server-streaming call the server hands interceptors
// the POST_RECV_MESSAGE hook with the parsed request, or with none when the
// parse failed (server.cc SyncRequest), and the handler never runs. The
// interceptor remembers that, and at PRE_SEND_STATUS replaces gRPC's
// INTERNAL (or UNIMPLEMENTED) by status_mapping.h's UnparsableRequestStatus. It also records
// the call in RpcMetrics, which ServiceEnv::Run would otherwise never see.
//
// Not covered: the client-streaming Files.Write. There gRPC reports a
// message that does not parse to the handler exactly as it reports the end
// of the stream (ServerReader::Read returns false; CallOpRecvMessage), so
// nothing can tell them apart: a first message that does not parse is the
// handler's INVALID_ARGUMENT "ended before its first message", a later one
// ends the stream early and bytes_written says how much was written
// (docs/api.md, "Errors").
//
// Thread-safe: the factory is immutable after construction; gRPC creates
// one interceptor per call and calls it from one thread at a time.
#ifndef COWKV_SERVER_REQUEST_PARSE_INTERCEPTOR_H_
#define COWKV_SERVER_REQUEST_PARSE_INTERCEPTOR_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/metrics.h"

namespace cowkv {
namespace server {

class RequestParseInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` is borrowed and must outlive the gRPC server. `parsed_by_handler`:
  // methods ("/cowkv.v1.KV/Put") whose handlers parse their own request
  // (raw methods, services.h): no interceptor — its per-call machinery is
  // the cost this avoids.
  RequestParseInterceptorFactory(RpcMetrics* metrics,
                                 const std::vector<std::string>& parsed_by_handler);

  // nullptr (no interceptor) for methods outside cowkv.v1, for streams of
  // requests and for methods parsed by their handlers.
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  // Constant after construction.
  RpcMetrics* const metrics_;
  // "/cowkv.v1.KV/Get" -> "cowkv.v1.GetRequest", for every cowkv.v1 method.
  absl::flat_hash_map<std::string, std::string> request_types_;
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_REQUEST_PARSE_INTERCEPTOR_H_
