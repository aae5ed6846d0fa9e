#include "bench/kv_system.h"

#include <algorithm>
#include <random>

namespace cowkv_bench {

Dataset::Dataset(uint64_t n) : n_(n) {
  keys_.resize(n * kKeySize);
  for (uint64_t i = 0; i < n; ++i) {  // "%016llu", right-aligned decimal
    char* k = keys_.data() + i * kKeySize;
    uint64_t v = i;
    for (size_t j = kKeySize; j-- > 0; v /= 10) k[j] = static_cast<char>('0' + v % 10);
  }
  std::mt19937_64 rng(0x5eed);
  pool_.resize(kPool + kValueSize);
  for (char& c : pool_) c = static_cast<char>(rng());

  seq_.resize(n);
  for (uint64_t i = 0; i < n; ++i) seq_[i] = static_cast<uint32_t>(i);
  fill_random_ = seq_;
  std::shuffle(fill_random_.begin(), fill_random_.end(), std::mt19937_64(1));
  read_random_ = seq_;
  std::shuffle(read_random_.begin(), read_random_.end(), std::mt19937_64(2));
}

}  // namespace cowkv_bench
