#pragma once
// What the three photo stages share: the state is one entry per distinct photo URL of the
// offer (in its order), each PENDING until the image service gave it a final status; a run
// carries over the entries of URLs it already knew, asks the service about the pending ones
// (`step`, the stage's own part) and, while any is pending, comes back by a timer with a
// doubling wait. Entries of photos that left the offer are dropped; a photo list change
// restarts the back-off.

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gost/offers/typed_stage.hpp"
#include "gost/photos/photo_stages.hpp"
#include "gost/v1/images.pb.h"
#include "gost/v1/photos.pb.h"

namespace gost::photos {

/// The distinct photo URLs of `offer`, in their order (empty URLs left out).
std::vector<std::string> photo_urls(const v1::Offer& offer);

template <class State>
class photo_stage : public typed_stage<State> {
public:
  explicit photo_stage(photo_stage_options opts) : opts_(std::move(opts)) {}

  decision should_process(const v1::Offer& offer, const State* state) const override {
    auto urls = photo_urls(offer);
    if (state == nullptr)
      return urls.empty() ? decision::skip() : decision::process();
    // A state with pending entries has its timer queued already: only a new list runs now.
    return same_urls(*state, urls) ? decision::skip() : decision::process();
  }

  typed_result<State> process(const v1::Offer& offer, const State* state) const override {
    auto urls = photo_urls(offer);
    State next;
    if (state != nullptr && same_urls(*state, urls)) {
      next = *state;
    } else {
      for (auto& url : urls) {
        auto* e = next.add_photos();
        if (auto* old = state ? find(*state, url) : nullptr) {
          *e = *old;
        } else {
          e->set_url(url);
          e->set_status(v1::PHOTO_STATUS_PENDING);
        }
      }
    }
    if (count_pending(next) > 0)
      step(next);
    int pending = count_pending(next);
    next.set_pending(pending);
    typed_result<State> r;
    if (pending > 0) {
      r.timer = stage_clock::now() + recheck_delay(next.rounds(), opts_.recheck, opts_.recheck_max);
      next.set_rounds(next.rounds() + 1);
    }
    r.state = std::move(next);
    return r;
  }

  std::vector<std::string> interests() const override { return {"photos"}; }

protected:
  /// Asks the image service about the pending entries of `s` and updates them.
  virtual void step(State& s) const = 0;

  /// The ask of `fn` on `url`; false (and `entry` made an ERROR) when the URL is not one.
  template <class Entry>
  bool make_ask(images::function fn, Entry& entry, images::image_ask& out, double angle = 0) const {
    auto t = images::make_task(fn, entry.url(), angle);
    if (!t) {
      entry.set_status(v1::PHOTO_STATUS_ERROR);
      entry.set_error_kind("bad_url");
      entry.set_error(t.error.message);
      return false;
    }
    out = images::image_ask{*t, opts_.ttl.count(), false, false};
    return true;
  }

  /// An ERROR answer's kind and reason copied into `entry`, made an ERROR.
  template <class Entry>
  static void record_error(const v1::ImageResponse& a, Entry& entry) {
    entry.set_status(v1::PHOTO_STATUS_ERROR);
    entry.set_error_kind(a.error_kind());
    entry.set_error(a.error());
  }

  std::vector<v1::ImageResponse> ask(const std::vector<images::image_ask>& asks) const {
    if (asks.empty())
      return {};
    return opts_.images->ask(asks);
  }

  /// Asks `fn` (with `angle`) about the entries of `photos` that `want` picks, and returns
  /// those entries with their answers, in order (an entry whose URL is not one made an ERROR
  /// and left out).
  template <class Entries, class Want>
  auto ask_each(Entries& photos, images::function fn, Want want, double angle = 0) const {
    using entry = std::remove_reference_t<decltype(*photos.begin())>;
    std::vector<images::image_ask> asks;
    std::vector<entry*> entries;
    for (auto& e : photos) {
      images::image_ask a;
      if (want(e) && make_ask(fn, e, a, angle)) {
        asks.push_back(std::move(a));
        entries.push_back(&e);
      }
    }
    return std::make_pair(std::move(entries), ask(asks));
  }

private:
  static bool same_urls(const State& s, const std::vector<std::string>& urls) {
    if (static_cast<size_t>(s.photos_size()) != urls.size())
      return false;
    for (size_t i = 0; i < urls.size(); ++i)
      if (s.photos(static_cast<int>(i)).url() != urls[i])
        return false;
    return true;
  }

  static auto find(const State& s, const std::string& url) -> decltype(&s.photos(0)) {
    for (auto& e : s.photos())
      if (e.url() == url)
        return &e;
    return nullptr;
  }

  static int count_pending(const State& s) {
    int n = 0;
    for (auto& e : s.photos())
      n += e.status() == v1::PHOTO_STATUS_PENDING ? 1 : 0;
    return n;
  }

  photo_stage_options opts_;
};

} // namespace gost::photos
