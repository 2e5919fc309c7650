#pragma once
// The entity kit's actor side: what every kind's entity actor shares, so that a kind writes
// its rules and nothing of the scaffolding (offer actors, durable entities).
//
// - `entity_actor_frame<State, Base>`: the actor class's base. It keeps the actor's trail (a
//   member of the actor object, not of its state: CAF destroys the state when the actor exits,
//   while its shard may still read the trail through the handle it holds) and, after each
//   turn, counts what waits in the mailbox into the shard's figures.
// - `waits`, `ended`, `event_promise`: the trail of the event in progress; every answer of an
//   event goes through an event_promise, so no path forgets to end it.
// - `commit`: hands a write-set to the shard's writer and owns what each outcome means.
//
// A kind's `State` provides: `env` (an intrusive pointer to its kit::entity_env<...>-derived
// environment), `mailbox_reported`, `trail_key()` (the entity's name in traces),
// `trail_version()` (its version now) and `forget()` (drop the in-memory copy: the next event
// reloads). Its destructor reports the stop (kit::report_stopped): that needs the kind's
// members, which a base's destructor no longer sees.

#include <string>
#include <type_traits>
#include <utility>

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "gost/core/errc.hpp"
#include "gost/core/kit/shard.hpp"
#include "gost/core/kit/trail.hpp"

namespace gost::kit {

/// Events redone after their write lost a version check (the entity changed behind its actor)
/// before the caller hears of the conflict.
constexpr int max_redo = 3;

/// The base of a kind's entity actor class: the trail, and the mailbox count after each turn.
template <class State, class Base>
class entity_actor_frame : public caf::stateful_actor<State, Base> {
public:
  using super = caf::stateful_actor<State, Base>;
  using resume_result = typename super::resume_result;

  entity_actor_frame(caf::actor_config& cfg, uint16_t recent_events)
    : super(cfg), trail_(recent_events) {}

  resume_result resume(caf::execution_unit* eu, size_t max_throughput) override {
    auto result = super::resume(eu, max_throughput);
    // What waits now (messages held back by an event in progress, or left for the next turn)
    // is counted into the shard's figures; a stopped actor's state took its count back.
    if (result != resume_result::done)
      report_mailbox(*this->state.env, this->state.mailbox_reported, held_messages(*this));
    return result;
  }

  actor_trail& trail() noexcept { return trail_; }
  const actor_trail& trail() const noexcept { return trail_; }

  /// The trail of an actor of this class given as its abstract_actor (shard_config::trail).
  static const actor_trail* trail_of_actor(const void* actor) {
    auto* a = static_cast<const caf::abstract_actor*>(actor);
    return &static_cast<const entity_actor_frame*>(a)->trail();
  }

private:
  actor_trail trail_;
};

/// The trail of `self`, an actor of an entity_actor_frame<State, Base>.
template <class State, class Base>
actor_trail& trail_of(caf::stateful_actor<State, Base>* self) {
  return static_cast<entity_actor_frame<State, Base>*>(self)->trail();
}

/// The actor waits on `w` (nothing: no longer), as its shard's inspection shows.
template <class Self>
void waits(Self self, waiting_on w) {
  trail_of(self).wait(w, self->state.env->now_us());
}

/// How an error ends an event in the trail.
event_result result_of(const caf::error& err);

/// Ends the event in progress (if any) in the trail, with the entity's version now.
template <class Self>
void ended(Self self, event_result r) {
  auto& st = self->state;
  end_event(*st.env, trail_of(self), st.trail_key(), r, st.trail_version());
}

/// A response promise that ends the event in the actor's trail as it delivers. `outcome`: how
/// a delivered value ends it (a run whose event failed still answers with its queue entries);
/// `refused` also marks an error delivered as the handler's refusal.
template <class Self, class Result>
struct event_promise {
  Self self;
  caf::typed_response_promise<Result> rp;
  event_result outcome = event_result::ok;

  template <class T>
  void deliver(T&& x) {
    waits(self, waiting_on::nothing);
    if constexpr (std::is_same<std::decay_t<T>, caf::error>::value)
      ended(self, outcome == event_result::refused ? outcome : result_of(x));
    else
      ended(self, outcome);
    rp.deliver(std::forward<T>(x));
  }
};

template <class Result, class Self>
event_promise<Self, Result> promise_of(Self self) {
  return {self, self->template make_response_promise<Result>()};
}

/// The error of a write the shard's lease no longer covers.
caf::error fenced_error(uint32_t shard);

/// Writes `ws` through the shard's writer (fenced by the shard's epoch) and says what became
/// of it: `done(outcome)` once it committed (or was a duplicate of a request id committed
/// before); after a lost version check the actor forgets its copy and calls `conflict()` (the
/// kind redoes the event while `attempt + 1 < max_redo`, or answers); a lost lease, a unique
/// key another entity holds (errc::already_exists) or a failed batch forgets the copy and goes
/// to `fail(error)`.
template <class Self, class WriteSet, class Done, class Conflict, class Fail>
void commit(Self self, WriteSet ws, Done done, Conflict conflict, Fail fail) {
  auto& st = self->state;
  waits(self, waiting_on::writer);
  self
    ->request(st.env->writer, caf::infinite, write_atom_v, st.env->shard, st.env->epoch,
              std::move(ws))
    .await(
      // The callbacks move into the handlers (CAF keeps them until the answer): no copies of
      // what they hold.
      [self, done = std::move(done), conflict = std::move(conflict),
       fail](persistence::write_outcome out) mutable {
        waits(self, waiting_on::nothing);
        switch (out) {
          case persistence::write_outcome::committed:
          case persistence::write_outcome::duplicate: done(out); return;
          case persistence::write_outcome::conflict:
            self->state.forget();
            conflict();
            return;
          case persistence::write_outcome::fenced:
            self->state.forget();
            fail(fenced_error(self->state.env->shard));
            return;
          case persistence::write_outcome::key_taken:
            self->state.forget();
            fail(make_error(errc::already_exists,
                            "another entity holds a unique key this write would give this one"));
            return;
          case persistence::write_outcome::home_moved:
            self->state.forget();
            fail(make_error(errc::unavailable,
                            "the new entity's key belongs to a shard that moved to another shard "
                            "group's database meanwhile (a split): nothing written; retry, the "
                            "retry creates it in its new home group"));
            return;
          case persistence::write_outcome::key_elsewhere:
            self->state.forget();
            fail(make_error(errc::failed_precondition,
                            "the unique key this write would give the entity belongs to another "
                            "shard group's database than the entity's: nothing written"));
            return;
        }
      },
      [self, fail](caf::error& err) mutable {
        waits(self, waiting_on::nothing);
        self->state.forget();
        fail(std::move(err));
      });
}

} // namespace gost::kit
