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
  std::map<std::string, v1::ImageNotice> seen;
  testing::consume_topic(
    topic,
    [&](const rd_kafka_message_t& m) {
      v1::ImageNotice n;
      REQUIRE(n.ParseFromArray(m.payload, static_cast<int>(m.len)));
      auto key = testing::key_of(m);
      CHECK(key == n.response().key());
      seen[key] = n;
    },
    [&] { return seen.size() >= want; });
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
