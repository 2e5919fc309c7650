#include "gost/core/stats.hpp"

#include <algorithm>
#include <cmath>

namespace gost {

void latency_histogram::record(std::chrono::microseconds d) noexcept {
  auto us = std::max<int64_t>(1, d.count());
  // Bucket i covers (upper(i-1), upper(i)] with upper(i) = 2^((i+1)/8) µs.
  auto i = static_cast<int>(std::ceil(std::log2(static_cast<double>(us)) * per_octave)) - 1;
  i = std::clamp(i, 0, buckets - 1);
  counts_[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<uint64_t>(us), std::memory_order_relaxed);
}

uint64_t latency_histogram::count() const noexcept {
  uint64_t n = 0;
  for (auto& c : counts_)
    n += c.load(std::memory_order_relaxed);
  return n;
}

double latency_histogram::upper_us(int i) noexcept {
  return std::exp2(static_cast<double>(i + 1) / per_octave);
}

double latency_histogram::percentile_ms(double p) const noexcept {
  auto n = count();
  if (n == 0)
    return 0;
  auto want = static_cast<uint64_t>(std::ceil(p * static_cast<double>(n)));
  uint64_t seen = 0;
  for (int i = 0; i < buckets; ++i) {
    seen += bucket(i);
    if (seen >= want && seen > 0)
      return upper_us(i) / 1000.0;
  }
  return upper_us(buckets - 1) / 1000.0;
}

namespace kit {

lane_stats& shard_stats::lane(const std::string& id) {
  std::lock_guard<std::mutex> guard{named_mtx_};
  auto& slot = lanes_[id];
  if (!slot)
    slot = std::make_unique<lane_stats>();
  return *slot;
}

std::vector<std::pair<std::string, const lane_stats*>> shard_stats::lanes() const {
  std::lock_guard<std::mutex> guard{named_mtx_};
  std::vector<std::pair<std::string, const lane_stats*>> out;
  for (auto& [id, figures] : lanes_)
    out.emplace_back(id, figures.get());
  return out;
}

std::atomic<int64_t>& shard_stats::resident_of(const std::string& kind) {
  std::lock_guard<std::mutex> guard{named_mtx_};
  auto& slot = residents_[kind];
  if (!slot)
    slot = std::make_unique<std::atomic<int64_t>>(0);
  return *slot;
}

std::vector<std::pair<std::string, int64_t>> shard_stats::residents() const {
  std::lock_guard<std::mutex> guard{named_mtx_};
  std::vector<std::pair<std::string, int64_t>> out;
  for (auto& [kind, n] : residents_)
    out.emplace_back(kind, n->load(std::memory_order_relaxed));
  return out;
}

kind_call_stats& shard_stats::calls_of(const std::string& kind) {
  std::lock_guard<std::mutex> guard{named_mtx_};
  auto& slot = kind_calls_[kind];
  if (!slot)
    slot = std::make_unique<kind_call_stats>();
  return *slot;
}

std::vector<std::pair<std::string, const kind_call_stats*>> shard_stats::kind_calls() const {
  std::lock_guard<std::mutex> guard{named_mtx_};
  std::vector<std::pair<std::string, const kind_call_stats*>> out;
  for (auto& [kind, c] : kind_calls_)
    out.emplace_back(kind, c.get());
  return out;
}

std::shared_ptr<shard_stats> shard_registry::open(uint32_t shard) {
  auto out = std::make_shared<shard_stats>();
  std::lock_guard<std::mutex> guard{mtx_};
  by_shard_[shard] = out;
  return out;
}

std::vector<std::pair<uint32_t, std::shared_ptr<const shard_stats>>> shard_registry::live() const {
  std::vector<std::pair<uint32_t, std::shared_ptr<const shard_stats>>> out;
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [shard, weak] : by_shard_)
    if (auto s = weak.lock())
      out.emplace_back(shard, std::move(s));
  return out;
}

} // namespace kit

} // namespace gost
