// The Kafka kit without a broker: errors that name the config key, and the producer's
// refusals and stop. librdkafka's in-process mock cluster stands in where a delivery is needed.
#include <doctest/doctest.h>

#include <vector>

#include "gost/core/errc.hpp"
#include "kafka/client.hpp"
#include "kafka/producer.hpp"

using namespace gost;
using namespace gost::runtime;
using namespace std::chrono_literals;

namespace {

/// Nothing listens on port 1: every delivery stays outstanding.
constexpr auto nowhere = "127.0.0.1:1";

// Under ThreadSanitizer, librdkafka's broker threads (the mock cluster's too) crash inside
// TSan's allocator at their first getaddrinfo: the library is not instrumented and its threads'
// sanitizer state is not set up. The delivery tests run in every other build.
#ifdef GOST_UNDER_TSAN
constexpr bool brokers_crash_under_tsan = true;
#else
constexpr bool brokers_crash_under_tsan = false;
#endif

} // namespace

TEST_CASE("a setting librdkafka refuses names the config key it came from") {
  kafka::client_spec spec;
  spec.role = "the test's producer";
  spec.settings = {kafka::brokers_setting(nowhere),
                   {"message.timeout.ms", "-5", "kafka.message_timeout"}};
  auto client = kafka::make_client(spec);
  REQUIRE_FALSE(client);
  CHECK(client.error() == errc::invalid_argument);
  auto text = error_message(client.error());
  CHECK(text.rfind("kafka.message_timeout: ", 0) == 0);
  CHECK(text.find("the test's producer") != std::string::npos);
  CHECK(text.find("change kafka.message_timeout") != std::string::npos);
}

TEST_CASE("a setting of gost's own that librdkafka refuses is a bug, not the operator's") {
  kafka::client_spec spec;
  spec.role = "the test's producer";
  spec.settings = {kafka::brokers_setting(nowhere), {"no.such.property", "1", ""}};
  auto client = kafka::make_client(spec);
  REQUIRE_FALSE(client);
  CHECK(client.error() == errc::internal);
  CHECK(error_message(client.error()).find("no.such.property") != std::string::npos);
}

TEST_CASE("a client librdkafka cannot make names every key to check") {
  // Valid one by one, refused together: an idempotent producer needs acks=all.
  kafka::producer_options po;
  po.role = "the test's producer";
  po.settings = {kafka::brokers_setting(nowhere), {"acks", "1", "kafka.acks"}};
  auto p = kafka::producer::make(std::move(po));
  REQUIRE_FALSE(p);
  CHECK(p.error() == errc::invalid_argument);
  auto text = error_message(p.error());
  CHECK(text.rfind("cannot create the test's producer: ", 0) == 0);
  CHECK(text.find("check kafka.brokers and kafka.acks") != std::string::npos);
}

TEST_CASE("the producer reports each delivery to its owner"
          * doctest::skip(brokers_crash_under_tsan)) {
  std::vector<std::pair<void*, bool>> reports;
  kafka::producer_options po;
  po.role = "the test's producer";
  po.settings = {{"test.mock.num.brokers", "1", "kafka.brokers"}};
  po.on_delivery = [&](void* opaque, const char* error, const char*) {
    reports.emplace_back(opaque, error == nullptr);
  };
  auto p = kafka::producer::make(std::move(po));
  REQUIRE_MESSAGE(p, error_message(p.error()));
  int a = 0;
  int b = 0;
  CHECK_FALSE(p->produce("kit-test", "k", "one", &a));
  CHECK_FALSE(p->produce("kit-test", "k", "two", &b));
  stop_signal stop;
  REQUIRE(p->flush(stop));
  REQUIRE(reports.size() == 2);
  CHECK(reports[0] == std::make_pair(static_cast<void*>(&a), true));
  CHECK(reports[1] == std::make_pair(static_cast<void*>(&b), true));
  CHECK(p->take_failures() == 0);
}

TEST_CASE("a full queue is refused as overloaded and counted; a flush gives way to a stop"
          * doctest::skip(brokers_crash_under_tsan)) {
  kafka::producer_options po;
  po.role = "the test's producer";
  po.settings = {kafka::brokers_setting(nowhere), {"queue.buffering.max.messages", "1", ""}};
  po.close_wait = 0ms;
  auto p = kafka::producer::make(std::move(po));
  REQUIRE_MESSAGE(p, error_message(p.error()));
  CHECK_FALSE(p->produce("kit-test", "k", "first"));
  auto refused = p->produce("kit-test", "k", "second");
  CHECK(refused == errc::overloaded);
  CHECK(p->take_failures() == 1);
  CHECK(p->take_failures() == 0);
  stop_signal stop;
  stop.request();
  // The first message can never be delivered: only the stop ends these waits.
  CHECK_FALSE(p->flush(stop));
  CHECK(p->produce("kit-test", "k", "third", stop) == errc::overloaded);
}
