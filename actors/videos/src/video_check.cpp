#include "gost/videos/video_check.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "gost/core/log.hpp"
#include "gost/core/rate_limited_log.hpp"
#include "gost/offers/typed_stage.hpp"
#include "gost/v1/videos.pb.h"

namespace gost::videos {

namespace {

const auto lg = gost::log::get("offers");

int64_t to_ms(stage_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

/// The distinct video URLs of `offer`, in their order (empty URLs left out).
std::vector<std::string> video_urls(const v1::Offer& offer) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& v : offer.videos())
    if (!v.url().empty() && seen.insert(v.url()).second)
      out.push_back(v.url());
  return out;
}

const v1::VideoCheck* find(const v1::VideoChecks& s, const std::string& url) {
  for (auto& e : s.videos())
    if (e.url() == url)
      return &e;
  return nullptr;
}

bool same_urls(const v1::VideoChecks& s, const std::vector<std::string>& urls) {
  if (static_cast<size_t>(s.videos_size()) != urls.size())
    return false;
  for (size_t i = 0; i < urls.size(); ++i)
    if (s.videos(static_cast<int>(i)).url() != urls[i])
      return false;
  return true;
}

/// `v` as the offer shows the check `e` (unchecked: the fields left empty).
void show(const v1::VideoCheck& e, v1::Video& v) {
  v.set_status(e.status());
  v.set_available(e.status() == v1::VIDEO_STATUS_AVAILABLE);
  v.set_reason(e.reason());
  if (e.checked_at_ms() > 0) {
    v.mutable_checked_at()->set_seconds(e.checked_at_ms() / 1000);
    v.mutable_checked_at()->set_nanos(static_cast<int32_t>(e.checked_at_ms() % 1000) * 1'000'000);
  } else {
    v.clear_checked_at();
  }
}

bool shows(const v1::VideoCheck& e, const v1::Video& v) {
  v1::Video want = v;
  show(e, want);
  return want.SerializeAsString() == v.SerializeAsString();
}

class video_check_stage final : public typed_stage<v1::VideoChecks> {
public:
  explicit video_check_stage(video_check_options opts)
    : opts_(std::move(opts)), rules_(opts_.rules), errors_log_(lg, 10, std::chrono::seconds{10}) {}

  decision should_process(const v1::Offer& offer, const v1::VideoChecks* state) const override {
    auto urls = video_urls(offer);
    if (state == nullptr)
      return urls.empty() ? decision::skip() : decision::process();
    if (!same_urls(*state, urls))
      return decision::process(); // a new or changed URL: checked at once
    // The same list: its timer is queued. Run only to show the results again when the offer's
    // videos lost them (a client wrote them without the stage's fields).
    for (auto& v : offer.videos())
      if (auto* e = find(*state, v.url()); e != nullptr && !shows(*e, v))
        return decision::process();
    return decision::skip();
  }

  typed_result<v1::VideoChecks> process(const v1::Offer& offer,
                                        const v1::VideoChecks* state) const override {
    auto now = to_ms(stage_clock::now());
    v1::VideoChecks next;
    for (auto& url : video_urls(offer)) {
      auto* e = next.add_videos();
      if (auto* old = state ? find(*state, url) : nullptr)
        *e = *old;
      else
        e->set_url(url);
      if (e->status() == v1::VIDEO_STATUS_UNSPECIFIED || e->next_check_ms() <= now)
        check(offer, *e, now);
    }

    typed_result<v1::VideoChecks> r;
    auto due = std::numeric_limits<int64_t>::max();
    for (auto& e : next.videos())
      due = std::min(due, e.next_check_ms());
    if (next.videos_size() > 0)
      r.timer = stage_clock::time_point{std::chrono::milliseconds{due}};

    v1::Offer shown = offer;
    bool changed = false;
    for (auto& v : *shown.mutable_videos())
      if (auto* e = find(next, v.url()); e != nullptr && !shows(*e, v)) {
        show(*e, v);
        changed = true;
      }
    if (changed)
      r.offer = std::move(shown);
    r.state = std::move(next);
    return r;
  }

  std::vector<std::string> interests() const override { return {"videos"}; }

private:
  /// Checks `e`'s URL now: HEAD, then the ranged GET when HEAD does not decide.
  void check(const v1::Offer& offer, v1::VideoCheck& e, int64_t now) const {
    auto v = rules_.screen(e.url());
    if (!v) {
      http::request req;
      req.method = "HEAD";
      req.url = e.url();
      req.deadline = opts_.timeout;
      req.max_redirects = opts_.max_redirects;
      req.allow_private = opts_.rules.allow_private;
      auto head = fetch(req, opts_.stats ? &opts_.stats->head : nullptr);
      if (video_rules::head_decides(head)) {
        v = rules_.judge(head);
      } else {
        req.method = "GET";
        req.headers.emplace_back("Range", "bytes=0-1023");
        req.max_body = 1024; // a server ignoring Range is cut after its first KiB
        v = rules_.judge(fetch(req, opts_.stats ? &opts_.stats->get : nullptr));
      }
    }
    auto before = e.status();
    e.set_failures(v->retry_sooner ? e.failures() + 1 : 0);
    e.set_status(v->status);
    e.set_reason(v->reason);
    e.set_http_status(v->http_status);
    e.set_checked_at_ms(now);
    auto delay = rules_.next_delay(*v, e.failures());
    e.set_next_check_ms(now + delay.count());
    record(offer, e, *v, before, delay);
  }

  http::response fetch(const http::request& req, latency_histogram* took) const {
    auto start = std::chrono::steady_clock::now();
    auto r = opts_.fetch(req);
    if (took != nullptr)
      took->record(std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - start));
    return r;
  }

  /// Counts the check and logs it: a passing error at warn (rate-limited), a changed result at
  /// info, the same result again at debug.
  void record(const v1::Offer& offer, const v1::VideoCheck& e, const verdict& v,
              v1::VideoStatus before, std::chrono::milliseconds next) const {
    auto result = video_rules::result_name(v.status);
    if (opts_.stats) {
      opts_.stats->checked(result, video_rules::reason_class(v.reason));
      if (v.retry_sooner)
        opts_.stats->backoff_scheduled.fetch_add(1, std::memory_order_relaxed);
    }
    auto* run = current_run();
    auto line =
      fmt::format("video check offer={} shard={} host={} result={} reason=\"{}\" http_status={} "
                  "next_check_in_ms={} failures={} url=\"{}\"",
                  offer.id(), run ? std::to_string(run->shard) : std::string{"-"},
                  video_rules::host_of(e.url()), result, v.reason, v.http_status, next.count(),
                  e.failures(), e.url());
    if (v.retry_sooner)
      errors_log_.warn(line);
    else if (before != v.status)
      lg->info("{} was={}", line, video_rules::result_name(before));
    else
      lg->debug("{}", line);
  }

  video_check_options opts_;
  video_rules rules_;
  mutable log::rate_limited errors_log_;
};

} // namespace

std::shared_ptr<const stage> make_video_check_stage(video_check_options opts) {
  return std::make_shared<video_check_stage>(std::move(opts));
}

} // namespace gost::videos
