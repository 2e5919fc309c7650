// Durable entities (actors/entities/) on CAF's test scheduler with a fake entity store and a
// fake writer: what a send writes, what a run of a due event writes (new state, retry, dead
// letter), and a backend outage, with the test clock. PostgreSQL's side of the same paths is
// in persistence/tasks.pgtest.cpp (results by cursor), tests/e2e/example_app.e2etest.cpp (the
// bank example, reload after kill -9) and tests/e2e/tasks.e2etest.cpp.
#include <doctest/doctest.h>

#include <stdexcept>

#include <google/protobuf/wrappers.pb.h>

#include "gost/core/kit/trail.hpp"
#include "gost/entities/spawn.hpp"
#include "gost/testing/caf_fixture.hpp"
#include "gost/testing/entity_fakes.hpp"

using namespace gost;
using namespace std::chrono_literals;
using google::protobuf::Int64Value;
using persistence::entity_row;
using persistence::entity_write;

namespace {

/// Adds each event's value to its state; a negative value is the event's fault (it throws), a
/// zero stands for a backend that is down.
class counter final : public entity_type<Int64Value, Int64Value> {
public:
  std::string kind() const override { return "counter"; }
  entity_options options() const override {
    entity_options o;
    o.max_attempts = 2;
    o.retry_backoff = 500ms;
    return o;
  }
  void handle(Int64Value& state, const Int64Value& event, entity_context&) const override {
    if (event.value() < 0)
      throw std::invalid_argument("negative amount");
    if (event.value() == 0)
      throw unavailable_error("backend down");
    state.set_value(state.value() + event.value());
  }
};

/// Like counter, but chooses per event what the kit takes from the context: the retry of this
/// event (2 s, 4 attempts), a tag, and the lane a first event puts a new entity in.
class tagger final : public entity_type<Int64Value, Int64Value> {
public:
  std::string kind() const override { return "tagger"; }
  std::string initial_lane(const google::protobuf::Any& event) const override {
    Int64Value v;
    return event.UnpackTo(&v) ? "lane-" + std::to_string(v.value()) : std::string{};
  }
  void handle(Int64Value& state, const Int64Value& event, entity_context& ctx) const override {
    ctx.set_retry(std::chrono::seconds{2}, 4);
    if (event.value() < 0)
      throw std::invalid_argument("negative amount");
    state.set_value(state.value() + event.value());
    ctx.set_tag("n" + std::to_string(state.value()));
  }
};

/// A bounded counter answering asks: adds the event's value (refusing beyond 10) and replies
/// with the new count; each add (re)sets the named timer "sweep" (1 s), which clears the count;
/// -5 cancels the sweep.
class bounded final : public entity_type<Int64Value, Int64Value, Int64Value> {
public:
  std::string kind() const override { return "bounded"; }
  void handle(Int64Value& state, const Int64Value& event, entity_context& ctx) const override {
    if (ctx.timer() == "sweep") {
      state.set_value(0);
      return;
    }
    if (event.value() == -5) {
      ctx.cancel_timer("sweep");
      return;
    }
    if (state.value() + event.value() > 10)
      throw refused(errc::failed_precondition,
                    "holds " + std::to_string(state.value()) + " of 10 already");
    state.set_value(state.value() + event.value());
    ctx.set_timer("sweep", std::chrono::seconds{2}, event);
    ctx.set_timer("sweep", std::chrono::seconds{1}, event); // the last set wins
    ctx.reply(state);
  }
};

std::string packed(int64_t n) {
  Int64Value v;
  v.set_value(n);
  google::protobuf::Any a;
  a.PackFrom(v);
  return a.SerializeAsString();
}

int64_t unpacked(const std::string& bytes) {
  google::protobuf::Any a;
  Int64Value v;
  REQUIRE(a.ParseFromString(bytes));
  REQUIRE(a.UnpackTo(&v));
  return v.value();
}

struct entity_fixture : testing::caf_fixture {
  entity_fixture() : caf_fixture(&register_entity_types) {}

  testing::fake_entity_store store{*this};
  testing::fake_writer<entity_write> writer{*this};
  entity_shard_actor shard;
  uint16_t recent_events = 0;            ///< the shard's console.recent_events
  std::shared_ptr<kit::trace_hub> trace; ///< its live traces (null: none)

  void start() {
    auto types = std::make_shared<entity_registry>();
    REQUIRE_FALSE(types->add(std::make_shared<counter>()));
    REQUIRE_FALSE(types->add(std::make_shared<tagger>()));
    REQUIRE_FALSE(types->add(std::make_shared<bounded>()));
    entity_shard_options o;
    o.kit.shard = 1;
    o.kit.epoch = 9;
    o.store = store;
    o.writer = writer;
    o.types = types;
    o.kit.wall_clock = wall_clock();
    o.kit.recent_events = recent_events;
    o.kit.trace = trace;
    shard = keep(spawn_entity_shard(sys, o));
    run();
  }

  /// An entity `key` at `version` with `value` as its state, nothing pending.
  void stored(const std::string& key, int64_t version, int64_t value) {
    entity_row row;
    row.found = true;
    row.version = version;
    row.state = packed(value);
    store.put(key, row);
  }

  /// Asks `key` to add `n`, with request id `id`.
  caf::expected<entity_reply> ask_add(const std::string& key, int64_t n, std::string id = {}) {
    Int64Value v;
    v.set_value(n);
    google::protobuf::Any event;
    event.PackFrom(v);
    return ask(shard, ask_atom_v, key, any_msg{event}, ask_id{std::move(id)});
  }

  /// The row a load of counter/x answers: version 0, one event (seq 1) due now.
  void one_event_due(int64_t amount, int32_t attempts = 0, const std::string& key = "counter/x") {
    entity_row row;
    row.found = true;
    row.due.push_back({1, wall_us(), attempts, packed(amount)});
    row.pending = 1;
    row.next_due_us = wall_us();
    store.put(key, row);
  }
};

} // namespace

TEST_CASE_FIXTURE(entity_fixture,
                  "a send is written with its due time, and its event is handled when due") {
  start();
  google::protobuf::Any event;
  Int64Value five;
  five.set_value(5);
  event.PackFrom(five);
  auto sent = ask(shard, send_atom_v, std::string{"counter/x"}, any_msg{event},
                  std::string{"req-1"}, int64_t{800});
  REQUIRE(sent);
  REQUIRE(writer.writes().size() == 1);
  auto& w = writer.writes().front();
  CHECK(w.shard == 1);
  CHECK(w.epoch == 9);
  REQUIRE(w.ws.events.size() == 1);
  CHECK(w.ws.events[0].due_at_us == wall_us() + 800'000);
  CHECK(w.ws.events[0].request_id == "req-1");
  CHECK_FALSE(w.ws.new_state);
  CHECK(store.loads().empty()); // a send loads nothing

  // The shard learned of the event from the send: its run starts when it is due.
  advance(799ms);
  one_event_due(5);
  CHECK(store.loads().empty());
  advance(1ms);
  CHECK(store.loads() == std::vector<std::string>{"counter/x"});
  REQUIRE(writer.writes().size() == 2);
  auto& handled = writer.writes().back().ws;
  CHECK(handled.consumed_seq == 1);
  CHECK(handled.expected_version == 0);
  REQUIRE(handled.new_state);
  CHECK(unpacked(*handled.new_state) == 5);
}

TEST_CASE_FIXTURE(entity_fixture, "an entity actor keeps a trail of its events for the console "
                                  "and publishes them to a live trace") {
  recent_events = 8;
  trace = std::make_shared<kit::trace_hub>();
  auto sub = trace->subscribe("counter/x", {});
  start();
  auto send = [&](int64_t amount) {
    google::protobuf::Any event;
    Int64Value v;
    v.set_value(amount);
    event.PackFrom(v);
    REQUIRE(
      ask(shard, send_atom_v, std::string{"counter/x"}, any_msg{event}, std::string{}, int64_t{0}));
  };
  one_event_due(5);
  send(5);
  run();
  REQUIRE(writer.writes().size() == 2); // the send, then the run that handled it
  entity_row second; // as the store has it after the first run: version 1, the next event due
  second.found = true;
  second.version = 1;
  second.due.push_back({2, wall_us(), 0, packed(-1)});
  second.pending = 1;
  second.next_due_us = wall_us();
  store.put("counter/x", second);
  send(-1);
  run();
  REQUIRE(writer.writes().size() == 4); // the second run rescheduled its failing event

  auto seen = ask(shard, resident_atom_v, std::string{"counter/x"});
  REQUIRE(seen);
  auto& a = *seen;
  CHECK(a.resident);
  CHECK(a.epoch == 9);
  CHECK(a.waiting == kit::waiting_on::nothing);
  CHECK_FALSE(a.in_event);
  REQUIRE(a.recent.size() == 4);
  CHECK(a.recent[0].kind == kit::event_kind::send);
  CHECK(a.recent[0].result == kit::event_result::ok);
  CHECK(a.recent[0].source == kit::event_source::api);
  CHECK(a.recent[1].kind == kit::event_kind::run);
  CHECK(a.recent[1].result == kit::event_result::ok);
  CHECK(a.recent[1].lane == "counter/"); // the kit's lane: kind/lane
  CHECK(a.recent[1].version == 1);
  CHECK(a.recent[2].kind == kit::event_kind::send);
  CHECK(a.recent[3].kind == kit::event_kind::run);
  CHECK(a.recent[3].result == kit::event_result::failed); // the event threw: retried later
  CHECK(a.recent[3].version == 1);

  // The same four reached the trace, in order.
  std::vector<std::string> traced;
  kit::trace_event ev;
  while (sub->next(ev, std::chrono::milliseconds{0}))
    traced.push_back(std::string{kit::to_string(ev.e.kind)} + ":" + kit::to_string(ev.e.result));
  CHECK(traced == std::vector<std::string>{"send:ok", "run:ok", "send:ok", "run:failed"});
  CHECK(ev.shard == 1);
  CHECK(ev.entity_id == "counter/x");
}

TEST_CASE_FIXTURE(entity_fixture,
                  "a failing event is rescheduled with the type's back-off, then dead-lettered") {
  one_event_due(-1);
  store.queue().add({{"counter/", "counter/x", wall_us(), persistence::priority::normal}});
  start();
  REQUIRE(writer.writes().size() == 1);
  auto& retry = writer.writes().back().ws;
  CHECK(retry.retry_seq == 1);
  CHECK(retry.retry_at_us == wall_us() + 500'000); // options().retry_backoff x 1 attempt
  CHECK_FALSE(retry.new_state);
  CHECK(retry.dead_seq == 0);

  one_event_due(-1, 1); // as the commit left it: one attempt, due again in 500 ms
  advance(499ms);
  CHECK(writer.writes().size() == 1);
  advance(1ms);
  REQUIRE(writer.writes().size() == 2);
  auto& letter = writer.writes().back().ws;
  CHECK(letter.dead_seq == 1);
  CHECK(letter.dead_attempts == 2); // options().max_attempts
  CHECK(letter.dead_reason == "negative amount");
  CHECK_FALSE(letter.new_state);
}

TEST_CASE_FIXTURE(entity_fixture,
                  "a backend outage retries the run and leaves the event as it is") {
  one_event_due(0);
  store.queue().add({{"counter/", "counter/x", wall_us(), persistence::priority::normal}});
  start();
  CHECK(store.loads().size() == 1);
  CHECK(writer.writes().empty()); // nothing written: the event keeps its attempts
  advance(500ms);                 // the lane's back-off
  CHECK(store.loads().size() == 2);
  CHECK(writer.writes().empty());
  one_event_due(3); // the backend is back
  advance(999ms);   // the outage streak doubled the back-off
  CHECK(store.loads().size() == 2);
  advance(1ms);
  CHECK(store.loads().size() == 3);
  REQUIRE(writer.writes().size() == 1);
  REQUIRE(writer.writes().front().ws.new_state);
  CHECK(unpacked(*writer.writes().front().ws.new_state) == 3);
}

TEST_CASE_FIXTURE(entity_fixture, "a new entity's row is created in the lane its type chooses for "
                                  "the first event") {
  start();
  google::protobuf::Any event;
  Int64Value five;
  five.set_value(5);
  event.PackFrom(five);
  REQUIRE(
    ask(shard, send_atom_v, std::string{"tagger/y"}, any_msg{event}, std::string{}, int64_t{0}));
  REQUIRE(writer.writes().size() == 1);
  CHECK(writer.writes().front().ws.lane == "lane-5");
  REQUIRE(writer.writes().front().ws.events.size() == 1);
  CHECK(writer.writes().front().ws.events[0].lane == "lane-5");
}

TEST_CASE_FIXTURE(entity_fixture, "the handler's retry replaces the type's options for its event, "
                                  "and its tag is written with the state") {
  one_event_due(-1, 2, "tagger/y");
  store.queue().add({{"tagger/", "tagger/y", wall_us(), persistence::priority::normal}});
  start();
  REQUIRE(writer.writes().size() == 1);
  auto& retry = writer.writes().back().ws;
  // Three attempts: the type's options would dead-letter it (max 3 by default); the handler's
  // say 4, with 2 s x 3 attempts.
  CHECK(retry.dead_seq == 0);
  CHECK(retry.retry_seq == 1);
  CHECK(retry.retry_at_us == wall_us() + 6'000'000);
  CHECK_FALSE(retry.tag);

  // As the commit left it: beyond the shard's lookahead, so found by a poll of the queue.
  store.queue().add(
    {{"tagger/", "tagger/y", wall_us() + 6'000'000, persistence::priority::normal}});
  one_event_due(7, 3, "tagger/y");
  advance(5999ms);
  CHECK(writer.writes().size() == 1);
  advance(1s);
  REQUIRE(writer.writes().size() == 2);
  auto& done = writer.writes().back().ws;
  REQUIRE(done.new_state);
  CHECK(unpacked(*done.new_state) == 7);
  REQUIRE(done.tag);
  CHECK(*done.tag == "n7");
}

TEST_CASE_FIXTURE(entity_fixture, "an ask is answered with the handler's reply once everything "
                                  "it did committed, its answer written with its request id") {
  start();
  stored("bounded/b", 4, 3);
  auto r = ask_add("bounded/b", 2, "ask-1");
  REQUIRE(r);
  REQUIRE(r->reply);
  Int64Value got;
  REQUIRE(r->reply->UnpackTo(&got));
  CHECK(got.value() == 5);
  CHECK(r->version == 5);
  REQUIRE(writer.writes().size() == 1);
  auto& ws = writer.writes().front().ws;
  CHECK(ws.expected_version == 4);
  REQUIRE(ws.new_state);
  CHECK(unpacked(*ws.new_state) == 5);
  REQUIRE(ws.answer);
  CHECK(ws.answer->request_id == "ask-1");
  CHECK(ws.answer->refusal_code == 0);
  CHECK(ws.answer->version == 5);
  REQUIRE(ws.answer->reply);
  CHECK(unpacked(*ws.answer->reply) == 5);
  // The named timer, set twice by the handler: once, with the last delay.
  REQUIRE(ws.events.size() == 1);
  CHECK(ws.events[0].timer == "sweep");
  CHECK(ws.events[0].due_at_us == wall_us() + 1'000'000);

  // The next ask uses the state in memory (no load), from the committed version.
  auto loads = store.loads().size();
  auto again = ask_add("bounded/b", 1);
  REQUIRE(again);
  CHECK(again->version == 6);
  CHECK(store.loads().size() == loads);
  CHECK(writer.writes().back().ws.expected_version == 5);
  CHECK(writer.writes().back().ws.answer->request_id.empty());
}

TEST_CASE_FIXTURE(entity_fixture, "a refused ask keeps nothing the handler did, and a retry of it "
                                  "gets the kept refusal without handling it again") {
  recent_events = 4;
  start();
  stored("bounded/b", 2, 9);
  auto r = ask_add("bounded/b", 5, "ask-2");
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::failed_precondition);
  CHECK(error_message(r.error()) == "holds 9 of 10 already");
  REQUIRE(writer.writes().size() == 1); // only the answer, kept for a retry
  auto& ws = writer.writes().front().ws;
  CHECK_FALSE(ws.new_state);
  CHECK(ws.events.empty());
  REQUIRE(ws.answer);
  CHECK(ws.answer->refusal_code == static_cast<int32_t>(errc::failed_precondition));
  CHECK(ws.answer->refusal == "holds 9 of 10 already");

  store.keep_answer("bounded/b", *ws.answer);
  auto loads = store.loads().size();
  auto retry = ask_add("bounded/b", 5, "ask-2");
  REQUIRE_FALSE(retry);
  CHECK(retry.error() == errc::failed_precondition);
  CHECK(error_message(retry.error()) == "holds 9 of 10 already");
  CHECK(writer.writes().size() == 1);
  CHECK(store.loads().size() == loads);

  // Without a request id a refusal writes nothing at all.
  auto plain = ask_add("bounded/b", 5);
  REQUIRE_FALSE(plain);
  CHECK(writer.writes().size() == 1);

  auto seen = ask(shard, resident_atom_v, std::string{"bounded/b"});
  REQUIRE(seen);
  REQUIRE(seen->recent.size() == 3);
  CHECK(seen->recent[0].kind == kit::event_kind::ask);
  CHECK(seen->recent[0].result == kit::event_result::refused);
}

TEST_CASE_FIXTURE(entity_fixture, "an ask whose write finds its request id answered already gets "
                                  "the kept answer (answered before a restart)") {
  start();
  stored("bounded/b", 0, 0);
  writer.then(persistence::write_outcome::duplicate);
  persistence::entity_answer kept;
  kept.request_id = "ask-3";
  kept.reply = packed(8);
  kept.version = 3;
  // The store's first lookup finds no answer (the other owner's commit was not visible yet),
  // the write says duplicate, and the answer is read then.
  store.keep_answer("bounded/b", kept, 1);
  auto r = ask_add("bounded/b", 1, "ask-3");
  REQUIRE(r);
  REQUIRE(r->reply);
  Int64Value got;
  REQUIRE(r->reply->UnpackTo(&got));
  CHECK(got.value() == 8);
  CHECK(r->version == 3);
}

TEST_CASE_FIXTURE(entity_fixture, "a named timer's event tells the handler its name, and a cancel "
                                  "is written with the event that cancels") {
  entity_row row;
  row.found = true;
  row.version = 3;
  row.state = packed(7);
  row.due.push_back({4, wall_us(), 0, packed(1), "sweep"});
  row.pending = 1;
  row.next_due_us = wall_us();
  row.timers.push_back({"sweep", wall_us()});
  store.put("bounded/b", row);
  store.queue().add({{"bounded/", "bounded/b", wall_us(), persistence::priority::normal}});
  start();
  REQUIRE(writer.writes().size() == 1);
  auto& swept = writer.writes().front().ws;
  CHECK(swept.consumed_seq == 4);
  REQUIRE(swept.new_state);
  CHECK(unpacked(*swept.new_state) == 0);
  CHECK(swept.events.empty());

  auto view = ask(shard, view_atom_v, std::string{"bounded/b"});
  REQUIRE(view);
  REQUIRE(view->timers.size() == 1);
  CHECK(view->timers[0].name == "sweep");

  auto cancel = ask_add("bounded/b", -5);
  REQUIRE(cancel);
  auto& ws = writer.writes().back().ws;
  CHECK(ws.cancelled_timers == std::vector<std::string>{"sweep"});
  CHECK(ws.events.empty());
}

TEST_CASE_FIXTURE(entity_fixture, "a sent event the handler refuses is consumed, and nothing else "
                                  "of it is kept") {
  recent_events = 4;
  entity_row row;
  row.found = true;
  row.version = 1;
  row.state = packed(9);
  row.due.push_back({2, wall_us(), 0, packed(5)});
  row.pending = 1;
  row.next_due_us = wall_us();
  store.put("bounded/b", row);
  store.queue().add({{"bounded/", "bounded/b", wall_us(), persistence::priority::normal}});
  start();
  REQUIRE(writer.writes().size() == 1);
  auto& ws = writer.writes().front().ws;
  CHECK(ws.consumed_seq == 2);
  CHECK(ws.retry_seq == 0);
  CHECK(ws.dead_seq == 0);
  CHECK_FALSE(ws.new_state);
  CHECK(ws.events.empty());
  auto seen = ask(shard, resident_atom_v, std::string{"bounded/b"});
  REQUIRE(seen);
  REQUIRE_FALSE(seen->recent.empty());
  CHECK(seen->recent.back().result == kit::event_result::refused);
}

TEST_CASE("an ask of an event of the wrong type is refused before the handler runs") {
  bounded t;
  entity_context ctx{"bounded", "b", "", 0, 0, {}};
  google::protobuf::Any event;
  google::protobuf::StringValue wrong;
  event.PackFrom(wrong);
  CHECK_THROWS_AS(t.apply(nullptr, event, ctx), type_mismatch);
  CHECK(t.reply_descriptor() == Int64Value::descriptor());
  counter c;
  CHECK(c.reply_descriptor() == nullptr);
}
