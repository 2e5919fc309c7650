// The image functions (seed 003, gost/images/pools.hpp): one start step after the node joined
// the cluster. The partitions are the shards: each node computes the queued tasks of the shards
// it holds, so the leases spread them and a dead node's move with its shards. With
// images.queue=kafka, the Kafka queue's consumers (a group per function) feed the same pools.

#include "cluster/router.hpp"
#include "gost/core/errc.hpp"
#include "gost/images/pools.hpp"
#include "node/start.hpp"

namespace gost::runtime {

caf::error start_images(node_context& n) {
  auto& c = n.cfg.images;
  if (!c.enabled)
    return {};
  images::add_image_metrics(*n.registry, n.image_stats);
  // The node's blob store (start_blob_store) answers rotated images' URLs from here on.
  n.blobs->set_base_url("http://" + n.advertised_host + ":" + std::to_string(n.http_port)
                        + "/blobs");
  images::pools_options o;
  o.where = n.placement; // each partition's tasks in its shard group's database
  o.work.limits.max_pixels = c.max_pixels;
  o.work.max_bytes = c.max_bytes;
  o.work.fetch_timeout = c.fetch_timeout;
  o.work.allow_private = c.allow_private_sources;
  o.work.max_attempts = c.max_attempts;
  o.work.retry_base = c.retry_delay;
  o.work.blobs = n.blobs.get();
  o.work.cache = n.image_cache.get(); // made with ImageService (start_grpc), stopped after us
  o.work.stats = n.image_stats.get();
  o.work.notify_topic = c.notify_topic;
  o.workers = {{images::function::ratio, c.ratio_workers},
               {images::function::preview, c.preview_workers},
               {images::function::main_color, c.main_color_workers},
               {images::function::rotate, c.rotate_workers}};
  o.poll = c.poll;
  o.poll_idle = c.poll_idle;
  o.visibility = std::max(std::chrono::milliseconds{60'000}, c.fetch_timeout * 4);
  o.partitions = [routes = n.routes] { return routes->local_shards(); };
  n.image_pools = images::spawn_image_pools(*n.sys, o);
  // Tasks queued for this node's partitions (here, or a wake notice from another node): every
  // feeder looks now (the one of the task's function finds it). Weak: the hub outlives them.
  std::vector<caf::actor_addr> to_wake;
  for (auto& [fn, feeder] : n.image_pools)
    to_wake.push_back(feeder.address());
  n.wakes->add_part(images_wake_part, [to_wake](uint32_t) {
    for (auto& f : to_wake)
      if (auto h = caf::actor_cast<images::image_feeder_actor>(f))
        caf::anon_send(h, wake_atom_v);
  });
  n.stops.push("image pools", [&n] {
    std::vector<images::image_feeder_actor> feeders;
    for (auto& [fn, feeder] : n.image_pools)
      feeders.push_back(feeder);
    n.stop_actors(feeders);
    n.image_pools.clear();
  });
  if (n.kafka_images) {
    // A batch waits for its slowest task: its fetch (with redirects) and a store.
    if (auto err = n.kafka_images->consume(*n.sys, n.image_pools, o.visibility))
      return err; // names the key to change
    n.stops.push("image queue consumers", [&n] { n.kafka_images->stop_consuming(); });
  }
  return {};
}

} // namespace gost::runtime
