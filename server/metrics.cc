// Prometheus text rendering and RPC counters; see metrics.h.
#include "server/metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "build_info/build_info.h"
#include "server/stats_table.h"

namespace cowkv {
namespace server {
namespace {

constexpr absl::string_view kCodeNames[] = {
    "OK",        "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",       "DATA_LOSS",
    "UNAUTHENTICATED"};

// Shortest text that reads back as the same double (%.17g at most): a
// value >= 1e9 is no longer rounded to 9 digits.
std::string Number(double v) {
  for (int digits = 9; digits < 17; ++digits) {
    std::string s = absl::StrFormat("%.*g", digits, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

void Header(absl::string_view name, absl::string_view type, absl::string_view help,
            std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string JoinLabels(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  return absl::StrCat(a, ",", b);
}

void RenderStats(const StoreStats& stats, std::string* out) {
  absl::string_view last;
  for (const StatField& f : StatFields()) {
    if (f.metric == nullptr) continue;  // Admin.Stats only
    if (f.metric != last) {
      Header(f.metric, f.counter ? "counter" : "gauge", f.help, out);
      last = f.metric;
    }
    // Counters and byte gauges are integers: printed exactly, whatever
    // their size (a double would round those past 2^53, %.9g past 1e9).
    const uint64_t raw = f.get(stats);
    const std::string v = f.scale == 1 ? absl::StrCat(raw) : Number(static_cast<double>(raw) * f.scale);
    absl::StrAppend(out, f.metric, *f.labels ? absl::StrCat("{", f.labels, "}") : "", " ", v, "\n");
  }
}

// One engine histogram: cumulative buckets, +Inf, _sum and _count.
void RenderSnapshot(absl::string_view name, absl::string_view labels,
                    const LatencyHistogramSnapshot& h, std::string* out) {
  for (size_t i = 0; i < h.upper_bounds_seconds.size() && i < h.cumulative_counts.size(); ++i) {
    absl::StrAppend(
        out, name, "_bucket{",
        JoinLabels(labels, absl::StrCat("le=\"", Number(h.upper_bounds_seconds[i]), "\"")), "} ",
        h.cumulative_counts[i], "\n");
  }
  const std::string braces = labels.empty() ? "" : absl::StrCat("{", labels, "}");
  absl::StrAppend(out, name, "_bucket{", JoinLabels(labels, "le=\"+Inf\""), "} ", h.count, "\n");
  absl::StrAppend(out, name, "_sum", braces, " ", Number(h.sum_seconds), "\n");
  absl::StrAppend(out, name, "_count", braces, " ", h.count, "\n");
}

// The engine's own latency histograms (StoreStats::commit_latency and
// log_sync_latency): every engine commit by trigger, every log sync.
void RenderEngineLatency(const StoreStats& stats, std::string* out) {
  Header("cowkv_commit_duration_seconds", "histogram",
         "Latency of every engine commit, by trigger: from the commit taking the commit lock "
         "(delayed refs, waiting for open handles, seal, node writes, flush, superblocks, "
         "flush) to its generation published.",
         out);
  for (const CommitLatency& c : stats.commit_latency) {
    RenderSnapshot("cowkv_commit_duration_seconds", absl::StrCat("trigger=\"", c.trigger, "\""),
                   c.latency, out);
  }
  Header("cowkv_log_sync_duration_seconds", "histogram",
         "Latency of every log sync: writing its log nodes and root block, and the flush.", out);
  RenderSnapshot("cowkv_log_sync_duration_seconds", "", stats.log_sync_latency, out);
}

}  // namespace

absl::string_view CodeName(grpc::StatusCode code) {
  const int c = static_cast<int>(code);
  if (c < 0 || c >= static_cast<int>(sizeof(kCodeNames) / sizeof(kCodeNames[0]))) {
    return "UNKNOWN";
  }
  return kCodeNames[c];
}

void LatencyHistogram::Observe(absl::Duration d) {
  const double s = absl::ToDoubleSeconds(d);
  for (size_t i = 0; i < kBucketsSeconds.size(); ++i) {
    if (s <= kBucketsSeconds[i]) {
      buckets_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(absl::ToInt64Nanoseconds(d)),
                    std::memory_order_relaxed);
}

void LatencyHistogram::Render(absl::string_view name, absl::string_view labels,
                              std::string* out) const {
  // Prometheus buckets are cumulative; ours are per bucket (and +Inf is
  // the count: an observation past the last bound lands in none).
  LatencyHistogramSnapshot h;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBucketsSeconds.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    h.upper_bounds_seconds.push_back(kBucketsSeconds[i]);
    h.cumulative_counts.push_back(cumulative);
  }
  h.count = count_.load(std::memory_order_relaxed);
  h.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  RenderSnapshot(name, labels, h, out);
}

RpcMetrics::RpcMetrics(const std::vector<std::string>& methods) {
  for (const std::string& full : methods) {
    auto m = std::make_unique<Method>();
    const size_t slash = full.find('/');
    m->service = full.substr(0, slash);
    m->name = slash == std::string::npos ? "" : full.substr(slash + 1);
    if (full == "cowkv.v1.Files/Read") m->type = "server_stream";
    if (full == "cowkv.v1.Files/Write") m->type = "client_stream";
    order_.push_back(m.get());
    methods_[full] = std::move(m);
  }
  other_ = std::make_unique<Method>();
  other_->service = "other";
  other_->name = "other";
  order_.push_back(other_.get());
}

RpcMetrics::Method* RpcMetrics::Find(absl::string_view method) const {
  auto it = methods_.find(method);
  return it == methods_.end() ? other_.get() : it->second.get();
}

void RpcMetrics::Started(absl::string_view method) {
  Method* m = Find(method);
  m->started.fetch_add(1, std::memory_order_relaxed);
  if (std::string_view(m->type) != "client_stream") m->received.fetch_add(1, std::memory_order_relaxed);
}

void RpcMetrics::StreamMessages(absl::string_view method, uint64_t received, uint64_t sent) {
  Method* m = Find(method);
  m->received.fetch_add(received, std::memory_order_relaxed);
  m->sent.fetch_add(sent, std::memory_order_relaxed);
}

void RpcMetrics::Record(absl::string_view method, grpc::StatusCode code, absl::Duration latency) {
  Method* m = Find(method);
  if (code == grpc::StatusCode::OK && std::string_view(m->type) != "server_stream") {
    m->sent.fetch_add(1, std::memory_order_relaxed);
  }
  int c = static_cast<int>(code);
  if (c < 0 || c >= kCodes) c = static_cast<int>(grpc::StatusCode::UNKNOWN);
  m->codes[c].fetch_add(1, std::memory_order_relaxed);
  m->latency.Observe(latency);
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (code != grpc::StatusCode::OK) errors_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t RpcMetrics::CallsOf(absl::string_view method) const { return Find(method)->latency.count(); }

void RpcMetrics::Render(std::string* out) const {
  // The labels and names of go-grpc-prometheus, so stock dashboards work.
  auto labels = [](const Method* m) {
    return absl::StrCat("grpc_type=\"", m->type, "\",grpc_service=\"", m->service,
                        "\",grpc_method=\"", m->name, "\"");
  };
  Header("grpc_server_started_total", "counter", "RPCs started on the server.", out);
  for (const Method* m : order_) {
    absl::StrAppend(out, "grpc_server_started_total{", labels(m), "} ",
                    m->started.load(std::memory_order_relaxed), "\n");
  }
  Header("grpc_server_msg_received_total", "counter", "RPC stream messages received on the server.", out);
  for (const Method* m : order_) {
    absl::StrAppend(out, "grpc_server_msg_received_total{", labels(m), "} ",
                    m->received.load(std::memory_order_relaxed), "\n");
  }
  Header("grpc_server_msg_sent_total", "counter", "RPC stream messages sent by the server.", out);
  for (const Method* m : order_) {
    absl::StrAppend(out, "grpc_server_msg_sent_total{", labels(m), "} ",
                    m->sent.load(std::memory_order_relaxed), "\n");
  }
  Header("grpc_server_handled_total", "counter",
         "RPCs completed on the server, by method and gRPC status code.", out);
  for (const Method* m : order_) {
    for (int c = 0; c < kCodes; ++c) {
      const uint64_t n = m->codes[c].load(std::memory_order_relaxed);
      if (n == 0 && c != 0) continue;  // codes that never happened stay out
      absl::StrAppend(out, "grpc_server_handled_total{", labels(m), ",grpc_code=\"",
                      CodeName(static_cast<grpc::StatusCode>(c)), "\"} ", n, "\n");
    }
  }
  Header("grpc_server_handling_seconds", "histogram",
         "Latency of RPCs on the server, from the handler's start to its status.", out);
  for (const Method* m : order_) {
    m->latency.Render("grpc_server_handling_seconds", labels(m), out);
  }
  Header("cowkv_sync_commit_duration_seconds", "histogram",
         "Latency of engine commits run for Admin.Sync (two device flushes).", out);
  sync_commit_.Render("cowkv_sync_commit_duration_seconds", "", out);
  Header("cowkv_durable_write_duration_seconds", "histogram",
         "Latency of durable KV writes (Put, Delete, DeleteRange, Txn, Commit), "
         "which wait for a log sync or an engine commit.",
         out);
  durable_write_.Render("cowkv_durable_write_duration_seconds", "", out);
}

// The standard process_* metrics (Prometheus client libraries' names), from
// /proc/self; a figure that cannot be read is left out.
void RenderProcess(std::string* out) {
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses and may hold spaces.
  const size_t close = stat.rfind(')');
  if (close != std::string::npos && ticks > 0) {
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ', absl::SkipEmpty());
    // f[0] is field 3 (state): utime = field 14, stime 15, threads 20, starttime 22, vsize 23, rss 24.
    uint64_t utime = 0, stime = 0, threads = 0, start = 0, vsize = 0, rss = 0;
    if (f.size() > 21 && absl::SimpleAtoi(f[11], &utime) && absl::SimpleAtoi(f[12], &stime) &&
        absl::SimpleAtoi(f[17], &threads) && absl::SimpleAtoi(f[19], &start) &&
        absl::SimpleAtoi(f[20], &vsize) && absl::SimpleAtoi(f[21], &rss)) {
      Header("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", out);
      absl::StrAppend(out, "process_cpu_seconds_total ",
                      Number(static_cast<double>(utime + stime) / static_cast<double>(ticks)), "\n");
      Header("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", out);
      absl::StrAppend(out, "process_resident_memory_bytes ", rss * static_cast<uint64_t>(page), "\n");
      Header("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", out);
      absl::StrAppend(out, "process_virtual_memory_bytes ", vsize, "\n");
      Header("process_threads", "gauge", "Number of OS threads in the process.", out);
      absl::StrAppend(out, "process_threads ", threads, "\n");
      std::ifstream proc_stat("/proc/stat");
      std::string line;
      while (std::getline(proc_stat, line)) {
        uint64_t btime = 0;
        if (absl::StartsWith(line, "btime ") && absl::SimpleAtoi(line.substr(6), &btime)) {
          Header("process_start_time_seconds", "gauge",
                 "Start time of the process since unix epoch in seconds.", out);
          absl::StrAppend(out, "process_start_time_seconds ",
                          Number(static_cast<double>(btime) +
                                 static_cast<double>(start) / static_cast<double>(ticks)),
                          "\n");
          break;
        }
      }
    }
  }
  uint64_t fds = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) fds += e->d_name[0] != '.';
    ::closedir(d);
    Header("process_open_fds", "gauge", "Number of open file descriptors.", out);
    absl::StrAppend(out, "process_open_fds ", fds > 0 ? fds - 1 : 0, "\n");  // less opendir's own
  }
  rlimit lim;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    Header("process_max_fds", "gauge", "Maximum number of open file descriptors.", out);
    absl::StrAppend(out, "process_max_fds ", static_cast<uint64_t>(lim.rlim_cur), "\n");
  }
}

std::string RenderPrometheus(const StoreStats& stats, const RpcMetrics& rpcs,
                             const ServerGauges& gauges) {
  std::string out;
  Header("cowkv_build_info", "gauge", "The running cowkvd's version, API, git commit and build type (value 1).", &out);
  absl::StrAppend(&out, "cowkv_build_info{version=\"", kCowkvVersion, "\",api=\"", kApiVersion,
                  "\",commit=\"", GitCommit(), "\",build_type=\"", BuildType(), "\"} 1\n");
  RenderProcess(&out);
  rpcs.Render(&out);
  RenderStats(stats, &out);
  RenderEngineLatency(stats, &out);
  Header("cowkv_server_open_transaction_handles", "gauge",
         "Interactive transaction handles open on the server.", &out);
  absl::StrAppend(&out, "cowkv_server_open_transaction_handles ", gauges.open_handles, "\n");
  Header("cowkv_server_expired_transaction_handles_total", "counter",
         "Interactive transaction handles aborted because their lease ran out.", &out);
  absl::StrAppend(&out, "cowkv_server_expired_transaction_handles_total ",
                  gauges.expired_handles, "\n");
  Header("cowkv_server_stopping", "gauge", "1 while the server drains before exit.", &out);
  absl::StrAppend(&out, "cowkv_server_stopping ", gauges.stopping ? 1 : 0, "\n");
  Header("cowkv_server_inflight_bytes", "gauge",
         "Response bytes admitted and not yet released (--max-inflight-bytes bounds them).", &out);
  absl::StrAppend(&out, "cowkv_server_inflight_bytes ", gauges.inflight_bytes, "\n");
  Header("cowkv_server_admission_waits_total", "counter", "Calls that waited for response memory.", &out);
  absl::StrAppend(&out, "cowkv_server_admission_waits_total ", gauges.admission_waits, "\n");
  Header("cowkv_server_admission_refusals_total", "counter",
         "Calls refused after waiting for response memory (RESOURCE_EXHAUSTED).", &out);
  absl::StrAppend(&out, "cowkv_server_admission_refusals_total ", gauges.admission_refusals, "\n");
  return out;
}

}  // namespace server
}  // namespace cowkv
