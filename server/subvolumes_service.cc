// cowkv.v1.Subvolumes: create, list, show, rename, delete, snapshot.
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
  return env_->Run(ctx, "cowkv.v1.Subvolumes/List", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    for (const SubvolumeInfo& info : env_->store().ListSubvolumes()) {
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

}  // namespace server
}  // namespace cowkv
