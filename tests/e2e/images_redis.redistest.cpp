// The image functions' Redis layer on a running gostd (images.redis.*): results and error
// statuses go to Redis after PostgreSQL with the TTL they have there; reads ask Redis first and
// fill it from PostgreSQL; without the layer Redis is untouched; a Redis killed mid-run fails
// no request (PostgreSQL answers, the fallbacks are counted) and is used again once back.
#include <doctest/doctest.h>

#include <csignal>
#include <string>

#include "gost/testing/http.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/image_node.hpp"
#include "gost/testing/redis.hpp"

using namespace gost;
using namespace std::chrono_literals;
using testing::at;
using testing::http_server;
using testing::image_node;
using testing::jpeg;
using Stub = v1::ImageService::Stub;

namespace {

std::string unique_prefix() {
  return "gost-e2e:" + std::to_string(::getpid()) + ":"
         + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ":";
}

/// Milliseconds the result `key` has left in PostgreSQL.
int64_t pg_ttl_ms(testing::temp_db& db, const std::string& key) {
  return std::stoll(db.scalar("SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)"
                              "::bigint FROM image_results WHERE result_key = '"
                              + key + "'"));
}

/// A metric's value on the node's /metrics ("" when absent).
std::string metric(image_node& node, const std::string& series) {
  auto text = testing::http_get(static_cast<uint16_t>(node.http_port), "/metrics");
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos)
    return {};
  at += series.size() + 2;
  return text.substr(at, text.find('\n', at) - at);
}

} // namespace

TEST_CASE("Redis on: written after PostgreSQL with its TTL, read first, filled from PostgreSQL") {
  auto photo = jpeg(400, 300);
  http_server srv{[&](const http_server::call& c) -> http_server::reply {
    if (c.path.rfind("/photo.jpg", 0) == 0)
      return {200, photo, {{"Content-Type", "image/jpeg"}}};
    return {404, "no"};
  }};
  auto prefix = unique_prefix();
  testing::redis_client redis{testing::redis_address()};
  REQUIRE_MESSAGE(redis.command({"PING"}) == "PONG",
                  "no Redis at " << testing::redis_address() << ": scripts/redis.sh start");
  testing::temp_db db;
  image_node node{
    db, {"--images.redis.address=" + testing::redis_address(), "--images.redis.prefix=" + prefix}};

  auto done = node.settled(&Stub::Ratio, at(srv.url("/photo.jpg")));
  REQUIRE(done.status() == v1::IMAGE_STATUS_DONE);
  auto key = prefix + done.key();
  REQUIRE(redis.command({"EXISTS", key}) == "1");
  // The TTL copied: what PostgreSQL has left (7 days by default), within a second or two.
  auto pttl = std::stoll(redis.command({"PTTL", key}));
  CHECK(std::abs(pttl - pg_ttl_ms(db, done.key())) < 2000);
  CHECK(pttl > 7 * 86'400'000LL - 60'000);

  // Read first from Redis: a change made behind its back in PostgreSQL is not seen...
  db.scalar("UPDATE image_results SET attempts = 42 WHERE result_key = '" + done.key() + "'");
  v1::ImageResponse r;
  REQUIRE(node.call(&Stub::Ratio, at(srv.url("/photo.jpg")), r).ok());
  CHECK(r.status() == v1::IMAGE_STATUS_DONE);
  CHECK(r.attempts() == 1);
  // ... until Redis lacks the key: then PostgreSQL answers and fills it with its TTL left.
  redis.command({"DEL", key});
  r.Clear();
  REQUIRE(node.call(&Stub::Ratio, at(srv.url("/photo.jpg")), r).ok());
  CHECK(r.attempts() == 42);
  REQUIRE(redis.command({"EXISTS", key}) == "1");
  CHECK(std::abs(std::stoll(redis.command({"PTTL", key})) - pg_ttl_ms(db, done.key())) < 2000);

  // A request's own ttl, and an error status, are cached the same way.
  auto short_lived = at(srv.url("/photo.jpg?ttl"));
  short_lived.mutable_options()->mutable_ttl()->set_seconds(3600);
  auto hour = node.settled(&Stub::Ratio, short_lived);
  REQUIRE(hour.status() == v1::IMAGE_STATUS_DONE);
  auto hour_ttl = std::stoll(redis.command({"PTTL", prefix + hour.key()}));
  CHECK(hour_ttl > 3'590'000);
  CHECK(hour_ttl <= 3'600'000);
  auto missing = node.settled(&Stub::Ratio, at(srv.url("/gone.jpg")));
  CHECK(missing.error_kind() == "http_404");
  CHECK(redis.command({"EXISTS", prefix + missing.key()}) == "1");

  CHECK(std::stoll(metric(node, "gost_image_redis_hits_total")) >= 1);
  CHECK(metric(node, "gost_image_redis_fallbacks_total") == "0");
  CHECK(metric(node, "gost_dependency_up{dependency=\"redis\"}") == "1");
  CHECK(std::stoll(metric(node, "gost_image_tasks_computed_total{function=\"ratio\"}")) >= 2);
  redis.command({"DEL", key, prefix + hour.key(), prefix + missing.key()});
}

TEST_CASE("Redis off: results are served from PostgreSQL and nothing goes to Redis") {
  auto photo = jpeg(120, 80);
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, photo}; }};
  testing::redis_client redis{testing::redis_address()};
  REQUIRE(redis.command({"PING"}) == "PONG");
  testing::temp_db db;
  image_node node{db};
  auto done = node.settled(&Stub::Ratio, at(srv.url("/off.jpg")));
  REQUIRE(done.status() == v1::IMAGE_STATUS_DONE);
  CHECK(done.ratio().width() == 120);
  CHECK(redis.command({"EXISTS", "gost:img:" + done.key()}) == "0"); // the default prefix
  CHECK(metric(node, "gost_dependency_up{dependency=\"redis\"}").empty());
}

TEST_CASE("Redis killed -9 mid-run: every request is answered, fallbacks counted; then back") {
  auto photo = jpeg(200, 100);
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, photo}; }};
  testing::private_redis server;
  testing::temp_db db;
  image_node node{db, {"--images.redis.address=" + server.address()}};
  testing::redis_client redis{server.address()};

  auto first = node.settled(&Stub::Ratio, at(srv.url("/k.jpg?n=0")));
  REQUIRE(first.status() == v1::IMAGE_STATUS_DONE);
  REQUIRE(redis.command({"EXISTS", "gost:img:" + first.key()}) == "1");

  server.kill9();
  // Requests keep their answers: cached ones from PostgreSQL, new ones queued and computed.
  for (int i = 0; i < 20; ++i) {
    auto r = node.settled(&Stub::Ratio, at(srv.url("/k.jpg?n=" + std::to_string(i))));
    CHECK(r.status() == v1::IMAGE_STATUS_DONE);
    CHECK(r.ratio().width() == 200);
  }
  CHECK(std::stoll(metric(node, "gost_image_redis_fallbacks_total")) >= 1);
  CHECK(metric(node, "gost_dependency_up{dependency=\"redis\"}") == "0");
  CHECK(node.proc->running());

  server.start(); // empty: nothing was saved
  v1::ImageResponse r;
  CHECK(testing::eventually(10s, [&] {
    r.Clear();
    REQUIRE(node.call(&Stub::Ratio, at(srv.url("/k.jpg?n=7")), r).ok());
    return redis.command({"EXISTS", "gost:img:" + r.key()}) == "1"; // filled again
  }));
  CHECK(r.status() == v1::IMAGE_STATUS_DONE);
  CHECK(metric(node, "gost_dependency_up{dependency=\"redis\"}") == "1");
}
