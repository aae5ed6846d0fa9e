// The cowkv.v1 gRPC services: thin handlers that validate a request at the
// edge (validate.h), call the engine facade (engine/include/cowkv/store.h), and convert the
// result (convert.h). Every handler body runs inside ServiceEnv::Run, which
// owns authentication, the stopping state, deadlines, error mapping and
// metrics. docs/api.md gives the overview; proto/cowkv/v1/*.proto the fields.
//
// Thread-safe: gRPC calls handlers concurrently; they share only the
// ServiceEnv (thread-safe) and keep no state of their own.
#ifndef COWKV_SERVER_SERVICES_H_
#define COWKV_SERVER_SERVICES_H_

#include "cowkv/v1/admin.grpc.pb.h"
#include "cowkv/v1/files.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "cowkv/v1/subvolumes.grpc.pb.h"
#include "server/follower.h"
#include "server/service_env.h"

namespace cowkv {
namespace server {

using grpc::ServerContext;
using grpc::ServerReader;
using grpc::ServerWriter;

class SubvolumesService final : public v1::Subvolumes::Service {
 public:
  explicit SubvolumesService(ServiceEnv* env) : env_(env) {}
  grpc::Status Create(ServerContext* ctx, const v1::CreateSubvolumeRequest* req,
                      v1::SubvolumeInfo* resp) override;
  grpc::Status List(ServerContext* ctx, const v1::ListSubvolumesRequest* req,
                    v1::ListSubvolumesResponse* resp) override;
  grpc::Status Show(ServerContext* ctx, const v1::ShowSubvolumeRequest* req,
                    v1::SubvolumeInfo* resp) override;
  grpc::Status Rename(ServerContext* ctx, const v1::RenameSubvolumeRequest* req,
                      v1::RenameSubvolumeResponse* resp) override;
  grpc::Status Delete(ServerContext* ctx, const v1::DeleteSubvolumeRequest* req,
                      v1::DeleteSubvolumeResponse* resp) override;
  grpc::Status Snapshot(ServerContext* ctx, const v1::SnapshotRequest* req,
                        v1::SubvolumeInfo* resp) override;
  grpc::Status Sync(ServerContext* ctx, const v1::SyncSubvolumesRequest* req,
                    v1::SyncSubvolumesResponse* resp) override;
  // Send and receive (subvolumes_send_service.cc).
  grpc::Status Send(ServerContext* ctx, const v1::SendRequest* req,
                    ServerWriter<v1::SendResponse>* writer) override;
  grpc::Status Receive(ServerContext* ctx, ServerReader<v1::ReceiveRequest>* reader,
                       v1::ReceiveResponse* resp) override;
  grpc::Status Digest(ServerContext* ctx, const v1::DigestSubvolumeRequest* req,
                      v1::DigestSubvolumeResponse* resp) override;
  grpc::Status PartialReceives(ServerContext* ctx, const v1::PartialReceivesRequest* req,
                               v1::PartialReceivesResponse* resp) override;
  grpc::Status AbortReceive(ServerContext* ctx, const v1::AbortReceiveRequest* req,
                            v1::AbortReceiveResponse* resp) override;

 private:
  ServiceEnv* const env_;
};

// Put, Delete and Txn are callback-API methods: a durable write is applied
// on gRPC's thread and answered from the engine's durability thread, so
// waiting for a sync holds no thread (engine Subvolume::PutItemThen). They
// are raw methods that parse their own request (ParseRawRequest): an
// unparsable one is INVALID_ARGUMENT without the request-parse interceptor,
// whose per-call machinery cost ~12,000 instructions a put.
inline const std::vector<std::string>& KvMethodsParsedByHandler() {
  static const auto* const kMethods =
      new std::vector<std::string>{"/cowkv.v1.KV/Put", "/cowkv.v1.KV/Delete", "/cowkv.v1.KV/Txn"};
  return *kMethods;
}
using KvServiceBase = v1::KV::WithRawCallbackMethod_Put<
    v1::KV::WithRawCallbackMethod_Delete<v1::KV::WithRawCallbackMethod_Txn<v1::KV::Service>>>;

class KvService final : public KvServiceBase {
 public:
  explicit KvService(ServiceEnv* env) : env_(env) {}
  grpc::Status Get(ServerContext* ctx, const v1::GetRequest* req, v1::GetResponse* resp) override;
  grpc::Status Range(ServerContext* ctx, const v1::RangeRequest* req,
                     v1::RangeResponse* resp) override;
  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::Status DeleteRange(ServerContext* ctx, const v1::DeleteRangeRequest* req,
                           v1::DeleteRangeResponse* resp) override;
  grpc::ServerUnaryReactor* Txn(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override;
  // Interactive transactions (kv_txn_service.cc).
  grpc::Status Begin(ServerContext* ctx, const v1::BeginRequest* req,
                     v1::BeginResponse* resp) override;
  grpc::Status TxnGet(ServerContext* ctx, const v1::TxnGetRequest* req,
                      v1::GetResponse* resp) override;
  grpc::Status TxnRange(ServerContext* ctx, const v1::TxnRangeRequest* req,
                        v1::RangeResponse* resp) override;
  grpc::Status TxnPut(ServerContext* ctx, const v1::TxnPutRequest* req,
                      v1::TxnPutResponse* resp) override;
  grpc::Status TxnDelete(ServerContext* ctx, const v1::TxnDeleteRequest* req,
                         v1::TxnDeleteResponse* resp) override;
  grpc::Status Commit(ServerContext* ctx, const v1::CommitRequest* req,
                      v1::CommitResponse* resp) override;
  grpc::Status Abort(ServerContext* ctx, const v1::AbortRequest* req,
                     v1::AbortResponse* resp) override;
  // History (kv_history_service.cc).
  grpc::Status Compact(ServerContext* ctx, const v1::CompactRequest* req,
                       v1::CompactResponse* resp) override;
  // Watch (kv_watch_service.cc, watch_hub.h).
  grpc::Status Watch(
      ServerContext* ctx,
      grpc::ServerReaderWriter<v1::WatchResponse, v1::WatchRequest>* stream) override;

 private:
  // Runs a one-shot engine Txn on `subvolume`, timing durable ones.
  absl::StatusOr<TxnResponse> RunTxn(absl::string_view subvolume, const TxnRequest& txn);
  // Durable writes' latency (cowkv_durable_write_seconds), from `start`.
  void ObserveWrite(Durability d, absl::Time start);
  ServiceEnv* const env_;
};

class FilesService final : public v1::Files::Service {
 public:
  explicit FilesService(ServiceEnv* env) : env_(env) {}
  grpc::Status Stat(ServerContext* ctx, const v1::StatRequest* req, v1::FileStat* resp) override;
  grpc::Status Mkdir(ServerContext* ctx, const v1::MkdirRequest* req, v1::FileStat* resp) override;
  grpc::Status Create(ServerContext* ctx, const v1::CreateFileRequest* req,
                      v1::FileStat* resp) override;
  grpc::Status ReadDir(ServerContext* ctx, const v1::ReadDirRequest* req,
                       v1::ReadDirResponse* resp) override;
  grpc::Status Read(ServerContext* ctx, const v1::ReadRequest* req,
                    ServerWriter<v1::ReadResponse>* writer) override;
  grpc::Status Write(ServerContext* ctx, ServerReader<v1::WriteRequest>* reader,
                     v1::WriteResponse* resp) override;
  grpc::Status Truncate(ServerContext* ctx, const v1::TruncateRequest* req,
                        v1::FileStat* resp) override;
  grpc::Status Rename(ServerContext* ctx, const v1::RenameRequest* req,
                      v1::RenameResponse* resp) override;
  grpc::Status Link(ServerContext* ctx, const v1::LinkRequest* req, v1::FileStat* resp) override;
  grpc::Status Symlink(ServerContext* ctx, const v1::SymlinkRequest* req,
                       v1::FileStat* resp) override;
  grpc::Status ReadLink(ServerContext* ctx, const v1::ReadLinkRequest* req,
                        v1::ReadLinkResponse* resp) override;
  grpc::Status Unlink(ServerContext* ctx, const v1::UnlinkRequest* req,
                      v1::UnlinkResponse* resp) override;
  grpc::Status Rmdir(ServerContext* ctx, const v1::RmdirRequest* req,
                     v1::RmdirResponse* resp) override;
  grpc::Status Clone(ServerContext* ctx, const v1::CloneRequest* req,
                     v1::CloneResponse* resp) override;
  grpc::Status Fsync(ServerContext* ctx, const v1::FsyncRequest* req,
                     v1::FsyncResponse* resp) override;
  grpc::Status Fiemap(ServerContext* ctx, const v1::FiemapRequest* req,
                      v1::FiemapResponse* resp) override;
  // files_prealloc_service.cc.
  grpc::Status Fallocate(ServerContext* ctx, const v1::FallocateRequest* req,
                         v1::FileStat* resp) override;
  // Open files (files_handle_service.cc).
  grpc::Status Open(ServerContext* ctx, const v1::OpenRequest* req,
                    v1::OpenResponse* resp) override;
  grpc::Status CloseHandle(ServerContext* ctx, const v1::CloseRequest* req,
                     v1::CloseResponse* resp) override;
  grpc::Status CreateTmpfile(ServerContext* ctx, const v1::CreateTmpfileRequest* req,
                             v1::OpenResponse* resp) override;
  // files_attr_service.cc
  grpc::Status SetAttr(ServerContext* ctx, const v1::SetAttrRequest* req,
                       v1::FileStat* resp) override;
  grpc::Status SetXattr(ServerContext* ctx, const v1::SetXattrRequest* req,
                        v1::SetXattrResponse* resp) override;
  grpc::Status GetXattr(ServerContext* ctx, const v1::GetXattrRequest* req,
                        v1::GetXattrResponse* resp) override;
  grpc::Status ListXattrs(ServerContext* ctx, const v1::ListXattrsRequest* req,
                          v1::ListXattrsResponse* resp) override;
  grpc::Status RemoveXattr(ServerContext* ctx, const v1::RemoveXattrRequest* req,
                           v1::RemoveXattrResponse* resp) override;

 private:
  ServiceEnv* const env_;
};

class AdminService final : public v1::Admin::Service {
 public:
  // `follower`: the read replica's pulls for Stats (null: not a follower).
  AdminService(ServiceEnv* env, const Follower* follower) : env_(env), follower_(follower) {}
  grpc::Status Sync(ServerContext* ctx, const v1::SyncRequest* req,
                    v1::SyncResponse* resp) override;
  grpc::Status Stats(ServerContext* ctx, const v1::StatsRequest* req,
                     v1::StatsResponse* resp) override;
  grpc::Status Check(ServerContext* ctx, const v1::CheckRequest* req,
                     v1::CheckResponse* resp) override;
  grpc::Status Version(ServerContext* ctx, const v1::VersionRequest* req,
                       v1::VersionResponse* resp) override;

 private:
  ServiceEnv* const env_;
  const Follower* const follower_;
};

// cowkvd's version.

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_SERVICES_H_
