// The outbox relay: rounds of "read the oldest rows of the owned shards, produce their events,
// wait for every delivery report, delete the rows delivered". One round in flight at a time,
// so a broken broker never makes the relay queue the same rows twice.
//
// Parking (issue 27): a row whose message the broker refused for good (permanent_reason) would
// block its shard forever. The broker refuses a whole record batch, so the rows sent with the
// culprit fail too: a row failing that way first becomes a suspect, and suspects go alone, one
// per round (after the rows older than them). A suspect refused for good alone, or a message the
// producer itself refuses as too large, is moved to `outbox_parked` (logged, counted) and the
// rows behind it go on.

#include "kafka/outbox_relay.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "cluster/router.hpp"
#include "gost/core/backoff.hpp"
#include "gost/core/dependency.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/core/protocol.hpp"
#include "gost/core/stats.hpp"
#include "gost/core/stats_registry.hpp"
#include "gost/persistence/outbox/outbox.hpp"
#include "gost/v1/events.pb.h"
#include "kafka/producer.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("kafka");

/// One outbox row of the round in flight.
struct row_state {
  persistence::outbox_row row;
  int pending = 0; ///< events without a delivery report yet
  bool failed = false;
  bool delivery = false; ///< failed in the producer or the broker (not an unparsable row)
  std::string error;
  /// The first message refused for good: its class (permanent_reason), topic, key, size.
  const char* permanent = nullptr;
  bool refused_locally = false; ///< by the producer itself: no other message was involved
  std::string bad_topic;
  std::string bad_key;
  size_t bad_bytes = 0;
};

/// One message of the round in flight: the delivery report's opaque.
struct message_state {
  row_state* row;
  std::string topic;
  std::string key;
  size_t bytes;
};

struct relay_state {
  static inline const char* name = "gost.outbox";
  relay_options opts;
  std::deque<row_state> round;        ///< stable addresses: delivery reports point into it
  std::deque<message_state> messages; ///< of the round; the reports' opaques point into it
  /// Rows refused for good along with others (a whole batch is refused): each goes alone
  /// before it is parked. Dropped once delivered, parked, or no longer read (shard gone).
  std::set<int64_t> suspects;
  bool waiting_logged = false;
  std::optional<retry_pace> reads; ///< of the outbox reads (set at the start)
  /// The wait before the next tick: outbox.poll, doubled by each read that found nothing up to
  /// outbox.poll_idle (an idle node's relay costs the database little); reset by one that found
  /// rows. Set at the start (from opts).
  std::optional<backoff> idle_reads;
  std::chrono::milliseconds wait{0};
  // Declared last: destroyed first, while `round` (which its reports point into, also those
  // of messages purged as it goes) still lives.
  std::optional<kafka::producer> producer;
};

using self_ptr = caf::stateful_actor<relay_state>*;

void on_delivery(void* opaque, const char* error, const char* permanent) {
  auto* m = static_cast<message_state*>(opaque);
  if (m == nullptr)
    return;
  auto* r = m->row;
  --r->pending;
  if (error != nullptr) {
    r->failed = true;
    r->delivery = true;
    r->error = error;
    if (permanent != nullptr && r->permanent == nullptr) {
      r->permanent = permanent;
      r->bad_topic = m->topic;
      r->bad_key = m->key;
      r->bad_bytes = m->bytes;
    }
  }
}

/// Moves a row refused for good aside; true when it no longer blocks its shard.
bool park(relay_state& st, const row_state& r) {
  persistence::parked_outbox_row p;
  p.id = r.row.id;
  p.shard = r.row.shard;
  p.events = r.row.events;
  p.topic = r.bad_topic;
  p.key = r.bad_key;
  p.bytes = static_cast<int64_t>(r.bad_bytes);
  p.reason = r.permanent;
  p.error = r.error;
  auto moved = persistence::park_outbox(*st.opts.pool, p);
  if (!moved) {
    if (!db_outage_reported(st.opts.db.get(), moved.error()))
      lg->warn("outbox row not parked id={} shard={} error={}; retrying", r.row.id, r.row.shard,
               persistence::error_message(moved.error()));
    return false;
  }
  st.suspects.erase(r.row.id);
  if (*moved) {
    lg->error("outbox row parked id={} shard={} topic={} key={} bytes={} reason={} error=\"{}\"; "
              "the rows behind it go on (gostctl parked lists it, gostctl retry-parked sends it "
              "again once the broker takes it)",
              r.row.id, r.row.shard, r.bad_topic, r.bad_key, r.bad_bytes, r.permanent, r.error);
    if (st.opts.parked)
      st.opts.parked->add(r.permanent);
  }
  return true;
}

/// All reports are in: delete, per shard, the rows delivered before the first failure (so a
/// shard's events go out in commit order), and keep the rest for the next round.
void finish_round(self_ptr self) {
  auto& st = self->state;
  std::vector<int64_t> done;
  std::map<uint32_t, bool> blocked;
  uint64_t events = 0;
  uint64_t failures = 0;
  const char* broker_error = nullptr; ///< the first delivery failure (not an unparsable row)
  bool alone = st.round.size() == 1;
  for (auto& r : st.round) {
    if (r.failed && r.permanent != nullptr && !blocked[r.row.shard]) {
      // Refused for good: alone (or by the producer itself), it is the culprit; with others,
      // maybe only their batch's neighbour.
      if (alone || r.refused_locally) {
        if (park(st, r))
          continue;
      } else {
        st.suspects.insert(r.row.id);
      }
    }
    if (r.failed) {
      if (r.delivery && broker_error == nullptr && r.permanent == nullptr)
        broker_error = r.error.c_str();
      // With a tracker, the broker's outage is its lines; each blocked shard is detail.
      if (!blocked[r.row.shard]) {
        if (st.opts.broker && r.delivery)
          lg->debug("outbox publish failed shard={} row={} error={}; retrying", r.row.shard,
                    r.row.id, r.error);
        else
          lg->warn("outbox publish failed shard={} row={} error={}; retrying", r.row.shard,
                   r.row.id, r.error);
      }
      blocked[r.row.shard] = true;
      ++failures;
      continue;
    }
    if (blocked[r.row.shard])
      continue;
    st.suspects.erase(r.row.id);
    done.push_back(r.row.id);
    events += static_cast<uint64_t>(r.row.events);
  }
  if (st.opts.broker) {
    if (broker_error != nullptr)
      st.opts.broker->failed(broker_error);
    else if (events > 0)
      st.opts.broker->succeeded();
  }
  if (auto err = persistence::delete_outbox(*st.opts.pool, done)) {
    // Published but not deleted: they go out again (at least once).
    if (!db_outage_reported(st.opts.db.get(), err))
      lg->warn("outbox rows not deleted error={}", persistence::error_message(err));
  } else {
    st.opts.stats->outbox_events_published.fetch_add(events, std::memory_order_relaxed);
  }
  st.opts.stats->outbox_publish_failures.fetch_add(failures, std::memory_order_relaxed);
  st.round.clear();
  st.messages.clear();
  if (failures > 0)
    st.producer->replace_if_fatal(); // no message is outstanding between rounds
}

void start_round(self_ptr self) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  if (!st.reads->may_try(now))
    return;
  auto rows = persistence::read_outbox(*st.opts.pool, st.opts.routes->local_shards(st.opts.group),
                                       st.opts.rows_per_round);
  if (!rows) {
    auto wait = st.reads->failed(now);
    if (!db_outage_reported(st.opts.db.get(), rows.error()))
      lg->warn("outbox read failed retry_in_ms={} error={}", wait.count(),
               persistence::error_message(rows.error()));
    return;
  }
  st.reads->succeeded();
  if (rows->empty()) {
    st.wait = st.idle_reads->next();
  } else {
    st.idle_reads->reset();
    st.wait = st.opts.outbox.poll;
  }
  if (!st.suspects.empty()) {
    // The rows older than the first suspect go as usual, then the suspect alone.
    auto first = std::find_if(rows->begin(), rows->end(),
                              [&](auto& r) { return st.suspects.count(r.id) > 0; });
    if (first == rows->end())
      st.suspects.clear(); // delivered by an earlier owner, or the shard moved
    else if (first == rows->begin())
      rows->resize(1);
    else
      rows->erase(first, rows->end());
  }
  for (auto& row : *rows) {
    st.round.push_back({});
    auto& r = st.round.back();
    r.row = std::move(row);
    v1::OutboxBatch batch;
    if (!batch.ParseFromString(r.row.payload)) {
      // Never written by gost: keep it (an operator looks at it) but do not block its shard.
      lg->error("outbox row does not parse as gost.v1.OutboxBatch row={} shard={}", r.row.id,
                r.row.shard);
      r.failed = true;
      r.error = "unparsable";
      continue;
    }
    auto send = [&](const std::string& topic, std::string_view key, std::string_view value) {
      ++r.pending;
      st.messages.push_back({&r, topic, std::string{key}, value.size()});
      if (auto err = st.producer->produce(topic, key, value, &st.messages.back())) {
        --r.pending;
        r.failed = true;
        r.delivery = true;
        r.error = persistence::error_message(err);
        if (classify(err) == disposition::fail) { // larger than message.max.bytes
          r.permanent = "message_too_large";
          r.refused_locally = true;
          r.bad_topic = topic;
          r.bad_key = std::string{key};
          r.bad_bytes = value.size();
        }
        return false;
      }
      return true;
    };
    bool sent = true;
    for (auto& e : batch.events())
      if (sent = send(st.opts.kafka.topic, e.offer().id(), e.SerializeAsString()); !sent)
        break;
    // Other messages of the same commit (image notifications), each to its own topic.
    for (int i = 0; sent && i < batch.messages_size(); ++i) {
      auto& m = batch.messages(i);
      sent = send(m.topic(), m.key(), m.value());
    }
  }
}

void tick(self_ptr self) {
  auto& st = self->state;
  st.producer->poll(); // serves delivery reports
  if (!st.round.empty()) {
    for (auto& r : st.round)
      if (r.pending > 0) {
        if (!st.waiting_logged) {
          lg->debug("outbox waiting for delivery reports rows={}", st.round.size());
          st.waiting_logged = true;
        }
        return;
      }
    st.waiting_logged = false;
    finish_round(self);
  }
  start_round(self);
}

} // namespace

void parked_stats::add(const std::string& reason) {
  std::lock_guard<std::mutex> g{mtx_};
  ++by_reason_[reason];
}

std::map<std::string, uint64_t> parked_stats::by_reason() const {
  std::lock_guard<std::mutex> g{mtx_};
  return by_reason_;
}

void add_relay_metrics(stats_registry& reg, std::shared_ptr<const parked_stats> parked) {
  reg.add([parked = std::move(parked)](metric_families& out) {
    const char* name = "gost_outbox_parked_total";
    const char* help = "Outbox rows this node moved to outbox_parked because the broker refused "
                       "one of their messages for good, by reason (message_too_large, "
                       "record_list_too_large, invalid_record, invalid_topic, "
                       "topic_not_authorized). gostctl parked lists them.";
    out.declare(name, metric_type::counter, help);
    for (auto& [reason, n] : parked->by_reason())
      out.add(name, stat_kind::counter, help, {{"reason", reason}}, static_cast<int64_t>(n));
  });
}

caf::expected<caf::actor> spawn_outbox_relay(caf::actor_system& sys, relay_options opts) {
  kafka::producer_options po;
  po.role = "the outbox relay's Kafka producer";
  if (opts.kafka.brokers.empty()) {
    lg->warn("kafka.brokers is empty: after-save events go to librdkafka's in-process mock "
             "cluster and are not kept anywhere (set kafka.brokers for a real broker)");
    po.settings.push_back({"test.mock.num.brokers", "1", "kafka.brokers"});
  } else {
    po.settings.push_back(kafka::brokers_setting(opts.kafka.brokers));
  }
  po.settings.push_back({"message.timeout.ms", std::to_string(opts.kafka.message_timeout.count()),
                         "kafka.message_timeout"});
  po.settings.push_back(
    {"message.max.bytes", std::to_string(opts.kafka.message_max_bytes), "kafka.message_max_bytes"});
  po.on_delivery = on_delivery;
  auto made = kafka::producer::make(std::move(po));
  if (!made)
    return std::move(made.error());
  // Shared only to pass it through spawn (which copies its arguments); the actor takes it.
  auto producer = std::make_shared<kafka::producer>(std::move(*made));
  // Both go as spawn's arguments, not captures: CAF 0.17.6 dereferences a null argument tuple
  // when a spawned function takes none (UBSan).
  return sys.spawn<caf::detached>(
    [](caf::stateful_actor<relay_state>* self, relay_options given,
       std::shared_ptr<kafka::producer> made_producer) -> caf::behavior {
      self->state.opts = std::move(given);
      auto& o = self->state.opts;
      self->state.reads.emplace(o.outbox.poll,
                                std::max(o.outbox.poll, std::chrono::milliseconds{2000}), o.db);
      self->state.idle_reads.emplace(o.outbox.poll, std::max(o.outbox.poll, o.outbox.poll_idle));
      self->state.producer.emplace(std::move(*made_producer));
      self->send(self, tick_atom_v);
      return {
        [=](tick_atom) {
          tick(self);
          auto& st = self->state;
          // A round waiting on delivery reports ticks at outbox.poll; idle looks back off.
          self->delayed_send(
            self, st.round.empty() ? std::max(st.wait, st.opts.outbox.poll) : st.opts.outbox.poll,
            tick_atom_v);
        },
      };
    },
    std::move(opts), std::move(producer));
}

} // namespace gost::runtime
