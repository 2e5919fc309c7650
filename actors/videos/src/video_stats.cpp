#include "gost/videos/video_stats.hpp"

namespace gost::videos {

void add_video_metrics(stats_registry& reg, std::shared_ptr<const video_stats> stats) {
  reg.add([stats](metric_families& out) {
    const char* name = "gost_video_checks_total";
    const char* help = "Video URLs checked by video.check, by result (available, unavailable, "
                       "unknown) and reason class (http_2xx .. http_5xx, timeout, connect, "
                       "protocol, too_many_redirects, address_refused, bad_url, "
                       "host_not_allowed, private_address).";
    out.declare(name, metric_type::counter, help);
    for (auto& [k, v] : stats->checks())
      out.add(name, stat_kind::counter, help, {{"result", k.first}, {"reason", k.second}},
              static_cast<int64_t>(v));
  });
  const char* took = "Time of video.check's HTTP requests (connection and redirects included), "
                     "by method: HEAD, then a ranged GET when HEAD does not decide.";
  reg.add_histogram("gost_video_http_seconds", took, member_of(stats, stats->head),
                    {{"method", "HEAD"}});
  reg.add_histogram("gost_video_http_seconds", took, member_of(stats, stats->get),
                    {{"method", "GET"}});
  reg.add_stats("gost_video_", stats);
}

} // namespace gost::videos
