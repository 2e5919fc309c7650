#pragma once
// The Kafka kit's base (docs: runtime/README.md, "kafka"): RAII handles for librdkafka's C
// objects, the way userver holds `rd_kafka_*`, and the one place every Kafka client of the
// node is made. Every setting carries the gost config key it comes from, so an error says
// which key to change ("kafka.brokers: ...").
//
// librdkafka is confined to runtime/kafka (linked PRIVATE by gost_runtime); nothing outside
// this folder sees these types.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <librdkafka/rdkafka.h>

namespace gost::runtime::kafka {

/// Calls librdkafka's destroy function for `T` (the deleter of the handles below).
template <class T, void (*Destroy)(T*)>
struct destroyer {
  void operator()(T* p) const noexcept { Destroy(p); }
};

/// A configuration not yet handed to a client (rd_kafka_new takes it over on success).
using conf_ptr =
  std::unique_ptr<rd_kafka_conf_t, destroyer<rd_kafka_conf_t, &rd_kafka_conf_destroy>>;
/// A producer or consumer. A consumer should be closed first (`rd_kafka_consumer_close`, which
/// commits what was stored): `group_consumer` does that; destroy alone closes it too.
using client_ptr = std::unique_ptr<rd_kafka_t, destroyer<rd_kafka_t, &rd_kafka_destroy>>;
using partition_list_ptr = std::unique_ptr<
  rd_kafka_topic_partition_list_t,
  destroyer<rd_kafka_topic_partition_list_t, &rd_kafka_topic_partition_list_destroy>>;
/// A message returned by a consumer poll.
using message_ptr =
  std::unique_ptr<rd_kafka_message_t, destroyer<rd_kafka_message_t, &rd_kafka_message_destroy>>;

/// One librdkafka property, and the gost config key its value comes from. An empty `key`
/// marks gost's own choice (not the operator's): librdkafka refusing it is a bug.
struct setting {
  std::string name;
  std::string value;
  std::string key;
};

/// `bootstrap.servers` from `kafka.brokers`.
setting brokers_setting(const std::string& brokers);

/// What to make.
struct client_spec {
  rd_kafka_type_t type = RD_KAFKA_PRODUCER;
  std::string role; ///< who uses it, for errors and logs: "the outbox relay's producer"
  std::vector<setting> settings;
};

/// Makes the client. `prepare` sets callbacks and the opaque on the configuration first.
/// Errors (gost::errc): invalid_argument naming the config key of a refused setting, or the
/// keys to check when librdkafka cannot make the client; internal when it refuses one of
/// gost's own settings.
caf::expected<client_ptr> make_client(const client_spec& spec,
                                      const std::function<void(rd_kafka_conf_t*)>& prepare = {});

} // namespace gost::runtime::kafka
