#pragma once
// Test support: where the Kafka tier's broker is, and a reader of a topic from its start.

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <librdkafka/rdkafka.h>

namespace gost::testing {

/// The broker of the kafka tier (`GOST_TEST_KAFKA`, set by scripts/test.sh; default the
/// loopback broker scripts/kafka.sh starts).
inline std::string kafka_brokers() {
  auto e = std::getenv("GOST_TEST_KAFKA");
  return e != nullptr ? e : "127.0.0.1:19092";
}

/// Reads `topic` from its start (a consumer group of its own) and hands each message to
/// `take(const rd_kafka_message_t&)` until `enough()` says so or `limit` passes.
template <class Take, class Enough>
void consume_topic(const std::string& topic, Take take, Enough enough,
                   std::chrono::seconds limit = std::chrono::seconds{60}) {
  char err[512];
  auto* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "group.id", (topic + "-check").c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof(err));
  auto* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  REQUIRE_MESSAGE(consumer != nullptr, err);
  rd_kafka_poll_set_consumer(consumer);
  auto* subs = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(subs, topic.c_str(), RD_KAFKA_PARTITION_UA);
  REQUIRE(rd_kafka_subscribe(consumer, subs) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(subs);
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!enough() && std::chrono::steady_clock::now() < deadline) {
    auto* m = rd_kafka_consumer_poll(consumer, 500);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
      take(*m);
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
}

/// Produces each (key, value) to `topic` and waits until the broker acknowledged them all.
inline void produce_to(const std::string& topic,
                       const std::vector<std::pair<std::string, std::string>>& messages) {
  char err[512];
  auto* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof(err));
  auto* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  REQUIRE_MESSAGE(producer != nullptr, err);
  for (auto& [key, value] : messages)
    REQUIRE(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic.c_str()),
                              RD_KAFKA_V_KEY(key.data(), key.size()),
                              RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)
            == RD_KAFKA_RESP_ERR_NO_ERROR);
  CHECK(rd_kafka_flush(producer, 30'000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(producer);
}

namespace detail {

/// Runs one admin request on a fresh client: `call(rk, queue)` starts it; waits for its result
/// event and hands it to `check(event)`.
template <class Call, class Check>
void kafka_admin(Call call, Check check) {
  char err[512];
  auto* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof(err));
  auto* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  REQUIRE_MESSAGE(rk != nullptr, err);
  auto* q = rd_kafka_queue_new(rk);
  call(rk, q);
  auto* ev = rd_kafka_queue_poll(q, 30'000);
  REQUIRE_MESSAGE(ev != nullptr, "no answer from the broker's admin API in 30 s");
  REQUIRE_MESSAGE(rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_NO_ERROR,
                  rd_kafka_event_error_string(ev));
  check(ev);
  rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
}

} // namespace detail

/// Creates `topic` (one partition) with topic-level `configs` such as
/// {"max.message.bytes", "20000"}; waits for the broker's answer.
inline void create_topic(const std::string& topic,
                         const std::vector<std::pair<std::string, std::string>>& configs) {
  detail::kafka_admin(
    [&](rd_kafka_t* rk, rd_kafka_queue_t* q) {
      char err[512];
      auto* nt = rd_kafka_NewTopic_new(topic.c_str(), 1, 1, err, sizeof(err));
      REQUIRE_MESSAGE(nt != nullptr, err);
      for (auto& [k, v] : configs)
        REQUIRE(rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str())
                == RD_KAFKA_RESP_ERR_NO_ERROR);
      rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
      rd_kafka_NewTopic_destroy(nt);
    },
    [&](rd_kafka_event_t* ev) {
      size_t n = 0;
      auto** res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
      REQUIRE(n == 1);
      auto* why = rd_kafka_topic_result_error_string(res[0]);
      REQUIRE_MESSAGE(rd_kafka_topic_result_error(res[0]) == RD_KAFKA_RESP_ERR_NO_ERROR,
                      (why != nullptr ? why : ""));
    });
}

/// Sets topic-level `configs` of `topic` (AlterConfigs: those not given return to the
/// broker's defaults).
inline void alter_topic(const std::string& topic,
                        const std::vector<std::pair<std::string, std::string>>& configs) {
  detail::kafka_admin(
    [&](rd_kafka_t* rk, rd_kafka_queue_t* q) {
      auto* res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str());
      for (auto& [k, v] : configs)
        REQUIRE(rd_kafka_ConfigResource_set_config(res, k.c_str(), v.c_str())
                == RD_KAFKA_RESP_ERR_NO_ERROR);
      rd_kafka_AlterConfigs(rk, &res, 1, nullptr, q);
      rd_kafka_ConfigResource_destroy(res);
    },
    [&](rd_kafka_event_t* ev) {
      size_t n = 0;
      auto** res =
        rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev), &n);
      REQUIRE(n == 1);
      auto* why = rd_kafka_ConfigResource_error_string(res[0]);
      REQUIRE_MESSAGE(rd_kafka_ConfigResource_error(res[0]) == RD_KAFKA_RESP_ERR_NO_ERROR,
                      (why != nullptr ? why : ""));
    });
}

/// A message's key and value as strings.
inline std::string key_of(const rd_kafka_message_t& m) {
  return {static_cast<const char*>(m.key), m.key_len};
}
inline std::string value_of(const rd_kafka_message_t& m) {
  return {static_cast<const char*>(m.payload), m.len};
}

} // namespace gost::testing
