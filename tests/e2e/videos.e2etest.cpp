// The `video.check` stage on a running gostd, videos served by a local HTTP server answering
// 200, 404, 503 and never (slow): each recorded in the stage's state and shown in the offer
// with its time; the 503 and the timeout checked again and again (back-off) while the 200 and
// the 404 are not asked again; a changed URL checked at once. Waits on the node's state, not
// on the clock. /metrics count exactly the checks the server saw, by result and reason class,
// the HTTP requests and the re-checks with back-off; `gostctl videos` names each result and
// its reason; the node logs each check with the offer, shard and host.
#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "gost/testing/http.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/metrics.hpp"
#include "gost/testing/node.hpp"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/state_service.grpc.pb.h"
#include "gost/v1/videos.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::http_server;
using testing::metric_sample;

namespace {

struct video_node {
  testing::temp_db db;
  std::string port_file = testing::temp_path("gostd-videos");
  std::unique_ptr<testing::child_process> proc;
  std::shared_ptr<grpc::Channel> channel;
  std::string addr;
  int http_port = 0;

  video_node() {
    proc = std::make_unique<testing::child_process>(
      GOSTD_PATH,
      testing::node_args(db, port_file,
                         {"--stages.video.enabled=true", "--stages.video.allow_private=true",
                          "--stages.video.recheck=1h", "--stages.video.retry=50ms",
                          "--stages.video.retry_max=200ms", "--stages.video.timeout=300ms",
                          "--stages.video.workers=2"}));
    int grpc_port = 0;
    std::tie(grpc_port, http_port) = testing::read_ports(*proc, port_file);
    addr = "127.0.0.1:" + std::to_string(grpc_port);
    channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  }

  /// The body of the node's /metrics.
  std::string metrics() {
    auto r = testing::http_get(static_cast<uint16_t>(http_port), "/metrics");
    REQUIRE_MESSAGE(testing::http_status(r) == 200, r);
    return r.substr(r.find("\r\n\r\n") + 4);
  }

  /// `gostctl videos ID`: {exit code, output}.
  std::pair<int, std::string> gostctl_videos(const std::string& id) {
    testing::child_process p{GOSTCTL_PATH, {"--addr", addr, "videos", id}};
    int rc = p.wait(60s);
    return {rc, p.output()};
  }

  std::string create(const std::vector<std::string>& urls) {
    auto stub = v1::OfferService::NewStub(channel);
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("video-seller");
    req.mutable_offer()->set_external_id("v1");
    req.mutable_offer()->set_title("Flat with videos");
    for (auto& u : urls)
      req.mutable_offer()->add_videos()->set_url(u);
    v1::CreateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = stub->CreateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp.offer().id();
  }

  void set_videos(const std::string& id, const std::vector<std::string>& urls) {
    auto stub = v1::OfferService::NewStub(channel);
    v1::UpdateOfferRequest req;
    req.mutable_offer()->set_id(id);
    for (auto& u : urls)
      req.mutable_offer()->add_videos()->set_url(u);
    req.mutable_update_mask()->add_paths("videos");
    v1::UpdateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = stub->UpdateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
  }

  v1::Offer get(const std::string& id) {
    auto stub = v1::OfferService::NewStub(channel);
    v1::GetOfferRequest req;
    req.mutable_ref()->set_id(id);
    v1::GetOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = stub->GetOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp.offer();
  }

  /// The stage's state (empty while it stored none).
  v1::VideoChecks state(const std::string& id) {
    auto stub = v1::StateService::NewStub(channel);
    v1::ReadStateRequest req;
    req.set_offer_id(id);
    req.set_stage_id("video.check");
    v1::ReadStateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = stub->Read(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    v1::VideoChecks out;
    if (resp.version() != 0)
      REQUIRE(resp.state().UnpackTo(&out));
    return out;
  }

  /// Waits until the state and the offer satisfy `done`.
  template <class Pred>
  std::pair<v1::VideoChecks, v1::Offer> until(const std::string& id, Pred done) {
    v1::VideoChecks s;
    v1::Offer o;
    bool ok = testing::eventually(30s, [&] {
      s = state(id);
      o = get(id);
      return done(s, o);
    });
    REQUIRE_MESSAGE(ok, s.ShortDebugString() << "\n"
                                             << o.ShortDebugString() << "\n"
                                             << proc->output());
    return {s, o};
  }
};

bool all_checked(const v1::VideoChecks& s, size_t n) {
  return static_cast<size_t>(s.videos_size()) == n
         && std::all_of(s.videos().begin(), s.videos().end(),
                        [](auto& e) { return e.status() != v1::VIDEO_STATUS_UNSPECIFIED; });
}

} // namespace

TEST_CASE("video.check on gostd: 200, 404, 503, slow; errors re-checked sooner; a URL change") {
  std::mutex mx;
  std::vector<std::string> seen;
  http_server srv{[&](const http_server::call& c) -> http_server::reply {
    {
      std::lock_guard lk{mx};
      seen.push_back(c.method + " " + c.path);
    }
    if (c.path == "/ok.mp4" || c.path == "/ok2.mp4")
      return {200, {}};
    if (c.path == "/gone.mp4")
      return {404, {}};
    if (c.path == "/err.mp4")
      return {503, {}};
    return {200, {}, {}, true}; // /slow.mp4: never answers
  }};
  auto times = [&](const std::string& what) {
    std::lock_guard lk{mx};
    return std::count(seen.begin(), seen.end(), what);
  };
  video_node node;
  auto id = node.create(
    {srv.url("/ok.mp4"), srv.url("/gone.mp4"), srv.url("/err.mp4"), srv.url("/slow.mp4")});

  auto [s, offer] = node.until(id, [](auto& st, auto& of) {
    return all_checked(st, 4) && of.videos_size() == 4
           && of.videos(0).status() != v1::VIDEO_STATUS_UNSPECIFIED
           && of.videos(3).status() != v1::VIDEO_STATUS_UNSPECIFIED;
  });
  CHECK(s.videos(0).status() == v1::VIDEO_STATUS_AVAILABLE);
  CHECK(s.videos(1).status() == v1::VIDEO_STATUS_UNAVAILABLE);
  CHECK(s.videos(1).http_status() == 404);
  CHECK(s.videos(2).status() == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(s.videos(2).http_status() == 503);
  CHECK(s.videos(3).status() == v1::VIDEO_STATUS_UNKNOWN);
  CHECK(s.videos(3).reason().rfind("timeout", 0) == 0);
  CHECK(offer.videos(0).available());
  CHECK(offer.videos(0).status() == v1::VIDEO_STATUS_AVAILABLE);
  CHECK(offer.videos(0).checked_at().seconds() > 0);
  CHECK(offer.videos(0).reason() == "http 200");
  CHECK_FALSE(offer.videos(1).available());
  CHECK(offer.videos(1).status() == v1::VIDEO_STATUS_UNAVAILABLE);
  CHECK(offer.videos(2).status() == v1::VIDEO_STATUS_UNKNOWN);
  // A verdict waits an hour; the 503 and the timeout come back after 50 ms, backing off.
  CHECK(s.videos(0).next_check_ms() - s.videos(0).checked_at_ms() == 3'600'000);
  CHECK(s.videos(2).next_check_ms() - s.videos(2).checked_at_ms() <= 200);

  // The 503 is checked again and again (each time HEAD, then the ranged GET) ...
  auto later = node.until(id, [](auto& st, auto&) {
    return all_checked(st, 4) && st.videos(2).failures() >= 3 && st.videos(3).failures() >= 2;
  });
  CHECK(times("HEAD /err.mp4") >= 3);
  CHECK(times("GET /err.mp4") >= 3);
  auto& err = later.first.videos(2);
  CHECK(err.next_check_ms() - err.checked_at_ms() == 200); // 50, 100, 200: capped at retry_max
  {
    // What an operator asks: why is this video not available?
    auto [rc, out] = node.gostctl_videos(id);
    REQUIRE_MESSAGE(rc == 0, out);
    INFO(out);
    CHECK(out.find("offer " + id) != std::string::npos);
    CHECK(out.find(srv.url("/gone.mp4")
                   + "\n  result      unavailable\n  reason      http 404\n"
                     "  http        404\n")
          != std::string::npos);
    CHECK(out.find(srv.url("/ok.mp4") + "\n  result      available\n  reason      http 200\n")
          != std::string::npos);
    CHECK(out.find(srv.url("/err.mp4") + "\n  result      unknown\n  reason      http 503\n")
          != std::string::npos);
    CHECK(out.find(srv.url("/slow.mp4") + "\n  result      unknown\n  reason      timeout: ")
          != std::string::npos);
    CHECK(out.find("passing error(s) in a row: checked again sooner") != std::string::npos);
    CHECK(out.find("next check  ") != std::string::npos);
  }
  // ... while the 200 and the 404 were asked once.
  CHECK(times("HEAD /ok.mp4") == 1);
  CHECK(times("HEAD /gone.mp4") == 1);
  CHECK(later.first.videos(0).checked_at_ms() == s.videos(0).checked_at_ms());

  // The seller replaces the first video: checked at once, the 404 not asked again.
  node.set_videos(id, {srv.url("/ok2.mp4"), srv.url("/gone.mp4")});
  auto [changed, shown] = node.until(id, [&](auto& st, auto& of) {
    return all_checked(st, 2) && st.videos(0).url() == srv.url("/ok2.mp4") && of.videos_size() == 2
           && of.videos(0).available();
  });
  CHECK(changed.videos(0).status() == v1::VIDEO_STATUS_AVAILABLE);
  CHECK(times("HEAD /ok2.mp4") == 1);
  CHECK(times("HEAD /gone.mp4") == 1);
  CHECK(shown.videos(1).status() == v1::VIDEO_STATUS_UNAVAILABLE);

  // The 503 and the slow URL left the offer: nothing is checked any more, so /metrics count
  // exactly the checks the server saw (each starts with a HEAD; the slow one never answers
  // it). A check of the old list in flight during the change finished before the new run.
  auto body = node.metrics();
  INFO(body);
  auto checks = [&](const char* result, const char* reason) {
    return metric_sample(body, std::string{"gost_video_checks_total{result=\""} + result
                                 + "\",reason=\"" + reason + "\"}");
  };
  CHECK(checks("available", "http_2xx") == times("HEAD /ok.mp4") + times("HEAD /ok2.mp4"));
  CHECK(checks("available", "http_2xx") == 2);
  CHECK(checks("unavailable", "http_4xx") == 1);
  CHECK(checks("unknown", "http_5xx") == static_cast<double>(times("HEAD /err.mp4")));
  CHECK(checks("unknown", "timeout") == static_cast<double>(times("HEAD /slow.mp4")));
  CHECK(checks("unknown", "http_5xx") >= 3);
  // Every passing error was scheduled again sooner.
  CHECK(metric_sample(body, "gost_video_rechecks_backoff_total")
        == static_cast<double>(times("HEAD /err.mp4") + times("HEAD /slow.mp4")));
  // Every request timed: the HEADs, and a GET after each 503 to HEAD.
  auto heads = times("HEAD /ok.mp4") + times("HEAD /ok2.mp4") + times("HEAD /gone.mp4")
               + times("HEAD /err.mp4") + times("HEAD /slow.mp4");
  CHECK(metric_sample(body, R"(gost_video_http_seconds_count{method="HEAD"})")
        == static_cast<double>(heads));
  CHECK(metric_sample(body, R"(gost_video_http_seconds_count{method="GET"})")
        == static_cast<double>(times("GET /err.mp4")));
  CHECK(body.find("# TYPE gost_video_checks_total counter") != std::string::npos);
  CHECK(body.find("# TYPE gost_video_http_seconds histogram") != std::string::npos);
  auto [prc, pout] = testing::promtool_check(body);
  CHECK_MESSAGE(prc == 0, "promtool check metrics failed: " << pout);

  // One line per check with the offer, its shard and the host: a new result at info, a
  // passing error at warn.
  auto log = node.proc->output();
  CHECK(log.find("video check offer=" + id + " shard=") != std::string::npos);
  CHECK(log.find("host=127.0.0.1 result=unavailable reason=\"http 404\" http_status=404")
        != std::string::npos);
  CHECK(log.find("result=unknown reason=\"http 503\"") != std::string::npos);
  CHECK(log.find("shard=-") == std::string::npos);
}
