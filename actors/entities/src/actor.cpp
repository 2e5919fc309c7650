// Durable entities on the entity kit: the entity actor (docs/adding-an-actor-type.md).
//
// The actor keeps the entity's state (and version) in memory between events, never its
// pending events: each `run` reads the events due now (one batched load for many entities),
// so events that other entities or other nodes stored meanwhile are never missed. An event's
// failure is the entity's business: it is rescheduled with the type's back-off (attempts
// counted in the row) or dead-lettered, and the run still succeeds for the kit, which keeps
// its own retries for what is not the entity's fault (the database or a service being down).
// An ask is handled at once and answered after its write committed, its answer kept by
// request id.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "durable.hpp"
#include "gost/core/kit/entity_actor.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"

namespace gost::detail {

namespace {

const auto lg = gost::log::get("kit");

using persistence::entity_row;
using persistence::entity_write;
using persistence::write_outcome;

struct entity_state {
  static inline const char* name = "gost.entity";
  entity_env_ptr env;
  std::string key; ///< kind/id
  bool loaded = false;
  int64_t version = 0;
  std::optional<google::protobuf::Any> state;
  std::string lane;
  caf::actor_id aid = 0;
  uint32_t mailbox_reported = 0; ///< counted into the shard's figures (kit::report_mailbox)
  /// Its kind's resident actors in the shard's figures (kit::shard_stats::resident_of): one
  /// more while this actor lives.
  std::atomic<int64_t>* kind_resident = nullptr;
  /// Its kind's asks and refused events in the shard's figures (kit::shard_stats::calls_of).
  kit::kind_call_stats* kind_calls = nullptr;
  /// The kit lane of the last run and its interned name (entity_env::intern_lane).
  std::string run_lane;
  const std::string* run_lane_name = nullptr;

  entity_state() = default;
  entity_state(const entity_state&) = delete;
  entity_state& operator=(const entity_state&) = delete;

  ~entity_state() {
    if (kind_resident != nullptr)
      kind_resident->fetch_sub(1, std::memory_order_relaxed);
    if (env) {
      kit::report_mailbox(*env, mailbox_reported, 0);
      kit::report_stopped(*env, key, aid);
    }
  }

  // What the kit's entity-actor helpers need (kit/entity_actor.hpp).
  const std::string& trail_key() const noexcept { return key; }
  int64_t trail_version() const noexcept { return version; }
  /// Forgets the in-memory copy: the next event reloads.
  void forget() {
    loaded = false;
    state.reset();
  }
};

using entity_ptr = durable_actor::stateful_pointer<entity_state>;

using kit::max_redo;
using kit::waits;

/// An event starts; `kit_lane` names the lane of a run (empty: none).
void started(entity_ptr self, kit::event_kind k, kit::event_source s,
             const std::string& kit_lane = {}) {
  auto& st = self->state;
  const std::string* lane = nullptr;
  if (!kit_lane.empty()) {
    if (st.run_lane_name == nullptr || st.run_lane != kit_lane) {
      st.run_lane = kit_lane;
      st.run_lane_name = st.env->intern_lane(kit_lane);
    }
    lane = st.run_lane_name;
  }
  kit::begin_event(*st.env, kit::trail_of(self), k, s, lane);
}

/// A response promise that ends the event in the actor's trail as it delivers (every answer
/// of an event goes through here).
template <class Result>
using promise = kit::event_promise<entity_ptr, Result>;

template <class Result>
promise<Result> promise_of(entity_ptr self) {
  return kit::promise_of<Result>(self);
}

using run_promise = promise<persistence::queue_entries>;

void forget(entity_ptr self) {
  self->state.forget();
}

/// Takes what a load says about the entity.
void take(entity_ptr self, const entity_row& row) {
  auto& st = self->state;
  st.loaded = true;
  st.version = row.version;
  st.lane = row.lane;
  st.state.reset();
  if (row.state) {
    google::protobuf::Any a;
    if (a.ParseFromString(*row.state))
      st.state = std::move(a);
  }
}

/// Where the events an entity sends go: (shard, queue entry) per target.
persistence::entity_event_out outgoing(const entity_env& env, const std::string& kind,
                                       const std::string& id, const std::string& lane,
                                       int64_t due_us, std::string payload) {
  persistence::entity_event_out e;
  e.kind = kind;
  e.entity_id = id;
  e.shard = shard_of(persistence::entity_key(kind, id), env.shard_count);
  e.forward = env.elsewhere && env.elsewhere(e.shard);
  e.lane = lane;
  e.due_at_us = due_us;
  e.payload = std::move(payload);
  return e;
}

/// After a commit: the queue entries of this shard go back to the kit (in the reply, or as
/// `enqueued`); those of other shards go to `notify`; events kept for other groups' entities
/// wake the forwarder (`forwarded`).
persistence::queue_entries route_entries(entity_ptr self, const entity_write& ws,
                                         int64_t own_next_us) {
  auto& env = *self->state.env;
  persistence::queue_entries mine;
  std::map<uint32_t, persistence::queue_entries> others;
  if (own_next_us > 0)
    mine.push_back(
      {kit_lane(ws.kind, ws.lane), self->state.key, own_next_us, persistence::priority::normal});
  bool forwarded = false;
  for (auto& e : ws.events) {
    if (e.forward) {
      forwarded = true;
      continue;
    }
    auto key = persistence::entity_key(e.kind, e.entity_id);
    if (key == self->state.key)
      continue; // covered by own_next_us
    persistence::queue_entry q{kit_lane(e.kind, e.lane), key, e.due_at_us,
                               persistence::priority::normal};
    if (e.shard == env.shard)
      mine.push_back(std::move(q));
    else
      others[e.shard].push_back(std::move(q));
  }
  if (env.notify)
    for (auto& [shard, entries] : others)
      env.notify(shard, entries);
  if (forwarded && env.forwarded)
    env.forwarded();
  return mine;
}

void run_event(entity_ptr self, run_promise rp, std::string lane, int attempt);

/// Writes `ws` (kit::commit); on a lost version check redoes the event with `redo()` while
/// `attempt + 1 < max_redo`, then answers a conflict.
template <class Done, class Redo, class Fail>
void commit(entity_ptr self, entity_write ws, int attempt, Done done, Redo redo, Fail fail) {
  kit::commit(
    self, std::move(ws), std::move(done),
    [=]() mutable {
      if (attempt + 1 < max_redo)
        redo();
      else
        fail(make_error(errc::conflict, "entity " + self->state.key + " kept changing"));
    },
    fail);
}

/// Takes a committed write into the actor's copy of the entity.
void committed(entity_ptr self, const entity_write& ws,
               std::optional<google::protobuf::Any> new_state) {
  auto& s = self->state;
  if (new_state) {
    s.state = std::move(new_state);
    ++s.version;
  }
  s.lane = ws.lane;
}

/// Writes a run's write-set; on a lost version check reloads and runs again.
void write_run(entity_ptr self, run_promise rp, std::string lane, int attempt, entity_write ws,
               std::optional<google::protobuf::Any> new_state, int64_t own_next_us) {
  auto keep = ws; // what committed needs (small: one event's effects)
  commit(
    self, std::move(ws), attempt,
    [=](write_outcome) mutable {
      committed(self, keep, std::move(new_state));
      rp.deliver(route_entries(self, keep, own_next_us));
    },
    [=]() mutable {
      rp.outcome = kit::event_result::ok;
      run_event(self, rp, lane, attempt + 1);
    },
    [=](caf::error err) mutable { rp.deliver(std::move(err)); });
}

/// Puts what a handler did besides its new state into `ws` (events to itself and to others,
/// named timers set and cancelled, outputs); `own_next` becomes the earliest event of its own.
void take_effects(const entity_env& env, const std::string& key, const entity_context& ctx,
                  int64_t now, entity_write& ws, int64_t& own_next) {
  auto earliest = [&](int64_t due) { own_next = own_next == 0 ? due : std::min(own_next, due); };
  for (auto& sent : ctx.sends()) {
    auto due = now + std::chrono::duration_cast<std::chrono::microseconds>(sent.delay).count();
    auto target_key = persistence::entity_key(sent.kind, sent.id);
    bool self_send = target_key == key;
    if (self_send)
      earliest(due);
    // A new entity of another kind starts in its own kind's default lane.
    ws.events.push_back(outgoing(env, sent.kind, sent.id, self_send ? ws.lane : std::string{}, due,
                                 sent.event.SerializeAsString()));
  }
  for (auto& t : ctx.timers()) {
    auto due = now + std::chrono::duration_cast<std::chrono::microseconds>(t.delay).count();
    earliest(due);
    auto e = outgoing(env, ws.kind, ws.entity_id, ws.lane, due, t.event.SerializeAsString());
    e.timer = t.name;
    ws.events.push_back(std::move(e));
  }
  ws.cancelled_timers = ctx.cancelled_timers();
  for (auto& out : ctx.outputs())
    ws.outputs.emplace_back(out.lane, out.output.SerializeAsString());
}

/// The refusal a handler threw, as the error an ask gets: one of the codes that say "no" for
/// good (anything else says failed_precondition), never one that a router would retry.
caf::error refusal_error(errc code, const std::string& message) {
  switch (code) {
    case errc::invalid_argument:
    case errc::not_found:
    case errc::already_exists:
    case errc::failed_precondition:
    case errc::conflict: return make_error(code, message);
    default: return make_error(errc::failed_precondition, message);
  }
}

/// One due event of the entity (seed 002: one event at a time, by due time): load, handle,
/// commit the new state with everything the handler did.
void run_event(entity_ptr self, run_promise rp, std::string lane, int attempt) {
  auto& st = self->state;
  waits(self, kit::waiting_on::load);
  self->request(st.env->store, caf::infinite, load_atom_v, st.key)
    .await(
      [=](entity_row& row) mutable {
        waits(self, kit::waiting_on::nothing);
        auto& s = self->state;
        if (!s.loaded || row.version != s.version)
          take(self, row);
        auto kind = kind_of(s.key);
        auto id = id_of(s.key);
        auto now = s.env->now_us();
        // The earliest pending event after the one handled now: the next due of those loaded,
        // or (all loaded events being due now) a later one the load only counted.
        auto next_after = [&](size_t handled) -> int64_t {
          if (row.due.size() > handled)
            return row.due[handled].due_at_us;
          return static_cast<int64_t>(row.due.size()) < row.pending ? std::max(row.next_due_us, now)
                                                                    : 0;
        };
        if (row.due.empty()) {
          // Nothing due (a timer not yet due, or handled meanwhile): tell the kit when to come
          // back.
          persistence::queue_entries back;
          if (row.pending > 0)
            back.push_back(
              {kit_lane(kind, s.lane), s.key, row.next_due_us, persistence::priority::normal});
          rp.outcome = kit::event_result::unchanged;
          rp.deliver(std::move(back));
          return;
        }
        auto* type = s.env->types->find(kind);
        auto& ev = row.due.front();
        entity_write ws;
        ws.kind = kind;
        ws.entity_id = id;
        ws.lane = s.lane;
        ws.expected_version = s.version;
        if (type == nullptr) {
          // A kind this node does not know (removed from the application): keep the event for
          // an operator rather than drop it.
          ws.dead_seq = ev.seq;
          ws.dead_reason = "entity kind `" + kind + "` is not registered on this node";
          ws.dead_attempts = ev.attempts;
          rp.outcome = kit::event_result::failed;
          write_run(self, rp, lane, attempt, std::move(ws), std::nullopt, next_after(1));
          return;
        }
        google::protobuf::Any event;
        auto opts = type->options();
        entity_context ctx{
          kind,        id,
          s.lane,      s.version,
          ev.attempts, std::chrono::system_clock::time_point{std::chrono::microseconds{now}}};
        ctx.set_origin(false, ev.timer);
        std::string failure;
        std::optional<google::protobuf::Any> next;
        try {
          if (!event.ParseFromString(ev.payload))
            throw type_mismatch("a stored event of " + s.key
                                + " does not parse as google.protobuf.Any");
          next = type->apply(s.state ? &*s.state : nullptr, event, ctx);
        } catch (const unavailable_error& e) {
          // Not the event's fault: the kit retries the entity later (counting no attempt).
          rp.deliver(make_error(errc::unavailable, "entity " + s.key + ": " + e.what()));
          return;
        } catch (const refused& e) {
          // A business "no" to a sent event: consumed, nothing else kept, not retried.
          lg->info("entity event refused kind={} id={} seq={} code={} reason={}", kind, id, ev.seq,
                   to_string(e.code()), e.what());
          if (s.kind_calls != nullptr)
            s.kind_calls->sends_refused.fetch_add(1, std::memory_order_relaxed);
          ws.consumed_seq = ev.seq;
          rp.outcome = kit::event_result::refused;
          write_run(self, rp, lane, attempt, std::move(ws), std::nullopt, next_after(1));
          return;
        } catch (const std::exception& e) {
          failure = e.what();
        } catch (...) {
          failure = "unknown exception";
        }
        if (!failure.empty()) {
          rp.outcome = kit::event_result::failed;
          // The event failed: rescheduled with the type's back-off (or the one the handler set
          // for this event), or dead-lettered.
          if (auto& r = ctx.retry()) {
            opts.retry_backoff = r->first;
            opts.max_attempts = r->second;
          }
          auto attempts = ev.attempts + 1;
          if (attempts >= opts.max_attempts) {
            ws.dead_seq = ev.seq;
            ws.dead_reason = failure;
            ws.dead_attempts = attempts;
            lg->error("entity event dead-lettered kind={} id={} seq={} attempts={} error={}", kind,
                      id, ev.seq, attempts, failure);
            write_run(self, rp, lane, attempt, std::move(ws), std::nullopt, next_after(1));
          } else {
            auto retry_at =
              now
              + std::chrono::duration_cast<std::chrono::microseconds>(opts.retry_backoff).count()
                  * attempts;
            ws.retry_seq = ev.seq;
            ws.retry_at_us = retry_at;
            lg->warn("entity event failed kind={} id={} seq={} attempt={} retry_in_ms={} error={}",
                     kind, id, ev.seq, attempts, (retry_at - now) / 1000, failure);
            auto own_next = next_after(1);
            own_next = own_next == 0 ? retry_at : std::min(own_next, retry_at);
            write_run(self, rp, lane, attempt, std::move(ws), std::nullopt, own_next);
          }
          return;
        }
        ws.consumed_seq = ev.seq;
        ws.new_state = next->SerializeAsString();
        ws.lane = ctx.lane();
        ws.tag = ctx.tag();
        int64_t own_next = next_after(1);
        take_effects(*s.env, s.key, ctx, now, ws, own_next);
        write_run(self, rp, lane, attempt, std::move(ws), std::move(next), own_next);
      },
      [=](caf::error& err) mutable {
        forget(self);
        rp.deliver(std::move(err));
      });
}

/// The type of the entity `key` when `event` is one of its events; an error saying what to fix
/// otherwise.
caf::expected<const entity_type_base*> type_for(const entity_env& env, const std::string& key,
                                                const google::protobuf::Any& event) {
  auto kind = kind_of(key);
  auto* type = env.types->find(kind);
  if (type == nullptr)
    return make_error(errc::not_found, "entity kind `" + kind + "` is not registered on this node");
  auto want = type->event_descriptor()->full_name();
  auto& url = event.type_url();
  if (url.size() < want.size() || url.compare(url.size() - want.size(), want.size(), want) != 0)
    return make_error(errc::invalid_argument, "event: a " + kind + " takes " + want + ", not "
                                                + (url.empty() ? "an empty Any" : url));
  return type;
}

/// An ask's promise: counts how the ask ended into its kind's figures (a reply, the handler's
/// refusal, or an error) as it delivers.
struct ask_promise : promise<entity_reply> {
  template <class T>
  void deliver(T&& x) {
    if (auto* c = self->state.kind_calls) {
      auto& n = !std::is_same<std::decay_t<T>, caf::error>::value ? c->asks_replied
                : outcome == kit::event_result::refused           ? c->asks_refused
                                                                  : c->asks_failed;
      n.fetch_add(1, std::memory_order_relaxed);
    }
    promise<entity_reply>::deliver(std::forward<T>(x));
  }
};

/// Delivers an answer kept for an ask's request id (a retry of an answered ask).
void deliver_kept(ask_promise rp, const persistence::entity_answer& a) {
  if (a.refusal_code != 0) {
    rp.outcome = kit::event_result::refused;
    rp.deliver(refusal_error(static_cast<errc>(a.refusal_code), a.refusal));
    return;
  }
  entity_reply r;
  r.version = a.version;
  if (a.reply) {
    google::protobuf::Any any;
    if (any.ParseFromString(*a.reply))
      r.reply = std::move(any);
  }
  rp.outcome = kit::event_result::unchanged;
  rp.deliver(std::move(r));
}

/// Reads the answer kept for `id` and delivers it; none kept (a duplicate whose answer is gone,
/// after api.request_ttl): an error saying so.
void deliver_kept(entity_ptr self, ask_promise rp, const ask_id& id) {
  waits(self, kit::waiting_on::load);
  self->request(self->state.env->store, caf::infinite, ask_atom_v, self->state.key, id.value)
    .await(
      [=](persistence::entity_answer& a) mutable {
        if (a.request_id.empty())
          rp.deliver(make_error(errc::failed_precondition,
                                "ask " + id.value + " of " + self->state.key
                                  + " was answered, and its answer is no longer kept"));
        else
          deliver_kept(rp, a);
      },
      [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

void handle_ask(entity_ptr self, ask_promise rp, const entity_type_base* type,
                google::protobuf::Any event, ask_id id, int attempt);

/// An ask on the loaded entity: handle it at once, commit what the handler did with the
/// answer, then answer.
void ask_loaded(entity_ptr self, ask_promise rp, const entity_type_base* type,
                google::protobuf::Any event, ask_id id, int attempt) {
  auto& s = self->state;
  auto now = s.env->now_us();
  auto kind = kind_of(s.key);
  entity_context ctx{kind,   id_of(s.key),
                     s.lane, s.version,
                     0,      std::chrono::system_clock::time_point{std::chrono::microseconds{now}}};
  ctx.set_origin(true, {});
  entity_write ws;
  ws.kind = kind;
  ws.entity_id = ctx.id();
  ws.lane = s.lane;
  ws.expected_version = s.version;
  std::optional<google::protobuf::Any> next;
  try {
    next = type->apply(s.state ? &*s.state : nullptr, event, ctx);
  } catch (const refused& e) {
    auto err = refusal_error(e.code(), e.what());
    rp.outcome = kit::event_result::refused;
    if (id.empty()) {
      rp.deliver(std::move(err));
      return;
    }
    // Kept with its request id, so that a retry is refused alike.
    ws.answer = persistence::entity_answer{id.value, std::nullopt, static_cast<int32_t>(err.code()),
                                           e.what(), s.version};
    commit(
      self, std::move(ws), attempt,
      [=](write_outcome out) mutable {
        if (out == write_outcome::duplicate)
          deliver_kept(self, rp, id);
        else
          rp.deliver(err);
      },
      [=]() mutable { handle_ask(self, rp, type, event, id, attempt + 1); },
      [=](caf::error failure) mutable { rp.deliver(std::move(failure)); });
    return;
  } catch (const unavailable_error& e) {
    rp.deliver(make_error(errc::unavailable, "entity " + s.key + ": " + e.what()));
    return;
  } catch (const std::exception& e) {
    // Not a refusal: a bug or bad data. The caller hears it; nothing is kept or retried.
    lg->error("entity ask failed kind={} id={} error={}", kind, ctx.id(), e.what());
    rp.outcome = kit::event_result::failed;
    rp.deliver(make_error(errc::internal, "entity " + s.key + ": " + e.what()));
    return;
  }
  ws.new_state = next->SerializeAsString();
  ws.lane = ctx.lane();
  ws.tag = ctx.tag();
  int64_t own_next = 0;
  take_effects(*s.env, s.key, ctx, now, ws, own_next);
  entity_reply reply{ctx.reply(), s.version + 1};
  persistence::entity_answer answer;
  answer.request_id = id.value;
  if (reply.reply)
    answer.reply = reply.reply->SerializeAsString();
  answer.version = reply.version;
  ws.answer = std::move(answer);
  auto keep = ws;
  commit(
    self, std::move(ws), attempt,
    [=](write_outcome out) mutable {
      if (out == write_outcome::duplicate) {
        // Answered before (by this node before a restart, or by another owner): nothing of
        // this attempt was written; the kept answer is the answer.
        forget(self);
        deliver_kept(self, rp, id);
        return;
      }
      committed(self, keep, std::move(next));
      auto mine = route_entries(self, keep, own_next);
      if (!mine.empty())
        kit::report_enqueued(*self->state.env, mine);
      rp.deliver(std::move(reply));
    },
    [=]() mutable { handle_ask(self, rp, type, event, id, attempt + 1); },
    [=](caf::error failure) mutable { rp.deliver(std::move(failure)); });
}

/// An ask: loads the entity first when it is not loaded (or after a lost version check).
void handle_ask(entity_ptr self, ask_promise rp, const entity_type_base* type,
                google::protobuf::Any event, ask_id id, int attempt) {
  if (self->state.loaded) {
    ask_loaded(self, rp, type, std::move(event), std::move(id), attempt);
    return;
  }
  waits(self, kit::waiting_on::load);
  self->request(self->state.env->store, caf::infinite, load_atom_v, self->state.key)
    .await(
      [=](entity_row& row) mutable {
        waits(self, kit::waiting_on::nothing);
        take(self, row);
        ask_loaded(self, rp, type, std::move(event), std::move(id), attempt);
      },
      [=](caf::error& err) mutable {
        forget(self);
        rp.deliver(std::move(err));
      });
}

durable_actor::behavior_type entity_behavior(entity_ptr self) {
  return {
    [=](send_atom, const std::string& key, any_msg& event, std::string& request_id,
        int64_t delay_ms) -> caf::result<ok_atom> {
      auto& st = self->state;
      auto type = type_for(*st.env, key, event.value);
      if (!type)
        return std::move(type.error());
      auto kind = kind_of(key);
      started(self, kit::event_kind::send, kit::event_source::api);
      auto rp = promise_of<ok_atom>(self);
      entity_write ws;
      ws.kind = kind;
      ws.entity_id = id_of(key);
      ws.lane = st.loaded ? st.lane : (*type)->initial_lane(event.value);
      auto due = st.env->now_us() + std::max<int64_t>(0, delay_ms) * 1000;
      auto ev =
        outgoing(*st.env, ws.kind, ws.entity_id, ws.lane, due, event.value.SerializeAsString());
      ev.request_id = std::move(request_id);
      ws.events.push_back(std::move(ev));
      auto keep_kind = ws.kind;
      auto keep_lane = ws.lane;
      // A send checks no version: stored, or not (a lost lease, a failed batch).
      kit::commit(
        self, std::move(ws),
        [=](write_outcome) mutable {
          // The row's lane may differ when the entity was not loaded: the run corrects it.
          kit::report_enqueued(*self->state.env, persistence::queue_entries{
                                                   {kit_lane(keep_kind, keep_lane), self->state.key,
                                                    due, persistence::priority::normal}});
          rp.deliver(ok_atom_v);
        },
        [=]() mutable { rp.deliver(make_error(errc::internal, "a send lost a version check")); },
        [=](caf::error err) mutable { rp.deliver(std::move(err)); });
      return rp.rp;
    },
    [=](ask_atom, const std::string& key, any_msg& event, ask_id& id) -> caf::result<entity_reply> {
      auto type = type_for(*self->state.env, key, event.value);
      if (!type) {
        if (auto* c = self->state.kind_calls)
          c->asks_failed.fetch_add(1, std::memory_order_relaxed);
        return std::move(type.error());
      }
      started(self, kit::event_kind::ask, kit::event_source::api);
      ask_promise rp{promise_of<entity_reply>(self)};
      if (id.empty()) {
        handle_ask(self, rp, *type, std::move(event.value), std::move(id), 0);
        return rp.rp;
      }
      // An ask with a request id: answered already (a retry)? Then that answer, else handle.
      waits(self, kit::waiting_on::load);
      self->request(self->state.env->store, caf::infinite, ask_atom_v, key, id.value)
        .await(
          [=, t = *type, ev = std::move(event.value)](persistence::entity_answer& a) mutable {
            waits(self, kit::waiting_on::nothing);
            if (!a.request_id.empty())
              deliver_kept(rp, a);
            else
              handle_ask(self, rp, t, std::move(ev), id, 0);
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp.rp;
    },
    [=](view_atom, const std::string&) -> caf::result<entity_view> {
      started(self, kit::event_kind::get, kit::event_source::api);
      auto rp = promise_of<entity_view>(self);
      waits(self, kit::waiting_on::load);
      self->request(self->state.env->store, caf::infinite, load_atom_v, self->state.key)
        .await(
          [=](entity_row& row) mutable {
            take(self, row);
            entity_view v;
            v.exists = row.found;
            v.version = row.version;
            v.state = self->state.state;
            v.lane = row.lane;
            v.pending = row.pending;
            v.next_due_us = row.next_due_us;
            v.timers = std::move(row.timers);
            rp.deliver(std::move(v));
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp.rp;
    },
    [=](run_atom, std::string& lane, uint8_t source) -> caf::result<persistence::queue_entries> {
      started(self, kit::event_kind::run, static_cast<kit::event_source>(source), lane);
      auto rp = promise_of<persistence::queue_entries>(self);
      run_event(self, rp, std::move(lane), 0);
      return rp.rp;
    },
    [=](warm_atom) {},
    [=](mailbox_atom) -> uint64_t { return self->mailbox().size(); },
    [=](passivate_atom, ok_atom) { self->quit(); },
  };
}

using entity_frame = kit::entity_actor_frame<entity_state, durable_actor::base>;

/// A durable entity's actor: the shared behavior on the kit's frame (trail, mailbox count).
class entity_actor_impl final : public entity_frame {
public:
  entity_actor_impl(caf::actor_config& cfg, std::string key, entity_env_ptr env)
    : entity_frame(cfg, env->recent_events) {
    state.key = std::move(key);
    state.env = std::move(env);
    state.aid = this->id();
    if (state.env->figures) {
      state.kind_resident = &state.env->figures->resident_of(kind_of(state.key));
      state.kind_resident->fetch_add(1, std::memory_order_relaxed);
      state.kind_calls = &state.env->figures->calls_of(kind_of(state.key));
    }
  }

protected:
  behavior_type make_behavior() override { return entity_behavior(this); }
};

} // namespace

const kit::actor_trail* entity_trail(const void* actor) {
  return entity_frame::trail_of_actor(actor);
}

durable_actor spawn_entity_actor(caf::local_actor* parent, std::string key, entity_env_ptr env) {
  return parent->spawn<entity_actor_impl>(std::move(key), std::move(env));
}

} // namespace gost::detail
