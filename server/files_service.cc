// cowkv.v1.Files, path and metadata calls: Stat, Mkdir, Create, ReadDir,
// Truncate, Rename, Link, Symlink, ReadLink, Unlink, Rmdir, Clone, Fsync,
// Fiemap. Read and Write (streams) are in files_stream_service.cc.
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/convert.h"
#include "server/files_util.h"
#include "server/limits.h"
#include "server/services.h"
#include "server/validate.h"

namespace cowkv {
namespace server {

namespace {
constexpr ServiceEnv::Errors kPosix = ServiceEnv::Errors::kPosix;
}  // namespace

grpc::Status FilesService::Stat(ServerContext* ctx, const v1::StatRequest* req, v1::FileStat* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Stat", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateTarget("path", req->path(), req->ino(), req->handle()));
    COWKV_ASSIGN_OR_RETURN(FileTarget t, ResolveTarget(env_, req->subvolume(), "path", req->path(),
                                                       req->ino(), req->handle()));
    COWKV_ASSIGN_OR_RETURN(FileStat st, t.files.StatInode(t.ino));
    ToProto(st, resp);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::Mkdir(ServerContext* ctx, const v1::MkdirRequest* req,
                                 v1::FileStat* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Mkdir", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateNamedPath("path", req->path()));
    COWKV_RETURN_IF_ERROR(ValidateMode(req->mode()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(FileStat st, files.Mkdir(req->path(), req->mode() ? req->mode() : 0755));
    ToProto(st, resp);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::Create(ServerContext* ctx, const v1::CreateFileRequest* req,
                                  v1::FileStat* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Create", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateNamedPath("path", req->path()));
    COWKV_RETURN_IF_ERROR(ValidateMode(req->mode()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(FileStat st, files.Create(req->path(), req->mode() ? req->mode() : 0644));
    ToProto(st, resp);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::ReadDir(ServerContext* ctx, const v1::ReadDirRequest* req,
                                   v1::ReadDirResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/ReadDir", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("path", req->path(), req->ino()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, Resolve(files, "path", req->path(), req->ino()));
    const uint64_t limit =
        req->limit() == 0 || req->limit() > kReadDirPageEntries ? kReadDirPageEntries : req->limit();
    COWKV_ASSIGN_OR_RETURN(ReadDirResult r, files.ReadDirInode(ino, req->cookie(), limit));
    for (const DirEntryInfo& e : r.entries) {
      v1::DirEntry* out = resp->add_entries();
      out->set_name(e.name);
      out->set_ino(e.ino);
      out->set_kind(ToProto(e.kind));
      out->set_cookie(e.cookie);
    }
    resp->set_next_cookie(r.next_cookie);
    resp->set_more(r.more);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::Truncate(ServerContext* ctx, const v1::TruncateRequest* req,
                                    v1::FileStat* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Truncate", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateTarget("path", req->path(), req->ino(), req->handle()));
    COWKV_RETURN_IF_ERROR(ValidateFileEnd("size", req->size(), 0));
    COWKV_ASSIGN_OR_RETURN(FileTarget t, ResolveTarget(env_, req->subvolume(), "path", req->path(),
                                                       req->ino(), req->handle()));
    COWKV_RETURN_IF_ERROR(t.files.Truncate(t.ino, req->size()));
    COWKV_ASSIGN_OR_RETURN(FileStat st, t.files.StatInode(t.ino));
    ToProto(st, resp);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::Rename(ServerContext* ctx, const v1::RenameRequest* req,
                                  v1::RenameResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Rename", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateNamedPath("from", req->from()));
    COWKV_RETURN_IF_ERROR(ValidateNamedPath("to", req->to()));
    constexpr uint32_t kKnown = v1::RENAME_FLAG_NOREPLACE | v1::RENAME_FLAG_EXCHANGE;
    if ((req->flags() & ~kKnown) != 0 || req->flags() == kKnown) {
      return PosixError(
          ErrorReason::kEINVAL,
          absl::StrCat("flags: ", req->flags(), " is not 0, NOREPLACE (1) or EXCHANGE (2)"));
    }
    static_assert(v1::RENAME_FLAG_NOREPLACE == kRenameNoReplace, "same bits as the engine");
    static_assert(v1::RENAME_FLAG_EXCHANGE == kRenameExchange, "same bits as the engine");
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    return files.Rename(req->from(), req->to(), req->flags());
  });
}

grpc::Status FilesService::Link(ServerContext* ctx, const v1::LinkRequest* req, v1::FileStat* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Link", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateTarget("existing", req->existing(), req->ino(), req->handle()));
    COWKV_RETURN_IF_ERROR(ValidateNamedPath("new_path", req->new_path()));
    COWKV_ASSIGN_OR_RETURN(FileStat st, LinkByTarget(env_, *req));
    ToProto(st, resp);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::Symlink(ServerContext* ctx, const v1::SymlinkRequest* req,
                                   v1::FileStat* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Symlink", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateNamedPath("path", req->path()));
    COWKV_RETURN_IF_ERROR(ValidateSymlinkTarget(req->target()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(FileStat st, files.Symlink(req->target(), req->path()));
    ToProto(st, resp);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::ReadLink(ServerContext* ctx, const v1::ReadLinkRequest* req,
                                    v1::ReadLinkResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/ReadLink", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidatePath("path", req->path()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(std::string target, files.ReadLink(req->path()));
    resp->set_target(target);
    return absl::OkStatus();
  });
}

grpc::Status FilesService::Unlink(ServerContext* ctx, const v1::UnlinkRequest* req,
                                  v1::UnlinkResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Unlink", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateNamedPath("path", req->path()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    return files.Unlink(req->path());
  });
}

grpc::Status FilesService::Rmdir(ServerContext* ctx, const v1::RmdirRequest* req,
                                 v1::RmdirResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Rmdir", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateNamedPath("path", req->path()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    return files.Rmdir(req->path());
  });
}

grpc::Status FilesService::Clone(ServerContext* ctx, const v1::CloneRequest* req,
                                 v1::CloneResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Clone", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateByteRange("src", req->src_offset(), req->length()));
    COWKV_RETURN_IF_ERROR(ValidateByteRange("dst", req->dst_offset(), req->length()));
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("src_path", req->src_path(), req->src_ino()));
    COWKV_RETURN_IF_ERROR(ValidatePathOrIno("dst_path", req->dst_path(), req->dst_ino()));
    COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(uint64_t src, Resolve(files, "src_path", req->src_path(), req->src_ino()));
    COWKV_ASSIGN_OR_RETURN(uint64_t dst, Resolve(files, "dst_path", req->dst_path(), req->dst_ino()));
    return files.Clone(src, req->src_offset(), dst, req->dst_offset(), req->length());
  });
}

grpc::Status FilesService::Fsync(ServerContext* ctx, const v1::FsyncRequest* req,
                                 v1::FsyncResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Fsync", kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateByteRange("fsync", req->offset(), req->length()));
    COWKV_RETURN_IF_ERROR(ValidateTarget("path", req->path(), req->ino(), req->handle()));
    COWKV_ASSIGN_OR_RETURN(FileTarget t, ResolveTarget(env_, req->subvolume(), "path", req->path(),
                                                       req->ino(), req->handle()));
    if (req->offset() != 0 || req->length() != 0) {
      return t.files.FsyncRange(t.ino, req->offset(), req->length(), req->datasync());
    }
    return t.files.Fsync(t.ino, req->datasync());
  });
}

grpc::Status FilesService::Fiemap(ServerContext* ctx, const v1::FiemapRequest* req,
                                  v1::FiemapResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Fiemap", kPosix, [&]() -> absl::Status {
    // 2^64 - 1 means "to the end of the file", as FIEMAP_MAX_OFFSET does.
    const uint64_t length = req->length() == UINT64_MAX ? 0 : req->length();
    COWKV_RETURN_IF_ERROR(ValidateByteRange("fiemap", req->offset(), length));
    COWKV_RETURN_IF_ERROR(ValidateTarget("path", req->path(), req->ino(), req->handle()));
    COWKV_ASSIGN_OR_RETURN(FileTarget t, ResolveTarget(env_, req->subvolume(), "path", req->path(),
                                                       req->ino(), req->handle()));
    COWKV_ASSIGN_OR_RETURN(std::vector<FiemapExtent> extents,
                           t.files.Fiemap(t.ino, req->offset(), length));
    const size_t n = extents.size() < kFiemapMaxExtents ? extents.size() : kFiemapMaxExtents;
    for (size_t i = 0; i < n; ++i) ToProto(extents[i], resp->add_extents());
    resp->set_more(n < extents.size());
    return absl::OkStatus();
  });
}

}  // namespace server
}  // namespace cowkv
