// The stage engine end to end on one shard: offer actors, scheduler, writer, PostgreSQL.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include <google/protobuf/wrappers.pb.h>

#include "gost/testing/process.hpp"
#include "shard_fixture.hpp"

using namespace gost;
using namespace std::chrono_literals;
using gost::errc;

namespace {

int64_t count_of(const google::protobuf::Any* state) {
  google::protobuf::Int64Value v;
  if (state != nullptr)
    state->UnpackTo(&v);
  return v.value();
}

google::protobuf::Any count_state(int64_t n) {
  google::protobuf::Int64Value v;
  v.set_value(n);
  google::protobuf::Any a;
  a.PackFrom(v);
  return a;
}

/// Counts its runs in its state and comes back by timer until it ran `times` times.
struct counter final : stage {
  int64_t times;
  explicit counter(int64_t n) : times(n) {}
  decision should_process(const v1::Offer&, const google::protobuf::Any* st) const override {
    return count_of(st) < times ? decision::process() : decision::skip();
  }
  stage_result process(const v1::Offer&, const google::protobuf::Any* st) const override {
    stage_result r;
    auto n = count_of(st) + 1;
    r.state = count_state(n);
    if (n < times)
      r.timer = stage_clock::now() + 50ms;
    return r;
  }
};

std::string count_sql(const std::string& table, const std::string& where = "true") {
  return "SELECT count(*) FROM " + table + " WHERE " + where;
}

/// Entries in any stage's queue (timers included).
const std::string queued_sql = "SELECT count(*) FROM stage_states WHERE due_at_us IS NOT NULL";
/// Events in the outbox (one batch row holds many).
const std::string outbox_events_sql = "SELECT coalesce(sum(events), 0) FROM outbox_batches";

} // namespace

TEST_CASE("timers bring an offer back into its stage's queue; states persist") {
  auto reg = std::make_shared<stage_registry>();
  reg->add("counter", std::make_shared<counter>(3));
  shard_fixture f{60s, reg};
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  REQUIRE(testing::eventually(
    10s, [&] { return f.db.scalar(queued_sql) == "0" && f.stats->stage_runs.load() == 3; }));
  CHECK(f.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "1"); // offer untouched
  CHECK(f.db.scalar(outbox_events_sql) == "4"); // the create and three state changes
  auto st = f.db.scalar("SELECT encode(state, 'hex') FROM stage_states WHERE offer_id = 'o1'");
  CHECK(st == [] {
    std::string hex;
    for (unsigned char c : count_state(3).SerializeAsString()) {
      char b[3];
      snprintf(b, sizeof(b), "%02x", c);
      hex += b;
    }
    return hex;
  }());
}

TEST_CASE("a stage whose offer changed behind its back reloads and redoes") {
  // The stage's first call changes the row directly, as another writer would.
  struct title_stage final : stage {
    testing::temp_db* db;
    mutable std::atomic<int> calls{0};
    decision should_process(const v1::Offer& o, const google::protobuf::Any*) const override {
      return o.title().rfind("processed", 0) == 0 ? decision::skip() : decision::process();
    }
    stage_result process(const v1::Offer& o, const google::protobuf::Any*) const override {
      if (calls++ == 0)
        db->scalar("UPDATE offers SET version = version + 1 WHERE offer_id = '" + o.id() + "'");
      stage_result r;
      r.offer = o;
      r.offer->set_title("processed at v" + std::to_string(o.version()));
      return r;
    }
  };
  auto st = std::make_shared<title_stage>();
  auto reg = std::make_shared<stage_registry>();
  reg->add("title", st);
  shard_fixture f{60s, reg};
  st->db = &f.db;
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  REQUIRE(testing::eventually(
    10s, [&] { return f.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "3"; }));
  auto got = f.ask(get_atom_v, std::string{"o1"});
  REQUIRE(got);
  CHECK(got->value.title() == "processed at v2");
  CHECK(st->calls.load() == 2);
  CHECK(f.stats->stage_conflicts.load() >= 1);
}

TEST_CASE("a stage that keeps failing is retried, then dead-lettered") {
  struct failing final : stage {
    decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
      return decision::process();
    }
    stage_result process(const v1::Offer&, const google::protobuf::Any*) const override {
      throw std::runtime_error("catalog service down");
    }
  };
  auto reg = std::make_shared<stage_registry>();
  stage_options opts;
  opts.retry_backoff = 10ms;
  reg->add("failing", std::make_shared<failing>(), opts);
  shard_fixture f{60s, reg, [](shard_options& so) { so.kit.max_attempts = 3; }};
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  REQUIRE(testing::eventually(10s, [&] { return f.db.scalar(count_sql("dead_letters")) == "1"; }));
  CHECK(f.db.scalar("SELECT stage_id || ':' || attempts FROM dead_letters") == "failing:3");
  CHECK(f.db.scalar("SELECT reason FROM dead_letters").find("catalog service down")
        != std::string::npos);
  CHECK(f.db.scalar(queued_sql) == "0");
  CHECK(f.stats->stage_failures.load() == 3);
  // The offer itself is untouched and still served.
  auto got = f.ask(get_atom_v, std::string{"o1"});
  REQUIRE(got);
  CHECK(got->value.version() == 1);
}

TEST_CASE("a change storm between two stages is cut and dead-lettered") {
  // Each stage wants the offer when the other one touched it last: an endless ping-pong.
  struct appender final : stage {
    char mine;
    explicit appender(char c) : mine(c) {}
    decision should_process(const v1::Offer& o, const google::protobuf::Any*) const override {
      return !o.title().empty() && o.title().back() != mine ? decision::process()
                                                            : decision::skip();
    }
    stage_result process(const v1::Offer& o, const google::protobuf::Any*) const override {
      stage_result r;
      if (o.title().back() == mine)
        return r;
      r.offer = o;
      r.offer->set_title(o.title() + mine);
      return r;
    }
  };
  auto reg = std::make_shared<stage_registry>();
  reg->add("ping", std::make_shared<appender>('p')).add("pong", std::make_shared<appender>('q'));
  shard_fixture f{60s, reg, [](shard_options& so) { so.max_chain = 4; }};
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  REQUIRE(testing::eventually(10s, [&] {
    return f.db.scalar(count_sql("dead_letters")) == "1" && f.db.scalar(queued_sql) == "0";
  }));
  CHECK(f.db.scalar("SELECT reason FROM dead_letters").find("change storm") != std::string::npos);
  CHECK(f.stats->change_storms_cut.load() == 1);
  auto got = f.ask(get_atom_v, std::string{"o1"});
  REQUIRE(got);
  CHECK(got->value.title().size() < 20); // it stopped
}

TEST_CASE("a stage that changes nothing leaves offer, states and outbox alone") {
  struct noop final : stage {
    decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
      return decision::process();
    }
    stage_result process(const v1::Offer&, const google::protobuf::Any*) const override {
      return {};
    }
  };
  auto reg = std::make_shared<stage_registry>();
  reg->add("noop", std::make_shared<noop>());
  shard_fixture f{60s, reg};
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  REQUIRE(testing::eventually(10s, [&] { return f.stats->stage_runs.load() == 1; }));
  CHECK(f.db.scalar(queued_sql) == "0");
  CHECK(f.db.scalar("SELECT version FROM offers") == "1");
  CHECK(f.db.scalar(count_sql("stage_states")) == "0");
  CHECK(f.db.scalar(outbox_events_sql) == "1"); // the create only
}

TEST_CASE("an update through the API asks the stages again, honouring interests") {
  // Wants an offer whose title says "sale" (reacts to title only) and records it in its state.
  struct on_title final : stage {
    mutable std::atomic<int> asked{0};
    decision should_process(const v1::Offer& o, const google::protobuf::Any* st) const override {
      ++asked;
      return o.title() == "sale" && st == nullptr ? decision::process() : decision::skip();
    }
    stage_result process(const v1::Offer&, const google::protobuf::Any*) const override {
      stage_result r;
      r.state = count_state(1);
      return r;
    }
    std::vector<std::string> interests() const override { return {"title"}; }
  };
  auto st = std::make_shared<on_title>();
  auto reg = std::make_shared<stage_registry>();
  reg->add("on_title", st);
  shard_fixture f{60s, reg};
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  CHECK(st->asked.load() == 1);          // a new offer asks every stage
  CHECK(f.db.scalar(queued_sql) == "0"); // title "t": not wanted
  // A change of another field is not even asked about.
  auto o = new_offer("o1");
  o.set_description("longer");
  REQUIRE(f.ask(update_atom_v, o.id(), offer_msg{o}, int64_t{1}, std::string{}, request_id{}));
  CHECK(st->asked.load() == 1);
  CHECK(f.db.scalar(queued_sql) == "0");
  // The title change makes the stage want it: enqueued by the update, then run.
  o.set_title("sale");
  auto up = f.ask(update_atom_v, o.id(), offer_msg{o}, int64_t{2}, std::string{}, request_id{});
  REQUIRE(up);
  CHECK(up->value.version() == 3);
  REQUIRE(testing::eventually(10s, [&] {
    return f.db.scalar(count_sql("stage_states", "stage_id = 'on_title'")) == "1"
           && f.db.scalar(queued_sql) == "0";
  }));
  CHECK(f.stats->stage_runs.load() == 1);
  CHECK(f.db.scalar("SELECT version FROM offers") == "3"); // the stage did not touch the offer
}

TEST_CASE("the background rescan walks every offer and enqueues what stages want now") {
  // A stage that wanted nothing when the offers were created, and wants them all later (as a
  // new catalog version would).
  struct late final : stage {
    std::atomic<bool>* wanted;
    decision should_process(const v1::Offer&, const google::protobuf::Any* st) const override {
      return wanted->load() && st == nullptr ? decision::process() : decision::skip();
    }
    stage_result process(const v1::Offer&, const google::protobuf::Any*) const override {
      stage_result r;
      r.state = count_state(1);
      return r;
    }
  };
  std::atomic<bool> wanted{false};
  auto st = std::make_shared<late>();
  st->wanted = &wanted;
  auto reg = std::make_shared<stage_registry>();
  reg->add("late", st);
  shard_fixture f{60s, reg, [](shard_options& so) {
                    so.rescan_every = 200ms;
                    so.rescan_page = 7; // several pages
                  }};
  constexpr int n = 30;
  for (int i = 0; i < n; ++i)
    REQUIRE(f.ask(create_atom_v, std::string{"o" + std::to_string(i)},
                  offer_msg{new_offer("o" + std::to_string(i))}, request_id{}));
  CHECK(f.db.scalar(queued_sql) == "0");
  wanted = true;
  REQUIRE(testing::eventually(20s, [&] {
    return f.db.scalar(count_sql("stage_states")) == std::to_string(n)
           && f.db.scalar(queued_sql) == "0";
  }));
  // The actors count a run once the writer's answer reaches them, just after the commit.
  CHECK(testing::eventually(
    5s, [&] { return f.stats->stage_runs.load() == static_cast<uint64_t>(n); }));
  CHECK(f.stats->stage_runs.load() == static_cast<uint64_t>(n));
}

TEST_CASE("a sweep asks its one stage about every offer once, records its progress, never reruns") {
  // Both stages want every offer without their state, once told to; only the sweep's stage is
  // asked by it (as a new catalog version's sweep asks catalog.evolve alone).
  struct late final : stage {
    std::atomic<bool>* wanted;
    decision should_process(const v1::Offer&, const google::protobuf::Any* st) const override {
      return wanted->load() && st == nullptr ? decision::process() : decision::skip();
    }
    stage_result process(const v1::Offer&, const google::protobuf::Any*) const override {
      stage_result r;
      r.state = count_state(1);
      return r;
    }
    std::vector<std::string> interests() const override { return {"category"}; }
  };
  std::atomic<bool> wanted{false};
  auto a = std::make_shared<late>();
  auto b = std::make_shared<late>();
  a->wanted = b->wanted = &wanted;
  auto reg = std::make_shared<stage_registry>();
  reg->add("a", a).add("b", b);
  shard_fixture f{60s, reg};
  constexpr int n = 30;
  for (int i = 0; i < n; ++i)
    REQUIRE(f.ask(create_atom_v, std::string{"o" + std::to_string(i)},
                  offer_msg{new_offer("o" + std::to_string(i))}, request_id{}));
  wanted = true;
  // The shard started again with sweeps (as a node starts with a new catalog version).
  auto restart = [&](std::vector<sweep> sweeps) {
    caf::anon_send_exit(f.shard, caf::exit_reason::user_shutdown);
    shard_options so;
    so.kit.shard = 3;
    so.kit.epoch = std::stoll(f.db.scalar("SELECT epoch FROM shard_leases WHERE shard = 3"));
    so.kit.queue_poll = 50ms;
    so.store = f.store;
    so.writer = f.writer;
    so.stages = reg;
    so.pools = f.pools;
    so.stats = f.stats;
    so.rescan_page = 7; // several pages
    so.sweeps = std::move(sweeps);
    f.shard = spawn_shard(*f.sys, so);
  };
  auto states_of = [&](const char* stage) {
    return f.db.scalar(
      count_sql("stage_states", std::string{"state IS NOT NULL AND stage_id = '"} + stage + "'"));
  };
  restart({{"a@2", "a"}});
  REQUIRE(testing::eventually(20s, [&] {
    return states_of("a") == std::to_string(n)
           && f.db.scalar("SELECT done FROM rescan_sweeps WHERE token = 'a@2' AND shard = 3") == "t"
           && f.db.scalar(queued_sql) == "0";
  }));
  CHECK(f.db.scalar("SELECT enqueued FROM rescan_sweeps WHERE token = 'a@2'") == std::to_string(n));
  CHECK(f.db.scalar(count_sql("stage_states", "stage_id = 'b'")) == "0"); // not the sweep's
  auto a_done = f.db.scalar("SELECT updated_at FROM rescan_sweeps WHERE token = 'a@2'");

  // Started again with the done sweep and a new one after it: the first is passed over (its
  // record untouched), the second runs.
  restart({{"a@2", "a"}, {"b@2", "b"}});
  REQUIRE(testing::eventually(20s, [&] {
    return states_of("b") == std::to_string(n)
           && f.db.scalar("SELECT done FROM rescan_sweeps WHERE token = 'b@2'") == "t";
  }));
  CHECK(f.db.scalar("SELECT updated_at FROM rescan_sweeps WHERE token = 'a@2'") == a_done);
  CHECK(f.db.scalar("SELECT enqueued FROM rescan_sweeps WHERE token = 'a@2'") == std::to_string(n));
}

TEST_CASE("a blocking stage runs in its pool, never on a scheduler thread") {
  // Each call waits until four calls run at once. The fixture's CAF has two scheduler
  // threads: were `process` run on them, at most two could ever wait together.
  struct waiting final : stage {
    mutable std::mutex m;
    mutable std::condition_variable cv;
    mutable int running = 0;
    mutable int max_seen = 0;
    decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
      return decision::process();
    }
    stage_result process(const v1::Offer&, const google::protobuf::Any* st) const override {
      std::unique_lock<std::mutex> lock{m};
      ++running;
      max_seen = std::max(max_seen, running);
      cv.notify_all();
      cv.wait_for(lock, 5s, [&] { return max_seen >= 4; });
      --running;
      stage_result r;
      r.state = count_state(st == nullptr ? 0 : 1);
      return r;
    }
  };
  auto impl = std::make_shared<waiting>();
  auto reg = std::make_shared<stage_registry>();
  stage_options opts;
  opts.blocking = true;
  opts.pool_workers = 4;
  reg->add("slow", impl, opts);
  shard_fixture f{60s, reg};
  REQUIRE(f.pools->count("slow") == 1);
  for (int i = 0; i < 4; ++i)
    REQUIRE(f.ask(create_atom_v, std::string{"o" + std::to_string(i)},
                  offer_msg{new_offer("o" + std::to_string(i))}, request_id{}));
  REQUIRE(testing::eventually(
    10s, [&] { return f.db.scalar(queued_sql) == "0" && f.stats->stage_runs.load() == 4; }));
  CHECK(impl->max_seen == 4);
  CHECK(f.db.scalar(count_sql("stage_states", "state IS NOT NULL")) == "4");
  // The pool counted the four jobs.
  caf::scoped_actor self{*f.sys};
  self->request(f.pools->at("slow"), 5s, get_atom_v)
    .receive([](pool_stats& s) { CHECK(s.completed == 4); },
             [](caf::error&) { FAIL("no pool stats"); });
}

TEST_CASE("an offer actor killed in the middle of a stage run finishes the run, then stops") {
  // While an offer actor awaits (here: its stage's pool), CAF 0.17 holds back every other
  // message, exit messages included: a kill takes effect between events, so the run commits
  // once and is neither cut in half nor lost; the next event gets a new actor.
  struct gate final : stage {
    mutable std::atomic<bool> armed{false};
    mutable std::atomic<int> calls{0};
    mutable std::atomic<bool> release{false};
    decision should_process(const v1::Offer&, const google::protobuf::Any* st) const override {
      return armed && st == nullptr ? decision::process() : decision::skip();
    }
    stage_result process(const v1::Offer&, const google::protobuf::Any*) const override {
      ++calls;
      testing::eventually(10s, [&] { return release.load(); });
      stage_result r;
      r.state = count_state(1);
      return r;
    }
  };
  auto impl = std::make_shared<gate>();
  auto reg = std::make_shared<stage_registry>();
  stage_options opts;
  opts.blocking = true;
  reg->add("gate", impl, opts);
  shard_fixture f{60s, reg};
  auto o = new_offer("o1");
  REQUIRE(f.ask(create_atom_v, o.id(), offer_msg{o}, request_id{}));
  // The offer's actor, idle now, answers a mailbox query itself: its address is the sender.
  caf::scoped_actor self{*f.sys};
  offer_actor victim;
  self->request(f.shard, 5s, get_atom_v, resident_atom_v, std::string{"o1"})
    .receive([&](offer_actor& a) { victim = a; },
             [&](caf::error& e) { FAIL("actor query failed: " << f.sys->render(e)); });
  REQUIRE(victim);
  // An update makes the stage want the offer; its run waits in the pool.
  impl->armed = true;
  o.set_title("armed");
  REQUIRE(f.ask(update_atom_v, o.id(), offer_msg{o}, int64_t{1}, std::string{}, request_id{}));
  REQUIRE(testing::eventually(10s, [&] { return impl->calls.load() == 1; }));
  caf::scoped_actor watcher{*f.sys};
  watcher->monitor(victim);
  caf::anon_send_exit(victim, caf::exit_reason::kill);
  victim = offer_actor{};
  impl->release = true;
  // The kill is in the actor's mailbox before the run can end. Had it cut the run, the actor
  // would stop with nothing committed; it stops after the run's commit.
  uint64_t runs_when_stopped = 0;
  watcher->receive([&](caf::down_msg&) { runs_when_stopped = f.stats->stage_runs.load(); },
                   caf::after(10s) >> [&] { FAIL("the killed offer actor did not stop"); });
  CHECK(runs_when_stopped == 1);
  CHECK(testing::eventually(10s, [&] { return f.stats->offers.crashed.load() == 1; }));
  CHECK(f.db.scalar(count_sql("stage_states", "state IS NOT NULL")) == "1");
  CHECK(f.db.scalar(queued_sql) == "0");
  CHECK(f.stats->stage_runs.load() == 1);
  CHECK(impl->calls.load() == 1);
  // A new actor serves the offer.
  o.set_title("after");
  auto again = f.ask(update_atom_v, o.id(), offer_msg{o}, int64_t{2}, std::string{}, request_id{});
  REQUIRE(again);
  CHECK(again->value.version() == 3);
  CHECK(f.stats->offers.resident.load() == 1);
}
