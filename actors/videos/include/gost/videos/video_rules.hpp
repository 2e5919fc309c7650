#pragma once
// The rules of the `video.check` stage (issue 25 item 3), plain and unit-tested: which URLs
// may be fetched at all, what an HTTP answer says about a video, and when it is checked
// again. The stage (video_check.hpp) only applies them. docs/video-check.md has the table.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gost/core/http_client.hpp"
#include "gost/v1/offer.pb.h"

namespace gost::videos {

/// What one check found.
struct verdict {
  v1::VideoStatus status = v1::VIDEO_STATUS_UNKNOWN;
  std::string reason; ///< one line: `http 404`, `host_not_allowed: x.example`, `timeout`, ...
  int http_status = 0;
  /// A passing error (5xx, 429, timeout, no connection): checked again sooner, with back-off.
  bool retry_sooner = false;
};

struct rules_options {
  /// Host suffixes that may be fetched (`example.com` allows example.com and *.example.com),
  /// lower-case. Empty: any host (private addresses still refused unless allow_private).
  std::vector<std::string> allowed_hosts;
  /// Loopback, private and link-local addresses may be fetched (tests, a local demo).
  bool allow_private = false;
  /// The regular re-check (`stages.video.recheck`).
  std::chrono::milliseconds recheck{std::chrono::hours{24}};
  /// After a passing error: `retry`, doubled with every such error in a row, at most
  /// `retry_max` and never beyond `recheck` (`stages.video.retry`, `stages.video.retry_max`).
  std::chrono::milliseconds retry{std::chrono::minutes{1}};
  std::chrono::milliseconds retry_max{std::chrono::hours{1}};
};

class video_rules {
public:
  explicit video_rules(rules_options opts);

  /// The lower-cased host of an http(s) URL (IPv6 without brackets); "" when `url` is not an
  /// http(s) URL with a host.
  static std::string host_of(std::string_view url);

  /// Whether `host` is on the allow-list (suffix match on whole labels; empty list: any).
  bool host_allowed(std::string_view host) const;

  /// Before any request: the verdict for a URL that must not be fetched (not http(s): bad_url;
  /// a host not allowed; a private address by its text, unless allowed), or nullopt.
  std::optional<verdict> screen(std::string_view url) const;

  /// Whether the HEAD answer decides; false: a ranged GET (`Range: bytes=0-1023`) is asked and
  /// its answer decides (HEAD refused or not understood: 405, 501, 403, 400, any other status
  /// that is neither 2xx nor 404/410, or a malformed answer).
  static bool head_decides(const http::response& head);

  /// What an answer (HEAD's, or the ranged GET's) says. A GET cut at its size limit after a
  /// 2xx (a server ignoring Range) counts as available.
  verdict judge(const http::response& r) const;

  /// When to check again after `v`; `failures` counts the passing errors in a row, `v`'s
  /// included (1 for the first).
  std::chrono::milliseconds next_delay(const verdict& v, int failures) const;

  const rules_options& options() const noexcept { return opts_; }

  /// A status as metrics and logs name it: available, unavailable, unknown (unchecked:
  /// unchecked).
  static const char* result_name(v1::VideoStatus s);

  /// The class of a verdict's reason, a closed set for a metric label: `http_2xx` ...
  /// `http_5xx` (`http_1xx`, `http_3xx` too) for an answer, else the reason's first word:
  /// timeout, connect, protocol, too_many_redirects, address_refused, bad_url,
  /// host_not_allowed, private_address; `other` for anything else.
  static std::string reason_class(std::string_view reason);

private:
  rules_options opts_;
};

} // namespace gost::videos
