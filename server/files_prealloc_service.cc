// cowkv.v1.Files/Fallocate: fallocate(2) over Files::Fallocate.
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

static_assert(v1::FALLOCATE_FLAG_KEEP_SIZE == kFallocKeepSize &&
              v1::FALLOCATE_FLAG_PUNCH_HOLE == kFallocPunchHole &&
              v1::FALLOCATE_FLAG_ZERO_RANGE == kFallocZeroRange);
static_assert(v1::FIEMAP_FLAG_UNWRITTEN == kFiemapExtentUnwritten);

// What the request alone decides, before the file is looked up (the engine
// checks the same, in the same order).
absl::Status ValidateFallocate(const v1::FallocateRequest& req) {
  const uint32_t mode = req.mode();
  constexpr uint32_t kKnown = kFallocKeepSize | kFallocPunchHole | kFallocZeroRange;
  if ((mode & kFallocPunchHole) && (mode & kFallocZeroRange)) {
    return PosixError(ErrorReason::kEINVAL, "fallocate: PUNCH_HOLE and ZERO_RANGE together");
  }
  if ((mode & ~kKnown) != 0) {
    return PosixError(ErrorReason::kEOPNOTSUPP,
                      absl::StrCat("fallocate mode 0x", absl::Hex(mode),
                                   " (only KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE)"));
  }
  if ((mode & kFallocPunchHole) && !(mode & kFallocKeepSize)) {
    return PosixError(ErrorReason::kEOPNOTSUPP, "fallocate: PUNCH_HOLE needs KEEP_SIZE");
  }
  if (req.length() == 0) return PosixError(ErrorReason::kEINVAL, "fallocate: length 0");
  COWKV_RETURN_IF_ERROR(ValidateByteRange("fallocate", req.offset(), req.length()));
  return ValidateFileEnd("fallocate", req.offset(), req.length());
}

}  // namespace

grpc::Status FilesService::Fallocate(ServerContext* ctx, const v1::FallocateRequest* req,
                                     v1::FileStat* resp) {
  return env_->Run(
      ctx, "cowkv.v1.Files/Fallocate", ServiceEnv::Errors::kPosix, [&]() -> absl::Status {
        COWKV_RETURN_IF_ERROR(ValidateFallocate(*req));
        COWKV_RETURN_IF_ERROR(ValidatePathOrIno("path", req->path(), req->ino()));
        COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, req->subvolume()));
        COWKV_ASSIGN_OR_RETURN(uint64_t ino, Resolve(files, "path", req->path(), req->ino()));
        COWKV_RETURN_IF_ERROR(files.Fallocate(ino, req->mode(), req->offset(), req->length()));
        COWKV_ASSIGN_OR_RETURN(FileStat st, files.StatInode(ino));
        ToProto(st, resp);
        return absl::OkStatus();
      });
}

}  // namespace server
}  // namespace cowkv
