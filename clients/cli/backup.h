// Helpers shared by `cowkv backup` (backup.cc) and `cowkv export`/`import`
// (export.cc): calls they both make and the mapping of a local Status to
// the CLI's one line and exit code.
#ifndef COWKV_CLIENTS_CLI_BACKUP_H_
#define COWKV_CLIENTS_CLI_BACKUP_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cli/online.h"
#include "clients/cli/stream_files.h"

namespace cowkv {
namespace cli {

// "cowkv: <op>: <message>" and the exit code of the status's class (the
// table in docs/cli.md, as for a server's status).
int StatusFail(absl::string_view op, const absl::Status& s);

uint64_t NowUnixMs();
// "20261127T232512.345Z": for snapshot names, sortable.
std::string UtcStamp(uint64_t unix_ms);
// mkdir -p DIR (mode 0700 for what it makes); fine if it exists.
absl::Status EnsureDir(const std::string& dir);

grpc::Status DeleteSubvolume(Connection& conn, const std::string& name);
grpc::Status SnapshotSubvolume(Connection& conn, const std::string& source, const std::string& name,
                               bool read_only, v1::SubvolumeInfo* info);

// Sends SNAPSHOT (a difference from PARENT unless empty) to DIR/FILE:
// written as FILE.part while hashed, fsynced, renamed, DIR fsynced; the
// entry describes it (header fields read back from the file). On failure
// no FILE or FILE.part is left; a failed call is in *rpc (else the
// returned status says what failed locally).
absl::StatusOr<StreamEntry> SendToDir(Connection& conn, const std::string& snapshot,
                                      const std::string& parent, const std::string& dir,
                                      const std::string& file, grpc::Status* rpc);

// Receives DIR/FILE as NAME; the call's status (a local read error is
// returned as UNAVAILABLE naming the file).
grpc::Status ReceiveFileAs(Connection& conn, const std::string& path, const std::string& name,
                           v1::ReceiveResponse* resp);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_BACKUP_H_
