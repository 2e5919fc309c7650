// The photo stages (photos.download, photos.ratio_color, photos.orientation) on a running
// gostd with its image functions, photos served by a local HTTP server: a PNG and a JPEG made
// with libvips, a JPEG whose EXIF orientation says it is shown turned, an HTTP 404 and a
// server that never answers. Exact statuses, sizes, ratios and colours in the stages' states;
// the upright copy served by the node; a changed photo list run again without fetching the
// known photos again; the offer with the hanging photo never holds the others up (one
// thread per stage pool); the states decoded by `gostctl offer`.
#include <doctest/doctest.h>

#include <filesystem>

#include <grpcpp/grpcpp.h>
#include <vips/vips8>

#include "gost/testing/http.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/node.hpp"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/photos.pb.h"
#include "gost/v1/state_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::http_server;

namespace {

void vips_started() {
  static bool started = [] { return VIPS_INIT("gost-test") == 0; }();
  REQUIRE(started);
}

std::string encode(vips::VImage img, const char* suffix) {
  void* buf = nullptr;
  size_t size = 0;
  img.write_to_buffer(suffix, &buf, &size);
  std::string out(static_cast<const char*>(buf), size);
  g_free(buf);
  return out;
}

vips::VImage solid(int w, int h, std::vector<double> rgb) {
  vips_started();
  return vips::VImage::black(w, h, vips::VImage::option()->set("bands", 3))
    .new_from_image(rgb)
    .cast(VIPS_FORMAT_UCHAR);
}

/// 40x20 as stored, left half red and right half blue, with EXIF orientation 6: a viewer
/// shows it turned 90° clockwise, 20x40 with red on top.
std::string sideways_jpeg() {
  auto img =
    solid(20, 20, {220, 20, 20}).join(solid(20, 20, {20, 20, 220}), VIPS_DIRECTION_HORIZONTAL);
  img = img.copy();
  img.set("orientation", 6);
  return encode(img, ".jpg");
}

struct photo_node {
  testing::temp_db db;
  std::string port_file = testing::temp_path("gostd-photos");
  std::string blobs = testing::temp_path("gostd-photo-blobs");
  std::unique_ptr<testing::child_process> proc;
  int grpc_port = 0, http_port = 0;
  std::shared_ptr<grpc::Channel> channel;

  photo_node() {
    proc = std::make_unique<testing::child_process>(
      GOSTD_PATH,
      testing::node_args(db, port_file,
                         {"--http.listen=127.0.0.1:0", "--images.allow_private_sources=true",
                          "--images.poll=20ms", "--images.retry_delay=50ms",
                          "--images.blob_dir=" + blobs, "--stages.photos.recheck=50ms",
                          "--stages.photos.recheck_max=400ms", "--stages.photos.workers=1"}));
    std::tie(grpc_port, http_port) = testing::read_ports(*proc, port_file);
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                  grpc::InsecureChannelCredentials());
  }
  ~photo_node() { std::filesystem::remove_all(blobs); }

  v1::Offer create(const std::string& key, const std::vector<std::string>& urls) {
    auto stub = v1::OfferService::NewStub(channel);
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("photo-seller");
    req.mutable_offer()->set_external_id(key);
    req.mutable_offer()->set_title("Flat with photos");
    for (auto& u : urls)
      req.mutable_offer()->add_photos()->set_url(u);
    v1::CreateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = stub->CreateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp.offer();
  }

  void set_photos(const std::string& id, const std::vector<std::string>& urls) {
    auto stub = v1::OfferService::NewStub(channel);
    v1::UpdateOfferRequest req;
    req.mutable_offer()->set_id(id);
    for (auto& u : urls)
      req.mutable_offer()->add_photos()->set_url(u);
    req.mutable_update_mask()->add_paths("photos");
    v1::UpdateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = stub->UpdateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
  }

  /// The stage's state of the offer (false while it stored none).
  template <class State>
  bool state(const std::string& id, const std::string& stage, State& out) {
    auto stub = v1::StateService::NewStub(channel);
    v1::ReadStateRequest req;
    req.set_offer_id(id);
    req.set_stage_id(stage);
    v1::ReadStateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = stub->Read(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    if (resp.version() == 0)
      return false;
    REQUIRE(resp.state().UnpackTo(&out));
    return true;
  }

  /// Waits until the stage's state holds `photos` entries, none pending.
  template <class State>
  State settled(const std::string& id, const std::string& stage, int photos) {
    State s;
    bool done = testing::eventually(30s, [&] {
      s.Clear();
      return state(id, stage, s) && s.photos_size() == photos && s.pending() == 0;
    });
    REQUIRE_MESSAGE(done, stage << ": " << s.ShortDebugString());
    return s;
  }
};

} // namespace

TEST_CASE("photo stages: downloads, ratio and colour, orientation; a list change; never blocked") {
  auto red = encode(solid(30, 20, {200, 30, 40}), ".png");
  auto blue = encode(solid(40, 30, {40, 160, 220}), ".jpg");
  auto sideways = sideways_jpeg();
  std::mutex mx;
  std::map<std::string, int> fetched;
  http_server srv{[&](const http_server::call& c) -> http_server::reply {
    {
      std::lock_guard lk{mx};
      ++fetched[c.path];
    }
    if (c.path == "/red.png" || c.path == "/green.png")
      return {200,
              c.path == "/red.png" ? red : encode(solid(10, 40, {30, 200, 60}), ".png"),
              {{"Content-Type", "image/png"}}};
    if (c.path == "/blue.jpg")
      return {200, blue, {{"Content-Type", "image/jpeg"}}};
    if (c.path == "/sideways.jpg")
      return {200, sideways, {{"Content-Type", "image/jpeg"}}};
    if (c.path == "/hangs.jpg")
      return {200, {}, {}, true};
    return {404, "no such photo"};
  }};
  auto times = [&](const std::string& path) {
    std::lock_guard lk{mx};
    return fetched[path];
  };
  photo_node node;

  // First an offer whose photo never arrives: with one thread per stage pool, a stage that
  // waited for it would hold every other offer up.
  auto slow = node.create("slow", {srv.url("/hangs.jpg")});
  auto offer = node.create("main", {srv.url("/red.png"), srv.url("/blue.jpg"),
                                    srv.url("/sideways.jpg"), srv.url("/missing.jpg")});
  auto& id = offer.id();

  auto downloads = node.settled<v1::PhotoDownloads>(id, "photos.download", 4);
  CHECK(downloads.photos(0).url() == srv.url("/red.png"));
  CHECK(downloads.photos(0).status() == v1::PHOTO_STATUS_DONE);
  CHECK(downloads.photos(1).status() == v1::PHOTO_STATUS_DONE);
  CHECK(downloads.photos(2).status() == v1::PHOTO_STATUS_DONE);
  CHECK(downloads.photos(3).status() == v1::PHOTO_STATUS_ERROR);
  CHECK(downloads.photos(3).error_kind() == "http_404");
  CHECK(downloads.photos(3).error().find("404") != std::string::npos);

  auto facts = node.settled<v1::PhotoRatioColors>(id, "photos.ratio_color", 4);
  auto& r = facts.photos(0);
  CHECK(r.status() == v1::PHOTO_STATUS_DONE);
  CHECK(r.width() == 30);
  CHECK(r.height() == 20);
  CHECK(r.ratio() == 1.5);
  CHECK(r.color() == "#c81e28"); // a lossless PNG: exactly (200, 30, 40)
  auto& b = facts.photos(1);
  CHECK(b.status() == v1::PHOTO_STATUS_DONE);
  CHECK(b.width() == 40);
  CHECK(b.height() == 30);
  CHECK(b.ratio() == doctest::Approx(4.0 / 3.0).epsilon(1e-12));
  REQUIRE(b.color().size() == 7);
  auto channel = [&](int i) { return std::stoi(b.color().substr(1 + 2 * i, 2), nullptr, 16); };
  CHECK(std::abs(channel(0) - 40) <= 6); // JPEG: within its rounding
  CHECK(std::abs(channel(1) - 160) <= 6);
  CHECK(std::abs(channel(2) - 220) <= 6);
  CHECK(facts.photos(2).width() == 40); // as stored, before the EXIF orientation
  CHECK(facts.photos(2).ratio() == 2.0);
  CHECK(facts.photos(3).status() == v1::PHOTO_STATUS_ERROR);
  CHECK(facts.photos(3).error_kind() == "http_404");

  auto turns = node.settled<v1::PhotoOrientations>(id, "photos.orientation", 4);
  CHECK(turns.photos(0).status() == v1::PHOTO_STATUS_DONE);
  CHECK(turns.photos(0).exif_orientation() == 1);
  CHECK(turns.photos(0).rotated_url().empty());
  CHECK(turns.photos(1).exif_orientation() == 1);
  CHECK(turns.photos(1).rotated_url().empty());
  auto& side = turns.photos(2);
  CHECK(side.status() == v1::PHOTO_STATUS_DONE);
  CHECK(side.exif_orientation() == 6);
  CHECK(side.width() == 20);
  CHECK(side.height() == 40);
  CHECK(turns.photos(3).status() == v1::PHOTO_STATUS_ERROR);
  CHECK(turns.photos(3).error_kind() == "http_404");
  // The upright copy is served by the node: 20x40, red on top, blue below, no orientation.
  auto at = side.rotated_url().find("/blobs/");
  REQUIRE(at != std::string::npos);
  auto served =
    testing::http_get(static_cast<uint16_t>(node.http_port), side.rotated_url().substr(at));
  auto body_at = served.find("\r\n\r\n");
  REQUIRE(body_at != std::string::npos);
  auto body = served.substr(body_at + 4);
  auto upright = vips::VImage::new_from_buffer(body.data(), body.size(), "");
  CHECK(upright.width() == 20);
  CHECK(upright.height() == 40);
  CHECK(vips_image_get_orientation(upright.get_image()) == 1);
  auto top = upright.getpoint(10, 8);
  auto bottom = upright.getpoint(10, 32);
  CHECK(top[0] > 150);
  CHECK(top[2] < 80);
  CHECK(bottom[0] < 80);
  CHECK(bottom[2] > 150);

  // Each photo fetched once per function whatever the stages and their rounds: the Ratio task
  // (shared by the three stages) and MainColor; the sideways one also by Rotate.
  CHECK(times("/red.png") == 2);
  CHECK(times("/blue.jpg") == 2);
  CHECK(times("/sideways.jpg") == 3);
  CHECK(times("/missing.jpg") == 2);

  // Meanwhile the offer with the photo that never arrives is still pending, not failed.
  v1::PhotoDownloads waiting;
  REQUIRE(node.state(slow.id(), "photos.download", waiting));
  REQUIRE(waiting.photos_size() == 1);
  CHECK(waiting.photos(0).status() == v1::PHOTO_STATUS_PENDING);
  CHECK(waiting.pending() == 1);
  CHECK(waiting.rounds() >= 1);
  CHECK(times("/hangs.jpg") >= 1);

  // The states decode in the console, though gostctl knows them only from DescribeTypes.
  testing::child_process ctl{
    GOSTCTL_PATH, {"--addr", "127.0.0.1:" + std::to_string(node.grpc_port), "offer", id}};
  REQUIRE(ctl.wait(30s) == 0);
  auto shown = ctl.output();
  CHECK(shown.find("photos.download") != std::string::npos);
  CHECK(shown.find("photos.ratio_color") != std::string::npos);
  CHECK(shown.find("photos.orientation") != std::string::npos);
  CHECK(shown.find("PHOTO_STATUS_DONE") != std::string::npos);
  CHECK(shown.find("http_404") != std::string::npos);
  CHECK(shown.find("#c81e28") != std::string::npos);
  CHECK(shown.find(side.rotated_url()) != std::string::npos);

  // The photo list changes: missing.jpg leaves, green.png comes. Only the new photo is asked
  // about and fetched; the others keep their entries.
  node.set_photos(id, {srv.url("/green.png"), srv.url("/red.png"), srv.url("/blue.jpg"),
                       srv.url("/sideways.jpg")});
  auto again = node.settled<v1::PhotoRatioColors>(id, "photos.ratio_color", 4);
  CHECK(again.photos(0).url() == srv.url("/green.png"));
  CHECK(again.photos(0).status() == v1::PHOTO_STATUS_DONE);
  CHECK(again.photos(0).width() == 10);
  CHECK(again.photos(0).height() == 40);
  CHECK(again.photos(0).ratio() == 0.25);
  CHECK(again.photos(0).color() == "#1ec83c");
  CHECK(again.photos(1).color() == "#c81e28");
  auto d2 = node.settled<v1::PhotoDownloads>(id, "photos.download", 4);
  for (auto& p : d2.photos())
    CHECK(p.status() == v1::PHOTO_STATUS_DONE);
  auto o2 = node.settled<v1::PhotoOrientations>(id, "photos.orientation", 4);
  CHECK(o2.photos(3).rotated_url() == side.rotated_url());
  CHECK(times("/green.png") == 2);
  CHECK(times("/red.png") == 2);
  CHECK(times("/sideways.jpg") == 3);
}

TEST_CASE("photo stages: not registered when images.enabled or stages.photos.enabled is off") {
  // `gostctl stages` of a node started with `flag` (each on a database of its own).
  auto stages = [](const std::string& flag) {
    testing::temp_db db;
    auto port_file = testing::temp_path("gostd-photos-flag");
    testing::child_process proc{GOSTD_PATH, testing::node_args(db, port_file, {flag})};
    auto ports = testing::read_ports(proc, port_file);
    testing::child_process ctl{GOSTCTL_PATH,
                               {"--addr", "127.0.0.1:" + std::to_string(ports.first), "stages"}};
    REQUIRE(ctl.wait(30s) == 0);
    return ctl.output();
  };
  for (auto* off : {"--images.enabled=false", "--stages.photos.enabled=false"}) {
    CAPTURE(off);
    auto out = stages(off);
    CHECK(out.find("expire") != std::string::npos);
    CHECK(out.find("photos.") == std::string::npos);
  }
  auto on = stages("--stages.photos.enabled=true"); // the default, said
  CHECK(on.find("photos.download") != std::string::npos);
  CHECK(on.find("photos.ratio_color") != std::string::npos);
  CHECK(on.find("photos.orientation") != std::string::npos);
}
