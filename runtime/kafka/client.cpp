#include "kafka/client.hpp"

#include <algorithm>

#include "gost/core/errc.hpp"

namespace gost::runtime::kafka {

setting brokers_setting(const std::string& brokers) {
  return {"bootstrap.servers", brokers, "kafka.brokers"};
}

namespace {

/// "kafka.brokers and feed.group": the distinct keys of the operator's settings.
std::string keys_of(const client_spec& spec) {
  std::vector<std::string> keys;
  for (auto& s : spec.settings)
    if (!s.key.empty() && std::find(keys.begin(), keys.end(), s.key) == keys.end())
      keys.push_back(s.key);
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i)
    out += (i == 0 ? "" : i + 1 == keys.size() ? " and " : ", ") + keys[i];
  return out;
}

} // namespace

caf::expected<client_ptr> make_client(const client_spec& spec,
                                      const std::function<void(rd_kafka_conf_t*)>& prepare) {
  char reason[512];
  conf_ptr conf{rd_kafka_conf_new()};
  for (auto& s : spec.settings) {
    if (rd_kafka_conf_set(conf.get(), s.name.c_str(), s.value.c_str(), reason, sizeof(reason))
        == RD_KAFKA_CONF_OK)
      continue;
    if (s.key.empty())
      return make_error(errc::internal, "librdkafka " + std::string{rd_kafka_version_str()}
                                          + " refuses gost's setting " + s.name + "=" + s.value
                                          + " for " + spec.role + ": " + reason);
    return make_error(errc::invalid_argument, s.key + ": librdkafka refuses " + s.name + "="
                                                + s.value + " for " + spec.role + ": " + reason
                                                + "; change " + s.key);
  }
  if (prepare)
    prepare(conf.get());
  client_ptr client{rd_kafka_new(spec.type, conf.get(), reason, sizeof(reason))};
  if (!client) {
    auto keys = keys_of(spec);
    return make_error(errc::invalid_argument, "cannot create " + spec.role + ": " + reason
                                                + (keys.empty() ? "" : "; check " + keys));
  }
  conf.release(); // the client owns it now
  return client;
}

} // namespace gost::runtime::kafka
