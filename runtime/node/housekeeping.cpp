#include "node/housekeeping.hpp"

#include <algorithm>

#include "gost/core/blob_store.hpp"
#include "gost/core/dependency.hpp"
#include "gost/core/log.hpp"
#include "gost/core/protocol.hpp"
#include "gost/feeds/pools.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/errors.hpp"
#include "gost/persistence/feeds/feed_admin.hpp"
#include "gost/persistence/images/images.hpp"
#include "gost/persistence/offers/history.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("pg");

std::chrono::milliseconds interval_of(const housekeeping_options& o) {
  if (o.every.count() > 0)
    return o.every;
  return std::clamp(o.request_ttl / 10, std::chrono::milliseconds{1000},
                    std::chrono::milliseconds{600'000});
}

/// Old feed loads (feed_admin.hpp `clean_old_feed_loads`): rows in bounded transactions, then
/// the files each commit released. A file that cannot be removed stays (logged): no row names
/// it any more, so it is never read again.
void clean_feeds(const housekeeping_options& o) {
  int64_t loads = 0;
  int64_t files = 0;
  for (int round = 0; round < 10; ++round) {
    auto step =
      persistence::clean_old_feed_loads(*o.pool, o.feed_cleanup_batch, o.feed_file_elsewhere);
    if (!step) {
      if (!db_outage_reported(o.db.get(), step.error()))
        lg->warn("old feed loads not cleaned (next round tries again) error={}",
                 persistence::error_message(step.error()));
      break;
    }
    loads += step->loads;
    for (auto& name : step->blobs) {
      if (o.blobs != nullptr && o.blobs->remove(name))
        ++files;
      else
        lg->warn("feed file not removed (no load refers to it any more) name={}", name);
    }
    if (step->loads < o.feed_cleanup_batch)
      break;
  }
  if (o.feed_stats != nullptr) {
    o.feed_stats->loads_cleaned.fetch_add(static_cast<uint64_t>(loads), std::memory_order_relaxed);
    o.feed_stats->files_removed.fetch_add(static_cast<uint64_t>(files), std::memory_order_relaxed);
  }
  if (loads > 0)
    lg->info("old feed loads cleaned loads={} files={}", loads, files);
}

void sweep(const housekeeping_options& o) {
  auto ttl_s = std::max<int64_t>(1, o.request_ttl.count() / 1000);
  auto shards = o.local_shards();
  auto offers = persistence::reap_requests(*o.pool, shards, ttl_s);
  if (!offers) {
    if (!db_outage_reported(o.db.get(), offers.error()))
      lg->warn("request ids not reaped (next round tries again) error={}",
               persistence::error_message(offers.error()));
  } else if (*offers > 0) {
    lg->info("request ids forgotten count={} older_than_s={} shards={}", *offers, ttl_s,
             shards.size());
  }
  if (o.images) {
    // Expired image results (their TTL passed), in bounded deletes: any node may reap them.
    size_t reaped = 0;
    for (int round = 0; round < 10; ++round) {
      auto n = persistence::reap_image_results(*o.pool, 10'000);
      if (!n) {
        if (!db_outage_reported(o.db.get(), n.error()))
          lg->warn("image results not reaped (next round tries again) error={}",
                   persistence::error_message(n.error()));
        break;
      }
      reaped += *n;
      if (*n < 10'000)
        break;
    }
    if (reaped > 0)
      lg->info("expired image results reaped count={}", reaped);
  }
  if (o.feeds)
    clean_feeds(o);
  auto history_s = o.history_retention.count() / 1000;
  auto history = persistence::reap_history(*o.pool, shards, history_s);
  if (!history) {
    if (!db_outage_reported(o.db.get(), history.error()))
      lg->warn("offer history not reaped (next round tries again) error={}",
               persistence::error_message(history.error()));
  } else if (*history > 0) {
    lg->info("offer history reaped count={} older_than_s={} shards={}", *history, history_s,
             shards.size());
  }
  if (!o.entities)
    return;
  auto entities = persistence::reap_entity_requests(*o.pool, ttl_s);
  if (!entities) {
    if (!db_outage_reported(o.db.get(), entities.error()))
      lg->warn("entity request ids not reaped (next round tries again) error={}",
               persistence::error_message(entities.error()));
  } else if (*entities > 0) {
    lg->info("entity request ids forgotten count={} older_than_s={}", *entities, ttl_s);
  }
}

} // namespace

std::function<caf::expected<bool>(const std::string&)>
feed_files_of_other_groups(std::shared_ptr<const persistence::shard_placement> where,
                           uint32_t group) {
  return [where = std::move(where), group](const std::string& name) -> caf::expected<bool> {
    for (auto other : where->groups()) {
      auto* db = where->database(other);
      if (other == group || db == nullptr)
        continue;
      auto used = persistence::feed_file_in_use(*db, name);
      if (!used || *used)
        return used; // a database that does not answer: the step is tried again later
    }
    return false;
  };
}

caf::actor spawn_housekeeping(caf::actor_system& sys, housekeeping_options opts) {
  // The options go as spawn's argument, not a capture: CAF 0.17.6 dereferences a null argument
  // tuple when a spawned function takes none (UBSan).
  return sys.spawn<caf::detached>(
    [](caf::event_based_actor* self, housekeeping_options o) -> caf::behavior {
      auto every = interval_of(o);
      self->delayed_send(self, every, sweep_atom_v);
      return {
        [=](sweep_atom) {
          sweep(o);
          self->delayed_send(self, every, sweep_atom_v);
        },
      };
    },
    std::move(opts));
}

} // namespace gost::runtime
