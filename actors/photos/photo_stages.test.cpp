// The photo stages' rules without a service: a fake image service answers by (function, URL);
// what a run asks, what it records per photo, when it comes back, and what a changed photo
// list does.
#include <doctest/doctest.h>

#include <map>
#include <mutex>

#include "gost/core/unavailable.hpp"
#include "gost/photos/photo_stages.hpp"
#include "gost/v1/images.pb.h"
#include "gost/v1/photos.pb.h"

using namespace gost;
using namespace std::chrono_literals;

namespace {

/// Answers from `answers` by "function url" (PENDING when missing) and records every ask.
struct fake_images final : photos::image_asker {
  mutable std::mutex mx;
  std::map<std::string, v1::ImageResponse> answers;
  mutable std::vector<std::string> asked;
  bool down = false;

  std::vector<v1::ImageResponse> ask(const std::vector<images::image_ask>& asks) const override {
    if (down)
      throw unavailable_error("down");
    std::lock_guard lk{mx};
    std::vector<v1::ImageResponse> out;
    for (auto& a : asks) {
      auto name = std::string{images::to_string(a.task.fn)} + " " + a.task.args;
      asked.push_back(name);
      auto it = answers.find(name);
      if (it != answers.end()) {
        out.push_back(it->second);
      } else {
        out.emplace_back();
        out.back().set_status(v1::IMAGE_STATUS_PENDING);
      }
    }
    return out;
  }
  void ratio(const std::string& url, int w, int h, int orientation = 1) {
    auto& r = answers["ratio " + url];
    r.set_status(v1::IMAGE_STATUS_DONE);
    r.mutable_ratio()->set_width(w);
    r.mutable_ratio()->set_height(h);
    r.mutable_ratio()->set_ratio(double(w) / h);
    r.mutable_ratio()->set_orientation(orientation);
  }
  void color(const std::string& url, const std::string& hex) {
    auto& r = answers["main_color " + url];
    r.set_status(v1::IMAGE_STATUS_DONE);
    r.mutable_main_color()->set_hex(hex);
  }
  void error(const std::string& fn_url, const std::string& kind) {
    auto& r = answers[fn_url];
    r.set_status(v1::IMAGE_STATUS_ERROR);
    r.set_error_kind(kind);
    r.set_error(kind + " at the source");
  }
};

v1::Offer offer_with(std::initializer_list<const char*> urls) {
  v1::Offer o;
  o.set_id("o1");
  for (auto* u : urls)
    o.add_photos()->set_url(u);
  return o;
}

template <class State>
State run(const stage& s, const v1::Offer& o, const State* before,
          std::optional<stage_clock::time_point>* timer = nullptr) {
  std::optional<google::protobuf::Any> any;
  if (before != nullptr) {
    any.emplace();
    any->PackFrom(*before);
  }
  auto r = s.process(o, any ? &*any : nullptr);
  REQUIRE(r.state);
  REQUIRE_FALSE(r.offer); // the photo stages never change the offer
  State out;
  REQUIRE(r.state->UnpackTo(&out));
  if (timer != nullptr)
    *timer = r.timer;
  return out;
}

template <class State>
decision::kind ask(const stage& s, const v1::Offer& o, const State* state) {
  std::optional<google::protobuf::Any> any;
  if (state != nullptr) {
    any.emplace();
    any->PackFrom(*state);
  }
  return s.should_process(o, any ? &*any : nullptr).what;
}

photos::photo_stage_options options(std::shared_ptr<fake_images> f) {
  photos::photo_stage_options o;
  o.images = std::move(f);
  o.recheck = 100ms;
  o.recheck_max = 350ms;
  return o;
}

const char* a = "http://img.example/a.jpg";
const char* b = "http://img.example/b.png";
const char* c = "http://img.example/c.jpg";

} // namespace

TEST_CASE("photo stages: the wait doubles from recheck up to recheck_max") {
  CHECK(photos::recheck_delay(0, 100ms, 350ms) == 100ms);
  CHECK(photos::recheck_delay(1, 100ms, 350ms) == 200ms);
  CHECK(photos::recheck_delay(2, 100ms, 350ms) == 350ms);
  CHECK(photos::recheck_delay(60, 100ms, 350ms) == 350ms);
}

TEST_CASE("photos.download: pending, then final statuses per photo; a new list runs again") {
  auto images = std::make_shared<fake_images>();
  auto stage = photos::make_download_stage(options(images));
  auto offer = offer_with({a, b, a, ""}); // a duplicate and an empty URL count once / not

  CHECK(ask<v1::PhotoDownloads>(*stage, offer, nullptr) == decision::kind::process);
  CHECK(ask<v1::PhotoDownloads>(*stage, offer_with({}), nullptr) == decision::kind::skip);
  auto before = stage_clock::now();
  std::optional<stage_clock::time_point> timer;
  auto s1 = run<v1::PhotoDownloads>(*stage, offer, nullptr, &timer);
  REQUIRE(s1.photos_size() == 2);
  CHECK(s1.photos(0).url() == a);
  CHECK(s1.photos(1).url() == b);
  CHECK(s1.pending() == 2);
  CHECK(s1.rounds() == 1);
  REQUIRE(timer);
  CHECK(*timer >= before + 100ms);
  CHECK(*timer < before + 200ms);
  CHECK(images->asked
        == std::vector<std::string>{"ratio http://img.example/a.jpg",
                                    "ratio http://img.example/b.png"});
  // Same list: the queued timer brings the stage back; nothing to do now.
  CHECK(ask(*stage, offer, &s1) == decision::kind::skip);

  images->ratio(a, 40, 20);
  auto s2 = run(*stage, offer, &s1, &timer);
  CHECK(s2.photos(0).status() == v1::PHOTO_STATUS_DONE);
  CHECK(s2.photos(1).status() == v1::PHOTO_STATUS_PENDING);
  CHECK(s2.rounds() == 2);
  REQUIRE(timer);
  CHECK(*timer >= stage_clock::now() + 150ms); // the second wait: 200 ms

  images->error("ratio http://img.example/b.png", "http_404");
  images->asked.clear();
  auto s3 = run(*stage, offer, &s2, &timer);
  CHECK_FALSE(timer); // every photo final: no timer
  CHECK(s3.pending() == 0);
  CHECK(s3.photos(1).status() == v1::PHOTO_STATUS_ERROR);
  CHECK(s3.photos(1).error_kind() == "http_404");
  CHECK(s3.photos(1).error() == "http_404 at the source");
  CHECK(images->asked == std::vector<std::string>{"ratio http://img.example/b.png"});

  // The list changes: b leaves, c comes; a keeps its final status and is not asked again.
  auto changed = offer_with({c, a});
  CHECK(ask(*stage, changed, &s3) == decision::kind::process);
  images->asked.clear();
  auto s4 = run(*stage, changed, &s3, &timer);
  REQUIRE(s4.photos_size() == 2);
  CHECK(s4.photos(0).url() == c);
  CHECK(s4.photos(0).status() == v1::PHOTO_STATUS_PENDING);
  CHECK(s4.photos(1).status() == v1::PHOTO_STATUS_DONE);
  CHECK(s4.rounds() == 1); // the back-off starts again
  CHECK(images->asked == std::vector<std::string>{"ratio http://img.example/c.jpg"});

  // No photos left: an empty state, no timer.
  auto none = run(*stage, offer_with({}), &s4, &timer);
  CHECK(none.photos_size() == 0);
  CHECK_FALSE(timer);
}

TEST_CASE("photos.download: a URL that is not one is an error without asking") {
  auto images = std::make_shared<fake_images>();
  auto stage = photos::make_download_stage(options(images));
  std::optional<stage_clock::time_point> timer;
  auto s = run<v1::PhotoDownloads>(*stage, offer_with({"ftp://x/y.jpg"}), nullptr, &timer);
  CHECK(s.photos(0).status() == v1::PHOTO_STATUS_ERROR);
  CHECK(s.photos(0).error_kind() == "bad_url");
  CHECK(images->asked.empty());
  CHECK_FALSE(timer);
}

TEST_CASE("photos.ratio_color: both facts, partial while one is pending, an error from either") {
  auto images = std::make_shared<fake_images>();
  auto stage = photos::make_ratio_color_stage(options(images));
  auto offer = offer_with({a, b});
  images->ratio(a, 40, 20);
  std::optional<stage_clock::time_point> timer;
  auto s1 = run<v1::PhotoRatioColors>(*stage, offer, nullptr, &timer);
  CHECK(s1.photos(0).status() == v1::PHOTO_STATUS_PENDING); // the colour is not known yet
  CHECK(s1.photos(0).width() == 40);
  CHECK(s1.photos(0).ratio() == 2.0);
  CHECK(timer);
  images->color(a, "#28a0dc");
  images->ratio(b, 10, 10);
  images->error("main_color http://img.example/b.png", "corrupt");
  auto s2 = run(*stage, offer, &s1, &timer);
  CHECK(s2.photos(0).status() == v1::PHOTO_STATUS_DONE);
  CHECK(s2.photos(0).color() == "#28a0dc");
  CHECK(s2.photos(1).status() == v1::PHOTO_STATUS_ERROR);
  CHECK(s2.photos(1).error_kind() == "corrupt");
  CHECK(s2.photos(1).width() == 10);
  CHECK_FALSE(timer);
}

TEST_CASE("photos.orientation: upright as is, EXIF 6 rotated upright through Rotate(url, 0)") {
  auto images = std::make_shared<fake_images>();
  auto stage = photos::make_orientation_stage(options(images));
  auto offer = offer_with({a, b, c});
  images->ratio(a, 40, 20, 6);
  images->ratio(b, 30, 10, 1);
  images->error("ratio http://img.example/c.jpg", "not_an_image");
  std::optional<stage_clock::time_point> timer;
  auto s1 = run<v1::PhotoOrientations>(*stage, offer, nullptr, &timer);
  CHECK(s1.photos(0).exif_orientation() == 6);
  CHECK(s1.photos(0).status() == v1::PHOTO_STATUS_PENDING); // the rotation is queued
  CHECK(s1.photos(1).status() == v1::PHOTO_STATUS_DONE);
  CHECK(s1.photos(1).rotated_url().empty());
  CHECK(s1.photos(1).width() == 30);
  CHECK(s1.photos(2).status() == v1::PHOTO_STATUS_ERROR);
  CHECK(s1.photos(2).error_kind() == "not_an_image");
  CHECK(images->asked.back() == "rotate http://img.example/a.jpg\n0");
  CHECK(timer);

  auto& rot = images->answers["rotate http://img.example/a.jpg\n0"];
  rot.set_status(v1::IMAGE_STATUS_DONE);
  rot.mutable_rotated()->set_url("http://node/blobs/abc.jpg");
  rot.mutable_rotated()->set_width(20);
  rot.mutable_rotated()->set_height(40);
  images->asked.clear();
  auto s2 = run(*stage, offer, &s1, &timer);
  CHECK(s2.photos(0).status() == v1::PHOTO_STATUS_DONE);
  CHECK(s2.photos(0).rotated_url() == "http://node/blobs/abc.jpg");
  CHECK(s2.photos(0).width() == 20);
  CHECK(s2.photos(0).height() == 40);
  // The orientation was known: only the rotation is asked again.
  CHECK(images->asked == std::vector<std::string>{"rotate http://img.example/a.jpg\n0"});
  CHECK_FALSE(timer);
}

TEST_CASE("photo stages: the service down is unavailable (retried, never dead-lettered)") {
  auto images = std::make_shared<fake_images>();
  images->down = true;
  auto stage = photos::make_ratio_color_stage(options(images));
  auto offer = offer_with({a});
  CHECK_THROWS_AS(stage->process(offer, nullptr), unavailable_error);
  CHECK(stage->state_type() == v1::PhotoRatioColors::descriptor());
  CHECK(stage->interests() == std::vector<std::string>{"photos"});
}
