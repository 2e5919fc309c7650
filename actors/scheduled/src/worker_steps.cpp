#include "gost/scheduled/worker_steps.hpp"

#include "gost/persistence/random_id.hpp"

namespace gost::scheduled {

using persistence::action_change;
using persistence::attempt_record;
using persistence::due_row;
using persistence::step_outcome;

attempt_record interrupted_record(const interrupted_attempt& i, int64_t now_ms,
                                  const std::string& node) {
  attempt_record r;
  r.at_ms = now_ms;
  r.occurrence_ms = i.occurrence_ms;
  r.attempt = i.attempt;
  r.outcome = "interrupted";
  r.error = "attempt interrupted (the worker stopped before recording its outcome)";
  r.node = node;
  r.run_now = i.run_now;
  return r;
}

const std::string& worker_steps::new_sync() {
  sync_ = persistence::random_id();
  return sync_;
}

caf::expected<step_outcome> worker_steps::move_one() {
  if (sync_.empty())
    new_sync();
  return persistence::move_one_incoming(pool_, lease_, sync_);
}

caf::expected<std::vector<due_row>> worker_steps::due(size_t limit) {
  return persistence::due_rows(pool_, lease_.shard, clock_ms_(), limit);
}

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
      action_change change{true, b.due_ms, {}};
      if (b.interrupted) {
        change.records.push_back(interrupted_record(*b.interrupted, now, node_));
        change.records.back().shard = lease_.shard;
        change.records.back().epoch = lease_.epoch;
      }
      if (b.act) {
        attempt at;
        at.action_id = a.meta().id();
        at.run_now = b.run_now;
        at.scheduled_at_ms = b.run_now ? a.status().run_now_at_ms() : a.status().scheduled_at_ms();
        at.number = b.run_now ? 1 : a.status().attempt();
        at.deadline_ms = effective_retry(a.spec(), opts_).deadline_ms;
        at.idempotency_key = idempotency_key(at.action_id, at.scheduled_at_ms);
        at.spec = a.spec();
        *act = std::move(at);
      }
      return change;
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
      // Only the attempt this worker began: a recount by another worker (after a lost
      // lease) or an update started over already.
      auto occurrence = at.run_now ? st.run_now_at_ms() : st.scheduled_at_ms();
      if (!st.in_flight() || (!at.run_now && st.attempt() != at.number)
          || occurrence != at.scheduled_at_ms)
        return action_change{};
      auto gave_up_before = st.gave_up();
      attempt_record rec;
      rec.at_ms = now;
      rec.occurrence_ms = at.scheduled_at_ms;
      rec.attempt = at.number;
      rec.error = error;
      rec.duration_ms = now - st.last_attempt_at_ms();
      rec.node = node_;
      rec.shard = lease_.shard;
      rec.epoch = lease_.epoch;
      rec.run_now = at.run_now;
      auto due = finish_attempt(st, a.spec(), opts_, now, error.empty(), error);
      rec.outcome = error.empty() ? "ok" : st.gave_up() != gave_up_before ? "gave_up" : "failed";
      return action_change{true, due, {std::move(rec)}};
    },
    nullptr);
}

caf::expected<int64_t> worker_steps::sweep() {
  return persistence::sweep_parked(pool_, lease_);
}

caf::expected<iteration_stats> worker_steps::iterate(const fire_fn& fire, size_t max_moves,
                                                     size_t max_fires) {
  iteration_stats s;
  new_sync();
  for (size_t i = 0; i < max_moves; ++i) {
    auto m = move_one();
    if (!m)
      return m.error();
    if (*m == step_outcome::fenced) {
      s.fenced = true;
      return s;
    }
    if (*m == step_outcome::none)
      break;
    (*m == step_outcome::moved ? s.moved : s.dropped) += 1;
  }
  auto rows = due(max_fires);
  if (!rows)
    return rows.error();
  for (auto& row : *rows) {
    std::optional<attempt> act;
    bool recounted = false;
    auto b = begin(row, &act, &recounted);
    if (!b)
      return b.error();
    s.recounted += recounted ? 1 : 0;
    if (*b == step_outcome::fenced) {
      s.fenced = true;
      return s;
    }
    if (*b == step_outcome::dropped)
      ++s.dropped;
    if (!act)
      continue;
    std::string error;
    try {
      error = fire(*act);
    } catch (const std::exception& e) {
      error = std::string{"the action threw: "} + e.what();
    }
    ++(error.empty() ? s.fired : s.failed);
    auto f = finish(row, *act, error);
    if (!f)
      return f.error();
    if (*f == step_outcome::fenced) {
      s.fenced = true;
      return s;
    }
  }
  return s;
}

} // namespace gost::scheduled
