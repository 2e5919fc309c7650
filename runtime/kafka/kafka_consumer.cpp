#include "kafka/kafka_consumer.hpp"

#include <utility>

namespace gost::runtime {

rd_kafka_t* make_group_consumer(const std::string& brokers, const std::string& group,
                                const std::string& topic, std::string& error) {
  char err[512];
  auto* conf = rd_kafka_conf_new();
  for (auto [k, v] : {std::pair<const char*, std::string>{"bootstrap.servers", brokers},
                      {"group.id", group},
                      {"auto.offset.reset", "earliest"},
                      {"enable.auto.commit", "true"},
                      {"enable.auto.offset.store", "false"},
                      {"auto.commit.interval.ms", "1000"},
                      {"max.poll.interval.ms", "3600000"}})
    if (rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
      error = std::string{"kafka consumer setting "} + k + ": " + err;
      rd_kafka_conf_destroy(conf);
      return nullptr;
    }
  auto* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  if (rk == nullptr) {
    error = std::string{"cannot create a Kafka consumer for group "} + group + ": " + err;
    return nullptr;
  }
  rd_kafka_poll_set_consumer(rk);
  auto* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, topic.c_str(), RD_KAFKA_PARTITION_UA);
  auto sub = rd_kafka_subscribe(rk, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  if (sub != RD_KAFKA_RESP_ERR_NO_ERROR) {
    error = "cannot subscribe to " + topic + ": " + rd_kafka_err2str(sub);
    rd_kafka_destroy(rk);
    return nullptr;
  }
  return rk;
}

} // namespace gost::runtime
