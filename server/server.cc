// cowkvd's assembly and lifecycle; see server.h.
#include "server/server.h"

#include <malloc.h>

#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cowkv/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "httplib.h"
#include "server/connections.h"
#include "server/log.h"
#include "server/request_parse_interceptor.h"

namespace cowkv {
namespace server {
namespace {

// Splits "host:port" or "[v6]:port".
absl::Status SplitHostPort(absl::string_view addr, std::string* host, int* port) {
  const size_t colon = addr.rfind(':');
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(addr.substr(colon + 1), port) ||
      *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("not host:port: '", addr, "'"));
  }
  absl::string_view h = addr.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  *host = std::string(h);
  return absl::OkStatus();
}

// The cowkv.v1 services, from the generated descriptor pool.
std::vector<const google::protobuf::ServiceDescriptor*> Services() {
  std::vector<const google::protobuf::ServiceDescriptor*> out;
  for (const char* name : {v1::Subvolumes::service_full_name(), v1::KV::service_full_name(),
                           v1::Files::service_full_name(), v1::Admin::service_full_name(),
                           v1::Lease::service_full_name()}) {
    out.push_back(google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name));
  }
  return out;
}

}  // namespace

std::vector<std::string> Server::MethodNames() {
  std::vector<std::string> out;
  for (const google::protobuf::ServiceDescriptor* s : Services()) {
    for (int i = 0; i < s->method_count(); ++i) {
      out.push_back(absl::StrCat(s->full_name(), "/", s->method(i)->name()));
    }
  }
  return out;
}

Server::Server(ServerOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  std::unique_ptr<Server> s(new Server(std::move(options)));
  absl::Status init = s->Init();
  if (!init.ok()) {
    s->Stop().IgnoreError();  // the Init error is the one to report
    return init;
  }
  return s;
}

namespace {

// The engine's operator events as log events.
void LogEngineEvent(const EngineEvent& e) {
  switch (e.kind) {
    case EngineEvent::Kind::kReadOnly:
      Log(LogLevel::kError, "read_only",
          "a commit or log sync failed: the store takes no more writes until cowkvd restarts")
          .Num("generation", e.generation)
          .Str("error", e.detail);
      break;
    case EngineEvent::Kind::kSlowCommit:
      Log(LogLevel::kWarn, "slow_commit", "an engine commit was slow")
          .Num("generation", e.generation)
          .Num("ms", static_cast<double>(e.micros) / 1000.0)
          .Str("trigger", e.trigger);
      break;
    case EngineEvent::Kind::kSlowLogSync:
      Log(LogLevel::kWarn, "slow_log_sync", "a log sync was slow")
          .Num("generation", e.generation)
          .Num("ms", static_cast<double>(e.micros) / 1000.0);
      break;
  }
}

}  // namespace

absl::Status Server::Init() {
  COWKV_ASSIGN_OR_RETURN(device_, LockedDevice::Open(options_.device));
  Options engine = options_.engine;
  if (!engine.on_event) engine.on_event = &LogEngineEvent;
  const absl::Time mount_start = absl::Now();
  COWKV_ASSIGN_OR_RETURN(store_, Store::Open(device_->device(), engine));
  {
    const StoreStats st = store_->Stats();
    Log(LogLevel::kInfo, "mount",
        absl::StrCat("mounted ", options_.device.path, " at generation ", st.generation,
                     st.log_replayed_entries > 0
                         ? absl::StrCat(", replayed ", st.log_replayed_entries, " log entries")
                         : ""))
        .Str("device", options_.device.path)
        .Bool("created", device_->created())
        .Num("generation", st.generation)
        .Num("nodesize", static_cast<uint64_t>(st.nodesize))
        .Num("total_bytes", st.total_bytes)
        .Num("log_entries_replayed", st.log_replayed_entries)
        .Num("ms", absl::ToDoubleMilliseconds(absl::Now() - mount_start));
  }
  metrics_ = std::make_unique<RpcMetrics>(MethodNames());
  txns_ = std::make_unique<TxnRegistry>(
      TxnRegistry::Limits{options_.max_txns_per_peer, options_.max_txns_total});
  env_ = std::make_unique<ServiceEnv>(
      store_.get(), device_->device(), metrics_.get(), txns_.get(),
      options_.tokens.empty() ? TokenTable::SingleAdmin(options_.auth_token) : options_.tokens,
      options_.engine.default_durability != Durability::kAsync, options_.limits);
  file_handles_ = std::make_unique<FileHandles>(
      FileHandles::Limits{options_.max_files_per_peer, options_.max_files_total});
  env_->set_file_handles(file_handles_.get());
  watch_hub_ = std::make_unique<WatchHub>(store_.get(), options_.watch);
  env_->set_watch_hub(watch_hub_.get());
  subvolumes_ = std::make_unique<SubvolumesService>(env_.get());
  kv_ = std::make_unique<KvService>(env_.get());
  files_ = std::make_unique<FilesService>(env_.get());
  if (!options_.follow.primary.empty()) {
    follower_ = std::make_unique<Follower>(options_.follow, store_.get());
  }
  admin_ = std::make_unique<AdminService>(env_.get(), follower_.get());
  lease_ = std::make_unique<LeaseService>(env_.get());
  COWKV_RETURN_IF_ERROR(StartGrpc());
  COWKV_RETURN_IF_ERROR(StartMetrics());
  reaper_ = std::thread([this] { ReapLoop(); });
  if (follower_ != nullptr) follower_->Start();
  return absl::OkStatus();
}

absl::Status Server::StartGrpc() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // gRPC's health service is built on upb; referencing the C++ descriptor
  // links health.pb into the generated pool, so reflection can describe
  // grpc.health.v1.Health (grpcurl needs that).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!options_.tls_cert_pem.empty() || !options_.tls_key_pem.empty()) {
    grpc::SslServerCredentialsOptions ssl(
        options_.client_ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                       : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = options_.client_ca_pem;
    ssl.pem_key_cert_pairs.push_back({options_.tls_key_pem, options_.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
    // Unknown callers are refused before their requests are parsed.
    if (!env_->tokens().empty()) {
      creds->SetAuthMetadataProcessor(std::make_shared<TokenAuthProcessor>(&env_->tokens()));
    }
  }
  CallScope::Install();  // response grants and per-client call counts last until sent
  grpc::ServerBuilder builder;
  // One thread per running call in the synchronous server: bounded here;
  // calls past it are refused by gRPC (RESOURCE_EXHAUSTED).
  grpc::ResourceQuota quota("cowkvd");
  quota.SetMaxThreads(options_.limits.max_threads);
  builder.SetResourceQuota(quota);
  builder.AddListeningPort(options_.listen, creds, &port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  // Sync-server threads notice a shutdown only when their poll times out
  // (default 10 s); keep the drain's tail short.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC, 200);
  builder.RegisterService(subvolumes_.get());
  builder.RegisterService(kv_.get());
  builder.RegisterService(files_.get());
  builder.RegisterService(admin_.get());
  builder.RegisterService(lease_.get());
  std::vector<std::string> served = {"grpc.health.v1.Health",
                                     "grpc.reflection.v1alpha.ServerReflection",
                                     "grpc.reflection.v1.ServerReflection"};
  for (const google::protobuf::ServiceDescriptor* sd : Services())
    served.push_back(sd->full_name());
  reflection_v1_ = std::make_unique<ReflectionV1Service>(std::move(served));
  builder.RegisterService(reflection_v1_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(
      std::make_unique<RequestParseInterceptorFactory>(metrics_.get(), KvMethodsParsedByHandler()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  grpc_ = builder.BuildAndStart();
  if (grpc_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options_.listen, " (address in use or not local?)"));
  }
  grpc::HealthCheckServiceInterface* health = grpc_->GetHealthCheckService();
  health->SetServingStatus(true);
  for (const google::protobuf::ServiceDescriptor* s : Services()) {
    health->SetServingStatus(s->full_name(), true);
  }
  return absl::OkStatus();
}

absl::Status Server::StartMetrics() {
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  std::string host;
  int port = 0;
  COWKV_RETURN_IF_ERROR(SplitHostPort(options_.metrics_listen, &host, &port));
  http_ = std::make_unique<httplib::Server>();
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderMetrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  metrics_port_ = port == 0 ? http_->bind_to_any_port(host) : (http_->bind_to_port(host, port) ? port : -1);
  if (metrics_port_ <= 0) {
    metrics_port_ = 0;
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.metrics_listen,
                                               " for metrics (address in use?)"));
  }
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  return absl::OkStatus();
}

std::string Server::RenderMetrics() {
  ServerGauges g;
  g.open_handles = txns_->open();
  g.expired_handles = txns_->expired_total();
  g.stopping = env_->stopping();
  g.inflight_bytes = env_->budget().in_use();
  g.admission_waits = env_->budget().waits();
  g.admission_refusals = env_->budget().refusals();
  std::string out = RenderPrometheus(store_->Stats(), *metrics_, g);
  if (follower_ != nullptr) out += follower_->RenderMetrics();
  return out;
}

std::vector<ReplicaStatus> Server::Replicas() const {
  return follower_ != nullptr ? follower_->Status() : std::vector<ReplicaStatus>();
}

void Server::ReapLoop() {
  absl::Time last_trim = absl::Now();
  while (!stop_reaper_.WaitForNotificationWithTimeout(options_.reap_interval)) {
    txns_->ExpireIdle(absl::Now());
    file_handles_->ExpireIdle(absl::Now());
    // glibc keeps freed heap memory in its arenas; after a burst of large
    // responses that is gigabytes. Give it back when nothing is admitted.
    if (absl::Now() - last_trim >= absl::Seconds(10) && env_->budget().in_use() == 0) {
      malloc_trim(0);
      last_trim = absl::Now();
    }
    // The handles of a connection that closed go now, not at their lease.
    if (txns_->open() == 0 && file_handles_->open() == 0) continue;
    absl::StatusOr<OpenConnections> open = OpenConnections::Read(port_);
    if (!open.ok()) continue;  // leases alone
    txns_->ExpireClosed([&](const std::string& c) { return open->Has(c); });
    file_handles_->ExpireClosed([&](const std::string& c) { return open->Has(c); });
  }
}

absl::Status Server::Stop() {
  absl::MutexLock l(&stop_mu_);
  if (stopped_) return stop_status_;
  stopped_ = true;
  if (follower_ != nullptr) follower_->Stop();  // a pull in flight ends with its call
  if (env_ != nullptr) env_->SetStopping();
  // Watch streams never end by themselves: their watchers are cancelled
  // (WATCH_CANCEL_SERVER) and the streams return before the drain.
  if (watch_hub_ != nullptr) watch_hub_->Stop();
  if (grpc_ != nullptr) {
    grpc_->GetHealthCheckService()->SetServingStatus(false);
    grpc_->Shutdown(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(options_.drain_timeout));
    grpc_->Wait();
  }
  if (txns_ != nullptr) txns_->AbortAll();
  // Open files close before the store does (an orphan's last close deletes it).
  if (file_handles_ != nullptr) file_handles_->CloseAll();
  if (reaper_.joinable()) {
    stop_reaper_.Notify();
    reaper_.join();
  }
  if (http_ != nullptr) {
    http_->stop();
    if (http_thread_.joinable()) http_thread_.join();
  }
  if (store_ != nullptr) {
    // A read-only store has nothing to commit (Commit would be EROFS).
    if (!options_.engine.read_only) stop_status_ = store_->Commit();
    absl::Status closed = store_->Close();
    if (stop_status_.ok()) stop_status_ = closed;
  }
  return stop_status_;
}

Server::~Server() {
  Stop().IgnoreError();  // documented: call Stop() to see the status
}

}  // namespace server
}  // namespace cowkv
