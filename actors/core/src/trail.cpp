#include "gost/core/kit/trail.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>

namespace gost::kit {

namespace {

constexpr const char* kind_names[] = {"create",       "get", "update", "delete", "read_state",
                                      "update_state", "run", "send",   "other",  "ask"};
constexpr const char* source_names[] = {"api",    "stage",   "timer", "feed",
                                        "rescan", "console", "retry", "queue"};
constexpr const char* result_names[] = {"ok",     "unchanged", "not_found", "conflict",
                                        "failed", "fenced",    "running",   "refused"};
constexpr const char* waiting_names[] = {"nothing", "load", "pool", "writer"};

template <class E, size_t N>
E parse(const char* const (&names)[N], const std::string& s) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i])
      return static_cast<E>(i);
  return static_cast<E>(0);
}

template <size_t N>
const char* name(const char* const (&names)[N], uint8_t i) {
  return i < N ? names[i] : "?";
}

} // namespace

const char* to_string(event_kind x) {
  return name(kind_names, static_cast<uint8_t>(x));
}
const char* to_string(event_source x) {
  return name(source_names, static_cast<uint8_t>(x));
}
const char* to_string(event_result x) {
  return name(result_names, static_cast<uint8_t>(x));
}
const char* to_string(waiting_on x) {
  return name(waiting_names, static_cast<uint8_t>(x));
}
event_kind kind_of(const std::string& s) {
  return parse<event_kind>(kind_names, s);
}
event_source source_of(const std::string& s) {
  return parse<event_source>(source_names, s);
}
event_result result_of(const std::string& s) {
  return parse<event_result>(result_names, s);
}
waiting_on waiting_of(const std::string& s) {
  return parse<waiting_on>(waiting_names, s);
}

// -- recent_ring ------------------------------------------------------------------------------

void recent_ring::push(const recent_event& e) {
  if (cap_ == 0)
    return;
  if (size_ == alloc_ && alloc_ < cap_) {
    // Grow (1, 2, 4, ... up to the capacity), the events kept oldest first from slot 0.
    auto grown = static_cast<uint16_t>(std::min<int>(cap_, std::max(1, alloc_ * 2)));
    std::unique_ptr<recent_event[]> fresh{new recent_event[grown]};
    size_t i = 0;
    for_each([&](const recent_event& x) { fresh[i++] = x; });
    buf_ = std::move(fresh);
    alloc_ = grown;
    head_ = size_;
  }
  buf_[head_] = e;
  head_ = static_cast<uint16_t>((head_ + 1) % alloc_);
  if (size_ < alloc_)
    ++size_;
}

event_view view_of(const recent_event& e) {
  event_view v;
  v.kind = e.kind;
  v.source = e.source;
  v.result = e.result;
  if (e.lane != nullptr)
    v.lane = *e.lane;
  v.duration_us = e.duration_us;
  v.version = e.version;
  v.at_us = e.at_us;
  return v;
}

// -- actor_trail ------------------------------------------------------------------------------

void actor_trail::begin(event_kind k, event_source s, const std::string* lane,
                        int64_t now_us) noexcept {
  lock();
  current_ = recent_event{};
  current_.at_us = now_us;
  current_.lane = lane;
  current_.kind = k;
  current_.source = s;
  current_.result = event_result::running;
  in_event_ = true;
  unlock();
}

bool actor_trail::end(event_result r, int64_t version, int64_t now_us, recent_event& out,
                      bool keep) {
  lock();
  if (!in_event_) {
    unlock();
    return false;
  }
  in_event_ = false;
  waiting_ = waiting_on::nothing;
  current_.result = r;
  current_.version = version;
  current_.duration_us = static_cast<uint32_t>(
    std::clamp<int64_t>(now_us - current_.at_us, 0, std::numeric_limits<uint32_t>::max()));
  if (keep)
    ring_.push(current_);
  out = current_;
  unlock();
  return true;
}

void actor_trail::wait(waiting_on w, int64_t now_us) noexcept {
  lock();
  waiting_ = w;
  waiting_since_us_ = now_us;
  unlock();
}

void actor_trail::snapshot(activity& out, int64_t now_us) const {
  std::vector<recent_event> copy;
  lock();
  copy.reserve(ring_.size());
  ring_.for_each([&](const recent_event& e) { copy.push_back(e); });
  auto cur = current_;
  bool in_event = in_event_;
  auto waiting = waiting_;
  auto since = waiting_since_us_;
  unlock();
  // Lanes' names are copied outside the spin: they point into the registry, which does not
  // change.
  out.recent.clear();
  for (auto& e : copy)
    out.recent.push_back(view_of(e));
  out.in_event = in_event;
  if (in_event) {
    out.current = view_of(cur);
    out.current.duration_us =
      static_cast<uint32_t>(std::clamp<int64_t>(now_us - cur.at_us, 0, UINT32_MAX));
  }
  out.waiting = waiting;
  out.waiting_us = waiting == waiting_on::nothing ? 0 : std::max<int64_t>(0, now_us - since);
}

// -- trace_hub --------------------------------------------------------------------------------

struct trace_subscription::impl {
  std::string entity_id;
  std::string lane;
  size_t cap = 0;
  std::deque<trace_event> queue; ///< guarded by the hub's mutex
  std::condition_variable ready;
  uint64_t dropped = 0;
};

struct trace_hub::state {
  std::mutex mtx;
  std::vector<trace_subscription::impl*> subs;
};

trace_hub::trace_hub() : st_(std::make_unique<state>()) {}
trace_hub::~trace_hub() = default;

std::unique_ptr<trace_subscription> trace_hub::subscribe(std::string entity_id, std::string lane,
                                                         size_t queue) {
  auto i = std::make_unique<trace_subscription::impl>();
  i->entity_id = std::move(entity_id);
  i->lane = std::move(lane);
  i->cap = std::max<size_t>(1, queue);
  {
    std::lock_guard<std::mutex> guard{st_->mtx};
    st_->subs.push_back(i.get());
    subscribed_.store(static_cast<int64_t>(st_->subs.size()), std::memory_order_relaxed);
  }
  return std::unique_ptr<trace_subscription>(
    new trace_subscription(shared_from_this(), std::move(i)));
}

void trace_hub::remove(trace_subscription::impl* s) {
  std::lock_guard<std::mutex> guard{st_->mtx};
  auto& v = st_->subs;
  v.erase(std::remove(v.begin(), v.end(), s), v.end());
  subscribed_.store(static_cast<int64_t>(v.size()), std::memory_order_relaxed);
}

void trace_hub::publish(const std::string& entity_id, uint32_t shard, const recent_event& e) {
  std::lock_guard<std::mutex> guard{st_->mtx};
  for (auto* s : st_->subs) {
    bool wanted =
      !s->entity_id.empty() ? s->entity_id == entity_id : (e.lane != nullptr && *e.lane == s->lane);
    if (!wanted)
      continue;
    if (s->queue.size() >= s->cap) {
      ++s->dropped;
      continue;
    }
    s->queue.push_back(trace_event{entity_id, shard, view_of(e)});
    s->ready.notify_one();
  }
}

trace_subscription::trace_subscription(std::shared_ptr<trace_hub> hub, std::unique_ptr<impl> i)
  : hub_(std::move(hub)), impl_(std::move(i)) {}

trace_subscription::~trace_subscription() {
  hub_->remove(impl_.get());
}

bool trace_subscription::next(trace_event& out, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock{hub_->st_->mtx};
  if (!impl_->ready.wait_for(lock, wait, [&] { return !impl_->queue.empty(); }))
    return false;
  out = std::move(impl_->queue.front());
  impl_->queue.pop_front();
  return true;
}

uint64_t trace_subscription::dropped() const {
  std::lock_guard<std::mutex> guard{hub_->st_->mtx};
  return impl_->dropped;
}

} // namespace gost::kit
