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
  // A housekeeper per shard group, on its database (ADR 0023). A feed file one group's
  // cleanup released goes only when no other group's load refers to it (the same bytes may
  // be two sellers' in two groups); a database that does not answer keeps the file.
  for (auto& part : n.groups) {
    auto& g = *part;
    auto o = ho;
    o.pool = g.pool;
    o.db = g.db;
    o.feed_file_elsewhere = feed_files_of_other_groups(n.placement, g.group.id);
    o.local_shards = [routes = n.routes, group = g.group.id] {
      return routes->local_shards(group);
    };
    g.housekeeper = spawn_housekeeping(*n.sys, std::move(o));
    n.stops.push("housekeeping", [&n, &g] { n.stop_actor(g.housekeeper); });
  }
  return {};
}

} // namespace gost::runtime
