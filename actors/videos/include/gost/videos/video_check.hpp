#pragma once
// The built-in `video.check` stage (issue 25 item 3, MISSION G12): checks each video URL of
// an offer over HTTP (HEAD, then a ranged GET when HEAD does not decide) through the one
// outbound client (gost/core/http_client.hpp), records available / unavailable / unknown with
// the time in its state (gost.v1.VideoChecks, proto/gost/v1/videos.proto) and in the offer's
// `videos`, and comes back by a timer: `stages.video.recheck` after a verdict, sooner with
// back-off after a passing error. A changed video list is checked at once (interests).
// Blocking: register it with stage_options::blocking (its pool's threads wait on HTTP).
// Each check is counted (video_stats) and logged by the `offers` logger with the offer, shard,
// host, result and reason: at info when the result changed, at debug when it did not, and a
// passing error at warn, rate-limited.

#include <chrono>
#include <functional>
#include <memory>

#include "gost/core/http_client.hpp"
#include "gost/offers/stage.hpp"
#include "gost/videos/video_rules.hpp"
#include "gost/videos/video_stats.hpp"

namespace gost::videos {

/// The id the stage is registered under (stored in queues and states: never rename).
inline constexpr const char* video_check_stage_id = "video.check";

struct video_check_options {
  rules_options rules;
  /// Each request's deadline (HEAD and GET each), connection included.
  std::chrono::milliseconds timeout{std::chrono::seconds{10}};
  /// Redirects followed; the final URL's host must be allowed too.
  int max_redirects = 3;
  /// The outbound call (tests may count or fake it); http::perform by default.
  std::function<http::response(const http::request&)> fetch = http::perform;
  /// Where the checks are counted (gostd registers it on /metrics); null: not counted.
  std::shared_ptr<video_stats> stats;
};

std::shared_ptr<const stage> make_video_check_stage(video_check_options opts);

} // namespace gost::videos
