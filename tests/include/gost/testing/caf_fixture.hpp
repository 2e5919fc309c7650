#pragma once
// Deterministic actor tests: an actor system on CAF's testing scheduler
// (caf::scheduler::test_coordinator, `scheduler.policy = testing`), driven by the test itself.
// Nothing runs unless the test runs it, on the test's own thread, and time moves only when the
// test moves it: no sleeps, no races, and a timer of an hour costs nothing.
//
//   TEST_CASE_FIXTURE(gost::testing::caf_fixture, "...") {
//     fake_writer<my_write> writer{*this};           // answers `committed` unless told otherwise
//     auto shard = keep(kit::spawn_shard<my_kind>(sys, cfg, env));
//     auto r = ask(shard, get_atom_v, std::string{"a"}); // sends, runs until quiet, answers
//     advance(std::chrono::seconds{1});                  // fires the timers due meanwhile
//   }
//
// Only actors on the test scheduler take part: a detached actor (CAF's `caf::detached`, e.g.
// the kit's writers and stores, which block on PostgreSQL) gets a thread of its own and runs
// whenever it likes. That is what the fakes below are for: typed stand-ins for the entity kit's
// collaborators that run on the test scheduler, record what they were asked and answer what the
// test programmed.
//
// A kind's shard reads due times on the wall clock its shard_config names; `wall_clock()` is one
// that follows the test scheduler's clock (starting at a fixed date), so back-offs and timers of
// the kit are exact in tests.
//
// `setup` registers the type-ID blocks the test's messages need: `register_core_types` (the
// default), `register_entity_types` (durable entities, with the fakes of
// gost/testing/entity_fakes.hpp), `register_offer_types`.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_type.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/kit/protocol.hpp"
#include "gost/core/protocol.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/queue.hpp"
#include "gost/persistence/writes.hpp"

namespace gost::testing {

/// The answer to a request sent with caf_fixture::request: there once the receiver answered
/// (after the scheduler ran).
template <class T>
class pending {
public:
  using slot = std::shared_ptr<std::optional<caf::expected<T>>>;

  explicit pending(slot s) : slot_(std::move(s)) {}

  /// Whether the answer (a value or an error) arrived.
  bool done() const { return slot_->has_value(); }

  /// The answer; an error (caf::sec::request_timeout) while there is none yet.
  caf::expected<T> get() const {
    if (!done())
      return caf::make_error(caf::sec::request_timeout,
                             "no answer yet: the request waits for a message or a timer that has "
                             "not come (run() or advance() first)");
    return **slot_;
  }

private:
  slot slot_;
};

namespace detail {

/// The value a request's answer carries: its one type, or a tuple of several.
template <class Outs>
struct answer_of;

template <class Out>
struct answer_of<caf::detail::type_list<Out>> {
  using type = Out;
  template <class Slot>
  static auto on_value(Slot slot) {
    return [slot](Out& x) { *slot = caf::expected<type>{std::move(x)}; };
  }
};

template <class Out1, class Out2, class... Outs>
struct answer_of<caf::detail::type_list<Out1, Out2, Outs...>> {
  using type = std::tuple<Out1, Out2, Outs...>;
  template <class Slot>
  static auto on_value(Slot slot) {
    return [slot](Out1& x1, Out2& x2, Outs&... xs) {
      *slot = caf::expected<type>{type{std::move(x1), std::move(x2), std::move(xs)...}};
    };
  }
};

template <class Handle, class... Ts>
using answer_t = typename answer_of<
  typename caf::response_type<typename Handle::signatures, std::decay_t<Ts>...>::type>::type;

} // namespace detail

/// Whether and why an actor stopped (caf_fixture::watch).
struct down_watch {
  bool stopped = false;
  caf::error reason; ///< empty for a normal stop
};

class caf_fixture {
public:
  using setup_fn = std::function<void(caf::actor_system_config&)>;

  /// A wall clock date (2024-01-01T00:00:00Z) the test clock starts at.
  static constexpr int64_t epoch_us = 1'704'067'200'000'000;

  /// `setup` registers what the test's messages need (default: gost's core blocks and error
  /// categories; durable entities' tests pass register_entity_types, offers'
  /// register_offer_types).
  explicit caf_fixture(setup_fn setup = &register_core_types)
    : sys(init(cfg, setup)),
      sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
    // Away from time_point{} (whose meaning is "never" in places), as CAF's own fixture does.
    sched.clock().current_time += std::chrono::hours{1};
    start_ = sched.clock().current_time;
  }

  caf_fixture(const caf_fixture&) = delete;
  caf_fixture& operator=(const caf_fixture&) = delete;

  /// Stops every actor the test kept (and so what they own), lets them finish, and drops the
  /// timers left: the actor system then shuts down without waiting for anything.
  virtual ~caf_fixture() {
    for (auto& a : kept_)
      caf::anon_send_exit(a, caf::exit_reason::kill);
    kept_.clear();
    run();
    sched.clock().cancel_all();
    // An actor the test spawned without keep() would make the system wait for it forever.
    sys.await_actors_before_shutdown(false);
  }

  // -- running --------------------------------------------------------------------------------

  /// Handles every pending message, and the timers due at the current time, until nothing is
  /// left. The clock does not move. Returns the number of events handled.
  size_t run() {
    size_t n = 0;
    for (;;) {
      n += sched.run(max_events);
      if (n >= max_events)
        throw std::runtime_error("caf_fixture::run: a million events and still going; do actors "
                                 "send each other messages forever?");
      if (!due_now())
        return n;
      n += sched.clock().trigger_expired_timeouts();
    }
  }

  /// Moves the clock forward by `d`, one due timer at a time (each timer fires at its own time,
  /// and what it triggers runs before the next), then runs what is pending at the end.
  template <class Rep, class Period>
  size_t advance(std::chrono::duration<Rep, Period> d) {
    auto& clock = sched.clock();
    auto until = clock.current_time + std::chrono::duration_cast<caf::timespan>(d);
    size_t n = run();
    while (!clock.schedule().empty() && clock.schedule().begin()->first <= until) {
      clock.current_time = std::max(clock.current_time, clock.schedule().begin()->first);
      n += run();
    }
    clock.current_time = until;
    return n + run();
  }

  /// Test time since the fixture started.
  caf::timespan elapsed() const { return sched.clock().current_time - start_; }

  /// The wall clock of the test: epoch_us plus the test time elapsed (µs since the epoch).
  int64_t wall_us() const {
    return epoch_us + std::chrono::duration_cast<std::chrono::microseconds>(elapsed()).count();
  }

  /// wall_us() as a function, for kit::shard_config::wall_clock and the kinds' options. Valid
  /// while the fixture lives.
  std::function<int64_t()> wall_clock() const {
    return [this] { return wall_us(); };
  }

  // -- actors ---------------------------------------------------------------------------------

  /// Keeps `h` to be stopped when the test ends; returns it.
  template <class Handle>
  Handle keep(Handle h) {
    kept_.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }

  /// Spawns on the test scheduler and keeps the actor. Give a function at least one argument
  /// besides its self pointer (pass what it would capture): CAF 0.17.6 dereferences a null
  /// argument tuple for one without, which UBSan (preset dev) stops at.
  template <class... Ts>
  auto spawn(Ts&&... xs) {
    return keep(sys.spawn(std::forward<Ts>(xs)...));
  }

  /// Kills `h` (exit reason kill), as an operator or a crash would, and runs.
  template <class Handle>
  void kill(const Handle& h) {
    caf::anon_send_exit(h, caf::exit_reason::kill);
    run();
  }

  /// Watches `h`: the result tells once it stopped, and why.
  template <class Handle>
  std::shared_ptr<const down_watch> watch(const Handle& h) {
    auto out = std::make_shared<down_watch>();
    spawn(
      [](caf::event_based_actor* self, std::shared_ptr<down_watch> w,
         caf::actor target) -> caf::behavior {
        self->monitor(target);
        self->set_down_handler([w, self](caf::down_msg& dm) {
          w->stopped = true;
          w->reason = std::move(dm.reason);
          self->quit();
        });
        return {[](ok_atom) {}};
      },
      out, caf::actor_cast<caf::actor>(h));
    run();
    return out;
  }

  // -- messages -------------------------------------------------------------------------------

  /// Sends a message with no sender (nothing runs yet).
  template <class Handle, class... Ts>
  void send(const Handle& h, Ts&&... xs) {
    caf::anon_send(h, std::forward<Ts>(xs)...);
  }

  /// Sends a request to a typed actor from a small requester actor and returns at once (nothing
  /// runs yet): the answer is there after run() or advance(), once the receiver answered.
  template <class Handle, class... Ts>
  pending<detail::answer_t<Handle, Ts...>> request(const Handle& h, Ts... xs) {
    using outs =
      typename caf::response_type<typename Handle::signatures, std::decay_t<Ts>...>::type;
    using answer = detail::answer_of<outs>;
    using slot_ptr = typename pending<typename answer::type>::slot;
    auto slot = std::make_shared<std::optional<caf::expected<typename answer::type>>>();
    spawn(
      [](caf::event_based_actor* self, Handle dest, slot_ptr s, Ts... args) {
        self->request(dest, caf::infinite, std::move(args)...)
          .then(answer::on_value(s), [s](caf::error& err) { *s = std::move(err); });
      },
      h, slot, std::move(xs)...);
    return pending<typename answer::type>{slot};
  }

  /// request(), then runs until nothing is pending: the answer, or an error saying there is
  /// none yet (it waits for the clock: use request() and advance()).
  template <class Handle, class... Ts>
  caf::expected<detail::answer_t<Handle, Ts...>> ask(const Handle& h, Ts... xs) {
    auto p = request(h, std::move(xs)...);
    run();
    return p.get();
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;

private:
  static constexpr size_t max_events = 1'000'000;

  static caf::actor_system_config& init(caf::actor_system_config& cfg, const setup_fn& setup) {
    if (setup)
      setup(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    cfg.set("logger.console-verbosity", caf::atom("quiet"));
    return cfg;
  }

  bool due_now() const {
    auto& s = sched.clock().schedule();
    return !s.empty() && s.begin()->first <= sched.clock().current_time;
  }

  caf::actor_clock::time_point start_;
  std::vector<caf::actor> kept_;
};

// -- fakes of the entity kit's collaborators --------------------------------------------------

/// A write-behind writer (kit::writer_actor<WriteSet>) on the test scheduler: records every
/// write-set with its shard and epoch, and answers each write with the next programmed answer
/// (then `otherwise`, committed unless changed). With hold(true) it keeps its answers back
/// until release(): writes in flight, as while a batch commits.
template <class WriteSet>
class fake_writer {
public:
  using write = persistence::fenced_write<WriteSet>;
  using answer = std::variant<persistence::write_outcome, caf::error>;

  explicit fake_writer(caf_fixture& fx) : fx_(fx), book_(std::make_shared<book>()) {
    handle_ = caf::actor_cast<kit::writer_actor<WriteSet>>(fx.spawn(
      [](self_ptr self, std::shared_ptr<book> b) -> behavior {
        return {
          [b, self](write_atom, uint32_t shard, int64_t epoch,
                    WriteSet& ws) -> caf::result<persistence::write_outcome> {
            b->writes.push_back({shard, epoch, std::move(ws)});
            auto a = b->script.empty() ? b->otherwise : b->script.front();
            if (!b->script.empty())
              b->script.pop_front();
            auto rp = self->template make_response_promise<persistence::write_outcome>();
            b->held.push_back({rp, std::move(a), b->writes.size() - 1});
            if (!b->hold)
              b->answer_held();
            return rp;
          },
          [b](flush_atom) { b->answer_held(); },
        };
      },
      book_));
  }

  const kit::writer_actor<WriteSet>& handle() const { return handle_; }
  operator kit::writer_actor<WriteSet>() const { return handle_; }

  /// Every write-set received, in order (answered or held).
  const std::vector<write>& writes() const { return book_->writes; }

  /// The answer to the next write not yet programmed (answers queue up in order).
  void then(answer a) { book_->script.push_back(std::move(a)); }
  /// The answer once the programmed ones are used up.
  void otherwise(answer a) { book_->otherwise = std::move(a); }

  /// Called with each write answered `committed`, when it is answered (e.g. to dequeue its
  /// entry from a fake_queue, as a real commit would).
  void on_commit(std::function<void(const write&)> f) { book_->on_commit = std::move(f); }

  /// Keeps answers back (true) until release(), or answers at once again (false).
  void hold(bool on) { book_->hold = on; }
  /// Writes received and not answered yet.
  size_t held() const { return book_->held.size(); }
  /// Answers the held writes (in order) and runs.
  void release() {
    caf::anon_send(caf::actor_cast<caf::actor>(handle_), flush_atom_v);
    fx_.run();
  }

private:
  using impl = typename kit::writer_actor<WriteSet>::template extend<caf::reacts_to<flush_atom>>;
  struct state {
    static inline const char* name = "gost.fake_writer";
  };
  using self_ptr = typename impl::template stateful_pointer<state>;
  using behavior = typename impl::behavior_type;
  struct held_answer {
    caf::typed_response_promise<persistence::write_outcome> rp;
    answer a;
    size_t write; ///< index into writes
  };
  struct book {
    std::vector<write> writes;
    std::deque<answer> script;
    answer otherwise = persistence::write_outcome::committed;
    bool hold = false;
    std::vector<held_answer> held;
    std::function<void(const write&)> on_commit;

    void answer_held() {
      auto now = std::move(held);
      held.clear();
      for (auto& h : now) {
        if (auto* out = std::get_if<persistence::write_outcome>(&h.a)) {
          if (*out == persistence::write_outcome::committed && on_commit)
            on_commit(writes[h.write]);
          h.rp.deliver(*out);
        } else {
          h.rp.deliver(std::get<caf::error>(std::move(h.a)));
        }
      }
    }
  };

  caf_fixture& fx_;
  std::shared_ptr<book> book_;
  kit::writer_actor<WriteSet> handle_;
};

/// A shard's durable queue, programmed by the test: entries stay until removed (as rows stay
/// in PostgreSQL until a commit dequeues them) and are served as the real stores serve them:
/// due before the asked time, ordered by (due, lane, entity), after the cursor, at most a page,
/// then the earliest entry due after the asked time as a hint (`hint(false)`: none).
class fake_queue {
public:
  /// Whether polls answer the hint (the first entry past the window), as the real stores do.
  void hint(bool on) { hint_ = on; }
  void add(persistence::queue_entries entries) {
    for (auto& e : entries)
      entries_.push_back(std::move(e));
  }
  void remove(const std::string& lane, const std::string& entity_id) {
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const persistence::queue_entry& e) {
                                    return e.lane == lane && e.entity_id == entity_id;
                                  }),
                   entries_.end());
  }
  /// The next poll fails with `err` (errors queue up in order).
  void fail_next(caf::error err) { failures_.push_back(std::move(err)); }
  /// Polls answered so far (failed ones included).
  size_t polls() const { return polls_; }

  caf::expected<persistence::queue_entries> due(int64_t until_us, uint32_t limit,
                                                const persistence::queue_entries& after) {
    ++polls_;
    if (!failures_.empty()) {
      auto err = std::move(failures_.front());
      failures_.pop_front();
      return err;
    }
    auto key = [](const persistence::queue_entry& e) {
      return std::tie(e.due_at_us, e.lane, e.entity_id);
    };
    auto sorted = entries_;
    std::sort(sorted.begin(), sorted.end(),
              [&](const auto& a, const auto& b) { return key(a) < key(b); });
    persistence::queue_entries out;
    for (auto& e : sorted) {
      if (out.size() >= limit || e.due_at_us > until_us)
        break;
      if (!after.empty() && !(key(after.front()) < key(e)))
        continue;
      out.push_back(e);
    }
    if (hint_)
      for (auto& e : sorted)
        if (e.due_at_us > until_us) {
          out.push_back(e);
          break;
        }
    return out;
  }

private:
  bool hint_ = true;
  persistence::queue_entries entries_;
  std::deque<caf::error> failures_;
  size_t polls_ = 0;
};

/// kit::queue_store on the test scheduler, serving a fake_queue.
class fake_queue_store {
public:
  explicit fake_queue_store(caf_fixture& fx) : queue_(std::make_shared<fake_queue>()) {
    handle_ = fx.spawn(
      [](std::shared_ptr<fake_queue> q) -> kit::queue_store::behavior_type {
        return {
          [q](due_atom, uint32_t, int64_t until_us, uint32_t limit,
              const persistence::queue_entries& after) -> caf::result<persistence::queue_entries> {
            auto r = q->due(until_us, limit, after);
            if (!r)
              return std::move(r.error());
            return std::move(*r);
          },
        };
      },
      queue_);
  }

  const kit::queue_store& handle() const { return handle_; }
  operator kit::queue_store() const { return handle_; }
  fake_queue& queue() { return *queue_; }

private:
  std::shared_ptr<fake_queue> queue_;
  kit::queue_store handle_;
};

} // namespace gost::testing
