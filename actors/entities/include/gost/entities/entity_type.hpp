#pragma once
// Application-defined actor types on the entity kit (docs/adding-an-actor-type.md).
//
// A type has a state and events, both protobuf messages, and a handler that applies one event
// to the state. The kit hosts it like offers: sharded by id, one actor per live entity,
// passivated when idle, one event at a time, everything an event does (the new state, events
// to itself or to others, timers, outputs) committed in one transaction under the shard's lease
// epoch, reloaded after a crash, inspectable. Register it with one line:
//
//   class account final : public gost::entity_type<bank::v1::Account, bank::v1::AccountEvent> {
//   public:
//     std::string kind() const override { return "bank.account"; }
//     void handle(bank::v1::Account& a, const bank::v1::AccountEvent& e,
//                 gost::entity_context& ctx) const override { ... }
//   };
//   builder.add_entity_type<account>();
//
// Handlers are pure apart from `ctx`: they may run again for the same event (after a crash, or
// a retry), so side effects belong in events to other entities or in outputs that consumers
// pull (exactly once each, by cursor).
//
// An event may come as a *send* (stored, handled in turn; the sender learns only that it was
// stored) or as an *ask* (handled at once; the caller gets the handler's `ctx.reply(...)`, or
// its refusal, after everything the handler did committed). A handler refuses an event by
// throwing `gost::refused`: nothing it did is kept, and the event is not retried.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <google/protobuf/any.pb.h>
#include <google/protobuf/message.h>

#include "gost/core/errc.hpp"
#include "gost/core/unavailable.hpp"

namespace gost {

/// How the kit runs a type's events.
struct entity_options {
  /// Failed attempts of one event before it is dead-lettered (entity_dead_letters).
  int max_attempts = 3;
  /// A failed event is rescheduled this much later, times its attempts so far (seed 002's
  /// "+10 minutes" is a per-type choice: set it here).
  std::chrono::milliseconds retry_backoff{1000};
  /// At most this many entities of one lane handling an event at once, per shard.
  int max_parallelism = 64;
  /// At most this many events started per second per lane and shard; 0: unlimited.
  double rate_limit = 0;
};

/// Thrown by a handler to refuse an event (a business rule says no: "the list is full"):
/// nothing the handler did is committed (state, sends, timers, outputs); the event is consumed,
/// never retried; an ask gets the refusal as its error (`code` becomes the gRPC status:
/// failed_precondition, invalid_argument, not_found, already_exists, ...).
class refused : public std::runtime_error {
public:
  refused(errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  errc code() const noexcept { return code_; }

private:
  errc code_;
};

/// What a handler may do besides changing its entity's state. All of it is committed with the
/// new state, or not at all.
class entity_context {
public:
  /// A named timer set by the handler (`set_timer`).
  struct timer_set {
    std::string name;
    std::chrono::milliseconds delay;
    google::protobuf::Any event;
  };
  struct sent {
    std::string kind;
    std::string id;
    std::chrono::milliseconds delay;
    google::protobuf::Any event;
  };
  struct emitted {
    std::string lane;
    google::protobuf::Any output;
  };

  entity_context(std::string kind, std::string id, std::string lane, int64_t version, int attempt,
                 std::chrono::system_clock::time_point now)
    : kind_(std::move(kind)), id_(std::move(id)), lane_(std::move(lane)), version_(version),
      attempt_(attempt), now_(now) {}

  /// What the kit tells a handler about how its event came: as an ask (`asked`), or as the
  /// named timer `timer`.
  void set_origin(bool asked, std::string timer) {
    asked_ = asked;
    timer_ = std::move(timer);
  }

  const std::string& kind() const noexcept { return kind_; }
  const std::string& id() const noexcept { return id_; }
  /// The version of the state before this event (0: the entity has no state yet).
  int64_t version() const noexcept { return version_; }
  /// Failed attempts of this event before this one (a retry sees the same event again).
  int attempt() const noexcept { return attempt_; }
  /// The time the event is handled (use this rather than the clock: a retry sees its own).
  std::chrono::system_clock::time_point now() const noexcept { return now_; }

  /// Sends `event` to this entity, handled after `delay`: a step of its own (0), or a timer.
  void send_self(const google::protobuf::Message& event, std::chrono::milliseconds delay = {}) {
    send(id_, event, delay, kind_);
  }
  /// Sends `event` to entity `id` of `kind` (this kind when empty), handled after `delay`.
  void send(const std::string& id, const google::protobuf::Message& event,
            std::chrono::milliseconds delay = {}, const std::string& kind = {}) {
    sent s{kind.empty() ? kind_ : kind, id, delay, {}};
    s.event.PackFrom(event);
    sent_.push_back(std::move(s));
  }
  /// Records an output for consumers, in `lane` (this entity's lane when empty); consumers pull
  /// a kind's outputs per lane with a cursor (EntityService.PullOutputs).
  void emit(const google::protobuf::Message& output, const std::string& lane = {}) {
    emitted e{lane.empty() ? lane_ : lane, {}};
    e.output.PackFrom(output);
    emitted_.push_back(std::move(e));
  }
  /// Moves this entity to another lane (a queue with its own limits and backlog: e.g. a task
  /// group), from its next event on.
  void set_lane(std::string lane) { lane_ = std::move(lane); }
  const std::string& lane() const noexcept { return lane_; }
  /// Labels the entity (stored in its row, e.g. a task's state name) so that it can be listed
  /// by kind, lane and tag (persistence::list_entities_by_tag); kept until set again.
  void set_tag(std::string tag) { tag_ = std::move(tag); }
  const std::optional<std::string>& tag() const noexcept { return tag_; }
  /// How this event is retried when the handler throws, when it is not the type's
  /// options() (e.g. a per-group setting kept in the state). Takes effect even when set before
  /// the handler throws: call it first.
  void set_retry(std::chrono::milliseconds backoff, int max_attempts) {
    retry_ = std::make_pair(backoff, max_attempts);
  }
  const std::optional<std::pair<std::chrono::milliseconds, int>>& retry() const noexcept {
    return retry_;
  }

  /// Sets the named timer `name` of this entity: `event` handled after `delay`. It replaces
  /// the pending timer of that name (due time and event), if any: set it again to move it.
  void set_timer(const std::string& name, std::chrono::milliseconds delay,
                 const google::protobuf::Message& event) {
    if (name.empty())
      throw std::invalid_argument("set_timer: a named timer needs a name (send_self sets an "
                                  "unnamed one)");
    drop_timer(name);
    timer_set t{name, delay, {}};
    t.event.PackFrom(event);
    timers_.push_back(std::move(t));
  }
  /// Cancels the named timer `name` (pending, or set earlier in this event); nothing when none.
  void cancel_timer(const std::string& name) {
    drop_timer(name);
    cancelled_.push_back(name);
  }
  /// The named timer this event was set as (empty: it was not a named timer). A handler that
  /// re-arms itself calls set_timer(timer(), ...).
  const std::string& timer() const noexcept { return timer_; }

  /// True when the event came as an ask (EntityService.Ask): its caller waits for the reply.
  bool asked() const noexcept { return asked_; }
  /// Answers the ask (of the type's reply type): delivered to the caller once this event's
  /// changes committed. Ignored for a send. Not called: the caller gets an empty reply.
  void reply(const google::protobuf::Message& m) {
    reply_.emplace();
    reply_->PackFrom(m);
  }
  const std::optional<google::protobuf::Any>& reply() const noexcept { return reply_; }

  const std::vector<sent>& sends() const noexcept { return sent_; }
  const std::vector<emitted>& outputs() const noexcept { return emitted_; }
  const std::vector<timer_set>& timers() const noexcept { return timers_; }
  const std::vector<std::string>& cancelled_timers() const noexcept { return cancelled_; }

private:
  std::string kind_;
  std::string id_;
  std::string lane_;
  int64_t version_;
  int attempt_;
  std::chrono::system_clock::time_point now_;
  std::vector<sent> sent_;
  std::vector<emitted> emitted_;
  std::optional<std::string> tag_;
  std::optional<std::pair<std::chrono::milliseconds, int>> retry_;
  std::vector<timer_set> timers_;
  std::vector<std::string> cancelled_;
  std::string timer_;
  bool asked_ = false;
  std::optional<google::protobuf::Any> reply_;

  void drop_timer(const std::string& name) {
    for (auto i = timers_.begin(); i != timers_.end();)
      i = i->name == name ? timers_.erase(i) : i + 1;
    for (auto i = cancelled_.begin(); i != cancelled_.end();)
      i = *i == name ? cancelled_.erase(i) : i + 1;
  }
};

/// Every entity type, type-erased: what the kit calls.
class entity_type_base {
public:
  virtual ~entity_type_base() = default;
  /// A stable name, stored with every entity of the type (never rename one in use): letters,
  /// digits, '.', '_' and '-'.
  virtual std::string kind() const = 0;
  virtual const google::protobuf::Descriptor* state_descriptor() const = 0;
  virtual const google::protobuf::Descriptor* event_descriptor() const = 0;
  /// The message an ask is answered with; null: the type answers asks with an empty reply.
  virtual const google::protobuf::Descriptor* reply_descriptor() const { return nullptr; }
  virtual entity_options options() const { return {}; }
  /// The lane of an entity that `event` (sent from outside) is the first event of: the row is
  /// created in it, so that its first event is already scheduled in its own lane (e.g. a
  /// task's group). Empty: the kind's default lane. Not asked for entities that have a row.
  virtual std::string initial_lane(const google::protobuf::Any& event) const {
    (void)event;
    return {};
  }
  /// Applies `event` to `state` (null: the entity has none yet); returns the new state.
  /// Throws what the handler throws; errc::invalid_argument (as caf::error in an
  /// std::runtime_error) when `event` is not of event_descriptor()'s type.
  virtual google::protobuf::Any apply(const google::protobuf::Any* state,
                                      const google::protobuf::Any& event,
                                      entity_context& ctx) const = 0;
};

/// Thrown when an event or a stored state is not of the type's message type.
class type_mismatch : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The base to derive a type from: `State` and `Event` are generated protobuf messages;
/// `Reply`, when given, the message its asks are answered with (`ctx.reply(...)`).
template <class State, class Event, class Reply = void>
class entity_type : public entity_type_base {
public:
  using state_type = State;
  using event_type = Event;
  using reply_type = Reply;

  /// Applies one event. Throw to fail it (rescheduled with back-off, dead-lettered after
  /// options().max_attempts); throw unavailable_error when a service it needs is down
  /// (retried with back-off, never dead-lettered); throw refused to refuse it.
  virtual void handle(State& state, const Event& event, entity_context& ctx) const = 0;

  const google::protobuf::Descriptor* state_descriptor() const override {
    return State::descriptor();
  }
  const google::protobuf::Descriptor* event_descriptor() const override {
    return Event::descriptor();
  }
  const google::protobuf::Descriptor* reply_descriptor() const override {
    if constexpr (std::is_void<Reply>::value)
      return nullptr;
    else
      return Reply::descriptor();
  }

  google::protobuf::Any apply(const google::protobuf::Any* state,
                              const google::protobuf::Any& event,
                              entity_context& ctx) const override {
    State s;
    if (state != nullptr && !state->UnpackTo(&s))
      throw type_mismatch("the stored state of " + kind() + "/" + ctx.id() + " is not a "
                          + State::descriptor()->full_name());
    Event e;
    if (!event.UnpackTo(&e))
      throw type_mismatch("an event of " + kind() + " must be a " + Event::descriptor()->full_name()
                          + ", not " + event.type_url());
    handle(s, e, ctx);
    if constexpr (!std::is_void<Reply>::value) {
      if (ctx.reply() && !ctx.reply()->Is<Reply>())
        throw type_mismatch("a reply of " + kind() + " must be a "
                            + Reply::descriptor()->full_name() + ", not "
                            + ctx.reply()->type_url());
    }
    google::protobuf::Any out;
    out.PackFrom(s);
    return out;
  }
};

/// The entity types of a node, by kind.
class entity_registry {
public:
  /// Adds a type; an error names what is wrong (a bad or duplicate kind).
  caf::error add(std::shared_ptr<const entity_type_base> type);
  const entity_type_base* find(std::string_view kind) const;
  const std::vector<std::shared_ptr<const entity_type_base>>& all() const noexcept {
    return types_;
  }
  bool empty() const noexcept { return types_.empty(); }

private:
  std::vector<std::shared_ptr<const entity_type_base>> types_;
};

} // namespace gost
