// Send-stream files in a directory and the manifest that orders them, for
// `cowkv backup` (backup.cc) and `cowkv export`/`import` (export.cc).
// No server: everything here reads and writes local files, with bounded
// memory (files are hashed in 1 MiB pieces, never read whole).
//
// A manifest (docs/operations.md "Backup and restore") is one JSON object:
//
//   {"__header": {"version": "1"}, "kind": "backup" | "export",
//    "subvolume": "data",                       (backup only)
//    "streams": [{"file": "000001-full.stream", "snapshot": "data@backup-…",
//                 "uuid": "<32 hex>", "stransid": 12,
//                 "parent_uuid": "" | "<32 hex>", "parent_stransid": 0,
//                 "bytes": 1234, "sha256": "<64 hex>", "time_unix_ms": …,
//                 "writable_as": ""}, …]}          (export only: see export.cc)
//
// `uuid`/`stransid` and `parent_uuid`/`parent_stransid` are the stream
// HEADER's (docs/format.md "Send stream"): the snapshot's identity and the
// identity of the snapshot it is a difference from (empty: a full stream).
// A manifest is replaced atomically (temporary file, fsync, rename, fsync
// of the directory), so a crash leaves the old one or the new one.
#ifndef COWKV_CLIENTS_CLI_STREAM_FILES_H_
#define COWKV_CLIENTS_CLI_STREAM_FILES_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {

// A send stream's HEADER record, as the first bytes of a stream file hold it.
struct StreamHeaderInfo {
  uint32_t nodesize = 0;
  uint32_t sectorsize = 0;
  std::string uuid;  // 32 hex digits
  uint64_t stransid = 0;
  std::string parent_uuid;  // 32 hex digits; empty for a full stream
  uint64_t parent_stransid = 0;
  std::string name;  // the sender's snapshot name
};

// Decodes the preamble and HEADER from the first bytes of a stream (at
// least the whole HEADER record). INVALID_ARGUMENT for bytes that are not a
// cowkv send stream, FAILED_PRECONDITION for a newer stream version,
// DATA_LOSS for a damaged or short header.
absl::StatusOr<StreamHeaderInfo> ParseStreamHeader(absl::string_view bytes);
absl::StatusOr<StreamHeaderInfo> ReadStreamHeader(const std::string& path);

// The stream checker that needs no server: walks a stream file frame by
// frame (one record in memory at a time) and checks what the framing
// carries — the preamble, each record's size and crc32c, HEADER first, END
// last with nothing after it, END's record count and the SHA-256 of every
// byte before it. It does not check the records' contents (key order,
// extent crcs) nor the parent: `receive --dry-run` does (docs/format.md
// "Send stream"). DATA_LOSS for damage, as the receiver says it.
struct StreamWalk {
  uint64_t records = 0;  // END included
  uint64_t bytes = 0;
};
absl::StatusOr<StreamWalk> WalkStreamFile(const std::string& path);

// SHA-256, streamed.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(absl::string_view bytes);
  std::string FinishHex();  // 64 hex digits; once

 private:
  void* ctx_;  // EVP_MD_CTX
};

struct FileDigest {
  std::string sha256;  // 64 hex digits
  uint64_t bytes = 0;
};
absl::StatusOr<FileDigest> DigestFile(const std::string& path);

// fsync of an open file / of a directory (so a new name in it is durable).
absl::Status SyncFile(std::FILE* f, const std::string& what);
absl::Status SyncDir(const std::string& dir);

struct StreamEntry {
  std::string file;  // a plain file name inside the manifest's directory
  std::string snapshot;
  std::string uuid;
  uint64_t stransid = 0;
  std::string parent_uuid;  // empty: a full stream
  uint64_t parent_stransid = 0;
  uint64_t bytes = 0;
  std::string sha256;
  uint64_t time_unix_ms = 0;
  // export only: the writable subvolume this read-only snapshot recreates
  // on import (a snapshot of it by this name); empty for a snapshot that
  // is itself a subvolume of the exported store.
  std::string writable_as;
};

struct Manifest {
  std::string kind;       // "backup" or "export"
  std::string subvolume;  // backup: the subvolume backed up
  std::vector<StreamEntry> streams;
};

inline constexpr char kBackupManifest[] = "manifest.json";
inline constexpr char kExportManifest[] = "export.json";

Json ManifestToJson(const Manifest& m);
absl::StatusOr<Manifest> ManifestFromJson(const Json& j);
// NOT_FOUND if DIR has no such manifest; INVALID_ARGUMENT if it is not one.
absl::StatusOr<Manifest> LoadManifest(const std::string& dir, const std::string& name);
absl::Status SaveManifest(const std::string& dir, const std::string& name, const Manifest& m);

// A backup chain: the first stream is full and each next one is a
// difference from the one before it (its parent_uuid and parent_stransid
// are that one's uuid and stransid). FAILED_PRECONDITION naming the first
// break.
absl::Status CheckBackupChain(const std::vector<StreamEntry>& streams);

// An export: every incremental stream's parent is an earlier stream, and no
// two streams have the same snapshot name. FAILED_PRECONDITION otherwise.
absl::Status CheckExportOrder(const std::vector<StreamEntry>& streams);

// A stream file against its manifest entry: present, of `bytes` bytes and
// `sha256`, and its HEADER names the entry's uuid, stransid, parent_uuid
// and parent_stransid. DATA_LOSS for a damaged file, NOT_FOUND for a
// missing one, FAILED_PRECONDITION for a header that names another stream.
absl::Status CheckStreamFile(const std::string& dir, const StreamEntry& e);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_STREAM_FILES_H_
