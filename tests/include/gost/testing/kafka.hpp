#pragma once
// Test support: where the Kafka tier's broker is.

#include <cstdlib>
#include <string>

namespace gost::testing {

/// The broker of the kafka tier (`GOST_TEST_KAFKA`, set by scripts/test.sh; default the
/// loopback broker scripts/kafka.sh starts).
inline std::string kafka_brokers() {
  auto e = std::getenv("GOST_TEST_KAFKA");
  return e != nullptr ? e : "127.0.0.1:19092";
}

} // namespace gost::testing
