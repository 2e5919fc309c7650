#pragma once
// The offer store's rules of the feed exchange (seed 004 "Взаимодействие с GOST", MISSION F5,
// docs/feeds.md): how a load request is applied and answered. A batch's offers are applied by
// external id and answered one result each; what each offer is meant to become is counted
// with the record of the batch, once, and corrected where applying turned out otherwise; the
// load's end deletes (or makes manual) the feed offers the load did not carry and answers the
// summary strictly after every result. Plain code: no actors, no Kafka — it talks to the rest
// of gost through the ports of ports.hpp, and the node's Kafka loop
// (runtime/kafka/feed_exchange.cpp) calls `handle` for each request, on one thread.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gost/core/backoff.hpp"
#include "gost/feeds/ports.hpp"

namespace gost {
class dependency_tracker;
}

namespace gost::feeds {

struct applier_options {
  /// Back-off of a bookkeeping step that failed (the database is down): the step is retried
  /// in place until it succeeds or the exchange stops.
  std::chrono::milliseconds retry_first{100};
  std::chrono::milliseconds retry_cap{5000};
  /// Offers of a batch in flight at once (each goes to its own offer actor).
  size_t window = 256;
  /// The node's PostgreSQL tracker: a step failed by an outage it reported is retried without
  /// a line of its own. May be null.
  std::shared_ptr<const dependency_tracker> db;
};

class feed_applier {
public:
  /// The ports outlive the applier.
  feed_applier(feed_store& store, offer_port& offers, response_sink& out,
               applier_options opts = {});

  /// Handles one request. False: not handled — the caller handles it again later (its offset
  /// is not stored). Handling again is idempotent: a batch's offers come out unchanged and
  /// are not counted twice; a finished load's end only repeats the summary.
  bool handle(const v1::FeedRequest& req, const stop_signal& stop);

private:
  bool handle_batch(const v1::FeedRequest& req, const stop_signal& stop);
  bool handle_end(const v1::FeedRequest& req, const persistence::feed_task& task,
                  const stop_signal& stop);
  /// Applies one offer after it lost a race (changed or created meanwhile): reads it again
  /// and redoes, up to three times.
  v1::OfferResult redo(v1::Offer content);
  /// After a create refused ALREADY_EXISTS with nothing found by key: the key's holder, when a
  /// claim names an offer its owner no longer has (ADR 0023), is released; true then.
  bool release_dangling_claim(const v1::Offer& content);
  void send(const v1::FeedRequest& req, v1::FeedResponse resp, const stop_signal& stop);
  /// Runs a bookkeeping step until it succeeds; false when the exchange stops first.
  template <class F, class T>
  bool retry(const char* what, F step, T& out, const stop_signal& stop);
  template <class F>
  bool retry(const char* what, F step, const stop_signal& stop);

  feed_store& store_;
  offer_port& offers_;
  response_sink& out_;
  applier_options opts_;
};

} // namespace gost::feeds
