#pragma once
// Outbound HTTP for every actor type that calls out (image downloads, scheduled HTTP actions,
// external services): one blocking request on libcurl within a deadline, its body kept up to
// a size limit, redirects limited and http(s) only, and — unless allowed — no connection to a
// loopback, private, link-local or otherwise internal address, checked on every socket the
// request opens (a public name resolving to 127.0.0.1 and a redirect to 10.0.0.1 are refused
// like a literal). Blocking: call it from a pool's worker or a detached actor.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct sockaddr;

namespace gost::http {

struct request {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  /// The whole request, connection and redirects included.
  std::chrono::milliseconds deadline{10'000};
  /// The body is kept up to this many bytes and the request fails beyond (0: not kept).
  size_t max_body = 0;
  /// Redirects followed (0: a 3xx is the answer).
  int max_redirects = 0;
  /// Connections to internal addresses allowed (tests, trusted internal services).
  bool allow_private = false;
  /// An HTTP proxy every connection goes through ("http://host:port"; seed 004's squid).
  /// The proxy is trusted configuration: its own address is not checked; the URL's host is
  /// checked by its text (the proxy resolves it, and enforces the egress policy).
  std::string proxy;
  /// When set, the body is handed over piece by piece instead of kept (a download to disk),
  /// still bounded by max_body; returning false aborts the request (failure::protocol).
  std::function<bool(const char* data, size_t n)> on_body;
};

enum class failure : uint8_t {
  none = 0,
  bad_url,         ///< not an http(s) URL libcurl takes
  refused_address, ///< an internal address, not allowed
  timeout,         ///< the deadline passed
  too_large,       ///< the body is longer than max_body
  too_many_redirects,
  connect,  ///< name not resolved, connection refused or reset
  protocol, ///< anything else libcurl reports (TLS, a malformed answer)
};

const char* to_string(failure f);

struct response {
  failure error = failure::none;
  std::string message;   ///< why it failed, one line
  long status = 0;       ///< the HTTP status of the last answer
  std::string body;      ///< up to max_body bytes (empty with on_body)
  size_t body_bytes = 0; ///< bytes of the body received
  std::string content_type;
  std::string final_url; ///< after redirects

  bool answered() const { return error == failure::none; }
  bool success() const { return answered() && status >= 200 && status <= 299; }
};

/// Performs `r`. Thread-safe (a handle per call).
response perform(const request& r);

/// Whether `host` (a name or a literal address, IPv6 in brackets or not) is internal by its
/// text alone: localhost names, and literals in loopback, private (10/8, 172.16/12,
/// 192.168/16), link-local, carrier-grade NAT, unspecified, unique-local and IPv4-mapped
/// ranges. A public-looking name can still resolve to one: perform() checks each address.
bool is_private_host(std::string_view host);

/// The same for a resolved socket address (AF_INET or AF_INET6; any other family: true).
bool is_private_address(const sockaddr* a);

} // namespace gost::http
