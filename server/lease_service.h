// LeaseService: cowkv.v1.Lease (proto/cowkv/v1/lease.proto), etcd's lease
// API over the engine's Subvolume::Lease* (engine/include/cowkv/store.h).
// Every body runs in ServiceEnv::Run (auth, stopping, deadlines, error
// mapping with ErrorInfo reasons such as LEASE_NOT_FOUND, metrics).
// KeepAlive is a bidirectional stream that holds one gRPC thread while
// open, so it is bounded as every other call is: by the calls one client
// may have in flight (RequestLimits::max_calls_per_client) and by the
// server's threads (max_threads).
//
// Thread-safe: no state beyond the shared ServiceEnv.
#ifndef COWKV_SERVER_LEASE_SERVICE_H_
#define COWKV_SERVER_LEASE_SERVICE_H_

#include "cowkv/v1/lease.grpc.pb.h"
#include "server/service_env.h"

namespace cowkv {
namespace server {

class LeaseService final : public v1::Lease::Service {
 public:
  explicit LeaseService(ServiceEnv* env) : env_(env) {}
  grpc::Status Grant(grpc::ServerContext* ctx, const v1::LeaseGrantRequest* req,
                     v1::LeaseGrantResponse* resp) override;
  grpc::Status Revoke(grpc::ServerContext* ctx, const v1::LeaseRevokeRequest* req,
                      v1::LeaseRevokeResponse* resp) override;
  grpc::Status KeepAlive(grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::LeaseKeepAliveResponse,
                                                  v1::LeaseKeepAliveRequest>* stream) override;
  grpc::Status TimeToLive(grpc::ServerContext* ctx, const v1::LeaseTimeToLiveRequest* req,
                          v1::LeaseTimeToLiveResponse* resp) override;
  grpc::Status Leases(grpc::ServerContext* ctx, const v1::LeaseLeasesRequest* req,
                      v1::LeaseLeasesResponse* resp) override;

 private:
  ServiceEnv* const env_;
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_LEASE_SERVICE_H_
