// Notification of finished image results through the real Kafka broker (images.notify_topic;
// GOST_TEST_KAFKA): each result and error status is published keyed by its result key, as a
// gost.v1.ImageNotice, through the outbox (the rows go once the broker acknowledged them).
#include <doctest/doctest.h>

#include <map>
#include <random>

#include <librdkafka/rdkafka.h>

#include "gost/testing/http_server.hpp"
#include "gost/testing/image_node.hpp"
#include "gost/testing/kafka.hpp"

using namespace gost;
using namespace std::chrono_literals;
using testing::at;
using testing::http_server;
using testing::image_node;
using testing::jpeg;
using Stub = v1::ImageService::Stub;

namespace {

/// Reads `topic` from the start until `want` distinct keys arrived (or a minute passed).
std::map<std::string, v1::ImageNotice> consume(const std::string& topic, size_t want) {
  char err[512];
  auto* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", testing::kafka_brokers().c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "group.id", (topic + "-check").c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof(err));
  auto* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  REQUIRE_MESSAGE(consumer != nullptr, err);
  rd_kafka_poll_set_consumer(consumer);
  auto* subs = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(subs, topic.c_str(), RD_KAFKA_PARTITION_UA);
  REQUIRE(rd_kafka_subscribe(consumer, subs) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(subs);
  std::map<std::string, v1::ImageNotice> seen;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (seen.size() < want && std::chrono::steady_clock::now() < deadline) {
    auto* m = rd_kafka_consumer_poll(consumer, 500);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      v1::ImageNotice n;
      REQUIRE(n.ParseFromArray(m->payload, static_cast<int>(m->len)));
      std::string key{static_cast<const char*>(m->key), m->key_len};
      CHECK(key == n.response().key());
      seen[key] = n;
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  return seen;
}

} // namespace

TEST_CASE("finished results and error statuses are published keyed by the result key") {
  auto photo = jpeg(640, 480);
  http_server srv{[&](const http_server::call& c) -> http_server::reply {
    if (c.path == "/photo.jpg")
      return {200, photo, {{"Content-Type", "image/jpeg"}}};
    return {404, "no"};
  }};
  std::mt19937_64 rng{std::random_device{}()};
  auto topic = "gost-images-" + std::to_string(rng());
  testing::temp_db db;
  image_node node{db,
                  {"--kafka.brokers=" + testing::kafka_brokers(), "--kafka.message_timeout=5s",
                   "--images.notify_topic=" + topic, "--outbox.poll=20ms"}};

  auto ratio = node.settled(&Stub::Ratio, at(srv.url("/photo.jpg")));
  REQUIRE(ratio.status() == v1::IMAGE_STATUS_DONE);
  auto rotate_req = at(srv.url("/photo.jpg"));
  rotate_req.set_angle(-90);
  auto rotated = node.settled(&Stub::Rotate, rotate_req);
  REQUIRE(rotated.status() == v1::IMAGE_STATUS_DONE);
  auto missing = node.settled(&Stub::MainColor, at(srv.url("/gone.jpg")));
  REQUIRE(missing.status() == v1::IMAGE_STATUS_ERROR);

  auto seen = consume(topic, 3);
  REQUIRE(seen.size() == 3);
  auto& r = seen.at(ratio.key());
  CHECK(r.function() == v1::IMAGE_FUNCTION_RATIO);
  CHECK(r.url() == srv.url("/photo.jpg"));
  CHECK(r.response().status() == v1::IMAGE_STATUS_DONE);
  CHECK(r.response().ratio().width() == 640);
  CHECK(r.response().ratio().height() == 480);
  auto& rot = seen.at(rotated.key());
  CHECK(rot.function() == v1::IMAGE_FUNCTION_ROTATE);
  CHECK(rot.angle() == 270);
  CHECK(rot.response().rotated().url() == rotated.rotated().url());
  auto& err = seen.at(missing.key());
  CHECK(err.function() == v1::IMAGE_FUNCTION_MAIN_COLOR);
  CHECK(err.response().status() == v1::IMAGE_STATUS_ERROR);
  CHECK(err.response().error_kind() == "http_404");
  // Published, so gone from the outbox.
  CHECK(testing::eventually(
    30s, [&] { return db.scalar("SELECT count(*) FROM outbox_batches") == "0"; }));
}
