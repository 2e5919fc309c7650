#pragma once
// Task types (seed 002, docs/tasks.md): what a developer writes to add a kind of task. A task
// type is a class with its steps in code; `task_entity<T>` makes it an entity type of the kit,
// registered with one line:
//
//   builder.add_task_type<gost::tasks::moderation>();
//
// The kit does the rest: one actor per live task, one event at a time by due time, the state,
// the sent events and the results committed together under the shard's lease, a throwing step
// retried after the group's retry delay and dead-lettered after its attempts.
//
// What `task_entity` does around the type's steps (handle_task):
// - Init (creating the task) records the group, input, priority and the group's settings and
//   moves the task into its group's lane, then calls `init`;
// - a Custom event (from the task itself, another task or outside) calls `on_event`;
// - Cancel and Reprioritize come from outside and call `cancel` / `reprioritize`;
// - a closed task drops every later event; an event before Init fails (it is retried: the Init
//   may still be on its way) and is dead-lettered after the attempts;
// - the task's state name becomes its tag, to list the tasks of a group by state.

#include <chrono>
#include <memory>
#include <string>

#include <google/protobuf/any.pb.h>
#include <google/protobuf/message.h>

#include "gost/entities/entity_type.hpp"
#include "gost/tasks/protocol.hpp"

namespace gost::tasks {

/// What a step may do besides changing its task: all of it is committed with the new state.
class task_context {
public:
  task_context(entity_context& ctx, v1::Task& task) : ctx_(ctx), task_(task) {}

  const std::string& id() const noexcept { return ctx_.id(); }
  /// Failed attempts of this event before (a retry sees the same event again).
  int attempt() const noexcept { return ctx_.attempt(); }
  std::chrono::system_clock::time_point now() const noexcept { return ctx_.now(); }

  /// An event `name` to this task, after `delay`: a next step (0) or a timer.
  void send_self(const std::string& name, const google::protobuf::Message& payload,
                 std::chrono::milliseconds delay = {});
  /// An event `name` to task `task_id` of type `task_type`, after `delay`.
  void send(const std::string& task_type, const std::string& task_id, const std::string& name,
            const google::protobuf::Message& payload, std::chrono::milliseconds delay = {});
  /// A result for the group's consumer (TaskService.PullResults), named `name`.
  void result(const std::string& name, const google::protobuf::Message& payload);
  /// Sets the task's state (enum value and name); `close` finishes it.
  void set_state(int32_t state, const std::string& name, bool close = false);

private:
  entity_context& ctx_;
  v1::Task& task_;
};

/// A kind of task: its steps. `Input` is the protobuf message tasks are created with.
class task_type {
public:
  virtual ~task_type() = default;
  /// A stable name (stored in task kinds: never rename one in use).
  virtual std::string name() const = 0;
  /// The message type a task's input must be.
  virtual const google::protobuf::Descriptor* input_descriptor() const = 0;
  /// The first step: the task is new, its input is in `t.input()`.
  virtual void init(v1::Task& t, task_context& ctx) const = 0;
  /// An event of the type's own.
  virtual void on_event(v1::Task& t, const v1::TaskEvent::Custom& e, task_context& ctx) const = 0;
  /// Cancel from outside; by default the task closes in state -1 "cancelled".
  virtual void cancel(v1::Task& t, const std::string& reason, task_context& ctx) const;
  /// A new priority from outside; by default recorded in the task.
  virtual void reprioritize(v1::Task& t, int64_t priority, task_context& ctx) const;
  /// Parallelism and rate of a group's lane; attempts and retry delay are the group's. By
  /// default a group runs at most 8 tasks at once per shard: the lanes share the node's entity
  /// store and writer, which serve in arrival order, so a busy group keeping fewer runs in
  /// flight leaves another group's next event fewer to wait behind (docs/tasks.md, T4).
  virtual entity_options options() const {
    entity_options o;
    o.max_parallelism = 8;
    return o;
  }
};

/// Applies one event to a task (what task_entity<T>::handle does, for any type).
void handle_task(const task_type& type, v1::Task& t, const v1::TaskEvent& e, entity_context& ctx);

/// Whether `a` holds a message of `type`.
bool is_a(const google::protobuf::Any& a, const google::protobuf::Descriptor* type);

/// The lane a task's first event puts it in: its group, for an Init.
std::string initial_task_lane(const google::protobuf::Any& event);

/// Every task type as an entity type of the kit (TaskService finds a type's input type here).
class task_entity_base : public entity_type<v1::Task, v1::TaskEvent> {
public:
  virtual const task_type& type() const noexcept = 0;

  std::string kind() const override { return task_kind(type().name()); }
  entity_options options() const override { return type().options(); }
  std::string initial_lane(const google::protobuf::Any& event) const override {
    return initial_task_lane(event);
  }
  void handle(v1::Task& t, const v1::TaskEvent& e, entity_context& ctx) const override {
    handle_task(type(), t, e, ctx);
  }
};

/// The task type `T` as an entity type (node_builder::add_task_type<T>() registers it).
template <class T>
class task_entity final : public task_entity_base {
public:
  template <class... Args>
  explicit task_entity(Args&&... args) : type_(std::forward<Args>(args)...) {}

  const task_type& type() const noexcept override { return type_; }

private:
  T type_;
};

} // namespace gost::tasks
