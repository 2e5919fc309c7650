#include "kafka/feed_exchange.hpp"

#include <atomic>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include <caf/actor_system.hpp>
#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include "cluster/ask_owner.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/offers/protocol.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/offers/stage_runner.hpp"
#include "gost/persistence/feeds/feeds.hpp"
#include "gost/v1/feed_exchange.pb.h"
#include "kafka/kafka_consumer.hpp"
#include "gost/offers/content_rules.hpp"

namespace gost::runtime {

namespace {

using outcome = v1::OfferResult;

/// Errors worth handling the request again for (the offer itself is fine).
bool transient(const caf::error& e) {
  return classify(e) != disposition::fail || e == caf::sec::request_timeout;
}

/// Sends an offer operation to its owner from a plain thread (through the call hub): the reply
/// (or error) arrives through the future.
template <class... Ts>
auto ask_async(call_hub& hub, std::shared_ptr<router> r, std::chrono::milliseconds timeout,
               Ts... xs) {
  using reply = reply_of<offer_owner_ops, Ts...>;
  auto p = std::make_shared<std::promise<caf::expected<reply>>>();
  auto f = p->get_future();
  auto deadline = clock_type::now() + timeout;
  hub.run([=](caf::event_based_actor* self) {
    ask_owner(
      self, *r, deadline, [p](reply& x) { p->set_value(std::move(x)); },
      [p](const caf::error& e) { p->set_value(e); }, xs...);
  });
  return f;
}

} // namespace

struct feed_exchange::impl {
  feed_options opts;
  rd_kafka_t* consumer = nullptr;
  rd_kafka_t* producer = nullptr;
  std::atomic<bool> stopping{false};
  std::thread thread;

  /// Deliveries of responses that failed since the last flush (set by librdkafka's callback).
  std::atomic<uint64_t> failed_deliveries{0};

  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR)
      static_cast<impl*>(opaque)->failed_deliveries.fetch_add(1);
  }

  /// The responses' producer (idempotent; delivery failures counted). Null with `error` set.
  rd_kafka_t* make_producer(std::string& error) {
    char err[512];
    auto* conf = rd_kafka_conf_new();
    for (auto [k, v] : {std::pair<const char*, std::string>{"bootstrap.servers", opts.brokers},
                        {"enable.idempotence", "true"},
                        {"linger.ms", "5"}})
      if (rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        error = std::string{"feed exchange kafka setting "} + k + ": " + err;
        rd_kafka_conf_destroy(conf);
        return nullptr;
      }
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    auto* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (rk == nullptr)
      error = std::string{"cannot create the feed exchange's Kafka producer: "} + err;
    return rk;
  }

  ~impl() {
    stopping = true;
    if (thread.joinable())
      thread.join();
    if (consumer != nullptr) {
      rd_kafka_consumer_close(consumer);
      rd_kafka_destroy(consumer);
    }
    if (producer != nullptr) {
      rd_kafka_flush(producer, 5000);
      rd_kafka_destroy(producer);
    }
  }

  void pause(std::chrono::milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    while (!stopping && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }

  /// Runs a database step until it succeeds; false when the exchange stops first.
  template <class T, class F>
  bool retry(const char* what, F f, T& out) {
    for (auto backoff = std::chrono::milliseconds{100};; backoff = std::min(backoff * 2, std::chrono::milliseconds{5000})) {
      if (stopping)
        return false;
      auto r = f();
      if (r) {
        out = std::move(*r);
        return true;
      }
      spdlog::warn("feed exchange: {} failed error={}; retrying", what,
                   persistence::error_message(r.error()));
      pause(backoff);
    }
  }

  void send(const v1::FeedRequest& req, v1::FeedResponse resp) {
    resp.set_seller_id(req.seller_id());
    resp.set_namespace_(req.namespace_());
    resp.set_task_id(req.task_id());
    auto bytes = resp.SerializeAsString();
    for (;;) {
      auto err = rd_kafka_producev(
        producer, RD_KAFKA_V_TOPIC(opts.responses_topic.c_str()),
        RD_KAFKA_V_KEY(req.seller_id().data(), req.seller_id().size()),
        RD_KAFKA_V_VALUE(bytes.data(), bytes.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        failed_deliveries.fetch_add(1); // the request is handled again
        return;
      }
      rd_kafka_poll(producer, 100); // queue full: let deliveries drain
    }
  }

  /// Waits until every response produced so far is acknowledged. False when stopping, or
  /// when a response could not be delivered (the request is then handled again: responses
  /// are at least once, never lost).
  bool flushed() {
    while (!stopping) {
      if (rd_kafka_flush(producer, 1000) == RD_KAFKA_RESP_ERR_NO_ERROR)
        break;
      spdlog::warn("feed exchange: waiting for the broker to acknowledge responses");
    }
    if (stopping)
      return false;
    if (failed_deliveries.exchange(0) == 0)
      return true;
    char reason[512];
    if (rd_kafka_fatal_error(producer, reason, sizeof(reason)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      // An idempotent producer in a fatal state delivers nothing more: start a new one.
      spdlog::error("feed exchange: the responses' producer failed ({}); starting a new one", reason);
      std::string error;
      if (auto* fresh = make_producer(error)) {
        rd_kafka_destroy(producer);
        producer = fresh;
      } else {
        spdlog::error("feed exchange: {}", error);
      }
    }
    spdlog::warn("feed exchange: responses were not delivered; the request is handled again");
    return false;
  }

  static void note(v1::FeedSummary& s, outcome::Outcome o) {
    switch (o) {
      case outcome::ADDED: s.set_added(s.added() + 1); break;
      case outcome::UPDATED: s.set_updated(s.updated() + 1); break;
      case outcome::UNCHANGED: s.set_unchanged(s.unchanged() + 1); break;
      case outcome::DELETED: s.set_deleted(s.deleted() + 1); break;
      case outcome::MADE_MANUAL: s.set_made_manual(s.made_manual() + 1); break;
      case outcome::REJECTED: s.set_rejected(s.rejected() + 1); break;
      case outcome::DUPLICATE: s.set_duplicates(s.duplicates() + 1); break;
      default: break;
    }
  }

  /// Creates or replaces one offer of a batch, one step at a time (the redo path after a
  /// race); `existing` is its stored row, if any.
  v1::OfferResult apply(v1::Offer content, const persistence::keyed_offer* existing) {
    v1::OfferResult res;
    res.set_external_id(content.external_id());
    std::optional<persistence::keyed_offer> reread;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (existing == nullptr) {
        content.set_id(make_offer_id());
        auto f = ask_async(*opts.hub, opts.routes, opts.request_timeout, create_atom_v, content.id(), offer_msg{content});
        auto r = f.get();
        if (r) {
          res.set_offer_id(r->value.id());
          res.set_version(r->value.version());
          res.set_outcome(outcome::ADDED);
          return res;
        }
        if (r.error() != errc::already_exists) {
          res.set_outcome(outcome::REJECTED);
          res.set_reason("not stored: " + persistence::error_message(r.error()));
          return res;
        }
      } else {
        v1::Offer before;
        before.ParseFromString(existing->body);
        before.set_version(existing->version);
        content.set_id(existing->offer_id);
        if (changed_fields(before, content).empty()) {
          res.set_offer_id(existing->offer_id);
          res.set_version(existing->version);
          res.set_outcome(outcome::UNCHANGED);
          return res;
        }
        auto f = ask_async(*opts.hub, opts.routes, opts.request_timeout, update_atom_v, content.id(), offer_msg{content},
                                                        existing->version, std::string{});
        auto r = f.get();
        if (r) {
          res.set_offer_id(r->value.id());
          res.set_version(r->value.version());
          res.set_outcome(outcome::UPDATED);
          return res;
        }
        if (r.error() != errc::conflict && r.error() != errc::not_found) {
          res.set_outcome(outcome::REJECTED);
          res.set_reason("not stored: " + persistence::error_message(r.error()));
          return res;
        }
      }
      // Someone else changed the offer meanwhile (or created it): read it again and redo.
      auto again = persistence::find_by_external_ids(*opts.pool, content.seller_id(),
                                                     content.namespace_(), {content.external_id()});
      existing = nullptr;
      if (again && !again->empty()) {
        reread = again->front();
        existing = &*reread;
      }
    }
    res.set_outcome(outcome::REJECTED);
    res.set_reason("the offer kept changing while the feed was applied; send the batch again");
    return res;
  }

  bool handle_batch(const v1::FeedRequest& req) {
    auto& batch = req.batch();
    auto n = batch.offers_size();
    std::vector<v1::OfferResult> results(static_cast<size_t>(n));
    std::vector<v1::Offer> contents(static_cast<size_t>(n));
    std::vector<std::string> ids;    // external ids of the valid offers, in order
    std::vector<int> id_index;       // their positions in the batch
    std::vector<std::string> carried; // every external id of the batch, valid or not
    std::vector<int> valid_at;        // per carried id: its index in `ids`, or -1 (rejected)
    for (int i = 0; i < n; ++i) {
      auto& r = results[static_cast<size_t>(i)];
      r.set_batch_id(batch.batch_id());
      auto& c = contents[static_cast<size_t>(i)];
      c = batch.offers(i);
      c.clear_id();
      c.clear_version();
      c.clear_created_at();
      c.clear_updated_at();
      c.set_seller_id(req.seller_id());
      c.set_namespace_(req.namespace_());
      c.set_source(v1::OFFER_SOURCE_FEED);
      r.set_external_id(c.external_id());
      std::string problem = c.external_id().empty() ? "offer.external_id is required in a feed"
                                                    : check_content(c);
      if (!c.external_id().empty()) {
        carried.push_back(c.external_id());
        valid_at.push_back(problem.empty() ? static_cast<int>(ids.size()) : -1);
      }
      if (!problem.empty()) {
        r.set_outcome(outcome::REJECTED);
        r.set_reason(problem);
        continue;
      }
      ids.push_back(c.external_id());
      id_index.push_back(i);
    }
    // The seller's stored offers under these ids, read before recording: what each valid
    // offer is meant to become (added, updated, unchanged) is counted with the record, in one
    // transaction, the first time the batch is recorded.
    std::vector<persistence::keyed_offer> stored;
    if (!retry("reading the seller's offers", [&] {
          return persistence::find_by_external_ids(*opts.pool, req.seller_id(), req.namespace_(), ids);
        }, stored))
      return false;
    std::map<std::string, const persistence::keyed_offer*> by_ext;
    for (auto& s : stored)
      by_ext[s.external_id] = &s;
    std::vector<v1::OfferResult::Outcome> intended(ids.size(), outcome::ADDED);
    for (size_t k = 0; k < ids.size(); ++k) {
      auto i = by_ext.find(ids[k]);
      if (i == by_ext.end())
        continue;
      auto& c = contents[static_cast<size_t>(id_index[k])];
      v1::Offer before;
      before.ParseFromString(i->second->body);
      before.set_version(i->second->version);
      auto probe = c;
      probe.set_id(i->second->offer_id);
      intended[k] = changed_fields(before, probe).empty() ? outcome::UNCHANGED : outcome::UPDATED;
    }
    // Every external id the load carried is recorded, rejected ones too: a line that failed
    // validation must not make the end message delete the seller's stored offer.
    auto count_batch = [&](const std::vector<persistence::feed_item>& recorded) {
      persistence::feed_counts sum;
      for (size_t k = 0; k < carried.size(); ++k) {
        if (recorded[k] == persistence::feed_item::duplicate) {
          if (valid_at[k] >= 0)
            ++sum.duplicates;
          continue;
        }
        if (recorded[k] != persistence::feed_item::fresh)
          continue;
        if (valid_at[k] < 0) {
          ++sum.rejected;
          continue;
        }
        switch (intended[static_cast<size_t>(valid_at[k])]) {
          case outcome::ADDED: ++sum.added; break;
          case outcome::UPDATED: ++sum.updated; break;
          default: ++sum.unchanged; break;
        }
      }
      for (auto& r : results)
        if (r.outcome() == outcome::REJECTED && r.external_id().empty())
          ++sum.rejected;
      return sum;
    };
    persistence::recorded_batch recorded;
    if (!retry("recording the batch", [&] {
          return persistence::record_feed_batch(*opts.pool, req.task_id(), batch.batch_id(), carried,
                                                count_batch);
        }, recorded))
      return false;
    auto& carried_items = recorded.items;
    // What each valid offer was (its first occurrence in `carried`; a later one in the same batch
    // is a duplicate).
    std::vector<persistence::feed_item> items(ids.size(), persistence::feed_item::fresh);
    for (size_t k = 0; k < carried.size(); ++k)
      if (valid_at[k] >= 0)
        items[static_cast<size_t>(valid_at[k])] = carried_items[k];
    // Apply the offers concurrently (each goes to its own offer actor), at most `window` at
    // once; those that lost a race (changed or created meanwhile) are redone one by one.
    constexpr size_t window = 256;
    struct pending {
      size_t pos;
      bool create;
      std::future<caf::expected<offer_msg>> reply;
    };
    std::deque<pending> running;
    std::vector<size_t> redo;
    auto settle = [&](size_t keep) {
      while (running.size() > keep) {
        auto p = std::move(running.front());
        running.pop_front();
        auto r = p.reply.get();
        auto& res = results[p.pos];
        if (r) {
          res.set_offer_id(r->value.id());
          res.set_version(r->value.version());
          res.set_outcome(p.create ? outcome::ADDED : outcome::UPDATED);
        } else if (r.error() == errc::already_exists || r.error() == errc::conflict
                   || r.error() == errc::not_found) {
          redo.push_back(p.pos);
        } else {
          res.set_outcome(outcome::REJECTED);
          res.set_reason("not stored: " + persistence::error_message(r.error()));
        }
      }
    };
    for (size_t k = 0; k < ids.size(); ++k) {
      if (stopping) {
        settle(0);
        return false;
      }
      auto pos = static_cast<size_t>(id_index[k]);
      auto& res = results[pos];
      if (items[k] == persistence::feed_item::duplicate) {
        res.set_outcome(outcome::DUPLICATE);
        res.set_reason("external_id " + ids[k] + " came earlier in this load");
        continue;
      }
      auto& c = contents[pos];
      auto i = by_ext.find(ids[k]);
      if (i == by_ext.end()) {
        c.set_id(make_offer_id());
        running.push_back({pos, true,
                           ask_async(*opts.hub, opts.routes, opts.request_timeout, create_atom_v, c.id(), offer_msg{c})});
      } else {
        auto& stored_offer = *i->second;
        c.set_id(stored_offer.offer_id);
        if (intended[k] == outcome::UNCHANGED) {
          res.set_offer_id(stored_offer.offer_id);
          res.set_version(stored_offer.version);
          res.set_outcome(outcome::UNCHANGED);
          continue;
        }
        running.push_back({pos, false,
                           ask_async(*opts.hub, opts.routes, opts.request_timeout, update_atom_v, c.id(), offer_msg{c},
                                                                  stored_offer.version, std::string{})});
      }
      settle(window);
    }
    settle(0);
    for (auto pos : redo) {
      if (stopping)
        return false;
      auto& c = contents[pos];
      auto again = persistence::find_by_external_ids(*opts.pool, c.seller_id(), c.namespace_(),
                                                     {c.external_id()});
      const persistence::keyed_offer* existing = again && !again->empty() ? &again->front() : nullptr;
      auto r = apply(c, existing);
      r.set_batch_id(batch.batch_id());
      results[pos] = std::move(r);
    }
    // The counts went in with the record as intended; correct them where the outcome differs
    // (a race redone, a write refused). Only the first time: a batch handled again finds its
    // offers applied already, so its outcomes say less than the first handling's.
    persistence::feed_counts delta;
    bool corrected = false;
    auto bump = [](persistence::feed_counts& c, v1::OfferResult::Outcome o, int64_t by) {
      switch (o) {
        case outcome::ADDED: c.added += by; break;
        case outcome::UPDATED: c.updated += by; break;
        case outcome::UNCHANGED: c.unchanged += by; break;
        case outcome::REJECTED: c.rejected += by; break;
        default: break;
      }
    };
    if (recorded.first_time)
      for (size_t k = 0; k < ids.size(); ++k) {
        if (items[k] != persistence::feed_item::fresh)
          continue;
        auto actual = results[static_cast<size_t>(id_index[k])].outcome();
        if (actual == intended[k])
          continue;
        bump(delta, intended[k], -1);
        bump(delta, actual, +1);
        corrected = true;
      }
    for (auto& r : results) {
      v1::FeedResponse resp;
      *resp.mutable_result() = r;
      send(req, std::move(resp));
    }
    bool ok = false;
    if (corrected && !retry("correcting the counts", [&]() -> caf::expected<bool> {
          if (auto err = persistence::add_feed_counts(*opts.pool, req.task_id(), delta))
            return err;
          return true;
        }, ok))
      return false;
    spdlog::info("feed batch applied seller={} task={} batch={} offers={}", req.seller_id(),
                 req.task_id(), batch.batch_id(), n);
    return flushed();
  }

  bool handle_end(const v1::FeedRequest& req, const persistence::feed_task& task) {
    if (task.finished) { // a re-delivered end: repeat the summary only
      v1::FeedResponse resp;
      resp.mutable_end()->ParseFromString(task.summary);
      send(req, std::move(resp));
      return flushed();
    }
    std::vector<persistence::keyed_offer> missing;
    if (!retry("finding offers missing from the load", [&] {
          return persistence::offers_missing_from(*opts.pool, req.task_id(), req.seller_id(),
                                                  req.namespace_());
        }, missing))
      return false;
    bool make_manual = req.end().missing() == v1::FeedEnd::MAKE_MANUAL;
    v1::FeedSummary summary;
    for (auto& m : missing) {
      v1::Offer o;
      o.ParseFromString(m.body);
      if (o.source() != v1::OFFER_SOURCE_FEED)
        continue; // manual offers are the seller's own, not the feed's
      v1::OfferResult r;
      r.set_external_id(m.external_id);
      r.set_offer_id(m.offer_id);
      if (make_manual) {
        o.set_id(m.offer_id);
        o.set_source(v1::OFFER_SOURCE_MANUAL);
        auto res = ask_async(*opts.hub, opts.routes, opts.request_timeout, update_atom_v, m.offer_id, offer_msg{o},
                                                          any_version, std::string{"source"})
                     .get();
        if (res) {
          r.set_outcome(outcome::MADE_MANUAL);
          r.set_version(res->value.version());
        } else if (transient(res.error())) {
          spdlog::warn("feed exchange: making offer={} manual failed error={}; the end message is "
                       "handled again", m.offer_id, persistence::error_message(res.error()));
          return false;
        } else if (res.error() == errc::not_found) {
          continue;
        } else {
          r.set_outcome(outcome::REJECTED);
          r.set_reason("missing from the load, but could not be made manual: "
                       + persistence::error_message(res.error()));
        }
      } else {
        auto res = ask_async(*opts.hub, opts.routes, opts.request_timeout, delete_atom_v, m.offer_id, any_version)
                     .get();
        if (res) {
          r.set_outcome(outcome::DELETED);
          r.set_version(*res);
        } else if (res.error() == errc::not_found) {
          continue; // gone already (a re-delivered end after a crash)
        } else if (transient(res.error())) {
          spdlog::warn("feed exchange: deleting offer={} failed error={}; the end message is "
                       "handled again", m.offer_id, persistence::error_message(res.error()));
          return false;
        } else {
          r.set_outcome(outcome::REJECTED);
          r.set_reason("missing from the load, but could not be deleted: "
                       + persistence::error_message(res.error()));
        }
      }
      if (stopping)
        return false;
      note(summary, r.outcome());
      v1::FeedResponse resp;
      *resp.mutable_result() = r;
      send(req, std::move(resp));
    }
    // Every result of the load is acknowledged before the terminal message goes out.
    if (!flushed())
      return false;
    std::pair<persistence::feed_counts, int32_t> progress;
    if (!retry("reading the task's counts", [&] { return persistence::feed_progress(*opts.pool, req.task_id()); },
               progress))
      return false;
    auto& [c, batches] = progress;
    summary.set_added(c.added);
    summary.set_updated(c.updated);
    summary.set_unchanged(c.unchanged);
    summary.set_rejected(c.rejected);
    summary.set_duplicates(c.duplicates);
    summary.set_batches(batches);
    if (req.end().batches() != 0 && req.end().batches() != batches)
      spdlog::warn("feed task={} seller={} ended after {} batches, the end message says {}",
                   req.task_id(), req.seller_id(), batches, req.end().batches());
    bool ok = false;
    if (!retry("finishing the task", [&]() -> caf::expected<bool> {
          if (auto err = persistence::finish_feed_task(*opts.pool, req.task_id(), summary.SerializeAsString()))
            return err;
          return true;
        }, ok))
      return false;
    v1::FeedResponse resp;
    *resp.mutable_end() = summary;
    send(req, std::move(resp));
    spdlog::info("feed task finished seller={} task={} added={} updated={} unchanged={} deleted={}"
                 " made_manual={} rejected={} duplicates={}", req.seller_id(), req.task_id(),
                 summary.added(), summary.updated(), summary.unchanged(), summary.deleted(),
                 summary.made_manual(), summary.rejected(), summary.duplicates());
    return flushed();
  }

  /// Handles one request. False: not handled (do not store its offset).
  bool handle(const v1::FeedRequest& req) {
    if (req.seller_id().empty() || req.task_id().empty()) {
      spdlog::error("feed request without seller_id or task_id skipped");
      return true;
    }
    persistence::feed_task task;
    if (!retry("registering the task", [&] {
          return persistence::begin_feed_task(*opts.pool, req.task_id(), req.seller_id(), req.namespace_());
        }, task))
      return false;
    if (!task.other_owner.empty()) {
      spdlog::error("feed request of task={} for seller={} namespace={} refused: the task id "
                    "belongs to {}", req.task_id(), req.seller_id(), req.namespace_(), task.other_owner);
      return true;
    }
    switch (req.body_case()) {
      case v1::FeedRequest::kBatch:
        if (task.finished) {
          spdlog::warn("feed batch for finished task={} batch={} ignored", req.task_id(),
                       req.batch().batch_id());
          return true;
        }
        return handle_batch(req);
      case v1::FeedRequest::kEnd: return handle_end(req, task);
      default:
        spdlog::error("feed request of task={} has neither batch nor end; skipped", req.task_id());
        return true;
    }
  }

  void loop() {
    while (!stopping) {
      auto* m = rd_kafka_consumer_poll(consumer, 200);
      if (m == nullptr)
        continue;
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
          spdlog::warn("feed exchange consumer error={}", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        continue;
      }
      v1::FeedRequest req;
      bool handled = true;
      if (!req.ParseFromArray(m->payload, static_cast<int>(m->len)))
        spdlog::error("feed exchange: a message of {} [{}] at offset {} is not a gost.v1.FeedRequest;"
                      " skipped", opts.requests_topic, m->partition, m->offset);
      else
        handled = handle(req);
      if (handled) {
        rd_kafka_offset_store(m->rkt, m->partition, m->offset);
      } else if (!stopping) {
        // Not handled: read it again from here (seek back) after a pause.
        // Read it again from here after a pause; never go on past it.
        pause(std::chrono::milliseconds{500});
        while (!stopping) {
          auto err = rd_kafka_seek(m->rkt, m->partition, m->offset, 5000);
          if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
          spdlog::warn("feed exchange: seek back failed error={}; retrying", rd_kafka_err2str(err));
          pause(std::chrono::milliseconds{500});
        }
      }
      rd_kafka_message_destroy(m);
    }
  }
};

feed_exchange::feed_exchange(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

feed_exchange::~feed_exchange() = default;

std::unique_ptr<feed_exchange> feed_exchange::start(feed_options opts, std::string& error) {
  auto p = std::make_unique<impl>();
  p->opts = std::move(opts);
  p->producer = p->make_producer(error);
  if (p->producer == nullptr)
    return nullptr;
  // A load's end message may take minutes (deletions): the group consumer stays a member
  // that long.
  p->consumer = make_group_consumer(p->opts.brokers, p->opts.group, p->opts.requests_topic, error);
  if (p->consumer == nullptr)
    return nullptr;
  auto* raw = p.get();
  p->thread = std::thread{[raw] { raw->loop(); }};
  spdlog::info("feed exchange started requests={} responses={} group={}", raw->opts.requests_topic,
               raw->opts.responses_topic, raw->opts.group);
  return std::unique_ptr<feed_exchange>(new feed_exchange(std::move(p)));
}

} // namespace gost::runtime
