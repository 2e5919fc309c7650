#include "api/admin/common.hpp"

#include <algorithm>

#include "api/admin_service.hpp"
#include "api/status.hpp"
#include "gost/persistence/cluster/placement.hpp"

namespace gost::runtime {

namespace admin {

caf::expected<stage_table> read_stage_table(persistence::pg_pool& catalog,
                                            const std::vector<persistence::pg_pool*>& groups,
                                            int64_t now_us) {
  stage_table t;
  auto dbs = groups;
  if (dbs.empty())
    dbs.push_back(&catalog);
  for (auto* db : dbs) {
    auto counts = persistence::count_stages(*db, now_us);
    if (!counts)
      return counts.error();
    for (auto& c : *counts) {
      auto [it, fresh] = t.counts.emplace(c.stage_id, c);
      if (fresh)
        continue;
      auto& sum = it->second;
      sum.queued += c.queued;
      sum.timers += c.timers;
      sum.dead_letters += c.dead_letters;
      if (c.oldest_due_us != 0 && (sum.oldest_due_us == 0 || c.oldest_due_us < sum.oldest_due_us))
        sum.oldest_due_us = c.oldest_due_us;
    }
  }
  auto pauses = persistence::list_stage_pauses(catalog);
  if (!pauses)
    return pauses.error();
  for (auto& p : *pauses)
    t.pauses[p.stage_id] = p;
  return t;
}

int64_t age_ms(int64_t since_us, int64_t now_us) {
  return since_us == 0 ? 0 : std::max<int64_t>(0, now_us - since_us) / 1000;
}

std::set<std::string> stage_ids(const stage_registry& reg, const stage_table& t) {
  std::set<std::string> ids;
  for (auto& e : reg.all())
    ids.insert(e.id);
  for (auto& [id, c] : t.counts)
    ids.insert(id);
  for (auto& [id, p] : t.pauses)
    ids.insert(id);
  return ids;
}

grpc::Status registered_stage(const stage_registry& reg, const std::string& id) {
  if (id.empty())
    return invalid("stage_id is required");
  if (reg.find(id) != nullptr)
    return grpc::Status::OK;
  std::string known;
  for (auto& e : reg.all())
    known += (known.empty() ? "" : ", ") + e.id;
  return invalid("stage_id `" + id + "` is not a stage of this node (stages: "
                 + (known.empty() ? std::string{"none"} : known) + ")");
}

std::string who_asked(grpc::CallbackServerContext* ctx, const std::string& who) {
  return (who.empty() ? std::string{"(not given)"} : who) + " peer=" + ctx->peer();
}

} // namespace admin

persistence::pg_pool* admin_service::cluster_view::group_pool(uint32_t id) const {
  if (placement)
    return placement->database(id);
  return id == 0 ? pool : nullptr;
}

std::vector<persistence::pg_pool*> admin_service::cluster_view::group_pools() const {
  if (!placement)
    return {pool};
  std::vector<persistence::pg_pool*> out;
  for (auto g : placement->groups()) // in id order: group 0's first
    if (auto* p = placement->database(g))
      out.push_back(p);
  return out;
}

} // namespace gost::runtime
