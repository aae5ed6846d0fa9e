// cowkv.v1.Admin: Sync, Stats, Check, Version.
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "build_info/build_info.h"
#include "cowkv/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"
#include "server/convert.h"
#include "server/services.h"
#include "server/stats_table.h"

namespace cowkv {
namespace server {
namespace {

// Copies every StoreStats counter into the StatsResponse field of the same
// name (the table is the single list of them).
void FillStats(const StoreStats& stats, v1::StatsResponse* out) {
  const google::protobuf::Descriptor* d = out->GetDescriptor();
  const google::protobuf::Reflection* r = out->GetReflection();
  for (const StatField& f : StatFields()) {
    const google::protobuf::FieldDescriptor* field = d->FindFieldByName(f.name);
    if (field == nullptr) continue;  // stats_table_test keeps the two in step
    if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT32) {
      r->SetUInt32(out, field, static_cast<uint32_t>(f.get(stats)));
    } else {
      r->SetUInt64(out, field, f.get(stats));
    }
  }
}

// Check(device) reads the last committed state. Nodes of that state are
// only reused after the next commit frees them and a later one allocates
// them, so a run during which no commit landed is exact. If commits landed
// and the run found problems, check again with an engine handle open: no
// commit can start while it is held, so that run sees a still state.
absl::StatusOr<CheckReport> CheckOnline(Store& store, BlockDevice& device, bool* rechecked) {
  const uint64_t before = store.Stats().generation;
  COWKV_ASSIGN_OR_RETURN(CheckReport report, cowkv::Check(&device));
  *rechecked = false;
  if (report.ok() || store.Stats().generation == before) return report;
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> hold, store.Begin());
  absl::StatusOr<CheckReport> again = cowkv::Check(&device);
  hold->End();
  *rechecked = true;
  return again;
}

}  // namespace

grpc::Status AdminService::Sync(ServerContext* ctx, const v1::SyncRequest* req,
                                v1::SyncResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Admin/Sync", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    const absl::Time start = absl::Now();
    COWKV_RETURN_IF_ERROR(env_->store().Commit());
    env_->metrics().sync_commit().Observe(absl::Now() - start);
    // Stats().generation is the running transaction's; the one before it
    // is committed (and covers this call).
    resp->set_generation(env_->store().Stats().generation - 1);
    return absl::OkStatus();
  });
}

grpc::Status AdminService::Stats(ServerContext* ctx, const v1::StatsRequest* req,
                                 v1::StatsResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Admin/Stats", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    FillStats(env_->store().Stats(), resp);
    resp->set_server_open_handles(env_->txns().open());
    resp->set_server_expired_handles(env_->txns().expired_total());
    const TxnRegistry::Peaks peaks = env_->txns().peaks();
    resp->set_server_open_handles_peak(peaks.total);
    resp->set_server_open_handles_peak_per_client(peaks.per_client);
    resp->set_server_rpcs(env_->metrics().calls());
    resp->set_server_rpc_errors(env_->metrics().errors());
    resp->set_server_inflight_bytes(env_->budget().in_use());
    resp->set_server_inflight_peak_bytes(env_->budget().peak());
    resp->set_server_admission_waits(env_->budget().waits());
    resp->set_server_admission_refusals(env_->budget().refusals());
    if (follower_ != nullptr) {
      const int64_t now = absl::ToUnixMillis(absl::Now());
      for (const ReplicaStatus& r : follower_->Status()) {
        v1::ReplicaStatus* m = resp->add_server_replicas();
        m->set_subvolume(r.name);
        m->set_primary(follower_->primary());
        m->set_snapshot(r.snapshot);
        m->set_snapshot_unix_ms(static_cast<uint64_t>(r.snapshot_unix_ms));
        m->set_lag_seconds(r.snapshot_unix_ms == 0 ? -1.0 : (now - r.snapshot_unix_ms) / 1000.0);
        m->set_last_pull_unix_ms(static_cast<uint64_t>(r.last_pull_unix_ms));
        m->set_pulls(r.pulls);
        m->set_failures(r.failures);
        m->set_bytes_received(r.bytes_received);
        m->set_last_error(r.last_error);
      }
    }
    return absl::OkStatus();
  });
}

grpc::Status AdminService::Check(ServerContext* ctx, const v1::CheckRequest* req,
                                 v1::CheckResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Admin/Check", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    bool rechecked = false;
    COWKV_ASSIGN_OR_RETURN(CheckReport report,
                           CheckOnline(env_->store(), env_->device(), &rechecked));
    ToProto(report, resp);
    resp->set_rechecked(rechecked);
    return absl::OkStatus();
  });
}

grpc::Status AdminService::Version(ServerContext* ctx, const v1::VersionRequest* req,
                                   v1::VersionResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.Admin/Version", ServiceEnv::Errors::kPlain,
                   [&]() -> absl::Status {
    resp->set_version(kCowkvVersion);
    resp->set_api(kApiVersion);
    resp->set_git_commit(GitCommit());
    resp->set_build_type(BuildType());
    resp->set_grpc_version(grpc::Version());
    resp->set_protobuf_version(
        google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION));
    resp->set_nodesize(env_->store().nodesize());
    return absl::OkStatus();
  });
}

}  // namespace server
}  // namespace cowkv
