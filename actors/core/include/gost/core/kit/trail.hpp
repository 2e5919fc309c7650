#pragma once
// What an entity actor did lately and what it waits on (issue 13: `gostctl offer ID` and
// `gostctl trace ID`; docs/adr/0013-recent-events-and-live-trace.md).
//
// - `recent_ring`: the last N events that reached one actor, small PODs in a ring that grows
//   geometrically up to N (`console.recent_events`) and then overwrites the oldest: an actor
//   that saw one event holds one slot, a busy one N; no allocation once full.
// - `actor_trail`: the ring, the event in progress and what the actor waits on, behind a spin
//   flag the actor takes for a few stores; its shard reads it (kit::trail_fn) without sending
//   the actor a message, so it can tell "waiting on the writer" while the actor is inside that
//   very event (an `await` holds every other message back).
// - `trace_hub` (one per node): live subscribers by entity id or lane. An actor publishes an
//   event only when `any()` (one relaxed load) says somebody listens.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gost::kit {

enum class event_kind : uint8_t {
  create,
  get,
  update,
  remove,
  read_state,
  update_state,
  run,
  send, ///< an event stored for a durable entity (handled later by a `run`)
  other,
  ask ///< an event a durable entity handles at once and answers (EntityService.Ask)
};
/// Who caused an event. A run's source is how its queue entry reached the shard: queued by an
/// API change (api), by a stage's run (stage), a timer (due later than when the shard learned
/// it), the background rescan, a console verb on this node, a retry after a failure, or read
/// from PostgreSQL (queue: another node's change, a verb on another node, a restart).
enum class event_source : uint8_t { api, stage, timer, feed, rescan, console, retry, queue };
enum class event_result : uint8_t {
  ok,
  unchanged,
  not_found,
  conflict,
  failed,
  fenced,
  running,
  refused ///< the handler refused the event (gost::refused): nothing of it kept
};
enum class waiting_on : uint8_t { nothing, load, pool, writer };

const char* to_string(event_kind x);
const char* to_string(event_source x);
const char* to_string(event_result x);
const char* to_string(waiting_on x);
/// The inverse of to_string (unknown text: the first value).
event_kind kind_of(const std::string& s);
event_source source_of(const std::string& s);
event_result result_of(const std::string& s);
waiting_on waiting_of(const std::string& s);

/// One event as an actor keeps it: 32 bytes, no allocation.
struct recent_event {
  int64_t at_us = 0;   ///< when it reached the actor (µs since the Unix epoch)
  int64_t version = 0; ///< the entity's version after it (as committed; 0: none)
  /// The lane (stage) it was for; points into the kind's registry, which outlives the node's
  /// actors. Null: none (or a lane the node does not know).
  const std::string* lane = nullptr;
  uint32_t duration_us = 0;
  event_kind kind = event_kind::other;
  event_source source = event_source::api;
  event_result result = event_result::ok;
};

/// The last `capacity` events, oldest overwritten. Plain: the caller synchronizes.
class recent_ring {
public:
  explicit recent_ring(uint16_t capacity = 0) noexcept : cap_(capacity) {}

  void push(const recent_event& e);
  size_t size() const noexcept { return size_; }
  size_t capacity() const noexcept { return cap_; }
  /// Slots allocated now (grows 1, 2, 4, ... up to capacity()).
  size_t allocated() const noexcept { return alloc_; }

  /// Calls f(const recent_event&) oldest first.
  template <class F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < size_; ++i)
      f(buf_[(head_ + alloc_ - size_ + i) % alloc_]);
  }

private:
  std::unique_ptr<recent_event[]> buf_;
  uint16_t cap_ = 0;
  uint16_t alloc_ = 0;
  uint16_t head_ = 0; ///< next slot written
  uint16_t size_ = 0;
};

/// An event as the console shows it (copied out of an actor: owns its lane's name).
struct event_view {
  event_kind kind = event_kind::other;
  event_source source = event_source::api;
  event_result result = event_result::ok;
  std::string lane;
  uint32_t duration_us = 0;
  int64_t version = 0;
  int64_t at_us = 0;
};

event_view view_of(const recent_event& e);

/// What an entity's owner tells of its actor (gostctl offer ID): residency, mailbox, what it
/// waits on, its recent events, and its shard's lease epoch and write lag.
struct activity {
  bool resident = false;
  int64_t mailbox = -1; ///< -1: not resident, or busy in an event for over a second
  waiting_on waiting = waiting_on::nothing;
  int64_t waiting_us = 0;         ///< for how long
  bool in_event = false;          ///< an event has started and not finished: `current`
  event_view current;             ///< the event in progress (result `running`)
  std::vector<event_view> recent; ///< oldest first
  int64_t epoch = 0;
  int64_t write_lag_us = 0; ///< oldest write-set the shard's writer holds uncommitted; 0: none
  std::string node;         ///< the node answering (set by the runtime's node link)
};

/// One actor's trail: written by the actor (one thread at a time), read by its shard.
class actor_trail {
public:
  explicit actor_trail(uint16_t capacity) noexcept : ring_(capacity) {}

  bool enabled() const noexcept { return ring_.capacity() > 0; }

  /// An event starts (the one before, if never ended, is dropped).
  void begin(event_kind k, event_source s, const std::string* lane, int64_t now_us) noexcept;
  /// The event in progress ends with its result and the entity's version: kept in the ring
  /// when `keep` (reads are not: a busy reader would push out what changed the entity).
  /// Returns it (for the trace hub); false when none was in progress.
  bool end(event_result r, int64_t version, int64_t now_us, recent_event& out, bool keep = true);
  /// The kind of the event in progress (meaningful while one is; read by the actor itself).
  event_kind current_kind() const noexcept { return current_.kind; }
  /// The actor waits (`nothing`: it no longer does).
  void wait(waiting_on w, int64_t now_us) noexcept;

  /// Copies what the console shows into `out` (all but mailbox, epoch and write lag).
  void snapshot(activity& out, int64_t now_us) const;

private:
  void lock() const noexcept {
    while (busy_.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock() const noexcept { busy_.clear(std::memory_order_release); }

  recent_ring ring_;
  recent_event current_;
  int64_t waiting_since_us_ = 0;
  waiting_on waiting_ = waiting_on::nothing;
  bool in_event_ = false;
  mutable std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
};

/// How a shard finds the trail of one of its entity actors (a kind's function: the trail is
/// a member of the actor object, alive while the shard holds the handle). No virtual function:
/// a vtable pointer would cost every actor 8 bytes.
using trail_fn = const actor_trail* (*)(const void* actor);

// -- live trace -------------------------------------------------------------------------------

/// An event as a trace subscriber gets it.
struct trace_event {
  std::string entity_id;
  uint32_t shard = 0;
  event_view e;
};

class trace_hub;

/// One subscriber: a bounded queue the hub fills and the subscriber drains. Unsubscribes when
/// destroyed.
class trace_subscription {
public:
  ~trace_subscription();
  trace_subscription(const trace_subscription&) = delete;
  trace_subscription& operator=(const trace_subscription&) = delete;

  /// The next event, waiting at most `wait`; false when none came.
  bool next(trace_event& out, std::chrono::milliseconds wait);
  /// Events dropped because the subscriber fell behind (the queue was full).
  uint64_t dropped() const;

private:
  friend class trace_hub;
  struct impl;
  explicit trace_subscription(std::shared_ptr<trace_hub> hub, std::unique_ptr<impl> i);
  std::shared_ptr<trace_hub> hub_;
  std::unique_ptr<impl> impl_;
};

/// The node's live trace subscriptions (by entity id, or by lane: every entity's events of
/// that lane on this node). Thread-safe; publishing when nobody listens is never called
/// (callers check any()).
class trace_hub : public std::enable_shared_from_this<trace_hub> {
public:
  trace_hub();
  ~trace_hub();

  /// Whether any subscription exists: the one load the actors pay per event.
  bool any() const noexcept { return subscribed_.load(std::memory_order_relaxed) != 0; }
  /// Subscriptions now.
  int64_t subscriptions() const noexcept { return subscribed_.load(std::memory_order_relaxed); }

  /// Subscribes to the events of `entity_id` (when not empty) or of `lane`; at most `queue`
  /// events wait for the subscriber (more are dropped and counted).
  std::unique_ptr<trace_subscription> subscribe(std::string entity_id, std::string lane,
                                                size_t queue = 1024);

  /// Hands an event to the subscriptions that want it.
  void publish(const std::string& entity_id, uint32_t shard, const recent_event& e);

  /// Traces served to clients now (the console's own count: gost_console_traces_active).
  std::atomic<int64_t> serving{0};

private:
  friend class trace_subscription;
  void remove(trace_subscription::impl* s);
  struct state;
  std::unique_ptr<state> st_;
  std::atomic<int64_t> subscribed_{0};
};

} // namespace gost::kit
