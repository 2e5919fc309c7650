#include "gost/scheduled/worker_steps.hpp"

#include <chrono>

#include "gost/persistence/random_id.hpp"

namespace gost::scheduled {

using persistence::action_change;
using persistence::due_row;
using persistence::step_outcome;

const std::string& worker_steps::new_sync() {
  sync_ = persistence::random_id();
  return sync_;
}

caf::expected<step_outcome> worker_steps::move_one() {
  if (sync_.empty())
    new_sync();
  return persistence::move_one_incoming(pool_, lease_, sync_);
}

caf::expected<persistence::move_counts> worker_steps::move_batch(size_t limit) {
  if (sync_.empty())
    new_sync();
  return persistence::move_incoming(pool_, lease_, sync_, limit);
}

caf::expected<std::vector<due_row>> worker_steps::due(size_t limit) {
  return persistence::due_rows(pool_, lease_.shard, clock_ms_(), limit);
}

namespace {

attempt attempt_of(const v1::ScheduledAction& a, const rules_options& opts) {
  attempt at;
  at.action_id = a.meta().id();
  at.scheduled_at_ms = a.status().scheduled_at_ms();
  at.number = a.status().attempt();
  at.deadline_ms = effective_retry(a.spec(), opts).deadline_ms;
  at.idempotency_key = idempotency_key(at.action_id, at.scheduled_at_ms);
  at.spec = a.spec();
  return at;
}

/// Only the attempt this worker began: a recount by another worker (after a lost lease) or an
/// update started over already.
bool still_in_flight(const v1::ScheduledActionStatus& st, const attempt& at) {
  return st.in_flight() && st.attempt() == at.number && st.scheduled_at_ms() == at.scheduled_at_ms;
}

} // namespace

caf::expected<step_outcome> worker_steps::begin(const due_row& row, std::optional<attempt>* act,
                                                bool* recounted) {
  if (sync_.empty())
    new_sync();
  act->reset();
  auto now = clock_ms_();
  return persistence::update_due_action(
    pool_, lease_, row, sync_,
    [&](v1::ScheduledAction& a) {
      auto b = begin_attempt(*a.mutable_status(), a.spec(), opts_, now);
      if (recounted != nullptr)
        *recounted = b.recounted;
      if (b.act)
        *act = attempt_of(a, opts_);
      return action_change{true, b.due_ms};
    },
    nullptr);
}

caf::expected<step_outcome> worker_steps::finish(const due_row& row, const attempt& at,
                                                 const std::string& error) {
  auto now = clock_ms_();
  return persistence::update_due_action(
    pool_, lease_, row, sync_,
    [&](v1::ScheduledAction& a) {
      auto& st = *a.mutable_status();
      if (!still_in_flight(st, at))
        return action_change{};
      auto due = finish_attempt(st, a.spec(), opts_, now, error.empty(), error);
      return action_change{true, due};
    },
    nullptr);
}

caf::expected<std::vector<step_outcome>>
worker_steps::begin_batch(const std::vector<due_row>& rows,
                          std::vector<std::optional<attempt>>* acts, int64_t* recounted) {
  if (sync_.empty())
    new_sync();
  acts->assign(rows.size(), std::nullopt);
  auto now = clock_ms_();
  return persistence::update_due_actions(
    pool_, lease_, rows, sync_, [&](size_t i, v1::ScheduledAction& a) {
      auto b = begin_attempt(*a.mutable_status(), a.spec(), opts_, now);
      *recounted += b.recounted ? 1 : 0;
      if (b.act)
        (*acts)[i] = attempt_of(a, opts_);
      return action_change{true, b.due_ms};
    });
}

caf::expected<std::vector<step_outcome>>
worker_steps::finish_batch(const std::vector<due_row>& rows, const std::vector<attempt>& attempts,
                           const std::vector<std::string>& errors) {
  auto now = clock_ms_();
  return persistence::update_due_actions(
    pool_, lease_, rows, sync_, [&](size_t i, v1::ScheduledAction& a) {
      auto& st = *a.mutable_status();
      if (!still_in_flight(st, attempts[i]))
        return action_change{};
      auto due = finish_attempt(st, a.spec(), opts_, now, errors[i].empty(), errors[i]);
      return action_change{true, due};
    });
}

caf::expected<int64_t> worker_steps::sweep() {
  return persistence::sweep_parked(pool_, lease_);
}

caf::expected<iteration_stats> worker_steps::iterate(const fire_fn& fire, size_t max_moves,
                                                     size_t max_fires) {
  iteration_stats s;
  new_sync();
  auto fenced = [](const std::vector<step_outcome>& out) {
    return out.size() == 1 && out[0] == step_outcome::fenced;
  };
  if (max_moves > 0) { // 0: the caller knows no incoming row waits
    auto m = move_batch(max_moves);
    if (!m)
      return m.error();
    if (m->fenced) {
      s.fenced = true;
      return s;
    }
    s.moved = m->moved;
    s.dropped = m->dropped;
  }
  auto rows = due(max_fires);
  if (!rows)
    return rows.error();
  std::vector<std::optional<attempt>> acts;
  auto b = begin_batch(*rows, &acts, &s.recounted);
  if (!b)
    return b.error();
  if (fenced(*b)) {
    s.fenced = true;
    return s;
  }
  // Fired one after the other; their outcomes recorded together, at the end or after each
  // second of firing (slow actions: a crash then recounts less).
  std::vector<due_row> done_rows;
  std::vector<attempt> done;
  std::vector<std::string> errors;
  auto flushed_at = std::chrono::steady_clock::now();
  auto flush = [&]() -> caf::error {
    auto f = finish_batch(done_rows, done, errors);
    if (!f)
      return f.error();
    s.fenced = fenced(*f);
    done_rows.clear();
    done.clear();
    errors.clear();
    flushed_at = std::chrono::steady_clock::now();
    return {};
  };
  for (size_t i = 0; i < rows->size(); ++i) {
    if ((*b)[i] == step_outcome::dropped)
      ++s.dropped;
    if (!acts[i])
      continue;
    std::string error;
    try {
      error = fire(*acts[i]);
    } catch (const std::exception& e) {
      error = std::string{"the action threw: "} + e.what();
    }
    ++(error.empty() ? s.fired : s.failed);
    done_rows.push_back((*rows)[i]);
    done.push_back(std::move(*acts[i]));
    errors.push_back(std::move(error));
    if (std::chrono::steady_clock::now() - flushed_at >= std::chrono::seconds{1}) {
      if (auto err = flush())
        return err;
      if (s.fenced)
        return s;
    }
  }
  if (auto err = flush())
    return err;
  return s;
}

} // namespace gost::scheduled
