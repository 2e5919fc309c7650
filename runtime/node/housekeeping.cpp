#include "node/housekeeping.hpp"

#include <algorithm>

#include "gost/core/dependency.hpp"
#include "gost/core/log.hpp"
#include "gost/core/protocol.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/errors.hpp"
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

caf::actor spawn_housekeeping(caf::actor_system& sys, housekeeping_options opts) {
  return sys.spawn<caf::detached>([opts](caf::event_based_actor* self) -> caf::behavior {
    auto every = interval_of(opts);
    self->delayed_send(self, every, sweep_atom_v);
    return {
      [=](sweep_atom) {
        sweep(opts);
        self->delayed_send(self, every, sweep_atom_v);
      },
    };
  });
}

} // namespace gost::runtime
