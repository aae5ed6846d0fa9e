// cowkv.v1.Lease; see lease_service.h.
#include "server/lease_service.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "cowkv/store.h"
#include "server/convert.h"

namespace cowkv {
namespace server {

namespace {

absl::Status ValidateLeaseDurability(v1::Durability d) {
  if (v1::Durability_IsValid(d)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("durability: unknown value ", static_cast<int>(d)));
}

}  // namespace

grpc::Status LeaseService::Grant(grpc::ServerContext* ctx, const v1::LeaseGrantRequest* req,
                                 v1::LeaseGrantResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Lease/Grant", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    // The request alone decides these, before the subvolume is looked up.
    if (req->ttl() < 1 || req->ttl() > kMaxLeaseTtlSeconds) {
      return absl::InvalidArgumentError(
          absl::StrCat("ttl: ", req->ttl(), " out of range 1..", kMaxLeaseTtlSeconds));
    }
    if (req->id() < 0) return absl::InvalidArgumentError(absl::StrCat("id: ", req->id(), " < 0"));
    COWKV_RETURN_IF_ERROR(ValidateLeaseDurability(req->durability()));
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                           env_->OpenSubvolume("subvolume", req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(int64_t id,
                           sv->LeaseGrant(req->ttl(), req->id(), ToEngine(req->durability())));
    resp->set_id(id);
    resp->set_ttl(req->ttl());
    return absl::OkStatus();
  });
}

grpc::Status LeaseService::Revoke(grpc::ServerContext* ctx, const v1::LeaseRevokeRequest* req,
                                  v1::LeaseRevokeResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Lease/Revoke", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateLeaseDurability(req->durability()));
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                           env_->OpenSubvolume("subvolume", req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t rev, sv->LeaseRevoke(req->id(), ToEngine(req->durability())));
    resp->set_revision(rev);
    return absl::OkStatus();
  });
}

grpc::Status LeaseService::KeepAlive(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::LeaseKeepAliveResponse, v1::LeaseKeepAliveRequest>* stream) {
  return env_->Run(ctx, "cowkv.v1.Lease/KeepAlive", ServiceEnv::Errors::kPlain,
                   [&]() -> absl::Status {
                     uint64_t received = 0, sent = 0;
                     // Counted however the stream ends.
                     struct CountOnExit {
                       RpcMetrics& m;
                       uint64_t& in;
                       uint64_t& out;
                       ~CountOnExit() { m.StreamMessages("cowkv.v1.Lease/KeepAlive", in, out); }
                     } count{env_->metrics(), received, sent};
                     v1::LeaseKeepAliveRequest req;
                     while (stream->Read(&req)) {
                       ++received;
                       COWKV_RETURN_IF_ERROR(ServiceEnv::CheckAlive(ctx));
                       COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                                              env_->OpenSubvolume("subvolume", req.subvolume()));
                       absl::StatusOr<int64_t> ttl = sv->LeaseKeepAlive(req.id());
                       v1::LeaseKeepAliveResponse resp;
                       resp.set_id(req.id());
                       if (ttl.ok()) {
                         resp.set_ttl(*ttl);
                       } else if (ReasonOf(ttl.status()) != ErrorReason::kLeaseNotFound) {
                         return ttl.status();
                       }  // else ttl 0: the lease is gone (etcd's answer)
                       if (!stream->Write(resp)) return absl::OkStatus();  // the client left
                       ++sent;
                     }
                     return absl::OkStatus();
                   });
}

grpc::Status LeaseService::TimeToLive(grpc::ServerContext* ctx,
                                      const v1::LeaseTimeToLiveRequest* req,
                                      v1::LeaseTimeToLiveResponse* resp) {
  return env_->Run(
      ctx, "cowkv.v1.Lease/TimeToLive", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
        COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                               env_->OpenSubvolume("subvolume", req->subvolume()));
        COWKV_ASSIGN_OR_RETURN(LeaseInfo info, sv->LeaseTimeToLive(req->id(), req->keys()));
        resp->set_id(info.id);
        resp->set_ttl(info.ttl);
        resp->set_granted_ttl(info.granted_ttl);
        for (std::string& k : info.keys) resp->add_keys(std::move(k));
        return absl::OkStatus();
      });
}

grpc::Status LeaseService::Leases(grpc::ServerContext* ctx, const v1::LeaseLeasesRequest* req,
                                  v1::LeaseLeasesResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Lease/Leases", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                           env_->OpenSubvolume("subvolume", req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(std::vector<int64_t> ids, sv->Leases());
    for (int64_t id : ids) resp->add_ids(id);
    return absl::OkStatus();
  });
}

}  // namespace server
}  // namespace cowkv
