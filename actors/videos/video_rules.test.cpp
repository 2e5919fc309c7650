// The rules of `video.check` without a network: which URLs are fetched, what each answer
// means (the table in docs/video-check.md), when a video is checked again.
#include <doctest/doctest.h>

#include "gost/videos/video_rules.hpp"

using namespace gost;
using namespace std::chrono_literals;

namespace {

http::response answer(long status, http::failure error = http::failure::none) {
  http::response r;
  r.status = status;
  r.error = error;
  r.message = error == http::failure::none ? "" : "what libcurl said";
  return r;
}

videos::video_rules rules_with(std::vector<std::string> hosts = {}, bool allow_private = false) {
  videos::rules_options o;
  o.allowed_hosts = std::move(hosts);
  o.allow_private = allow_private;
  return videos::video_rules{o};
}

} // namespace

TEST_CASE("video rules: the host of a URL") {
  using videos::video_rules;
  CHECK(video_rules::host_of("https://Cdn.Example.com/v.mp4") == "cdn.example.com");
  CHECK(video_rules::host_of("http://user:pw@example.com:8080/x?y#z") == "example.com");
  CHECK(video_rules::host_of("http://[::1]:80/v") == "::1");
  CHECK(video_rules::host_of("ftp://example.com/v") == "");
  CHECK(video_rules::host_of("example.com/v") == "");
  CHECK(video_rules::host_of("http:///v") == "");
}

TEST_CASE("video rules: the allow-list matches whole-label suffixes; empty allows any host") {
  auto r = rules_with({"example.com", ".Video.test"});
  CHECK(r.host_allowed("example.com"));
  CHECK(r.host_allowed("cdn.example.com"));
  CHECK(r.host_allowed("CDN.EXAMPLE.COM."));
  CHECK(r.host_allowed("a.video.test"));
  CHECK_FALSE(r.host_allowed("badexample.com"));
  CHECK_FALSE(r.host_allowed("example.com.evil.net"));
  CHECK(rules_with().host_allowed("anything.net"));
}

TEST_CASE("video rules: a URL that must not be fetched gets its verdict before any request") {
  auto r = rules_with({"example.com"});
  auto bad = r.screen("ftp://example.com/v.mp4");
  REQUIRE(bad);
  CHECK(bad->status == v1::VIDEO_STATUS_UNAVAILABLE);
  CHECK(bad->reason.rfind("bad_url", 0) == 0);

  auto other = r.screen("https://videos.other.net/v.mp4");
  REQUIRE(other);
  CHECK(other->status == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(other->reason.rfind("host_not_allowed: videos.other.net", 0) == 0);
  CHECK_FALSE(other->retry_sooner);

  CHECK_FALSE(r.screen("https://cdn.example.com/v.mp4"));

  auto open = rules_with();
  auto local = open.screen("http://127.0.0.1:8080/v.mp4");
  REQUIRE(local);
  CHECK(local->status == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(local->reason.rfind("private_address", 0) == 0);
  CHECK(open.screen("http://10.1.2.3/v.mp4"));
  CHECK(open.screen("http://localhost/v.mp4"));
  CHECK_FALSE(rules_with({}, true).screen("http://127.0.0.1:8080/v.mp4"));
}

TEST_CASE("video rules: what an answer means") {
  auto r = rules_with();
  struct row {
    long status;
    v1::VideoStatus want;
    bool sooner;
  };
  for (auto [status, want, sooner] : {
         row{200, v1::VIDEO_STATUS_AVAILABLE, false},
         row{206, v1::VIDEO_STATUS_AVAILABLE, false},
         row{404, v1::VIDEO_STATUS_UNAVAILABLE, false},
         row{410, v1::VIDEO_STATUS_UNAVAILABLE, false},
         row{401, v1::VIDEO_STATUS_UNAVAILABLE, false},
         row{403, v1::VIDEO_STATUS_UNAVAILABLE, false},
         row{400, v1::VIDEO_STATUS_UNAVAILABLE, false},
         row{429, v1::VIDEO_STATUS_UNKNOWN, true},
         row{408, v1::VIDEO_STATUS_UNKNOWN, true},
         row{500, v1::VIDEO_STATUS_UNKNOWN, true},
         row{503, v1::VIDEO_STATUS_UNKNOWN, true},
         row{302, v1::VIDEO_STATUS_UNKNOWN, true},
       }) {
    CAPTURE(status);
    auto v = r.judge(answer(status));
    CHECK(v.status == want);
    CHECK(v.retry_sooner == sooner);
    CHECK(v.http_status == status);
    CHECK(v.reason.rfind("http " + std::to_string(status), 0) == 0);
  }
  auto timeout = r.judge(answer(0, http::failure::timeout));
  CHECK(timeout.status == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(timeout.retry_sooner);
  CHECK(timeout.reason.rfind("timeout", 0) == 0);
  CHECK(r.judge(answer(0, http::failure::connect)).retry_sooner);
  auto refused = r.judge(answer(0, http::failure::refused_address));
  CHECK(refused.status == v1::VIDEO_STATUS_UNKNOWN);
  CHECK_FALSE(refused.retry_sooner);
  // A GET cut at its size limit after a 200: the server ignored Range and sent the video.
  CHECK(r.judge(answer(200, http::failure::too_large)).status == v1::VIDEO_STATUS_AVAILABLE);
  CHECK(r.judge(answer(0, http::failure::too_large)).status == v1::VIDEO_STATUS_UNKNOWN);
}

TEST_CASE("video rules: a redirect off the allow-list gives no verdict") {
  auto r = rules_with({"example.com"});
  auto a = answer(200);
  a.final_url = "https://cdn.example.com/v.mp4";
  CHECK(r.judge(a).status == v1::VIDEO_STATUS_AVAILABLE);
  a.final_url = "https://elsewhere.net/v.mp4";
  auto v = r.judge(a);
  CHECK(v.status == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(v.reason.find("redirected to elsewhere.net") != std::string::npos);
}

TEST_CASE("video rules: HEAD decides 2xx, 404, 410 and failures to connect; else a GET") {
  using videos::video_rules;
  CHECK(video_rules::head_decides(answer(200)));
  CHECK(video_rules::head_decides(answer(404)));
  CHECK(video_rules::head_decides(answer(410)));
  CHECK(video_rules::head_decides(answer(0, http::failure::timeout)));
  CHECK(video_rules::head_decides(answer(0, http::failure::connect)));
  CHECK_FALSE(video_rules::head_decides(answer(405)));
  CHECK_FALSE(video_rules::head_decides(answer(501)));
  CHECK_FALSE(video_rules::head_decides(answer(403)));
  CHECK_FALSE(video_rules::head_decides(answer(500)));
  CHECK_FALSE(video_rules::head_decides(answer(0, http::failure::protocol)));
}

TEST_CASE("video rules: a verdict waits `recheck`; passing errors back off from `retry`, capped") {
  videos::rules_options o;
  o.recheck = 24h;
  o.retry = 1min;
  o.retry_max = 10min;
  videos::video_rules r{o};
  videos::verdict ok{v1::VIDEO_STATUS_AVAILABLE, "http 200", 200, false};
  videos::verdict gone{v1::VIDEO_STATUS_UNAVAILABLE, "http 404", 404, false};
  videos::verdict err{v1::VIDEO_STATUS_UNKNOWN, "http 503", 503, true};
  CHECK(r.next_delay(ok, 0) == 24h);
  CHECK(r.next_delay(gone, 0) == 24h);
  CHECK(r.next_delay(err, 1) == 1min);
  CHECK(r.next_delay(err, 2) == 2min);
  CHECK(r.next_delay(err, 3) == 4min);
  CHECK(r.next_delay(err, 4) == 8min);
  CHECK(r.next_delay(err, 5) == 10min);
  CHECK(r.next_delay(err, 1000) == 10min);

  o.recheck = 5min; // the back-off never waits longer than the regular re-check
  CHECK(videos::video_rules{o}.next_delay(err, 1000) == 5min);
}

TEST_CASE("video rules: a verdict's reason class and result name, as the metrics label them") {
  using videos::video_rules;
  auto r = rules_with({"example.com"});
  auto cls = [&](const http::response& a) { return video_rules::reason_class(r.judge(a).reason); };
  CHECK(cls(answer(200)) == "http_2xx");
  CHECK(cls(answer(206)) == "http_2xx");
  CHECK(cls(answer(404)) == "http_4xx");
  CHECK(cls(answer(403)) == "http_4xx"); // "http 403: not public"
  CHECK(cls(answer(503)) == "http_5xx");
  CHECK(cls(answer(0, http::failure::timeout)) == "timeout");
  CHECK(cls(answer(0, http::failure::connect)) == "connect");
  CHECK(cls(answer(0, http::failure::protocol)) == "protocol");
  CHECK(cls(answer(0, http::failure::too_many_redirects)) == "too_many_redirects");
  CHECK(cls(answer(0, http::failure::refused_address)) == "address_refused");
  CHECK(video_rules::reason_class(r.screen("ftp://example.com/a")->reason) == "bad_url");
  CHECK(video_rules::reason_class(r.screen("https://other.org/a")->reason) == "host_not_allowed");
  CHECK(video_rules::reason_class(rules_with().screen("http://127.0.0.1/a")->reason)
        == "private_address");
  CHECK(video_rules::reason_class("http 9") == "other");
  CHECK(video_rules::reason_class("") == "other");
  CHECK(std::string{video_rules::result_name(v1::VIDEO_STATUS_AVAILABLE)} == "available");
  CHECK(std::string{video_rules::result_name(v1::VIDEO_STATUS_UNAVAILABLE)} == "unavailable");
  CHECK(std::string{video_rules::result_name(v1::VIDEO_STATUS_UNKNOWN)} == "unknown");
}
