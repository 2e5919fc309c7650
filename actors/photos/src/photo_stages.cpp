#include "gost/photos/photo_stages.hpp"

#include <algorithm>
#include <set>

#include <caf/error.hpp>

#include "gost/core/unavailable.hpp"
#include "photo_stage.hpp"

namespace gost::photos {

std::vector<std::string> photo_urls(const v1::Offer& offer) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& p : offer.photos())
    if (!p.url().empty() && seen.insert(p.url()).second)
      out.push_back(p.url());
  return out;
}

std::chrono::milliseconds recheck_delay(int rounds, std::chrono::milliseconds recheck,
                                        std::chrono::milliseconds recheck_max) {
  auto d = recheck;
  for (int i = 0; i < rounds && d < recheck_max; ++i)
    d *= 2;
  return std::min(d, recheck_max);
}

namespace {

/// photos.download: each photo's Ratio task (the service downloads the image and reads its
/// header) stands for its download: DONE when it downloaded and is an image, ERROR with the
/// service's kind and reason when not (http_404, not_an_image, too_large, ...).
class download_stage final : public photo_stage<v1::PhotoDownloads> {
public:
  using photo_stage::photo_stage;

private:
  void step(v1::PhotoDownloads& s) const override {
    auto [entries, answers] = ask_each(*s.mutable_photos(), images::function::ratio, [](auto& e) {
      return e.status() == v1::PHOTO_STATUS_PENDING;
    });
    for (size_t i = 0; i < entries.size(); ++i) {
      auto& a = answers[i];
      if (a.status() == v1::IMAGE_STATUS_DONE)
        entries[i]->set_status(v1::PHOTO_STATUS_DONE);
      else if (a.status() == v1::IMAGE_STATUS_ERROR)
        record_error(a, *entries[i]);
    }
  }
};

/// photos.ratio_color: Ratio and MainColor of each photo, asked together; DONE when both are
/// known, ERROR when either failed (a facts entry keeps what one of them gave).
class ratio_color_stage final : public photo_stage<v1::PhotoRatioColors> {
public:
  using photo_stage::photo_stage;

private:
  void step(v1::PhotoRatioColors& s) const override {
    std::vector<images::image_ask> asks;
    std::vector<v1::PhotoFacts*> entries;
    for (auto& e : *s.mutable_photos()) {
      images::image_ask ratio, color;
      if (e.status() != v1::PHOTO_STATUS_PENDING || !make_ask(images::function::ratio, e, ratio)
          || !make_ask(images::function::main_color, e, color))
        continue;
      asks.push_back(std::move(ratio));
      asks.push_back(std::move(color));
      entries.push_back(&e);
    }
    auto answers = ask(asks);
    for (size_t i = 0; i < entries.size(); ++i) {
      auto& e = *entries[i];
      auto& ratio = answers[2 * i];
      auto& color = answers[2 * i + 1];
      if (ratio.status() == v1::IMAGE_STATUS_DONE) {
        e.set_width(ratio.ratio().width());
        e.set_height(ratio.ratio().height());
        e.set_ratio(ratio.ratio().ratio());
      }
      if (color.status() == v1::IMAGE_STATUS_DONE)
        e.set_color(color.main_color().hex());
      if (ratio.status() == v1::IMAGE_STATUS_ERROR)
        record_error(ratio, e);
      else if (color.status() == v1::IMAGE_STATUS_ERROR)
        record_error(color, e);
      else if (ratio.status() == v1::IMAGE_STATUS_DONE && color.status() == v1::IMAGE_STATUS_DONE)
        e.set_status(v1::PHOTO_STATUS_DONE);
    }
  }
};

/// photos.orientation: the EXIF orientation from the photo's Ratio result; 1 (or none) is
/// upright: DONE as it is. Any other (6: shown turned 90° clockwise, 3, 8, and the mirrored
/// 2, 4, 5, 7) is rotated upright through Rotate(url, 0) — Rotate applies the EXIF
/// orientation before its angle, and the copy it stores carries none — and the copy's URL
/// recorded. No rule on the ratio alone: a tall photo is as likely meant tall as sideways.
class orientation_stage final : public photo_stage<v1::PhotoOrientations> {
public:
  using photo_stage::photo_stage;

private:
  void step(v1::PhotoOrientations& s) const override {
    // First what is not known yet: the orientation (Ratio).
    auto [entries, answers] = ask_each(*s.mutable_photos(), images::function::ratio, [](auto& e) {
      return e.status() == v1::PHOTO_STATUS_PENDING && e.exif_orientation() == 0;
    });
    for (size_t i = 0; i < entries.size(); ++i) {
      auto& e = *entries[i];
      auto& a = answers[i];
      if (a.status() == v1::IMAGE_STATUS_ERROR) {
        record_error(a, e);
      } else if (a.status() == v1::IMAGE_STATUS_DONE) {
        // 0: a result cached before orientations were read; taken as upright.
        e.set_exif_orientation(std::max(1, a.ratio().orientation()));
        if (e.exif_orientation() == 1) {
          e.set_width(a.ratio().width());
          e.set_height(a.ratio().height());
          e.set_status(v1::PHOTO_STATUS_DONE);
        }
      }
    }
    // Then the rotations of those known to need one.
    auto [turned, rotations] = ask_each(*s.mutable_photos(), images::function::rotate, [](auto& e) {
      return e.status() == v1::PHOTO_STATUS_PENDING && e.exif_orientation() > 1;
    });
    for (size_t i = 0; i < turned.size(); ++i) {
      auto& e = *turned[i];
      auto& a = rotations[i];
      if (a.status() == v1::IMAGE_STATUS_ERROR) {
        record_error(a, e);
      } else if (a.status() == v1::IMAGE_STATUS_DONE) {
        e.set_rotated_url(a.rotated().url());
        e.set_width(a.rotated().width());
        e.set_height(a.rotated().height());
        e.set_status(v1::PHOTO_STATUS_DONE);
      }
    }
  }
};

class pg_asker final : public image_asker {
public:
  pg_asker(std::function<const persistence::shard_placement*()> where,
           std::function<images::task_queue*()> queue)
    : where_(std::move(where)), queue_(std::move(queue)) {}

  std::vector<v1::ImageResponse> ask(const std::vector<images::image_ask>& asks) const override {
    auto* where = where_();
    if (where == nullptr)
      throw unavailable_error("the image service's database is not started yet");
    std::vector<v1::ImageResponse> out(asks.size());
    std::vector<v1::ImageResponse*> ptrs;
    ptrs.reserve(out.size());
    for (auto& o : out)
      ptrs.push_back(&o);
    if (auto err =
          images::ask_images(*where, asks, ptrs, nullptr, nullptr, queue_ ? queue_() : nullptr))
      throw unavailable_error("the image service cannot answer: " + caf::to_string(err));
    return out;
  }

private:
  std::function<const persistence::shard_placement*()> where_;
  std::function<images::task_queue*()> queue_;
};

} // namespace

std::shared_ptr<const image_asker>
make_pg_asker(std::function<const persistence::shard_placement*()> where,
              std::function<images::task_queue*()> queue) {
  return std::make_shared<pg_asker>(std::move(where), std::move(queue));
}

std::shared_ptr<const stage> make_download_stage(photo_stage_options opts) {
  return std::make_shared<download_stage>(std::move(opts));
}

std::shared_ptr<const stage> make_ratio_color_stage(photo_stage_options opts) {
  return std::make_shared<ratio_color_stage>(std::move(opts));
}

std::shared_ptr<const stage> make_orientation_stage(photo_stage_options opts) {
  return std::make_shared<orientation_stage>(std::move(opts));
}

} // namespace gost::photos
