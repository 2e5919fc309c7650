// Durable entities on the entity kit: the entity actor, the kind's traits for the kit's
// shard, the store and the writers (docs/adding-an-actor-type.md).
//
// The actor keeps the entity's state (and version) in memory between events, never its
// pending events: each `run` reads the events due now (one batched load for many entities),
// so events that other entities or other nodes stored meanwhile are never missed. An event's
// failure is the entity's business: it is rescheduled with the type's back-off (attempts
// counted in the row) or dead-lettered, and the run still succeeds for the kit, which keeps
// its own retries for what is not the entity's fault (the database or a service being down).

#include <mutex>
#include <set>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/entity/spawn.hpp"
#include "gost/core/kit/load_batch.hpp"
#include "gost/core/kit/shard.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/persistence/pg_pool.hpp"

namespace gost {

// -- registry ---------------------------------------------------------------------------------

caf::error entity_registry::add(std::shared_ptr<const entity_type_base> type) {
  auto kind = type->kind();
  if (kind.empty() || kind.size() > 64)
    return make_error(errc::invalid_argument,
                      "entity kind `" + kind + "` must be 1..64 characters");
  for (auto ch : kind)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-')
      return make_error(errc::invalid_argument,
                        "entity kind `" + kind
                          + "` may hold only letters, digits, '.', '_' and '-'");
  if (find(kind) != nullptr)
    return make_error(errc::already_exists, "entity kind `" + kind + "` is registered twice");
  types_.push_back(std::move(type));
  return {};
}

const entity_type_base* entity_registry::find(std::string_view kind) const {
  for (auto& t : types_)
    if (t->kind() == kind)
      return t.get();
  return nullptr;
}

namespace detail {

namespace {

const auto lg = gost::log::get("kit");

using persistence::entity_row;
using persistence::entity_write;
using persistence::write_outcome;

constexpr size_t max_load_batch = 512;
constexpr size_t due_per_load = 8; ///< events due now read per run (the first is handled)
constexpr int max_redo = 3;        ///< runs redone after a lost version check

// -- store ------------------------------------------------------------------------------------

struct store_state {
  static inline const char* name = "gost.entity_store";
  persistence::pg_pool* pool = nullptr;
  kit::load_batch<entity_row> loads{max_load_batch};
  bool flush_scheduled = false;
};

using store_impl = entity_store_actor::extend<caf::reacts_to<flush_atom>>;
using store_ptr = store_impl::stateful_pointer<store_state>;

void flush_loads(store_ptr self) {
  auto* pool = self->state.pool;
  self->state.loads.flush([pool](const std::vector<std::string>& keys)
                            -> caf::expected<std::vector<caf::expected<entity_row>>> {
    auto rows = persistence::load_entities(*pool, keys, kit::now_us(), due_per_load);
    if (!rows)
      return std::move(rows.error());
    std::vector<caf::expected<entity_row>> out;
    out.reserve(rows->size());
    for (auto& r : *rows)
      out.emplace_back(std::move(r));
    return out;
  });
}

store_impl::behavior_type store_fun(store_ptr self, persistence::pg_pool* pool) {
  self->state.pool = pool;
  return {
    [=](load_atom, std::string& key) -> caf::result<entity_row> {
      auto& st = self->state;
      auto rp = self->make_response_promise<entity_row>();
      if (st.loads.add(std::move(key), rp)) {
        flush_loads(self);
      } else if (!st.flush_scheduled) {
        st.flush_scheduled = true;
        self->delayed_send(self, std::chrono::milliseconds{1}, flush_atom_v);
      }
      return rp;
    },
    [=](flush_atom) {
      self->state.flush_scheduled = false;
      flush_loads(self);
    },
    [=](due_atom, uint32_t shard, int64_t until_us, uint32_t limit,
        const persistence::queue_entries& after) -> caf::result<persistence::queue_entries> {
      auto r = persistence::due_entities(*self->state.pool, shard, until_us, limit,
                                         after.empty() ? nullptr : &after.front());
      if (!r)
        return std::move(r.error());
      return std::move(*r);
    },
  };
}

// -- the entity actor -------------------------------------------------------------------------

struct entity_env : kit::entity_env<entity_write> {
  entity_store_actor store;
  std::shared_ptr<const entity_registry> types;
  uint32_t shard_count = 1;
  std::function<void(uint32_t, const persistence::queue_entries&)> notify;

  /// A lane's name as the actors' trails point to it (kit::recent_event::lane): interned here,
  /// never removed, so the pointers stay valid while the shard (which holds this env) reads
  /// its actors' trails. Lanes are few (a kind's own handful).
  const std::string* intern_lane(const std::string& lane) {
    std::lock_guard<std::mutex> guard{lanes_mtx};
    return &*lanes.insert(lane).first;
  }

private:
  std::mutex lanes_mtx;
  std::set<std::string> lanes;
};

using entity_env_ptr = caf::intrusive_ptr<entity_env>;

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
};

using entity_ptr = durable_actor::stateful_pointer<entity_state>;

// -- the actor's trail (kit/trail.hpp) --------------------------------------------------------

/// The trail: a member of the actor object, not of its state (CAF destroys the state when the
/// actor exits, while its shard may still read the trail through the handle it holds).
kit::actor_trail& trail_of(entity_ptr self);

void waits(entity_ptr self, kit::waiting_on w) {
  trail_of(self).wait(w, self->state.env->now_us());
}

kit::event_result result_of(const caf::error& err) {
  if (err == errc::not_found)
    return kit::event_result::not_found;
  if (err == errc::conflict)
    return kit::event_result::conflict;
  if (err == errc::fenced)
    return kit::event_result::fenced;
  return kit::event_result::failed;
}

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
  kit::begin_event(*st.env, trail_of(self), k, s, lane);
}

void ended(entity_ptr self, kit::event_result r) {
  auto& st = self->state;
  kit::end_event(*st.env, trail_of(self), st.key, r, st.version);
}

/// A response promise that ends the event in the actor's trail as it delivers (every answer
/// of an event goes through here). `outcome`: the result of a delivered value (a run whose
/// event failed still answers the kit with its queue entries: `failed` in the trail).
template <class Result>
struct promise {
  entity_ptr self;
  caf::typed_response_promise<Result> rp;
  kit::event_result outcome = kit::event_result::ok;

  template <class T>
  void deliver(T&& x) {
    waits(self, kit::waiting_on::nothing);
    if constexpr (std::is_same<std::decay_t<T>, caf::error>::value)
      ended(self, result_of(x));
    else
      ended(self, outcome);
    rp.deliver(std::forward<T>(x));
  }
};

template <class Result>
promise<Result> promise_of(entity_ptr self) {
  return {self, self->make_response_promise<Result>()};
}

using run_promise = promise<persistence::queue_entries>;

std::string kind_of(const std::string& key) {
  return key.substr(0, key.find('/'));
}
std::string id_of(const std::string& key) {
  return key.substr(key.find('/') + 1);
}

/// The kit's lane of an entity: its kind and its own lane (so kinds never share a lane).
std::string kit_lane(const std::string& kind, const std::string& lane) {
  return kind + "/" + lane;
}

void forget(entity_ptr self) {
  auto& st = self->state;
  st.loaded = false;
  st.state.reset();
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
  e.lane = lane;
  e.due_at_us = due_us;
  e.payload = std::move(payload);
  return e;
}

/// After a commit: the queue entries of this shard go back to the kit (in the reply, or as
/// `enqueued`); those of other shards go to `notify`.
persistence::queue_entries route_entries(entity_ptr self, const entity_write& ws,
                                         int64_t own_next_us) {
  auto& env = *self->state.env;
  persistence::queue_entries mine;
  std::map<uint32_t, persistence::queue_entries> others;
  if (own_next_us > 0)
    mine.push_back(
      {kit_lane(ws.kind, ws.lane), self->state.key, own_next_us, persistence::priority::normal});
  for (auto& e : ws.events) {
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
  return mine;
}

void run_event(entity_ptr self, run_promise rp, std::string lane, int attempt);

/// Writes a run's write-set; on a lost version check reloads and runs again.
void write_run(entity_ptr self, run_promise rp, std::string lane, int attempt, entity_write ws,
               std::optional<google::protobuf::Any> new_state, int64_t own_next_us) {
  auto& st = self->state;
  auto keep = ws; // what committed needs (small: one event's effects)
  waits(self, kit::waiting_on::writer);
  self
    ->request(st.env->writer, caf::infinite, write_atom_v, st.env->shard, st.env->epoch,
              std::move(ws))
    .await(
      [=](write_outcome out) mutable {
        auto& s = self->state;
        switch (out) {
          case write_outcome::duplicate: // entity writes carry no offer request ids: never
          case write_outcome::committed:
            if (new_state) {
              s.state = std::move(new_state);
              ++s.version;
            }
            s.lane = keep.lane;
            rp.deliver(route_entries(self, keep, own_next_us));
            return;
          case write_outcome::conflict:
            forget(self);
            if (attempt + 1 < max_redo) {
              rp.outcome = kit::event_result::ok;
              run_event(self, rp, lane, attempt + 1);
            } else {
              rp.deliver(make_error(errc::conflict, "entity " + s.key + " kept changing"));
            }
            return;
          case write_outcome::fenced:
            forget(self);
            rp.deliver(make_error(errc::fenced, "shard " + std::to_string(s.env->shard)
                                                  + " is no longer owned by this node"));
            return;
        }
      },
      [=](caf::error& err) mutable {
        forget(self);
        rp.deliver(std::move(err));
      });
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
        for (auto& sent : ctx.sends()) {
          auto due =
            now + std::chrono::duration_cast<std::chrono::microseconds>(sent.delay).count();
          auto target_key = persistence::entity_key(sent.kind, sent.id);
          bool self_send = target_key == s.key;
          if (self_send)
            own_next = own_next == 0 ? due : std::min(own_next, due);
          // A new entity of another kind starts in its own kind's default lane.
          ws.events.push_back(outgoing(*s.env, sent.kind, sent.id,
                                       self_send ? ws.lane : std::string{}, due,
                                       sent.event.SerializeAsString()));
        }
        for (auto& out : ctx.outputs())
          ws.outputs.emplace_back(out.lane, out.output.SerializeAsString());
        write_run(self, rp, lane, attempt, std::move(ws), std::move(next), own_next);
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
      auto kind = kind_of(key);
      auto* type = st.env->types->find(kind);
      if (type == nullptr)
        return make_error(errc::not_found,
                          "entity kind `" + kind + "` is not registered on this node");
      auto want = type->event_descriptor()->full_name();
      if (event.value.type_url().size() < want.size()
          || event.value.type_url().compare(event.value.type_url().size() - want.size(),
                                            want.size(), want)
               != 0)
        return make_error(
          errc::invalid_argument,
          "event: a " + kind + " takes " + want + ", not "
            + (event.value.type_url().empty() ? "an empty Any" : event.value.type_url()));
      started(self, kit::event_kind::send, kit::event_source::api);
      auto rp = promise_of<ok_atom>(self);
      entity_write ws;
      ws.kind = kind;
      ws.entity_id = id_of(key);
      ws.lane = st.loaded ? st.lane : type->initial_lane(event.value);
      auto due = st.env->now_us() + std::max<int64_t>(0, delay_ms) * 1000;
      auto ev =
        outgoing(*st.env, ws.kind, ws.entity_id, ws.lane, due, event.value.SerializeAsString());
      ev.request_id = std::move(request_id);
      ws.events.push_back(std::move(ev));
      auto keep = ws;
      waits(self, kit::waiting_on::writer);
      self
        ->request(st.env->writer, caf::infinite, write_atom_v, st.env->shard, st.env->epoch,
                  std::move(ws))
        .await(
          [=](write_outcome out) mutable {
            auto& s = self->state;
            if (out == write_outcome::fenced) {
              rp.deliver(make_error(errc::fenced, "shard " + std::to_string(s.env->shard)
                                                    + " is no longer owned by this node"));
              return;
            }
            // The row's lane may differ when the entity was not loaded: the run corrects it.
            kit::report_enqueued(*s.env,
                                 persistence::queue_entries{{kit_lane(keep.kind, keep.lane), s.key,
                                                             due, persistence::priority::normal}});
            rp.deliver(ok_atom_v);
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

using entity_base = caf::stateful_actor<entity_state, durable_actor::base>;

/// A durable entity's actor: the shared behavior, with its trail and its mailbox count.
class entity_actor_impl final : public entity_base {
public:
  entity_actor_impl(caf::actor_config& cfg, std::string key, entity_env_ptr env)
    : entity_base(cfg), trail_(env->recent_events) {
    state.key = std::move(key);
    state.env = std::move(env);
    state.aid = this->id();
    if (state.env->figures) {
      state.kind_resident = &state.env->figures->resident_of(kind_of(state.key));
      state.kind_resident->fetch_add(1, std::memory_order_relaxed);
    }
  }

  resume_result resume(caf::execution_unit* eu, size_t max_throughput) override {
    auto result = entity_base::resume(eu, max_throughput);
    // What waits now is counted into the shard's figures (as offer actors do).
    if (result != resume_result::done)
      kit::report_mailbox(*state.env, state.mailbox_reported, kit::held_messages(*this));
    return result;
  }

  kit::actor_trail& trail() noexcept { return trail_; }
  const kit::actor_trail& trail() const noexcept { return trail_; }

protected:
  behavior_type make_behavior() override { return entity_behavior(this); }

private:
  kit::actor_trail trail_;
};

kit::actor_trail& trail_of(entity_ptr self) {
  return static_cast<entity_actor_impl*>(self)->trail();
}

const kit::actor_trail* entity_trail(const void* actor) {
  auto* a = static_cast<const caf::abstract_actor*>(actor);
  return &static_cast<const entity_actor_impl*>(a)->trail();
}

durable_actor spawn_entity_actor(caf::local_actor* parent, std::string key, entity_env_ptr env) {
  return parent->spawn<entity_actor_impl>(std::move(key), std::move(env));
}

// -- the kind ---------------------------------------------------------------------------------

struct durable_kind {
  using ops = entity_ops;
  using actor = durable_actor;
  using shard = entity_shard_actor;
  using write_set = entity_write;
  using env = entity_env;
  static constexpr const char* name = "entity";

  static actor spawn_entity(caf::local_actor* shard, std::string key, caf::intrusive_ptr<env> e) {
    return spawn_entity_actor(shard, std::move(key), std::move(e));
  }

  /// The kit gave up on an entity (its runs kept failing for reasons not its own events'):
  /// nothing to move, its events stay pending; the entry is found again by a poll.
  static write_set dead_letter(const std::string&, const std::string& key, int,
                               const std::string&) {
    write_set ws;
    ws.kind = kind_of(key);
    ws.entity_id = id_of(key);
    return ws;
  }

  template <class Self>
  static auto extra_handlers(Self) {
    return std::make_tuple();
  }

  template <class Self>
  static void on_start(Self) {}
};

} // namespace

} // namespace detail

entity_store_actor spawn_entity_store(caf::actor_system& sys, persistence::pg_pool& pool) {
  return caf::actor_cast<entity_store_actor>(sys.spawn<caf::detached>(detail::store_fun, &pool));
}

std::vector<entity_writer_actor>
spawn_entity_writers(caf::actor_system& sys, persistence::pg_pool& pool, size_t n, size_t batch_max,
                     std::chrono::milliseconds flush_delay,
                     std::shared_ptr<kit::writer_stats> stats,
                     std::shared_ptr<const dependency_tracker> db) {
  kit::writer_options<persistence::entity_write> o;
  o.pool = &pool;
  o.commit = [](persistence::pg_pool& p,
                const std::vector<persistence::fenced_write<persistence::entity_write>>& ws) {
    return persistence::commit_entity_writes(p, ws);
  };
  o.max_batch = batch_max;
  o.flush_delay = flush_delay;
  o.stats = std::move(stats);
  o.name = "entity";
  o.db = std::move(db);
  return kit::spawn_writers(sys, n, o);
}

entity_shard_actor spawn_entity_shard(caf::actor_system& sys, entity_shard_options opts) {
  auto env = caf::make_counted<detail::entity_env>();
  env->writer = opts.writer;
  env->store = opts.store;
  env->types = opts.types;
  env->shard_count = opts.shard_count;
  env->notify = std::move(opts.notify);
  kit::shard_config cfg;
  cfg.shard = opts.shard;
  cfg.epoch = opts.epoch;
  cfg.lanes = [types = opts.types](const std::string& lane) {
    kit::lane_options o;
    if (auto* t = types->find(detail::kind_of(lane))) {
      auto eo = t->options();
      o.max_parallelism = eo.max_parallelism;
      o.rate_limit = eo.rate_limit;
      o.retry_backoff = eo.retry_backoff;
    }
    return o;
  };
  cfg.store = caf::actor_cast<kit::queue_store>(opts.store);
  cfg.has_queues = !opts.types->empty();
  cfg.queue_lookahead = opts.queue_lookahead;
  cfg.queue_poll = opts.queue_poll;
  cfg.db = opts.db;
  cfg.queue_page = opts.queue_page;
  cfg.queue_prefetch = std::chrono::milliseconds{0}; // runs load anyway
  cfg.idle_timeout = opts.idle_timeout;
  cfg.max_resident = opts.max_resident;
  cfg.stats = opts.stats;
  cfg.wall_clock = std::move(opts.wall_clock);
  cfg.trace = std::move(opts.trace);
  cfg.recent_events = opts.recent_events;
  cfg.write_slot = opts.write_slot;
  if (opts.figures)
    cfg.figures = std::move(opts.figures);
  cfg.trail = &detail::entity_trail;
  return kit::spawn_shard<detail::durable_kind>(sys, std::move(cfg), std::move(env));
}

} // namespace gost
