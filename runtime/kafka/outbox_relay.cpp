// The outbox relay: rounds of "read the oldest rows of the owned shards, produce their events,
// wait for every delivery report, delete the rows delivered". One round in flight at a time,
// so a broken broker never makes the relay queue the same rows twice.

#include "kafka/outbox_relay.hpp"

#include <deque>
#include <map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include "gost/core/stats.hpp"
#include "gost/persistence/outbox/outbox.hpp"
#include "gost/v1/events.pb.h"
#include "cluster/router.hpp"

namespace gost::runtime {

namespace {


/// One outbox row of the round in flight.
struct row_state {
  persistence::outbox_row row;
  int pending = 0; ///< events without a delivery report yet
  bool failed = false;
  std::string error;
};

struct relay_state {
  static inline const char* name = "gost.outbox";
  relay_options opts;
  std::deque<row_state> round; ///< stable addresses: delivery reports point into it
  bool waiting_logged = false;
  // Declared last: destroyed first, while `round` (which its reports point into) still lives.
  std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> producer{nullptr, [](rd_kafka_t* p) {
                                                                   // Reports of purged messages
                                                                   // arrive during destroy.
                                                                   rd_kafka_flush(p, 2000);
                                                                   rd_kafka_destroy(p);
                                                                 }};
};

using self_ptr = caf::stateful_actor<relay_state>*;

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void*) {
  auto* r = static_cast<row_state*>(m->_private);
  if (r == nullptr)
    return;
  --r->pending;
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    r->failed = true;
    r->error = rd_kafka_err2str(m->err);
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
  for (auto& r : st.round) {
    if (r.failed) {
      if (!blocked[r.row.shard])
        spdlog::warn("outbox publish failed shard={} row={} error={}; retrying", r.row.shard,
                     r.row.id, r.error);
      blocked[r.row.shard] = true;
      ++failures;
      continue;
    }
    if (blocked[r.row.shard])
      continue;
    done.push_back(r.row.id);
    events += static_cast<uint64_t>(r.row.events);
  }
  if (auto err = persistence::delete_outbox(*st.opts.pool, done)) {
    // Published but not deleted: they go out again (at least once).
    spdlog::warn("outbox rows not deleted error={}", persistence::error_message(err));
  } else {
    st.opts.stats->outbox_events_published.fetch_add(events, std::memory_order_relaxed);
  }
  st.opts.stats->outbox_publish_failures.fetch_add(failures, std::memory_order_relaxed);
  st.round.clear();
}

void start_round(self_ptr self) {
  auto& st = self->state;
  auto rows = persistence::read_outbox(*st.opts.pool, st.opts.routes->local_shards(),
                                       st.opts.rows_per_round);
  if (!rows) {
    spdlog::warn("outbox read failed error={}", persistence::error_message(rows.error()));
    return;
  }
  for (auto& row : *rows) {
    st.round.push_back({std::move(row), 0, false, {}});
    auto& r = st.round.back();
    v1::OutboxBatch batch;
    if (!batch.ParseFromString(r.row.payload)) {
      // Never written by gost: keep it (an operator looks at it) but do not block its shard.
      spdlog::error("outbox row does not parse as gost.v1.OutboxBatch row={} shard={}", r.row.id,
                    r.row.shard);
      r.failed = true;
      r.error = "unparsable";
      continue;
    }
    for (auto& e : batch.events()) {
      auto key = e.offer().id();
      auto value = e.SerializeAsString();
      ++r.pending;
      auto rc = rd_kafka_producev(st.producer.get(), RD_KAFKA_V_TOPIC(st.opts.topic.c_str()),
                                  RD_KAFKA_V_KEY(key.data(), key.size()),
                                  RD_KAFKA_V_VALUE(value.data(), value.size()),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                  RD_KAFKA_V_OPAQUE(&r), RD_KAFKA_V_END);
      if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
        --r.pending;
        r.failed = true;
        r.error = rd_kafka_err2str(rc);
        break;
      }
    }
  }
}

void tick(self_ptr self) {
  auto& st = self->state;
  rd_kafka_poll(st.producer.get(), 0); // serves delivery reports
  if (!st.round.empty()) {
    for (auto& r : st.round)
      if (r.pending > 0) {
        if (!st.waiting_logged) {
          spdlog::debug("outbox waiting for delivery reports rows={}", st.round.size());
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

caf::actor spawn_outbox_relay(caf::actor_system& sys, relay_options opts, std::string& error) {
  char err[512];
  auto* conf = rd_kafka_conf_new();
  auto set = [&](const char* k, const std::string& v) {
    if (rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
      error = std::string{"kafka setting "} + k + ": " + err;
      return false;
    }
    return true;
  };
  bool ok = true;
  if (opts.brokers.empty()) {
    spdlog::warn("kafka.brokers is empty: after-save events go to librdkafka's in-process mock "
                 "cluster and are not kept anywhere (set kafka.brokers for a real broker)");
    ok = set("test.mock.num.brokers", "1");
  } else {
    ok = set("bootstrap.servers", opts.brokers);
  }
  ok = ok && set("enable.idempotence", "true") && set("linger.ms", "5")
       && set("message.timeout.ms", std::to_string(opts.message_timeout.count()));
  if (!ok) {
    rd_kafka_conf_destroy(conf);
    return {};
  }
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  auto* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (producer == nullptr) {
    error = std::string{"cannot create the Kafka producer: "} + err;
    return {};
  }
  return sys.spawn<caf::detached>([opts, producer](caf::stateful_actor<relay_state>* self) mutable
                                  -> caf::behavior {
    self->state.opts = std::move(opts);
    self->state.producer.reset(producer);
    self->send(self, tick_atom_v);
    return {
      [=](tick_atom) {
        tick(self);
        self->delayed_send(self, self->state.opts.poll, tick_atom_v);
      },
    };
  });
}

} // namespace gost::runtime
