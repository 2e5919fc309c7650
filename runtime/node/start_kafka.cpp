// What the node does with Kafka: the outbox relay of the shards it owns, the consumer of
// stages' after_save hooks, the feed exchange and the image functions' Kafka queue. Each is
// optional; each stop abandons what it did not finish to its group's next member (or, for the
// relay, to the outbox table).

#include <algorithm>

#include "gost/core/log.hpp"
#include "gost/core/stats_registry.hpp"
#include "kafka/outbox_relay.hpp"
#include "node/limits.hpp"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("kafka");

} // namespace

caf::error start_outbox_relay(node_context& n) {
  if (!n.cfg.outbox.relay)
    return {};
  relay_options ro;
  ro.kafka = n.cfg.kafka;
  ro.outbox = n.cfg.outbox;
  ro.routes = n.routes;
  ro.stats = n.stats;
  ro.broker = n.kafka;
  ro.parked = std::make_shared<parked_stats>();
  add_relay_metrics(*n.registry, ro.parked);
  // A relay per shard group, reading its database's outbox (ADR 0023): an offer's events are
  // all in its group's database, so their order holds.
  for (auto& part : n.groups) {
    auto& g = *part;
    auto o = ro;
    o.pool = g.pool;
    o.group = g.group.id;
    o.db = g.db;
    auto relay = spawn_outbox_relay(*n.sys, std::move(o));
    if (!relay)
      return relay.error(); // names the key to change
    g.relay = std::move(*relay);
    n.stops.push("outbox relay", [&n, &g] { n.stop_actor(g.relay); });
  }
  return {};
}

caf::error start_after_save(node_context& n) {
  auto& all = n.stages->all();
  bool hooks = std::any_of(all.begin(), all.end(),
                           [](auto& e) { return e.opts.enabled && e.impl->wants_after_save(); });
  if (!hooks)
    return {};
  if (n.cfg.kafka.brokers.empty()) {
    lg->warn("stages have after_save hooks but kafka.brokers is empty: the hooks are not "
             "called (the in-process mock cluster cannot be consumed by other nodes)");
    return {};
  }
  after_save_options ao;
  ao.kafka = n.cfg.kafka;
  ao.stages = n.stages;
  ao.stats = n.stats;
  ao.broker = n.kafka;
  auto consumer = after_save_consumer::start(std::move(ao));
  if (!consumer)
    return consumer.error(); // names the key to change
  n.after_save = std::move(*consumer);
  n.stops.push("after_save consumer", [&n] { n.after_save.reset(); });
  return {};
}

caf::error start_feed_exchange(node_context& n) {
  if (n.cfg.feed.requests_topic.empty())
    return {};
  feed_options fo;
  fo.kafka = n.cfg.kafka;
  fo.feed = n.cfg.feed;
  fo.api = n.cfg.api;
  fo.limits = offer_limits_of(n.cfg.limits);
  fo.hub = n.hub.get();
  fo.routes = n.routes;
  fo.where = n.placement;
  fo.broker = n.kafka;
  fo.db = n.db;
  auto exchange = feed_exchange::start(std::move(fo));
  if (!exchange)
    return exchange.error(); // names the key to change
  n.feeds = std::move(*exchange);
  n.stops.push("feed exchange", [&n] { n.feeds.reset(); });
  return {};
}

caf::error start_image_queue(node_context& n) {
  if (!n.cfg.images.enabled || n.cfg.images.queue != "kafka")
    return {};
  image_queue_options qo;
  qo.kafka = n.cfg.kafka;
  qo.images = n.cfg.images;
  qo.partitions = n.cfg.shard.count;
  qo.broker = n.kafka;
  auto queue = image_queue::start(std::move(qo));
  if (!queue)
    return queue.error(); // names the key to change
  n.kafka_images = std::move(*queue);
  n.stops.push("image queue", [&n] { n.kafka_images.reset(); });
  return {};
}

} // namespace gost::runtime
