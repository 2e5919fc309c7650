#pragma once
// A harness for unit tests of an application's entity type (gost/entities/entity_type.hpp):
// no actor system, no database. It keeps one entity's state, version, clock and named timers
// the way the kit does, and hands each event to the type's handler through the same path the
// kit uses (`apply`: type checks, the reply's type), so a test reads like the entity's life:
//
//   gost::testing::entity_harness<watchlist::watchlist> w{"user-1"};
//   auto r = w.ask(add("offer-1"));
//   CHECK(r.ok());
//   CHECK(r.reply().size() == 1);
//   CHECK(w.timers().count("sweep") == 1);
//   w.advance(std::chrono::hours{24});          // fires the sweep timer, handled like any event
//
// What the kit does after a handler, the harness does too: a handled event commits its state
// (version + 1), its sends, outputs and timers (a cancel, then the sets: a set replaces the
// pending timer of its name); a refusal (gost::refused) or a throw keeps none of it. Sends to
// other entities are recorded, not delivered: check them in the result.
// Framework-free (doctest, Catch2 and GoogleTest all work): results are values to check.

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <google/protobuf/any.pb.h>

#include "gost/entities/entity_type.hpp"

namespace gost::testing {

/// What one event did.
struct handled_event {
  enum class outcome { handled, refused, failed };
  outcome result = outcome::handled;
  errc refusal = errc::failed_precondition; ///< with outcome::refused
  std::string message;                      ///< a refusal's or a failure's message
  std::string timer;                        ///< the named timer this event was (advance())
  std::optional<google::protobuf::Any> reply_any;
  std::vector<entity_context::sent> sends;
  std::vector<entity_context::emitted> outputs;

  bool ok() const noexcept { return result == outcome::handled; }
  bool refused() const noexcept { return result == outcome::refused; }
  bool failed() const noexcept { return result == outcome::failed; }

  /// The reply as a `M` (default-constructed when the handler sent none or another type).
  template <class M>
  M reply_as() const {
    M m;
    if (reply_any)
      reply_any->UnpackTo(&m);
    return m;
  }
};

template <class Type>
class entity_harness {
public:
  using state_type = typename Type::state_type;
  using event_type = typename Type::event_type;
  using reply_type = typename Type::reply_type;
  using clock = std::chrono::system_clock;

  /// A pending named timer.
  struct timer {
    clock::time_point due;
    event_type event;
  };

  explicit entity_harness(std::string id = "e1",
                          std::shared_ptr<const Type> type = std::make_shared<Type>())
    : type_(std::move(type)), id_(std::move(id)) {}

  /// The entity's state: set it up before the events, check it after.
  state_type state;
  /// Events handled (the kit's version).
  int64_t version = 0;
  /// The entity's lane (ctx.set_lane changes it) and tag (ctx.set_tag).
  std::string lane;
  std::optional<std::string> tag;
  /// The time the next event is handled at (ctx.now()); advance() moves it.
  clock::time_point now = clock::time_point{std::chrono::hours{24 * 20'000}};

  /// Handles `e` as a sent event (EntityService.Send, or a send from another entity).
  handled_event send(const event_type& e) { return handle(e, false, {}, 0); }

  /// Handles `e` as an ask (EntityService.Ask): the reply is in the result.
  auto ask(const event_type& e) {
    struct asked : handled_event {
      /// The reply, of the type's reply type.
      auto reply() const {
        if constexpr (std::is_void<reply_type>::value)
          return this->reply_any.value_or(google::protobuf::Any{});
        else
          return this->template reply_as<reply_type>();
      }
    };
    return asked{handle(e, true, {}, 0)};
  }

  /// Moves the clock by `d`, handling every named timer due by then in due order (each at its
  /// own due time; timers its handler sets meanwhile included). The results, in order.
  std::vector<handled_event> advance(std::chrono::milliseconds d) {
    auto until = now + d;
    std::vector<handled_event> out;
    for (;;) {
      auto next = std::min_element(timers_.begin(), timers_.end(),
                                   [](auto& a, auto& b) { return a.second.due < b.second.due; });
      if (next == timers_.end() || next->second.due > until)
        break;
      now = std::max(now, next->second.due);
      auto name = next->first;
      auto event = std::move(next->second.event);
      timers_.erase(next); // consumed by its event, as the kit does
      out.push_back(handle(event, false, name, 0));
    }
    now = until;
    return out;
  }

  /// The named timers pending, by name.
  const std::map<std::string, timer>& timers() const noexcept { return timers_; }
  bool has_timer(const std::string& name) const { return timers_.count(name) != 0; }

  const std::string& id() const noexcept { return id_; }

private:
  std::shared_ptr<const Type> type_;
  std::string id_;
  std::map<std::string, timer> timers_;

  handled_event handle(const event_type& e, bool asked, std::string timer_name, int attempt) {
    entity_context ctx{type_->kind(), id_, lane, version, attempt, now};
    ctx.set_origin(asked, timer_name);
    google::protobuf::Any in, stored;
    in.PackFrom(e);
    stored.PackFrom(state);
    handled_event r;
    r.timer = std::move(timer_name);
    google::protobuf::Any next;
    try {
      next = type_->apply(&stored, in, ctx);
    } catch (const gost::refused& x) {
      r.result = handled_event::outcome::refused;
      r.refusal = x.code();
      r.message = x.what();
      return r;
    } catch (const std::exception& x) {
      r.result = handled_event::outcome::failed;
      r.message = x.what();
      return r;
    }
    // Committed: the state, then what the handler did besides.
    next.UnpackTo(&state);
    ++version;
    lane = ctx.lane();
    if (ctx.tag())
      tag = ctx.tag();
    for (auto& name : ctx.cancelled_timers())
      timers_.erase(name);
    for (auto& t : ctx.timers()) {
      event_type ev;
      t.event.UnpackTo(&ev);
      timers_[t.name] = timer{now + t.delay, std::move(ev)};
    }
    r.reply_any = ctx.reply();
    r.sends = ctx.sends();
    r.outputs = ctx.outputs();
    return r;
  }
};

} // namespace gost::testing
