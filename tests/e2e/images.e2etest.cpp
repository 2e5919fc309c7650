// ImageService on a running gostd with images served by a local HTTP server: a miss answers
// PENDING and queues one task, the node's pools compute it, the next call answers the result;
// errors of the image are cached statuses; cache_only, compute, a batch, bad requests; the
// rotated image is served by the node; kill -9 with tasks queued: all computed after restart.
#include <doctest/doctest.h>

#include <atomic>
#include <csignal>
#include <filesystem>

#include <grpcpp/grpcpp.h>
#include <vips/vips8>

#include "gost/testing/http.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/image_node.hpp"
#include "gost/testing/node.hpp"
#include "gost/v1/images.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::at;
using testing::http_server;
using testing::image_node;
using testing::jpeg;

TEST_CASE("ImageService: pending, then the result; errors cached; options; a batch") {
  auto photo = jpeg(1000, 750);
  std::atomic<int> never_asked{0}; // fetches of the URL only ever asked cache_only
  http_server srv{[&](const http_server::call& c) -> http_server::reply {
    if (c.path.find("never-asked") != std::string::npos)
      ++never_asked;
    if (c.path.rfind("/photo.jpg", 0) == 0)
      return {200, photo, {{"Content-Type", "image/jpeg"}}};
    if (c.path == "/notes.jpg")
      return {200, "not a picture"};
    return {404, "no"};
  }};
  testing::temp_db db;
  image_node node{db};
  using Stub = v1::ImageService::Stub;

  v1::ImageResponse first;
  REQUIRE(node.call(&Stub::Ratio, at(srv.url("/photo.jpg")), first).ok());
  CHECK(first.status() == v1::IMAGE_STATUS_PENDING);
  CHECK(first.key().size() == 32);
  auto ratio = node.settled(&Stub::Ratio, at(srv.url("/photo.jpg")));
  REQUIRE(ratio.status() == v1::IMAGE_STATUS_DONE);
  CHECK(ratio.ratio().width() == 1000);
  CHECK(ratio.ratio().height() == 750);
  CHECK(ratio.ratio().format() == "jpeg");
  CHECK(ratio.key() == first.key());
  // The same URL spelt differently is the same result, from the cache: no new fetch.
  int fetched = srv.requests();
  v1::ImageResponse again;
  auto upper = "HTTP://127.0.0.1:" + std::to_string(srv.port()) + "/photo.jpg#x";
  REQUIRE(node.call(&Stub::Ratio, at(upper), again).ok());
  CHECK(again.status() == v1::IMAGE_STATUS_DONE);
  CHECK(srv.requests() == fetched);

  auto colour = node.settled(&Stub::MainColor, at(srv.url("/photo.jpg")));
  REQUIRE(colour.status() == v1::IMAGE_STATUS_DONE);
  CHECK(std::abs(int(colour.main_color().r()) - 40) <= 6);
  CHECK(std::abs(int(colour.main_color().g()) - 160) <= 6);
  CHECK(std::abs(int(colour.main_color().b()) - 220) <= 6);
  auto preview = node.settled(&Stub::Preview, at(srv.url("/photo.jpg")));
  REQUIRE(preview.status() == v1::IMAGE_STATUS_DONE);
  CHECK(preview.preview().jpeg().size() < 1000);
  CHECK(preview.preview().width() == 16);
  CHECK(preview.preview().height() == 12);

  // Rotate: the node stores the new image and serves it at the URL it answers.
  auto rot_req = at(srv.url("/photo.jpg"));
  rot_req.set_angle(90);
  auto rotated = node.settled(&Stub::Rotate, rot_req);
  REQUIRE(rotated.status() == v1::IMAGE_STATUS_DONE);
  CHECK(rotated.rotated().width() == 750);
  CHECK(rotated.rotated().height() == 1000);
  auto path = rotated.rotated().url().substr(rotated.rotated().url().find("/blobs/"));
  auto served = testing::http_get(static_cast<uint16_t>(node.http_port), path);
  CHECK(served.find("200") != std::string::npos);
  CHECK(served.find("image/jpeg") != std::string::npos);
  CHECK(served.size() > rotated.rotated().bytes());
  CHECK(
    testing::http_get(static_cast<uint16_t>(node.http_port), "/blobs/..%2fetc%2fpasswd").find("404")
    != std::string::npos);

  // Errors of the image are cached statuses.
  auto text = node.settled(&Stub::Ratio, at(srv.url("/notes.jpg")));
  CHECK(text.status() == v1::IMAGE_STATUS_ERROR);
  CHECK(text.error_kind() == "not_an_image");
  auto missing = node.settled(&Stub::Ratio, at(srv.url("/gone.jpg")));
  CHECK(missing.error_kind() == "http_404");

  // cache_only: never queues.
  auto only = at(srv.url("/photo.jpg?never-asked"));
  only.mutable_options()->set_cache_only(true);
  v1::ImageResponse nc;
  REQUIRE(node.call(&Stub::Ratio, only, nc).ok());
  CHECK(nc.status() == v1::IMAGE_STATUS_NOT_CACHED);
  // A miss is queued before its answer (actors/images ask.cpp): nothing queued now is nothing
  // queued at all; no pending status either (a queued task may already be taken).
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");
  CHECK(db.scalar("SELECT count(*) FROM image_results WHERE args LIKE '%never-asked%'") == "0");
  // compute: queued again although cached; the answer is pending, then the result again.
  auto force = at(srv.url("/photo.jpg"));
  force.mutable_options()->set_compute(true);
  v1::ImageResponse forced;
  fetched = srv.requests();
  REQUIRE(node.call(&Stub::Ratio, force, forced).ok());
  CHECK(forced.status() == v1::IMAGE_STATUS_PENDING);
  CHECK(testing::eventually(10s, [&] { return srv.requests() > fetched; }));
  CHECK(never_asked == 0); // the pool fetched what was queued after it, and not it

  // A batch: answers in order, the cached one at once.
  v1::ImageBatchRequest batch;
  batch.set_function(v1::IMAGE_FUNCTION_RATIO);
  *batch.add_requests() = at(srv.url("/photo.jpg"));
  *batch.add_requests() = at(srv.url("/photo.jpg?b=1"));
  *batch.add_requests() = at(srv.url("/photo.jpg?b=2"));
  v1::ImageBatchResponse out;
  {
    grpc::ClientContext ctx;
    REQUIRE(node.stub->Batch(&ctx, batch, &out).ok());
  }
  REQUIRE(out.responses_size() == 3);
  CHECK(out.responses(0).status() == v1::IMAGE_STATUS_DONE);
  CHECK(out.responses(1).status() == v1::IMAGE_STATUS_PENDING);

  // Bad requests: INVALID_ARGUMENT naming the field; nothing queued.
  // (results rows, not tasks: the pools finish the batch's tasks meanwhile)
  auto results_before = db.scalar("SELECT count(*) FROM image_results");
  v1::ImageResponse bad;
  auto s = node.call(&Stub::Ratio, at("ftp://x/y.jpg"), bad);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message().find("url: url scheme `ftp` is not http or https") != std::string::npos);
  auto angle = at(srv.url("/photo.jpg"));
  angle.set_angle(720);
  s = node.call(&Stub::Rotate, angle, bad);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message().find("angle") != std::string::npos);
  batch.mutable_requests(1)->set_url("nope");
  grpc::ClientContext bctx;
  s = node.stub->Batch(&bctx, batch, &out);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message().find("requests[1].url") != std::string::npos);
  CHECK(db.scalar("SELECT count(*) FROM image_results") == results_before);
}

TEST_CASE("ImageService: every task queued before a kill -9 is computed after the restart") {
  auto photo = jpeg(200, 100);
  std::atomic<bool> slow{true};
  http_server srv{[&](const http_server::call&) {
    if (slow) // the first node never gets an image: its tasks stay queued, some taken
      return http_server::reply{200, {}, {}, true};
    return http_server::reply{200, photo};
  }};
  testing::temp_db db;
  image_node node{db};
  std::vector<std::string> urls;
  for (int i = 0; i < 50; ++i)
    urls.push_back(srv.url("/p.jpg?n=" + std::to_string(i)));
  node.batch(v1::IMAGE_FUNCTION_RATIO, urls);
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "50");
  REQUIRE(testing::eventually(10s, [&] { return srv.requests() > 0; })); // taken, mid-fetch
  node.proc->signal(SIGKILL);
  node.proc->wait(10s);
  slow = false;
  // Taken tasks come back after their visibility timeout (60 s at least): shortened here by
  // making them due now, as the timeout would.
  db.scalar("UPDATE image_tasks SET due_at = now()");
  node.start();
  CHECK_MESSAGE(testing::eventually(30s,
                                    [&] {
                                      return db.scalar("SELECT count(*) FROM image_results WHERE "
                                                       "status = 'done'")
                                             == "50";
                                    }),
                db.scalar("SELECT count(*) FROM image_tasks"));
  CHECK(db.scalar("SELECT count(*) FROM image_tasks") == "0");
}
