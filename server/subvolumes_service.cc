// cowkv.v1.Subvolumes: create, list, show, rename, delete, snapshot, sync.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cowkv/status_macros.h"
#include "server/convert.h"
#include "server/services.h"
#include "server/validate.h"

namespace cowkv {
namespace server {

grpc::Status SubvolumesService::Create(ServerContext* ctx, const v1::CreateSubvolumeRequest* req,
                                       v1::SubvolumeInfo* resp) {
  return env_->Run(ctx, "cowkv.v1.Subvolumes/Create", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("name", req->name()));
    COWKV_ASSIGN_OR_RETURN(SubvolumeInfo info, env_->store().CreateSubvolume(req->name()));
    ToProto(info, resp);
    return absl::OkStatus();
  });
}

grpc::Status SubvolumesService::List(ServerContext* ctx, const v1::ListSubvolumesRequest* req,
                                     v1::ListSubvolumesResponse* resp) {
  return env_->Run(
      ctx, "cowkv.v1.Subvolumes/List", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
        // Filtered and sorted in the engine, so what is dropped is never shipped.
        SubvolumeListOptions o;
        o.read_only = req->read_only();
        o.snapshots_only = req->snapshots_only();
        o.sort.assign(req->sort().begin(), req->sort().end());
        COWKV_ASSIGN_OR_RETURN(std::vector<SubvolumeInfo> list, env_->store().ListSubvolumes(o));
        for (const SubvolumeInfo& info : list) {
          // A token limited to some subvolumes lists only those.
          if (ServiceEnv::RequireSubvolume(info.name).ok()) ToProto(info, resp->add_subvolumes());
        }
        return absl::OkStatus();
      });
}

grpc::Status SubvolumesService::Show(ServerContext* ctx, const v1::ShowSubvolumeRequest* req,
                                     v1::SubvolumeInfo* resp) {
  return env_->Run(ctx, "cowkv.v1.Subvolumes/Show", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("name", req->name()));
    COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(req->name()));
    COWKV_ASSIGN_OR_RETURN(SubvolumeInfo info, env_->store().ShowSubvolume(req->name()));
    // A token limited to some subvolumes sees only those of its snapshots.
    std::vector<std::string> visible;
    for (std::string& snap : info.snapshots) {
      if (ServiceEnv::RequireSubvolume(snap).ok()) visible.push_back(std::move(snap));
    }
    info.snapshots = std::move(visible);
    ToProto(info, resp);
    return absl::OkStatus();
  });
}

grpc::Status SubvolumesService::Rename(ServerContext* ctx, const v1::RenameSubvolumeRequest* req,
                                       v1::RenameSubvolumeResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Subvolumes/Rename", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("name", req->name()));
    COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("new_name", req->new_name()));
    return env_->store().RenameSubvolume(req->name(), req->new_name());
  });
}

grpc::Status SubvolumesService::Delete(ServerContext* ctx, const v1::DeleteSubvolumeRequest* req,
                                       v1::DeleteSubvolumeResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Subvolumes/Delete", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("name", req->name()));
    return env_->store().DeleteSubvolume(req->name());
  });
}

grpc::Status SubvolumesService::Snapshot(ServerContext* ctx, const v1::SnapshotRequest* req,
                                         v1::SubvolumeInfo* resp) {
  return env_->Run(ctx, "cowkv.v1.Subvolumes/Snapshot", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("source", req->source()));
    COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("name", req->name()));
    COWKV_ASSIGN_OR_RETURN(SubvolumeInfo info,
                           env_->store().CreateSnapshot(req->source(), req->name(),
                                                        req->read_only()));
    ToProto(info, resp);
    return absl::OkStatus();
  });
}

grpc::Status SubvolumesService::Sync(ServerContext* ctx, const v1::SyncSubvolumesRequest* req,
                                     v1::SyncSubvolumesResponse* resp) {
  return env_->Run(
      ctx, "cowkv.v1.Subvolumes/Sync", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
        // Bounded: by timeout_ms, by the call's deadline, and without either by
        // kDefaultSyncTimeout; a cancelled call stops between cleaner batches.
        constexpr absl::Duration kDefaultSyncTimeout = absl::Seconds(60);
        SubvolumeSyncOptions o;
        o.ids.assign(req->ids().begin(), req->ids().end());
        const absl::Time now = absl::Now();
        const absl::Time call_deadline = absl::FromChrono(ctx->deadline());  // far away: none
        const bool call_has_deadline = call_deadline < now + absl::Hours(24 * 365);
        o.deadline =
            req->timeout_ms() > 0
                ? now + absl::Milliseconds(std::min<uint64_t>(req->timeout_ms(), 1ull << 40))
            : call_has_deadline ? call_deadline
                                : now + kDefaultSyncTimeout;
        o.deadline = std::min(o.deadline, call_deadline);
        o.cancelled = [ctx] { return ctx->IsCancelled(); };
        COWKV_ASSIGN_OR_RETURN(std::vector<uint64_t> synced,
                               env_->store().SyncDeletedSubvolumes(o));
        for (uint64_t id : synced) resp->add_synced(id);
        return absl::OkStatus();
      });
}

}  // namespace server
}  // namespace cowkv
