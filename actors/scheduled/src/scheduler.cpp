#include "gost/scheduled/scheduler.hpp"

#include <set>
#include <unordered_set>

#include "gost/scheduled/worker_steps.hpp"

#include "gost/core/errc.hpp"
#include "gost/persistence/random_id.hpp"
#include "gost/persistence/scheduled/actions.hpp"

namespace gost::scheduled {

scheduler::scheduler(persistence::pg_pool& pool, uint32_t shard_count, rules_options opts,
                     std::function<int64_t()> clock_ms, std::string node)
  : pool_(pool), shard_count_(shard_count == 0 ? 1 : shard_count), opts_(opts),
    clock_ms_(std::move(clock_ms)), node_(std::move(node)), rng_(std::random_device{}()) {}

uint32_t scheduler::random_shard() {
  std::lock_guard<std::mutex> guard{mtx_};
  return static_cast<uint32_t>(rng_() % shard_count_);
}

caf::expected<v1::ScheduledAction> scheduler::create(const std::string& id,
                                                     const v1::ScheduledActionSpec& spec) {
  auto now = clock_ms_();
  if (auto e = check_id(id))
    return make_error(errc::invalid_argument, e->text());
  if (auto e = check_spec(spec, opts_, now))
    return make_error(errc::invalid_argument, e->text());
  v1::ScheduledAction a;
  a.mutable_meta()->set_id(id);
  a.mutable_meta()->set_guid(persistence::random_id());
  a.mutable_meta()->set_created_at_ms(now);
  a.mutable_meta()->set_updated_at_ms(now);
  *a.mutable_spec() = spec;
  *a.mutable_status() = start_status(spec, now, nullptr);
  auto shard = random_shard();
  if (auto err = persistence::create_scheduled_action(pool_, a, shard))
    return err; // already_exists: status.cpp maps it
  told(shard);
  return a;
}

caf::expected<size_t> scheduler::create_many(
  const std::vector<std::pair<std::string, v1::ScheduledActionSpec>>& actions) {
  auto now = clock_ms_();
  std::vector<std::pair<v1::ScheduledAction, uint32_t>> rows;
  rows.reserve(actions.size());
  std::unordered_set<std::string> ids;
  for (size_t i = 0; i < actions.size(); ++i) {
    auto& [id, spec] = actions[i];
    auto where = "actions[" + std::to_string(i) + "].";
    if (auto e = check_id(id))
      return make_error(errc::invalid_argument, where + e->text());
    if (!ids.insert(id).second)
      return make_error(errc::invalid_argument, where + "id: '" + id + "' twice in the batch");
    if (auto e = check_spec(spec, opts_, now))
      return make_error(errc::invalid_argument, where + e->text());
    v1::ScheduledAction a;
    a.mutable_meta()->set_id(id);
    a.mutable_meta()->set_guid(persistence::random_id());
    a.mutable_meta()->set_created_at_ms(now);
    a.mutable_meta()->set_updated_at_ms(now);
    *a.mutable_spec() = spec;
    *a.mutable_status() = start_status(spec, now, nullptr);
    rows.emplace_back(std::move(a), random_shard());
  }
  if (auto err = persistence::create_scheduled_actions(pool_, rows))
    return err;
  std::set<uint32_t> shards;
  for (auto& r : rows)
    shards.insert(r.second);
  for (auto shard : shards)
    told(shard);
  return rows.size();
}

caf::expected<v1::ScheduledAction> scheduler::update(const std::string& id,
                                                     const v1::ScheduledActionSpec& spec) {
  auto now = clock_ms_();
  if (auto e = check_id(id))
    return make_error(errc::invalid_argument, e->text());
  if (auto e = check_spec(spec, opts_, now))
    return make_error(errc::invalid_argument, e->text());
  auto shard = random_shard();
  auto r = persistence::change_scheduled_action(
    pool_, id,
    [&](v1::ScheduledAction& a) {
      a.mutable_meta()->set_guid(persistence::random_id());
      a.mutable_meta()->set_updated_at_ms(now);
      *a.mutable_spec() = spec;
      *a.mutable_status() = start_status(spec, now, &a.status());
      return caf::error{};
    },
    shard);
  if (r)
    told(shard);
  return r; // not_found: status.cpp maps it
}

caf::expected<bool> scheduler::remove(const std::string& id) {
  if (auto e = check_id(id))
    return make_error(errc::invalid_argument, e->text());
  return persistence::delete_scheduled_action(pool_, id);
}

caf::expected<scheduler::verb_result> scheduler::apply(verb v, const std::string& id,
                                                       const std::string& who) {
  if (auto e = check_id(id))
    return make_error(errc::invalid_argument, e->text());
  auto now = clock_ms_();
  auto shard = random_shard();
  std::vector<persistence::attempt_record> records;
  bool changed = false;
  auto r = persistence::change_scheduled_action(
    pool_, id,
    [&](v1::ScheduledAction& a) {
      auto& st = *a.mutable_status();
      std::optional<interrupted_attempt> recounted;
      std::string refusal;
      switch (v) {
        case verb::pause: changed = pause(st, a.spec(), opts_, now, who, &recounted); break;
        case verb::resume: changed = resume(st, a.spec(), opts_, now, &recounted); break;
        case verb::run_now:
          changed = run_now(st, a.spec(), opts_, now, &recounted, &refusal);
          break;
      }
      if (!refusal.empty())
        return make_error(errc::failed_precondition,
                          "id: scheduled action '" + id + "' " + refusal);
      if (!changed)
        return caf::error{}; // the guid kept: nothing written
      if (recounted)
        records.push_back(interrupted_record(*recounted, now, node_));
      a.mutable_meta()->set_guid(persistence::random_id());
      a.mutable_meta()->set_updated_at_ms(now);
      return caf::error{};
    },
    shard, &records);
  if (!r)
    return std::move(r.error());
  if (changed)
    told(shard);
  return verb_result{std::move(*r), changed};
}

} // namespace gost::scheduled
