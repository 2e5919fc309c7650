#include "gost/tasks/moderation.hpp"

#include <stdexcept>

namespace gost::tasks {

const char* to_string(moderation_state s) {
  switch (s) {
    case moderation_state::waiting: return "waiting";
    case moderation_state::approved: return "approved";
    case moderation_state::rejected: return "rejected";
    case moderation_state::expired: return "expired";
  }
  return "?";
}

namespace {

moderation_rules::issue issue_of(const v1::ModerationInput& in, int64_t priority, int32_t n) {
  moderation_rules::issue out;
  out.assignment.set_item_id(in.item_id());
  out.assignment.set_content(in.content());
  out.assignment.set_issue(n);
  out.assignment.set_priority(priority);
  out.wait = in.verdict_timeout_ms() > 0 ? std::chrono::milliseconds{in.verdict_timeout_ms()}
                                         : moderation_rules::default_timeout;
  return out;
}

v1::ModerationInput input_of(const v1::Task& t) {
  v1::ModerationInput in;
  if (!t.input().UnpackTo(&in))
    throw std::invalid_argument("the input of a moderation task must be a ModerationInput");
  return in;
}

int32_t issue_of_data(const v1::Task& t) {
  v1::ModerationData d;
  if (t.has_data() && !t.data().UnpackTo(&d))
    throw std::invalid_argument("the data of a moderation task must be a ModerationData");
  return d.issue();
}

void set_issue(v1::Task& t, int32_t n) {
  v1::ModerationData d;
  d.set_issue(n);
  t.mutable_data()->PackFrom(d);
}

void wait_for_verdict(v1::Task& t, task_context& ctx, const moderation_rules::issue& is) {
  set_issue(t, is.assignment.issue());
  ctx.result("assignment", is.assignment);
  v1::ModerationTimeout timer;
  timer.set_issue(is.assignment.issue());
  ctx.send_self("timeout", timer, is.wait);
  ctx.set_state(static_cast<int32_t>(moderation_state::waiting),
                to_string(moderation_state::waiting));
}

} // namespace

moderation_rules::issue moderation_rules::start(const v1::ModerationInput& in, int64_t priority) {
  if (in.item_id().empty())
    throw std::invalid_argument("a moderation task needs input.item_id");
  return issue_of(in, priority, 1);
}

std::variant<moderation_rules::issue, moderation_rules::withdraw, moderation_rules::ignore>
moderation_rules::on_timeout(const v1::ModerationInput& in, int64_t priority, int32_t current,
                             const v1::ModerationTimeout& timeout) {
  if (timeout.issue() != current)
    return ignore{};
  auto max = in.max_issues() > 0 ? in.max_issues() : default_max_issues;
  if (current >= max) {
    withdraw w;
    w.withdrawal.set_item_id(in.item_id());
    w.withdrawal.set_reason("no verdict after " + std::to_string(current) + " assignments");
    w.state = moderation_state::expired;
    return w;
  }
  return issue_of(in, priority, current + 1);
}

moderation_state moderation_rules::on_verdict(const v1::ModerationVerdict& v) {
  return v.approved() ? moderation_state::approved : moderation_state::rejected;
}

moderation_rules::withdraw moderation_rules::on_cancel(const v1::ModerationInput& in,
                                                       const std::string& reason) {
  withdraw w;
  w.withdrawal.set_item_id(in.item_id());
  w.withdrawal.set_reason(reason.empty() ? "cancelled" : reason);
  return w;
}

void moderation::init(v1::Task& t, task_context& ctx) const {
  wait_for_verdict(t, ctx, moderation_rules::start(input_of(t), t.priority()));
}

void moderation::on_event(v1::Task& t, const v1::TaskEvent::Custom& e, task_context& ctx) const {
  if (e.name() == "verdict") {
    v1::ModerationVerdict v;
    if (!e.payload().UnpackTo(&v))
      throw std::invalid_argument("the payload of `verdict` must be a ModerationVerdict");
    auto in = input_of(t);
    v.set_item_id(in.item_id());
    auto state = moderation_rules::on_verdict(v);
    ctx.result("verdict", v);
    ctx.set_state(static_cast<int32_t>(state), to_string(state), true);
    // A duplicate (seed 002: tasks that know each other's ids talk by events): the task of the
    // same item gets the verdict as its own, committed with this one.
    if (!in.duplicate_of().empty())
      ctx.send(name(), in.duplicate_of(), "verdict", v);
    return;
  }
  if (e.name() == "timeout") {
    v1::ModerationTimeout timeout;
    if (!e.payload().UnpackTo(&timeout))
      throw std::invalid_argument("the payload of `timeout` must be a ModerationTimeout");
    auto next = moderation_rules::on_timeout(input_of(t), t.priority(), issue_of_data(t), timeout);
    if (auto* is = std::get_if<moderation_rules::issue>(&next))
      wait_for_verdict(t, ctx, *is);
    else if (auto* w = std::get_if<moderation_rules::withdraw>(&next)) {
      ctx.result("withdrawn", w->withdrawal);
      ctx.set_state(static_cast<int32_t>(w->state), to_string(w->state), true);
    }
    return;
  }
  throw std::invalid_argument("a moderation task takes `verdict` and `timeout`, not `" + e.name()
                              + "`");
}

void moderation::cancel(v1::Task& t, const std::string& reason, task_context& ctx) const {
  ctx.result("withdrawn", moderation_rules::on_cancel(input_of(t), reason).withdrawal);
  task_type::cancel(t, reason, ctx); // the task's own "cancelled"
}

} // namespace gost::tasks
