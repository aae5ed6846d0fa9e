// cowkv.v1.Files, open files: Open, Close, CreateTmpfile, and the
// resolution of a request's handle | ino | path (ResolveTarget) that Stat,
// Read, Write, Truncate, Fsync, Fiemap and Link use. The handles and their
// leases live in FileHandles; the engine keeps the files they hold open
// (and an unlinked one alive: an orphan) until they close.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/connections.h"
#include "server/convert.h"
#include "server/files_util.h"
#include "server/limits.h"
#include "server/services.h"
#include "server/validate.h"

namespace cowkv {
namespace server {

namespace {
constexpr ServiceEnv::Errors kPosix = ServiceEnv::Errors::kPosix;

absl::StatusOr<absl::Duration> Lease(uint64_t lease_ms) {
  if (lease_ms > kMaxLeaseMs) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrCat("lease_ms: at most ", kMaxLeaseMs, ", not ", lease_ms));
  }
  return absl::Milliseconds(lease_ms == 0 ? kDefaultLeaseMs : lease_ms);
}

// Registers engine handle `of` and fills the response.
absl::Status Register(ServiceEnv* env, ServerContext* ctx, absl::string_view subvolume, Files files,
                      OpenFile of, absl::Duration lease, v1::OpenResponse* resp) {
  absl::StatusOr<FileStat> st = files.StatInode(of.ino);
  if (!st.ok()) {
    files.Close(of.handle).IgnoreError();
    return st.status();
  }
  const std::string name = subvolume.empty() ? "default" : std::string(subvolume);
  COWKV_ASSIGN_OR_RETURN(uint64_t handle,
                         env->file_handles().Add(PeerAddress(ctx->peer()), ctx->peer(), name, files,
                                                 of, lease, absl::Now()));
  resp->set_handle(handle);
  resp->set_ino(of.ino);
  resp->set_lease_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(lease)));
  ToProto(*st, resp->mutable_stat());
  return absl::OkStatus();
}
}  // namespace

absl::Status ValidateTarget(absl::string_view path_field, absl::string_view path, uint64_t ino,
                            uint64_t handle) {
  if (handle != 0) return absl::OkStatus();
  return ValidatePathOrIno(path_field, path, ino);
}

absl::StatusOr<FileTarget> ResolveTarget(ServiceEnv* env, absl::string_view subvolume,
                                         absl::string_view path_field, absl::string_view path,
                                         uint64_t ino, uint64_t handle) {
  if (handle != 0) {
    COWKV_ASSIGN_OR_RETURN(FileHandles::Target t, env->file_handles().Use(handle, absl::Now()));
    COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(t.subvolume));
    return FileTarget{t.files, t.ino};
  }
  COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env, subvolume));
  COWKV_ASSIGN_OR_RETURN(uint64_t resolved, Resolve(files, path_field, path, ino));
  return FileTarget{files, resolved};
}

absl::StatusOr<FileStat> LinkByTarget(ServiceEnv* env, const v1::LinkRequest& req) {
  if (req.handle() == 0 && req.ino() == 0) {
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env, req.subvolume()));
    return files.Link(req.existing(), req.new_path());
  }
  COWKV_ASSIGN_OR_RETURN(FileTarget t, ResolveTarget(env, req.subvolume(), "existing",
                                                     req.existing(), req.ino(), req.handle()));
  // linkat(fd, "", dirfd, name, AT_EMPTY_PATH): the new name's directory,
  // then the name in it.
  std::string to = req.new_path();
  while (!to.empty() && to.back() == '/') to.pop_back();
  const size_t slash = to.rfind('/');
  const std::string dir = slash == std::string::npos || slash == 0 ? "/" : to.substr(0, slash);
  const std::string name = slash == std::string::npos ? to : to.substr(slash + 1);
  COWKV_ASSIGN_OR_RETURN(uint64_t dir_ino, t.files.Lookup(dir));
  return t.files.LinkAt(t.ino, dir_ino, name);
}

grpc::Status FilesService::Open(ServerContext* ctx, const v1::OpenRequest* req,
                                v1::OpenResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Open", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(absl::Duration lease, Lease(req->lease_ms()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, Resolve(files, "path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(OpenFile of, files.Open(ino));
    return Register(env_, ctx, req->subvolume(), files, of, lease, resp);
  });
}

grpc::Status FilesService::CloseHandle(ServerContext* ctx, const v1::CloseRequest* req,
                                 v1::CloseResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/CloseHandle", kPosix, [&]() -> absl::Status {
    return env_->file_handles().Close(req->handle(), absl::Now());
  });
}

grpc::Status FilesService::CreateTmpfile(ServerContext* ctx, const v1::CreateTmpfileRequest* req,
                                         v1::OpenResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/CreateTmpfile", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("dir_path", req->dir_path(), req->dir_ino()));
    COWKV_RETURN_IF_ERROR(ValidateMode(req->mode()));
    COWKV_ASSIGN_OR_RETURN(absl::Duration lease, Lease(req->lease_ms()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t dir,
                           Resolve(files, "dir_path", req->dir_path(), req->dir_ino()));
    COWKV_ASSIGN_OR_RETURN(OpenFile of, files.CreateTmpfile(dir, req->mode() ? req->mode() : 0644));
    return Register(env_, ctx, req->subvolume(), files, of, lease, resp);
  });
}

}  // namespace server
}  // namespace cowkv
