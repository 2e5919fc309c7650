#include "gost/videos/video_rules.hpp"

#include <algorithm>
#include <cctype>

#include "gost/core/backoff.hpp"

namespace gost::videos {

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

verdict make(v1::VideoStatus status, std::string reason, int http_status = 0,
             bool retry_sooner = false) {
  return verdict{status, std::move(reason), http_status, retry_sooner};
}

} // namespace

video_rules::video_rules(rules_options opts) : opts_(std::move(opts)) {
  for (auto& h : opts_.allowed_hosts) {
    h = lower(h);
    while (!h.empty() && h.front() == '.')
      h.erase(0, 1);
  }
}

std::string video_rules::host_of(std::string_view url) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return {};
  auto scheme = lower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https")
    return {};
  auto rest = url.substr(sep + 3);
  auto authority = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = authority.rfind('@'); at != std::string_view::npos)
    authority = authority.substr(at + 1);
  std::string_view host;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos)
      return {};
    host = authority.substr(1, close - 1);
  } else {
    host = authority.substr(0, authority.find(':'));
  }
  return lower(host);
}

bool video_rules::host_allowed(std::string_view host) const {
  if (opts_.allowed_hosts.empty())
    return true;
  auto h = lower(host);
  while (!h.empty() && h.back() == '.')
    h.pop_back();
  for (auto& suffix : opts_.allowed_hosts) {
    if (h == suffix)
      return true;
    if (h.size() > suffix.size() && h.compare(h.size() - suffix.size(), suffix.size(), suffix) == 0
        && h[h.size() - suffix.size() - 1] == '.')
      return true;
  }
  return false;
}

std::optional<verdict> video_rules::screen(std::string_view url) const {
  auto host = host_of(url);
  if (host.empty())
    return make(v1::VIDEO_STATUS_UNAVAILABLE, "bad_url: not an http(s) URL with a host");
  if (!host_allowed(host))
    return make(v1::VIDEO_STATUS_UNKNOWN,
                "host_not_allowed: " + host + " is not in stages.video.allowed_hosts");
  if (!opts_.allow_private && http::is_private_host(host))
    return make(v1::VIDEO_STATUS_UNKNOWN,
                "private_address: " + host + " (allowed only with stages.video.allow_private)");
  return std::nullopt;
}

bool video_rules::head_decides(const http::response& head) {
  switch (head.error) {
    case http::failure::none: break;
    case http::failure::protocol:
    case http::failure::too_large: return false; // a malformed answer: GET may fare better
    default: return true; // timeout, no connection, refused: a GET would fare the same
  }
  auto s = head.status;
  return (s >= 200 && s <= 299) || s == 404 || s == 410;
}

verdict video_rules::judge(const http::response& r) const {
  int status = static_cast<int>(r.status);
  bool got_2xx = status >= 200 && status <= 299;
  switch (r.error) {
    case http::failure::none: break;
    case http::failure::too_large:
      if (got_2xx)
        break; // the server ignored Range and started sending the video
      return make(v1::VIDEO_STATUS_UNKNOWN, "protocol: " + r.message, status, true);
    case http::failure::timeout:
      return make(v1::VIDEO_STATUS_UNKNOWN, "timeout: " + r.message, status, true);
    case http::failure::connect:
      return make(v1::VIDEO_STATUS_UNKNOWN, "connect: " + r.message, status, true);
    case http::failure::protocol:
      return make(v1::VIDEO_STATUS_UNKNOWN, "protocol: " + r.message, status, true);
    case http::failure::too_many_redirects:
      return make(v1::VIDEO_STATUS_UNKNOWN, "too_many_redirects: " + r.message, status);
    case http::failure::refused_address:
      return make(v1::VIDEO_STATUS_UNKNOWN, "address_refused: " + r.message, status);
    case http::failure::bad_url:
      return make(v1::VIDEO_STATUS_UNAVAILABLE, "bad_url: " + r.message, status);
  }
  if (!r.final_url.empty()) {
    auto host = host_of(r.final_url);
    if (!host_allowed(host))
      return make(v1::VIDEO_STATUS_UNKNOWN,
                  "host_not_allowed: redirected to " + host + ", not in stages.video.allowed_hosts",
                  status);
  }
  auto http = "http " + std::to_string(status);
  if (got_2xx)
    return make(v1::VIDEO_STATUS_AVAILABLE, http, status);
  if (status == 408 || status == 425 || status == 429 || status >= 500)
    return make(v1::VIDEO_STATUS_UNKNOWN, http, status, true);
  if (status == 401 || status == 403)
    return make(v1::VIDEO_STATUS_UNAVAILABLE, http + ": not public", status);
  if (status >= 400)
    return make(v1::VIDEO_STATUS_UNAVAILABLE, http, status);
  // 1xx, or a 3xx left unfollowed (no Location): no verdict.
  return make(v1::VIDEO_STATUS_UNKNOWN, http, status, true);
}

std::chrono::milliseconds video_rules::next_delay(const verdict& v, int failures) const {
  if (!v.retry_sooner)
    return opts_.recheck;
  auto cap = std::min(opts_.retry_max, opts_.recheck);
  backoff b{std::min(opts_.retry, cap), cap};
  auto d = b.next();
  for (int i = 1; i < failures && d < cap; ++i)
    d = b.next();
  return d;
}

const char* video_rules::result_name(v1::VideoStatus s) {
  switch (s) {
    case v1::VIDEO_STATUS_AVAILABLE: return "available";
    case v1::VIDEO_STATUS_UNAVAILABLE: return "unavailable";
    case v1::VIDEO_STATUS_UNKNOWN: return "unknown";
    default: return "unchecked";
  }
}

std::string video_rules::reason_class(std::string_view reason) {
  if (reason.rfind("http ", 0) == 0 && reason.size() >= 8 && reason[5] >= '1' && reason[5] <= '5')
    return std::string{"http_"} + reason[5] + "xx";
  static const char* const words[] = {
    "timeout",         "connect", "protocol",         "too_many_redirects",
    "address_refused", "bad_url", "host_not_allowed", "private_address"};
  auto word = reason.substr(0, reason.find(':'));
  for (auto* w : words)
    if (word == w)
      return w;
  return "other";
}

} // namespace gost::videos
