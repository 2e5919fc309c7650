// The entity kit's shard supervisor (gost/core/kit/shard.hpp) on CAF's test scheduler: a tiny
// kind of its own ("probe": an actor per entity whose run writes one write-set through the
// kind's writer), a fake writer and a fake queue store, and the test clock. Every test here
// runs in microseconds of real time, whatever the timeouts and back-offs it walks through.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/errc.hpp"
#include "gost/core/kit/shard.hpp"
#include "gost/testing/caf_fixture.hpp"

namespace kit_test {

/// What a probe's run writes: the entity and lane, or a dead letter.
struct probe_write {
  std::string entity;
  std::string lane;
  bool dead = false;
  int attempts = 0;
  std::string reason;
};

} // namespace kit_test

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kit_test::probe_write)

namespace kit_test {

using namespace gost;
using namespace std::chrono_literals;
using persistence::priority;
using persistence::queue_entries;
using persistence::write_outcome;

/// The probe's one operation: which actor serves the entity (its CAF id).
using probe_ops = caf::typed_actor<caf::replies_to<get_atom, std::string>::with<uint64_t>>;
using probe_actor = kit::entity_actor<probe_ops>;
using probe_shard = kit::shard_actor<probe_ops, probe_actor>;

/// What the probes of a shard are told to do, and what they did: shared with the test (all of
/// it runs on the test's thread).
struct script {
  /// An entity's next runs fail with these, in order, before writing anything.
  std::map<std::string, std::deque<caf::error>> failures;
  /// Queue entries an entity's next successful run commits (e.g. a timer in another lane).
  std::map<std::string, queue_entries> follow_ups;
  std::vector<std::pair<std::string, std::string>> runs; ///< (entity, lane) of every run
  std::vector<std::string> stopped;                      ///< entities whose actor stopped
  std::vector<std::string> warmed;                       ///< entities told an entry comes due

  size_t runs_of(const std::string& entity) const {
    return static_cast<size_t>(
      std::count_if(runs.begin(), runs.end(), [&](auto& r) { return r.first == entity; }));
  }
};

struct probe_env : kit::entity_env<probe_write> {
  std::shared_ptr<script> s;
};

struct probe_state {
  static inline const char* name = "gost.probe";
  caf::intrusive_ptr<probe_env> env;
  std::string id;
  caf::actor_id aid = 0;

  probe_state() = default;
  probe_state(const probe_state&) = delete;
  probe_state& operator=(const probe_state&) = delete;
  ~probe_state() {
    if (!env)
      return;
    env->s->stopped.push_back(id);
    kit::report_stopped(*env, id, aid);
  }
};

using probe_ptr = probe_actor::stateful_pointer<probe_state>;

probe_actor::behavior_type probe_fun(probe_ptr self, std::string id,
                                     caf::intrusive_ptr<probe_env> env) {
  self->state.id = std::move(id);
  self->state.env = std::move(env);
  self->state.aid = self->id();
  return {
    [=](get_atom, const std::string&) -> uint64_t { return self->id(); },
    [=](run_atom, std::string& lane, uint8_t) -> caf::result<queue_entries> {
      auto& st = self->state;
      auto& s = *st.env->s;
      s.runs.emplace_back(st.id, lane);
      if (auto& f = s.failures[st.id]; !f.empty()) {
        auto err = std::move(f.front());
        f.pop_front();
        return err;
      }
      auto follow = std::move(s.follow_ups[st.id]);
      s.follow_ups.erase(st.id);
      auto rp = self->make_response_promise<queue_entries>();
      self
        ->request(st.env->writer, caf::infinite, write_atom_v, st.env->shard, st.env->epoch,
                  probe_write{st.id, lane})
        .await(
          [=](write_outcome out) mutable {
            if (out == write_outcome::committed)
              rp.deliver(follow);
            else if (out == write_outcome::fenced)
              rp.deliver(make_error(errc::fenced, "lease lost"));
            else
              rp.deliver(make_error(errc::conflict, "changed meanwhile"));
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](warm_atom) { self->state.env->s->warmed.push_back(self->state.id); },
    [=](mailbox_atom) -> uint64_t { return self->mailbox().size(); },
    [=](passivate_atom, ok_atom) { self->quit(); },
  };
}

struct probe_kind {
  using ops = probe_ops;
  using actor = probe_actor;
  using shard = probe_shard;
  using write_set = probe_write;
  using env = probe_env;
  static constexpr const char* name = "probe";

  static actor spawn_entity(caf::local_actor* shard, std::string id, caf::intrusive_ptr<env> e) {
    return shard->spawn(probe_fun, std::move(id), std::move(e));
  }
  static write_set dead_letter(const std::string& lane, const std::string& id, int attempts,
                               const std::string& reason) {
    return {id, lane, true, attempts, reason};
  }
  template <class Self>
  static auto extra_handlers(Self) {
    return std::make_tuple();
  }
  template <class Self>
  static void on_start(Self) {}
};

/// One probe shard (shard 7 at epoch 42) with its fakes; tests adjust `opts` and `lanes`, then
/// start().
struct shard_fixture : testing::caf_fixture {
  testing::fake_writer<probe_write> writer{*this};
  testing::fake_queue_store store{*this};
  std::shared_ptr<script> s = std::make_shared<script>();
  std::shared_ptr<kit::entity_stats> stats = std::make_shared<kit::entity_stats>();
  std::map<std::string, kit::lane_options> lanes;
  kit::shard_config opts;
  probe_shard shard;
  std::shared_ptr<const testing::down_watch> down;

  shard_fixture() {
    opts.shard = 7;
    opts.epoch = 42;
    opts.store = store;
    opts.stats = stats;
    opts.wall_clock = wall_clock();
    opts.queue_prefetch = 0ms;
    // A committed write-set dequeues its entry, as the real commit does.
    writer.on_commit([q = &store.queue()](const persistence::fenced_write<probe_write>& w) {
      q->remove(w.ws.lane, w.ws.entity);
    });
  }

  void start() {
    opts.lanes = [table = lanes](const std::string& lane) {
      auto i = table.find(lane);
      return i == table.end() ? kit::lane_options{} : i->second;
    };
    auto env = caf::make_counted<probe_env>();
    env->writer = writer;
    env->s = s;
    shard = keep(kit::spawn_shard<probe_kind>(sys, opts, env));
    down = watch(shard);
    run();
  }

  /// The CAF id of the actor serving `id` (spawning it if needed).
  uint64_t actor_of(const std::string& id) {
    auto r = ask(shard, get_atom_v, id);
    REQUIRE(r);
    return *r;
  }

  bool resident(const std::string& id) {
    auto r = ask(shard, get_atom_v, resident_atom_v, id);
    REQUIRE(r);
    return static_cast<bool>(*r);
  }

  /// The node's shipped poll settings (queue.*): a busy pace of 250 ms, a 30 s safety poll, a
  /// 5 s look-ahead, a 250 ms prefetch.
  void shipped_polls() {
    opts.queue_poll = 250ms;
    opts.queue_poll_idle = 30'000ms;
    opts.queue_lookahead = 5000ms;
    opts.queue_prefetch = 250ms;
  }

  /// An entry of `lane` for `entity`, due `in` from now on the test clock.
  persistence::queue_entry due(const std::string& lane, const std::string& entity,
                               std::chrono::milliseconds in = 0ms,
                               priority prio = priority::normal) {
    return {lane, entity, wall_us() + in.count() * 1000, prio};
  }
};

} // namespace kit_test

using namespace kit_test;

TEST_CASE_FIXTURE(shard_fixture,
                  "an entity's actor is spawned by its first request and serves the next ones") {
  start();
  auto a = actor_of("a");
  CHECK(actor_of("a") == a);
  auto b = actor_of("b");
  CHECK(b != a);
  CHECK(stats->spawned.load() == 2);
  CHECK(stats->resident.load() == 2);
  auto handle = ask(shard, get_atom_v, resident_atom_v, std::string{"a"});
  REQUIRE(handle);
  CHECK(handle->id() == a);
  CHECK_FALSE(resident("nobody")); // asking does not spawn
  auto inspected = ask(shard, resident_atom_v, std::string{"b"});
  REQUIRE(inspected);
  CHECK(inspected->resident);
  CHECK(inspected->mailbox == 0); // nothing waiting in its mailbox
  CHECK(inspected->epoch == 42);
  auto absent = ask(shard, resident_atom_v, std::string{"nobody"});
  REQUIRE(absent);
  CHECK_FALSE(absent->resident);
  CHECK(absent->mailbox == -1);
  CHECK(stats->spawned.load() == 2);
}

TEST_CASE_FIXTURE(shard_fixture,
                  "idle actors are passivated by the sweep, least recently used first") {
  opts.idle_timeout = 1000ms; // swept every 250 ms
  start();
  auto a = actor_of("a");
  advance(600ms);
  actor_of("b");
  advance(300ms); // a idle for 900 ms
  CHECK(resident("a"));
  advance(350ms); // a idle for 1250 ms (over the timeout by at most one sweep), b for 650 ms
  CHECK_FALSE(resident("a"));
  CHECK(resident("b"));
  CHECK(s->stopped == std::vector<std::string>{"a"});
  advance(700ms); // b idle for 1350 ms
  CHECK_FALSE(resident("b"));
  CHECK(s->stopped == std::vector<std::string>{"a", "b"});
  CHECK(stats->passivated.load() == 2);
  CHECK(stats->resident.load() == 0);
  CHECK(stats->crashed.load() == 0); // a passivated actor's stop is no crash
  // The next request spawns a new actor.
  CHECK(actor_of("a") != a);
  CHECK(stats->spawned.load() == 3);
}

TEST_CASE_FIXTURE(shard_fixture, "the resident cap passivates the least recently used actor") {
  opts.max_resident = 2;
  start();
  actor_of("a");
  actor_of("b");
  actor_of("c"); // over the cap: a, the least recently used, goes
  CHECK(s->stopped == std::vector<std::string>{"a"});
  actor_of("b"); // b is now more recent than c
  actor_of("d");
  CHECK(s->stopped == std::vector<std::string>{"a", "c"});
  CHECK(resident("b"));
  CHECK(resident("d"));
  CHECK_FALSE(resident("a"));
  CHECK_FALSE(resident("c"));
  CHECK(stats->resident.load() == 2);
  CHECK(stats->passivated.load() == 2);
}

TEST_CASE_FIXTURE(shard_fixture,
                  "a drain answers once every actor finished; new requests are moved") {
  store.queue().add({due("L", "a")});
  writer.hold(true);
  start();
  REQUIRE(writer.held() == 1); // a's run is writing
  actor_of("b");               // idle
  auto drained = request(shard, drain_atom_v);
  run();
  CHECK_FALSE(drained.done()); // a is still in its run
  CHECK(s->stopped == std::vector<std::string>{"b"});
  auto late = ask(shard, get_atom_v, std::string{"c"});
  REQUIRE_FALSE(late);
  CHECK(late.error() == errc::moved);
  CHECK_FALSE(down->stopped);
  writer.release(); // a's write commits; a stops after its run
  REQUIRE(drained.done());
  CHECK(drained.get());
  CHECK(s->stopped == std::vector<std::string>{"b", "a"});
  CHECK(writer.writes().size() == 1);
  CHECK(down->stopped);
  CHECK(down->reason == caf::exit_reason::user_shutdown);
}

TEST_CASE_FIXTURE(shard_fixture,
                  "a drain is bounded: an actor that never finishes is cut at drain_timeout") {
  store.queue().add({due("L", "a")});
  writer.hold(true); // a's write never commits: a never finishes its run
  start();
  REQUIRE(writer.held() == 1);
  actor_of("b"); // idle: stops at once
  auto drained = request(shard, drain_atom_v);
  run();
  CHECK_FALSE(drained.done());
  advance(opts.drain_timeout - 1ms);
  CHECK_FALSE(drained.done()); // within the bound a still may finish
  advance(1ms);
  REQUIRE(drained.done()); // the bound: answered, so the lease is handed off
  CHECK(drained.get());
  CHECK(down->stopped); // the shard answered and stopped without a
  CHECK(stats->drain_cut.load() == 1);
  CHECK(writer.held() == 1); // a's write was never answered: nothing a had was committed
  // a was told to stop (kill): an actor inside an await takes it once the await ends (CAF
  // 0.17 holds every other message back meanwhile), then it stops without running on.
  CHECK(s->stopped == std::vector<std::string>{"b"});
  writer.release(); // in a real node: answered `fenced`, the lease having moved
  CHECK(s->stopped == std::vector<std::string>{"b", "a"});
  CHECK(s->runs_of("a") == 1);
}

TEST_CASE_FIXTURE(shard_fixture,
                  "a failing run is retried after the lane's back-off, then dead-lettered") {
  lanes["L"].retry_backoff = 1000ms;
  opts.max_attempts = 3;
  for (int i = 0; i < 3; ++i)
    s->failures["a"].push_back(make_error(errc::internal, "boom"));
  store.queue().add({due("L", "a")});
  start();
  CHECK(s->runs_of("a") == 1);
  advance(999ms);
  CHECK(s->runs_of("a") == 1);
  advance(1ms); // back-off x 1
  CHECK(s->runs_of("a") == 2);
  advance(1999ms);
  CHECK(s->runs_of("a") == 2);
  advance(1ms); // back-off x 2; the third failure dead-letters
  CHECK(s->runs_of("a") == 3);
  REQUIRE(writer.writes().size() == 1);
  auto& letter = writer.writes().front();
  CHECK(letter.shard == 7);
  CHECK(letter.epoch == 42);
  CHECK(letter.ws.dead);
  CHECK(letter.ws.entity == "a");
  CHECK(letter.ws.lane == "L");
  CHECK(letter.ws.attempts == 3);
  CHECK(letter.ws.reason.find("boom") != std::string::npos);
  CHECK(stats->dead_letters.load() == 1);
  CHECK(opts.figures->lane("L").failures.load() == 3);
  CHECK(opts.figures->lane("L").dead_letters.load() == 1);
  CHECK(opts.figures->lane("L").runs.load() == 0);
  advance(60s); // given up: no more runs, through full rescans of the queue
  CHECK(s->runs_of("a") == 3);
  CHECK(writer.writes().size() == 1);
}

TEST_CASE_FIXTURE(shard_fixture,
                  "an outage is retried with a growing back-off, uncounted, never dead-lettered") {
  lanes["L"].retry_backoff = 1000ms;
  opts.max_attempts = 2;
  for (int i = 0; i < 5; ++i)
    s->failures["a"].push_back(make_error(errc::unavailable, "backend down"));
  store.queue().add({due("L", "a")});
  start();
  CHECK(s->runs_of("a") == 1);
  size_t runs = 1;
  for (auto wait : {1s, 2s, 4s, 8s, 16s}) { // the lane's streak doubles the back-off
    advance(wait - 1ms);
    CHECK(s->runs_of("a") == runs);
    advance(1ms);
    CHECK(s->runs_of("a") == ++runs);
  }
  REQUIRE(writer.writes().size() == 1); // the sixth run succeeded
  CHECK_FALSE(writer.writes().front().ws.dead);
  CHECK(stats->dead_letters.load() == 0);
}

TEST_CASE_FIXTURE(shard_fixture, "a run fenced out of its lease stops the shard and its actors") {
  writer.then(write_outcome::fenced);
  store.queue().add({due("L", "a")});
  start();
  CHECK(writer.writes().size() == 1);
  REQUIRE(down->stopped);
  CHECK(down->reason == errc::fenced);
  CHECK(s->stopped == std::vector<std::string>{"a"});
}

TEST_CASE_FIXTURE(shard_fixture, "a killed actor is forgotten and counted as a crash") {
  start();
  auto a = actor_of("a");
  auto handle = ask(shard, get_atom_v, resident_atom_v, std::string{"a"});
  REQUIRE(handle);
  kill(*handle);
  CHECK(stats->crashed.load() == 1);
  CHECK(stats->resident.load() == 0);
  CHECK_FALSE(resident("a"));
  CHECK(actor_of("a") != a); // a new actor serves the entity
  CHECK(stats->spawned.load() == 2);
}

TEST_CASE_FIXTURE(shard_fixture,
                  "a lane runs at most max_parallelism entities at once; other lanes go on") {
  lanes["L"].max_parallelism = 2;
  store.queue().add({due("L", "e1"), due("L", "e2"), due("L", "e3"), due("L", "e4"), due("L", "e5"),
                     due("M", "m1"), due("M", "m2"), due("M", "m3")});
  writer.hold(true);
  start();
  CHECK(writer.held() == 5); // two of L, all three of M
  CHECK(s->runs.size() == 5);
  writer.release(); // each finished run of L lets the next one start
  CHECK(writer.held() == 2);
  CHECK(s->runs.size() == 7);
  writer.release();
  CHECK(writer.held() == 1);
  writer.release();
  CHECK(writer.held() == 0);
  CHECK(writer.writes().size() == 8);
  for (auto id : {"e1", "e2", "e3", "e4", "e5", "m1", "m2", "m3"})
    CHECK_MESSAGE(s->runs_of(id) == 1, id);
}

TEST_CASE_FIXTURE(shard_fixture, "what a run commits is scheduled: a timer runs when due") {
  s->follow_ups["a"] = {due("T", "a", 800ms)}; // within the lookahead: not polled, learned
  store.queue().add({due("L", "a")});
  start();
  REQUIRE(s->runs.size() == 1);
  advance(799ms);
  CHECK(s->runs.size() == 1);
  advance(1ms);
  REQUIRE(s->runs.size() == 2);
  CHECK(s->runs.back() == std::make_pair(std::string{"a"}, std::string{"T"}));
}

TEST_CASE_FIXTURE(shard_fixture,
                  "entries due later are polled in time, and a failed poll is retried") {
  opts.queue_poll = 250ms;
  opts.queue_poll_idle = 250ms; // no idle back-off here: the next test has it
  opts.queue_lookahead = 1000ms;
  opts.queue_prefetch = 200ms;
  store.queue().fail_next(make_error(errc::unavailable, "database down"));
  store.queue().add({due("L", "a", 3000ms)});
  start(); // the first poll fails
  CHECK(store.queue().polls() == 1);
  advance(1900ms); // polled every 250 ms; the entry is not within the lookahead yet
  CHECK(s->runs.empty());
  CHECK(s->warmed.empty());
  advance(1000ms); // known since 2000 ms; its actor is activated ahead of the run
  CHECK(s->runs.empty());
  CHECK(s->warmed == std::vector<std::string>{"a"});
  advance(100ms);
  CHECK(s->runs.size() == 1);
  CHECK(store.queue().polls() > 10);
}

TEST_CASE_FIXTURE(shard_fixture,
                  "an idle shard polls less and less, down to the safety poll; work found brings "
                  "the poll back to its pace") {
  shipped_polls();
  start();
  // Empty polls after 250, 500, 1000, 2000, 4000, 8000, 16000 ms, then every 30 s: 8 polls in
  // the first minute where the busy pace would make 240.
  advance(60'000ms);
  auto idle_polls = store.queue().polls();
  MESSAGE("polls in the first minute of idleness: " << idle_polls);
  CHECK(idle_polls <= 10);
  CHECK(idle_polls >= 6);
  // An entry written behind its back with no notice is found by the safety poll at the latest.
  store.queue().add({due("L", "y")});
  auto before = store.queue().polls();
  advance(30'000ms);
  REQUIRE(s->runs.size() == 1);
  CHECK(s->runs.back() == std::make_pair(std::string{"y"}, std::string{"L"}));
  // The poll that found "y" brought the pace back (250, 250, 500, 1000, ... ms after it): an
  // idle shard would have made one poll in these 30 s.
  CHECK(store.queue().polls() >= before + 5);
}

TEST_CASE_FIXTURE(shard_fixture,
                  "an idle shard polls in time for the next entry it knows of: the store's hint "
                  "or its actors' commits") {
  shipped_polls();
  // Due in 100 s: far beyond the window and the safety poll. The first poll answers it as the
  // hint; the shard sleeps until a poll can read it, then runs it on time, its actor warmed.
  store.queue().add({due("L", "x", 100'000ms)});
  start();
  advance(99'999ms);
  CHECK(s->runs.empty());
  CHECK(s->warmed == std::vector<std::string>{"x"});
  auto polls = store.queue().polls();
  MESSAGE("polls in 100 s: " << polls);
  CHECK(polls <= 12); // the back-off's 8 in the first minute, 2 safety polls, the one for x
  advance(1ms);
  REQUIRE(s->runs.size() == 1);
  // A run commits a timer due in 50 s (learned from the commit, beyond the window), while the
  // store gives no hints: the shard still polls in time for it.
  store.queue().hint(false);
  s->follow_ups["x"] = {due("T", "x", 50'000ms)};
  store.queue().add({due("T", "x", 50'000ms)}); // as the commit wrote it
  send(shard, enqueued_atom_v, queue_entries{due("L", "x")},
       static_cast<uint8_t>(kit::event_source::api));
  run();
  REQUIRE(s->runs.size() == 2);
  advance(49'999ms);
  CHECK(s->runs.size() == 2);
  advance(1ms);
  REQUIRE(s->runs.size() == 3);
  CHECK(s->runs.back() == std::make_pair(std::string{"x"}, std::string{"T"}));
}

TEST_CASE_FIXTURE(shard_fixture,
                  "a notice (enqueued with no entries) makes a sleeping shard poll from the start "
                  "at once") {
  shipped_polls();
  opts.queue_prefetch = 0ms;
  store.queue().add({due("L", "a")});
  start();
  REQUIRE(s->runs.size() == 1); // the cursor now stands at a's entry
  advance(20'000ms); // asleep until 31.75 s; no full scan from the start yet (every 30 s)
  // Another node queued an entry due before the cursor's (a requeue of an earlier due time):
  // a poll after the cursor would never read it; the notice's poll starts from the start.
  auto earlier = due("L", "b", -60'000ms);
  store.queue().add({earlier});
  auto polls = store.queue().polls();
  send(shard, enqueued_atom_v, queue_entries{}, static_cast<uint8_t>(kit::event_source::api));
  run();
  CHECK(store.queue().polls() == polls + 1);
  REQUIRE(s->runs.size() == 2);
  CHECK(s->runs.back() == std::make_pair(std::string{"b"}, std::string{"L"}));
}

TEST_CASE_FIXTURE(shard_fixture,
                  "a pause answers once the lane's runs in flight finished; none starts after") {
  store.queue().add({due("L", "a"), due("M", "m")});
  writer.hold(true);
  start();
  REQUIRE(writer.held() == 2); // a's run (lane L) and m's (lane M) are writing
  auto paused = request(shard, pause_atom_v, std::set<std::string>{"L"});
  run();
  CHECK_FALSE(paused.done()); // a's run of L is still in flight
  CHECK(opts.figures->running.load() == 2);
  writer.release();
  REQUIRE(paused.done());
  CHECK(paused.get());
  CHECK(opts.figures->runs.load() == 2);
  CHECK(opts.figures->running.load() == 0);
  CHECK(opts.figures->lane("L").runs.load() == 1);
  CHECK(opts.figures->lane("M").runs.load() == 1);
  CHECK(opts.figures->lane("L").running.load() == 0);
  // New entries: L's wait (counted as backlog with their due time), M's run.
  writer.hold(false);
  auto b = due("L", "b");
  auto c = due("L", "c");
  send(shard, enqueued_atom_v, queue_entries{b, c, due("M", "n")},
       static_cast<uint8_t>(kit::event_source::api));
  advance(5000ms);
  CHECK(s->runs_of("b") == 0);
  CHECK(s->runs_of("c") == 0);
  CHECK(s->runs_of("n") == 1);
  CHECK(opts.figures->backlog.load() == 2);
  CHECK(opts.figures->oldest_due_us.load() == b.due_at_us);
  // The lane's own figures: the backlog is L's; M waits for nothing.
  CHECK(opts.figures->lane("L").backlog.load() == 2);
  CHECK(opts.figures->lane("M").backlog.load() == 0);
  CHECK(opts.figures->lane("M").runs.load() == 2);
  // Resumed: the backlog starts at once, and the figures follow.
  auto resumed = request(shard, pause_atom_v, std::set<std::string>{});
  run();
  REQUIRE(resumed.done());
  CHECK(s->runs_of("b") == 1);
  CHECK(s->runs_of("c") == 1);
  CHECK(opts.figures->backlog.load() == 0);
  CHECK(opts.figures->oldest_due_us.load() == 0);
  CHECK(opts.figures->runs.load() == 5);
  CHECK(opts.figures->lane("L").runs.load() == 3);
  CHECK(opts.figures->lane("L").backlog.load() == 0);
  auto seen = opts.figures->lanes();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].first == "L");
  CHECK(seen[1].first == "M");
}

TEST_CASE_FIXTURE(shard_fixture, "the shard's figures: residents, epoch, and a passivation") {
  start();
  CHECK(opts.figures->epoch.load() == 42);
  actor_of("a");
  actor_of("b");
  CHECK(opts.figures->resident.load() == 2);
  auto was = ask(shard, passivate_atom_v, std::string{"a"});
  REQUIRE(was);
  CHECK(*was);
  CHECK_FALSE(resident("a"));
  CHECK(opts.figures->resident.load() == 1);
  auto again = ask(shard, passivate_atom_v, std::string{"a"});
  REQUIRE(again);
  CHECK_FALSE(*again);
  CHECK(stats->passivated.load() == 1);
}
