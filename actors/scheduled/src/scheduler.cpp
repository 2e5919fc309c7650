#include "gost/scheduled/scheduler.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

#include "gost/scheduled/worker_steps.hpp"

#include "gost/core/errc.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/random_id.hpp"

namespace gost::scheduled {

scheduler::scheduler(persistence::pg_pool& pool, uint32_t shard_count, rules_options opts,
                     std::function<int64_t()> clock_ms, std::string node)
  : scheduler(persistence::one_database(pool, shard_count), opts, std::move(clock_ms),
              std::move(node)) {}

scheduler::scheduler(std::shared_ptr<const persistence::shard_placement> where, rules_options opts,
                     std::function<int64_t()> clock_ms, std::string node)
  : where_(std::move(where)), shard_count_(where_->shard_count()),
    one_group_(where_->groups().size() == 1), opts_(opts), clock_ms_(std::move(clock_ms)),
    node_(std::move(node)), rng_(std::random_device{}()) {}

uint32_t scheduler::incoming_shard(const std::string& id) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (one_group_)
    return static_cast<uint32_t>(rng_() % shard_count_);
  auto home = gost::shard_of(id, shard_count_);
  auto group = where_->group_of(home);
  // A group holds about shards/groups of the shards: a few draws on average. Bounded, so a
  // map being changed under the draws cannot keep it here: the home shard itself is in the
  // group too.
  for (uint32_t draw = 0; draw < 64 * 4; ++draw) {
    auto s = static_cast<uint32_t>(rng_() % shard_count_);
    if (where_->group_of(s) == group)
      return s;
  }
  return home;
}

persistence::pg_pool& scheduler::database_of(const std::string& id) const {
  return home_database(*where_, id);
}

caf::expected<std::vector<v1::ScheduledAction>>
scheduler::list(const std::string& after_id, size_t limit,
                const persistence::scheduled_filter& f) const {
  // Every group's page, merged by id (byte order).
  return persistence::merged_page<v1::ScheduledAction>(
    *where_, limit,
    [&](persistence::pg_pool& db) {
      return persistence::list_scheduled_actions(db, after_id, limit, f);
    },
    [](const auto& x, const auto& y) { return x.meta().id() < y.meta().id(); });
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
  auto shard = incoming_shard(id);
  if (auto err = persistence::create_scheduled_action(where_->of_shard(shard), a, shard,
                                                      gost::shard_of(id, shard_count_)))
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
    auto shard = incoming_shard(id);
    rows.emplace_back(std::move(a), shard);
  }
  // One transaction per group (one group: the batch's one transaction).
  std::map<uint32_t, std::vector<std::pair<v1::ScheduledAction, uint32_t>>> by_group;
  for (auto& r : rows)
    by_group[where_->group_of(r.second)].push_back(std::move(r));
  size_t stored = 0;
  for (auto& [group, share] : by_group) {
    std::set<uint32_t> homes;
    for (auto& r : share)
      homes.insert(gost::shard_of(r.first.meta().id(), shard_count_));
    if (auto err = persistence::create_scheduled_actions(*where_->database(group), share, homes)) {
      if (stored == 0 || err.category() != caf::atom("db"))
        return err;
      return persistence::make_db_error(
        static_cast<persistence::db_errc>(err.code()),
        persistence::error_message(err) + " (shard group " + std::to_string(group) + "'s share; "
          + std::to_string(stored) + " actions of other shard groups were stored before it)");
    }
    stored += share.size();
    std::set<uint32_t> shards;
    for (auto& r : share)
      shards.insert(r.second);
    for (auto shard : shards)
      told(shard);
  }
  return stored;
}

caf::expected<v1::ScheduledAction> scheduler::update(const std::string& id,
                                                     const v1::ScheduledActionSpec& spec) {
  auto now = clock_ms_();
  if (auto e = check_id(id))
    return make_error(errc::invalid_argument, e->text());
  if (auto e = check_spec(spec, opts_, now))
    return make_error(errc::invalid_argument, e->text());
  auto shard = incoming_shard(id);
  auto r = persistence::change_scheduled_action(
    where_->of_shard(shard), id,
    [&](v1::ScheduledAction& a) {
      a.mutable_meta()->set_guid(persistence::random_id());
      a.mutable_meta()->set_updated_at_ms(now);
      *a.mutable_spec() = spec;
      *a.mutable_status() = start_status(spec, now, &a.status());
      return caf::error{};
    },
    shard, gost::shard_of(id, shard_count_));
  if (r)
    told(shard);
  return r; // not_found: status.cpp maps it
}

caf::expected<bool> scheduler::remove(const std::string& id) {
  if (auto e = check_id(id))
    return make_error(errc::invalid_argument, e->text());
  return persistence::delete_scheduled_action(database_of(id), id,
                                              gost::shard_of(id, shard_count_));
}

caf::expected<scheduler::verb_result> scheduler::apply(verb v, const std::string& id,
                                                       const std::string& who) {
  if (auto e = check_id(id))
    return make_error(errc::invalid_argument, e->text());
  auto now = clock_ms_();
  auto shard = incoming_shard(id);
  std::vector<persistence::attempt_record> records;
  bool changed = false;
  auto r = persistence::change_scheduled_action(
    where_->of_shard(shard), id,
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
    shard, gost::shard_of(id, shard_count_), &records);
  if (!r)
    return std::move(r.error());
  if (changed)
    told(shard);
  return verb_result{std::move(*r), changed};
}

} // namespace gost::scheduled
