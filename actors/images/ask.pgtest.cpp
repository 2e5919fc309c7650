// ask_images, the one request path of ImageService and the photo stages, on real PostgreSQL:
// a miss queues one task and answers PENDING, asking again queues nothing new, cache_only never
// queues, the computed result is answered from the cache (with the EXIF orientation), compute
// queues again while the old result stays, and errors are answered as cached.
#include <doctest/doctest.h>

#include <filesystem>

#include <vips/vips8>

#include "gost/images/ask.hpp"
#include "gost/images/worker.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/pg.hpp"
#include "gost/v1/images.pb.h"

using namespace gost;
using namespace gost::images;
using namespace std::chrono_literals;
using testing::http_server;

namespace {

std::string turned_jpeg() {
  init();
  auto img = vips::VImage::black(60, 20, vips::VImage::option()->set("bands", 3))
               .new_from_image({90, 90, 90})
               .cast(VIPS_FORMAT_UCHAR)
               .copy();
  img.set("orientation", 8);
  void* buf = nullptr;
  size_t size = 0;
  img.write_to_buffer(".jpg", &buf, &size);
  std::string out(static_cast<const char*>(buf), size);
  g_free(buf);
  return out;
}

struct ask_fixture {
  testing::temp_db db;
  std::unique_ptr<persistence::pg_pool> pool;
  std::string photo = turned_jpeg();
  http_server srv{[this](const http_server::call& c) -> http_server::reply {
    if (c.path == "/turned.jpg")
      return {200, photo};
    return {404, "gone"};
  }};

  ask_fixture() {
    persistence::pg_pool::options o;
    o.dsn = db.dsn();
    o.size = 2;
    pool = std::make_unique<persistence::pg_pool>(o);
    REQUIRE(persistence::migrate(*pool));
  }

  image_ask at(function fn, const std::string& path, bool cache_only = false,
               bool compute = false) {
    auto t = make_task(fn, srv.url(path));
    REQUIRE_MESSAGE(t, t.error.message);
    return image_ask{*t, 3'600'000, cache_only, compute};
  }
  std::vector<v1::ImageResponse> ask(const std::vector<image_ask>& asks) {
    std::vector<v1::ImageResponse> out(asks.size());
    std::vector<v1::ImageResponse*> ptrs;
    for (auto& o : out)
      ptrs.push_back(&o);
    auto err = ask_images(*pool, asks, 8, ptrs);
    REQUIRE_MESSAGE(!err, caf::to_string(err));
    return out;
  }
  std::string tasks() { return db.scalar("SELECT count(*) FROM image_tasks"); }
  void compute_all() {
    worker_options w;
    w.allow_private = true;
    std::vector<uint32_t> parts{0, 1, 2, 3, 4, 5, 6, 7};
    for (auto fn : {function::ratio, function::main_color})
      REQUIRE(work_batch(*pool, fn, parts, 10, 30s, w));
  }
};

} // namespace

TEST_CASE_FIXTURE(ask_fixture, "ask_images: cache first, one task per key, never waiting") {
  auto ratio = at(function::ratio, "/turned.jpg");
  // cache_only on a miss: NOT_CACHED, nothing queued.
  auto only = ask({at(function::ratio, "/turned.jpg", true)});
  CHECK(only[0].status() == v1::IMAGE_STATUS_NOT_CACHED);
  CHECK(tasks() == "0");
  // A miss: PENDING, one task; the same key twice more (another spelling too): still one.
  auto first = ask({ratio, at(function::main_color, "/turned.jpg")});
  CHECK(first[0].status() == v1::IMAGE_STATUS_PENDING);
  CHECK(first[0].key() == ratio.task.result_key());
  CHECK(first[1].status() == v1::IMAGE_STATUS_PENDING);
  CHECK(tasks() == "2");
  auto again = ask({ratio, at(function::ratio, "/turned.jpg#photo")});
  CHECK(again[0].status() == v1::IMAGE_STATUS_PENDING);
  CHECK(again[1].status() == v1::IMAGE_STATUS_PENDING);
  CHECK(again[1].key() == again[0].key());
  CHECK(tasks() == "2");

  compute_all();
  CHECK(tasks() == "0");
  auto done = ask({ratio, at(function::ratio, "/turned.jpg", true)});
  for (auto& d : done) {
    REQUIRE(d.status() == v1::IMAGE_STATUS_DONE);
    CHECK(d.ratio().width() == 60); // as stored
    CHECK(d.ratio().height() == 20);
    CHECK(d.ratio().ratio() == 3.0);
    CHECK(d.ratio().orientation() == 8);
  }
  CHECK(tasks() == "0");

  // compute: queued again, PENDING, the old result kept until the new one replaces it.
  auto forced = ask({at(function::ratio, "/turned.jpg", false, true)});
  CHECK(forced[0].status() == v1::IMAGE_STATUS_PENDING);
  CHECK(forced[0].ratio().width() == 60);
  CHECK(tasks() == "1");

  // An error is answered as cached: its kind and reason.
  ask({at(function::ratio, "/gone.jpg")});
  compute_all();
  auto gone = ask({at(function::ratio, "/gone.jpg")});
  CHECK(gone[0].status() == v1::IMAGE_STATUS_ERROR);
  CHECK(gone[0].error_kind() == "http_404");
}
