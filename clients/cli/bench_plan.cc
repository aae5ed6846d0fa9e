// `cowkv bench`, the plan of a run: presets and flags, the keys and value it
// writes, and the token bucket that paces it (bench.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cli/bench.h"
#include "clients/cli/kv_commands.h"

namespace cowkv {
namespace cli {
namespace {

absl::Status Invalid(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", what));
}

// Checks the values a preset does not set.
absl::Status CheckRunFlags(const BenchFlags& f) {
  if (!(f.duration_s > 0) || f.duration_s > kBenchMaxDurationS) {
    return Invalid("--duration",
                   absl::StrCat(f.duration_s, " s is not in (0, ", kBenchMaxDurationS, "] s"));
  }
  if (f.prefix.empty()) {
    return Invalid("--prefix", "must not be empty (the bench deletes every key under it)");
  }
  if (f.prefix.size() > kBenchMaxPrefixBytes) {
    return Invalid("--prefix",
                   absl::StrCat(f.prefix.size(), " bytes (at most ", kBenchMaxPrefixBytes, ")"));
  }
  if (f.value_size > kBenchMaxValueBytes) {
    return Invalid("--value-size",
                   absl::StrCat(f.value_size, " bytes (at most ", kBenchMaxValueBytes, ")"));
  }
  if (f.durability != "durable" && f.durability != "async") {
    return Invalid("--durability", absl::StrCat("'", f.durability, "' is not durable or async"));
  }
  return absl::OkStatus();
}

// The load's clients and rate.
absl::Status CheckLoad(const BenchConfig& c) {
  if (c.clients < 1 || c.clients > kBenchMaxClients) {
    return Invalid("--clients", absl::StrCat(c.clients, " is not in 1..", kBenchMaxClients));
  }
  if (!(c.rate_wps > 0) || c.rate_wps > kBenchMaxRateWps) {
    return Invalid("--rate",
                   absl::StrCat(c.rate_wps, " writes/s is not in (0, ", kBenchMaxRateWps, "]"));
  }
  return absl::OkStatus();
}

// The bounds the load implies: request bytes held at once, and distinct ids.
absl::Status CheckBounds(const BenchConfig& c) {
  if (static_cast<double>(c.clients) * c.value_size > kBenchMaxRequestBytes) {
    return Invalid("--value-size",
                   absl::StrCat(c.clients, " clients × ", c.value_size, " bytes is over ",
                                kBenchMaxRequestBytes, " bytes of requests in flight"));
  }
  if (c.rate_wps * c.duration_s + c.burst + c.channels > kBenchMaxWrites) {
    return Invalid("--duration", "rate × duration is over 2^32 writes");
  }
  return absl::OkStatus();
}

// A bijection of uint32 (each step is one: odd multipliers, xor-shifts), so
// distinct sequence numbers give distinct ids in scattered order.
uint32_t Scramble(uint32_t x) {
  x *= 0x9E3779B1u;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}

}  // namespace

absl::StatusOr<BenchConfig> ResolveBench(const BenchFlags& f) {
  const std::string load = f.load.empty() ? "s" : f.load;
  const BenchLoad* preset = nullptr;
  for (const BenchLoad& l : kBenchLoads) {
    if (load == l.name) preset = &l;
  }
  if (preset == nullptr) {
    return Invalid("--load", absl::StrCat("'", load, "' is not one of s, m, l, xl"));
  }
  if (absl::Status s = CheckRunFlags(f); !s.ok()) return s;
  BenchConfig c;
  c.clients = f.clients != 0 ? f.clients : preset->clients;
  c.rate_wps = f.rate_wps != 0 ? f.rate_wps : preset->rate_wps;
  c.load = (f.clients != 0 || f.rate_wps != 0) ? "custom" : load;
  c.duration_s = f.duration_s;
  c.subvolume = f.subvolume;
  c.prefix = f.prefix;
  c.durability = f.durability;
  c.durability_proto = *ParseDurability(f.durability);  // checked above
  c.value_size = f.value_size;
  if (absl::Status s = CheckLoad(c); !s.ok()) return s;
  c.channels = (c.clients + kBenchClientsPerChannel - 1) / kBenchClientsPerChannel;
  c.burst = std::max(1, static_cast<int>(std::ceil(c.rate_wps * kBenchBurstS)));
  if (absl::Status s = CheckBounds(c); !s.ok()) return s;
  return c;
}

std::string BenchKey(absl::string_view prefix, uint32_t seq) {
  static constexpr char kHex[] = "0123456789abcdef";
  const uint32_t id = Scramble(seq);
  std::string key(prefix);
  for (int shift = 28; shift >= 0; shift -= 4) key += kHex[(id >> shift) & 0xf];
  uint32_t mix = Scramble(id ^ 0x5bd1e995u);
  const size_t length = 16 + mix % 49;  // 16..64
  while (key.size() < length) {
    mix = Scramble(mix);
    key += static_cast<char>('a' + mix % 26);
  }
  return key;
}

std::string BenchValue(uint64_t size) {
  std::string value(size, 'v');
  uint32_t x = 1;
  for (char& ch : value) {
    x = Scramble(x);
    ch = static_cast<char>('a' + x % 26);
  }
  return value;
}

TokenBucket::TokenBucket(double rate_per_s, int burst)
    : interval_ns_(1e9 / rate_per_s),
      tolerance_ns_((std::max(burst, 1) - 1) * (1e9 / rate_per_s)) {}

bool TokenBucket::TryTake(int64_t now_ns) {
  const double now = static_cast<double>(now_ns);
  if (now < tat_ns_ - tolerance_ns_) return false;
  tat_ns_ = std::max(tat_ns_, now) + interval_ns_;
  return true;
}

int64_t TokenBucket::NextTokenNs(int64_t now_ns) const {
  const double at = std::ceil(tat_ns_ - tolerance_ns_);
  return std::max(now_ns, static_cast<int64_t>(at));
}

}  // namespace cli
}  // namespace cowkv
