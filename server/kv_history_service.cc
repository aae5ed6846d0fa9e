// cowkv.v1.KV's history call: Compact (issue 18). Reads at a past revision
// are Get and Range with `revision` (kv_service.cc).
#include "absl/strings/str_cat.h"
#include "cowkv/status_macros.h"
#include "server/convert.h"
#include "server/services.h"

namespace cowkv {
namespace server {

grpc::Status KvService::Compact(ServerContext* ctx, const v1::CompactRequest* req,
                                v1::CompactResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/Compact", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    if (!v1::Durability_IsValid(req->durability())) {
      return absl::InvalidArgumentError(
          absl::StrCat("durability: unknown value ", req->durability()));
    }
    if (req->revision() == 0) {
      return absl::InvalidArgumentError("revision: 0 is not a revision (the first is 1)");
    }
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                           env_->OpenSubvolume("subvolume", req->subvolume()));
    COWKV_RETURN_IF_ERROR(sv->Compact(req->revision(), ToEngine(req->durability())));
    COWKV_ASSIGN_OR_RETURN(uint64_t floor, sv->CompactRevision());
    resp->set_compact_revision(floor);
    RangeRequest q;
    q.count_only = true;
    COWKV_ASSIGN_OR_RETURN(RangeResult now, sv->Range(q));
    resp->set_revision(now.revision);
    return absl::OkStatus();
  });
}

}  // namespace server
}  // namespace cowkv
