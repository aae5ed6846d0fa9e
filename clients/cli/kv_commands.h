// Shared by the `cowkv kv` commands (kv.cc, kv_txn.cc): durability parsing
// and the `kv txn` spec (docs/cli.md, "kv txn"), which cli_unit_test.cc
// exercises without a server.
#ifndef COWKV_CLIENTS_CLI_KV_COMMANDS_H_
#define COWKV_CLIENTS_CLI_KV_COMMANDS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cli/commands.h"
#include "clients/cli/output.h"
#include "cowkv/v1/kv.pb.h"

namespace cowkv {
namespace cli {

// "default" (or empty), "durable", "async"; INVALID_ARGUMENT otherwise.
absl::StatusOr<v1::Durability> ParseDurability(absl::string_view text);

// Adds --durability default|durable|async to a command.
void AddDurabilityOption(CLI::App* cmd, std::string* durability);

// Declares `kv txn` in the kv group. (kv_txn.cc)
void AddKvTxn(CommandGroup* group, const GlobalsPtr& g);

// Declares `kv watch` in the kv group. (kv_watch.cc)
void AddKvWatch(CommandGroup* group, const GlobalsPtr& g);
// The end of a watcher (KV or file) as the command's failure: the cancel
// code and reason, the oldest revision served, the exit code of its error.
int WatchCanceled(const char* op, const v1::WatchResponse& r);

// Parses a txn spec (JSON text) into `req`'s compare, success, failure and
// durability; INVALID_ARGUMENT naming the bad part ("success[1].put.key:
// ...") on malformed JSON, unknown fields or wrong types. (kv_txn.cc)
absl::Status ParseTxnSpec(absl::string_view text, v1::TxnRequest* req);

// A TxnResponse for scripts ({"succeeded", "revision", "responses"}) and for
// people. (kv_txn.cc)
Json TxnResponseJson(const v1::TxnResponse& r);
std::string TxnResponseText(const v1::TxnResponse& r);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_KV_COMMANDS_H_
