// cowkv.v1.KV/Watch: one stream, many watchers (watch_hub.h). The handler
// thread runs inside ServiceEnv::Run (so the caller's token applies to
// every create: read access, the subvolume's visibility); a reader thread
// of the stream's own only reads requests into the stream's WatchSink. The
// handler handles them, writes what the hub and it queued, and ends the
// stream when the client half-closes, cancels, or the server stops.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cowkv/status_macros.h"
#include "server/connections.h"
#include "server/services.h"
#include "server/status_mapping.h"
#include "server/watch_hub.h"

namespace cowkv {
namespace server {

namespace {

using WatchStreamRW = grpc::ServerReaderWriter<v1::WatchResponse, v1::WatchRequest>;

// The keys of a create request as [start, end) (etcd's key/range_end).
absl::Status WatchRange(const v1::WatchCreateRequest& c, std::string* start, std::string* end) {
  if (c.key().empty() && c.range_end().empty()) {
    return absl::InvalidArgumentError("key: empty (use range_end \"\\0\" to watch every key)");
  }
  if (c.key().size() > kMaxKeySize || c.range_end().size() > kMaxKeySize + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("key / range_end: longer than ", kMaxKeySize, " bytes"));
  }
  *start = c.key();
  if (c.range_end().empty()) {
    *end = c.key() + std::string(1, '\0');  // the one key
  } else if (c.range_end() == std::string(1, '\0')) {
    end->clear();  // every key from `key` on
  } else if (c.range_end() <= c.key()) {
    return absl::InvalidArgumentError("range_end: not after key (the range is empty)");
  } else {
    *end = c.range_end();
  }
  return absl::OkStatus();
}

class WatchStream {
 public:
  WatchStream(ServiceEnv* env, WatchHub* hub, grpc::ServerContext* ctx, WatchStreamRW* stream)
      : env_(env),
        hub_(hub),
        ctx_(ctx),
        stream_(stream),
        sink_(std::make_shared<WatchSink>(hub->limits().stream_buffer_bytes,
                                          StreamSoftBytes(hub->limits()))),
        peer_(PeerAddress(ctx->peer())) {}

  absl::Status Serve();
  uint64_t received() const { return received_; }
  uint64_t sent() const { return sent_; }

 private:
  void Handle(const v1::WatchRequest& r);
  void Create(const v1::WatchCreateRequest& c);
  // The create's checks and its watcher; an error refuses it.
  absl::StatusOr<std::shared_ptr<Watcher>> NewWatcher(const v1::WatchCreateRequest& c, int64_t id,
                                                      std::unique_ptr<Subvolume>* sv);
  absl::StatusOr<std::shared_ptr<Watcher>> NewFileWatcher(const v1::WatchCreateRequest& c,
                                                          std::shared_ptr<Watcher> w,
                                                          std::unique_ptr<Subvolume>* sv);
  void CancelOne(int64_t id);
  void ProgressAll();
  int64_t PickId();
  void Forget();  // drops the watchers the hub ended (they stay cancelled)
  void End();

  ServiceEnv* const env_;
  WatchHub* const hub_;
  grpc::ServerContext* const ctx_;
  WatchStreamRW* const stream_;
  const std::shared_ptr<WatchSink> sink_;
  const std::string peer_;
  std::map<int64_t, std::shared_ptr<Watcher>> watchers_;
  int64_t next_id_ = 1;
  uint64_t received_ = 0, sent_ = 0;
  std::thread reader_;
  bool reader_done_ = false;
};

absl::Status WatchStream::Serve() {
  reader_ = std::thread([this] {
    v1::WatchRequest r;
    while (stream_->Read(&r)) {
      sink_->PushRequest(std::move(r));
      r.Clear();
    }
    sink_->ReaderDone();
  });
  absl::Status out;
  for (;;) {
    WatchSink::Work work;
    sink_->Take(absl::Milliseconds(500), &work);
    reader_done_ = work.reader_done;
    bool gone = false;
    for (size_t i = 0; i < work.responses.size(); ++i) {
      if (!stream_->Write(work.responses[i])) {
        gone = true;  // the client left
        break;
      }
      sink_->Written(work.sizes[i]);  // flow control: the hub may send more
      ++sent_;
    }
    if (gone) break;
    for (const v1::WatchRequest& r : work.requests) {
      ++received_;
      Handle(r);
    }
    // The client closed its side (etcd ends the stream then too), and
    // everything it asked for was answered.
    if (work.reader_done && work.requests.empty() && work.responses.empty()) break;
    if (hub_->stopped()) {
      WatchSink::Work last;
      sink_->Take(absl::ZeroDuration(), &last);
      for (const v1::WatchResponse& r : last.responses) {
        if (!stream_->Write(r)) break;
      }
      out = absl::UnavailableError("the server is stopping");
      break;
    }
    out = ServiceEnv::CheckAlive(ctx_);
    if (!out.ok()) break;
  }
  End();
  return out;
}

void WatchStream::End() {
  sink_->Close();
  for (const auto& [id, w] : watchers_) hub_->Remove(w.get());
  watchers_.clear();
  if (!reader_done_) ctx_->TryCancel();  // ends the reader's Read
  if (reader_.joinable()) reader_.join();
}

void WatchStream::Handle(const v1::WatchRequest& r) {
  switch (r.request_union_case()) {
    case v1::WatchRequest::kCreateRequest:
      return Create(r.create_request());
    case v1::WatchRequest::kCancelRequest:
      return CancelOne(r.cancel_request().watch_id());
    case v1::WatchRequest::kProgressRequest:
      return ProgressAll();
    default:
      sink_->Control(CancelResponse(-1, v1::WATCH_CANCEL_REFUSED, "an empty WatchRequest",
                                    absl::InvalidArgumentError("request_union: not set")));
  }
}

int64_t WatchStream::PickId() {
  while (watchers_.count(next_id_)) ++next_id_;
  return next_id_++;
}

void WatchStream::Forget() {
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    if (sink_->IsCanceled(it->second.get())) {
      hub_->Remove(it->second.get());
      it = watchers_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<std::shared_ptr<Watcher>> WatchStream::NewWatcher(const v1::WatchCreateRequest& c,
                                                                 int64_t id,
                                                                 std::unique_ptr<Subvolume>* sv) {
  if (static_cast<int>(watchers_.size()) >= hub_->limits().per_stream) {
    return WithServerReason(
        absl::ResourceExhaustedError(absl::StrCat("too many watchers on this stream (limit ",
                                                  hub_->limits().per_stream, ")")),
        "TOO_MANY_WATCHERS");
  }
  auto w = std::make_shared<Watcher>();
  w->id = id;
  w->peer = peer_;
  w->sink = sink_;
  w->prev_kv = c.prev_kv();
  w->progress_notify = c.progress_notify();
  if (c.has_files()) return NewFileWatcher(c, std::move(w), sv);
  COWKV_RETURN_IF_ERROR(WatchRange(c, &w->start, &w->end));
  for (int f : c.filters()) {
    if (f == v1::WatchCreateRequest::NOPUT) {
      w->no_put = true;
    } else if (f == v1::WatchCreateRequest::NODELETE) {
      w->no_delete = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("filters: unknown value ", f));
    }
  }
  COWKV_ASSIGN_OR_RETURN(*sv, env_->OpenSubvolume("subvolume", c.subvolume()));
  w->subvol = (*sv)->id();
  uint64_t start = c.start_revision();
  if (start == 0) {
    // The next change: the current revision + 1 (GetItem reports the
    // store revision whether or not the key exists).
    uint64_t now = 0;
    (void)(*sv)->GetItem(std::string(1, '\0'), 1, &now);
    start = now + 1;
  }
  w->next.store(start, std::memory_order_relaxed);
  return w;
}

// A file watcher: checks, then its registration (Subvolume::StartFileEvents,
// which the hub's Remove ends).
absl::StatusOr<std::shared_ptr<Watcher>> WatchStream::NewFileWatcher(
    const v1::WatchCreateRequest& c, std::shared_ptr<Watcher> w, std::unique_ptr<Subvolume>* sv) {
  if (!c.key().empty() || !c.range_end().empty() || c.filters_size() > 0 || c.prev_kv()) {
    return absl::InvalidArgumentError(
        "files: a file watcher takes no key, range_end, filters or prev_kv");
  }
  if (c.files().prefix().size() > kMaxPathLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("files.prefix: longer than ", kMaxPathLen, " bytes"));
  }
  w->files = true;
  w->file_prefix = c.files().prefix();
  COWKV_ASSIGN_OR_RETURN(*sv, env_->OpenSubvolume("subvolume", c.subvolume()));
  w->subvol = (*sv)->id();
  COWKV_ASSIGN_OR_RETURN(const uint64_t span, (*sv)->StartFileEvents());
  uint64_t start = c.start_revision();
  if (start == 0) {
    uint64_t now = 0;
    (void)(*sv)->GetItem(std::string(1, '\0'), 1, &now);
    start = std::max(now + 1, span);
  }
  w->next.store(start, std::memory_order_relaxed);
  return w;
}

void WatchStream::Create(const v1::WatchCreateRequest& c) {
  Forget();
  int64_t id = c.watch_id();
  absl::Status refused;
  if (id < 0) {
    refused = absl::InvalidArgumentError(absl::StrCat("watch_id: ", id, " < 0"));
  } else if (id > 0 && watchers_.count(id)) {
    refused = absl::AlreadyExistsError(absl::StrCat("watch_id: ", id, " is in use on the stream"));
  } else if (id == 0) {
    id = PickId();
  }
  std::unique_ptr<Subvolume> sv;
  absl::StatusOr<std::shared_ptr<Watcher>> w =
      refused.ok() ? NewWatcher(c, id, &sv) : absl::StatusOr<std::shared_ptr<Watcher>>(refused);
  if (w.ok()) {
    v1::WatchResponse created;
    created.set_watch_id(id);
    created.set_created(true);
    refused = hub_->Add(*w, std::move(sv), std::move(created));
    if (refused.ok()) {
      watchers_[id] = *w;
      return;
    }
  } else {
    refused = w.status();
  }
  v1::WatchResponse r =
      CancelResponse(id, v1::WATCH_CANCEL_REFUSED, std::string(refused.message()), refused);
  r.set_created(true);  // etcd: a refused create is created and cancelled at once
  sink_->Control(std::move(r));
}

void WatchStream::CancelOne(int64_t id) {
  auto it = watchers_.find(id);
  if (it == watchers_.end()) {
    sink_->Control(CancelResponse(
        id, v1::WATCH_CANCEL_CLIENT, "no such watcher on this stream",
        absl::NotFoundError(absl::StrCat("watch_id: ", id, " is not a watcher of the stream"))));
    return;
  }
  hub_->Remove(it->second.get());
  sink_->Cancel(it->second.get(),
                CancelResponse(id, v1::WATCH_CANCEL_CLIENT, "cancelled by the client"));
  watchers_.erase(it);
}

void WatchStream::ProgressAll() {
  uint64_t rev = env_->store().Durable().revision;
  for (const auto& [id, w] : watchers_) {
    if (sink_->IsCanceled(w.get())) continue;
    const uint64_t next = w->next.load(std::memory_order_relaxed);
    rev = std::min(rev, next == 0 ? 0 : next - 1);
  }
  v1::WatchResponse r;
  r.set_watch_id(-1);
  r.set_revision(rev);
  sink_->Control(std::move(r));
}

}  // namespace

grpc::Status KvService::Watch(ServerContext* ctx, WatchStreamRW* stream) {
  const char* const method = "cowkv.v1.KV/Watch";
  return env_->Run(ctx, method, ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    WatchHub* hub = env_->watch_hub();
    if (hub == nullptr || hub->stopping()) {
      return absl::UnavailableError("the server is stopping");
    }
    WatchStream w(env_, hub, ctx, stream);
    absl::Status s = w.Serve();
    env_->metrics().StreamMessages(method, w.received(), w.sent());
    return s;
  });
}

}  // namespace server
}  // namespace cowkv
