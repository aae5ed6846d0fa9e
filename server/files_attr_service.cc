// cowkv.v1.Files, attribute calls: SetAttr, and the extended attributes
// SetXattr, GetXattr, ListXattrs, RemoveXattr (the engine checks names,
// values and flags).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/convert.h"
#include "server/files_util.h"
#include "server/services.h"
#include "server/validate.h"

namespace cowkv {
namespace server {

namespace {
constexpr ServiceEnv::Errors kPosix = ServiceEnv::Errors::kPosix;

// The request's fields as the engine's spec (after validation).
absl::StatusOr<SetAttrSpec> SpecOf(const v1::SetAttrRequest& req) {
  constexpr uint32_t kKnown = v1::SET_ATTR_MODE | v1::SET_ATTR_UID | v1::SET_ATTR_GID |
                              v1::SET_ATTR_SIZE | v1::SET_ATTR_ATIME | v1::SET_ATTR_MTIME |
                              v1::SET_ATTR_ATIME_NOW | v1::SET_ATTR_MTIME_NOW;
  const uint32_t f = req.fields();
  if ((f & ~kKnown) != 0) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrCat("fields: unknown bits 0x", absl::Hex(f & ~kKnown)));
  }
  SetAttrSpec s;
  if (f & v1::SET_ATTR_MODE) {
    COWKV_RETURN_IF_ERROR(ValidateMode(req.mode()));
    s.mode = req.mode();
  }
  if (f & v1::SET_ATTR_UID) s.uid = req.uid();
  if (f & v1::SET_ATTR_GID) s.gid = req.gid();
  if (f & v1::SET_ATTR_SIZE) {
    COWKV_RETURN_IF_ERROR(ValidateFileEnd("size", req.size(), 0));
    s.size = req.size();
  }
  // *_NOW wins over the explicit time (FUSE sends both bits).
  if (f & v1::SET_ATTR_ATIME_NOW) {
    s.atime = AttrTime::Now();
  } else if (f & v1::SET_ATTR_ATIME) {
    s.atime = AttrTime::At(req.atime_ns());
  }
  if (f & v1::SET_ATTR_MTIME_NOW) {
    s.mtime = AttrTime::Now();
  } else if (f & v1::SET_ATTR_MTIME) {
    s.mtime = AttrTime::At(req.mtime_ns());
  }
  return s;
}
}  // namespace

grpc::Status FilesService::SetAttr(ServerContext* ctx, const v1::SetAttrRequest* req,
                                   v1::FileStat* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/SetAttr", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(SetAttrSpec spec, SpecOf(*req));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, Resolve(files, "path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(FileStat st, files.SetAttr(ino, spec));
    ToProto(st, resp);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::SetXattr(ServerContext* ctx, const v1::SetXattrRequest* req,
                                    v1::SetXattrResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/SetXattr", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("path", req->path(), req->ino()));
    static_assert(v1::XATTR_FLAG_CREATE == kXattrCreate, "same bits as the engine");
    static_assert(v1::XATTR_FLAG_REPLACE == kXattrReplace, "same bits as the engine");
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, Resolve(files, "path", req->path(), req->ino()));
    return files.SetXattr(ino, req->name(), req->value(), req->flags());
  });
}

grpc::Status FilesService::GetXattr(ServerContext* ctx, const v1::GetXattrRequest* req,
                                    v1::GetXattrResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/GetXattr", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, Resolve(files, "path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(std::string value, files.GetXattr(ino, req->name()));
    resp->set_value(std::move(value));
    return absl::OkStatus();
  });
}

grpc::Status FilesService::ListXattrs(ServerContext* ctx, const v1::ListXattrsRequest* req,
                                      v1::ListXattrsResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/ListXattrs", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, Resolve(files, "path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(std::vector<std::string> names, files.ListXattrs(ino));
    for (std::string& n : names) resp->add_names(std::move(n));
    return absl::OkStatus();
  });
}

grpc::Status FilesService::RemoveXattr(ServerContext* ctx, const v1::RemoveXattrRequest* req,
                                       v1::RemoveXattrResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/RemoveXattr", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, Resolve(files, "path", req->path(), req->ino()));
    return files.RemoveXattr(ino, req->name());
  });
}

}  // namespace server
}  // namespace cowkv
