// Kafka tier smoke test: produce and consume through librdkafka against the real broker that
// scripts/kafka.sh starts (GOST_TEST_KAFKA, default 127.0.0.1:19092).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>

#include <librdkafka/rdkafka.h>

namespace {

std::string brokers() {
  auto e = std::getenv("GOST_TEST_KAFKA");
  return e ? e : "127.0.0.1:19092";
}

struct conf_deleter {
  void operator()(rd_kafka_conf_t* c) const { rd_kafka_conf_destroy(c); }
};
struct kafka_deleter {
  void operator()(rd_kafka_t* k) const { rd_kafka_destroy(k); }
};
using conf_ptr = std::unique_ptr<rd_kafka_conf_t, conf_deleter>;
using kafka_ptr = std::unique_ptr<rd_kafka_t, kafka_deleter>;

conf_ptr make_conf(std::initializer_list<std::pair<const char*, std::string>> kvs) {
  conf_ptr c{rd_kafka_conf_new()};
  char err[512];
  for (auto& [k, v] : kvs)
    REQUIRE_MESSAGE(rd_kafka_conf_set(c.get(), k, v.c_str(), err, sizeof(err)) == RD_KAFKA_CONF_OK,
                    err);
  return c;
}

} // namespace

TEST_CASE("produce and consume through the real broker") {
  std::mt19937_64 rng{std::random_device{}()};
  auto topic = "gost-smoke-" + std::to_string(rng());
  constexpr int n = 100;
  char err[512];

  auto pconf = make_conf({{"bootstrap.servers", brokers()},
                          {"enable.idempotence", "true"},
                          {"message.timeout.ms", "30000"}});
  kafka_ptr producer{rd_kafka_new(RD_KAFKA_PRODUCER, pconf.release(), err, sizeof(err))};
  REQUIRE_MESSAGE(producer, err);
  for (int i = 0; i < n; ++i) {
    auto key = "offer-" + std::to_string(i % 7);
    auto val = "value-" + std::to_string(i);
    auto rc = rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC(topic.c_str()),
                                RD_KAFKA_V_KEY(key.data(), key.size()),
                                RD_KAFKA_V_VALUE(val.data(), val.size()),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    REQUIRE(rc == RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  REQUIRE(rd_kafka_flush(producer.get(), 30'000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  CHECK(rd_kafka_outq_len(producer.get()) == 0);

  auto cconf = make_conf({{"bootstrap.servers", brokers()},
                          {"group.id", topic + "-group"},
                          {"auto.offset.reset", "earliest"},
                          {"enable.partition.eof", "false"}});
  kafka_ptr consumer{rd_kafka_new(RD_KAFKA_CONSUMER, cconf.release(), err, sizeof(err))};
  REQUIRE_MESSAGE(consumer, err);
  rd_kafka_poll_set_consumer(consumer.get());
  auto* subs = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(subs, topic.c_str(), RD_KAFKA_PARTITION_UA);
  REQUIRE(rd_kafka_subscribe(consumer.get(), subs) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(subs);

  std::set<std::string> seen;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
  while (seen.size() < n && std::chrono::steady_clock::now() < deadline) {
    auto* m = rd_kafka_consumer_poll(consumer.get(), 500);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
      seen.emplace(static_cast<const char*>(m->payload), m->len);
    else
      MESSAGE("consumer: " << rd_kafka_message_errstr(m));
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(consumer.get());
  CHECK(seen.size() == n);
  CHECK(seen.count("value-0") == 1);
  CHECK(seen.count("value-99") == 1);
}
