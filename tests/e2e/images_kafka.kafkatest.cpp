// The image functions' Kafka queue through the real broker (images.queue=kafka; GOST_TEST_KAFKA):
// tasks go to a topic per function keyed by their result key, never to image_tasks; identical
// requests are computed once (the consumer skips a task answered since it was asked); a
// recoverable failure is retried through PostgreSQL; and every task acknowledged PENDING before
// a kill -9 — taken by the consumer and mid-fetch — is computed after the restart; on two
// nodes the broker spreads the tasks and a killed node's move to the other.
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <thread>

#include <librdkafka/rdkafka.h>

#include "gost/testing/http_server.hpp"
#include "gost/testing/image_node.hpp"
#include "gost/testing/kafka.hpp"
#include "gost/v1/admin.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::at;
using testing::http_server;
using testing::image_node;
using testing::jpeg;
using Stub = v1::ImageService::Stub;

namespace {

/// gostd flags for the Kafka queue on topics and groups of this test alone.
std::vector<std::string> kafka_queue(const std::string& prefix) {
  return {"--kafka.brokers=" + testing::kafka_brokers(),
          "--kafka.message_timeout=5s",
          "--kafka.session_timeout=6s", // a killed node's partitions move on within seconds
          "--images.queue=kafka",
          "--images.kafka.topic_prefix=" + prefix,
          "--images.kafka.group=" + prefix + "group"};
}

std::string fresh_prefix() {
  std::mt19937_64 rng{std::random_device{}()};
  return "gost-imgq-" + std::to_string(rng()) + ".";
}

/// Requests per path seen by a test's image server.
struct hits {
  std::mutex m;
  std::map<std::string, int> by_path;
  void add(const std::string& path) {
    std::lock_guard<std::mutex> g{m};
    ++by_path[path];
  }
  int of(const std::string& path) {
    std::lock_guard<std::mutex> g{m};
    return by_path[path];
  }
};

} // namespace

TEST_CASE("Kafka queue: tasks on a topic per function, identical requests computed once") {
  auto photo = jpeg(320, 200);
  hits seen;
  std::atomic<int> flaky_calls{0};
  http_server srv{[&](const http_server::call& c) -> http_server::reply {
    seen.add(c.path);
    if (c.path == "/photo.jpg")
      return {200, photo, {{"Content-Type", "image/jpeg"}}};
    if (c.path == "/flaky.jpg") // fails twice (recoverable), then answers
      return ++flaky_calls <= 2 ? http_server::reply{503, "busy"} : http_server::reply{200, photo};
    return {404, "no"};
  }};
  auto prefix = fresh_prefix();
  testing::temp_db db;
  image_node node{db, kafka_queue(prefix)};

  // 100 identical asks at once from 4 clients (25 each, some in batches): one computation.
  std::vector<std::thread> clients;
  std::atomic<int> answered{0}, failed{0};
  for (int c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; i < 5; ++i) {
        v1::ImageBatchRequest batch;
        batch.set_function(v1::IMAGE_FUNCTION_RATIO);
        for (int j = 0; j < 4; ++j)
          *batch.add_requests() = at(srv.url("/photo.jpg"));
        v1::ImageBatchResponse out;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 10s);
        if (node.stub->Batch(&ctx, batch, &out).ok() && out.responses_size() == 4)
          answered += 4;
        else
          ++failed;
        v1::ImageResponse one;
        if (node.call(&Stub::Ratio, at(srv.url("/photo.jpg")), one).ok())
          ++answered;
        else
          ++failed;
      }
      (void)c;
    });
  for (auto& t : clients)
    t.join();
  CHECK(failed == 0);
  CHECK(answered == 100);
  auto ratio = node.settled(&Stub::Ratio, at(srv.url("/photo.jpg")));
  REQUIRE(ratio.status() == v1::IMAGE_STATUS_DONE);
  CHECK(ratio.ratio().width() == 320);
  CHECK(ratio.ratio().height() == 200);
  CHECK(seen.of("/photo.jpg") == 1);
  // Through Kafka, not the PostgreSQL queue: the topic holds the task under the result key.
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");
  size_t on_topic = 0;
  testing::consume_topic(
    prefix + "ratio",
    [&](const rd_kafka_message_t& m) {
      CHECK(testing::key_of(m) == ratio.key());
      v1::ImageTask t;
      REQUIRE(t.ParseFromArray(m.payload, static_cast<int>(m.len)));
      CHECK(t.args() == srv.url("/photo.jpg"));
      CHECK(t.asked_at_us() > 0);
      ++on_topic;
    },
    [&] { return on_topic >= 1; });
  CHECK(on_topic >= 1);

  // Duplicates on the topic (Kafka delivers at least once; two nodes may ask at once): a task
  // asked before the result was stored is skipped, one asked after it is computed. A marker
  // task under the same Kafka key (one partition: read after them) says they were read.
  auto task_msg = [&](const std::string& path, int64_t asked_at_us) {
    v1::ImageTask t;
    t.set_args(srv.url(path));
    t.set_ttl_ms(60'000);
    t.set_asked_at_us(asked_at_us);
    return std::pair{ratio.key(), t.SerializeAsString()};
  };
  auto stored_us = std::stoll(
    db.scalar("SELECT (extract(epoch FROM updated_at) * 1000000)::bigint FROM image_results WHERE "
              "result_key = '"
              + ratio.key() + "'"));
  testing::produce_to(prefix + "ratio", {task_msg("/photo.jpg", stored_us - 1),
                                         task_msg("/photo.jpg", stored_us - 1000),
                                         task_msg("/marker.jpg", stored_us)});
  auto marker_done = [&](const std::string& path) {
    return db.scalar("SELECT count(*) FROM image_results WHERE args = '" + srv.url(path)
                     + "' AND status <> 'pending'")
           == "1";
  };
  REQUIRE(testing::eventually(30s, [&] { return marker_done("/marker.jpg"); }));
  CHECK(seen.of("/photo.jpg") == 1);
  testing::produce_to(prefix + "ratio",
                      {task_msg("/photo.jpg", stored_us + 1), task_msg("/marker2.jpg", 0)});
  REQUIRE(testing::eventually(30s, [&] { return marker_done("/marker2.jpg"); }));
  CHECK(seen.of("/photo.jpg") == 2);

  // An error status comes back through Kafka like a result; so does another function's task.
  auto missing = node.settled(&Stub::MainColor, at(srv.url("/gone.jpg")));
  CHECK(missing.status() == v1::IMAGE_STATUS_ERROR);
  CHECK(missing.error_kind() == "http_404");
  auto preview = node.settled(&Stub::Preview, at(srv.url("/photo.jpg")));
  CHECK(preview.status() == v1::IMAGE_STATUS_DONE);
  CHECK(preview.preview().width() == 16);

  // A recoverable failure is retried through the PostgreSQL queue (a Kafka partition is never
  // held by a retry): the third attempt succeeds.
  auto flaky = node.settled(&Stub::Ratio, at(srv.url("/flaky.jpg")));
  CHECK(flaky.status() == v1::IMAGE_STATUS_DONE);
  CHECK(flaky.attempts() == 3);
  CHECK(flaky_calls == 3);
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");

  // compute: asked again after its result, so computed again (not skipped as a duplicate).
  auto again = at(srv.url("/photo.jpg"));
  again.mutable_options()->set_compute(true);
  v1::ImageResponse resp;
  REQUIRE(node.call(&Stub::Ratio, again, resp).ok());
  CHECK(resp.status() == v1::IMAGE_STATUS_PENDING);
  CHECK(testing::eventually(20s, [&] { return seen.of("/photo.jpg") == 4; })); // + Preview's

  // The console: the pools' rows of gostctl top and AdminService.Top, duplicates counted.
  auto addr = "127.0.0.1:" + std::to_string(node.grpc_port);
  testing::child_process top{GOSTCTL_PATH, {"--addr", addr, "top", "--once", "--interval", "0.2"}};
  REQUIRE(top.wait(30s) == 0);
  INFO(top.output());
  CHECK(std::regex_search(top.output(), std::regex{R"(\nratio\s+4\s+\d+\s+\d+\s+\S+\s)"}));
  CHECK(std::regex_search(top.output(), std::regex{R"(\nmain_color\s+2\s)"}));
  auto admin =
    v1::AdminService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::TopResponse t;
  REQUIRE(admin->Top(&ctx, v1::TopRequest{}, &t).ok());
  REQUIRE(t.images_size() == 4);
  for (auto& f : t.images())
    if (f.function() == "ratio") {
      CHECK(f.workers() == 4);
      CHECK(f.computed() >= 3); // photo twice, flaky (+ the compute, maybe not stored yet)
      CHECK(f.failed() >= 4);   // flaky's two 503s, the markers' 404s
      CHECK(f.skipped() >= 2);  // the two duplicates put on the topic
      CHECK(f.cache_hits() >= 1);
      CHECK(f.waiting() == 0);
    }
}

TEST_CASE("Kafka queue: every task acknowledged before a kill -9 is computed after the restart") {
  auto photo = jpeg(200, 100);
  std::atomic<bool> slow{true};
  http_server srv{[&](const http_server::call&) {
    if (slow) // the first node never gets an image: its consumer holds tasks mid-fetch
      return http_server::reply{200, {}, {}, true};
    return http_server::reply{200, photo};
  }};
  auto prefix = fresh_prefix();
  testing::temp_db db;
  image_node node{db, kafka_queue(prefix)};
  std::vector<std::string> urls;
  for (int i = 0; i < 30; ++i)
    urls.push_back(srv.url("/p.jpg?n=" + std::to_string(i)));
  auto out = node.batch(v1::IMAGE_FUNCTION_RATIO, urls);
  REQUIRE(out.responses_size() == 30);
  for (auto& r : out.responses())
    CHECK(r.status() == v1::IMAGE_STATUS_PENDING);
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");
  CHECK(db.scalar("SELECT count(*) FROM image_results WHERE status = 'pending'") == "30");
  REQUIRE(testing::eventually(30s, [&] { return srv.requests() > 0; })); // consumed, mid-fetch
  node.proc->signal(SIGKILL);
  node.proc->wait(10s);
  slow = false;
  node.start(); // same group: the broker hands it the partitions the dead member held
  CHECK_MESSAGE(testing::eventually(60s,
                                    [&] {
                                      return db.scalar("SELECT count(*) FROM image_results WHERE "
                                                       "status = 'done'")
                                             == "30";
                                    }),
                db.scalar("SELECT count(*) FROM image_results WHERE status = 'done'"));
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");
  // Each result is the image's answer.
  auto r = node.settled(&Stub::Ratio, at(srv.url("/p.jpg?n=7")));
  CHECK(r.status() == v1::IMAGE_STATUS_DONE);
  CHECK(r.ratio().width() == 200);
}

TEST_CASE("Kafka queue: brokers away, an ask fails UNAVAILABLE and leaves no pending status") {
  auto photo = jpeg(64, 64);
  http_server srv{[&](const http_server::call&) { return http_server::reply{200, photo}; }};
  testing::temp_db db;
  // Nothing listens on port 1: every task times out in the producer (kafka.message_timeout).
  image_node node{db,
                  {"--kafka.brokers=127.0.0.1:1", "--kafka.message_timeout=1s",
                   "--images.queue=kafka", "--images.kafka.topic_prefix=" + fresh_prefix()}};
  v1::ImageResponse resp;
  auto s = node.call(&Stub::Ratio, at(srv.url("/a.jpg")), resp);
  CHECK(s.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(s.error_message().find("images.queue=kafka") != std::string::npos);
  CHECK(s.error_message().find("kafka.brokers") != std::string::npos);
  // Not answered PENDING, so nothing pending left behind: the next ask queues again.
  CHECK(db.scalar("SELECT count(*) FROM image_results") == "0");
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");
  // The node is unharmed: cache-only asks are answered.
  auto cached = at(srv.url("/a.jpg"));
  cached.mutable_options()->set_cache_only(true);
  REQUIRE(node.call(&Stub::Ratio, cached, resp).ok());
  CHECK(resp.status() == v1::IMAGE_STATUS_NOT_CACHED);
}

TEST_CASE("Kafka queue on two nodes: the broker spreads the tasks, a killed node's move over") {
  auto photo = jpeg(120, 90);
  std::atomic<bool> slow{false};
  http_server srv{[&](const http_server::call&) {
    if (slow) // tasks held mid-fetch by both nodes
      return http_server::reply{200, {}, {}, true};
    return http_server::reply{200, photo};
  }};
  auto prefix = fresh_prefix();
  testing::temp_db db;
  auto flags = [&](const std::string& id) {
    auto f = kafka_queue(prefix);
    f.push_back("--node.id=" + id);
    f.push_back("--images.fetch_timeout=2s"); // a fetch held at the kill fails soon, retried
    return f;
  };
  image_node a{db, flags("imgq-a")};
  image_node b{db, flags("imgq-b")};
  auto computed = [](image_node& n) {
    auto admin = v1::AdminService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(n.grpc_port), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::TopResponse t;
    REQUIRE(admin->Top(&ctx, v1::TopRequest{}, &t).ok());
    for (auto& f : t.images())
      if (f.function() == "ratio")
        return f.computed();
    return uint64_t{0};
  };
  auto ask = [&](image_node& n, const std::string& tag, int count) {
    std::vector<std::string> urls;
    for (int i = 0; i < count; ++i)
      urls.push_back(srv.url("/p.jpg?" + tag + "=" + std::to_string(i)));
    n.batch(v1::IMAGE_FUNCTION_RATIO, urls);
  };
  auto done = [&](const std::string& tag) {
    return std::stoi(db.scalar("SELECT count(*) FROM image_results WHERE status = 'done' AND "
                               "args LIKE '%?"
                               + tag + "=%'"));
  };
  // Asked on one node, computed on both: the group gave each some of the topic's partitions
  // (the second node's join moves some to it; rounds of asks until both computed some).
  int round = 0;
  REQUIRE(testing::eventually(60s, [&] {
    auto tag = "w" + std::to_string(round++);
    ask(a, tag, 16);
    return testing::eventually(20s, [&] { return done(tag) == 16; }) && computed(a) > 0
           && computed(b) > 0;
  }));

  // Both hold tasks mid-fetch when the first is killed: everything asked is computed by the
  // survivor (its partitions after kafka.session_timeout; the held fetches retried through
  // PostgreSQL on the shards it takes over).
  slow = true;
  auto before = srv.requests();
  ask(a, "k", 30);
  REQUIRE(testing::eventually(20s, [&] { return srv.requests() > before; }));
  a.proc->signal(SIGKILL);
  a.proc->wait(10s);
  slow = false;
  CHECK_MESSAGE(testing::eventually(90s, [&] { return done("k") == 30; }), done("k"));
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");
}
