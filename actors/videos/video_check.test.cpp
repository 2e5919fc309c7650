// `video.check` against a local HTTP server answering 200, 404, 503, 405-to-HEAD and never
// (slow): what a run records in its state and in the offer, when it comes back (a 503 sooner
// than a 200, with back-off), and a changed URL checked at once while the others are not.
// Timeouts are the client's deadline firing on a server that never answers, not sleeps.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "gost/testing/http_server.hpp"
#include "gost/v1/videos.pb.h"
#include "gost/videos/video_check.hpp"

using namespace gost;
using namespace std::chrono_literals;

namespace {

/// Answers by path and records "METHOD path" of every request, with its Range header.
struct video_host {
  std::mutex m;
  std::vector<std::string> seen;
  std::map<std::string, std::string> ranges; ///< path -> Range of its GET
  testing::http_server srv{[this](const testing::http_server::call& c) {
    {
      std::lock_guard<std::mutex> g{m};
      seen.push_back(c.method + " " + c.path);
      if (c.method == "GET" && c.headers.count("range"))
        ranges[c.path] = c.headers.at("range");
    }
    testing::http_server::reply r;
    if (c.path == "/ok.mp4" || c.path == "/ok2.mp4")
      r.status = 200;
    else if (c.path == "/gone.mp4")
      r.status = 404;
    else if (c.path == "/err.mp4")
      r.status = 503;
    else if (c.path == "/nohead.mp4")
      r.status = c.method == "HEAD" ? 405 : 206;
    else if (c.path == "/slow.mp4")
      r.hang = true;
    else
      r.status = 500;
    return r;
  }};

  std::string url(const std::string& path) const { return srv.url(path); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> g{m};
    return seen;
  }
  size_t count(const std::string& what) {
    auto all = requests();
    return static_cast<size_t>(std::count(all.begin(), all.end(), what));
  }
};

videos::video_check_options local_options() {
  videos::video_check_options o;
  o.rules.allow_private = true; // the server is on 127.0.0.1
  o.rules.recheck = 24h;
  o.rules.retry = 1min;
  o.rules.retry_max = 1h;
  o.timeout = 500ms;
  return o;
}

v1::Offer offer_with(const std::vector<std::string>& urls) {
  v1::Offer o;
  o.set_id("o1");
  for (auto& u : urls)
    o.add_videos()->set_url(u);
  return o;
}

struct run {
  stage_result raw;
  v1::VideoChecks state;
};

run process(const stage& s, const v1::Offer& offer, const v1::VideoChecks* state) {
  google::protobuf::Any any;
  if (state)
    any.PackFrom(*state);
  run r{s.process(offer, state ? &any : nullptr), {}};
  REQUIRE(r.raw.state);
  REQUIRE(r.raw.state->UnpackTo(&r.state));
  return r;
}

decision::kind ask(const stage& s, const v1::Offer& offer, const v1::VideoChecks* state) {
  google::protobuf::Any any;
  if (state)
    any.PackFrom(*state);
  return s.should_process(offer, state ? &any : nullptr).what;
}

int64_t ms_of(std::chrono::milliseconds d) {
  return d.count();
}

int64_t ms(stage_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

} // namespace

TEST_CASE("video.check: 200, 404, 503, slow and HEAD refused, recorded with their times") {
  video_host host;
  auto opts = local_options();
  opts.stats = std::make_shared<videos::video_stats>();
  auto stats = opts.stats;
  auto stage = videos::make_video_check_stage(opts);
  auto ok = host.url("/ok.mp4"), gone = host.url("/gone.mp4"), err = host.url("/err.mp4"),
       slow = host.url("/slow.mp4"), nohead = host.url("/nohead.mp4");
  auto offer = offer_with({ok, gone, err, slow, nohead});
  CHECK(stage->interests() == std::vector<std::string>{"videos"});
  CHECK(ask(*stage, offer, nullptr) == decision::kind::process);

  auto before = ms(stage_clock::now());
  auto r = process(*stage, offer, nullptr);
  auto after = ms(stage_clock::now());

  REQUIRE(r.state.videos_size() == 5);
  auto& s = r.state;
  CHECK(s.videos(0).status() == v1::VIDEO_STATUS_AVAILABLE);
  CHECK(s.videos(0).reason() == "http 200");
  CHECK(s.videos(1).status() == v1::VIDEO_STATUS_UNAVAILABLE);
  CHECK(s.videos(1).http_status() == 404);
  CHECK(s.videos(2).status() == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(s.videos(2).http_status() == 503);
  CHECK(s.videos(2).failures() == 1);
  CHECK(s.videos(3).status() == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(s.videos(3).reason().rfind("timeout", 0) == 0);
  CHECK(s.videos(4).status() == v1::VIDEO_STATUS_AVAILABLE);
  CHECK(s.videos(4).http_status() == 206);
  for (auto& e : s.videos()) {
    CHECK(e.checked_at_ms() >= before);
    CHECK(e.checked_at_ms() <= after);
  }
  // HEAD first everywhere; the ranged GET only where HEAD was refused (and after a 503 to HEAD).
  CHECK(host.count("HEAD /ok.mp4") == 1);
  CHECK(host.count("GET /ok.mp4") == 0);
  CHECK(host.count("GET /gone.mp4") == 0);
  CHECK(host.count("GET /nohead.mp4") == 1);
  CHECK(host.ranges["/nohead.mp4"] == "bytes=0-1023");

  // Counted: each check by result and reason class, each request timed, the passing errors
  // (the 503 and the timeout) scheduled sooner.
  using key = std::pair<std::string, std::string>;
  CHECK(stats->checks()
        == std::map<key, uint64_t>{{{"available", "http_2xx"}, 2},
                                   {{"unavailable", "http_4xx"}, 1},
                                   {{"unknown", "http_5xx"}, 1},
                                   {{"unknown", "timeout"}, 1}});
  CHECK(stats->backoff_scheduled.load() == 2);
  CHECK(stats->head.count() == 5);
  CHECK(stats->get.count() == 2); // after the 503 and the 405 to HEAD
  auto text = [&] {
    stats_registry reg;
    videos::add_video_metrics(reg, stats);
    return reg.prometheus_text();
  }();
  CHECK(text.find("gost_video_checks_total{result=\"unknown\",reason=\"timeout\"} 1\n")
        != std::string::npos);
  CHECK(text.find("gost_video_rechecks_backoff_total 2\n") != std::string::npos);
  CHECK(text.find("gost_video_http_seconds_count{method=\"HEAD\"} 5\n") != std::string::npos);

  // The 503 and the timeout come back after `retry`, the verdicts after `recheck`; the timer
  // is the soonest.
  CHECK(s.videos(0).next_check_ms() == s.videos(0).checked_at_ms() + ms_of(24h));
  CHECK(s.videos(1).next_check_ms() == s.videos(1).checked_at_ms() + ms_of(24h));
  CHECK(s.videos(2).next_check_ms() == s.videos(2).checked_at_ms() + ms_of(1min));
  CHECK(s.videos(3).next_check_ms() == s.videos(3).checked_at_ms() + ms_of(1min));
  REQUIRE(r.raw.timer);
  CHECK(ms(*r.raw.timer) == std::min(s.videos(2).next_check_ms(), s.videos(3).next_check_ms()));
  CHECK(ms(*r.raw.timer) < s.videos(0).next_check_ms());

  // The offer shows the results.
  REQUIRE(r.raw.offer);
  auto& shown = *r.raw.offer;
  CHECK(shown.videos(0).available());
  CHECK(shown.videos(0).status() == v1::VIDEO_STATUS_AVAILABLE);
  CHECK(shown.videos(0).checked_at().seconds() == s.videos(0).checked_at_ms() / 1000);
  CHECK_FALSE(shown.videos(1).available());
  CHECK(shown.videos(1).status() == v1::VIDEO_STATUS_UNAVAILABLE);
  CHECK(shown.videos(1).reason() == "http 404");
  CHECK(shown.videos(2).status() == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(shown.videos(4).available());

  // The stage's own write-back is no change to it: nothing is asked again.
  CHECK(ask(*stage, shown, &s) == decision::kind::skip);
  // A client writing the videos without the stage's fields: shown again, nothing fetched.
  auto n = host.requests().size();
  CHECK(ask(*stage, offer, &s) == decision::kind::process);
  auto again = process(*stage, offer, &s);
  CHECK(host.requests().size() == n);
  REQUIRE(again.raw.offer);
  CHECK(again.raw.offer->SerializeAsString() == shown.SerializeAsString());
}

TEST_CASE("video.check: a 503 again backs off; a verdict resets the back-off") {
  video_host host;
  auto stage = videos::make_video_check_stage(local_options());
  auto offer = offer_with({host.url("/err.mp4")});
  auto r = process(*stage, offer, nullptr);
  REQUIRE(r.state.videos_size() == 1);
  CHECK(r.state.videos(0).failures() == 1);

  // Its timer came: due now.
  auto due = r.state;
  due.mutable_videos(0)->set_next_check_ms(0);
  auto second = process(*stage, offer, &due);
  auto& e = second.state.videos(0);
  CHECK(e.failures() == 2);
  CHECK(e.next_check_ms() == e.checked_at_ms() + ms_of(2min));
  CHECK(host.count("HEAD /err.mp4") == 2);
}

TEST_CASE("video.check: a changed URL is checked at once, the others are not asked again") {
  video_host host;
  auto stage = videos::make_video_check_stage(local_options());
  auto first = process(*stage, offer_with({host.url("/ok.mp4"), host.url("/gone.mp4")}), nullptr);
  auto shown = *first.raw.offer;
  CHECK(host.requests().size() == 2);

  // The seller replaces the first video.
  shown.mutable_videos(0)->Clear();
  shown.mutable_videos(0)->set_url(host.url("/ok2.mp4"));
  CHECK(ask(*stage, shown, &first.state) == decision::kind::process);
  auto second = process(*stage, shown, &first.state);
  CHECK(host.requests()
        == std::vector<std::string>{"HEAD /ok.mp4", "HEAD /gone.mp4", "HEAD /ok2.mp4"});
  REQUIRE(second.state.videos_size() == 2);
  CHECK(second.state.videos(0).url() == host.url("/ok2.mp4"));
  CHECK(second.state.videos(0).status() == v1::VIDEO_STATUS_AVAILABLE);
  CHECK(second.state.videos(1).checked_at_ms() == first.state.videos(1).checked_at_ms());
  REQUIRE(second.raw.offer);
  CHECK(second.raw.offer->videos(0).available());

  // All videos removed: the state empties and no timer is left.
  auto none = process(*stage, offer_with({}), &second.state);
  CHECK(none.state.videos_size() == 0);
  CHECK_FALSE(none.raw.timer);
}

TEST_CASE("video.check: private addresses and hosts off the allow-list are never fetched") {
  video_host host;
  auto o = local_options();
  o.rules.allow_private = false;
  auto closed = videos::make_video_check_stage(o);
  auto r = process(*closed, offer_with({host.url("/ok.mp4")}), nullptr);
  CHECK(r.state.videos(0).status() == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(r.state.videos(0).reason().rfind("private_address", 0) == 0);
  CHECK(r.state.videos(0).next_check_ms() == r.state.videos(0).checked_at_ms() + ms_of(24h));

  o = local_options();
  o.rules.allowed_hosts = {"videos.example"};
  auto listed = videos::make_video_check_stage(o);
  auto l = process(*listed, offer_with({host.url("/ok.mp4")}), nullptr);
  CHECK(l.state.videos(0).status() == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(l.state.videos(0).reason().rfind("host_not_allowed: 127.0.0.1", 0) == 0);
  CHECK(host.requests().empty());
}
