#include "gost/core/kit/lane_scheduler.hpp"

#include <algorithm>
#include <limits>

namespace gost::kit {

lane_scheduler::lane_scheduler(options_fn limits, int background_share)
  : options_(std::move(limits)), background_share_(std::max(2, background_share)) {}

lane_scheduler::lane_queue* lane_scheduler::find_lane(const std::string& id) {
  for (auto& l : lanes_)
    if (l.id == id)
      return &l;
  return nullptr;
}

lane_scheduler::lane_queue& lane_scheduler::lane_of(const std::string& id) {
  if (auto* l = find_lane(id))
    return *l;
  lane_queue fresh;
  fresh.id = id;
  fresh.options = options_ ? options_(id) : lane_options{};
  fresh.tokens = fresh.options.rate_limit > 0 ? std::max(1.0, fresh.options.rate_limit / 10) : 0;
  lanes_.push_back(std::move(fresh));
  return lanes_.back();
}

size_t lane_scheduler::add(const persistence::queue_entries& entries, event_source origin,
                           int64_t now_us) {
  size_t fresh = 0;
  for (auto& e : entries) {
    if (!known_.emplace(e.lane, e.entity_id).second)
      continue;
    auto source = e.prio == persistence::priority::background ? event_source::rescan
                  : e.due_at_us > now_us                      ? event_source::timer
                                                              : origin;
    timers_.push({e.due_at_us, e.lane, e.entity_id, e.prio, source});
    warm_.emplace(e.due_at_us, e.entity_id);
    ++fresh;
  }
  return fresh;
}

void lane_scheduler::make_ready(int64_t now_us) {
  while (!timers_.empty() && timers_.top().due_us <= now_us) {
    auto t = timers_.top();
    timers_.pop();
    auto& l = lane_of(t.lane);
    (t.prio == persistence::priority::background ? l.background : l.normal)
      .push_back({t.due_us, std::move(t.entity_id), t.source});
  }
}

std::vector<lane_scheduler::work> lane_scheduler::take(int64_t now_us) {
  make_ready(now_us);
  std::vector<work> out;
  for (auto& l : lanes_) {
    if (paused_.count(l.id) != 0)
      continue;
    auto& lim = l.options;
    if (lim.rate_limit > 0) {
      // Token bucket holding at most a tenth of a second's worth (at least one token).
      auto cap = std::max(1.0, lim.rate_limit / 10);
      if (l.refilled_us != 0)
        l.tokens = std::min(cap, l.tokens + (now_us - l.refilled_us) * lim.rate_limit / 1e6);
      l.refilled_us = now_us;
    }
    while (l.in_flight < static_cast<size_t>(std::max(1, lim.max_parallelism))
           && (!l.normal.empty() || !l.background.empty())) {
      if (lim.rate_limit > 0) {
        if (l.tokens < 1)
          break;
        l.tokens -= 1;
      }
      bool bg_turn = ++l.picks % static_cast<uint64_t>(background_share_) == 0;
      auto& q = l.normal.empty() || (bg_turn && !l.background.empty()) ? l.background : l.normal;
      out.push_back({l.id, std::move(q.front().entity_id), q.front().source});
      q.pop_front();
      ++l.in_flight;
    }
  }
  return out;
}

void lane_scheduler::done(const std::string& lane, const std::string& entity_id) {
  if (auto* l = find_lane(lane); l != nullptr && l->in_flight > 0)
    --l->in_flight;
  known_.erase({lane, entity_id});
}

void lane_scheduler::retry(const std::string& lane, const std::string& entity_id,
                           int64_t retry_at_us) {
  if (auto* l = find_lane(lane); l != nullptr && l->in_flight > 0)
    --l->in_flight;
  timers_.push({retry_at_us, lane, entity_id, persistence::priority::normal, event_source::retry});
}

std::vector<std::string> lane_scheduler::take_warm(int64_t now_us, int64_t horizon_us) {
  std::vector<std::string> out;
  while (!warm_.empty() && warm_.top().first <= horizon_us) {
    if (warm_.top().first > now_us)
      out.push_back(warm_.top().second);
    warm_.pop();
  }
  return out;
}

int64_t lane_scheduler::next_warm_due() const {
  return warm_.empty() ? std::numeric_limits<int64_t>::max() : warm_.top().first;
}

int64_t lane_scheduler::next_due() const {
  return timers_.empty() ? std::numeric_limits<int64_t>::max() : timers_.top().due_us;
}

size_t lane_scheduler::in_flight(const std::string& lane) const {
  for (auto& l : lanes_)
    if (l.id == lane)
      return l.in_flight;
  return 0;
}

size_t lane_scheduler::waiting(const std::string& lane) const {
  for (auto& l : lanes_)
    if (l.id == lane)
      return l.normal.size() + l.background.size();
  return 0;
}

size_t lane_scheduler::waiting() const {
  size_t n = 0;
  for (auto& l : lanes_)
    n += l.normal.size() + l.background.size();
  return n;
}

int64_t lane_scheduler::oldest_waiting() const {
  int64_t oldest = 0;
  for (auto& l : lanes_)
    for (auto* q : {&l.normal, &l.background})
      if (!q->empty() && (oldest == 0 || q->front().due_us < oldest))
        oldest = q->front().due_us;
  return oldest;
}

size_t lane_scheduler::paused_in_flight() const {
  size_t n = 0;
  for (auto& l : lanes_)
    if (paused_.count(l.id) != 0)
      n += l.in_flight;
  return n;
}

} // namespace gost::kit
