// The kernel's TCP tables, read for open client connections; see connections.h.
#include "server/connections.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace cowkv {
namespace server {
namespace {

// "0100007F:1F90" -> 0x1F90.
std::optional<int> HexPort(absl::string_view endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  int port = 0;
  if (!absl::SimpleHexAtoi(endpoint.substr(colon + 1), &port)) return std::nullopt;
  return port;
}

constexpr absl::string_view kEstablished = "01";

}  // namespace

std::optional<int> PeerPort(absl::string_view grpc_peer) {
  const size_t colon = grpc_peer.rfind(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  int port = 0;
  if (!absl::SimpleAtoi(grpc_peer.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

std::string PeerAddress(absl::string_view grpc_peer) {
  if (!PeerPort(grpc_peer).has_value()) return std::string(grpc_peer);
  return std::string(grpc_peer.substr(0, grpc_peer.rfind(':')));
}

void OpenConnections::AddTable(absl::string_view table, int local_port) {
  bool header = true;
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    if (header) {  // "  sl  local_address rem_address   st ..."
      header = false;
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 4 || f[3] != kEstablished) continue;
    std::optional<int> local = HexPort(f[1]);
    std::optional<int> remote = HexPort(f[2]);
    if (local == local_port && remote.has_value()) remote_ports_.insert(*remote);
  }
}

absl::StatusOr<OpenConnections> OpenConnections::Read(int local_port) {
  OpenConnections out;
  bool any = false;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    out.AddTable(text.str(), local_port);
    any = true;
  }
  if (!any) return absl::UnavailableError("cannot read /proc/net/tcp or /proc/net/tcp6");
  return out;
}

bool OpenConnections::Has(absl::string_view grpc_peer) const {
  std::optional<int> port = PeerPort(grpc_peer);
  if (!port.has_value()) return true;  // not TCP: cannot tell, keep it
  return remote_ports_.contains(*port);
}

}  // namespace server
}  // namespace cowkv
