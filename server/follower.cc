#include "server/follower.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cowkv/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "cowkv/v1/subvolumes.grpc.pb.h"
#include "server/log.h"

namespace cowkv {
namespace server {

namespace v1 = ::cowkv::v1;

namespace {
// A List, Snapshot or Delete on the primary.
constexpr absl::Duration kCallTimeout = absl::Seconds(30);
}  // namespace

// The primary's Subvolumes service, each call with the pull's deadline
// and the bearer token.
class Follower::Primary {
 public:
  explicit Primary(const FollowOptions& o) : o_(o) {
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!o.tls_ca_pem.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = o.tls_ca_pem;
      creds = grpc::SslCredentials(ssl);
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    stub_ = v1::Subvolumes::NewStub(grpc::CreateCustomChannel(o.primary, creds, args));
  }
  // `stream`: the Send of a pull (pull_timeout); else a metadata call.
  std::unique_ptr<grpc::ClientContext> Ctx(bool stream = false) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    const absl::Duration d = stream ? o_.pull_timeout : std::min(o_.pull_timeout, kCallTimeout);
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(absl::ToInt64Milliseconds(d)));
    if (!o_.token.empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", o_.token));
    return ctx;
  }
  v1::Subvolumes::Stub& stub() { return *stub_; }

 private:
  const FollowOptions& o_;
  std::unique_ptr<v1::Subvolumes::Stub> stub_;
};

namespace {

absl::Status FromGrpc(absl::string_view what, const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("primary ", what, ": ", s.error_message()));
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

bool IsFollowSnapshot(absl::string_view name, absl::string_view of) {
  return absl::StartsWith(name, absl::StrCat(of, kFollowSuffix));
}

// Pipes the primary's Send of `snapshot` (against `parent`) into a local
// receive named `snapshot`.
absl::Status Transfer(v1::Subvolumes::Stub& stub, grpc::ClientContext* ctx, Store* store,
                      const std::string& snapshot, const std::string& parent, uint64_t* bytes) {
  v1::SendRequest req;
  req.set_snapshot(snapshot);
  req.set_parent(parent);
  std::unique_ptr<grpc::ClientReader<v1::SendResponse>> reader = stub.Send(ctx, req);
  ReceiveOptions ro;
  ro.name = snapshot;
  absl::StatusOr<std::unique_ptr<ReceiveStream>> rs = store->Receive(ro);
  if (!rs.ok()) {
    ctx->TryCancel();
    (void)reader->Finish();
    return rs.status();
  }
  v1::SendResponse m;
  absl::Status local;
  while (reader->Read(&m)) {
    if (m.chunk().empty()) continue;
    *bytes += m.chunk().size();
    local = (*rs)->Write(m.chunk());
    if (!local.ok()) {
      ctx->TryCancel();
      break;
    }
  }
  const grpc::Status sent = reader->Finish();
  COWKV_RETURN_IF_ERROR(local);
  COWKV_RETURN_IF_ERROR(FromGrpc("send", sent));
  return (*rs)->Finish().status();
}

}  // namespace

Follower::Follower(FollowOptions options, Store* store)
    : options_(std::move(options)), store_(store) {
  absl::MutexLock l(&mu_);
  for (const std::string& n : options_.subvolumes) {
    ReplicaStatus r;
    r.name = n;
    replicas_.push_back(r);
  }
}

Follower::~Follower() { Stop(); }

void Follower::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Follower::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  {
    absl::MutexLock l(&call_mu_);
    if (call_ != nullptr) call_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void Follower::Loop() {
  Primary primary(options_);
  int failures = 0;  // in a row, for the backoff
  for (;;) {
    bool all_ok = true;
    for (size_t i = 0; i < options_.subvolumes.size() && !stop_.HasBeenNotified(); ++i) {
      const std::string& name = options_.subvolumes[i];
      uint64_t bytes = 0;
      std::string snapshot;
      int64_t snapshot_ms = 0;
      absl::Status s = PullOnce(primary, name, &bytes, &snapshot, &snapshot_ms);
      absl::MutexLock l(&mu_);
      ReplicaStatus& r = replicas_[i];
      r.bytes_received += bytes;
      if (s.ok()) {
        ++r.pulls;
        r.last_pull_unix_ms = NowMs();
        r.snapshot = snapshot;
        r.snapshot_unix_ms = snapshot_ms;
        r.last_error.clear();
      } else {
        all_ok = false;
        ++r.failures;
        r.last_error = s.ToString();
        Log(LogLevel::kWarn, "follow_failed", absl::StrCat("pull of ", name, ": ", s.ToString()))
            .Str("subvolume", name);
      }
    }
    failures = all_ok ? 0 : std::min(failures + 1, 16);
    absl::Duration wait = options_.interval;
    for (int i = 0; i < failures && wait < options_.max_backoff; ++i) wait *= 2;
    if (stop_.WaitForNotificationWithTimeout(std::min(wait, std::max(options_.interval,
                                                                     options_.max_backoff)))) {
      return;
    }
  }
}

absl::Status Follower::PullOnce(Primary& primary, const std::string& name, uint64_t* bytes,
                                std::string* snapshot, int64_t* snapshot_ms) {
  // 1. The parent: the primary snapshot the local replica came from.
  std::string parent_uuid;
  absl::StatusOr<SubvolumeInfo> local = store_->ShowSubvolume(name);
  if (local.ok()) {
    if (!local->read_only || local->received_uuid.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "local subvolume '", name, "' is not a replica (not a received read-only snapshot)"));
    }
    parent_uuid = local->received_uuid;
  }
  v1::ListSubvolumesResponse listed;
  COWKV_RETURN_IF_ERROR(FromGrpc(
      "list", primary.stub().List(primary.Ctx().get(), v1::ListSubvolumesRequest(), &listed)));
  std::string parent;
  for (const v1::SubvolumeInfo& s : listed.subvolumes()) {
    if (!parent_uuid.empty() && s.uuid() == parent_uuid && IsFollowSnapshot(s.name(), name)) {
      parent = s.name();
    }
  }
  // 2. The new snapshot on the primary.
  v1::SnapshotRequest sreq;
  sreq.set_source(name);
  sreq.set_name(absl::StrCat(name, kFollowSuffix, NowMs()));
  sreq.set_read_only(true);
  v1::SubvolumeInfo made;
  COWKV_RETURN_IF_ERROR(
      FromGrpc("snapshot", primary.stub().Snapshot(primary.Ctx().get(), sreq, &made)));
  // 3. Send into a local receive (cancellable by Stop); 4. it becomes NAME.
  std::unique_ptr<grpc::ClientContext> ctx = primary.Ctx(/*stream=*/true);
  bool stopping = false;
  {
    absl::MutexLock l(&call_mu_);
    stopping = stop_.HasBeenNotified();
    call_ = stopping ? nullptr : ctx.get();
  }
  absl::Status s = stopping ? absl::CancelledError("follower stopping")
                            : Transfer(primary.stub(), ctx.get(), store_, made.name(), parent,
                                       bytes);
  {
    absl::MutexLock l(&call_mu_);
    call_ = nullptr;
  }
  if (s.ok()) s = store_->ReplaceSubvolume(made.name(), name);
  // 5. Rotate: on the primary all but the new one (or, after a failure,
  // all but the parent); here any leftover of a cut pull.
  const std::string keep = s.ok() ? made.name() : parent;
  for (const v1::SubvolumeInfo& p : listed.subvolumes()) {
    if (!IsFollowSnapshot(p.name(), name) || p.name() == keep) continue;
    v1::DeleteSubvolumeRequest d;
    d.set_name(p.name());
    v1::DeleteSubvolumeResponse dr;
    (void)primary.stub().Delete(primary.Ctx().get(), d, &dr);  // best effort: next pull retries
  }
  if (!s.ok()) {
    v1::DeleteSubvolumeRequest d;
    d.set_name(made.name());
    v1::DeleteSubvolumeResponse dr;
    (void)primary.stub().Delete(primary.Ctx().get(), d, &dr);
    return s;
  }
  for (const SubvolumeInfo& l : store_->ListSubvolumes()) {
    if (IsFollowSnapshot(l.name, name)) store_->DeleteSubvolume(l.name).IgnoreError();
  }
  *snapshot = made.name();
  *snapshot_ms = static_cast<int64_t>(made.created_unix_ms());
  return absl::OkStatus();
}

std::vector<ReplicaStatus> Follower::Status() const {
  absl::MutexLock l(&mu_);
  return replicas_;
}

std::string Follower::RenderMetrics() const {
  const std::vector<ReplicaStatus> all = Status();
  const int64_t now = NowMs();
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
    for (const ReplicaStatus& r : all) {
      absl::StrAppend(&out, name, "{subvolume=\"", r.name, "\"} ", value(r), "\n");
    }
  };
  family("cowkv_replica_lag_seconds", "gauge",
         "Seconds since the replica's snapshot was taken on the primary (-1: no replica yet).",
         [&](const ReplicaStatus& r) {
           return r.snapshot_unix_ms == 0 ? std::string("-1")
                                          : absl::StrCat((now - r.snapshot_unix_ms) / 1000.0);
         });
  family("cowkv_replica_bytes_received_total", "counter",
         "Send stream bytes received from the primary.",
         [](const ReplicaStatus& r) { return absl::StrCat(r.bytes_received); });
  family("cowkv_replica_pulls_total", "counter", "Pulls that completed.",
         [](const ReplicaStatus& r) { return absl::StrCat(r.pulls); });
  family("cowkv_replica_failures_total", "counter", "Pulls that failed.",
         [](const ReplicaStatus& r) { return absl::StrCat(r.failures); });
  family("cowkv_replica_up", "gauge", "1 if the last pull succeeded (0 before the first).",
         [](const ReplicaStatus& r) {
           return std::string(r.pulls > 0 && r.last_error.empty() ? "1" : "0");
         });
  return out;
}

}  // namespace server
}  // namespace cowkv
