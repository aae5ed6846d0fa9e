// The server's bounds, in one place (STYLE.md point 10: a limit on
// everything). Each is enforced where a request enters the server, with an
// error that names the limit; docs/api.md lists them for users.
//
// Invariants (static_asserts below):
//  1. The largest single value plus its key fits in one gRPC message, so
//     every KV write the engine accepts can be sent.
//  2. A Read chunk, a Write chunk and a Range page each fit in a message.
#ifndef COWKV_SERVER_LIMITS_H_
#define COWKV_SERVER_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "cowkv/store.h"

namespace cowkv {
namespace server {

// gRPC message size, both directions. Larger messages fail in gRPC itself
// with RESOURCE_EXHAUSTED before a handler runs.
inline constexpr size_t kMaxMessageBytes = 20u << 20;

// KV keys, values, names, paths and files: the engine's limits
// (engine/include/cowkv/limits.h, through engine/include/cowkv/store.h), not restated here.
// A range page: at most this many keys and (after the first key) bytes of
// keys and values. A request's `limit` may only lower them.
// Bytes are counted as the engine's RangeRequest::max_bytes counts them
// (each pair's key and value plus kRangeEntryOverheadBytes), and the engine
// stops reading there: a page never costs more than it returns. 3 MiB keeps
// a page under the 4 MiB receive limit of stock gRPC clients (grpcurl too)
// unless its first pair alone is larger.
inline constexpr uint64_t kRangePageKeys = 10000;
inline constexpr size_t kRangePageBytes = 3u << 20;
// Ops per Txn branch, and compares per Txn: the hard bound (the engine's
// kMaxTxnOps) and the default, which --max-txn-ops sets up to the bound.
// Not etcd's 128: all five clients' bulk helpers (put_many) send Txns of
// 1,000 puts, and a Txn's memory is bounded by its response budget
// (kTxnResponseBytes) and its message size, not by its op count.
inline constexpr size_t kMaxTxnOps = ::cowkv::kMaxTxnOps;
inline constexpr size_t kDefaultMaxTxnOps = 1000;
// All Range results of one Txn together (the engine's max_response_bytes):
// room for one largest value and its key, within one message.
inline constexpr size_t kTxnResponseBytes = kMaxValueSize + kMaxKeySize + (2u << 20);

// Admission control (server/admission.h): bytes that built responses may
// hold at once, server-wide, and the gRPC threads (one per running call).
// A value larger than kAdmitFreeValueBytes is reserved before it is read.
inline constexpr uint64_t kDefaultInflightBytes = 1ull << 30;
inline constexpr int kDefaultMaxThreads = 512;
inline constexpr uint64_t kAdmitFreeValueBytes = 64u << 10;

// The per-request bounds a server runs with (ServerOptions::limits).
// Calls one client address may have in flight (each holds a thread until
// its response is read): a quarter of the threads, so one client cannot
// take them all.
inline constexpr int kDefaultMaxCallsPerClient = kDefaultMaxThreads / 4;
// Durable writes (KV Put, Delete, Txn) waiting for their sync hold no
// thread, a few hundred bytes each (their large values are budgeted as
// bytes): bounded on their own, server-wide.
inline constexpr int kDefaultMaxWaitingWrites = 8192;

struct RequestLimits {
  size_t max_txn_ops = kDefaultMaxTxnOps;
  size_t txn_response_bytes = kTxnResponseBytes;
  uint64_t inflight_bytes = kDefaultInflightBytes;
  int max_threads = kDefaultMaxThreads;
  int max_calls_per_client = kDefaultMaxCallsPerClient;
  int max_waiting_writes = kDefaultMaxWaitingWrites;
};

// Files.Read sends chunks of at most this size; Files.Write accepts
// chunks of at most kMaxWriteChunkBytes.
inline constexpr size_t kReadChunkBytes = 1u << 20;
inline constexpr size_t kMaxWriteChunkBytes = 4u << 20;
inline constexpr uint64_t kReadDirPageEntries = 10000;
inline constexpr size_t kFiemapMaxExtents = 65536;

// Interactive transactions: lease default and bound, open handles per client
// (its address: every connection of one host counts as one client) and in
// all. One client can hold at most a sixteenth of the table; the handles
// of a connection that closed are aborted within a reap interval.
inline constexpr uint64_t kDefaultLeaseMs = 30000;
inline constexpr uint64_t kMaxLeaseMs = 600000;
inline constexpr int kMaxOpenTxnsPerPeer = 256;
inline constexpr int kMaxOpenTxnsTotal = 4096;
static_assert(kMaxOpenTxnsPerPeer * 16 <= kMaxOpenTxnsTotal, "one client cannot fill the table");
// Open files (Files.Open, Files.CreateTmpfile): leases as transactions'
// (kDefaultLeaseMs, kMaxLeaseMs), open handles per client and in all.
inline constexpr int kMaxOpenFilesPerPeer = 1024;
inline constexpr int kMaxOpenFilesTotal = 16384;
static_assert(kMaxOpenFilesPerPeer * 16 <= kMaxOpenFilesTotal, "one client cannot fill the table");

// Graceful stop: in-flight calls get this long to finish before gRPC
// cancels them.
inline constexpr int64_t kDrainTimeoutMs = 10000;

static_assert(kMaxValueSize + kMaxKeySize + 4096 < kMaxMessageBytes, "invariant 1");
static_assert(kReadChunkBytes + 4096 < kMaxMessageBytes, "invariant 2");
static_assert(kMaxWriteChunkBytes + 2 * kMaxPathLen < kMaxMessageBytes, "invariant 2");
// A page holds at most kRangePageBytes of keys and values (or one pair, the
// first, when it alone is larger: invariant 1), plus per-entry framing.
static_assert(kRangePageBytes + kRangePageKeys * 64 < kMaxMessageBytes, "invariant 2");
static_assert(kRangePageBytes + kRangePageKeys * 64 < (4u << 20), "a page fits stock clients");
static_assert(kTxnResponseBytes + kMaxTxnOps * 64 < kMaxMessageBytes, "a Txn's response fits");

// Watch (KV.Watch, watch_hub.h). Watchers per stream, per client address
// and in all; a stream's unsent responses may hold this many bytes, past
// which the watcher whose events would pass it is cancelled
// (WATCH_CANCEL_SLOW_READER); past the soft bound the hub sends a stream
// no more events until its client has read it below (its watchers wait
// in the history, unsynced), and a stream that stays full without a write
// for kWatchSlowReaderSeconds has its waiting watchers cancelled
// (SLOW_READER); a response holds about this many bytes of
// events at most (one revision larger than that is fragmented, a single
// event never: one value plus its key fit a message, invariant 1, but an
// event whose value and prev_kv together pass a message cancels its
// watcher, RESOURCE_EXHAUSTED LIMIT); the hub reads this many events of a
// subvolume at a time (whole revisions).
// A stream holds a gRPC thread (as Lease.KeepAlive) and one of its own.
inline constexpr int kMaxWatchersPerStream = 1000;
inline constexpr int kMaxWatchersPerPeer = 10000;
inline constexpr int kMaxWatchersTotal = 100000;
inline constexpr uint64_t kWatchStreamBufferBytes = 24u << 20;
inline constexpr uint64_t kWatchStreamSoftBytes = 4u << 20;
inline constexpr int kWatchSlowReaderSeconds = 60;
inline constexpr uint64_t kWatchResponseBytes = 1u << 20;
inline constexpr uint64_t kWatchReadEvents = 1000;
static_assert(kWatchStreamBufferBytes >= kMaxMessageBytes, "a watcher's largest response fits");
static_assert(kWatchStreamSoftBytes + kMaxMessageBytes <= kWatchStreamBufferBytes,
              "one response past the soft bound stays under the hard one");

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_LIMITS_H_
