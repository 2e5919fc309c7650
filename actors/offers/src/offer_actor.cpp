// The offer actor: one per resident offer, handling its events one at a time. Every request
// to the store or the writer uses `await`, which holds back the actor's other messages until
// the answer arrives, so an event never interleaves with another event of the same offer.
// Its in-memory copy is what the database holds: it changes only after a commit.
//
// Passivation is the shard's decision (idle sweep or resident cap, in LRU order): the shard
// forgets the actor and sends (passivate, ok); anything it forwarded before is still in the
// mailbox and handled first, and an event in progress (`await`) finishes before the actor
// stops. The actor itself keeps no timer, so an idle actor costs no clock entry.

#include "offer_actor.hpp"

#include <cassert>
#include <memory>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/actor_pool.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/kit/entity_actor.hpp"
#include "gost/core/log.hpp"
#include "gost/offers/offer_changes.hpp"
#include "gost/offers/offer_entity.hpp"
#include "gost/offers/stage_runner.hpp"
#include "gost/v1/events.pb.h"

namespace gost::detail {

namespace {

const auto lg = gost::log::get("offers");

using persistence::write_outcome;

struct offer_state {
  static inline const char* name = "gost.offer";
  offer_env_ptr env;
  offer_entity entity; ///< holds the offer's id too, loaded or not
  offer_context ctx;
  caf::actor_id aid = 0;
  uint32_t mailbox_reported = 0; ///< counted into the shard's figures (kit::report_mailbox)

  offer_state() = default;
  offer_state(const offer_state&) = delete;
  offer_state& operator=(const offer_state&) = delete;

  /// Runs when the actor stops, for any reason (CAF destroys a stateful actor's state on
  /// exit): tells the shard, which then forgets the actor.
  ~offer_state() {
    if (env) {
      kit::report_mailbox(*env, mailbox_reported, 0);
      kit::report_stopped(*env, entity.id(), aid);
    }
  }

  // What the kit's entity-actor helpers need (kit/entity_actor.hpp).
  const std::string& trail_key() const noexcept { return entity.id(); }
  int64_t trail_version() const noexcept {
    const auto* cur = entity.current();
    return cur ? cur->version() : 0;
  }
  /// Forgets the in-memory copy: the next event reloads from PostgreSQL.
  void forget() {
    entity.forget();
    ctx.states.clear();
    ctx.queued_now.clear();
    ctx.chain.clear();
  }
};

using offer_base = caf::stateful_actor<offer_state, offer_actor::base>;
using self_ptr = offer_base*;

/// The offer actor whose messages this thread is handling, set around `resume`: the handlers
/// are shared by all offer actors (see offer_behavior) and find their actor here.
thread_local offer_base* running = nullptr;

self_ptr current() {
  assert(running != nullptr);
  return running;
}

int64_t now_us() {
  return to_us(stage_clock::now());
}

using kit::ended;
using kit::max_redo;
using kit::waits;

/// A response promise that ends the event in the actor's trail as it delivers.
template <class Result>
using promise = kit::event_promise<self_ptr, Result>;

template <class Result>
promise<Result> promise_of(self_ptr self) {
  return kit::promise_of<Result>(self);
}

void forget(self_ptr self) {
  self->state.forget();
}

/// An event starts: `lane` is a stage's id as the registry holds it (null: none, or unknown).
void started(self_ptr self, kit::event_kind k, kit::event_source s = kit::event_source::api,
             const std::string& stage_id = {}) {
  auto& env = *self->state.env;
  const std::string* lane = nullptr;
  if (!stage_id.empty())
    if (auto* e = env.stages->find(stage_id))
      lane = &e->id;
  kit::begin_event(env, kit::trail_of(self), k, s, lane);
}

/// Runs `f` once the stored offer is known: loads it (with its states and queue entries)
/// first when needed. Load errors go to `fail`.
template <class F, class Fail>
void with_loaded(self_ptr self, F f, Fail fail) {
  auto& st = self->state;
  if (st.entity.loaded()) {
    f();
    return;
  }
  waits(self, kit::waiting_on::load);
  self->request(st.env->store, caf::infinite, load_atom_v, st.entity.id())
    .await(
      [self, f = std::move(f), fail](offer_snapshot& snap) mutable {
        waits(self, kit::waiting_on::nothing);
        auto& s = self->state;
        s.entity.committed(snap.found ? std::optional<v1::Offer>{std::move(snap.offer)}
                                      : std::nullopt);
        s.ctx.states.clear();
        for (auto& stored : snap.states) {
          auto& held = s.ctx.states[stored.stage_id];
          held.value.ParseFromString(stored.bytes);
          held.version = stored.version;
        }
        s.ctx.queued_now.clear();
        auto now = now_us();
        for (auto& e : snap.queued)
          if (e.due_at_us <= now)
            s.ctx.queued_now.insert(e.lane);
        f();
      },
      [self, fail](caf::error& err) mutable {
        waits(self, kit::waiting_on::nothing);
        fail(std::move(err));
      });
}

/// What `committed` needs of a write-set once it is handed to the writer: everything but the
/// new body and the outbox event (the large parts), which are not copied.
persistence::write_set bookkeeping_copy(const persistence::write_set& ws) {
  persistence::write_set out;
  out.offer_id = ws.offer_id;
  out.expected_version = ws.expected_version;
  out.op = ws.op;
  out.states = ws.states;
  out.dequeue = ws.dequeue;
  out.enqueue = ws.enqueue;
  out.dead_letters = ws.dead_letters;
  return out;
}

/// What a write applies to the actor once it committed: the write-set's bookkeeping and the
/// offer after it (none: unchanged). Held by pointer in the commit's callbacks, which CAF and
/// the kit copy on their way: the offer and the states are not copied with them.
struct pending_apply {
  persistence::write_set set;
  std::optional<v1::Offer> next;
};

using pending_ptr = std::shared_ptr<pending_apply>;

pending_ptr pending(const persistence::write_set& ws, std::optional<v1::Offer> next) {
  return std::make_shared<pending_apply>(pending_apply{bookkeeping_copy(ws), std::move(next)});
}

/// Applies a committed write-set to the in-memory copy.
/// `offer`: the offer after the set; nullptr: unchanged.
void committed(self_ptr self, const persistence::write_set& ws, std::optional<v1::Offer>* offer) {
  auto& st = self->state;
  if (offer != nullptr)
    st.entity.committed(std::move(*offer));
  for (auto& [stage, bytes] : ws.states) {
    auto& held = st.ctx.states[stage];
    held.value.ParseFromString(bytes);
    ++held.version; // as the commit did (state_version + 1)
  }
  for (auto& stage : ws.dequeue)
    st.ctx.queued_now.erase(stage);
  auto now = now_us();
  for (auto& e : ws.enqueue)
    if (e.due_at_us <= now) {
      st.ctx.queued_now.insert(e.lane);
      ++st.ctx.chain[e.lane];
    }
  if (st.ctx.queued_now.empty())
    st.ctx.chain.clear(); // the chain of stage runs ended
  if (ws.op == persistence::offer_op::remove)
    forget(self);
}

/// The answer to a create or update: the offer as committed.
offer_msg reply_offer(const std::optional<v1::Offer>& next, const persistence::write_set&) {
  return offer_msg{*next};
}

/// The inputs of offer_changes.hpp's functions: what the actor holds now.
/// What a change computes on; `rid` says who made it (recorded in the outbox event).
change_input inputs(self_ptr self, const request_id& rid) {
  auto& st = self->state;
  return {st.entity,      st.ctx,     *st.env->stages, std::chrono::system_clock::now(),
          st.env->limits, rid.source, rid.by};
}

/// How a write's answer is kept with its request id (offer_requests.answer) and read back
/// for a retry: the offer as committed (its body, as written), a version, a state update.
template <class Result>
struct answer_codec;

template <>
struct answer_codec<offer_msg> {
  static std::string encode(const std::optional<v1::Offer>& next,
                            const persistence::write_set& ws) {
    return ws.new_body ? *ws.new_body : next ? next->SerializeAsString() : std::string{};
  }
  static caf::expected<offer_msg> decode(const std::string& bytes) {
    offer_msg m;
    if (!m.value.ParseFromString(bytes))
      return make_error(errc::internal, "a stored answer does not parse as gost.v1.Offer");
    return m;
  }
};

template <>
struct answer_codec<int64_t> {
  static std::string encode(int64_t version) { return std::to_string(version); }
  static caf::expected<int64_t> decode(const std::string& bytes) { return std::stoll(bytes); }
};

template <>
struct answer_codec<state_update_msg> {
  static std::string encode(const state_update_msg& m) { return m.value.SerializeAsString(); }
  static caf::expected<state_update_msg> decode(const std::string& bytes) {
    state_update_msg m;
    if (!m.value.ParseFromString(bytes))
      return make_error(errc::internal, "a stored answer does not parse as UpdateStateResponse");
    return m;
  }
};

template <class Result, class Reply>
std::string encode_answer(Reply& reply, const std::optional<v1::Offer>& next,
                          const persistence::write_set& ws) {
  if constexpr (std::is_same<Result, offer_msg>::value)
    return answer_codec<offer_msg>::encode(next, ws);
  else
    return answer_codec<Result>::encode(reply(next, ws));
}

/// The first answer of a write whose request id committed before, read back; `otherwise`
/// when no write with that id is kept.
template <class Result>
void answer_again(self_ptr self, promise<Result> rp, const request_id& rid, caf::error otherwise) {
  auto& st = self->state;
  waits(self, kit::waiting_on::load);
  self->request(st.env->store, caf::infinite, find_atom_v, st.entity.id(), rid)
    .await(
      [=](std::string& bytes) mutable {
        waits(self, kit::waiting_on::nothing);
        if (bytes.empty()) {
          rp.deliver(otherwise);
          return;
        }
        auto r = answer_codec<Result>::decode(bytes);
        if (r)
          rp.deliver(std::move(*r));
        else
          rp.deliver(std::move(r.error()));
      },
      [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

/// An API change (create / update / delete / state update): `prepare` computes the write-set
/// from the current state (offer_changes.hpp: or an error for the client); it is written, and
/// on a lost version check the actor reloads and prepares again. With a request id the write
/// commits at most once: a retry whose id committed before gets the first answer.
/// `source`: who queued the stages the change enqueues (the runs' source in the trail).
template <class Result, class Prepare, class Reply>
void external_change(self_ptr self, promise<Result> rp, Prepare prepare, Reply reply,
                     request_id rid, int attempt,
                     kit::event_source source = kit::event_source::api) {
  with_loaded(
    self,
    [=]() mutable {
      auto& st = self->state;
      st.ctx.chain.clear(); // an external change starts a new chain
      auto change = prepare();
      if (!change) {
        // A retry of a write that did apply fails the rules it met the first time (the
        // version moved on, the offer exists): its request id tells.
        auto& err = change.error();
        if (!rid.empty() && (err == errc::conflict || err == errc::already_exists)) {
          answer_again<Result>(self, rp, rid, std::move(err));
          return;
        }
        rp.deliver(std::move(err));
        return;
      }
      if (!rid.empty()) {
        // Written even when nothing else is: the answer is what a retry gets.
        change->ws.request_id = rid.value;
        change->ws.answer = encode_answer<Result>(reply, change->next, change->ws);
      } else if (writes_nothing(change->ws)) {
        ended(self, kit::event_result::unchanged);
        rp.deliver(reply(change->next, change->ws));
        return;
      }
      auto applied = pending(change->ws, std::move(change->next));
      kit::commit(
        self, std::move(change->ws),
        [=](write_outcome out) mutable {
          auto& s = self->state;
          auto& set = applied->set;
          auto& next = applied->next;
          if (out == write_outcome::duplicate) {
            answer_again<Result>(
              self, rp, rid,
              make_error(errc::conflict, "offer " + s.entity.id() + ": the write with request_id "
                                           + rid.value
                                           + " applied before; its answer is no longer kept"));
            return;
          }
          auto answer = reply(next, set); // before `next` moves into the entity
          // An offer is replaced when the change computed a new one (or removed it).
          committed(self, set, next || set.op == persistence::offer_op::remove ? &next : nullptr);
          if (!set.enqueue.empty())
            kit::report_enqueued(*s.env, set.enqueue, source);
          rp.deliver(std::move(answer));
        },
        [=]() mutable {
          auto& s = self->state;
          if (applied->set.op == persistence::offer_op::insert) {
            rp.deliver(
              make_error(errc::already_exists, "an offer with id " + s.entity.id()
                                                 + " or with this seller_id/namespace/external_id "
                                                   "already exists"));
          } else if (attempt + 1 < max_redo) {
            s.env->stats->stage_conflicts.fetch_add(1, std::memory_order_relaxed);
            external_change(self, rp, prepare, reply, rid, attempt + 1, source);
          } else {
            rp.deliver(
              make_error(errc::conflict, "offer " + s.entity.id() + " keeps changing; retry"));
          }
        },
        [=](caf::error err) mutable {
          // write_outcome::key_taken: the update's new seller key is another offer's.
          if (err == errc::already_exists && applied->next) {
            auto& o = *applied->next;
            err = make_error(errc::already_exists,
                             "offer " + o.id() + " cannot take seller_id " + o.seller_id()
                               + ", namespace " + o.namespace_() + ", external_id "
                               + o.external_id() + ": another offer has them; nothing changed");
          } else if (err == errc::failed_precondition && applied->next) {
            // write_outcome::key_elsewhere (the only failed precondition of a commit): the
            // key's index is in another group's database.
            auto& o = *applied->next;
            err = make_error(errc::failed_precondition,
                             "offer " + o.id() + " cannot change its seller key to seller_id "
                               + o.seller_id() + ", namespace " + o.namespace_()
                               + ": the offer is stored in another shard group than the home of "
                                 "its old or new seller (a split left it there, or the seller "
                                 "is at home in another group); nothing changed: delete it and "
                                 "create it under the new key");
          }
          rp.deliver(std::move(err));
        });
    },
    [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
}

void run_stage(self_ptr self, promise<queue_entries> rp, std::string stage_id, int attempt);

/// Writes a run's write-set; on commit applies it and answers the shard, on a lost version
/// check reloads and runs the stage again (seed step 7).
void write_run(self_ptr self, promise<queue_entries> rp, std::string stage_id, int attempt,
               persistence::write_set ws, std::optional<v1::Offer> next) {
  auto set = bookkeeping_copy(ws);
  kit::commit(
    self, std::move(ws),
    [=](write_outcome outcome) mutable {
      auto& s = self->state;
      if (outcome == write_outcome::duplicate) { // stage runs carry no request id
        rp.deliver(make_error(errc::internal, "a stage run's write was a duplicate"));
        return;
      }
      s.env->stats->stage_runs.fetch_add(1, std::memory_order_relaxed);
      if (auto* m = s.env->stats->stage(stage_id))
        m->runs.fetch_add(1, std::memory_order_relaxed);
      s.env->stats->offers.dead_letters.fetch_add(set.dead_letters.size(),
                                                  std::memory_order_relaxed);
      committed(self, set, next ? &next : nullptr);
      rp.deliver(std::move(set.enqueue));
    },
    [=]() mutable {
      // The offer changed behind us (seed step 7): reload and start again.
      auto& s = self->state;
      s.env->stats->stage_conflicts.fetch_add(1, std::memory_order_relaxed);
      if (attempt + 1 < max_redo)
        run_stage(self, rp, stage_id, attempt + 1);
      else
        rp.deliver(make_error(errc::conflict, "offer " + s.entity.id()
                                                + " kept changing during stage " + stage_id));
    },
    [=](caf::error err) mutable { rp.deliver(std::move(err)); });
}

/// A stage's result: decides what to write (and which other stages to ask), then writes it.
void finish_run(self_ptr self, promise<queue_entries> rp, const std::string& stage_id, int attempt,
                const stage_result& result) {
  auto& st = self->state;
  const auto& cur = st.entity.current();
  auto out = after_process(*st.env->stages, stage_id, *cur, st.ctx, result, now_us(),
                           runner_limits{st.env->max_chain});
  if (out.storms_cut > 0) {
    st.env->stats->change_storms_cut.fetch_add(static_cast<uint64_t>(out.storms_cut),
                                               std::memory_order_relaxed);
    lg->warn("change storm cut shard={} offer={} stage={}", st.env->shard, st.entity.id(),
             stage_id);
  }
  write_run(self, rp, stage_id, attempt, std::move(out.ws), std::move(out.offer));
}

caf::error stage_failed(self_ptr self, const std::string& stage_id, const std::string& what,
                        errc code = errc::internal) {
  self->state.env->stats->stage_failures.fetch_add(1, std::memory_order_relaxed);
  if (auto* m = self->state.env->stats->stage(stage_id))
    m->failures.fetch_add(1, std::memory_order_relaxed);
  return make_error(code, "stage " + stage_id
                            + (code == errc::unavailable ? " unavailable" : " failed") + what);
}

/// A due stage (seed "Работа стейджа"): load, process, write if the version is unchanged,
/// else start again; the write also asks the other stages and enqueues those that want it.
/// A blocking stage's `process` runs in its pool; the actor waits (`await`) without holding a
/// scheduler thread, and handles nothing else meanwhile.
void run_stage(self_ptr self, promise<queue_entries> rp, std::string stage_id, int attempt) {
  with_loaded(
    self,
    [=]() mutable {
      auto& st = self->state;
      auto* entry = st.env->stages->find(stage_id);
      const auto& cur = st.entity.current();
      if (!cur || entry == nullptr || !entry->opts.enabled) {
        // Nothing to run (the offer is gone, or the stage is unknown or disabled): drop the
        // entry without touching the offer.
        persistence::write_set ws;
        ws.offer_id = st.entity.id();
        ws.op = persistence::offer_op::none;
        ws.dequeue.push_back(stage_id);
        write_run(self, rp, stage_id, attempt, std::move(ws), std::nullopt);
        return;
      }
      const google::protobuf::Any* state = nullptr;
      if (auto i = st.ctx.states.find(stage_id); i != st.ctx.states.end())
        state = &i->second.value;
      if (entry->opts.blocking && st.env->pools != nullptr) {
        if (auto p = st.env->pools->find(stage_id); p != st.env->pools->end()) {
          // The job owns copies of its inputs: this actor may be gone when it runs.
          auto offer = std::make_shared<const v1::Offer>(*cur);
          auto saved =
            state != nullptr ? std::make_shared<const google::protobuf::Any>(*state) : nullptr;
          auto impl = entry->impl;
          auto* metrics = st.env->stats->stage(stage_id);
          auto run = st.env->run;
          pool_job job{[impl, offer, saved, metrics, run] {
            detail::run_scope scope{run.get()};
            auto t0 = std::chrono::steady_clock::now();
            auto r = impl->process(*offer, saved.get());
            if (metrics != nullptr)
              metrics->process.record(std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - t0));
            return std::any{std::move(r)};
          }};
          waits(self, kit::waiting_on::pool);
          self->request(p->second, caf::infinite, run_atom_v, std::move(job))
            .await(
              [=](pool_result& r) mutable {
                waits(self, kit::waiting_on::nothing);
                finish_run(self, rp, stage_id, attempt,
                           std::any_cast<const stage_result&>(r.value));
              },
              [=](caf::error& err) mutable {
                waits(self, kit::waiting_on::nothing);
                auto code =
                  classify(err) == disposition::retry ? errc::unavailable : errc::internal;
                rp.deliver(
                  stage_failed(self, stage_id, ": " + persistence::error_message(err), code));
              });
          return;
        }
      }
      stage_result result;
      try {
        auto t0 = std::chrono::steady_clock::now();
        detail::run_scope scope{st.env->run.get()};
        result = entry->impl->process(*cur, state);
        if (auto* m = st.env->stats->stage(stage_id))
          m->process.record(std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now() - t0));
      } catch (const unavailable_error& e) {
        rp.deliver(stage_failed(self, stage_id, std::string{": "} + e.what(), errc::unavailable));
        return;
      } catch (const std::exception& e) {
        rp.deliver(stage_failed(self, stage_id, std::string{": "} + e.what()));
        return;
      } catch (...) {
        rp.deliver(stage_failed(self, stage_id, ""));
        return;
      }
      finish_run(self, rp, stage_id, attempt, result);
    },
    [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
}

/// The handlers of every offer actor. A typed behavior costs ~450 bytes per actor when each
/// actor has its own (a match case per message type, each holding its captures), more than
/// all of an idle actor's own state; so there is one, built once, capturing nothing, and each
/// handler starts by looking up the actor it runs for.
offer_actor::behavior_type offer_behavior() {
  return {
    [](create_atom, const std::string&, offer_msg& m, request_id& rid) -> caf::result<offer_msg> {
      auto self = current();
      started(self, kit::event_kind::create);
      auto rp = promise_of<offer_msg>(self);
      // Shared: `prepare` is copied into each callback of the event (a redo prepares again).
      auto prepare = [self, in = std::make_shared<const v1::Offer>(std::move(m.value)), rid] {
        return prepare_create(inputs(self, rid), *in);
      };
      external_change(self, rp, prepare, reply_offer, std::move(rid), 0);
      return rp.rp;
    },
    [](get_atom, const std::string&) -> caf::result<offer_msg> {
      auto self = current();
      started(self, kit::event_kind::get);
      auto rp = promise_of<offer_msg>(self);
      with_loaded(
        self,
        [=]() mutable {
          const auto* cur = self->state.entity.current();
          if (cur)
            rp.deliver(offer_msg{*cur});
          else
            rp.deliver(
              make_error(errc::not_found, "offer " + self->state.entity.id() + " does not exist"));
        },
        [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
      return rp.rp;
    },
    [](update_atom, const std::string&, offer_msg& m, int64_t expected, std::string& mask,
       request_id& rid) -> caf::result<offer_msg> {
      auto self = current();
      started(self, kit::event_kind::update);
      auto rp = promise_of<offer_msg>(self);
      // Shared: `prepare` is copied into each callback of the event (a redo prepares again).
      auto prepare = [self, in = std::make_shared<const v1::Offer>(std::move(m.value)), expected,
                      mask = std::move(mask),
                      rid] { return prepare_update(inputs(self, rid), *in, expected, mask); };
      external_change(self, rp, prepare, reply_offer, std::move(rid), 0);
      return rp.rp;
    },
    [](delete_atom, const std::string&, int64_t expected, request_id& rid) -> caf::result<int64_t> {
      auto self = current();
      started(self, kit::event_kind::remove);
      auto rp = promise_of<int64_t>(self);
      auto prepare = [self, expected, rid] { return prepare_delete(inputs(self, rid), expected); };
      auto reply = [](const std::optional<v1::Offer>&, const persistence::write_set& ws) {
        return ws.expected_version + 1;
      };
      external_change(self, rp, prepare, reply, std::move(rid), 0);
      return rp.rp;
    },
    [](get_atom, state_atom, const std::string&,
       const std::string& stage_id) -> caf::result<state_read_msg> {
      auto self = current();
      started(self, kit::event_kind::read_state, kit::event_source::api, stage_id);
      auto rp = promise_of<state_read_msg>(self);
      with_loaded(
        self,
        [=]() mutable {
          auto& st = self->state;
          if (!st.entity.current()) {
            rp.deliver(make_error(errc::not_found, "offer " + st.entity.id() + " does not exist"));
            return;
          }
          state_read_msg out;
          if (auto i = st.ctx.states.find(stage_id); i != st.ctx.states.end()) {
            *out.value.mutable_state() = i->second.value;
            out.value.set_version(i->second.version);
          }
          rp.deliver(std::move(out));
        },
        [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
      return rp.rp;
    },
    [](update_atom, state_atom, const std::string&, const std::string& stage_id, std::string& bytes,
       int64_t expected, request_id& rid) -> caf::result<state_update_msg> {
      auto self = current();
      started(self, kit::event_kind::update_state, kit::event_source::api, stage_id);
      auto rp = promise_of<state_update_msg>(self);
      auto prepare = [self, stage_id, bytes = std::move(bytes), expected, rid] {
        return prepare_state_update(inputs(self, rid), stage_id, bytes, expected);
      };
      auto reply = [self, stage_id](const std::optional<v1::Offer>&,
                                    const persistence::write_set& ws) {
        // Computed before the commit is applied to the held state.
        auto& states = self->state.ctx.states;
        auto i = states.find(stage_id);
        int64_t current = i == states.end() ? 0 : i->second.version;
        state_update_msg out;
        out.value.set_updated(!ws.states.empty());
        out.value.set_version(ws.states.empty() ? current : current + 1);
        return out;
      };
      external_change(self, rp, prepare, reply, std::move(rid), 0);
      return rp.rp;
    },
    [](requeue_atom, const std::string&, const std::string& stage_id,
       request_id& rid) -> caf::result<int64_t> {
      auto self = current();
      started(self, kit::event_kind::other, kit::event_source::console, stage_id);
      auto rp = promise_of<int64_t>(self);
      // Through the actor like any change: its held queue (queued_now) learns of the entry as
      // it commits, the shard schedules it, and a run in flight finishes first (one run after
      // the requeue, never none).
      auto prepare = [self, stage_id, rid] { return prepare_requeue(inputs(self, rid), stage_id); };
      auto reply = [](const std::optional<v1::Offer>&, const persistence::write_set& ws) {
        return ws.enqueue.front().due_at_us;
      };
      external_change(self, rp, prepare, reply, std::move(rid), 0, kit::event_source::console);
      return rp.rp;
    },
    [](run_atom, std::string& stage_id, uint8_t source) -> caf::result<queue_entries> {
      auto self = current();
      started(self, kit::event_kind::run, static_cast<kit::event_source>(source), stage_id);
      auto rp = promise_of<queue_entries>(self);
      run_stage(self, rp, std::move(stage_id), 0);
      return rp.rp;
    },
    [](mailbox_atom) -> uint64_t { return current()->mailbox().size(); },
    [](warm_atom) {
      auto self = current();
      // Load errors are not news here: the run that follows loads again and reports them.
      with_loaded(
        self, [] {}, [](caf::error) {});
    },
    [](passivate_atom, ok_atom) { current()->quit(); },
  };
}

using offer_frame = kit::entity_actor_frame<offer_state, offer_actor::base>;

/// An offer actor: the shared behavior, and `running` set while it handles messages. CAF runs
/// an actor's handlers (and its response handlers) only inside its `resume`, on one thread.
class offer_actor_impl final : public offer_frame {
public:
  offer_actor_impl(caf::actor_config& cfg, std::string id, offer_env_ptr env)
    : offer_frame(cfg, env->recent_events) {
    state.entity = offer_entity{std::move(id)};
    state.env = std::move(env);
    state.aid = this->id();
    // A throwing handler stops the actor: logged here with its offer and the error (the shard
    // counts the crash when the actor reports its stop). A capture-less handler: no
    // allocation per actor.
    set_exception_handler([](caf::scheduled_actor* self, std::exception_ptr& ep) -> caf::error {
      auto* me = static_cast<offer_base*>(self);
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      lg->error("offer actor crashed shard={} offer={} error={}", me->state.env->shard,
                me->state.entity.id(), what);
      return caf::make_error(caf::sec::runtime_error, std::move(what));
    });
  }

  resume_result resume(caf::execution_unit* eu, size_t max_throughput) override {
    auto* outer = running;
    running = this;
    auto result = offer_frame::resume(eu, max_throughput);
    running = outer;
    return result;
  }

protected:
  behavior_type make_behavior() override {
    static const behavior_type shared = offer_behavior();
    return shared;
  }
};

} // namespace

const kit::actor_trail* offer_trail(const void* actor) {
  return offer_frame::trail_of_actor(actor);
}

offer_actor spawn_offer_actor(caf::local_actor* parent, std::string id, offer_env_ptr env) {
  // Neither linked nor monitored: the actor tells its shard when it stops (~offer_state). A
  // link or a monitor puts an attachable on an actor (~48 bytes each), and CAF 0.17 removes a
  // link by a linear search over the shard's attachables, so passivations cost O(resident
  // actors). The shard stops its offer actors itself when it stops (see ~shard_state).
  return parent->spawn<offer_actor_impl>(std::move(id), std::move(env));
}

} // namespace gost::detail
