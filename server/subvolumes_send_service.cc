// cowkv.v1.Subvolumes: Send (server stream), Receive (client stream) and
// Digest. Memory per call is bounded: Send holds one piece of the stream
// (kSendPieceBytes plus one record) at a time and writes it before making
// the next (gRPC's flow control paces it to the reader); Receive holds one
// message (at most kMaxWriteChunkBytes) plus one record of the stream.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/limits.h"
#include "server/services.h"
#include "server/validate.h"

namespace cowkv {
namespace server {

namespace {
// The stream's bytes per SendResponse (a piece may exceed it by one
// record of at most 128 KiB).
constexpr size_t kSendPieceBytes = 256u << 10;
static_assert(kSendPieceBytes + (128u << 10) + 4096 < kMaxMessageBytes, "a piece fits a message");
// A resume token's text: base64 of at most ~1.6 KiB.
constexpr size_t kMaxResumeTokenChars = 4096;
}  // namespace

grpc::Status SubvolumesService::Send(ServerContext* ctx, const v1::SendRequest* req,
                                     ServerWriter<v1::SendResponse>* writer) {
  return env_->Run(
      ctx, "cowkv.v1.Subvolumes/Send", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
        SendOptions o;
        o.snapshot = req->snapshot();
        o.parent = req->parent();
        if (!req->resume_token().empty()) {
          // The token names the snapshots: resolve them, so that the
          // caller's access is checked on their names.
          if (req->resume_token().size() > kMaxResumeTokenChars) {
            return WithReason(absl::InvalidArgumentError("resume_token: too long"),
                              ErrorReason::kResumeToken);
          }
          COWKV_ASSIGN_OR_RETURN(SendOptions named,
                                 env_->store().ResumeSendOptions(req->resume_token()));
          if (!o.snapshot.empty() && o.snapshot != named.snapshot) {
            return WithReason(absl::FailedPreconditionError(absl::StrCat(
                                  "resume_token: it is of snapshot '", named.snapshot, "'")),
                              ErrorReason::kResumeMismatch);
          }
          o = named;
        }
        COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("snapshot", o.snapshot));
        COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(o.snapshot));
        if (!o.parent.empty()) {
          COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("parent", o.parent));
          COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(o.parent));
        }
        o.piece_bytes = kSendPieceBytes;
        v1::SendResponse m;
        COWKV_ASSIGN_OR_RETURN(SendReport r,
                               env_->store().Send(o, [&](absl::string_view bytes) -> absl::Status {
                                 COWKV_RETURN_IF_ERROR(ServiceEnv::CheckAlive(ctx));
                                 m.set_chunk(std::string(bytes));
                                 if (!writer->Write(m)) {
                                   return absl::CancelledError("send: the reader went away");
                                 }
                                 return absl::OkStatus();
                               }));
        m.Clear();
        v1::SendStats* st = m.mutable_stats();
        st->set_records(r.records);
        st->set_bytes(r.bytes);
        st->set_items(r.items);
        st->set_deletes(r.deletes);
        st->set_clones(r.clones);
        st->set_data_bytes(r.data_bytes);
        st->set_nodes_read(r.nodes_read);
        st->set_subtrees_skipped(r.subtrees_skipped);
        if (!writer->Write(m)) return absl::CancelledError("send: the reader went away");
        return absl::OkStatus();
      });
}

grpc::Status SubvolumesService::Receive(ServerContext* ctx,
                                        ServerReader<v1::ReceiveRequest>* reader,
                                        v1::ReceiveResponse* resp) {
  return env_->Run(
      ctx, "cowkv.v1.Subvolumes/Receive", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
        v1::ReceiveRequest msg;
        if (!reader->Read(&msg)) {
          return absl::InvalidArgumentError("the Receive stream ended before its first message");
        }
        if (!msg.name().empty()) COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("name", msg.name()));
        ReceiveOptions o;
        o.name = msg.name();
        o.dry_run = msg.dry_run();
        o.resumable = msg.resumable();
        COWKV_ASSIGN_OR_RETURN(std::unique_ptr<ReceiveStream> rs, env_->store().Receive(o));
        for (bool first = true;; first = false) {
          if (!first && (!msg.name().empty() || msg.dry_run() || msg.resumable())) {
            return absl::InvalidArgumentError(
                "name, dry_run and resumable go in the first message only");
          }
          if (msg.chunk().size() > kMaxWriteChunkBytes) {
            return WithReason(absl::InvalidArgumentError(absl::StrCat(
                                  "chunk: at most ", kMaxWriteChunkBytes, " bytes per message")),
                              ErrorReason::kLimit);
          }
          COWKV_RETURN_IF_ERROR(rs->Write(msg.chunk()));
          COWKV_RETURN_IF_ERROR(ServiceEnv::CheckAlive(ctx));
          if (!reader->Read(&msg)) break;
        }
        COWKV_ASSIGN_OR_RETURN(ReceiveReport r, rs->Finish());
        resp->set_name(r.name);
        resp->set_id(r.id);
        resp->set_incremental(r.incremental);
        resp->set_parent(r.parent);
        resp->set_records(r.records);
        resp->set_bytes(r.bytes);
        resp->set_items(r.items);
        resp->set_deletes(r.deletes);
        resp->set_clones(r.clones);
        resp->set_data_bytes(r.data_bytes);
        return absl::OkStatus();
      });
}

grpc::Status SubvolumesService::Digest(ServerContext* ctx, const v1::DigestSubvolumeRequest* req,
                                       v1::DigestSubvolumeResponse* resp) {
  return env_->Run(
      ctx, "cowkv.v1.Subvolumes/Digest", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
        COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("name", req->name()));
        COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(req->name()));
        COWKV_ASSIGN_OR_RETURN(SubvolumeDigest d, env_->store().DigestSubvolume(req->name()));
        resp->set_sha256(d.sha256_hex);
        resp->set_items(d.items);
        resp->set_data_bytes(d.data_bytes);
        return absl::OkStatus();
      });
}

grpc::Status SubvolumesService::PartialReceives(ServerContext* ctx,
                                                const v1::PartialReceivesRequest*,
                                                v1::PartialReceivesResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Subvolumes/PartialReceives", ServiceEnv::Errors::kPlain,
                   [&]() -> absl::Status {
                     COWKV_ASSIGN_OR_RETURN(std::vector<PartialReceive> all,
                                            env_->store().PartialReceives());
                     for (const PartialReceive& p : all) {
                       if (!ServiceEnv::RequireSubvolume(p.name).ok()) continue;
                       v1::PartialReceive* m = resp->add_partial();
                       m->set_name(p.name);
                       m->set_token(p.token);
                       m->set_records(p.records);
                       m->set_bytes(p.bytes);
                       m->set_uuid(p.uuid);
                       m->set_generation(p.generation);
                       m->set_parent_uuid(p.parent_uuid);
                       m->set_in_use(p.in_use);
                     }
                     return absl::OkStatus();
                   });
}

grpc::Status SubvolumesService::AbortReceive(ServerContext* ctx, const v1::AbortReceiveRequest* req,
                                             v1::AbortReceiveResponse*) {
  return env_->Run(ctx, "cowkv.v1.Subvolumes/AbortReceive", ServiceEnv::Errors::kPlain,
                   [&]() -> absl::Status {
                     COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("name", req->name()));
                     return env_->store().AbortPartialReceive(req->name());
                   });
}

}  // namespace server
}  // namespace cowkv
