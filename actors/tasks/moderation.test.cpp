// The moderation task (gost/tasks/moderation.hpp): its rules as a plain class, and its steps as
// the kit runs them (through an entity_context, no CAF): assignment on Init with its timer,
// verdicts, re-issue on timeout up to max_issues, cancel withdrawing.
#include <doctest/doctest.h>

#include "gost/tasks/moderation.hpp"

using namespace gost;
using namespace gost::tasks;
using namespace std::chrono_literals;

namespace {

v1::ModerationInput input(int32_t max_issues = 2) {
  v1::ModerationInput in;
  in.set_item_id("offer-42");
  in.set_content("a bike, almost new");
  in.set_verdict_timeout_ms(30'000);
  in.set_max_issues(max_issues);
  return in;
}

v1::ModerationTimeout timeout(int32_t issue) {
  v1::ModerationTimeout t;
  t.set_issue(issue);
  return t;
}

struct moderation_task {
  task_entity<moderation> type;
  v1::Task task;

  entity_context run(const v1::TaskEvent& e) {
    entity_context ctx{
      "task.moderation", "ki:42", task.group(), 0, 0, std::chrono::system_clock::time_point{}};
    type.handle(task, e, ctx);
    return ctx;
  }
  entity_context init(const v1::ModerationInput& in) {
    v1::TaskEvent e;
    e.mutable_init()->set_group("ki");
    e.mutable_init()->mutable_input()->PackFrom(in);
    e.mutable_init()->set_priority(3);
    return run(e);
  }
  template <class Payload>
  entity_context custom(const std::string& name, const Payload& p) {
    v1::TaskEvent e;
    e.mutable_custom()->set_name(name);
    e.mutable_custom()->mutable_payload()->PackFrom(p);
    return run(e);
  }
};

template <class T>
T result_of(const entity_context& ctx, size_t i, const std::string& name) {
  REQUIRE(ctx.outputs().size() > i);
  v1::TaskResult r;
  REQUIRE(ctx.outputs()[i].output.UnpackTo(&r));
  CHECK_EQ(r.name(), name);
  T out;
  REQUIRE(r.payload().UnpackTo(&out));
  return out;
}

v1::ModerationTimeout timer_of(const entity_context& ctx, std::chrono::milliseconds delay) {
  REQUIRE_EQ(ctx.sends().size(), 1u);
  CHECK_EQ(ctx.sends()[0].id, "ki:42");
  CHECK_EQ(ctx.sends()[0].delay, delay);
  v1::TaskEvent e;
  REQUIRE(ctx.sends()[0].event.UnpackTo(&e));
  CHECK_EQ(e.custom().name(), "timeout");
  v1::ModerationTimeout t;
  REQUIRE(e.custom().payload().UnpackTo(&t));
  return t;
}

} // namespace

TEST_CASE("moderation rules: start, timeouts, verdicts, cancel") {
  auto first = moderation_rules::start(input(), 5);
  CHECK_EQ(first.assignment.issue(), 1);
  CHECK_EQ(first.assignment.item_id(), "offer-42");
  CHECK_EQ(first.assignment.priority(), 5);
  CHECK_EQ(first.wait, 30'000ms);

  auto no_timeout = input();
  no_timeout.clear_verdict_timeout_ms();
  CHECK_EQ(moderation_rules::start(no_timeout, 0).wait, moderation_rules::default_timeout);
  CHECK_THROWS_WITH(moderation_rules::start(v1::ModerationInput{}, 0),
                    "a moderation task needs input.item_id");

  // A timer of the current assignment re-issues it, up to max_issues; then the task expires.
  auto again = moderation_rules::on_timeout(input(2), 5, 1, timeout(1));
  REQUIRE(std::holds_alternative<moderation_rules::issue>(again));
  CHECK_EQ(std::get<moderation_rules::issue>(again).assignment.issue(), 2);
  auto last = moderation_rules::on_timeout(input(2), 5, 2, timeout(2));
  REQUIRE(std::holds_alternative<moderation_rules::withdraw>(last));
  CHECK_EQ(std::get<moderation_rules::withdraw>(last).state, moderation_state::expired);
  CHECK_EQ(std::get<moderation_rules::withdraw>(last).withdrawal.reason(),
           "no verdict after 2 assignments");
  // A timer of an older assignment is stale.
  CHECK(std::holds_alternative<moderation_rules::ignore>(
    moderation_rules::on_timeout(input(2), 5, 2, timeout(1))));
  // max_issues 0: the default.
  auto def = moderation_rules::on_timeout(input(0), 5, moderation_rules::default_max_issues,
                                          timeout(moderation_rules::default_max_issues));
  CHECK(std::holds_alternative<moderation_rules::withdraw>(def));

  v1::ModerationVerdict yes;
  yes.set_approved(true);
  CHECK_EQ(moderation_rules::on_verdict(yes), moderation_state::approved);
  CHECK_EQ(moderation_rules::on_verdict(v1::ModerationVerdict{}), moderation_state::rejected);
  CHECK_EQ(moderation_rules::on_cancel(input(), "").withdrawal.reason(), "cancelled");
  CHECK_EQ(moderation_rules::on_cancel(input(), "duplicate").withdrawal.reason(), "duplicate");
}

TEST_CASE("moderation task: Init issues the assignment and sets its timer; a verdict completes "
          "it; a late timer changes nothing") {
  moderation_task m;
  auto c1 = m.init(input());
  auto a = result_of<v1::ModerationAssignment>(c1, 0, "assignment");
  CHECK_EQ(a.issue(), 1);
  CHECK_EQ(a.priority(), 3);
  CHECK_EQ(timer_of(c1, 30'000ms).issue(), 1);
  CHECK_EQ(m.task.state_name(), "waiting");
  CHECK_FALSE(m.task.closed());

  v1::ModerationVerdict v;
  v.set_approved(false);
  v.set_reason("prohibited item");
  v.set_moderator("op-7");
  auto c2 = m.custom("verdict", v);
  auto r = result_of<v1::ModerationVerdict>(c2, 0, "verdict");
  CHECK_EQ(r.item_id(), "offer-42");
  CHECK_EQ(r.reason(), "prohibited item");
  CHECK_EQ(m.task.state_name(), "rejected");
  CHECK_EQ(m.task.state(), static_cast<int32_t>(moderation_state::rejected));
  CHECK(m.task.closed());
  CHECK_EQ(m.task.results(), 2);

  auto c3 = m.custom("timeout", timeout(1));
  CHECK(c3.outputs().empty());
  CHECK(c3.sends().empty());
  CHECK_EQ(m.task.state_name(), "rejected");
}

TEST_CASE("moderation task: the verdict of a duplicate goes to the task it duplicates") {
  moderation_task m;
  auto in = input();
  in.set_duplicate_of("ki:41");
  m.init(in);
  v1::ModerationVerdict v;
  v.set_approved(true);
  auto c = m.custom("verdict", v);
  REQUIRE_EQ(c.sends().size(), 1u);
  CHECK_EQ(c.sends()[0].kind, "task.moderation");
  CHECK_EQ(c.sends()[0].id, "ki:41");
  CHECK_EQ(c.sends()[0].delay, 0ms);
  v1::TaskEvent e;
  REQUIRE(c.sends()[0].event.UnpackTo(&e));
  CHECK_EQ(e.custom().name(), "verdict");
  CHECK_EQ(e.custom().from(), "task.moderation/ki:42");
  v1::ModerationVerdict passed;
  REQUIRE(e.custom().payload().UnpackTo(&passed));
  CHECK(passed.approved());
}

TEST_CASE("moderation task: no verdict in time re-issues the assignment, then expires") {
  moderation_task m;
  m.init(input(2));
  auto c2 = m.custom("timeout", timeout(1));
  CHECK_EQ(result_of<v1::ModerationAssignment>(c2, 0, "assignment").issue(), 2);
  CHECK_EQ(timer_of(c2, 30'000ms).issue(), 2);
  CHECK_EQ(m.task.state_name(), "waiting");

  auto stale = m.custom("timeout", timeout(1));
  CHECK(stale.outputs().empty());

  auto c3 = m.custom("timeout", timeout(2));
  CHECK_EQ(result_of<v1::ModerationWithdrawal>(c3, 0, "withdrawn").reason(),
           "no verdict after 2 assignments");
  CHECK(c3.sends().empty());
  CHECK_EQ(m.task.state_name(), "expired");
  CHECK(m.task.closed());
}

TEST_CASE("moderation task: cancel withdraws the assignment; unknown events fail") {
  moderation_task m;
  m.init(input());
  CHECK_THROWS_WITH(m.custom("bogus", timeout(1)),
                    "a moderation task takes `verdict` and `timeout`, not `bogus`");
  CHECK_THROWS_WITH(m.custom("verdict", timeout(1)),
                    "the payload of `verdict` must be a ModerationVerdict");
  v1::TaskEvent cancel;
  cancel.mutable_cancel()->set_reason("seller deleted the offer");
  auto c = m.run(cancel);
  CHECK_EQ(result_of<v1::ModerationWithdrawal>(c, 0, "withdrawn").reason(),
           "seller deleted the offer");
  CHECK_EQ(m.task.state_name(), "cancelled");
  CHECK_EQ(m.task.state(), -1);
  CHECK(m.task.closed());
}
