#pragma once
// The consumer-group client shared by the node's Kafka readers (after_save hooks, the feed
// exchange): at-least-once by hand — offsets are stored only after a message was handled
// (`rd_kafka_offset_store`) and committed every second.

#include <string>

#include <librdkafka/rdkafka.h>

namespace gost::runtime {

/// A consumer in `group`, subscribed to `topic`, reading from the start when the group has no
/// offsets yet. It may hold a message for up to an hour before it is evicted from the group
/// (long work, or a handler retrying an unavailable service). Null with `error` set.
rd_kafka_t* make_group_consumer(const std::string& brokers, const std::string& group,
                                const std::string& topic, std::string& error);

} // namespace gost::runtime
