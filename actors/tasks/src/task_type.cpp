#include "gost/tasks/task_type.hpp"

#include <stdexcept>

namespace gost::tasks {

namespace {

v1::TaskEvent custom(const std::string& name, const google::protobuf::Message& payload,
                     const std::string& from) {
  v1::TaskEvent e;
  auto* c = e.mutable_custom();
  c->set_name(name);
  c->mutable_payload()->PackFrom(payload);
  c->set_from(from);
  return e;
}

} // namespace

bool is_a(const google::protobuf::Any& a, const google::protobuf::Descriptor* type) {
  auto& url = a.type_url();
  auto& want = type->full_name();
  return url.size() > want.size() && url[url.size() - want.size() - 1] == '/'
         && url.compare(url.size() - want.size(), want.size(), want) == 0;
}

void task_context::send_self(const std::string& name, const google::protobuf::Message& payload,
                             std::chrono::milliseconds delay) {
  ctx_.send_self(custom(name, payload, ctx_.kind() + "/" + ctx_.id()), delay);
}

void task_context::send(const std::string& task_type, const std::string& task_id,
                        const std::string& name, const google::protobuf::Message& payload,
                        std::chrono::milliseconds delay) {
  ctx_.send(task_id, custom(name, payload, ctx_.kind() + "/" + ctx_.id()), delay,
            task_kind(task_type));
}

void task_context::result(const std::string& name, const google::protobuf::Message& payload) {
  v1::TaskResult r;
  r.set_task_id(ctx_.id());
  if (auto type = task_type_of_kind(ctx_.kind()))
    r.set_task_type(*type);
  r.set_name(name);
  r.mutable_payload()->PackFrom(payload);
  ctx_.emit(r, task_.group());
  task_.set_results(task_.results() + 1);
}

void task_context::set_state(int32_t state, const std::string& name, bool close) {
  task_.set_state(state);
  task_.set_state_name(name);
  if (close)
    task_.set_closed(true);
}

void task_type::cancel(v1::Task&, const std::string&, task_context& ctx) const {
  ctx.set_state(-1, "cancelled", true);
}

void task_type::reprioritize(v1::Task& t, int64_t priority, task_context&) const {
  t.set_priority(priority);
}

std::string initial_task_lane(const google::protobuf::Any& event) {
  v1::TaskEvent e;
  if (event.UnpackTo(&e) && e.has_init())
    return e.init().group();
  return {};
}

void handle_task(const task_type& type, v1::Task& t, const v1::TaskEvent& e, entity_context& ctx) {
  bool initialised = !t.group().empty();
  // The group's retry settings, before anything may throw: taken at Init, kept in the state
  // (none: the type's options()).
  auto retry = [&](int64_t delay_ms, int32_t attempts) {
    if (attempts > 0)
      ctx.set_retry(std::chrono::milliseconds{delay_ms}, attempts);
  };
  if (initialised)
    retry(t.retry_delay_ms(), t.max_attempts());
  else if (e.has_init())
    retry(e.init().retry_delay_ms(), e.init().max_attempts());
  task_context tc{ctx, t};
  if (e.has_init()) {
    if (initialised)
      return; // created twice under one id: the first Init made the task
    auto& in = e.init();
    if (!is_a(in.input(), type.input_descriptor()))
      throw std::invalid_argument("the input of a " + type.name() + " task must be a "
                                  + type.input_descriptor()->full_name());
    t.set_group(in.group());
    *t.mutable_input() = in.input();
    t.set_priority(in.priority());
    t.set_retry_delay_ms(in.retry_delay_ms());
    t.set_max_attempts(in.max_attempts());
    ctx.set_lane(in.group());
    type.init(t, tc);
  } else if (!initialised) {
    throw std::logic_error("task " + ctx.id() + " has had no Init yet");
  } else if (t.closed()) {
    return; // finished: late timers, verdicts and cancels change nothing
  } else if (e.has_custom()) {
    type.on_event(t, e.custom(), tc);
  } else if (e.has_cancel()) {
    type.cancel(t, e.cancel().reason(), tc);
  } else if (e.has_reprioritize()) {
    type.reprioritize(t, e.reprioritize().priority(), tc);
  } else {
    throw std::invalid_argument("a TaskEvent without a kind");
  }
  ctx.set_tag(t.state_name());
}

} // namespace gost::tasks
