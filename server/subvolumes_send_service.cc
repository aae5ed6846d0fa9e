// cowkv.v1.Subvolumes: Send (server stream), Receive (client stream) and
// Digest. Memory per call is bounded: Send holds one piece of the stream
// (kSendPieceBytes plus one record) at a time and writes it before making
// the next (gRPC's flow control paces it to the reader); Receive holds one
// message (at most kMaxWriteChunkBytes) plus one record of the stream.
#include <memory>
#include <string>

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
}  // namespace

grpc::Status SubvolumesService::Send(ServerContext* ctx, const v1::SendRequest* req,
                                     ServerWriter<v1::SendResponse>* writer) {
  return env_->Run(
      ctx, "cowkv.v1.Subvolumes/Send", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
        COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("snapshot", req->snapshot()));
        COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(req->snapshot()));
        if (!req->parent().empty()) {
          COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("parent", req->parent()));
          COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(req->parent()));
        }
        SendOptions o;
        o.snapshot = req->snapshot();
        o.parent = req->parent();
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
        COWKV_ASSIGN_OR_RETURN(std::unique_ptr<ReceiveStream> rs, env_->store().Receive(o));
        for (bool first = true;; first = false) {
          if (!first && (!msg.name().empty() || msg.dry_run())) {
            return absl::InvalidArgumentError("name and dry_run go in the first message only");
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

}  // namespace server
}  // namespace cowkv
