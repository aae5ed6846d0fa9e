// The StoreStats counters, listed once: the name of each field (the same in
// engine/include/cowkv/store.h's StoreStats and in cowkv.v1.StatsResponse), how to read
// it, and its Prometheus name, labels, type and help. Admin.Stats fills the
// proto from it by field name and /metrics renders it, so a counter added
// to the engine needs one line here (stats_table_test checks that every
// StatsResponse engine field has one). The latency rows (commit_us_by_*,
// commit_*_us, log_sync_*us) are read from StoreStats' histograms and have
// no metric: /metrics renders the histograms themselves.
//
// Thread-safe: the table is constant.
#ifndef COWKV_SERVER_STATS_TABLE_H_
#define COWKV_SERVER_STATS_TABLE_H_

#include <cstdint>
#include <vector>

#include "cowkv/store.h"

namespace cowkv {
namespace server {

struct StatField {
  const char* name;                     // StoreStats member = StatsResponse field
  uint64_t (*get)(const StoreStats&);   // reads it
  const char* metric;                   // Prometheus metric name; null: Admin.Stats only
  const char* labels;                   // e.g. `trigger="interval"`, or ""
  bool counter;                         // counter (monotonic) or gauge
  double scale;                         // multiplier to the metric's unit
  const char* help;                     // HELP text (shared by rows of one metric)
};

// Rows of one metric are adjacent.
const std::vector<StatField>& StatFields();

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_STATS_TABLE_H_
