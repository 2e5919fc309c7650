// The image functions' Kafka queue, its asking half, against the real broker (GOST_TEST_KAFKA)
// and PostgreSQL: a task is on its function's topic under its result key once `enqueue`
// returns; a producer in a fatal state is replaced, the asks in between failing UNAVAILABLE
// without leaving a pending status behind.
#include <doctest/doctest.h>

#include <random>
#include <set>
#include <string>

#include "gost/core/errc.hpp"
#include "gost/persistence/images/images.hpp"
#include "gost/testing/kafka.hpp"
#include "gost/testing/migrated_db.hpp"
#include "gost/testing/process.hpp" // eventually
#include "gost/v1/images.pb.h"
#include "kafka/image_queue.hpp"

using namespace gost;
using namespace gost::runtime;
using namespace std::chrono_literals;

namespace {

persistence::image_request request(const std::string& url) {
  persistence::image_request r;
  r.key = "key-" + url; // the key's derivation is gost_images'; any unique text does here
  r.task = {"ratio", 1, url, 0, 60'000, 0, {}};
  r.pending_ttl_ms = 60'000;
  return r;
}

} // namespace

TEST_CASE("image queue: tasks on the topic when asked; a fatal producer is replaced") {
  testing::migrated_db data;
  auto& db = data.db;
  auto& pool = data.pool;
  std::mt19937_64 rng{std::random_device{}()};
  image_queue_options o;
  o.kafka.brokers = testing::kafka_brokers();
  o.kafka.message_timeout = 5s;
  o.kafka.session_timeout = 6s;
  o.images.kafka_topic_prefix = "gost-imgq-" + std::to_string(rng()) + ".";
  o.images.kafka_group = o.images.kafka_topic_prefix + "group";
  o.partitions = 8;
  auto queue = image_queue::start(o);
  REQUIRE_MESSAGE(queue, error_message(queue.error()));
  auto& q = **queue;

  REQUIRE_FALSE(q.enqueue(pool, {request("http://img/a.jpg")}));
  CHECK(db.scalar("SELECT status FROM image_results WHERE result_key = 'key-http://img/a.jpg'")
        == "pending");

  // The broker's fatal word: asks fail (naming the queue) until a fresh producer is there.
  q.test_fatal_error();
  int n = 0, failures = 0;
  std::string last_error;
  std::string asked;
  CHECK(testing::eventually(30s, [&] {
    asked = "http://img/b" + std::to_string(n++) + ".jpg";
    if (auto err = q.enqueue(pool, {request(asked)})) {
      ++failures;
      last_error = error_message(err);
      return false;
    }
    return true;
  }));
  CHECK(failures >= 1);
  CHECK(last_error.find("images.queue=kafka") != std::string::npos);
  // The failed asks left nothing pending: only the two that were taken are.
  CHECK(db.scalar("SELECT count(*) FROM image_results WHERE status = 'pending'") == "2");

  // Both taken tasks are on the function's topic, keyed by their result keys.
  std::set<std::string> keys;
  testing::consume_topic(
    o.images.kafka_topic_prefix + "ratio",
    [&](const rd_kafka_message_t& m) {
      v1::ImageTask t;
      REQUIRE(t.ParseFromArray(m.payload, static_cast<int>(m.len)));
      CHECK(testing::key_of(m) == "key-" + t.args());
      CHECK(t.ttl_ms() == 60'000);
      keys.insert(testing::key_of(m));
    },
    [&] { return keys.count("key-" + asked) != 0 && keys.count("key-http://img/a.jpg") != 0; });
  CHECK(keys.count("key-http://img/a.jpg") == 1);
  CHECK(keys.count("key-" + asked) == 1);
}
