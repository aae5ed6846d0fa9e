// cowkv.v1.Files streams: Read (server-streaming) and Write
// (client-streaming). Both check the call's deadline and cancellation
// between chunks, so a long transfer stops when the client gives up.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/admission.h"
#include "server/convert.h"
#include "server/files_util.h"
#include "server/limits.h"
#include "server/services.h"
#include "server/validate.h"

namespace cowkv {
namespace server {
namespace {

// Sends [offset, offset + length) of `ino` (length 0 = to EOF) in chunks.
absl::Status StreamRead(ServerContext* ctx, Files& files, uint64_t ino, uint64_t offset,
                        uint64_t length, ServerWriter<v1::ReadResponse>* writer,
                        MemoryBudget* budget, RpcMetrics* metrics) {
  COWKV_ASSIGN_OR_RETURN(FileStat st, files.StatInode(ino));
  COWKV_RETURN_IF_ERROR(CheckRegularFile(st));  // even where no byte would be read
  const uint64_t eof = st.size;
  uint64_t end = eof;
  if (length != 0 && offset + length < eof) end = offset + length;
  uint64_t pos = offset;
  do {
    COWKV_RETURN_IF_ERROR(ServiceEnv::CheckAlive(ctx));
    const uint64_t want = pos < end ? std::min<uint64_t>(kReadChunkBytes, end - pos) : 0;
    // The chunk's bytes are admitted before the read and held until the
    // client took the message: an unread stream holds one chunk at most.
    COWKV_ASSIGN_OR_RETURN(MemoryBudget::Grant grant, budget->Acquire(want, ctx));
    std::string data;
    if (want > 0) {
      absl::StatusOr<std::string> read = files.Read(ino, pos, want);
      if (absl::IsDataLoss(read.status())) {
        // The engine named the damaged extent (and counted it); say which
        // file and range too, keeping the engine's reason.
        return WithContext(read.status(),
                           absl::StrCat("EIO: inode ", ino, " [", pos, ", +", want, ")"));
      }
      COWKV_RETURN_IF_ERROR(read.status());
      data = std::move(*read);
    }
    v1::ReadResponse chunk;
    chunk.set_offset(pos);
    pos += data.size();
    // A short read means the file shrank under us: that is its end now.
    const bool at_eof = pos >= eof || data.size() < want;
    chunk.set_eof(at_eof);
    *chunk.mutable_data() = std::move(data);
    if (!writer->Write(chunk)) return absl::CancelledError("the client stopped reading");
    if (metrics != nullptr) metrics->StreamMessages("cowkv.v1.Files/Read", 0, 1);
    if (at_eof || want == 0) break;
  } while (pos < end);
  return absl::OkStatus();
}

// The first message of a Write stream names the file; later ones only carry
// data. Returns the inode, creating or truncating as asked.
absl::StatusOr<uint64_t> OpenForWrite(Files& files, const v1::WriteRequest& first) {
  COWKV_RETURN_IF_ERROR(ValidateMode(first.mode()));
  absl::StatusOr<uint64_t> ino = Resolve(files, "path", first.path(), first.ino());
  if (!ino.ok() && absl::IsNotFound(ino.status()) && first.create() && first.ino() == 0) {
    COWKV_ASSIGN_OR_RETURN(FileStat st,
                           files.Create(first.path(), first.mode() ? first.mode() : 0644));
    ino = st.ino;
  }
  if (!ino.ok()) return ino.status();
  COWKV_ASSIGN_OR_RETURN(FileStat st, files.StatInode(*ino));
  COWKV_RETURN_IF_ERROR(CheckRegularFile(st));  // even for a stream without data
  if (first.truncate()) COWKV_RETURN_IF_ERROR(files.Truncate(*ino, first.offset()));
  return *ino;
}

// The file of a Write stream whose first message names it by an open
// handle (truncated if asked): no create, the handle's subvolume.
absl::StatusOr<FileTarget> OpenHandleForWrite(ServiceEnv* env, const v1::WriteRequest& first) {
  COWKV_ASSIGN_OR_RETURN(FileTarget t, ResolveTarget(env, "", "path", "", 0, first.handle()));
  COWKV_ASSIGN_OR_RETURN(FileStat st, t.files.StatInode(t.ino));
  COWKV_RETURN_IF_ERROR(CheckRegularFile(st));
  if (first.truncate()) COWKV_RETURN_IF_ERROR(t.files.Truncate(t.ino, first.offset()));
  return t;
}

absl::Status CheckLaterChunk(const v1::WriteRequest& m) {
  if (!m.subvolume().empty() || !m.path().empty() || m.ino() != 0 || m.offset() != 0 ||
      m.create() || m.mode() != 0 || m.truncate() || m.handle() != 0) {
    return PosixError(ErrorReason::kEINVAL,
                      "only the first message of a Write stream names the file and offset");
  }
  return absl::OkStatus();
}

// Everything about the first message that the request alone decides, so
// that a bad one changes nothing (no file is created or truncated first).
absl::Status CheckFirstMessage(const v1::WriteRequest& first) {
  COWKV_RETURN_IF_ERROR(ValidateMode(first.mode()));
  COWKV_RETURN_IF_ERROR(ValidateTarget("path", first.path(), first.ino(), first.handle()));
  COWKV_RETURN_IF_ERROR(ValidateByteRange("write", first.offset(), first.data().size()));
  return ValidateFileEnd("write", first.offset(), first.data().size());
}

absl::Status CheckChunkSize(const v1::WriteRequest& m) {
  if (m.data().size() > kMaxWriteChunkBytes) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrCat("data: a Write chunk is at most ", kMaxWriteChunkBytes,
                                   " bytes, not ", m.data().size()));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status FilesService::Read(ServerContext* ctx, const v1::ReadRequest* req,
                                ServerWriter<v1::ReadResponse>* writer) {
  return env_->Run(ctx, "cowkv.v1.Files/Read", ServiceEnv::Errors::kPosix, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateByteRange("read", req->offset(), req->length()));
    COWKV_RETURN_IF_ERROR(ValidateTarget("path", req->path(), req->ino(), req->handle()));
    COWKV_ASSIGN_OR_RETURN(FileTarget t, ResolveTarget(env_, req->subvolume(), "path", req->path(),
                                                       req->ino(), req->handle()));
    Files files = t.files;
    const uint64_t ino = t.ino;
    return StreamRead(ctx, files, ino, req->offset(), req->length(), writer, &env_->budget(),
                      &env_->metrics());
  });
}

grpc::Status FilesService::Write(ServerContext* ctx, ServerReader<v1::WriteRequest>* reader,
                                 v1::WriteResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Files/Write", ServiceEnv::Errors::kPosix, [&]() -> absl::Status {
    v1::WriteRequest msg;
    uint64_t received = 0;
    // Counted however the stream ends.
    struct CountOnExit {
      RpcMetrics& m;
      uint64_t& n;
      ~CountOnExit() { m.StreamMessages("cowkv.v1.Files/Write", n, 0); }
    } count{env_->metrics(), received};
    if (!reader->Read(&msg)) {
      // gRPC reports a message that does not parse (invalid UTF-8 in
      // subvolume or path) exactly like the end of the stream.
      return PosixError(ErrorReason::kEINVAL,
                        "the Write stream ended before its first message, or that message did not "
                        "parse (subvolume and path must be UTF-8)");
    }
    ++received;
    COWKV_RETURN_IF_ERROR(CheckChunkSize(msg));
    COWKV_RETURN_IF_ERROR(CheckFirstMessage(msg));
    auto resolve = [&]() -> absl::StatusOr<FileTarget> {
      if (msg.handle() != 0) return OpenHandleForWrite(env_, msg);
      COWKV_ASSIGN_OR_RETURN(Files files, OpenFiles(env_, msg.subvolume()));
      COWKV_RETURN_IF_ERROR(CheckWritable(env_, msg.subvolume()));  // even without data
      COWKV_ASSIGN_OR_RETURN(uint64_t ino, OpenForWrite(files, msg));
      return FileTarget{files, ino};
    };
    COWKV_ASSIGN_OR_RETURN(FileTarget target, resolve());
    Files files = target.files;
    const uint64_t ino = target.ino;
    uint64_t pos = msg.offset();
    uint64_t written = 0;
    for (bool first = true;; first = false) {
      if (!first) {
        COWKV_RETURN_IF_ERROR(CheckLaterChunk(msg));
        COWKV_RETURN_IF_ERROR(CheckChunkSize(msg));
      }
      COWKV_RETURN_IF_ERROR(ValidateByteRange("write", pos, msg.data().size()));
      COWKV_RETURN_IF_ERROR(ValidateFileEnd("write", pos, msg.data().size()));
      if (!msg.data().empty()) COWKV_RETURN_IF_ERROR(files.Write(ino, pos, msg.data()));
      pos += msg.data().size();
      written += msg.data().size();
      COWKV_RETURN_IF_ERROR(ServiceEnv::CheckAlive(ctx));
      if (!reader->Read(&msg)) break;
      ++received;
    }
    resp->set_bytes_written(written);
    COWKV_ASSIGN_OR_RETURN(FileStat st, files.StatInode(ino));
    ToProto(st, resp->mutable_stat());
    return absl::OkStatus();
  });
}

}  // namespace server
}  // namespace cowkv
