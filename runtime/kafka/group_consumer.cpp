#include "kafka/group_consumer.hpp"

#include <algorithm>
#include <map>
#include <thread>

#include "gost/core/dependency.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "kafka/client.hpp"

namespace gost::runtime::kafka {

namespace {

const auto lg = gost::log::get("kafka");

/// The brokers cannot be reached (as opposed to an error of the group or the topic).
bool transport_error(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN
         || err == RD_KAFKA_RESP_ERR__RESOLVE;
}

} // namespace

struct group_consumer::impl {
  consumer_options opts;
  batch_handler handler;
  size_t max_batch = 1;
  stop_signal stop;
  client_ptr client;
  std::thread thread; // joined by ~impl before the client closes

  ~impl() {
    stop.request();
    if (thread.joinable())
      thread.join();
    if (client)
      rd_kafka_consumer_close(client.get()); // commits the stored offsets, leaves the group
  }

  /// Reads the batch again next: seeks each of its partitions back to its first message there
  /// after the back-off. Retries a seek until it succeeds or the consumer stops (going on
  /// without it would skip the message).
  void read_again(const std::vector<message_ptr>& batch, backoff& delay) {
    std::map<int32_t, const rd_kafka_message_t*> first; // per partition (batches keep order)
    for (auto& m : batch)
      first.emplace(m->partition, m.get());
    if (!delay.wait(stop))
      return;
    for (auto& [partition, m] : first)
      for (;;) {
        auto err = rd_kafka_seek(m->rkt, m->partition, m->offset, 5000);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
          break;
        lg->warn("{} cannot seek back topic={} partition={} offset={} error={}; retrying",
                 opts.role, opts.topic, m->partition, m->offset, rd_kafka_err2str(err));
        if (!delay.wait(stop))
          return;
      }
  }

  /// The next message, or null (none within `wait`, or an error: reported here).
  message_ptr next(int wait_ms) {
    message_ptr m{rd_kafka_consumer_poll(client.get(), wait_ms)};
    if (!m)
      return m;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (opts.broker && transport_error(m->err))
        opts.broker->failed(rd_kafka_message_errstr(m.get()));
      else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
        lg->warn("{} error={}", opts.role, rd_kafka_message_errstr(m.get()));
      return nullptr;
    }
    if (opts.broker)
      opts.broker->succeeded();
    return m;
  }

  void loop() {
    backoff delay{opts.retry_first, opts.retry_cap};
    std::vector<message_ptr> batch;
    std::vector<message_view> views;
    while (!stop.requested()) {
      batch.clear();
      views.clear();
      if (auto m = next(200))
        batch.push_back(std::move(m));
      else
        continue;
      while (batch.size() < max_batch) // what is fetched already, without waiting
        if (auto m = next(0))
          batch.push_back(std::move(m));
        else
          break;
      for (auto& m : batch)
        views.push_back(
          {{static_cast<const char*>(m->payload), m->len}, opts.topic, m->partition, m->offset});
      if (handler(views, stop) == verdict::handled) {
        for (auto& m : batch)
          rd_kafka_offset_store(m->rkt, m->partition, m->offset);
        delay.reset();
      } else if (!stop.requested()) {
        read_again(batch, delay);
      }
    }
  }
};

group_consumer::group_consumer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

group_consumer::~group_consumer() = default;

void group_consumer::request_stop() {
  impl_->stop.request();
}

caf::expected<std::unique_ptr<group_consumer>> make_group_consumer(consumer_options opts,
                                                                   message_handler handler) {
  return make_group_consumer(
    std::move(opts),
    [h = std::move(handler)](const std::vector<message_view>& batch, const stop_signal& stop) {
      return h(batch.front(), stop);
    },
    1);
}

caf::expected<std::unique_ptr<group_consumer>>
make_group_consumer(consumer_options opts, batch_handler handler, size_t max_batch) {
  client_spec spec;
  spec.type = RD_KAFKA_CONSUMER;
  spec.role = opts.role;
  spec.settings = {brokers_setting(opts.brokers),
                   {"group.id", opts.group, opts.group_key},
                   // gost's own choices: at least once by hand (offsets stored after handling,
                   // committed every second), from the start for a new group, and an hour per
                   // message before the group evicts the member.
                   {"auto.offset.reset", "earliest", ""},
                   {"enable.auto.commit", "true", ""},
                   {"enable.auto.offset.store", "false", ""},
                   {"auto.commit.interval.ms", "1000", ""},
                   {"max.poll.interval.ms", "3600000", ""}};
  spec.settings.push_back(
    {"session.timeout.ms", std::to_string(opts.session_timeout.count()), "kafka.session_timeout"});
  spec.settings.insert(spec.settings.end(), opts.settings.begin(), opts.settings.end());
  auto client = make_client(spec);
  if (!client)
    return std::move(client.error());
  rd_kafka_poll_set_consumer(client->get());
  partition_list_ptr topics{rd_kafka_topic_partition_list_new(1)};
  rd_kafka_topic_partition_list_add(topics.get(), opts.topic.c_str(), RD_KAFKA_PARTITION_UA);
  if (auto err = rd_kafka_subscribe(client->get(), topics.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return make_error(errc::invalid_argument,
                      opts.topic_key + ": " + opts.role + " cannot subscribe to " + opts.topic
                        + ": " + rd_kafka_err2str(err) + "; change " + opts.topic_key);
  auto p = std::make_unique<group_consumer::impl>();
  p->opts = std::move(opts);
  p->handler = std::move(handler);
  p->max_batch = std::max<size_t>(1, max_batch);
  p->client = std::move(*client);
  auto* raw = p.get();
  p->thread = std::thread{[raw] { raw->loop(); }};
  return std::make_unique<group_consumer>(std::move(p));
}

} // namespace gost::runtime::kafka
