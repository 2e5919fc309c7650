// Housekeeping (node/housekeeping.hpp): one step of the start order, after the node joined.

#include "cluster/router.hpp"
#include "node/housekeeping.hpp"
#include "node/start.hpp"

namespace gost::runtime {

caf::error start_housekeeping(node_context& n) {
  housekeeping_options ho;
  ho.request_ttl = n.cfg.api.request_ttl;
  ho.history_retention = n.cfg.history.retention;
  ho.entities = n.hosts_entities();
  ho.images = n.cfg.images.enabled;
  ho.feeds = n.cfg.feeds.enabled;
  ho.blobs = n.blobs.get(); // start_blob_store: stopped after us
  ho.feed_stats = n.feed_stats.get();
  ho.pool = n.pool.get();
  ho.db = n.db;
  ho.local_shards = [routes = n.routes] { return routes->local_shards(); };
  n.housekeeper = spawn_housekeeping(*n.sys, std::move(ho));
  n.stops.push("housekeeping", [&n] { n.stop_actor(n.housekeeper); });
  return {};
}

} // namespace gost::runtime
