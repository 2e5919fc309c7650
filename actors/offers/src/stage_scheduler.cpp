#include "stage_scheduler.hpp"

#include <algorithm>
#include <limits>

namespace gost {

stage_scheduler::stage_scheduler(const stage_registry& reg, int background_share)
  : background_share_(std::max(2, background_share)) {
  for (auto& e : reg.all()) {
    lane l;
    l.stage = &e;
    l.tokens = e.opts.rate_limit > 0 ? std::max(1.0, e.opts.rate_limit / 10) : 0;
    lanes_.push_back(std::move(l));
  }
}

stage_scheduler::lane* stage_scheduler::find_lane(const std::string& stage_id) {
  for (auto& l : lanes_)
    if (l.stage->id == stage_id)
      return &l;
  return nullptr;
}

size_t stage_scheduler::add(const std::vector<persistence::queue_entry>& entries) {
  size_t fresh = 0;
  for (auto& e : entries) {
    // Entries of unknown stages are still run: the offer actor drops them from the queue.
    if (!known_.emplace(e.stage_id, e.offer_id).second)
      continue;
    timers_.push({e.due_at_us, e.stage_id, e.offer_id, e.prio});
    warm_.emplace(e.due_at_us, e.offer_id);
    ++fresh;
  }
  return fresh;
}

void stage_scheduler::make_ready(int64_t now_us) {
  while (!timers_.empty() && timers_.top().due_us <= now_us) {
    auto t = timers_.top();
    timers_.pop();
    auto* l = find_lane(t.stage_id);
    if (l == nullptr) {
      // A stage no longer registered: run with default limits; the offer actor drops it.
      orphans_.emplace_back();
      orphans_.back().id = t.stage_id;
      lane fresh;
      fresh.stage = &orphans_.back();
      lanes_.push_back(std::move(fresh));
      l = &lanes_.back();
    }
    (t.prio == persistence::priority::background ? l->background : l->normal)
      .push_back(std::move(t.offer_id));
  }
}

std::vector<stage_scheduler::work> stage_scheduler::take(int64_t now_us) {
  make_ready(now_us);
  std::vector<work> out;
  for (auto& l : lanes_) {
    auto& opts = l.stage->opts;
    if (opts.rate_limit > 0) {
      // Token bucket holding at most a tenth of a second's worth (at least one token).
      auto cap = std::max(1.0, opts.rate_limit / 10);
      if (l.refilled_us != 0)
        l.tokens = std::min(cap, l.tokens + (now_us - l.refilled_us) * opts.rate_limit / 1e6);
      l.refilled_us = now_us;
    }
    while (l.in_flight < static_cast<size_t>(std::max(1, opts.max_parallelism))
           && (!l.normal.empty() || !l.background.empty())) {
      if (opts.rate_limit > 0) {
        if (l.tokens < 1)
          break;
        l.tokens -= 1;
      }
      bool bg_turn = ++l.picks % static_cast<uint64_t>(background_share_) == 0;
      auto& q = l.normal.empty() || (bg_turn && !l.background.empty()) ? l.background : l.normal;
      out.push_back({l.stage->id, std::move(q.front())});
      q.pop_front();
      ++l.in_flight;
    }
  }
  return out;
}

void stage_scheduler::done(const std::string& stage_id, const std::string& offer_id) {
  if (auto* l = find_lane(stage_id); l != nullptr && l->in_flight > 0)
    --l->in_flight;
  known_.erase({stage_id, offer_id});
}

void stage_scheduler::retry(const std::string& stage_id, const std::string& offer_id,
                            int64_t retry_at_us) {
  if (auto* l = find_lane(stage_id); l != nullptr && l->in_flight > 0)
    --l->in_flight;
  timers_.push({retry_at_us, stage_id, offer_id, persistence::priority::normal});
}

std::vector<std::string> stage_scheduler::take_warm(int64_t now_us, int64_t horizon_us) {
  std::vector<std::string> out;
  while (!warm_.empty() && warm_.top().first <= horizon_us) {
    if (warm_.top().first > now_us)
      out.push_back(warm_.top().second);
    warm_.pop();
  }
  return out;
}

int64_t stage_scheduler::next_warm_due() const {
  return warm_.empty() ? std::numeric_limits<int64_t>::max() : warm_.top().first;
}

int64_t stage_scheduler::next_due() const {
  return timers_.empty() ? std::numeric_limits<int64_t>::max() : timers_.top().due_us;
}

size_t stage_scheduler::in_flight(const std::string& stage_id) const {
  for (auto& l : lanes_)
    if (l.stage->id == stage_id)
      return l.in_flight;
  return 0;
}

size_t stage_scheduler::waiting(const std::string& stage_id) const {
  for (auto& l : lanes_)
    if (l.stage->id == stage_id)
      return l.normal.size() + l.background.size();
  return 0;
}

} // namespace gost
