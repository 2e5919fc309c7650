// The outbox relay: rounds of "read the oldest rows of the owned shards, produce their events,
// wait for every delivery report, delete the rows delivered". One round in flight at a time,
// so a broken broker never makes the relay queue the same rows twice.

#include "kafka/outbox_relay.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "cluster/router.hpp"
#include "gost/core/backoff.hpp"
#include "gost/core/dependency.hpp"
#include "gost/core/log.hpp"
#include "gost/core/protocol.hpp"
#include "gost/core/stats.hpp"
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
};

struct relay_state {
  static inline const char* name = "gost.outbox";
  relay_options opts;
  std::deque<row_state> round; ///< stable addresses: delivery reports point into it
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

void on_delivery(void* opaque, const char* error) {
  auto* r = static_cast<row_state*>(opaque);
  if (r == nullptr)
    return;
  --r->pending;
  if (error != nullptr) {
    r->failed = true;
    r->delivery = true;
    r->error = error;
  }
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
  for (auto& r : st.round) {
    if (r.failed) {
      if (r.delivery && broker_error == nullptr)
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
  if (failures > 0)
    st.producer->replace_if_fatal(); // no message is outstanding between rounds
}

void start_round(self_ptr self) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  if (!st.reads->may_try(now))
    return;
  auto rows =
    persistence::read_outbox(*st.opts.pool, st.opts.routes->local_shards(), st.opts.rows_per_round);
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
  for (auto& row : *rows) {
    st.round.push_back({std::move(row), 0, false, {}});
    auto& r = st.round.back();
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
      if (auto err = st.producer->produce(topic, key, value, &r)) {
        --r.pending;
        r.failed = true;
        r.delivery = true;
        r.error = persistence::error_message(err);
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
