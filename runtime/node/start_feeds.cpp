// The feed processor's side of seed 004 (gost/feeds/pools.hpp, docs/feeds.md "Feed
// processor"): the loader and processor pools, sending loads on `feed.requests_topic` with a
// producer of their own per load, and the consumer storing the offer store's answers. Files
// go to the node's blob store (`images.blob_dir`, start_blob_store; FeedService.Upload writes
// there too).

#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/feeds/feed_loads.hpp"
#include "kafka/feed_answers.hpp"
#include "kafka/seller_sink.hpp"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("feeds");

} // namespace

caf::error start_feeds(node_context& n) {
  auto& c = n.cfg.feeds;
  if (!c.enabled)
    return {};
  feeds::add_feed_metrics(*n.registry, n.feed_stats);
  if (n.cfg.kafka.brokers.empty())
    return make_error(errc::invalid_argument,
                      "feed.enabled needs kafka.brokers: loads are sent to the offer store over "
                      "Kafka (feed.requests_topic)");
  // A previous incarnation of this node (killed mid-step) may have left locks: none is ours
  // now, in any group's database (a seller's locks are in its home group's, ADR 0023).
  for (auto g : n.placement->groups()) {
    auto* db = n.placement->database(g);
    if (db == nullptr)
      continue;
    if (auto freed = persistence::release_node_feed_locks(*db, n.cfg.node.id); !freed)
      return freed.error();
    else if (*freed > 0)
      lg->warn("freed {} feed locks a previous run of node {} left group={}", *freed, n.cfg.node.id,
               g);
  }
  feeds::feed_pools_options o;
  o.where = n.placement;
  o.node_id = n.cfg.node.id;
  o.loader_workers = c.loader_workers;
  o.processor_workers = c.processor_workers;
  o.poll = c.poll;
  o.limits.max_file_bytes = c.max_file_bytes;
  o.limits.max_depth = c.max_depth;
  o.limits.max_offers = c.max_offers;
  o.limits.max_field_chars = c.max_field_chars;
  o.fetch_timeout = c.fetch_timeout;
  o.allow_private = c.allow_private_sources;
  o.proxy = c.proxy;
  o.batch_size = static_cast<size_t>(c.batch_size);
  o.keep_loads = c.keep_loads;
  o.retry_delay = c.retry_delay;
  o.max_attempts = c.max_attempts;
  o.lock_max_hold = c.lock_max_hold;
  o.node_timeout = n.cfg.cluster.lease_timeout; // a node silent this long lost its leases too
  auto geocoder =
    c.geocoder_url.empty()
      ? nullptr
      : feeds::make_http_geocoder(c.geocoder_url, c.geocoder_timeout, c.allow_private_sources);
  if (c.catalog_dir.empty()) {
    o.unify = std::make_shared<feeds::unification_data>(geocoder);
  } else {
    std::string error;
    o.unify = feeds::unification_data::from_dir(c.catalog_dir, geocoder, error);
    if (!o.unify)
      return make_error(errc::invalid_argument,
                        "feed.catalog_dir: " + error + "; fix the file or unset feed.catalog_dir");
  }
  o.blobs = n.blobs.get(); // made by start_blob_store, stopped after us
  o.make_sink = [kafka = n.cfg.kafka,
                 topic = n.cfg.feed.requests_topic]() -> std::unique_ptr<feeds::request_sink> {
    kafka::producer_options po;
    po.role = "the feed processor's Kafka producer";
    // librdkafka's local queue bounded (1 GiB by default): when the broker lags, `send` waits
    // for room instead of holding a large feed's batches in memory (docs/performance.md "Feeds").
    po.settings = {kafka::brokers_setting(kafka.brokers),
                   {"queue.buffering.max.kbytes", "32768", "feed.enabled"}};
    auto p = kafka::producer::make(std::move(po));
    if (!p) {
      lg->warn("no producer for {}: {}", topic, error_message(p.error()));
      return nullptr;
    }
    return std::make_unique<kafka::seller_sink<v1::FeedRequest>>(std::move(*p), topic,
                                                                 "feed requests");
  };
  o.stats = n.feed_stats.get();
  n.feed_pools = feeds::spawn_feed_pools(*n.sys, std::move(o));
  n.stops.push("feed pools", [&n] {
    std::vector<feeds::feed_feeder_actor> feeders{n.feed_pools.loader, n.feed_pools.processor};
    n.stop_actors(feeders);
    n.feed_pools = {};
  });
  feed_answers_options ao;
  ao.kafka = n.cfg.kafka;
  ao.feed = n.cfg.feed;
  ao.feeds = c;
  ao.where = n.placement;
  ao.broker = n.kafka;
  ao.stats = n.feed_stats.get();
  auto answers = feed_answers::start(std::move(ao));
  if (!answers)
    return answers.error(); // names the key to change
  n.feed_answers_reader = std::move(*answers);
  n.stops.push("feed answers", [&n] { n.feed_answers_reader.reset(); });
  lg->info("feed processor started loader_workers={} processor_workers={} requests={} "
           "responses={}",
           c.loader_workers, c.processor_workers, n.cfg.feed.requests_topic,
           n.cfg.feed.responses_topic);
  return {};
}

} // namespace gost::runtime
