#include "gost/core/kit/retry_policy.hpp"

#include <algorithm>

namespace gost::kit {

namespace {

int64_t us(std::chrono::milliseconds d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

} // namespace

retry_policy::decision retry_policy::failed(const std::string& lane, const std::string& entity_id,
                                            const caf::error& err,
                                            std::chrono::milliseconds backoff, int64_t now_us) {
  decision d;
  if (classify(err) == disposition::retry) {
    // 1, 2, 4, ... max_streak_factor times the back-off.
    auto streak = std::min(++streak_[lane], 6);
    d.retry_at_us = now_us + us(backoff) * std::min(1 << (streak - 1), max_streak_factor);
    d.attempts = attempts(lane, entity_id);
    return d;
  }
  auto key = std::make_pair(lane, entity_id);
  auto n = ++attempts_[key];
  d.attempts = n;
  d.counted = true;
  if (n >= max_attempts_) {
    attempts_.erase(key);
    d.what = decision::kind::dead_letter;
    return d;
  }
  d.retry_at_us = now_us + us(backoff) * n;
  return d;
}

void retry_policy::succeeded(const std::string& lane, const std::string& entity_id) {
  attempts_.erase({lane, entity_id});
  streak_.erase(lane);
}

int retry_policy::attempts(const std::string& lane, const std::string& entity_id) const {
  auto i = attempts_.find({lane, entity_id});
  return i == attempts_.end() ? 0 : i->second;
}

} // namespace gost::kit
