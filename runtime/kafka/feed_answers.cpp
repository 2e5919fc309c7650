#include "kafka/feed_answers.hpp"

#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/feeds/answers.hpp"
#include "gost/feeds/pools.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/feeds/feed_loads.hpp"
#include "kafka/group_consumer.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("feeds");

} // namespace

struct feed_answers::impl {
  feed_answers_options opts;
  // Declared last: stops before what its handler uses goes.
  std::unique_ptr<kafka::group_consumer> consumer;

  explicit impl(feed_answers_options o) : opts(std::move(o)) {}

  /// One batch of answers: stored per load; false when the database refused (read again).
  kafka::verdict handle(const std::vector<kafka::message_view>& batch) {
    std::vector<v1::FeedResponse> answers;
    answers.reserve(batch.size());
    for (auto& m : batch) {
      v1::FeedResponse r;
      if (!r.ParseFromArray(m.payload.data(), static_cast<int>(m.payload.size()))) {
        lg->error("a message of {} [{}] at offset {} is not a gost.v1.FeedResponse; skipped",
                  m.topic, m.partition, m.offset);
        continue;
      }
      answers.push_back(std::move(r));
    }
    for (auto& [key, a] : feeds::group_answers(answers)) {
      auto& [seller, load_id] = key;
      auto& db = home_database(*opts.where, seller); // the load's database (ADR 0023)
      if (!a.batch_ids.empty() || !a.rejected.empty()) {
        auto ours = persistence::record_feed_answers(db, seller, load_id, a.batch_ids, a.rejected);
        if (!ours) {
          lg->warn("storing answers of load {} failed: {}; read again", load_id,
                   error_message(ours.error()));
          return kafka::verdict::not_handled;
        }
      }
      if (!a.summary)
        continue;
      auto load = persistence::get_feed_load(db, seller, load_id);
      if (!load) {
        if (load.error() == persistence::db_errc::not_found)
          continue; // another installation's load
        return kafka::verdict::not_handled;
      }
      auto stats = feeds::merge_summary(load->statistics, *a.summary);
      auto done = persistence::feed_answered(db, seller, load_id, stats);
      if (!done) {
        lg->warn("finishing load {} failed: {}; read again", load_id, error_message(done.error()));
        return kafka::verdict::not_handled;
      }
      if (*done) {
        if (opts.stats)
          ++opts.stats->loads_succeeded;
        lg->info("feed load seller={} namespace={} load={} succeeded added={} updated={} "
                 "unchanged={} deleted={} made_manual={} rejected={}",
                 seller, load->ns, load_id, a.summary->added(), a.summary->updated(),
                 a.summary->unchanged(), a.summary->deleted(), a.summary->made_manual(),
                 a.summary->rejected());
      }
    }
    return kafka::verdict::handled;
  }
};

feed_answers::feed_answers(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

feed_answers::~feed_answers() = default;

caf::expected<std::unique_ptr<feed_answers>> feed_answers::start(feed_answers_options opts) {
  auto p = std::make_unique<impl>(std::move(opts));
  kafka::consumer_options co;
  co.role = "the feed processor's answers consumer";
  co.brokers = p->opts.kafka.brokers;
  co.session_timeout = p->opts.kafka.session_timeout;
  co.group = p->opts.feeds.responses_group;
  co.group_key = "feed.responses_group";
  co.topic = p->opts.feed.responses_topic;
  co.topic_key = "feed.responses_topic";
  co.broker = p->opts.broker;
  auto* raw = p.get();
  auto consumer = kafka::make_group_consumer(
    std::move(co),
    [raw](const std::vector<kafka::message_view>& batch, const stop_signal&) {
      return raw->handle(batch);
    },
    2000);
  if (!consumer)
    return std::move(consumer.error());
  p->consumer = std::move(*consumer);
  return std::unique_ptr<feed_answers>(new feed_answers(std::move(p)));
}

} // namespace gost::runtime
