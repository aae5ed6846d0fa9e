// Send and receive over one call each, with bounded memory, shared by
// `cowkv send`/`receive` (send.cc) and the commands built on them:
// `cowkv backup` (backup.cc) and `cowkv export`/`import` (export.cc).
//
//   SendToSink: Subvolumes.Send, each chunk handed to `sink` as it arrives;
//     a sink that returns false cancels the call (*sink_failed is set).
//   ReceiveFromFile: Subvolumes.Receive fed from `in` in 1 MiB pieces;
//     a local read error cancels the call (*read_failed is set).
//
// Both return the call's status; the caller maps it (RpcFail).
#ifndef COWKV_CLIENTS_CLI_STREAM_IO_H_
#define COWKV_CLIENTS_CLI_STREAM_IO_H_

#include <cstdio>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "clients/cli/online.h"

namespace cowkv {
namespace cli {

using ChunkSink = std::function<bool(absl::string_view bytes)>;

// `resume_token` (send -t): the rest of an interrupted stream instead.
grpc::Status SendToSink(Connection& conn, const std::string& snapshot, const std::string& parent,
                        const ChunkSink& sink, v1::SendStats* stats, bool* sink_failed,
                        const std::string& resume_token = "");

// `resumable` (receive -s): an interrupted receive keeps its progress.
grpc::Status ReceiveFromFile(Connection& conn, std::FILE* in, const std::string& name, bool dry_run,
                             v1::ReceiveResponse* resp, bool* read_failed, bool resumable = false);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_STREAM_IO_H_
