// Which client connections are still open, from the kernel's TCP table:
// cowkvd aborts the interactive transactions of a connection that closed
// (the synchronous gRPC API has no hook for a closed connection).
//
//   absl::StatusOr<OpenConnections> c = OpenConnections::Read(port);
//   c->Has("ipv4:127.0.0.1:43210")   // still ESTABLISHED to `port`?
//
// Read() parses /proc/net/tcp and /proc/net/tcp6 for sockets in state
// ESTABLISHED whose local port is the server's; Has() matches a gRPC peer
// string by its remote port. Matching by port alone errs on the safe side:
// a port reused by another client keeps a dead connection's handles until
// their lease runs out, it never aborts a live one. UNAVAILABLE when
// neither table can be read (then callers rely on leases alone).
//
// Thread-compatible; Read() is a pure function of the kernel's tables.
#ifndef COWKV_SERVER_CONNECTIONS_H_
#define COWKV_SERVER_CONNECTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace server {

class OpenConnections {
 public:
  static absl::StatusOr<OpenConnections> Read(int local_port);
  // From the text of /proc/net/tcp or tcp6 (for tests).
  void AddTable(absl::string_view table, int local_port);
  bool Has(absl::string_view grpc_peer) const;

 private:
  absl::flat_hash_set<int> remote_ports_;
};

// The remote port of a gRPC peer string ("ipv4:1.2.3.4:5", "ipv6:[::1]:5").
std::optional<int> PeerPort(absl::string_view grpc_peer);
// A client's identity for per-client limits: its address without the port
// ("ipv4:1.2.3.4"), so every connection of one host counts as one client.
std::string PeerAddress(absl::string_view grpc_peer);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_CONNECTIONS_H_
