#include "cluster/lease_planner.hpp"

#include <algorithm>

namespace gost::runtime {

lease_planner::lease_planner(std::string me, uint32_t shard_count, int max_moves)
  : me_(std::move(me)), shard_count_(shard_count),
    max_moves_(static_cast<size_t>(std::max(1, max_moves))) {}

void lease_planner::observe(const std::vector<std::string>& alive, const std::vector<lease>& leases,
                            const std::vector<held>& mine) {
  load_.clear();
  for (auto& n : alive)
    load_[n] = 0;
  load_[me_]; // this node counts even before its first heartbeat shows
  for (auto& l : leases)
    if (!l.free && load_.count(l.owner) != 0)
      ++load_[l.owner];
  auto nodes = static_cast<uint32_t>(load_.size());
  hi_ = (shard_count_ + nodes - 1) / nodes;
  lo_ = shard_count_ / nodes;
  mine_ = moving_ = 0;
  handable_.clear();
  for (auto& h : mine) {
    if (h.draining) {
      ++moving_;
    } else {
      ++mine_;
      handable_.push_back(h.shard);
    }
  }
  std::sort(handable_.begin(), handable_.end());
  std::reverse(handable_.begin(), handable_.end()); // popped from the back: lowest shard first
}

void lease_planner::acquired() {
  ++mine_;
  ++load_[me_];
}

std::optional<std::pair<uint32_t, std::string>> lease_planner::next_handoff() {
  if (moving_ >= max_moves_ || mine_ <= lo_ || handable_.empty())
    return std::nullopt;
  auto neediest = std::min_element(load_.begin(), load_.end(),
                                   [](auto& a, auto& b) { return a.second < b.second; });
  if (neediest == load_.end() || neediest->first == me_
      || (neediest->second >= lo_ && mine_ <= hi_))
    return std::nullopt;
  auto shard = handable_.back();
  handable_.pop_back();
  ++neediest->second;
  --load_[me_];
  --mine_;
  ++moving_;
  return std::make_pair(shard, neediest->first);
}

} // namespace gost::runtime
