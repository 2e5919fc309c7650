// The feed exchange's Kafka loop and the feed applier's ports: PostgreSQL for the loads'
// bookkeeping, the offers' owners (asked through the call hub from the consumer's thread),
// and the responses' producer. The rules are the applier's (actors/feeds).

#include "kafka/feed_exchange.hpp"

#include <future>
#include <optional>

#include "cluster/ask_owner_async.hpp"
#include "cluster/builtin_kinds.hpp"
#include "cluster/router.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/log.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/feeds/feed_applier.hpp"
#include "gost/offers/content_rules.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/offers/stage_runner.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/feeds/feeds.hpp"
#include "gost/persistence/offers/offer_store.hpp"
#include "kafka/group_consumer.hpp"
#include "kafka/producer.hpp"
#include "kafka/seller_sink.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("feeds");

v1::Offer offer_of(offer_msg& m) {
  return std::move(m.value);
}

/// The offers, through their owners on this node or another; the offer domain's rules.
class owner_offers final : public feeds::offer_port {
public:
  explicit owner_offers(const feed_options& opts) : opts_(opts) {}

  std::string new_id(const std::string& seller_id) override {
    return id_in_home_group(*opts_.routes, seller_id, [](int) { return make_offer_id(); });
  }

  /// A feed's writes carry no idempotency key, only where they came from (recorded in the
  /// offer's history).
  static request_id feed_request() { return request_id{{}, "feed", {}}; }

  std::string check(const v1::Offer& content) override {
    return check_content(content, opts_.limits);
  }

  bool changes(const v1::Offer& stored, const v1::Offer& wanted) override {
    return !changed_fields(stored, wanted).empty();
  }

  reply<v1::Offer> create(const v1::Offer& content) override {
    return ask_owner_async<v1::Offer>(*opts_.hub, *opts_.routes, deadline(), offer_of,
                                      create_atom_v, content.id(), offer_msg{content},
                                      feed_request());
  }

  reply<v1::Offer> update(const v1::Offer& content, std::optional<int64_t> expected_version,
                          const std::string& mask) override {
    return ask_owner_async<v1::Offer>(*opts_.hub, *opts_.routes, deadline(), offer_of,
                                      update_atom_v, content.id(), offer_msg{content},
                                      expected_version.value_or(any_version), mask, feed_request());
  }

  reply<int64_t> remove(const std::string& offer_id) override {
    return ask_owner_async<int64_t>(
      *opts_.hub, *opts_.routes, deadline(), [](int64_t version) { return version; }, delete_atom_v,
      offer_id, any_version, feed_request());
  }

  reply<v1::Offer> get(const std::string& offer_id) override {
    return ask_owner_async<v1::Offer>(*opts_.hub, *opts_.routes, deadline(), offer_of, get_atom_v,
                                      offer_id);
  }

private:
  clock_type::time_point deadline() const { return clock_type::now() + opts_.api.request_timeout; }

  const feed_options& opts_;
};

/// The loads' bookkeeping in PostgreSQL (gost/persistence/feeds/feeds.hpp), each in the
/// seller's home group's database.
class pg_feed_store final : public feeds::feed_store {
public:
  explicit pg_feed_store(std::shared_ptr<const persistence::shard_placement> where)
    : where_(std::move(where)) {}

  caf::expected<persistence::feed_task> begin_task(const std::string& task_id,
                                                   const std::string& seller_id,
                                                   const std::string& ns) override {
    return persistence::begin_feed_task(db(seller_id), task_id, seller_id, ns);
  }

  caf::expected<std::vector<persistence::keyed_offer>>
  find(const std::string& seller_id, const std::string& ns,
       const std::vector<std::string>& external_ids) override {
    // The offers a split left outside the seller's home group too (ADR 0023).
    return persistence::find_by_external_ids(db(seller_id), seller_id, ns, external_ids,
                                             where_.get());
  }

  caf::expected<persistence::recorded_batch>
  record_batch(const std::string& seller_id, const std::string& task_id,
               const std::string& batch_id, const std::vector<std::string>& external_ids,
               const count_fn& count) override {
    return persistence::record_feed_batch(db(seller_id), task_id, batch_id, external_ids, count);
  }

  caf::error add_counts(const std::string& seller_id, const std::string& task_id,
                        const persistence::feed_counts& delta) override {
    return persistence::add_feed_counts(db(seller_id), task_id, delta);
  }

  caf::expected<std::vector<persistence::keyed_offer>> missing(const std::string& task_id,
                                                               const std::string& seller_id,
                                                               const std::string& ns) override {
    return persistence::offers_missing_from(db(seller_id), task_id, seller_id, ns, where_.get());
  }

  caf::expected<std::pair<persistence::feed_counts, int32_t>>
  progress(const std::string& seller_id, const std::string& task_id) override {
    return persistence::feed_progress(db(seller_id), task_id);
  }

  caf::error finish_task(const std::string& seller_id, const std::string& task_id,
                         const std::string& summary) override {
    return persistence::finish_feed_task(db(seller_id), task_id, summary);
  }

  caf::expected<std::optional<std::string>> holder(const std::string& seller_id,
                                                   const std::string& ns,
                                                   const std::string& external_id) override {
    return persistence::offer_store{db(seller_id)}.find_id(seller_id, ns, external_id);
  }

  caf::expected<bool> release_claim(const std::string& seller_id, const std::string& ns,
                                    const std::string& external_id,
                                    const std::string& offer_id) override {
    return persistence::offer_store{db(seller_id)}.drop_claim(seller_id, ns, external_id, offer_id);
  }

private:
  persistence::pg_pool& db(const std::string& seller_id) const {
    return home_database(*where_, seller_id);
  }

  std::shared_ptr<const persistence::shard_placement> where_;
};

/// The applier's options: its defaults, and the database's tracker.
feeds::applier_options applier_options(const feed_options& o) {
  feeds::applier_options ao;
  ao.db = o.db;
  return ao;
}

} // namespace

struct feed_exchange::impl {
  feed_options opts;
  pg_feed_store store;
  owner_offers offers;
  kafka::seller_sink<v1::FeedResponse> responses;
  feeds::feed_applier applier;
  // Declared last: stops (and with it the applier's work) before the ports go.
  std::unique_ptr<kafka::group_consumer> consumer;

  impl(feed_options o, kafka::producer p)
    : opts(std::move(o)), store(opts.where), offers(opts),
      responses(std::move(p), opts.feed.responses_topic, "responses"),
      applier(store, offers, responses, applier_options(opts)) {}

  kafka::verdict handle(const kafka::message_view& m, const stop_signal& stop) {
    v1::FeedRequest req;
    if (!req.ParseFromArray(m.payload.data(), static_cast<int>(m.payload.size()))) {
      lg->error("a message of {} [{}] at offset {} is not a gost.v1.FeedRequest; skipped", m.topic,
                m.partition, m.offset);
      return kafka::verdict::handled;
    }
    return applier.handle(req, stop) ? kafka::verdict::handled : kafka::verdict::not_handled;
  }
};

feed_exchange::feed_exchange(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

feed_exchange::~feed_exchange() = default;

caf::expected<std::unique_ptr<feed_exchange>> feed_exchange::start(feed_options opts) {
  kafka::producer_options po;
  po.role = "the feed exchange's Kafka producer";
  po.settings = {kafka::brokers_setting(opts.kafka.brokers)};
  po.close_wait = std::chrono::milliseconds{5000};
  auto producer = kafka::producer::make(std::move(po));
  if (!producer)
    return std::move(producer.error());
  auto p = std::make_unique<impl>(std::move(opts), std::move(*producer));
  // A load's end message may take minutes (deletions): the consumer stays a member of its
  // group that long (kafka/group_consumer.hpp).
  kafka::consumer_options co;
  co.role = "the feed exchange's Kafka consumer";
  co.brokers = p->opts.kafka.brokers;
  co.session_timeout = p->opts.kafka.session_timeout;
  co.group = p->opts.feed.group;
  co.group_key = "feed.group";
  co.topic = p->opts.feed.requests_topic;
  co.topic_key = "feed.requests_topic";
  co.broker = p->opts.broker;
  auto* raw = p.get();
  auto consumer = kafka::make_group_consumer(
    std::move(co),
    [raw](const kafka::message_view& m, const stop_signal& stop) { return raw->handle(m, stop); });
  if (!consumer)
    return std::move(consumer.error());
  p->consumer = std::move(*consumer);
  lg->info("feed exchange started requests={} responses={} group={}", raw->opts.feed.requests_topic,
           raw->opts.feed.responses_topic, raw->opts.feed.group);
  return std::unique_ptr<feed_exchange>(new feed_exchange(std::move(p)));
}

} // namespace gost::runtime
