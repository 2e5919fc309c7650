#include "gost/scheduled/worker_steps.hpp"

#include <chrono>

#include "gost/persistence/random_id.hpp"

namespace gost::scheduled {

using persistence::action_change;
using persistence::attempt_record;
using persistence::due_row;
using persistence::scheduled_lease;
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

caf::expected<persistence::move_counts> worker_steps::move_batch(size_t limit) {
  if (sync_.empty())
    new_sync();
  return persistence::move_incoming(pool_, lease_, sync_, limit);
}

caf::expected<std::vector<due_row>> worker_steps::due(size_t limit) {
  return persistence::due_rows(pool_, lease_.shard, clock_ms_(), limit);
}

namespace {

/// The attempt begin_attempt just started on `a` (a run-now is attempt 1 of its own occurrence,
/// the time it was asked).
attempt attempt_of(const v1::ScheduledAction& a, bool run_now, const rules_options& opts) {
  attempt at;
  at.action_id = a.meta().id();
  at.run_now = run_now;
  at.scheduled_at_ms = run_now ? a.status().run_now_at_ms() : a.status().scheduled_at_ms();
  at.number = run_now ? 1 : a.status().attempt();
  at.deadline_ms = effective_retry(a.spec(), opts).deadline_ms;
  at.idempotency_key = idempotency_key(at.action_id, at.scheduled_at_ms);
  at.spec = a.spec();
  return at;
}

/// Only the attempt this worker began: a recount by another worker (after a lost lease) or an
/// update started over already.
bool still_in_flight(const v1::ScheduledActionStatus& st, const attempt& at) {
  auto occurrence = at.run_now ? st.run_now_at_ms() : st.scheduled_at_ms();
  return st.in_flight() && (at.run_now || st.attempt() == at.number)
         && occurrence == at.scheduled_at_ms;
}

/// What begin_attempt's recount of an interrupted attempt leaves in the log (none: nothing
/// was interrupted).
std::vector<attempt_record> interrupted_records(const std::optional<interrupted_attempt>& i,
                                                int64_t now, const std::string& node,
                                                const scheduled_lease& lease) {
  std::vector<attempt_record> out;
  if (i) {
    out.push_back(interrupted_record(*i, now, node));
    out.back().shard = lease.shard;
    out.back().epoch = lease.epoch;
  }
  return out;
}

/// Records the outcome of `at` on `st` (finish_attempt) and returns its log entry.
attempt_record finish_logged(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
                             const rules_options& opts, const attempt& at, int64_t now,
                             const std::string& error, const std::string& node,
                             const scheduled_lease& lease, std::optional<int64_t>& due) {
  auto gave_up_before = st.gave_up();
  attempt_record rec;
  rec.at_ms = now;
  rec.occurrence_ms = at.scheduled_at_ms;
  rec.attempt = at.number;
  rec.error = error;
  rec.duration_ms = now - st.last_attempt_at_ms();
  rec.node = node;
  rec.shard = lease.shard;
  rec.epoch = lease.epoch;
  rec.run_now = at.run_now;
  due = finish_attempt(st, spec, opts, now, error.empty(), error);
  rec.outcome = error.empty() ? "ok" : st.gave_up() != gave_up_before ? "gave_up" : "failed";
  return rec;
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
        *act = attempt_of(a, b.run_now, opts_);
      return action_change{true, b.due_ms, interrupted_records(b.interrupted, now, node_, lease_)};
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
      std::optional<int64_t> due;
      auto rec = finish_logged(st, a.spec(), opts_, at, now, error, node_, lease_, due);
      return action_change{true, due, {std::move(rec)}};
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
        (*acts)[i] = attempt_of(a, b.run_now, opts_);
      return action_change{true, b.due_ms, interrupted_records(b.interrupted, now, node_, lease_)};
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
      std::optional<int64_t> due;
      auto rec =
        finish_logged(st, a.spec(), opts_, attempts[i], now, errors[i], node_, lease_, due);
      return action_change{true, due, {std::move(rec)}};
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
