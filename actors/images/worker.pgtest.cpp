// One image task from the PostgreSQL queue to its cached result, on real images served by a
// local HTTP server: each function's answer, final errors cached with their reason, recoverable
// failures retried with their count and given up after the limit, identical requests computed
// once, internal addresses refused, rotated images stored by content.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <vips/vips8>

#include "gost/images/stats.hpp"
#include "gost/images/worker.hpp"
#include "gost/persistence/images/images.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/pg.hpp"
#include "gost/v1/events.pb.h"
#include "gost/v1/images.pb.h"

using namespace gost;
using namespace gost::images;
using namespace std::chrono_literals;
using testing::http_server;

namespace {

std::string png_of(int w, int h, std::vector<double> colour) {
  init();
  auto img = vips::VImage::black(w, h, vips::VImage::option()->set("bands", 3))
               .new_from_image(colour)
               .cast(VIPS_FORMAT_UCHAR)
               .copy(vips::VImage::option()->set("interpretation", VIPS_INTERPRETATION_sRGB));
  void* buf = nullptr;
  size_t size = 0;
  img.write_to_buffer(".png", &buf, &size);
  std::string out(static_cast<const char*>(buf), size);
  g_free(buf);
  return out;
}

struct fixture {
  testing::temp_db db;
  std::unique_ptr<persistence::pg_pool> pool;
  std::mutex calls_mutex;
  std::map<std::string, int> calls_; ///< requests per path (the server answers on its threads)
  int calls(const std::string& path) {
    std::lock_guard<std::mutex> g{calls_mutex};
    return calls_[path];
  }
  std::string red = png_of(300, 200, {255, 0, 0});
  std::string dir = "/tmp/gost-blobs-" + std::to_string(::getpid());
  blob_store blobs{dir, "http://node/blobs"};
  http_server srv{[this](const http_server::call& c) -> http_server::reply {
    int nth = 0;
    {
      std::lock_guard<std::mutex> g{calls_mutex};
      nth = ++calls_[c.path];
    }
    if (c.path == "/red.png")
      return {200, red};
    if (c.path == "/text.jpg")
      return {200, "this is not an image\n"};
    if (c.path == "/missing.jpg")
      return {404, "gone"};
    if (c.path == "/flaky.png") // fails twice, then answers
      return nth <= 2 ? http_server::reply{503, "busy"} : http_server::reply{200, red};
    if (c.path == "/down.png")
      return {502, "bad gateway"};
    return {500, "unexpected"};
  }};
  worker_options opts;

  fixture() {
    persistence::pg_pool::options o;
    o.dsn = db.dsn();
    o.size = 2;
    pool = std::make_unique<persistence::pg_pool>(o);
    REQUIRE(persistence::migrate(*pool));
    opts.allow_private = true; // the server is on 127.0.0.1
    opts.retry_base = 1h;      // drain() moves the queue's clock past it
    opts.max_attempts = 3;
    opts.blobs = &blobs;
  }
  ~fixture() { std::filesystem::remove_all(dir); }

  task_key queue(function fn, const std::string& path, double angle = 0) {
    auto t = make_task(fn, srv.url(path), angle);
    REQUIRE_MESSAGE(t, t.error.message);
    persistence::image_request r;
    r.key = t->result_key();
    r.task.function = to_string(fn);
    r.task.partition = t->partition(8);
    r.task.args = t->args;
    r.task.ttl_ms = 3'600'000;
    r.pending_ttl_ms = 60'000;
    REQUIRE(persistence::enqueue_image_tasks(*pool, {r}));
    return *t;
  }
  /// Works every function's queue until it is empty; between rounds the retries' back-off
  /// passes without a wait (every task's `due_at` moved two hours back).
  batch_counts drain() {
    batch_counts all;
    std::vector<uint32_t> parts{0, 1, 2, 3, 4, 5, 6, 7};
    for (int round = 0; round < 200; ++round) {
      size_t left = 0;
      for (auto fn : {function::rotate, function::preview, function::ratio, function::main_color}) {
        auto n = work_batch(*pool, fn, parts, 10, 30s, opts);
        REQUIRE(n);
        all.taken += n->taken;
        all.done += n->done;
        all.final_errors += n->final_errors;
        all.retried += n->retried;
        all.given_up += n->given_up;
      }
      left = std::stoul(db.scalar("SELECT count(*) FROM image_tasks"));
      if (left == 0)
        return all;
      db.scalar("UPDATE image_tasks SET due_at = due_at - interval '2 hours'");
    }
    FAIL("the queue did not drain");
    return all;
  }
  persistence::image_result result(const task_key& t) {
    auto rs = persistence::find_image_results(*pool, {t.result_key()});
    REQUIRE(rs);
    REQUIRE(rs->size() == 1);
    return rs->front();
  }
};

} // namespace

TEST_CASE_FIXTURE(fixture, "each function's result is computed from the fetched image") {
  auto ratio = queue(function::ratio, "/red.png");
  auto colour = queue(function::main_color, "/red.png");
  auto prev = queue(function::preview, "/red.png");
  auto turned = queue(function::rotate, "/red.png", -90);
  CHECK(result(ratio).status == "pending");
  auto n = drain();
  CHECK(n.done == 4);
  v1::ImageRatio r;
  REQUIRE(r.ParseFromString(result(ratio).value));
  CHECK(r.width() == 300);
  CHECK(r.height() == 200);
  CHECK(r.ratio() == doctest::Approx(1.5));
  CHECK(r.format() == "png");
  v1::ImageColor c;
  REQUIRE(c.ParseFromString(result(colour).value));
  CHECK(c.hex() == "#ff0000");
  v1::ImagePreview p;
  REQUIRE(p.ParseFromString(result(prev).value));
  CHECK(p.width() == 16);
  CHECK(p.height() == 11);
  CHECK(p.jpeg().size() < 1000);
  v1::ImageRotated rot;
  REQUIRE(rot.ParseFromString(result(turned).value));
  CHECK(rot.width() == 200);
  CHECK(rot.height() == 300);
  CHECK(rot.url().rfind("http://node/blobs/", 0) == 0);
  auto name = rot.url().substr(std::string{"http://node/blobs/"}.size());
  auto path = blobs.path_of(name);
  REQUIRE(std::filesystem::exists(path));
  CHECK(std::filesystem::file_size(path) == rot.bytes());
  CHECK(blobs.path_of("../etc/passwd").empty());
}

TEST_CASE_FIXTURE(fixture, "a hundred identical requests are computed once") {
  task_key t = queue(function::main_color, "/red.png");
  for (int i = 0; i < 99; ++i)
    queue(function::main_color, "/red.png");
  auto n = drain();
  CHECK(n.taken == 1);
  CHECK(calls("/red.png") == 1);
  CHECK(result(t).status == "done");
}

TEST_CASE_FIXTURE(fixture, "final errors are cached with their reason at once") {
  auto text = queue(function::ratio, "/text.jpg");
  auto missing = queue(function::ratio, "/missing.jpg");
  auto n = drain();
  CHECK(n.final_errors == 2);
  CHECK(n.retried == 0);
  CHECK(result(text).status == "error");
  CHECK(result(text).error_kind == "not_an_image");
  CHECK(result(missing).error_kind == "http_404");
  CHECK(calls("/missing.jpg") == 1);
}

TEST_CASE_FIXTURE(fixture, "recoverable failures retry with a count, and give up after the limit") {
  auto flaky = queue(function::ratio, "/flaky.png");
  auto down = queue(function::ratio, "/down.png");
  auto n = drain();
  CHECK(calls("/flaky.png") == 3); // 503, 503, 200
  CHECK(result(flaky).status == "done");
  CHECK(result(flaky).attempts == 3);
  CHECK(calls("/down.png") == 3); // max_attempts
  auto d = result(down);
  CHECK(d.status == "error");
  CHECK(d.error_kind == "http_502");
  CHECK(d.error.find("gave up after 3 attempts") != std::string::npos);
  CHECK(n.retried == 4);
  CHECK(n.given_up == 1);
}

TEST_CASE_FIXTURE(fixture, "internal addresses are refused unless allowed, and cached as such") {
  opts.allow_private = false;
  auto t = queue(function::ratio, "/red.png");
  drain();
  CHECK(calls("/red.png") == 0);
  auto r = result(t);
  CHECK(r.status == "error");
  CHECK(r.error_kind == "address_refused");
  CHECK(r.error.find("images.allow_private_sources") != std::string::npos);
}

TEST_CASE_FIXTURE(fixture, "a server that never answers is a recoverable timeout") {
  http_server silent{[](const http_server::call&) {
    return http_server::reply{200, {}, {}, true};
  }};
  opts.fetch_timeout = 200ms;
  opts.max_attempts = 2;
  auto t = make_task(function::ratio, silent.url("/slow.png"));
  REQUIRE(t);
  persistence::image_request r;
  r.key = t->result_key();
  r.task = {"ratio", t->partition(8), t->args, 0, 60'000, 0, {}};
  r.pending_ttl_ms = 60'000;
  REQUIRE(persistence::enqueue_image_tasks(*pool, {r}));
  drain();
  CHECK(silent.requests() == 2);
  CHECK(result(*t).error_kind == "download_failed");
}

TEST_CASE_FIXTURE(fixture, "with a notify topic, each stored outcome is in the outbox of its "
                           "transaction, keyed by its result key, and counted") {
  image_stats stats;
  opts.notify_topic = "images.done";
  opts.stats = &stats;
  auto ok = queue(function::ratio, "/red.png");
  auto bad = queue(function::ratio, "/missing.jpg");
  auto flaky = queue(function::ratio, "/flaky.png"); // two retries: no notice for those
  drain();
  std::map<std::string, v1::ImageNotice> notices;
  int messages = 0;
  // Each row as shard:events:hex(payload), in id order.
  std::stringstream rows{
    db.scalar("SELECT string_agg(shard || ':' || events || ':' ||"
              " encode(payload, 'hex'), ' ' ORDER BY id) FROM outbox_batches")};
  for (std::string row; rows >> row;) {
    auto c1 = row.find(':'), c2 = row.find(':', c1 + 1);
    auto hex = row.substr(c2 + 1);
    std::string payload;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      payload.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    v1::OutboxBatch b;
    REQUIRE(b.ParseFromString(payload));
    CHECK(b.events_size() == 0);
    CHECK(std::stoi(row.substr(c1 + 1, c2 - c1 - 1)) == b.messages_size());
    for (auto& m : b.messages()) {
      ++messages;
      CHECK(m.topic() == "images.done");
      v1::ImageNotice n;
      REQUIRE(n.ParseFromString(m.value()));
      CHECK(m.key() == n.response().key());
      // The row's shard is the task's partition: the relay of its owner publishes it.
      task_key k{function::ratio, n.url()};
      CHECK(std::stoul(row.substr(0, c1)) == k.partition(8));
      notices[m.key()] = n;
    }
  }
  CHECK(messages == 3);
  REQUIRE(notices.size() == 3);
  CHECK(notices[ok.result_key()].response().status() == v1::IMAGE_STATUS_DONE);
  CHECK(notices[ok.result_key()].response().ratio().width() == 300);
  CHECK(notices[ok.result_key()].url() == srv.url("/red.png"));
  CHECK(notices[bad.result_key()].response().status() == v1::IMAGE_STATUS_ERROR);
  CHECK(notices[bad.result_key()].response().error_kind() == "http_404");
  CHECK(notices[flaky.result_key()].response().attempts() == 3);
  CHECK(stats.of(function::ratio).computed == 2);
  auto failures = stats.failures();
  CHECK(failures[{function::ratio, "http_404"}] == 1);
  CHECK(failures[{function::ratio, "http_503"}] == 2);
}

TEST_CASE_FIXTURE(fixture, "without a notify topic nothing goes to the outbox") {
  queue(function::ratio, "/red.png");
  drain();
  CHECK(db.scalar("SELECT count(*) FROM outbox_batches") == "0");
}
