// The offer actor: one per resident offer, handling its events one at a time. Every request
// to the store uses `await`, which holds back the actor's other messages until the answer
// arrives, so an event never interleaves with another event of the same offer.
//
// Passivation: a self-addressed tick checks for idleness; an idle actor asks its shard, the
// shard forgets it and answers (passivate, ok), and only then the actor stops. Anything the
// shard forwarded before that answer is still in the mailbox and handled first.

#include "offer_actor.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "gost/actors/offer_entity.hpp"
#include "gost/persistence/errors.hpp"

namespace gost::detail {

namespace {

using clock_type = std::chrono::steady_clock;
using persistence::db_errc;

using tick_atom = caf::atom_constant<caf::atom("tick")>;
using offer_actor_impl = offer_actor::extend<caf::reacts_to<tick_atom>>;

struct offer_state {
  static inline const char* name = "gost.offer";
  offer_actor_args args;
  offer_entity entity;
  clock_type::time_point last_event{};
  bool passivating = false;
};

using self_ptr = offer_actor_impl::stateful_pointer<offer_state>;

/// Runs `f` once the stored offer is known: loads it first when this is the actor's first
/// event. Load errors go to `fail`.
template <class F, class Fail>
void with_loaded(self_ptr self, F f, Fail fail) {
  auto& st = self->state;
  st.last_event = clock_type::now();
  if (st.entity.loaded()) {
    f();
    return;
  }
  self->request(st.args.store, caf::infinite, load_atom::value, st.args.id)
    .await(
      [=](offer_msg& m) mutable {
        self->state.entity.committed(std::move(m.value));
        f();
      },
      [=](caf::error& err) mutable {
        if (err == db_errc::not_found) {
          self->state.entity.committed(std::nullopt);
          f();
        } else {
          fail(std::move(err));
        }
      });
}

offer_actor_impl::behavior_type offer_fun(self_ptr self, offer_actor_args args) {
  self->state.args = std::move(args);
  self->state.last_event = clock_type::now();
  self->delayed_send(self, self->state.args.idle_timeout, tick_atom::value);
  return {
    [=](create_atom, offer_msg& m) -> caf::result<offer_msg> {
      auto rp = self->make_response_promise<offer_msg>();
      auto fail = [rp](caf::error err) mutable { rp.deliver(std::move(err)); };
      with_loaded(
        self,
        [=]() mutable {
          auto& st = self->state;
          auto next = st.entity.prepare_create(std::move(m.value), std::chrono::system_clock::now());
          if (!next) {
            rp.deliver(std::move(next.error()));
            return;
          }
          self->request(st.args.store, caf::infinite, insert_atom::value, offer_msg{*next},
                        st.args.shard)
            .await(
              [=](ok_atom) mutable {
                spdlog::debug("offer created shard={} offer={} version=1", self->state.args.shard,
                              self->state.args.id);
                self->state.entity.committed(*next);
                rp.deliver(offer_msg{*next});
              },
              [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
        },
        fail);
      return rp;
    },
    [=](get_atom, const std::string&) -> caf::result<offer_msg> {
      auto rp = self->make_response_promise<offer_msg>();
      with_loaded(
        self,
        [=]() mutable {
          auto& cur = self->state.entity.current();
          if (cur)
            rp.deliver(offer_msg{*cur});
          else
            rp.deliver(persistence::make_db_error(db_errc::not_found, "offer " + self->state.args.id
                                                                        + " does not exist"));
        },
        [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](update_atom, offer_msg& m, int64_t expected) -> caf::result<offer_msg> {
      auto rp = self->make_response_promise<offer_msg>();
      with_loaded(
        self,
        [=]() mutable {
          auto& st = self->state;
          m.value.set_id(st.args.id);
          auto next = st.entity.prepare_update(std::move(m.value), expected,
                                               std::chrono::system_clock::now());
          if (!next) {
            rp.deliver(std::move(next.error()));
            return;
          }
          auto before = st.entity.current()->version();
          self->request(st.args.store, caf::infinite, update_atom::value, offer_msg{*next}, before)
            .await(
              [=](ok_atom) mutable {
                self->state.entity.committed(*next);
                rp.deliver(offer_msg{*next});
              },
              [=](caf::error& err) mutable {
                // Someone else wrote the row (another node before fencing, a manual fix):
                // forget what we hold so the next event reloads.
                if (err == db_errc::conflict || err == db_errc::not_found)
                  self->state.entity = offer_entity{};
                rp.deliver(std::move(err));
              });
        },
        [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](delete_atom, const std::string&, int64_t expected) -> caf::result<int64_t> {
      auto rp = self->make_response_promise<int64_t>();
      with_loaded(
        self,
        [=]() mutable {
          auto& st = self->state;
          auto ver = st.entity.prepare_delete(st.args.id, expected);
          if (!ver) {
            rp.deliver(std::move(ver.error()));
            return;
          }
          auto at = *ver;
          self->request(st.args.store, caf::infinite, delete_atom::value, st.args.id, at)
            .await(
              [=](ok_atom) mutable {
                self->state.entity.committed(std::nullopt);
                rp.deliver(at + 1);
              },
              [=](caf::error& err) mutable {
                if (err == db_errc::conflict || err == db_errc::not_found)
                  self->state.entity = offer_entity{};
                rp.deliver(std::move(err));
              });
        },
        [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](tick_atom) {
      auto& st = self->state;
      auto idle_for = clock_type::now() - st.last_event;
      if (idle_for >= st.args.idle_timeout) {
        if (!st.passivating) {
          st.passivating = true;
          self->send(st.args.parent, passivate_atom::value, st.args.id);
        }
        return;
      }
      st.passivating = false;
      self->delayed_send(self, st.args.idle_timeout - idle_for, tick_atom::value);
    },
    [=](passivate_atom, ok_atom) { self->quit(); },
  };
}

} // namespace

offer_actor spawn_offer_actor(caf::local_actor* parent, offer_actor_args args) {
  // Linked: the shard hears of a crash through an exit message, and a stopping shard takes its
  // offer actors with it.
  auto impl = parent->spawn<caf::linked>(offer_fun, std::move(args));
  return caf::actor_cast<offer_actor>(impl);
}

} // namespace gost::detail
