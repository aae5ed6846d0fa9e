// The list-append checker (see list_append_checker.h for the method): direct
// checks of every read against the final lists, then the ww/wr/rw/rt
// dependency graph and a search for its shortest cycle.
#include "engine/serial_test/list_append_checker.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace cowkv {
namespace serial_test {

MicroOp MicroOp::Read(std::string key, List list) {
  MicroOp op;
  op.kind = Kind::kRead;
  op.key = std::move(key);
  op.list = std::move(list);
  return op;
}

MicroOp MicroOp::Append(std::string key, List before, Elem elem) {
  MicroOp op;
  op.kind = Kind::kAppend;
  op.key = std::move(key);
  op.list = std::move(before);
  op.elem = elem;
  return op;
}

std::string AppendToValue(absl::string_view value, Elem elem) {
  return absl::StrCat(value, ",", elem);
}

absl::StatusOr<List> ParseList(absl::string_view value) {
  List list;
  if (value.empty()) return list;
  if (value[0] != ',') {
    return absl::DataLossError(absl::StrCat("list value '", value, "' does not start with ','"));
  }
  for (absl::string_view part : absl::StrSplit(value.substr(1), ',')) {
    Elem e = 0;
    if (!absl::SimpleAtoi(part, &e)) {
      return absl::DataLossError(absl::StrCat("list value '", value, "' has element '", part, "'"));
    }
    list.push_back(e);
  }
  return list;
}

std::string FormatList(const List& list) {
  constexpr size_t kShown = 8;
  if (list.size() <= kShown) return absl::StrCat("[", absl::StrJoin(list, " "), "]");
  List tail(list.end() - kShown, list.end());
  return absl::StrCat("[... ", list.size() - kShown, " more ... ", absl::StrJoin(tail, " "),
                      "] (", list.size(), " elements)");
}

std::string FormatTxn(size_t index, const TxnRecord& txn) {
  std::string s = absl::StrCat("T", index, " (thread ", txn.thread, ", rev ", txn.revision,
                               ", ", txn.start_ns / 1000, "..", txn.end_ns / 1000, " us):");
  for (const MicroOp& op : txn.ops) {
    if (op.kind == MicroOp::Kind::kRead) {
      absl::StrAppend(&s, " r(", op.key, ", ", FormatList(op.list), ")");
    } else {
      absl::StrAppend(&s, " a(", op.key, ", ", op.elem, " after ", FormatList(op.list), ")");
    }
  }
  return s;
}

namespace {

constexpr size_t kMaxProblems = 20;

enum EdgeType : uint8_t { kWW = 1, kWR = 2, kRW = 4, kRT = 8 };

std::string EdgeName(uint8_t mask) {
  std::vector<std::string> names;
  if (mask & kWW) names.push_back("ww");
  if (mask & kWR) names.push_back("wr");
  if (mask & kRW) names.push_back("rw");
  if (mask & kRT) names.push_back("rt");
  return absl::StrJoin(names, "+");
}

// Nodes [0, txns) are transactions; the rest are real-time barriers.
struct Graph {
  size_t txns = 0;
  std::vector<std::vector<std::pair<uint32_t, uint8_t>>> adj;

  void Add(size_t from, size_t to, uint8_t type) {
    adj[from].push_back({static_cast<uint32_t>(to), type});
  }
  // One edge per (from, to), its types or-ed together.
  void Merge() {
    for (auto& out : adj) {
      std::sort(out.begin(), out.end());
      size_t w = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        if (w > 0 && out[w - 1].first == out[i].first) {
          out[w - 1].second |= out[i].second;
        } else {
          out[w++] = out[i];
        }
      }
      out.resize(w);
    }
  }
};

// Some node on a cycle, by iterative depth-first search.
std::optional<uint32_t> NodeOnCycle(const Graph& g) {
  const size_t n = g.adj.size();
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the stack, 2 done
  std::vector<std::pair<uint32_t, size_t>> stack;
  for (uint32_t s = 0; s < n; ++s) {
    if (color[s] != 0) continue;
    color[s] = 1;
    stack.push_back({s, 0});
    while (!stack.empty()) {
      const uint32_t u = stack.back().first;
      const size_t i = stack.back().second++;
      if (i == g.adj[u].size()) {
        color[u] = 2;
        stack.pop_back();
        continue;
      }
      const uint32_t v = g.adj[u][i].first;
      if (color[v] == 1) return v;
      if (color[v] == 0) {
        color[v] = 1;
        stack.push_back({v, 0});
      }
    }
  }
  return std::nullopt;
}

// The shortest cycle through `v` (breadth-first): nodes and the edge types
// from each to the next, the last back to `v`.
std::vector<std::pair<uint32_t, uint8_t>> ShortestCycleThrough(const Graph& g, uint32_t v) {
  std::vector<std::pair<int64_t, uint8_t>> parent(g.adj.size(), {-1, 0});
  std::deque<uint32_t> queue{v};
  std::optional<std::pair<uint32_t, uint8_t>> closing;
  while (!queue.empty() && !closing) {
    const uint32_t u = queue.front();
    queue.pop_front();
    for (const auto& [w, mask] : g.adj[u]) {
      if (w == v) {
        closing = std::make_pair(u, mask);
        break;
      }
      if (parent[w].first >= 0) continue;
      parent[w] = {u, mask};
      queue.push_back(w);
    }
  }
  std::vector<std::pair<uint32_t, uint8_t>> cycle;
  if (!closing) return cycle;
  cycle.push_back(*closing);
  for (uint32_t u = closing->first; u != v;) {
    const auto [p, mask] = parent[u];
    cycle.push_back({static_cast<uint32_t>(p), mask});
    u = static_cast<uint32_t>(p);
  }
  std::reverse(cycle.begin(), cycle.end());
  return cycle;
}

// Elle's names: by the rw edges it needs, "-realtime" if it needs rt.
std::string Classify(const std::vector<uint8_t>& hops) {
  int wr = 0, rw = 0;
  bool rt = false;
  for (uint8_t mask : hops) {
    // The weakest dependency explains the hop: ww, then wr, then rt, then rw.
    if (mask & kWW) {
      continue;
    } else if (mask & kWR) {
      ++wr;
    } else if (mask & kRT) {
      rt = true;
    } else {
      ++rw;
    }
  }
  std::string name = rw == 0 ? (wr == 0 ? "G0" : "G1c") : (rw == 1 ? "G-single" : "G2");
  if (rt) absl::StrAppend(&name, "-realtime");
  return name;
}

struct AppendRef {
  size_t txn = 0;
  size_t op = 0;
};

class Checker {
 public:
  explicit Checker(const History& h) : h_(h) {}

  CheckResult Run() {
    IndexAppends();
    CheckFinalLists();
    for (size_t t = 0; t < h_.txns.size(); ++t) {
      CheckInternal(t);
      for (const MicroOp& op : h_.txns[t].ops) CheckRead(t, op);
    }
    BuildGraph();
    FindCycle();
    if (suppressed_ > 0) {
      r_.problems.push_back(absl::StrCat("... and ", suppressed_, " more problems"));
    }
    return std::move(r_);
  }

 private:
  void Problem(std::string s) {
    if (r_.problems.size() < kMaxProblems) {
      r_.problems.push_back(std::move(s));
    } else {
      ++suppressed_;
    }
  }
  std::string Txn(size_t t) const { return FormatTxn(t, h_.txns[t]); }
  const List& FinalList(const std::string& key) const {
    static const List kEmpty;
    auto it = h_.final_lists.find(key);
    return it == h_.final_lists.end() ? kEmpty : it->second;
  }

  void IndexAppends();
  void CheckFinalLists();
  void CheckInternal(size_t t);
  void CheckRead(size_t t, const MicroOp& op);
  void BuildGraph();
  void AddRealtimeEdges();
  void FindCycle();

  const History& h_;
  CheckResult r_;
  uint64_t suppressed_ = 0;
  std::unordered_map<Elem, AppendRef> appends_;
  // (transaction, key) -> the last element it appended to that key.
  std::map<std::pair<size_t, std::string>, Elem> last_append_;
  Graph graph_;
};

void Checker::IndexAppends() {
  for (size_t t = 0; t < h_.txns.size(); ++t) {
    const std::vector<MicroOp>& ops = h_.txns[t].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind != MicroOp::Kind::kAppend) continue;
      auto [it, fresh] = appends_.insert({ops[i].elem, AppendRef{t, i}});
      if (!fresh) {
        Problem(absl::StrCat("element ", ops[i].elem, " appended twice:\n  ", Txn(it->second.txn),
                             "\n  ", Txn(t)));
      }
      last_append_[{t, ops[i].key}] = ops[i].elem;
    }
  }
}

// Every committed append is in its key's final list exactly once, and the
// final lists hold nothing else.
void Checker::CheckFinalLists() {
  std::unordered_map<Elem, std::string> seen;  // element -> key it is in
  for (const auto& [key, list] : h_.final_lists) {
    for (size_t p = 0; p < list.size(); ++p) {
      const Elem e = list[p];
      if (!seen.insert({e, key}).second) {
        Problem(absl::StrCat("duplicate element ", e, " in final list of ", key, " (also in ",
                             seen[e], ") at position ", p));
        continue;
      }
      auto a = appends_.find(e);
      if (a == appends_.end()) {
        Problem(absl::StrCat("G1a: final list of ", key, " holds element ", e,
                             ", which no committed transaction appended"));
        continue;
      }
      const std::string& appended_to = h_.txns[a->second.txn].ops[a->second.op].key;
      if (appended_to != key) {
        Problem(absl::StrCat("element ", e, " is in the final list of ", key,
                             " but was appended to ", appended_to));
      }
    }
  }
  for (const auto& [e, ref] : appends_) {
    if (seen.count(e) == 0) {
      Problem(absl::StrCat("lost append: element ", e, " is in no final list; appended by\n  ",
                           Txn(ref.txn)));
    }
  }
}

// A transaction's reads of a key agree with its own earlier ops on it.
void Checker::CheckInternal(size_t t) {
  std::map<std::string, List> state;
  for (const MicroOp& op : h_.txns[t].ops) {
    auto it = state.find(op.key);
    if (it != state.end() && it->second != op.list) {
      Problem(absl::StrCat("internal: ", op.key, " read as ", FormatList(op.list),
                           " but the transaction's earlier ops imply ", FormatList(it->second),
                           ":\n  ", Txn(t)));
    }
    List next = op.list;
    if (op.kind == MicroOp::Kind::kAppend) next.push_back(op.elem);
    state[op.key] = std::move(next);
  }
}

void Checker::CheckRead(size_t t, const MicroOp& op) {
  for (Elem e : op.list) {
    auto a = appends_.find(e);
    if (a == appends_.end()) {
      Problem(absl::StrCat("G1a (aborted read): ", op.key, " read with element ", e,
                           ", which no committed transaction appended:\n  ", Txn(t)));
      return;
    }
  }
  const List& fin = FinalList(op.key);
  if (op.list.size() > fin.size() || !std::equal(op.list.begin(), op.list.end(), fin.begin())) {
    Problem(absl::StrCat("incompatible order: ", op.key, " read as ", FormatList(op.list),
                         ", not a prefix of its final list ", FormatList(fin), ":\n  ", Txn(t)));
    return;
  }
  if (op.list.empty()) return;
  const Elem last = op.list.back();
  const size_t writer = appends_[last].txn;
  if (writer != t && last_append_[{writer, op.key}] != last) {
    Problem(absl::StrCat("G1b (intermediate read): ", op.key, " read as ", FormatList(op.list),
                         ", ending at ", last, ", but its writer appended ",
                         last_append_[{writer, op.key}], " to it later:\n  ", Txn(t), "\n  ",
                         Txn(writer)));
  }
}

void Checker::BuildGraph() {
  const size_t n = h_.txns.size();
  graph_.txns = n;
  graph_.adj.resize(h_.realtime ? 2 * n : n);
  auto writer = [&](Elem e) -> std::optional<size_t> {
    auto a = appends_.find(e);
    if (a == appends_.end()) return std::nullopt;
    return a->second.txn;
  };
  for (const auto& [key, list] : h_.final_lists) {
    for (size_t p = 0; p + 1 < list.size(); ++p) {
      std::optional<size_t> a = writer(list[p]), b = writer(list[p + 1]);
      if (a && b && *a != *b) {
        graph_.Add(*a, *b, kWW);
        ++r_.ww_edges;
      }
    }
  }
  for (size_t t = 0; t < n; ++t) {
    for (const MicroOp& op : h_.txns[t].ops) {
      std::optional<size_t> w = op.list.empty() ? std::nullopt : writer(op.list.back());
      if (w && *w != t) {
        graph_.Add(*w, t, kWR);
        ++r_.wr_edges;
      }
      const List& fin = FinalList(op.key);
      std::optional<size_t> next =
          op.list.size() < fin.size() ? writer(fin[op.list.size()]) : std::nullopt;
      if (next && *next != t) {
        graph_.Add(t, *next, kRW);
        ++r_.rw_edges;
      }
    }
  }
  if (h_.realtime) AddRealtimeEdges();
  graph_.Merge();
}

// Ti -> Tj whenever Ti's commit returned before Tj began, in O(n) edges:
// barrier B_k follows the k-th commit to return (in end order), B_k ->
// B_{k+1}, and B_k -> Tj for the last k that returned before Tj began.
void Checker::AddRealtimeEdges() {
  const size_t n = h_.txns.size();
  std::vector<size_t> by_end(n);
  for (size_t i = 0; i < n; ++i) by_end[i] = i;
  std::sort(by_end.begin(), by_end.end(),
            [&](size_t a, size_t b) { return h_.txns[a].end_ns < h_.txns[b].end_ns; });
  std::vector<int64_t> ends(n);
  for (size_t k = 0; k < n; ++k) {
    ends[k] = h_.txns[by_end[k]].end_ns;
    graph_.Add(by_end[k], n + k, kRT);
    if (k + 1 < n) graph_.Add(n + k, n + k + 1, kRT);
  }
  for (size_t j = 0; j < n; ++j) {
    const size_t before = std::lower_bound(ends.begin(), ends.end(), h_.txns[j].start_ns) -
                          ends.begin();  // commits that returned before Tj began
    if (before == 0) continue;
    graph_.Add(n + before - 1, j, kRT);
    ++r_.rt_edges;
  }
}

void Checker::FindCycle() {
  std::optional<uint32_t> v = NodeOnCycle(graph_);
  if (!v) return;
  std::vector<std::pair<uint32_t, uint8_t>> cycle = ShortestCycleThrough(graph_, *v);
  if (cycle.empty()) {
    Problem(absl::StrCat("cycle through graph node ", *v, " (not recovered)"));
    return;
  }
  // Rotate to start at a transaction, then fold barrier runs into rt hops.
  auto first_txn = std::find_if(cycle.begin(), cycle.end(),
                                [&](const auto& e) { return e.first < graph_.txns; });
  std::rotate(cycle.begin(), first_txn, cycle.end());
  std::vector<size_t> txns;
  std::vector<uint8_t> hops;
  for (const auto& [node, mask] : cycle) {
    if (node < graph_.txns) {
      txns.push_back(node);
      hops.push_back(mask);
    }
  }
  std::string s = absl::StrCat(Classify(hops), " cycle of ", txns.size(), " transactions:");
  for (size_t i = 0; i < txns.size(); ++i) {
    absl::StrAppend(&s, " T", txns[i], " -", EdgeName(hops[i]), "->");
  }
  absl::StrAppend(&s, " T", txns[0]);
  for (size_t t : txns) absl::StrAppend(&s, "\n  ", Txn(t));
  Problem(std::move(s));
}

}  // namespace

namespace {

// The "one revision per transaction" check (see the header).
void CheckOneRevision(const History& h, CheckResult* out) {
  std::map<Elem, uint64_t> rev_of;  // element -> commit revision of its append
  for (const TxnRecord& t : h.txns) {
    if (t.revision == 0) continue;  // unknown: see TxnRecord::revision
    for (const MicroOp& op : t.ops) {
      if (op.kind == MicroOp::Kind::kAppend) rev_of[op.elem] = t.revision;
    }
  }
  auto check = [&](const TxnRecord& t, const std::string& what) {
    uint64_t lo = 0, hi = UINT64_MAX;  // the revisions that explain every read so far
    std::string why;
    std::set<std::string> written;
    for (const MicroOp& op : t.ops) {
      if (written.count(op.key) != 0) continue;  // reads its own appends
      if (op.kind == MicroOp::Kind::kAppend) written.insert(op.key);
      auto f = h.final_lists.find(op.key);
      const List empty;
      const List& fin = f == h.final_lists.end() ? empty : f->second;
      const size_t n = op.list.size();
      if (n > fin.size() || !std::equal(op.list.begin(), op.list.end(), fin.begin())) {
        continue;  // not a prefix: reported by the direct checks (committed)
      }
      // list_at(key, R) has n elements for R in [rev(fin[n-1]), rev(fin[n]) - 1].
      uint64_t key_lo = 0, key_hi = UINT64_MAX;
      if (n > 0) {
        auto r = rev_of.find(fin[n - 1]);
        if (r == rev_of.end()) continue;  // an element no committed txn appended (G1a)
        key_lo = r->second;
      }
      if (n < fin.size()) {
        auto r = rev_of.find(fin[n]);
        if (r == rev_of.end()) continue;
        key_hi = r->second - 1;
      }
      lo = std::max(lo, key_lo);
      hi = std::min(hi, key_hi);
      absl::StrAppend(&why, " ", op.key, ":", n, "@[", key_lo, ",",
                      key_hi == UINT64_MAX ? std::string("inf") : absl::StrCat(key_hi), "]");
    }
    if (lo > hi) {
      out->problems.push_back(
          absl::StrCat(what, " read a state no single revision explains:", why));
    } else if (t.read_revision != 0 && (t.read_revision < lo || t.read_revision > hi)) {
      out->problems.push_back(absl::StrCat(what, " read revision ", t.read_revision,
                                           " does not explain its reads:", why));
    }
  };
  for (size_t i = 0; i < h.txns.size(); ++i) check(h.txns[i], FormatTxn(i, h.txns[i]));
  for (size_t i = 0; i < h.attempts.size(); ++i) {
    check(h.attempts[i], absl::StrCat("uncommitted attempt (thread ", h.attempts[i].thread,
                                      ", read revision ", h.attempts[i].read_revision, ")"));
  }
}

}  // namespace

CheckResult CheckListAppend(const History& history) {
  CheckResult r = Checker(history).Run();
  CheckOneRevision(history, &r);
  return r;
}

}  // namespace serial_test
}  // namespace cowkv
