#include "gost/images/ask.hpp"

#include <map>
#include <set>

#include "gost/core/errc.hpp"
#include "gost/images/redis_cache.hpp"
#include "gost/images/response.hpp"
#include "gost/images/stats.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/images/images.hpp"
#include "gost/v1/images.pb.h"

namespace gost::images {

namespace {

/// The asks of one database.
caf::error ask_in(persistence::pg_pool& pool, const std::vector<image_ask>& asks,
                  uint32_t partitions, const std::vector<v1::ImageResponse*>& out,
                  redis_cache* cache, image_stats* stats, task_queue* tasks) {
  std::vector<std::string> keys;
  keys.reserve(asks.size());
  for (size_t i = 0; i < asks.size(); ++i) {
    keys.push_back(asks[i].task.result_key());
    out[i]->set_key(keys.back());
  }
  // Redis first (when configured); PostgreSQL for what it lacks, or for all when it is away.
  std::vector<persistence::image_result> found_rows;
  std::vector<std::string> ask_db = keys;
  if (cache != nullptr)
    if (auto got = cache->get(keys)) {
      found_rows = std::move(*got);
      std::set<std::string> in_redis;
      for (auto& r : found_rows)
        in_redis.insert(r.key);
      ask_db.clear();
      for (auto& k : keys)
        if (in_redis.count(k) == 0)
          ask_db.push_back(k);
    }
  if (!ask_db.empty()) {
    auto rows = persistence::find_image_results(pool, ask_db);
    if (!rows)
      return std::move(rows.error());
    if (cache != nullptr) {
      // Only where Redis has nothing, so never over a newer write; and not `pending`: a
      // result stored while Redis was away would leave it there for the whole TTL.
      std::vector<persistence::image_result> fill;
      for (auto& r : *rows)
        if (r.status != "pending")
          fill.push_back(r);
      cache->put(fill, true);
    }
    for (auto& r : *rows)
      found_rows.push_back(std::move(r));
  }
  std::map<std::string, const persistence::image_result*> by_key;
  for (auto& r : found_rows)
    by_key[r.key] = &r;
  std::vector<persistence::image_request> queue;
  for (size_t i = 0; i < asks.size(); ++i) {
    auto& a = asks[i];
    auto found = by_key.find(keys[i]);
    if (stats != nullptr) {
      auto& f = stats->of(a.task.fn);
      if (found == by_key.end())
        f.cache_misses.fetch_add(1, std::memory_order_relaxed);
      else if (found->second->status != "pending")
        f.cache_hits.fetch_add(1, std::memory_order_relaxed);
    }
    if (found != by_key.end() && !a.compute) {
      fill_response(a.task.fn, *found->second, *out[i]);
      continue;
    }
    if (a.cache_only) {
      out[i]->set_status(v1::IMAGE_STATUS_NOT_CACHED);
      continue;
    }
    persistence::image_request q;
    q.key = keys[i];
    q.task = {to_string(a.task.fn), a.task.partition(partitions), a.task.args, 0, a.ttl_ms, 0, {}};
    q.pending_ttl_ms = a.ttl_ms;
    q.recompute = found != by_key.end();
    queue.push_back(std::move(q));
    if (found != by_key.end()) // compute: the old result stays until the new one
      fill_response(a.task.fn, *found->second, *out[i]);
    out[i]->set_status(v1::IMAGE_STATUS_PENDING);
  }
  if (queue.empty())
    return {};
  if (tasks != nullptr)
    return tasks->enqueue(pool, queue);
  if (auto n = persistence::enqueue_image_tasks(pool, queue); !n)
    return std::move(n.error());
  return {};
}

} // namespace

caf::error ask_images(persistence::pg_pool& pool, const std::vector<image_ask>& asks,
                      uint32_t partitions, const std::vector<v1::ImageResponse*>& out,
                      redis_cache* cache, image_stats* stats, task_queue* tasks) {
  return ask_in(pool, asks, partitions, out, cache, stats, tasks);
}

caf::error ask_images(const persistence::shard_placement& where, const std::vector<image_ask>& asks,
                      const std::vector<v1::ImageResponse*>& out, redis_cache* cache,
                      image_stats* stats, task_queue* tasks) {
  auto partitions = where.shard_count();
  if (where.groups().size() == 1)
    return ask_in(*where.database(where.groups().front()), asks, partitions, out, cache, stats,
                  tasks);
  std::map<uint32_t, std::pair<std::vector<image_ask>, std::vector<v1::ImageResponse*>>> by_group;
  for (size_t i = 0; i < asks.size(); ++i) {
    auto& g = by_group[where.group_of(asks[i].task.partition(partitions))];
    g.first.push_back(asks[i]);
    g.second.push_back(out[i]);
  }
  for (auto& [group, share] : by_group) {
    auto* db = where.database(group);
    if (db == nullptr)
      return make_error(errc::unavailable,
                        "shard group " + std::to_string(group) + " is not open on this node");
    if (auto err = ask_in(*db, share.first, partitions, share.second, cache, stats, tasks))
      return err;
  }
  return {};
}

} // namespace gost::images
