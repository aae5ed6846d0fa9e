// ReflectionV1Service: grpc.reflection.v1.ServerReflection, which gRPC 1.51
// (Debian's) does not have: its plugin serves only v1alpha, and current
// grpcurl, grpcui and Postman ask for v1 first. Served beside the v1alpha
// plugin, answering from the same place it does — the process's generated
// descriptor pool — so both describe the same services.
//
// Each request on the stream gets one response, as the protocol says:
// list_services (the names given at construction), file_by_filename and
// file_containing_symbol / _extension (the file and those of its transitive
// dependencies not yet sent on this stream, as gRPC's v1alpha does),
// all_extension_numbers_of_type; anything else, or a name the pool does not
// know, an error_response (NOT_FOUND / UNIMPLEMENTED) on the stream.
//
// Like v1alpha it needs no token: it reveals the schema, not data.
// Thread-safe: per-call state lives on the handler's stack.
#ifndef COWKV_SERVER_REFLECTION_V1_H_
#define COWKV_SERVER_REFLECTION_V1_H_

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace cowkv {
namespace server {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // `services`: the full names list_services reports.
  explicit ReflectionV1Service(std::vector<std::string> services)
      : services_(std::move(services)) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  const std::vector<std::string> services_;  // constant after construction
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_REFLECTION_V1_H_
