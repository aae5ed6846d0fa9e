// An Elle-style checker for list-append histories (Kingsbury and Alvaro,
// "Elle: Inferring Isolation Anomalies from Experimental Observations").
//
// Goal: decide whether a history of committed transactions over append-only
// lists is (strictly) serializable, and when it is not, name the anomaly and
// show the transactions involved.
// Method: every appended element is globally unique, so the final list of a
// key recovers the order of every append to it (the version order), and a
// read of a list names exactly which appends it saw. From that:
//   - direct checks: every list read is a prefix of the key's final list
//     (nothing lost, nothing reordered); no read sees an element no committed
//     transaction appended (G1a, aborted read) or a list ending at an element
//     that its writer appended to the same key again later (G1b, intermediate
//     read); each transaction's reads agree with its own earlier ops
//     (internal consistency); every committed append is in the final list
//     exactly once;
//   - the dependency graph between committed transactions: ww (Ti appended
//     the element just before Tj's in a final list), wr (Tj read a list whose
//     last element Ti appended), rw (Ti read n elements of a key and Tj
//     appended element n of its final list) and, when timestamps are given,
//     rt (Ti's commit returned before Tj began); a cycle is G0 (ww only), G1c
//     (ww/wr), G-single (one rw) or G2 (more rw), "-realtime" if it needs an
//     rt edge. An acyclic graph means a serial order exists that agrees with
//     every observation (and, with rt, with real time);
//   - one revision per transaction (issue 18): every read of a transaction
//     — committed, or an attempt that did not commit — that precedes its own
//     append to the key must be the key's list at one single revision R
//     (the committed appends with commit revision <= R, in order), the same
//     R for all its reads, and R must be its read revision when recorded:
//     a transaction must never observe a state that no revision had.
#ifndef COWKV_ENGINE_SERIAL_TEST_LIST_APPEND_CHECKER_H_
#define COWKV_ENGINE_SERIAL_TEST_LIST_APPEND_CHECKER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace serial_test {

using Elem = int64_t;
using List = std::vector<Elem>;

// One micro-op of a transaction. Appends are read-modify-write in cowkv, so
// an append also carries the list it read before appending; the checker
// treats that as a read followed by the append.
struct MicroOp {
  enum class Kind { kRead, kAppend };
  Kind kind = Kind::kRead;
  std::string key;
  List list;      // kRead: the list read; kAppend: the list before appending
  Elem elem = 0;  // kAppend: the element appended

  static MicroOp Read(std::string key, List list);
  static MicroOp Append(std::string key, List before, Elem elem);
};

// A committed transaction, as its final (successful) attempt saw it.
struct TxnRecord {
  int thread = 0;
  // Commit revision (read revision if it wrote nothing); 0 = unknown (a
  // commit whose outcome was unknown and whose appends are in the final
  // lists): reads bounded by its appends are not checked for one revision.
  uint64_t revision = 0;
  uint64_t read_revision = 0;  // the revision its reads are at (0: unknown)
  // Steady-clock nanoseconds: before it began, after its commit returned.
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<MicroOp> ops;
};

struct History {
  std::vector<TxnRecord> txns;               // committed transactions only
  // Attempts that did not commit (revision 0), checked only for reading
  // one revision: what an application saw before its commit failed.
  std::vector<TxnRecord> attempts;
  std::map<std::string, List> final_lists;   // every key's list at the end
  bool realtime = true;                      // add rt edges from timestamps
};

struct CheckResult {
  std::vector<std::string> problems;  // empty = no anomaly found
  uint64_t ww_edges = 0;
  uint64_t wr_edges = 0;
  uint64_t rw_edges = 0;
  uint64_t rt_edges = 0;
  bool ok() const { return problems.empty(); }
};

CheckResult CheckListAppend(const History& history);

// The value encoding: "" is the empty list, ",3,17" is [3 17].
std::string AppendToValue(absl::string_view value, Elem elem);
absl::StatusOr<List> ParseList(absl::string_view value);

// "[1 2 3]"; long lists show their length and last elements.
std::string FormatList(const List& list);
// "T12 (thread 3, rev 456): r(k1, [..]) a(k2, 17)".
std::string FormatTxn(size_t index, const TxnRecord& txn);

}  // namespace serial_test
}  // namespace cowkv

#endif  // COWKV_ENGINE_SERIAL_TEST_LIST_APPEND_CHECKER_H_
