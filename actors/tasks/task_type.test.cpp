// The task model around a type's steps (gost/tasks/task_type.hpp), without CAF: Init first,
// the group's lane and retry settings, a closed task dropping events, events before Init, the
// state name as tag, and the naming of task ids and kinds.
#include <doctest/doctest.h>

#include <stdexcept>

#include <google/protobuf/wrappers.pb.h>

#include "gost/tasks/task_type.hpp"

using namespace gost;
using namespace gost::tasks;
using namespace std::chrono_literals;
using google::protobuf::StringValue;

namespace {

/// Counts its steps in the state number; `fail` throws, `ping` answers to the sender.
class probe final : public task_type {
public:
  std::string name() const override { return "probe"; }
  const google::protobuf::Descriptor* input_descriptor() const override {
    return StringValue::descriptor();
  }
  void init(v1::Task&, task_context& ctx) const override {
    StringValue v;
    v.set_value("started");
    ctx.result("started", v);
    ctx.set_state(1, "running");
  }
  void on_event(v1::Task& t, const v1::TaskEvent::Custom& e, task_context& ctx) const override {
    if (e.name() == "fail")
      throw std::runtime_error("step failed");
    if (e.name() == "ping") {
      StringValue v;
      v.set_value("pong");
      ctx.send("probe", e.from().substr(e.from().find('/') + 1), "pong", v);
    }
    ctx.set_state(t.state() + 1, "step" + std::to_string(t.state() + 1));
  }
};

v1::TaskEvent init_event(const std::string& group, int64_t retry_ms = 600'000, int attempts = 5) {
  v1::TaskEvent e;
  auto* in = e.mutable_init();
  in->set_group(group);
  StringValue v;
  v.set_value("input");
  in->mutable_input()->PackFrom(v);
  in->set_priority(7);
  in->set_retry_delay_ms(retry_ms);
  in->set_max_attempts(attempts);
  return e;
}

v1::TaskEvent custom_event(const std::string& name, const std::string& from = {}) {
  v1::TaskEvent e;
  e.mutable_custom()->set_name(name);
  e.mutable_custom()->mutable_payload()->PackFrom(StringValue{});
  e.mutable_custom()->set_from(from);
  return e;
}

entity_context context(const std::string& id = "g1:a", const std::string& lane = {}) {
  return entity_context{"task.probe", id, lane, 0, 0, std::chrono::system_clock::time_point{}};
}

} // namespace

TEST_CASE("Init records group, input, priority and settings, moves the task to its group's lane "
          "and runs the type's first step") {
  task_entity<probe> type;
  v1::Task t;
  auto ctx = context();
  type.handle(t, init_event("g1"), ctx);
  CHECK_EQ(t.group(), "g1");
  CHECK_EQ(t.priority(), 7);
  CHECK_EQ(t.retry_delay_ms(), 600'000);
  CHECK_EQ(t.max_attempts(), 5);
  CHECK_EQ(t.state_name(), "running");
  CHECK_EQ(ctx.lane(), "g1");
  REQUIRE(ctx.tag());
  CHECK_EQ(*ctx.tag(), "running");
  REQUIRE(ctx.retry());
  CHECK_EQ(ctx.retry()->first, 600'000ms);
  CHECK_EQ(ctx.retry()->second, 5);
  // The result goes to the group's lane, counted in the task.
  REQUIRE_EQ(ctx.outputs().size(), 1u);
  CHECK_EQ(ctx.outputs()[0].lane, "g1");
  v1::TaskResult r;
  REQUIRE(ctx.outputs()[0].output.UnpackTo(&r));
  CHECK_EQ(r.task_id(), "g1:a");
  CHECK_EQ(r.task_type(), "probe");
  CHECK_EQ(r.name(), "started");
  CHECK_EQ(t.results(), 1);
  // The kit creates the task's row in its group's lane from the first event.
  google::protobuf::Any first;
  first.PackFrom(init_event("g7"));
  CHECK_EQ(type.initial_lane(first), "g7");
  first.PackFrom(custom_event("x"));
  CHECK_EQ(type.initial_lane(first), "");
}

TEST_CASE("a second Init changes nothing; an input of the wrong type fails the Init") {
  task_entity<probe> type;
  v1::Task t;
  auto c1 = context();
  type.handle(t, init_event("g1"), c1);
  auto before = t.SerializeAsString();
  auto c2 = context("g1:a", "g1");
  type.handle(t, init_event("g2"), c2);
  CHECK_EQ(t.SerializeAsString(), before);
  CHECK(c2.outputs().empty());

  v1::Task fresh;
  auto bad = init_event("g1");
  google::protobuf::Int64Value wrong;
  bad.mutable_init()->mutable_input()->PackFrom(wrong);
  auto c3 = context();
  CHECK_THROWS_WITH_AS(type.handle(fresh, bad, c3),
                       "the input of a probe task must be a google.protobuf.StringValue",
                       std::invalid_argument);
  // The group's retry settings apply to the failed Init itself.
  REQUIRE(c3.retry());
  CHECK_EQ(c3.retry()->second, 5);
}

TEST_CASE("an event before Init fails (retried with the type's options, then dead-lettered)") {
  task_entity<probe> type;
  v1::Task t;
  auto ctx = context();
  CHECK_THROWS_AS(type.handle(t, custom_event("ping"), ctx), std::logic_error);
  CHECK_FALSE(ctx.retry());
}

TEST_CASE("a failing step keeps the group's retry settings in the context for the kit") {
  task_entity<probe> type;
  v1::Task t;
  auto c1 = context();
  type.handle(t, init_event("g1", 250, 2), c1);
  auto c2 = context("g1:a", "g1");
  CHECK_THROWS_WITH(type.handle(t, custom_event("fail"), c2), "step failed");
  REQUIRE(c2.retry());
  CHECK_EQ(c2.retry()->first, 250ms);
  CHECK_EQ(c2.retry()->second, 2);
}

TEST_CASE("events to another task carry the sender; cancel closes the task; a closed task drops "
          "later events") {
  task_entity<probe> type;
  v1::Task t;
  auto c1 = context("g1:b");
  type.handle(t, init_event("g1"), c1);
  auto c2 = context("g1:b", "g1");
  type.handle(t, custom_event("ping", "task.probe/g1:a"), c2);
  REQUIRE_EQ(c2.sends().size(), 1u);
  CHECK_EQ(c2.sends()[0].kind, "task.probe");
  CHECK_EQ(c2.sends()[0].id, "g1:a");
  v1::TaskEvent sent;
  REQUIRE(c2.sends()[0].event.UnpackTo(&sent));
  CHECK_EQ(sent.custom().name(), "pong");
  CHECK_EQ(sent.custom().from(), "task.probe/g1:b");
  CHECK_EQ(t.state_name(), "step2");

  v1::TaskEvent reprio;
  reprio.mutable_reprioritize()->set_priority(99);
  auto c3 = context("g1:b", "g1");
  type.handle(t, reprio, c3);
  CHECK_EQ(t.priority(), 99);

  v1::TaskEvent cancel;
  cancel.mutable_cancel()->set_reason("no longer needed");
  auto c4 = context("g1:b", "g1");
  type.handle(t, cancel, c4);
  CHECK(t.closed());
  CHECK_EQ(t.state(), -1);
  REQUIRE(c4.tag());
  CHECK_EQ(*c4.tag(), "cancelled");

  auto before = t.SerializeAsString();
  auto c5 = context("g1:b", "g1");
  type.handle(t, custom_event("ping", "task.probe/g1:a"), c5);
  CHECK_EQ(t.SerializeAsString(), before);
  CHECK(c5.sends().empty());
}

TEST_CASE("task ids, kinds and group ids") {
  CHECK_EQ(task_kind("moderation"), "task.moderation");
  CHECK_EQ(task_type_of_kind("task.moderation"), std::optional<std::string>{"moderation"});
  CHECK_FALSE(task_type_of_kind("bank.account"));
  CHECK_FALSE(task_type_of_kind("task."));
  CHECK_EQ(task_id("g1", "k/1"), "g1:k/1");
  CHECK_EQ(group_of_task("g1:k/1"), std::optional<std::string>{"g1"});
  CHECK_FALSE(group_of_task("g1"));
  CHECK_FALSE(group_of_task("g1:"));
  CHECK_FALSE(group_of_task("g 1:x"));
  CHECK(check_group_id("ki.moderation-2").empty());
  CHECK_EQ(check_group_id(""), "must be 1..64 characters");
  CHECK_EQ(check_group_id("a/b"), "may hold only letters, digits, '.', '_' and '-'");
}
