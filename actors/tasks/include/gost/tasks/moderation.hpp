#pragma once
// The worked example of a task type (seed 002, docs/tasks.md): moderation of one item by
// operators outside gost. Init hands an assignment to the operators as a result; their
// `verdict` event completes the task with a result; a timer issues the assignment again when no
// verdict came in time (up to max_issues, then the task expires); cancel withdraws it.
//
// A task created as `duplicate_of` another moderation task passes its verdict on to it (an event
// to another task by id).
//
// The rules are `moderation_rules` (a plain class: what to do next, given the task's data);
// `moderation` maps them onto the task's steps. Registered with one line:
//
//   builder.add_task_type<gost::tasks::moderation>();

#include <chrono>
#include <cstdint>
#include <string>
#include <variant>

#include "gost/tasks/task_type.hpp"
#include "gost/v1/tasks.pb.h"

namespace gost::tasks {

/// The states of a moderation task (cancelled is every task's -1).
enum class moderation_state : int32_t { waiting = 1, approved = 2, rejected = 3, expired = 4 };

const char* to_string(moderation_state s);

class moderation_rules {
public:
  static constexpr std::chrono::milliseconds default_timeout{60'000};
  static constexpr int32_t default_max_issues = 3;

  /// Issue an assignment and wait for a verdict until the timer.
  struct issue {
    v1::ModerationAssignment assignment;
    std::chrono::milliseconds wait;
  };
  /// Give up: withdraw the assignment, close in `state`.
  struct withdraw {
    v1::ModerationWithdrawal withdrawal;
    moderation_state state = moderation_state::expired;
  };
  /// Nothing to do (a timer of an assignment already superseded).
  struct ignore {};

  /// The first assignment; throws std::invalid_argument when the input lacks an item id.
  static issue start(const v1::ModerationInput& in, int64_t priority);
  /// The timer of assignment `timeout.issue()` went off with no verdict, `current` being the
  /// latest assignment issued.
  static std::variant<issue, withdraw, ignore> on_timeout(const v1::ModerationInput& in,
                                                          int64_t priority, int32_t current,
                                                          const v1::ModerationTimeout& timeout);
  /// The state a verdict closes the task in.
  static moderation_state on_verdict(const v1::ModerationVerdict& v);
  /// What a cancel withdraws (the task then closes as every cancelled task does).
  static withdraw on_cancel(const v1::ModerationInput& in, const std::string& reason);
};

class moderation final : public task_type {
public:
  std::string name() const override { return "moderation"; }
  const google::protobuf::Descriptor* input_descriptor() const override {
    return v1::ModerationInput::descriptor();
  }
  void init(v1::Task& t, task_context& ctx) const override;
  void on_event(v1::Task& t, const v1::TaskEvent::Custom& e, task_context& ctx) const override;
  void cancel(v1::Task& t, const std::string& reason, task_context& ctx) const override;
};

} // namespace gost::tasks
