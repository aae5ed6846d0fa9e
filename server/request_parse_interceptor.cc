// Unparsable requests become INVALID_ARGUMENT; see request_parse_interceptor.h.
#include "server/request_parse_interceptor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cowkv/v1/admin.grpc.pb.h"
#include "cowkv/v1/files.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "cowkv/v1/lease.grpc.pb.h"
#include "cowkv/v1/subvolumes.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/support/interceptor.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class RequestParseInterceptor final : public grpc::experimental::Interceptor {
 public:
  RequestParseInterceptor(const char* method, const std::string* request_type, RpcMetrics* metrics)
      : method_(method), request_type_(request_type), metrics_(metrics) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // A unary or server-streaming call receives exactly one request; none
      // here means it did not parse (or was missing) and no handler runs.
      unparsed_ = methods->GetRecvMessage() == nullptr;
    }
    if (unparsed_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status sent = methods->GetSendStatus();
      // The synchronous server answers INTERNAL for a request it could not
      // parse; the callback API (KV Put, Delete, Txn) UNIMPLEMENTED.
      if (sent.error_code() == grpc::StatusCode::INTERNAL ||
          sent.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        const grpc::Status replaced =
            UnparsableRequestStatus(method_, *request_type_, sent.error_message());
        methods->ModifySendStatus(replaced);
        metrics_->Record(absl::StripPrefix(method_, "/"), replaced.error_code(),
                         absl::Now() - start_);
      }
    }
    methods->Proceed();
  }

 private:
  const char* const method_;               // owned by gRPC, valid for the call
  const std::string* const request_type_;  // owned by the factory
  RpcMetrics* const metrics_;
  const absl::Time start_ = absl::Now();
  bool unparsed_ = false;
};

}  // namespace

RequestParseInterceptorFactory::RequestParseInterceptorFactory(
    RpcMetrics* metrics, const std::vector<std::string>& parsed_by_handler)
    : metrics_(metrics) {
  for (const char* service : {v1::Subvolumes::service_full_name(), v1::KV::service_full_name(),
                              v1::Files::service_full_name(), v1::Admin::service_full_name(),
                              v1::Lease::service_full_name()}) {
    const google::protobuf::ServiceDescriptor* s =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    for (int i = 0; s != nullptr && i < s->method_count(); ++i) {
      request_types_[absl::StrCat("/", s->full_name(), "/", s->method(i)->name())] =
          s->method(i)->input_type()->full_name();
    }
  }
  for (const std::string& m : parsed_by_handler) request_types_.erase(m);
}

grpc::experimental::Interceptor* RequestParseInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) return nullptr;
  auto it = request_types_.find(info->method());
  if (it == request_types_.end()) return nullptr;
  return new RequestParseInterceptor(info->method(), &it->second, metrics_);
}

}  // namespace server
}  // namespace cowkv
