// grpc.reflection.v1 over the generated descriptor pool; see reflection_v1.h.
#include "server/reflection_v1.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace cowkv {
namespace server {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

// Adds `file` and its dependencies not in `sent` to `out`, dependencies
// last (clients resolve them by name in any order).
void AddFile(const FileDescriptor* file, absl::flat_hash_set<std::string>* sent,
             grpc::reflection::v1::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
  for (int i = 0; i < file->dependency_count(); ++i) AddFile(file->dependency(i), sent, out);
}

void SetError(grpc::StatusCode code, const std::string& message, ServerReflectionResponse* resp) {
  resp->mutable_error_response()->set_error_code(code);
  resp->mutable_error_response()->set_error_message(message);
}

// The file that answers `req`, or nullptr with an error set in `resp`.
const FileDescriptor* FileFor(const ServerReflectionRequest& req, ServerReflectionResponse* resp) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  switch (req.message_request_case()) {
    case ServerReflectionRequest::kFileByFilename:
      if (const FileDescriptor* f = pool->FindFileByName(req.file_by_filename())) return f;
      SetError(grpc::StatusCode::NOT_FOUND, absl::StrCat("no file ", req.file_by_filename()), resp);
      return nullptr;
    case ServerReflectionRequest::kFileContainingSymbol:
      if (const FileDescriptor* f = pool->FindFileContainingSymbol(req.file_containing_symbol())) {
        return f;
      }
      SetError(grpc::StatusCode::NOT_FOUND,
               absl::StrCat("no symbol ", req.file_containing_symbol()), resp);
      return nullptr;
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& ext = req.file_containing_extension();
      const google::protobuf::Descriptor* type = pool->FindMessageTypeByName(ext.containing_type());
      const google::protobuf::FieldDescriptor* field =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, ext.extension_number());
      if (field != nullptr) return field->file();
      SetError(grpc::StatusCode::NOT_FOUND,
               absl::StrCat("no extension ", ext.extension_number(), " of ", ext.containing_type()),
               resp);
      return nullptr;
    }
    default:
      return nullptr;
  }
}

}  // namespace

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<ServerReflectionResponse, ServerReflectionRequest>* stream) {
  absl::flat_hash_set<std::string> sent;  // files already sent on this stream
  ServerReflectionRequest req;
  while (!ctx->IsCancelled() && stream->Read(&req)) {
    ServerReflectionResponse resp;
    resp.set_valid_host(req.host());
    *resp.mutable_original_request() = req;
    switch (req.message_request_case()) {
      case ServerReflectionRequest::kListServices:
        for (const std::string& name : services_) {
          resp.mutable_list_services_response()->add_service()->set_name(name);
        }
        break;
      case ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const DescriptorPool* pool = DescriptorPool::generated_pool();
        const google::protobuf::Descriptor* type =
            pool->FindMessageTypeByName(req.all_extension_numbers_of_type());
        if (type == nullptr) {
          SetError(grpc::StatusCode::NOT_FOUND,
                   absl::StrCat("no type ", req.all_extension_numbers_of_type()), &resp);
          break;
        }
        std::vector<const google::protobuf::FieldDescriptor*> exts;
        pool->FindAllExtensions(type, &exts);
        auto* out = resp.mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const auto* e : exts) out->add_extension_number(e->number());
        break;
      }
      case ServerReflectionRequest::kFileByFilename:
      case ServerReflectionRequest::kFileContainingSymbol:
      case ServerReflectionRequest::kFileContainingExtension:
        if (const FileDescriptor* f = FileFor(req, &resp)) {
          AddFile(f, &sent, resp.mutable_file_descriptor_response());
        }
        break;
      default:
        SetError(grpc::StatusCode::UNIMPLEMENTED, "unknown reflection request", &resp);
    }
    if (!stream->Write(resp)) break;
  }
  return grpc::Status::OK;
}

}  // namespace server
}  // namespace cowkv
